//! Capture files -> raw frames: the package's one capture reader (`analyze`
//! reads through `Merge`, Python's `parsers/capture.py` `read_frames` and
//! `stream_frames` through `frames.rs`; capture.py's docstring says what is
//! done with each kind of damage, and holds the CaptureInfo this fills in).
//!
//! libpcap (both byte orders, micro- and nanosecond timestamps) and pcapng
//! (several sections and interfaces, per-interface link type, timestamp
//! resolution and offset, interface statistics with drop counts), read in
//! bounded chunks: a regular file through a window of it mapped (`Mapped`:
//! no copy of its bytes), any other `Read` (a pipe, a decompressing reader
//! handed in by Python, a live stream) into a buffer; concatenated captures,
//! resynchronisation after damaged records, and several files merged in time
//! order.

use memmap2::{Advice, Mmap, MmapOptions};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes read at a time (at most: see chunk_bytes); all the files read at
/// once share READ_BUDGET bytes of reading buffers, each at least MIN_CHUNK
/// (generated from parsers/capture.py).
pub use crate::tables::{CHUNK, MAX_CAPLEN, MIN_CHUNK, READ_BUDGET, RESYNC_WINDOW};
use crate::tables::{
    IF_TSOFFSET, IF_TSRESOL, ISB_IFDROP, ISB_OSDROP, MAX_BLOCK, MAX_INTERFACES, MAX_WIRE,
    OPT_ENDOFOPT, PCAPNG_DSB, PCAPNG_EPB, PCAPNG_IDB, PCAPNG_ISB, PCAPNG_JOURNAL, PCAPNG_NRB,
    PCAPNG_PB, PCAPNG_SHB, PCAPNG_SPB, RESYNC_TS_WINDOW_S,
};

/// Bytes read at a time from each of `files` files read side by side: 1,250
/// files did not hold 4 MiB each.
pub fn chunk_bytes(files: usize) -> usize {
    (READ_BUDGET / files.max(1)).clamp(MIN_CHUNK, CHUNK)
}
/// Bytes of a mapped window asked of memory ahead of the frame being read
/// (Reader::prefetch): 8 KiB read fastest of 4, 8 and 16 on a capture of
/// 1.5 kB frames.
const PREFETCH_AHEAD: usize = 8192;
/// Timestamps are kept within what a pcap can express (u32 seconds).
const MAX_TS_NS: i128 = (1i128 << 32) * 1_000_000_000;

const PCAPNG_CUSTOM: [u32; 2] = [0x0000_0BAD, 0x4000_0BAD];
const PCAP_MAGIC_INTS: [u32; 4] = [0xA1B2_C3D4, 0xA1B2_3C4D, 0xD4C3_B2A1, 0x4D3C_B2A1];

fn is_block_type(t: u32) -> bool {
    matches!(
        t,
        PCAPNG_SHB
            | PCAPNG_IDB
            | PCAPNG_PB
            | PCAPNG_SPB
            | PCAPNG_NRB
            | PCAPNG_ISB
            | PCAPNG_EPB
            | PCAPNG_JOURNAL
            | PCAPNG_DSB
    ) || PCAPNG_CUSTOM.contains(&t)
}

fn is_pcap_magic(v: u32) -> bool {
    PCAP_MAGIC_INTS.contains(&v)
}

fn is_header_int(v: u32) -> bool {
    is_pcap_magic(v) || v == PCAPNG_SHB
}

/// (big endian, nanoseconds) of a pcap file's first four bytes.
fn pcap_magic(b: &[u8]) -> Option<(bool, bool)> {
    match b {
        [0xd4, 0xc3, 0xb2, 0xa1] => Some((false, false)),
        [0x4d, 0x3c, 0xb2, 0xa1] => Some((false, true)),
        [0xa1, 0xb2, 0xc3, 0xd4] => Some((true, false)),
        [0xa1, 0xb2, 0x3c, 0x4d] => Some((true, true)),
        _ => None,
    }
}

/// One kind of damage in one file (capture.py's Damage).
#[derive(Default, Debug, Clone)]
pub struct Damage {
    pub count: u64,
    pub offset: u64,
    pub skipped: u64,
    pub detail: String,
    pub what: &'static str,
}

/// What the reader learned about one file (capture.py's CaptureInfo, warnings
/// made from `damage` by Python).
#[derive(Default, Debug, Clone)]
pub struct FileInfo {
    pub format: &'static str,
    pub linktypes: BTreeSet<u32>,
    pub snaplen: u64,
    pub frames: u64,
    pub bytes: u64,
    pub truncated_frames: u64,
    /// the largest caplen of the frames cut short: the length actually captured
    pub cut_len: u64,
    /// the longest link + IP + TCP/UDP header of those (filled by the dissector)
    pub cut_headers: i64,
    pub interface_drops: u64,
    /// damage kind -> what was seen (first seen in `order`)
    pub damage: BTreeMap<&'static str, Damage>,
    pub warnings: Vec<String>,
}

impl FileInfo {
    fn note(
        &mut self,
        kind: &'static str,
        offset: u64,
        skipped: u64,
        detail: String,
        what: &'static str,
    ) {
        let d = self.damage.entry(kind).or_insert_with(|| Damage {
            count: 0,
            offset,
            skipped: 0,
            detail,
            what,
        });
        d.count += 1;
        d.skipped += skipped;
    }
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
enum Fmt {
    Pcap,
    Pcapng,
}

/// The section being read.
enum Section {
    Pcap {
        big: bool,
        nanos: bool,
        linktype: u32,
        snaplen: u32,
        last_sec: i64,
    },
    Pcapng {
        big: bool,
        ifaces: Vec<Interface>,
        drops: BTreeMap<u64, u64>,
    },
    Done,
}

fn rd16(b: &[u8], at: usize, big: bool) -> u16 {
    let a = [b[at], b[at + 1]];
    if big {
        u16::from_be_bytes(a)
    } else {
        u16::from_le_bytes(a)
    }
}

fn rd32(b: &[u8], at: usize, big: bool) -> u32 {
    let a = [b[at], b[at + 1], b[at + 2], b[at + 3]];
    if big {
        u32::from_be_bytes(a)
    } else {
        u32::from_le_bytes(a)
    }
}

fn rd64(b: &[u8], at: usize, big: bool) -> u64 {
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
        let code = rd16(data, pos, big);
        let length = rd16(data, pos + 2, big) as usize;
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

/// An interface description block's body (at least 8 bytes).
fn interface(body: &[u8], big: bool) -> Interface {
    let mut iface = Interface {
        linktype: rd16(body, 0, big) as u32,
        snaplen: rd32(body, 4, big),
        ts_mul: 1000,
        ts_div: 1,
        ts_offset_ns: 0,
    };
    for (code, value) in options(&body[8..], big) {
        if code == IF_TSRESOL && !value.is_empty() {
            let v = value[0];
            if v & 0x80 != 0 {
                // 2**(v & 0x7f); any power past 2**100 gives 0 on 64-bit ticks alike
                iface.ts_mul = 1_000_000_000;
                iface.ts_div = 1i128 << (v & 0x7F).min(100);
            } else if v <= 9 {
                iface.ts_mul = 10i128.pow(9 - v as u32);
                iface.ts_div = 1;
            } else {
                iface.ts_mul = 1;
                iface.ts_div = 10i128.pow((v as u32 - 9).min(30));
            }
        } else if code == IF_TSOFFSET && value.len() >= 8 {
            iface.ts_offset_ns = (rd64(value, 0, big) as i64 as i128) * 1_000_000_000;
        }
    }
    iface
}

/// `n` with commas between thousands (Python's `f"{n:,}"`).
fn fmt_thousands(n: u64) -> String {
    let digits = n.to_string().into_bytes();
    let groups: Vec<&[u8]> = digits.rchunks(3).rev().collect();
    groups
        .iter()
        .map(|g| String::from_utf8_lossy(g).into_owned())
        .collect::<Vec<_>>()
        .join(",")
}

/// Where a capture's bytes come from.
pub enum Source {
    /// read(): a pipe, a decompressing reader, a live stream
    Stream(Box<dyn Read + Send>),
    /// a regular file, mapped a window at a time
    Mapped(Mapped),
}

/// A capture file on disk: mapped when it is a regular file, else read
/// (`taken` counts the bytes taken from it, for the progress shown).
pub fn file_source(file: File, taken: Arc<AtomicU64>) -> Source {
    match Mapped::new(file, taken) {
        Ok(m) => Source::Mapped(m),
        Err((file, taken)) => Source::Stream(Box::new(Counted {
            file: Arc::new(file),
            taken,
        })),
    }
}

/// A file read with read(), counting the bytes taken from it (for progress).
pub struct Counted {
    pub file: Arc<File>,
    pub taken: Arc<AtomicU64>,
}

impl Read for Counted {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = (&*self.file).read(out)?;
        self.taken.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// A regular file read through mmap, one window at a time: the reader's
/// buffer is a slice of the window, and frames are handed out as slices of
/// it (read() would copy every byte from the page cache into a buffer first:
/// a quarter of the parse of a capture of 1 MiB writes).
///
/// The window grows and moves as read() would fill a buffer (`Reader::fill`:
/// the bytes not yet consumed, then a chunk more; a frame that straddles the
/// window's end is mapped again whole from its start), so the reader sees the
/// same bytes at the same positions, hits the end at the same point and
/// counts the same bytes taken as when it reads.  Only one window is mapped at
/// a time: mapped pages count in the process's resident memory, and a file
/// mapped whole would have all its pages resident once read (a 2 GB capture,
/// 2 GB resident); a window is about a chunk (4 MiB).  The kernel is told the
/// window is read in order (MADV_SEQUENTIAL: read ahead further, drop the
/// pages soon after) and asked for all of it at once (MADV_WILLNEED).
///
/// The file's size is taken again at each move, so a file that grows while it
/// is read is read to its end as read() would.  A file cut shorter while it
/// is mapped (truncated in place by another program) would make the bytes
/// past its new end fault (SIGBUS), where read() would see the end: captures
/// are not rewritten in place while they are analysed.
pub struct Mapped {
    /// shared with the mirror-copy check, which reads an earlier frame
    /// again from the file when it is no longer mapped (`Merge::origin`)
    file: Arc<File>,
    taken: Arc<AtomicU64>,
    /// the window (None before the first, or when nothing was left to map)
    map: Option<Mmap>,
    /// the file offset of the window's first byte
    map_at: u64,
    /// bytes at the window's start already consumed (drained)
    skew: usize,
}

impl Mapped {
    /// A regular file to map; Err gives the file back when it is not one
    /// (a pipe, a device, a socket: read instead).
    #[allow(clippy::result_large_err)]
    pub fn new(file: File, taken: Arc<AtomicU64>) -> Result<Mapped, (File, Arc<AtomicU64>)> {
        match file.metadata() {
            Ok(m) if m.is_file() => Ok(Mapped {
                file: Arc::new(file),
                taken,
                map: None,
                map_at: 0,
                skew: 0,
            }),
            _ => Err((file, taken)),
        }
    }

    /// The file offset of `bytes()`' first byte.
    fn offset(&self) -> u64 {
        self.map_at + self.skew as u64
    }

    /// The bytes mapped and not consumed.
    fn bytes(&self) -> &[u8] {
        self.map.as_deref().map_or(&[], |m| &m[self.skew..])
    }

    /// The file offset just past the window.
    fn end(&self) -> u64 {
        self.map_at + self.map.as_ref().map_or(0, |m| m.len() as u64)
    }

    /// The window moved to begin at its first byte not consumed and to reach
    /// `want` bytes past its end (as far as the file goes): the bytes it
    /// gained.  On an error (mmap refused) the window is left as it was.
    fn extend(&mut self, want: usize) -> std::io::Result<u64> {
        let end = self.end();
        let start = end - self.bytes().len() as u64;
        let size = self.file.metadata()?.len();
        let new_end = end.saturating_add(want as u64).min(size).max(end);
        if new_end == end {
            return Ok(0);
        }
        // SAFETY: the map is read only and dropped before the file; the
        // file is a capture that is not written over while it is read (see
        // Mapped: a file cut shorter meanwhile faults)
        let map = unsafe {
            MmapOptions::new()
                .offset(start)
                .len((new_end - start) as usize)
                .map(&*self.file)?
        };
        let _ = map.advise(Advice::Sequential);
        let _ = map.advise(Advice::WillNeed);
        self.map = Some(map); // the previous window unmapped
        self.map_at = start;
        self.skew = 0;
        self.taken.fetch_add(new_end - end, Ordering::Relaxed);
        Ok(new_end - end)
    }
}

/// A reader's bytes: `buf[pos..]` is the capture from file offset
/// `consumed + pos` on, as far as read (or mapped).
enum Buf {
    Read(Vec<u8>),
    Mapped(Mapped),
}

impl std::ops::Deref for Buf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Buf::Read(v) => v,
            Buf::Mapped(m) => m.bytes(),
        }
    }
}

/// A chunked reader over one capture.
pub struct Reader {
    /// what is read from (a mapped file reads nothing: `std::io::empty()`)
    src: Box<dyn Read + Send>,
    chunk: usize,
    /// a live stream (a pipe): each read takes what has arrived, so that a
    /// frame is handed out once its record is whole, not once a chunk is full
    live: bool,
    buf: Buf,
    /// how far (in `buf`) the mapped window was asked ahead (Reader::prefetch)
    prefetched: usize,
    pos: usize,
    consumed: u64,
    eof: bool,
    max_frame: u64,
    max_drops: u64,
    section: Section,
    pub info: FileInfo,
}

impl Reader {
    /// Open a capture on `src`; Err(message) when it is not a pcap/pcapng file.
    /// `max_drops`: capture.MAX_INTERFACE_DROPS (a drop count above it is no count);
    /// `chunk`: bytes read at a time (chunk_bytes).
    pub fn open(
        src: Source,
        max_frame: usize,
        max_drops: u64,
        chunk: usize,
    ) -> Result<Reader, String> {
        Reader::open_with(src, max_frame, max_drops, chunk, false)
    }

    /// `open`, of a live stream when `live` (see Reader::live; a mapped file
    /// is never live).
    pub fn open_with(
        src: Source,
        max_frame: usize,
        max_drops: u64,
        chunk: usize,
        live: bool,
    ) -> Result<Reader, String> {
        let (src, buf): (Box<dyn Read + Send>, Buf) = match src {
            Source::Stream(s) => (s, Buf::Read(Vec::new())),
            Source::Mapped(m) => (Box::new(std::io::empty()), Buf::Mapped(m)),
        };
        let mut r = Reader {
            src,
            chunk,
            live: live && matches!(buf, Buf::Read(_)),
            buf,
            prefetched: 0,
            pos: 0,
            consumed: 0,
            eof: false,
            max_frame: max_frame as u64,
            max_drops,
            section: Section::Done,
            info: FileInfo::default(),
        };
        if !r.fill(4) {
            return Err(if r.buf.is_empty() {
                "empty file".into()
            } else {
                "too short to be a capture file".into()
            });
        }
        let fmt = r.format_at(0).ok_or("not a pcap or pcapng capture file")?;
        r.info.format = if fmt == Fmt::Pcap { "pcap" } else { "pcapng" };
        r.start(fmt, true)?;
        Ok(r)
    }

    // ---- the buffer --------------------------------------------------------

    /// Make n bytes available at self.pos; false at the end of the data.
    fn fill(&mut self, n: usize) -> bool {
        let have = self.buf.len().saturating_sub(self.pos);
        if have >= n {
            return true;
        }
        self.consumed += self.pos as u64;
        let mut drained = std::mem::take(&mut self.pos);
        self.prefetched = 0;
        if let Buf::Mapped(m) = &mut self.buf {
            m.skew += drained.min(m.bytes().len());
            drained = 0;
            while m.bytes().len() < n && !self.eof {
                let want = self.chunk.max(n - m.bytes().len());
                match m.extend(want) {
                    Ok(got) => self.eof = got < want as u64,
                    Err(_) => break, // read instead, from here on
                }
            }
            if m.bytes().len() >= n || self.eof {
                return m.bytes().len() >= n;
            }
            self.unmap();
        }
        let Buf::Read(buf) = &mut self.buf else {
            return false;
        };
        buf.drain(..drained.min(buf.len()));
        while buf.len() < n && !self.eof {
            let want = self.chunk.max(n - buf.len());
            let old = buf.len();
            if self.live {
                // one read of at most a chunk: what has arrived (a read error
                // ends the data)
                buf.resize(old + self.chunk.min(want), 0);
                let got = loop {
                    match self.src.read(&mut buf[old..]) {
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        r => break r.unwrap_or(0),
                    }
                };
                buf.truncate(old + got);
                self.eof = got == 0;
                continue;
            }
            // the buffer grows with what is read, not by `want` ahead of it: a
            // file of 250 bytes holds 250 (read_to_end keeps what came before
            // a read error, which ends the data as the end would)
            let _ = self.src.by_ref().take(want as u64).read_to_end(buf);
            let got = buf.len() - old;
            if got < want {
                self.eof = true;
            }
        }
        buf.len() >= n
    }

    /// mmap refused a window: the file read from here on, the bytes mapped
    /// and not consumed copied into the buffer first.
    fn unmap(&mut self) {
        let Buf::Mapped(m) = &self.buf else {
            return;
        };
        let kept = m.bytes().to_vec();
        let end = m.end();
        let Buf::Mapped(m) = std::mem::replace(&mut self.buf, Buf::Read(kept)) else {
            return;
        };
        let Mapped { file, taken, .. } = m;
        self.src = match (&*file).seek(SeekFrom::Start(end)) {
            Ok(_) => Box::new(Counted { file, taken }),
            Err(_) => Box::new(std::io::empty()), // nothing more can be read
        };
    }

    fn at(&self) -> u64 {
        self.consumed + self.pos as u64
    }

    fn available(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// The bytes of a frame returned by `next_frame`.
    pub fn data(&self, f: &Frame) -> &[u8] {
        &self.buf[f.start..f.start + f.len]
    }

    /// A frame's offset in its file and the file, when the file is mapped
    /// (its bytes can be had again: `bytes_at`, or read from the file).
    pub fn origin(&self, f: &Frame) -> Option<(u64, &Arc<File>)> {
        match &self.buf {
            Buf::Mapped(m) => Some((m.offset() + f.start as u64, &m.file)),
            Buf::Read(_) => None,
        }
    }

    /// `len` bytes at file offset `at` when they are still in the mapped window.
    pub fn bytes_at(&self, at: u64, len: usize) -> Option<&[u8]> {
        let Buf::Mapped(m) = &self.buf else {
            return None;
        };
        let start = usize::try_from(at.checked_sub(m.offset())?).ok()?;
        m.bytes().get(start..start.checked_add(len)?)
    }

    /// The cache lines up to PREFETCH_AHEAD bytes past `pos` asked of memory
    /// ahead of use, when mapped.  A read() leaves the bytes in the CPU's
    /// cache (the kernel's copy wrote them there); a mapped window is read
    /// from memory by the parse itself, frame after frame, each frame's first
    /// touch waiting for memory (the last byte of each 1.5 kB frame, read for
    /// its fingerprint, was a third of the parse of a capture of 1 MiB
    /// writes).  Asked ahead, they stream in as read() would have copied them.
    #[cfg(target_arch = "x86_64")]
    #[inline]
    fn prefetch(&mut self) {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let Buf::Mapped(m) = &self.buf else {
            return;
        };
        let b = m.bytes();
        let to = (self.pos + PREFETCH_AHEAD).min(b.len());
        let mut at = self.prefetched.max(self.pos) & !63;
        while at < to {
            // SAFETY: `at` is inside the mapped window; a prefetch reads nothing
            unsafe { _mm_prefetch::<_MM_HINT_T0>(b.as_ptr().add(at) as *const i8) };
            at += 64;
        }
        self.prefetched = to;
    }

    /// (elsewhere the hardware's own prefetching alone)
    #[cfg(not(target_arch = "x86_64"))]
    #[inline]
    fn prefetch(&mut self) {}

    /// A capture file header at pos + at.
    fn format_at(&mut self, at: usize) -> Option<Fmt> {
        self.fill(at + 4);
        let p = self.pos + at;
        if self.buf.len() < p + 4 {
            return None;
        }
        let m = &self.buf[p..p + 4];
        if pcap_magic(m).is_some() {
            Some(Fmt::Pcap)
        } else if m == [0x0a, 0x0d, 0x0d, 0x0a] {
            Some(Fmt::Pcapng)
        } else {
            None
        }
    }

    /// A header met where a record was expected, checked further (version 2.x,
    /// byte-order magic), so that frame bytes that happen to look like a magic
    /// number are not taken for one.
    fn header_follows(&mut self, at: usize) -> Option<Fmt> {
        let fmt = self.format_at(at);
        self.fill(at + 24);
        let p = self.pos + at;
        match fmt {
            Some(Fmt::Pcap) if self.buf.len() >= p + 24 => {
                let (big, _) = pcap_magic(&self.buf[p..p + 4])?;
                (rd16(&self.buf, p + 4, big) == 2).then_some(Fmt::Pcap)
            }
            Some(Fmt::Pcapng) if self.buf.len() >= p + 12 => {
                let bom = &self.buf[p + 8..p + 12];
                (bom == [0x4d, 0x3c, 0x2b, 0x1a] || bom == [0x1a, 0x2b, 0x3c, 0x4d])
                    .then_some(Fmt::Pcapng)
            }
            _ => None,
        }
    }

    /// The data ends inside a record: count the bytes left over.
    fn cut(&mut self, what: &'static str) {
        let left = self.available();
        let at = self.at();
        self.info.note("cut", at, left as u64, String::new(), what);
        self.pos += left;
    }

    // ---- sections ------------------------------------------------------------

    /// Begin a section at pos (a file header met where one was expected).
    fn start(&mut self, fmt: Fmt, first: bool) -> Result<(), String> {
        match fmt {
            Fmt::Pcap => {
                if !self.fill(24) {
                    if first {
                        return Err("pcap file header cut short".into());
                    }
                    self.cut("file header");
                    self.section = Section::Done;
                    return Ok(());
                }
                let p = self.pos;
                let (big, nanos) = pcap_magic(&self.buf[p..p + 4]).unwrap();
                let snaplen = rd32(&self.buf, p + 16, big);
                // The upper bits of the link-type field may carry FCS length flags.
                let linktype = rd32(&self.buf, p + 20, big) & 0x0FFF_FFFF;
                self.info.snaplen = self.info.snaplen.max(snaplen as u64);
                self.info.linktypes.insert(linktype);
                self.pos += 24;
                self.section = Section::Pcap {
                    big,
                    nanos,
                    linktype,
                    snaplen,
                    last_sec: -1,
                };
            }
            Fmt::Pcapng => {
                self.section = Section::Pcapng {
                    big: false,
                    ifaces: Vec::new(),
                    drops: BTreeMap::new(),
                };
            }
        }
        Ok(())
    }

    /// The next frame in file order, None at the end.
    pub fn next_frame(&mut self) -> Option<Frame> {
        loop {
            let step = match self.section {
                Section::Pcap { .. } => self.next_pcap(),
                Section::Pcapng { .. } => self.next_pcapng(),
                Section::Done => {
                    self.info.bytes = self.at();
                    return None;
                }
            };
            match step {
                Step::Frame(f) => {
                    self.prefetch();
                    return Some(f);
                }
                Step::Header(fmt) => {
                    // another capture file begins here (files concatenated)
                    let at = self.at();
                    self.info.note("concatenated", at, 0, String::new(), "");
                    let _ = self.start(fmt, false);
                }
                Step::End => {
                    self.section = Section::Done;
                    self.info.bytes = self.at();
                    return None;
                }
            }
        }
    }

    // ---- pcap ------------------------------------------------------------------

    fn pcap_plausible(&self, r: [u32; 4], near: i64) -> bool {
        let Section::Pcap { nanos, .. } = self.section else {
            return false;
        };
        let [sec, sub, caplen, origlen] = r;
        let frac_limit = if nanos { 1_000_000_000 } else { 1_000_000 };
        (caplen as u64) <= self.max_frame
            && caplen <= origlen
            && (origlen as u64) <= MAX_WIRE
            && sub < frac_limit
            && (near < 0 || (sec as i64 - near).abs() <= RESYNC_TS_WINDOW_S)
    }

    fn pcap_rec(&self, at: usize) -> [u32; 4] {
        let Section::Pcap { big, .. } = self.section else {
            return [0; 4];
        };
        let p = self.pos + at;
        [
            rd32(&self.buf, p, big),
            rd32(&self.buf, p + 4, big),
            rd32(&self.buf, p + 8, big),
            rd32(&self.buf, p + 12, big),
        ]
    }

    /// A plausible record (or a capture header, or the end) at pos + at.
    fn pcap_next_ok(&mut self, at: usize, sec: u32) -> bool {
        if !self.fill(at + 16) {
            return self.eof && self.available() == at;
        }
        if self.header_follows(at).is_some() {
            return true;
        }
        let r = self.pcap_rec(at);
        self.pcap_plausible(r, sec as i64)
    }

    fn pcap_accept(&mut self) -> bool {
        if self.header_follows(0).is_some() {
            return true;
        }
        if !self.fill(16) {
            return false;
        }
        let r = self.pcap_rec(0);
        let Section::Pcap { last_sec, .. } = self.section else {
            return false;
        };
        if !self.pcap_plausible(r, last_sec) {
            return false;
        }
        self.pcap_next_ok(16 + r[2] as usize, r[0])
    }

    fn pcap_candidate(&self, w: &[u8], i: usize) -> bool {
        let Section::Pcap {
            big,
            nanos,
            last_sec,
            ..
        } = self.section
        else {
            return false;
        };
        let sec = rd32(w, i, big);
        let sub = rd32(w, i + 4, big);
        let caplen = rd32(w, i + 8, big);
        let origlen = rd32(w, i + 12, big);
        let frac_limit = if nanos { 1_000_000_000 } else { 1_000_000 };
        let mut ok = (caplen as u64) <= self.max_frame && caplen <= origlen && sub < frac_limit;
        if last_sec >= 0 {
            ok &= (sec as i64 - last_sec).abs() <= RESYNC_TS_WINDOW_S;
        }
        ok || is_header_int(sec)
    }

    fn pcapng_candidate(&self, w: &[u8], i: usize) -> bool {
        let Section::Pcapng { big, .. } = self.section else {
            return false;
        };
        let btype = rd32(w, i, big);
        let blen = rd32(w, i + 4, big) as u64;
        let ok = is_block_type(btype) && blen >= 12 && blen.is_multiple_of(4) && blen <= MAX_BLOCK;
        ok || is_pcap_magic(btype)
    }

    fn pcapng_accept(&mut self) -> bool {
        if !self.fill(12) {
            return false;
        }
        if self.header_follows(0).is_some() {
            return true;
        }
        let Section::Pcapng { big, .. } = self.section else {
            return false;
        };
        let btype = rd32(&self.buf, self.pos, big);
        let blen = rd32(&self.buf, self.pos + 4, big) as u64;
        if !is_block_type(btype) || blen < 12 || !blen.is_multiple_of(4) || blen > MAX_BLOCK {
            return false;
        }
        let blen = blen as usize;
        if !self.fill(blen) {
            return false;
        }
        rd32(&self.buf, self.pos + blen - 4, big) as usize == blen
    }

    /// Step pos forward (at least one byte) to the first position that is a
    /// candidate and is accepted; the bytes skipped.  At the end of the data
    /// when nothing is found.
    fn resync(&mut self, pcapng: bool) -> u64 {
        let start = self.at();
        self.pos += 1;
        loop {
            self.fill(RESYNC_WINDOW + MAX_CAPLEN + 64);
            let avail = self.available();
            if avail < 16 {
                self.pos += avail;
                return self.at() - start;
            }
            let n = RESYNC_WINDOW.min(avail - 15);
            let base = self.at();
            let cands: Vec<usize> = {
                let w = &self.buf[self.pos..self.pos + n + 15];
                (0..n)
                    .filter(|&i| {
                        if pcapng {
                            self.pcapng_candidate(w, i)
                        } else {
                            self.pcap_candidate(w, i)
                        }
                    })
                    .collect()
            };
            for q in cands {
                self.pos = (base + q as u64 - self.consumed) as usize;
                let ok = if pcapng {
                    self.pcapng_accept()
                } else {
                    self.pcap_accept()
                };
                if ok {
                    return self.at() - start;
                }
            }
            self.pos = (base + n as u64 - self.consumed) as usize;
        }
    }

    fn next_pcap(&mut self) -> Step {
        let Section::Pcap {
            nanos,
            linktype,
            snaplen,
            ..
        } = self.section
        else {
            return Step::End;
        };
        let frac_limit: u32 = if nanos { 1_000_000_000 } else { 1_000_000 };
        loop {
            if !self.fill(16) {
                if self.available() > 0 {
                    self.cut("frame header");
                }
                return Step::End;
            }
            let [sec, sub, caplen, origlen] = self.pcap_rec(0);
            if is_header_int(sec) {
                if let Some(fmt) = self.header_follows(0) {
                    return Step::Header(fmt);
                }
            }
            let odd = (caplen > snaplen && snaplen > 0) || origlen < caplen;
            if (caplen as u64) > self.max_frame
                || (odd && !self.pcap_next_ok(16 + caplen as usize, sec))
            {
                // Impossible, or odd and not followed by a record: damage.
                let at = self.at();
                let skipped = self.resync(false);
                let kind = if self.available() > 0 {
                    "bad_record"
                } else {
                    "lost_tail"
                };
                self.info.note(kind, at, skipped, String::new(), "");
                continue;
            }
            if !self.fill(16 + caplen as usize) {
                // The file ends inside this frame, or its length is wrong.
                let (at, left) = (self.at(), self.available());
                let skipped = self.resync(false);
                if self.available() > 0 {
                    self.info.note("bad_record", at, skipped, String::new(), "");
                    continue;
                }
                self.info
                    .note("cut", at, left as u64, String::new(), "frame");
                return Step::End;
            }
            if caplen > snaplen && snaplen > 0 {
                let at = self.at();
                self.info.note("over_snaplen", at, 0, String::new(), "");
            }
            let mut sub = sub;
            if sub >= frac_limit {
                // A fraction of a second of a second or more (ts_usec 0xFFFFFFFF):
                // the frame is read, its time clamped to its second's last tick
                // (carried, it would jump 71 minutes ahead and age out every
                // reassembly); tshark reads it too.  Not damage to search past.
                let at = self.at();
                self.info.note("bad_timestamp", at, 0, String::new(), "");
                sub = frac_limit - 1;
            }
            let start = self.pos + 16;
            self.pos = start + caplen as usize;
            if let Section::Pcap { last_sec, .. } = &mut self.section {
                *last_sec = sec as i64;
            }
            self.info.frames += 1;
            if (caplen as u64) < origlen as u64 {
                self.info.truncated_frames += 1;
                self.info.cut_len = self.info.cut_len.max(caplen as u64);
            }
            let frac: i64 = if nanos { 1 } else { 1000 };
            return Step::Frame(Frame {
                ts: sec as i64 * 1_000_000_000 + sub as i64 * frac,
                linktype,
                start,
                len: caplen as usize,
                origlen: origlen as i64,
            });
        }
    }

    // ---- pcapng ----------------------------------------------------------------

    fn timestamp(&mut self, ts: i128) -> i64 {
        if (0..=MAX_TS_NS).contains(&ts) {
            return ts as i64;
        }
        let at = self.at();
        self.info.note("bad_timestamp", at, 0, String::new(), "");
        if ts < 0 {
            0
        } else {
            MAX_TS_NS as i64
        }
    }

    fn next_pcapng(&mut self) -> Step {
        loop {
            if !self.fill(12) {
                if self.available() > 0 {
                    self.cut("block header");
                }
                return Step::End;
            }
            let Section::Pcapng { big, .. } = self.section else {
                return Step::End;
            };
            let p = self.pos;
            let btype = rd32(&self.buf, p, big);
            let mut blen = rd32(&self.buf, p + 4, big) as u64;
            if is_pcap_magic(btype) && self.header_follows(0) == Some(Fmt::Pcap) {
                return Step::Header(Fmt::Pcap); // a pcap file begins here
            }
            let mut bad = false;
            if btype == PCAPNG_SHB {
                let p = self.pos;
                let bom = [
                    self.buf[p + 8],
                    self.buf[p + 9],
                    self.buf[p + 10],
                    self.buf[p + 11],
                ];
                let mut e = big;
                if bom == [0x4d, 0x3c, 0x2b, 0x1a] {
                    e = false;
                } else if bom == [0x1a, 0x2b, 0x3c, 0x4d] {
                    e = true;
                } else {
                    bad = true;
                }
                blen = rd32(&self.buf, p + 4, e) as u64;
                if let Section::Pcapng { big, ifaces, .. } = &mut self.section {
                    *big = e;
                    ifaces.clear(); // interface ids are per section
                }
            }
            let Section::Pcapng { big, .. } = self.section else {
                return Step::End;
            };
            let mut cut = false;
            if bad || blen < 12 || !blen.is_multiple_of(4) || blen > MAX_BLOCK {
                bad = true;
            } else if !self.fill(blen as usize) {
                bad = true;
                cut = true;
            } else if rd32(&self.buf, self.pos + blen as usize - 4, big) as u64 != blen {
                bad = true; // the trailing copy of the length disagrees
            }
            if bad {
                let (at, left) = (self.at(), self.available());
                let skipped = self.resync(true);
                if self.available() > 0 {
                    self.info.note("bad_block", at, skipped, String::new(), "");
                    continue;
                }
                if cut {
                    self.info
                        .note("cut", at, left as u64, String::new(), "block");
                } else {
                    self.info.note("lost_tail", at, skipped, String::new(), "");
                }
                return Step::End;
            }
            let blen = blen as usize;
            let at = self.at();
            let block = self.pos;
            self.pos += blen;
            let body = block + 8;
            let body_len = blen - 12;
            match btype {
                PCAPNG_EPB | PCAPNG_PB => {
                    if body_len < 20 {
                        self.info
                            .note("bad_packet_block", at, 0, "too short".into(), "");
                        continue;
                    }
                    let b = &self.buf[body..body + body_len];
                    let (iface_id, ts_hi, ts_lo, caplen, origlen) = if btype == PCAPNG_EPB {
                        (
                            rd32(b, 0, big) as usize,
                            rd32(b, 4, big) as u64,
                            rd32(b, 8, big) as u64,
                            rd32(b, 12, big) as u64,
                            rd32(b, 16, big) as i64,
                        )
                    } else {
                        (
                            rd16(b, 0, big) as usize,
                            rd32(b, 4, big) as u64,
                            rd32(b, 8, big) as u64,
                            rd32(b, 12, big) as u64,
                            rd32(b, 16, big) as i64,
                        )
                    };
                    let Section::Pcapng { ifaces, .. } = &self.section else {
                        return Step::End;
                    };
                    if iface_id >= ifaces.len() {
                        self.info.note(
                            "bad_packet_block",
                            at,
                            0,
                            format!("unknown interface {iface_id}"),
                            "",
                        );
                        continue;
                    }
                    if 20 + caplen > body_len as u64 || caplen > self.max_frame {
                        self.info.note(
                            "bad_packet_block",
                            at,
                            0,
                            format!("captured length {caplen}"),
                            "",
                        );
                        continue;
                    }
                    let iface = ifaces[iface_id];
                    if caplen > iface.snaplen as u64 && iface.snaplen > 0 {
                        self.info.note("over_snaplen", at, 0, String::new(), "");
                    }
                    let ticks = ((ts_hi << 32) | ts_lo) as i128;
                    let ts =
                        self.timestamp(ticks * iface.ts_mul / iface.ts_div + iface.ts_offset_ns);
                    self.info.frames += 1;
                    if (caplen as i64) < origlen {
                        self.info.truncated_frames += 1;
                        self.info.cut_len = self.info.cut_len.max(caplen);
                    }
                    return Step::Frame(Frame {
                        ts,
                        linktype: iface.linktype,
                        start: body + 20,
                        len: caplen as usize,
                        origlen,
                    });
                }
                PCAPNG_IDB => {
                    let n_ifaces = match &self.section {
                        Section::Pcapng { ifaces, .. } => ifaces.len(),
                        _ => 0,
                    };
                    if body_len < 8 || n_ifaces >= MAX_INTERFACES {
                        self.info.note(
                            "bad_packet_block",
                            at,
                            0,
                            "interface block too short or too many".into(),
                            "",
                        );
                        continue;
                    }
                    let iface = interface(&self.buf[body..body + body_len], big);
                    self.info.linktypes.insert(iface.linktype);
                    self.info.snaplen = self.info.snaplen.max(iface.snaplen as u64);
                    if let Section::Pcapng { ifaces, .. } = &mut self.section {
                        ifaces.push(iface);
                    }
                }
                PCAPNG_SPB => {
                    // No timestamp and no interface id: interface 0, time unknown (0).
                    let first = match &self.section {
                        Section::Pcapng { ifaces, .. } => ifaces.first().copied(),
                        _ => None,
                    };
                    let Some(iface) = first.filter(|_| body_len >= 4) else {
                        self.info.note(
                            "bad_packet_block",
                            at,
                            0,
                            "simple packet block without interface".into(),
                            "",
                        );
                        continue;
                    };
                    let origlen = rd32(&self.buf, body, big) as u64;
                    let snap = if iface.snaplen == 0 {
                        origlen
                    } else {
                        iface.snaplen as u64
                    };
                    let caplen = origlen
                        .min(body_len as u64 - 4)
                        .min(snap)
                        .min(self.max_frame);
                    self.info.frames += 1;
                    return Step::Frame(Frame {
                        ts: 0,
                        linktype: iface.linktype,
                        start: body + 4,
                        len: caplen as usize,
                        origlen: origlen as i64,
                    });
                }
                PCAPNG_ISB if body_len >= 12 => {
                    let b = &self.buf[body..body + body_len];
                    let iface_id = rd32(b, 0, big) as u64;
                    let known = match &self.section {
                        Section::Pcapng { ifaces, .. } => (iface_id as usize) < ifaces.len(),
                        _ => false,
                    };
                    if !known {
                        continue; // statistics of no interface: nothing to count them for
                    }
                    let mut found: Vec<(u64, u64)> = Vec::new();
                    for (code, value) in options(&b[12..], big) {
                        if (code != ISB_IFDROP && code != ISB_OSDROP) || value.len() < 8 {
                            continue;
                        }
                        let count = rd64(value, 0, big);
                        if count > self.max_drops {
                            let detail = fmt_thousands(count);
                            self.info.note("bad_drop_count", at, 0, detail, "");
                            continue;
                        }
                        // Statistics are cumulative: keep the latest per interface.
                        found.push(((iface_id << 1) | (code == ISB_OSDROP) as u64, count));
                    }
                    if let Section::Pcapng { drops, .. } = &mut self.section {
                        for (k, v) in found {
                            drops.insert(k, v);
                        }
                        self.info.interface_drops =
                            drops.values().fold(0u64, |a, v| a.wrapping_add(*v));
                    }
                }
                _ => {} // name resolution, decryption secrets, custom: skipped
            }
        }
    }
}

enum Step {
    Frame(Frame),
    Header(Fmt),
    End,
}

/// Opens a capture's bytes (again, each call from the start); the flag is
/// true when the bytes read count for the progress shown.
pub type Opener = Box<dyn FnMut(bool) -> Result<Source, String> + Send>;

/// Several captures merged in time order (ties: the earlier file first), as
/// heapq.merge does: each file is trusted to be in time order.  Each file is
/// opened only when its first frame is due and closed at its end: thousands
/// of rotated files hold one or two open, not all of them.
/// Their first frames are read beforehand, one file at a time.
pub struct Merge {
    openers: Vec<Opener>,
    readers: Vec<Option<Reader>>,
    infos: Vec<FileInfo>,
    heads: Vec<Option<Frame>>,
    /// (time of its next frame, file) for every file not ended: open or due
    queue: BinaryHeap<Reverse<(i64, usize)>>,
    max_frame: usize,
    max_drops: u64,
    chunk: usize,
    /// A file that could not be opened again when due: (its index, why); the
    /// merge stops there
    pub error: Option<(usize, String)>,
}

impl Merge {
    /// Err((file index, message)) when a file is not a capture at all.
    pub fn open(
        openers: Vec<Opener>,
        max_frame: usize,
        max_drops: u64,
    ) -> Result<Merge, (usize, String)> {
        let n = openers.len();
        let mut m = Merge {
            openers,
            readers: (0..n).map(|_| None).collect(),
            infos: vec![FileInfo::default(); n],
            heads: vec![None; n],
            queue: BinaryHeap::new(),
            max_frame,
            max_drops,
            chunk: chunk_bytes(n),
            error: None,
        };
        if n == 1 {
            let r = m.reader(0, true, m.chunk).map_err(|e| (0, e))?;
            m.readers[0] = Some(r);
            m.advance(0);
            return Ok(m);
        }
        for i in 0..n {
            let mut r = m.reader(i, false, MIN_CHUNK).map_err(|e| (i, e))?;
            match r.next_frame() {
                Some(f) => m.queue.push(Reverse((f.ts, i))),
                None => m.infos[i] = r.info, // no frame: read whole already
            }
        }
        Ok(m)
    }

    fn reader(&mut self, i: usize, counted: bool, chunk: usize) -> Result<Reader, String> {
        let src = (self.openers[i])(counted)?;
        Reader::open(src, self.max_frame, self.max_drops, chunk)
    }

    /// The next frame of an open file into the queue, or the file closed.
    fn advance(&mut self, i: usize) {
        let Some(r) = self.readers[i].as_mut() else {
            return;
        };
        self.heads[i] = r.next_frame();
        match self.heads[i] {
            Some(f) => self.queue.push(Reverse((f.ts, i))),
            None => {
                if let Some(r) = self.readers[i].take() {
                    self.infos[i] = r.info;
                }
            }
        }
    }

    /// The next frame and the index of its file; the previous frame's bytes
    /// are no longer valid after this call.
    pub fn next_frame(&mut self, last: Option<usize>) -> Option<(usize, Frame)> {
        if let Some(i) = last {
            self.advance(i);
        }
        loop {
            let Reverse((_, b)) = self.queue.pop()?;
            if self.readers[b].is_none() {
                // due: opened now (its first frame again)
                match self.reader(b, true, self.chunk) {
                    Ok(r) => self.readers[b] = Some(r),
                    Err(e) => {
                        self.error = Some((b, e));
                        self.queue.clear();
                        self.readers.iter_mut().for_each(|r| *r = None); // closed
                        return None;
                    }
                }
                self.heads[b] = self.readers[b].as_mut().and_then(|r| r.next_frame());
                if self.heads[b].is_none() {
                    if let Some(r) = self.readers[b].take() {
                        self.infos[b] = r.info;
                    }
                    continue;
                }
            }
            return Some((b, self.heads[b].unwrap()));
        }
    }

    /// The bytes of frame `f` of file `i` (from `next_frame`).
    pub fn data(&self, i: usize, f: &Frame) -> &[u8] {
        self.readers[i].as_ref().map_or(&[], |r| r.data(f))
    }

    /// Frame `f` of file `i`'s offset in its file and the file, when mapped.
    pub fn origin(&self, i: usize, f: &Frame) -> Option<(u64, &Arc<File>)> {
        self.readers[i].as_ref().and_then(|r| r.origin(f))
    }

    /// `len` bytes at offset `at` of file `i`, when still in its mapped window.
    pub fn bytes_at(&self, i: usize, at: u64, len: usize) -> Option<&[u8]> {
        self.readers[i].as_ref().and_then(|r| r.bytes_at(at, len))
    }

    /// What the reader is learning about open file `i` (None: not open).
    pub fn info_mut(&mut self, i: usize) -> Option<&mut FileInfo> {
        self.readers[i].as_mut().map(|r| &mut r.info)
    }

    /// What the reader learned about each file (the open ones as far as read).
    pub fn into_infos(self) -> Vec<FileInfo> {
        self.infos
            .into_iter()
            .zip(self.readers)
            .map(|(info, r)| r.map_or(info, |r| r.info))
            .collect()
    }
}

/// A libpcap file (microseconds, Ethernet) of `frames` (ts ns, bytes).
#[cfg(test)]
pub(crate) fn test_pcap(frames: &[(i64, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for v in [0xA1B2_C3D4u32, 0x0004_0002, 0, 0, 262_144, 1] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for (ts, data) in frames {
        let (sec, usec) = (ts / 1_000_000_000, ts % 1_000_000_000 / 1000);
        for v in [
            sec as u32,
            usec as u32,
            data.len() as u32,
            data.len() as u32,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(data);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Everything a reader hands out and learns, read from `src`.
    fn read_all(src: Source, chunk: usize) -> (Vec<(i64, Vec<u8>, i64)>, String) {
        let mut r = match Reader::open(src, MAX_CAPLEN, 1 << 40, chunk) {
            Ok(r) => r,
            Err(e) => return (Vec::new(), e),
        };
        let mut out = Vec::new();
        while let Some(f) = r.next_frame() {
            out.push((f.ts, r.data(&f).to_vec(), f.origlen));
        }
        (out, format!("{:?}", r.info))
    }

    /// A capture read from a mapped file (windows of `chunk` bytes) and from
    /// a stream (chunks of `chunk` bytes): the same frames, the same facts,
    /// the file's bytes all counted as taken.
    fn same_both_ways(name: &str, bytes: &[u8], chunk: usize) -> Vec<(i64, Vec<u8>, i64)> {
        let path = std::env::temp_dir().join(format!("nfstrace-{}-{name}", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        let taken = Arc::new(AtomicU64::new(0));
        let src = file_source(File::open(&path).unwrap(), Arc::clone(&taken));
        assert!(matches!(src, Source::Mapped(_)));
        let mapped = read_all(src, chunk);
        std::fs::remove_file(&path).unwrap();
        let read = read_all(
            Source::Stream(Box::new(std::io::Cursor::new(bytes.to_vec()))),
            chunk,
        );
        assert_eq!(mapped, read);
        if !bytes.is_empty() {
            assert_eq!(taken.load(Ordering::Relaxed), bytes.len() as u64);
        }
        mapped.0
    }

    fn frames(n: usize) -> Vec<(i64, Vec<u8>)> {
        (0..n)
            .map(|k| {
                let len = 60 + (k * 97) % 1500;
                (1_000_000_000 + k as i64 * 1000, vec![(k % 251) as u8; len])
            })
            .collect()
    }

    #[test]
    fn frames_straddling_a_mapped_window_are_whole() {
        let fs = frames(300);
        let bytes = test_pcap(&fs);
        // windows of 100 bytes: most frames begin in one and end in another
        for chunk in [100, 4096, 1 << 20] {
            let got = same_both_ways(&format!("straddle-{chunk}"), &bytes, chunk);
            assert_eq!(got.len(), fs.len());
            for ((ts, data, _), (want_ts, want)) in got.iter().zip(&fs) {
                assert_eq!((ts, data), (want_ts, want));
            }
        }
    }

    #[test]
    fn damaged_mapped_files_read_as_streams() {
        let bytes = test_pcap(&frames(200));
        // cut inside the last record, inside a record header, and garbage
        // in the middle (resynchronised after), an empty and a short file
        let mut garbled = bytes.clone();
        for b in &mut garbled[5000..5300] {
            *b = 0xEE;
        }
        let mut concatenated = bytes.clone();
        concatenated.extend_from_slice(&bytes);
        for (name, b) in [
            ("cut", &bytes[..bytes.len() - 7]),
            ("cut-header", &bytes[..bytes.len() - 1510 - 8]),
            ("garbled", &garbled[..]),
            ("concatenated", &concatenated[..]),
            ("empty", &bytes[..0]),
            ("short", &bytes[..3]),
        ] {
            for chunk in [100, 65536] {
                same_both_ways(&format!("{name}-{chunk}"), b, chunk);
            }
        }
    }
}
