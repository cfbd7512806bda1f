//! A small XDR (RFC 4506) cursor: a read past the
//! end "poisons" it (`ok` false) and returns zeros; decoders check once.

pub struct Xdr<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
    pub end: usize,
    pub ok: bool,
}

impl<'a> Xdr<'a> {
    pub fn new(buf: &'a [u8], pos: usize) -> Xdr<'a> {
        Xdr {
            buf,
            pos,
            end: buf.len(),
            ok: true,
        }
    }

    /// Advance by n; the old position, or None (and poison) if short.
    #[inline]
    fn take(&mut self, n: u64) -> Option<usize> {
        let p = self.pos;
        if !self.ok || (p as u64) + n > self.end as u64 {
            self.ok = false;
            return None;
        }
        self.pos = p + n as usize;
        Some(p)
    }

    #[inline]
    pub fn u32(&mut self) -> u32 {
        match self.take(4) {
            // (one bounds check, one load: byte by byte, each byte's check
            // kept the four loads apart)
            Some(p) => word(&self.buf[p..p + 4]),
            None => 0,
        }
    }

    pub fn u64(&mut self) -> u64 {
        match self.take(8) {
            Some(p) => {
                let mut a = [0u8; 8];
                a.copy_from_slice(&self.buf[p..p + 8]);
                u64::from_be_bytes(a)
            }
            None => 0,
        }
    }

    pub fn boolean(&mut self) -> bool {
        self.u32() != 0
    }

    /// Fixed-length opaque of n bytes (padded to 4).
    pub fn fixed(&mut self, n: u64) -> &'a [u8] {
        match self.take((n + 3) & !3) {
            Some(p) => &self.buf[p..p + n as usize],
            None => &[],
        }
    }

    /// Variable-length opaque; a length above limit poisons the cursor.
    pub fn opaque(&mut self, limit: u64) -> &'a [u8] {
        let n = self.u32() as u64;
        if n > limit {
            self.ok = false;
            return &[];
        }
        self.fixed(n)
    }

    pub fn skip(&mut self, n: u64) {
        self.take((n + 3) & !3);
    }

    /// Step over a variable-length opaque (no limit but the data).
    pub fn skip_opaque(&mut self, limit: u64) {
        let n = self.u32() as u64;
        if n > limit {
            self.ok = false;
            return;
        }
        self.skip(n);
    }
}

/// A big-endian word of 4 bytes.
#[inline(always)]
fn word(b: &[u8]) -> u32 {
    u32::from_be_bytes(b.try_into().unwrap_or([0; 4]))
}

/// The default limit of an opaque / string length (1 GiB: no limit in practice).
pub const NO_LIMIT: u64 = 1 << 30;
