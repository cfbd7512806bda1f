//! Capture files -> raw frames (mirrors `nfstrace/parsers/capture.py`).
//!
//! libpcap (both byte orders, micro- and nanosecond timestamps) and pcapng
//! (several sections and interfaces, per-interface link type, timestamp
//! resolution and offset, interface statistics with drop counts), read in
//! bounded chunks from any `Read` (a plain file, or a decompressing reader
//! handed in by Python), and several files merged in time order.

use std::collections::BTreeSet;
use std::io::Read;

/// Bytes read at a time.
pub const CHUNK: usize = 4 * 1024 * 1024;
/// A frame or block claiming more than this is damage, not data.
pub const MAX_FRAME: u64 = 256 * 1024 * 1024;

const PCAP_MAGIC_US: u32 = 0xA1B2_C3D4;
const PCAP_MAGIC_NS: u32 = 0xA1B2_3C4D;
const PCAPNG_SHB: u32 = 0x0A0D_0D0A;
const PCAPNG_IDB: u32 = 0x0000_0001;
const PCAPNG_PB: u32 = 0x0000_0002;
const PCAPNG_SPB: u32 = 0x0000_0003;
const PCAPNG_ISB: u32 = 0x0000_0005;
const PCAPNG_EPB: u32 = 0x0000_0006;
const PCAPNG_BOM: u32 = 0x1A2B_3C4D;
const OPT_ENDOFOPT: u16 = 0;
const IF_TSRESOL: u16 = 9;
const IF_TSOFFSET: u16 = 14;
const ISB_IFDROP: u16 = 5;
const ISB_OSDROP: u16 = 7;

/// What the reader learned about one file (capture.py's CaptureInfo).
#[derive(Default, Debug, Clone)]
pub struct FileInfo {
    pub format: &'static str,
    pub linktypes: BTreeSet<u32>,
    pub snaplen: u64,
    pub frames: u64,
    pub bytes: u64,
    pub truncated_frames: u64,
    pub interface_drops: u64,
    pub warnings: Vec<String>,
}

/// One frame: its bytes are `Reader::data(frame)` until the reader moves on.
#[derive(Clone, Copy, Debug)]
pub struct Frame {
    pub ts: i64,
    pub linktype: u32,
    pub start: usize,
    pub len: usize,
    pub origlen: i64,
}

#[derive(Clone, Copy)]
struct Interface {
    linktype: u32,
    snaplen: u32,
    ts_mul: i128,
    ts_div: i128,
    ts_offset_ns: i128,
}

#[derive(Clone, Copy, PartialEq)]
enum Format {
    Pcap {
        big: bool,
        nanos: bool,
        linktype: u32,
    },
    Pcapng,
}

/// A chunked reader over one capture.
pub struct Reader {
    src: Box<dyn Read + Send>,
    buf: Vec<u8>,
    pos: usize,
    consumed: u64,
    eof: bool,
    format: Format,
    // pcapng state
    big: bool,
    ifaces: Vec<Interface>,
    drops: std::collections::BTreeMap<u64, u64>,
    done: bool,
    pub info: FileInfo,
}

fn u16_at(b: &[u8], at: usize, big: bool) -> u16 {
    let a = [b[at], b[at + 1]];
    if big {
        u16::from_be_bytes(a)
    } else {
        u16::from_le_bytes(a)
    }
}

fn u32_at(b: &[u8], at: usize, big: bool) -> u32 {
    let a = [b[at], b[at + 1], b[at + 2], b[at + 3]];
    if big {
        u32::from_be_bytes(a)
    } else {
        u32::from_le_bytes(a)
    }
}

fn u64_at(b: &[u8], at: usize, big: bool) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    if big {
        u64::from_be_bytes(a)
    } else {
        u64::from_le_bytes(a)
    }
}

/// pcapng options of a block body: (code, value) pairs up to opt_endofopt.
fn options(data: &[u8], big: bool) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos + 4 <= data.len() {
        let code = u16_at(data, pos, big);
        let length = u16_at(data, pos + 2, big) as usize;
        if code == OPT_ENDOFOPT {
            break;
        }
        let start = pos + 4;
        let end = (start + length).min(data.len());
        out.push((code, &data[start..end]));
        pos += 4 + ((length + 3) & !3);
    }
    out
}

fn interface(body: &[u8], big: bool) -> Option<Interface> {
    if body.len() < 8 {
        return None;
    }
    let mut iface = Interface {
        linktype: u16_at(body, 0, big) as u32,
        snaplen: u32_at(body, 4, big),
        ts_mul: 1000,
        ts_div: 1,
        ts_offset_ns: 0,
    };
    for (code, value) in options(&body[8..], big) {
        if code == IF_TSRESOL && !value.is_empty() {
            let v = value[0];
            if v & 0x80 != 0 {
                iface.ts_mul = 1_000_000_000;
                iface.ts_div = 1i128 << (v & 0x7F);
            } else if v <= 9 {
                iface.ts_mul = 10i128.pow(9 - v as u32);
                iface.ts_div = 1;
            } else {
                iface.ts_mul = 1;
                iface.ts_div = 10i128.pow((v as u32 - 9).min(30));
            }
        } else if code == IF_TSOFFSET && value.len() >= 8 {
            iface.ts_offset_ns = (u64_at(value, 0, big) as i64 as i128) * 1_000_000_000;
        }
    }
    Some(iface)
}

fn ticks_to_ns(iface: &Interface, ticks: u64) -> i64 {
    // Python's integers do not overflow; clamp absurd values into int64.
    let ns = (ticks as i128) * iface.ts_mul / iface.ts_div + iface.ts_offset_ns;
    ns.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

impl Reader {
    /// Open a capture on `src`; Err(message) when it is not a pcap/pcapng file.
    pub fn open(src: Box<dyn Read + Send>) -> Result<Reader, String> {
        let mut r = Reader {
            src,
            buf: Vec::new(),
            pos: 0,
            consumed: 0,
            eof: false,
            format: Format::Pcapng,
            big: false,
            ifaces: Vec::new(),
            drops: Default::default(),
            done: false,
            info: FileInfo::default(),
        };
        if !r.fill(4) {
            return Err(if r.buf.is_empty() {
                "empty file".into()
            } else {
                "too short to be a capture file".into()
            });
        }
        let magic_le = u32_at(&r.buf, 0, false);
        let magic_be = u32_at(&r.buf, 0, true);
        if magic_le == PCAP_MAGIC_US || magic_le == PCAP_MAGIC_NS {
            r.start_pcap(false, magic_le == PCAP_MAGIC_NS)?;
        } else if magic_be == PCAP_MAGIC_US || magic_be == PCAP_MAGIC_NS {
            r.start_pcap(true, magic_be == PCAP_MAGIC_NS)?;
        } else if magic_le == PCAPNG_SHB {
            r.info.format = "pcapng";
            r.format = Format::Pcapng;
        } else {
            return Err("not a pcap or pcapng capture file".into());
        }
        Ok(r)
    }

    fn start_pcap(&mut self, big: bool, nanos: bool) -> Result<(), String> {
        self.info.format = "pcap";
        if !self.fill(24) {
            return Err("pcap file header cut short".into());
        }
        let p = self.pos;
        let snaplen = u32_at(&self.buf, p + 16, big);
        // The upper bits of the link-type field may carry FCS length flags.
        let linktype = u32_at(&self.buf, p + 20, big) & 0x0FFF_FFFF;
        self.info.snaplen = snaplen as u64;
        self.info.linktypes.insert(linktype);
        self.pos += 24;
        self.format = Format::Pcap {
            big,
            nanos,
            linktype,
        };
        Ok(())
    }

    /// Make n bytes available at self.pos; false at the end of the data.
    fn fill(&mut self, n: usize) -> bool {
        let have = self.buf.len() - self.pos;
        if have >= n {
            return true;
        }
        // Drop what was consumed; read on until n bytes are there.
        self.consumed += self.pos as u64;
        self.buf.drain(..self.pos);
        self.pos = 0;
        while self.buf.len() < n && !self.eof {
            let want = CHUNK.max(n - self.buf.len());
            let old = self.buf.len();
            self.buf.resize(old + want, 0);
            let mut got = 0usize;
            // Read the whole request (a short read is not the end).
            while got < want {
                match self.src.read(&mut self.buf[old + got..]) {
                    Ok(0) => break,
                    Ok(k) => got += k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        self.info.warnings.push(format!("read stopped: {e}"));
                        self.eof = true;
                        break;
                    }
                }
            }
            self.buf.truncate(old + got);
            if got == 0 {
                self.eof = true;
            }
        }
        self.buf.len() >= n
    }

    /// The bytes of a frame returned by `next`.
    pub fn data(&self, f: &Frame) -> &[u8] {
        &self.buf[f.start..f.start + f.len]
    }

    /// File bytes consumed so far (the parse position).
    pub fn position(&self) -> u64 {
        self.consumed + self.pos as u64
    }

    /// The next frame in file order, None at the end (warnings in self.info).
    pub fn next_frame(&mut self) -> Option<Frame> {
        if self.done {
            return None;
        }
        let f = match self.format {
            Format::Pcap {
                big,
                nanos,
                linktype,
            } => self.next_pcap(big, nanos, linktype),
            Format::Pcapng => self.next_pcapng(),
        };
        if f.is_none() {
            self.done = true;
            self.info.bytes = self.position();
        }
        f
    }

    fn next_pcap(&mut self, big: bool, nanos: bool, linktype: u32) -> Option<Frame> {
        if !self.fill(16) {
            if self.buf.len() > self.pos {
                self.info
                    .warnings
                    .push("file ends inside a frame header (capture cut off)".into());
            }
            return None;
        }
        let p = self.pos;
        let sec = u32_at(&self.buf, p, big) as i64;
        let sub = u32_at(&self.buf, p + 4, big) as i64;
        let caplen = u32_at(&self.buf, p + 8, big) as u64;
        let origlen = u32_at(&self.buf, p + 12, big) as i64;
        let n = self.info.frames + 1;
        if caplen > MAX_FRAME {
            self.info.warnings.push(format!(
                "frame {n}: impossible captured length {caplen}; rest of file skipped"
            ));
            return None;
        }
        if !self.fill(16 + caplen as usize) {
            self.info
                .warnings
                .push(format!("file ends inside frame {n} (capture cut off)"));
            return None;
        }
        let start = self.pos + 16;
        self.pos = start + caplen as usize;
        self.info.frames += 1;
        if (caplen as i64) < origlen {
            self.info.truncated_frames += 1;
        }
        let frac = if nanos { 1 } else { 1000 };
        Some(Frame {
            ts: sec * 1_000_000_000 + sub * frac,
            linktype,
            start,
            len: caplen as usize,
            origlen,
        })
    }

    fn next_pcapng(&mut self) -> Option<Frame> {
        loop {
            if !self.fill(12) {
                if self.buf.len() > self.pos {
                    self.info
                        .warnings
                        .push("file ends inside a block header (capture cut off)".into());
                }
                return None;
            }
            let p = self.pos;
            let btype = u32_at(&self.buf, p, self.big);
            let mut blen = u32_at(&self.buf, p + 4, self.big) as u64;
            if btype == PCAPNG_SHB {
                let bom = u32_at(&self.buf, p + 8, false);
                if bom == PCAPNG_BOM {
                    self.big = false;
                } else if bom == 0x4D3C_2B1A {
                    self.big = true;
                } else {
                    self.info
                        .warnings
                        .push("pcapng section header with bad byte-order magic; stopped".into());
                    return None;
                }
                blen = u32_at(&self.buf, p + 4, self.big) as u64;
                self.ifaces.clear(); // interface ids are per section
            }
            if blen < 12 || !blen.is_multiple_of(4) || blen > MAX_FRAME {
                self.info.warnings.push(format!(
                    "pcapng block with impossible length {blen}; rest of file skipped"
                ));
                return None;
            }
            let blen = blen as usize;
            if !self.fill(blen) {
                self.info
                    .warnings
                    .push("file ends inside a block (capture cut off)".into());
                return None;
            }
            let block = self.pos;
            self.pos += blen;
            let body = block + 8; // body = buf[body .. body_end]
            let body_end = block + blen - 4;
            let big = self.big;
            let blen_body = body_end - body;
            match btype {
                PCAPNG_EPB => {
                    let n = self.info.frames + 1;
                    if blen_body < 20 {
                        self.info
                            .warnings
                            .push(format!("pcapng packet block {n} is inconsistent; skipped"));
                        continue;
                    }
                    let b = &self.buf[body..body_end];
                    let iface_id = u32_at(b, 0, big) as usize;
                    let ts_hi = u32_at(b, 4, big) as u64;
                    let ts_lo = u32_at(b, 8, big) as u64;
                    let caplen = u32_at(b, 12, big) as usize;
                    let origlen = u32_at(b, 16, big) as i64;
                    if iface_id >= self.ifaces.len() || 20 + caplen > blen_body {
                        self.info
                            .warnings
                            .push(format!("pcapng packet block {n} is inconsistent; skipped"));
                        continue;
                    }
                    let iface = self.ifaces[iface_id];
                    let ts = ticks_to_ns(&iface, (ts_hi << 32) | ts_lo);
                    self.info.frames += 1;
                    if (caplen as i64) < origlen {
                        self.info.truncated_frames += 1;
                    }
                    return Some(Frame {
                        ts,
                        linktype: iface.linktype,
                        start: body + 20,
                        len: caplen,
                        origlen,
                    });
                }
                PCAPNG_IDB => {
                    if let Some(iface) = interface(&self.buf[body..body_end], big) {
                        self.info.linktypes.insert(iface.linktype);
                        self.info.snaplen = self.info.snaplen.max(iface.snaplen as u64);
                        self.ifaces.push(iface);
                    } else {
                        self.info
                            .warnings
                            .push("pcapng interface block too short; skipped".into());
                    }
                }
                PCAPNG_SPB => {
                    // No timestamp and no interface id: interface 0, time unknown (0).
                    if self.ifaces.is_empty() || blen_body < 4 {
                        continue;
                    }
                    let origlen = u32_at(&self.buf, body, big) as usize;
                    let snap = self.ifaces[0].snaplen as usize;
                    let caplen =
                        origlen
                            .min(blen_body - 4)
                            .min(if snap == 0 { origlen } else { snap });
                    self.info.frames += 1;
                    return Some(Frame {
                        ts: 0,
                        linktype: self.ifaces[0].linktype,
                        start: body + 4,
                        len: caplen,
                        origlen: origlen as i64,
                    });
                }
                PCAPNG_PB => {
                    if blen_body < 20 {
                        continue;
                    }
                    let b = &self.buf[body..body_end];
                    let iface_id = u16_at(b, 0, big) as usize;
                    let ts_hi = u32_at(b, 4, big) as u64;
                    let ts_lo = u32_at(b, 8, big) as u64;
                    let caplen = u32_at(b, 12, big) as usize;
                    let origlen = u32_at(b, 16, big) as i64;
                    if iface_id >= self.ifaces.len() || 20 + caplen > blen_body {
                        continue;
                    }
                    let iface = self.ifaces[iface_id];
                    self.info.frames += 1;
                    return Some(Frame {
                        ts: ticks_to_ns(&iface, (ts_hi << 32) | ts_lo),
                        linktype: iface.linktype,
                        start: body + 20,
                        len: caplen,
                        origlen,
                    });
                }
                PCAPNG_ISB => {
                    if blen_body < 4 {
                        continue;
                    }
                    let b = &self.buf[body..body_end];
                    let iface_id = u32_at(b, 0, big) as u64;
                    let opts = if b.len() > 12 {
                        &b[12..]
                    } else {
                        &b[b.len()..]
                    };
                    for (code, value) in options(opts, big) {
                        if (code == ISB_IFDROP || code == ISB_OSDROP) && value.len() >= 8 {
                            // Statistics are cumulative: keep the latest per interface.
                            let key = (iface_id << 1) | (code == ISB_OSDROP) as u64;
                            self.drops.insert(key, u64_at(value, 0, big));
                        }
                    }
                    self.info.interface_drops =
                        self.drops.values().fold(0u64, |a, v| a.wrapping_add(*v));
                }
                _ => {} // name resolution, decryption secrets, custom: skipped
            }
        }
    }
}

/// Several readers merged in time order (ties: the earlier file first), as
/// heapq.merge does: each file is trusted to be in time order.
pub struct Merge {
    pub readers: Vec<Reader>,
    heads: Vec<Option<Frame>>,
    started: bool,
}

impl Merge {
    pub fn new(readers: Vec<Reader>) -> Merge {
        let n = readers.len();
        Merge {
            readers,
            heads: vec![None; n],
            started: false,
        }
    }

    /// The next frame and the index of its reader; the previous frame's bytes
    /// are no longer valid after this call.
    pub fn next_frame(&mut self, last: Option<usize>) -> Option<(usize, Frame)> {
        if !self.started {
            self.started = true;
            for i in 0..self.readers.len() {
                self.heads[i] = self.readers[i].next_frame();
            }
        } else if let Some(i) = last {
            self.heads[i] = self.readers[i].next_frame();
        }
        let mut best: Option<usize> = None;
        for (i, h) in self.heads.iter().enumerate() {
            if let Some(f) = h {
                match best {
                    Some(b) if self.heads[b].unwrap().ts <= f.ts => {}
                    _ => best = Some(i),
                }
            }
        }
        let b = best?;
        Some((b, self.heads[b].unwrap()))
    }
}
