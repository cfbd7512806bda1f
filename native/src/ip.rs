//! IPv4 (RFC 791) and IPv6 (RFC 8200) headers, extension headers and fragment
//! reassembly for both (protocol numbers: tables.rs, from protocol/ip.py).

use crate::maps::{HashMap, HashSet};
use std::borrow::Cow;
use std::collections::BTreeMap;

// Protocol numbers, positions in a direction's facts (stats.py's F_*; F_CSUM_*:
// TCP/UDP checksums verified on a sample, CHECKSUM_SAMPLE packets of each
// direction, and those found bad) and NO_TTL: generated.
pub use crate::tables::{
    CHECKSUM_SAMPLE, F_CSUM_BAD, F_CSUM_CHECKED, F_FRAGMENTS, F_INCOMPLETE, F_IP_BYTES,
    F_MAX_IP_LEN, F_PACKETS, F_REASSEMBLED, F_TTL_MAX, F_TTL_MIN, NO_TTL, PROTO_TCP, PROTO_UDP,
};
use crate::tables::{
    IPV6_AH, IPV6_DSTOPTS, IPV6_FRAGMENT, IPV6_HOPOPTS, IPV6_MOBILITY, IPV6_ROUTING,
};

/// An IPv4 or IPv6 address as its raw bytes; ordered as Python orders bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Addr {
    len: u8,
    b: [u8; 16],
}

impl Addr {
    pub fn new(raw: &[u8]) -> Addr {
        let mut b = [0u8; 16];
        let n = raw.len().min(16);
        b[..n].copy_from_slice(&raw[..n]);
        Addr { len: n as u8, b }
    }
    pub fn as_bytes(&self) -> &[u8] {
        &self.b[..self.len as usize]
    }
}

impl PartialOrd for Addr {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Addr {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

/// Per-direction IP facts, one slot per (source, destination) address pair, at
/// most `limit` pairs: past it their packets are counted together in the
/// overflow slot (OVERFLOW), not per pair.
pub struct Facts {
    pub index: HashMap<(Addr, Addr), usize>,
    pub rows: Vec<[i64; 10]>,
    pub keys: Vec<(Addr, Addr)>,
    limit: usize,
}

pub const OVERFLOW: usize = 0;
const EMPTY_FACTS: [i64; 10] = [0, 0, 0, NO_TTL, -1, 0, 0, 0, 0, 0];

/// Does the TCP or UDP segment (all of it, header first) carry a right
/// checksum (ip.checksum_ok)?
/// The two addresses of the IP header (version `ver`) at `off`, the lower
/// first (both directions of a host pair alike); None when not IP or the
/// addresses were not captured.
pub fn host_pair(ver: u8, data: &[u8], off: usize) -> Option<(&[u8], &[u8])> {
    let (a, b) = match ver {
        4 if data.len() >= off + 20 => (&data[off + 12..off + 16], &data[off + 16..off + 20]),
        6 if data.len() >= off + 40 => (&data[off + 8..off + 24], &data[off + 24..off + 40]),
        _ => return None,
    };
    Some(if a <= b { (a, b) } else { (b, a) })
}

/// The partition of a frame whose IP header (version `ver`) is at `off`
/// (`ParseLimits.partitions`): zlib's CRC-32 of the two addresses, the lower
/// first, modulo `partitions`, or with `buckets` (`ParseLimits.buckets`)
/// modulo their number and looked up in them; the CRC counts as 0 when not IP
/// or the addresses were not captured.  Both directions of a host pair, and
/// every fragment of a datagram, fall in the same partition.
pub fn partition_of(
    ver: u8,
    data: &[u8],
    off: usize,
    partitions: usize,
    buckets: &[usize],
) -> usize {
    let crc = host_pair(ver, data, off).map_or(0, |(lo, hi)| crc32(&[lo, hi])) as usize;
    if buckets.is_empty() {
        crc % partitions
    } else {
        buckets[crc % buckets.len()]
    }
}

/// CRC-32 (IEEE 802.3, reflected, as zlib.crc32) of the pieces in a row.
fn crc32(pieces: &[&[u8]]) -> u32 {
    let mut crc = !0u32;
    for piece in pieces {
        for &byte in piece.iter() {
            crc ^= byte as u32;
            for _ in 0..8 {
                crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
            }
        }
    }
    !crc
}

pub fn checksum_ok(src: Addr, dst: Addr, proto: i32, seg: &[u8]) -> bool {
    let mut sum: u64 = proto as u64 + seg.len() as u64;
    for a in [src.as_bytes(), dst.as_bytes()] {
        for w in a.chunks(2) {
            sum += u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]) as u64;
        }
    }
    let mut words = seg.chunks_exact(2);
    for w in &mut words {
        sum += u16::from_be_bytes([w[0], w[1]]) as u64;
    }
    if let [last] = words.remainder() {
        sum += (*last as u64) << 8; // a last odd byte is padded with a zero
    }
    sum.is_multiple_of(0xFFFF)
}

impl Facts {
    /// Verify a whole segment's checksum into a direction's facts (the caller
    /// checked the sample is not full): right or bad, None when not computed
    /// (UDP checksum 0: not counted) (ip.sample_checksum: 1, 0, -1).
    pub fn sample_checksum(
        &mut self,
        slot: usize,
        src: Addr,
        dst: Addr,
        proto: i32,
        seg: &[u8],
    ) -> Option<bool> {
        if proto == PROTO_UDP && seg[6] == 0 && seg[7] == 0 {
            return None;
        }
        let ok = checksum_ok(src, dst, proto, seg);
        let d = &mut self.rows[slot];
        d[F_CSUM_CHECKED] += 1;
        if !ok {
            d[F_CSUM_BAD] += 1;
        }
        Some(ok)
    }

    pub fn new(limit: usize) -> Facts {
        Facts {
            index: HashMap::default(),
            rows: vec![EMPTY_FACTS],
            keys: vec![(Addr::default(), Addr::default())],
            limit,
        }
    }

    /// The slot of one direction, created empty on first use (OVERFLOW when full).
    pub fn slot(&mut self, src: Addr, dst: Addr) -> usize {
        if let Some(&i) = self.index.get(&(src, dst)) {
            return i;
        }
        if self.index.len() >= self.limit {
            return OVERFLOW;
        }
        let i = self.rows.len();
        self.rows.push(EMPTY_FACTS);
        self.keys.push((src, dst));
        self.index.insert((src, dst), i);
        i
    }

    /// Account one IP packet (or fragment).
    pub fn count_packet(&mut self, slot: usize, ip_len: i64, ttl: i64) {
        let d = &mut self.rows[slot];
        d[F_PACKETS] += 1;
        d[F_IP_BYTES] += ip_len;
        if ip_len > d[F_MAX_IP_LEN] {
            d[F_MAX_IP_LEN] = ip_len;
        }
        if ttl < d[F_TTL_MIN] {
            d[F_TTL_MIN] = ttl;
        }
        if ttl > d[F_TTL_MAX] {
            d[F_TTL_MAX] = ttl;
        }
    }
}

/// One IP datagram (reassembled if it was fragmented).
pub struct Datagram<'a> {
    pub src: Addr,
    pub dst: Addr,
    pub proto: i32,
    pub payload: Cow<'a, [u8]>,
    pub wire_len: i64,
    pub frags: i64,
    pub ts_first: i64,
    pub frame_first: i64,
    /// TTL / hop limit and IP length of an unfragmented packet; -1 / 0 when
    /// reassembled (its fragments were counted one by one).
    pub ttl: i64,
    pub ip_len: i64,
}

#[derive(Default, Clone, Copy)]
pub struct FragmentStats {
    pub fragments: i64,
    pub reassembled: i64,
    pub incomplete: i64,
    pub overlaps: i64,
    /// exact repeats of a fragment held (same offset and length): dropped
    pub repeats: i64,
    /// datagrams given up to bound memory (too many fragments or bytes)
    pub given_up: i64,
    /// packets whose IP length claims more than the frame carried on the wire
    pub length_exceeds_frame: i64,
}

struct Pending {
    pieces: Vec<(i64, i64, Vec<u8>)>, // (offset, wire length, captured)
    seen: HashSet<(i64, i64)>,        // (offset, wire length) of the pieces
    stamp: u64,                       // its place in `Reassembler::order`
    total: i64,
    got: i64,
    ts_first: i64,
    ts_last: i64,
    frame_first: i64,
    frame_last: i64,
    count: i64,
    header: i32,
    held: i64,
}

/// (ip version, src, dst, id, protocol or -1 for IPv6)
pub type FragKey = (u8, Addr, Addr, u32, i32);

/// A datagram given up as incomplete:
/// (first ts, first frame, src, dst, ip id, fragments held, bytes held).
pub type Lost = (i64, i64, Addr, Addr, u32, i64, i64);

/// A datagram given up whose first fragment (offset 0) was captured
/// (`Reassembler::partial`).
pub struct Partial {
    pub ts_first: i64,
    pub ts_last: i64,
    pub frame_first: i64,
    pub frame_last: i64,
    pub src: Addr,
    pub dst: Addr,
    pub version: u8,
    /// upper protocol (IPv6: the next header of the fragmentable part)
    pub proto: i32,
    pub count: i64,
    /// contiguous captured bytes from offset 0
    pub data: Vec<u8>,
}

/// The contiguous captured bytes from offset 0 of pieces, taken in `order`
/// (sorted by offset).
fn contiguous(pieces: &[(i64, i64, Vec<u8>)], order: &[usize]) -> Vec<u8> {
    let mut out: Vec<u8> = Vec::new();
    for &i in order {
        let (off, length, data) = &pieces[i];
        let have = out.len() as i64;
        if *off > have {
            break;
        }
        let from = (have - off) as usize;
        if from < data.len() {
            out.extend_from_slice(&data[from..]);
        }
        if (data.len() as i64) < *length {
            break; // snaplen cut this fragment: the bytes after it are unknown
        }
    }
    out
}

fn sorted_order(pieces: &[(i64, i64, Vec<u8>)]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..pieces.len()).collect();
    order.sort_by_key(|&i| pieces[i].0); // stable, as Python's sorted
    order
}

/// Holds incomplete datagrams in the order they last received a fragment
/// (`order`, by a stamp taken at each fragment), so the one that waited
/// longest is the first: giving it up costs no search (insertion order).
pub struct Reassembler {
    timeout_ns: i64,
    max_pending: usize,
    max_bytes: i64,
    max_fragments: i64,
    max_lost: usize,
    pending: HashMap<FragKey, Pending>,
    order: BTreeMap<u64, FragKey>,
    next_stamp: u64,
    held: i64,
    pub stats: FragmentStats,
    pub lost: Vec<Lost>,
    pub partial: Vec<Partial>,
    last_sweep: i64,
}

/// What `Reassembler::add` gives back for a whole datagram.
pub struct Whole {
    pub captured: Vec<u8>,
    pub total: i64,
    pub count: i64,
    pub ts_first: i64,
    pub frame_first: i64,
    pub header: i32,
}

impl Reassembler {
    pub fn new(
        timeout_ns: i64,
        max_pending: usize,
        max_bytes: i64,
        max_fragments: i64,
        max_lost: usize,
    ) -> Reassembler {
        Reassembler {
            timeout_ns,
            max_pending,
            max_bytes,
            max_fragments,
            max_lost,
            held: 0,
            pending: HashMap::default(),
            order: BTreeMap::new(),
            next_stamp: 0,
            stats: FragmentStats::default(),
            lost: Vec::new(),
            partial: Vec::new(),
            last_sweep: 0,
        }
    }

    fn lose(&mut self, facts: &mut Facts, key: &FragKey, p: &Pending) {
        self.stats.incomplete += 1;
        self.held -= p.held;
        let s = facts.slot(key.1, key.2);
        facts.rows[s][F_INCOMPLETE] += 1;
        if self.lost.len() < self.max_lost {
            self.lost.push((
                p.ts_first,
                p.frame_first,
                key.1,
                key.2,
                key.3,
                p.count,
                p.got,
            ));
        }
        if p.pieces.iter().any(|(off, _, _)| *off == 0) {
            let order = sorted_order(&p.pieces);
            self.partial.push(Partial {
                ts_first: p.ts_first,
                ts_last: p.ts_last,
                frame_first: p.frame_first,
                frame_last: p.frame_last,
                src: key.1,
                dst: key.2,
                version: key.0,
                proto: if key.0 == 4 { key.4 } else { p.header },
                count: p.count,
                data: contiguous(&p.pieces, &order),
            });
        }
    }

    /// Take a datagram out of the table (and of its order).
    fn remove(&mut self, key: &FragKey) -> Pending {
        let p = self.pending.remove(key).unwrap();
        self.order.remove(&p.stamp);
        p
    }

    pub fn pending_is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Give up now the first held datagram from src to dst whose first
    /// fragment passes `test(ip version, upper protocol, its captured bytes)`
    /// (into `lost` and `partial`); false if none does.
    pub fn take_first(
        &mut self,
        facts: &mut Facts,
        src: Addr,
        dst: Addr,
        test: impl Fn(u8, i32, &[u8]) -> bool,
    ) -> bool {
        let found = self.order.values().find_map(|key| {
            if key.1 != src || key.2 != dst {
                return None;
            }
            let p = &self.pending[key];
            let proto = if key.0 == 4 { key.4 } else { p.header };
            p.pieces
                .iter()
                .any(|(off, _, data)| *off == 0 && test(key.0, proto, data))
                .then_some(*key)
        });
        match found {
            Some(key) => {
                let p = self.remove(&key);
                self.lose(facts, &key, &p);
                true
            }
            None => false,
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub fn add(
        &mut self,
        facts: &mut Facts,
        key: FragKey,
        offset: i64,
        wire_len: i64,
        captured: &[u8],
        more: bool,
        ts: i64,
        frame: i64,
        header: i32,
        ttl: i64,
        ip_len: i64,
    ) -> Option<Whole> {
        self.stats.fragments += 1;
        let slot = facts.slot(key.1, key.2);
        facts.count_packet(slot, ip_len, ttl);
        facts.rows[slot][F_FRAGMENTS] += 1;
        if ts - self.last_sweep > 1_000_000_000 {
            self.sweep(facts, ts);
        }
        let stamp = self.next_stamp;
        self.next_stamp += 1;
        if let Some(p) = self.pending.get_mut(&key) {
            if p.seen.contains(&(offset, wire_len)) {
                self.stats.repeats += 1; // the same fragment again: nothing new
                return None;
            }
            self.order.remove(&p.stamp);
            p.stamp = stamp;
            self.order.insert(stamp, key);
        } else {
            if self.pending.len() >= self.max_pending {
                self.evict_oldest(facts);
            }
            self.pending.insert(
                key,
                Pending {
                    pieces: Vec::new(),
                    seen: HashSet::default(),
                    stamp,
                    total: -1,
                    got: 0,
                    ts_first: ts,
                    ts_last: ts,
                    frame_first: frame,
                    frame_last: frame,
                    count: 0,
                    header: 0,
                    held: 0,
                },
            );
            self.order.insert(stamp, key);
        }
        let p = self.pending.get_mut(&key).unwrap();
        p.ts_last = ts;
        p.frame_last = frame;
        p.count += 1;
        if offset == 0 && header != 0 {
            p.header = header;
        }
        if !more {
            p.total = offset + wire_len;
        }
        p.pieces.push((offset, wire_len, captured.to_vec()));
        p.seen.insert((offset, wire_len));
        p.got += wire_len;
        p.held += captured.len() as i64;
        self.held += captured.len() as i64;
        if p.count > self.max_fragments || self.held > self.max_bytes {
            self.stats.given_up += 1;
            let p = self.remove(&key);
            self.lose(facts, &key, &p);
            while self.held > self.max_bytes && !self.pending.is_empty() {
                self.stats.given_up += 1;
                self.evict_oldest(facts);
            }
            return None;
        }
        let p = self.pending.get_mut(&key).unwrap();
        if p.total < 0 || p.got < p.total {
            return None; // cannot be whole yet
        }
        let order = sorted_order(&p.pieces);
        let mut covered = 0i64;
        for &i in &order {
            let (off, length, _) = &p.pieces[i];
            if *off > covered {
                return None; // a hole remains
            }
            if *off < covered {
                self.stats.overlaps += 1;
            }
            covered = covered.max(off + length);
        }
        if covered < p.total {
            return None;
        }
        let p = self.remove(&key);
        self.held -= p.held;
        self.stats.reassembled += 1;
        facts.rows[slot][F_REASSEMBLED] += 1;
        // Captured payload: contiguous captured bytes from offset 0.
        Some(Whole {
            captured: contiguous(&p.pieces, &order),
            total: p.total,
            count: p.count,
            ts_first: p.ts_first,
            frame_first: p.frame_first,
            header: p.header,
        })
    }

    /// Give up the datagrams without a fragment for timeout_ns, from the
    /// first held (the one that waited longest) to the first that has not.
    fn sweep(&mut self, facts: &mut Facts, now: i64) {
        self.last_sweep = now;
        while let Some((_, &key)) = self.order.first_key_value() {
            if now - self.pending[&key].ts_last <= self.timeout_ns {
                break;
            }
            let p = self.remove(&key);
            self.lose(facts, &key, &p);
        }
    }

    /// Give up the datagram that waited longest for a fragment.
    fn evict_oldest(&mut self, facts: &mut Facts) {
        if let Some((_, &key)) = self.order.first_key_value() {
            let p = self.remove(&key);
            self.lose(facts, &key, &p);
        }
    }

    /// End of capture: whatever is still held stays incomplete.
    pub fn finish(&mut self, facts: &mut Facts) {
        let order = std::mem::take(&mut self.order);
        for key in order.into_values() {
            let p = self.pending.remove(&key).unwrap();
            self.lose(facts, &key, &p);
        }
    }
}

/// data[start:end] with Python's clamping (start, end >= 0 here).
pub fn clamp_slice(data: &[u8], start: i64, end: i64) -> &[u8] {
    let n = data.len() as i64;
    let s = start.clamp(0, n);
    let e = end.clamp(0, n);
    if e <= s {
        &data[0..0]
    } else {
        &data[s as usize..e as usize]
    }
}

/// IPv4 header at data[off..]; wire_len = bytes of the frame from off on the wire.
pub fn parse_ipv4<'a>(
    data: &'a [u8],
    off: usize,
    wire_len: i64,
    ts: i64,
    frame: i64,
    reasm: &mut Reassembler,
    facts: &mut Facts,
) -> Option<Datagram<'a>> {
    if data.len() < off + 20 {
        return None;
    }
    let vihl = data[off];
    let ihl = ((vihl & 0x0F) as usize) * 4;
    if vihl >> 4 != 4 || ihl < 20 || data.len() < off + ihl {
        return None;
    }
    let mut tot_len = u16::from_be_bytes([data[off + 2], data[off + 3]]) as i64;
    if tot_len == 0 {
        tot_len = wire_len; // TSO-sized packets captured before segmentation
    } else if tot_len > wire_len && wire_len >= ihl as i64 {
        reasm.stats.length_exceeds_frame += 1; // longer than the frame on the wire: a lie
        tot_len = wire_len;
    }
    if tot_len < ihl as i64 {
        return None;
    }
    let flags_frag = u16::from_be_bytes([data[off + 6], data[off + 7]]);
    let proto = data[off + 9] as i32;
    let src = Addr::new(&data[off + 12..off + 16]);
    let dst = Addr::new(&data[off + 16..off + 20]);
    let start = (off + ihl) as i64;
    let end = off as i64 + tot_len;
    let payload = clamp_slice(data, start, end);
    if flags_frag & 0x3FFF == 0 {
        let ttl = data[off + 8] as i64;
        return Some(Datagram {
            src,
            dst,
            proto,
            payload: Cow::Borrowed(payload),
            wire_len: tot_len - ihl as i64,
            frags: 1,
            ts_first: ts,
            frame_first: frame,
            ttl,
            ip_len: tot_len,
        });
    }
    let ip_id = u16::from_be_bytes([data[off + 4], data[off + 5]]) as u32;
    let w = reasm.add(
        facts,
        (4, src, dst, ip_id, proto),
        ((flags_frag & 0x1FFF) as i64) * 8,
        tot_len - ihl as i64,
        payload,
        flags_frag & 0x2000 != 0,
        ts,
        frame,
        0,
        data[off + 8] as i64,
        tot_len,
    )?;
    Some(Datagram {
        src,
        dst,
        proto,
        payload: Cow::Owned(w.captured),
        wire_len: w.total,
        frags: w.count,
        ts_first: w.ts_first,
        frame_first: w.frame_first,
        ttl: -1,
        ip_len: 0,
    })
}

pub fn parse_ipv6<'a>(
    data: &'a [u8],
    off: usize,
    wire_len: i64,
    ts: i64,
    frame: i64,
    reasm: &mut Reassembler,
    facts: &mut Facts,
) -> Option<Datagram<'a>> {
    if data.len() < off + 40 || data[off] >> 4 != 6 {
        return None;
    }
    let mut plen = u16::from_be_bytes([data[off + 4], data[off + 5]]) as i64;
    if plen == 0 {
        plen = wire_len - 40; // jumbogram or TSO: trust the frame length
    } else if plen > wire_len - 40 && wire_len - 40 >= 0 {
        reasm.stats.length_exceeds_frame += 1; // longer than the frame on the wire: a lie
        plen = wire_len - 40;
    }
    let nh = data[off + 6] as i32;
    let src = Addr::new(&data[off + 8..off + 24]);
    let dst = Addr::new(&data[off + 24..off + 40]);
    let end = off as i64 + 40 + plen;
    let (nh, pos, frag) = walk_extensions(data, nh, off as i64 + 40, end);
    if nh < 0 {
        return None;
    }
    let hop_limit = data[off + 7] as i64;
    match frag {
        None => Some(Datagram {
            src,
            dst,
            proto: nh,
            payload: Cow::Borrowed(clamp_slice(data, pos, end)),
            wire_len: end - pos,
            frags: 1,
            ts_first: ts,
            frame_first: frame,
            ttl: hop_limit,
            ip_len: 40 + plen,
        }),
        Some((frag_off, more, ident)) => {
            let w = reasm.add(
                facts,
                (6, src, dst, ident, -1),
                frag_off,
                end - pos,
                clamp_slice(data, pos, end),
                more,
                ts,
                frame,
                nh,
                hop_limit,
                40 + plen,
            )?;
            // Headers after the fragment header travel in the first fragment's payload.
            let (nh2, pos2, _) = walk_extensions(&w.captured, w.header, 0, w.total);
            if nh2 < 0 {
                return None;
            }
            let payload = clamp_slice(&w.captured, pos2, w.captured.len() as i64).to_vec();
            Some(Datagram {
                src,
                dst,
                proto: nh2,
                payload: Cow::Owned(payload),
                wire_len: w.total - pos2,
                frags: w.count,
                ts_first: w.ts_first,
                frame_first: w.frame_first,
                ttl: -1,
                ip_len: 0,
            })
        }
    }
}

/// Step over IPv6 extension headers: (upper protocol, its offset, fragment
/// info (offset, more, ident)); protocol -1 when they run past the captured bytes.
pub fn walk_extensions(
    data: &[u8],
    mut nh: i32,
    mut pos: i64,
    end: i64,
) -> (i32, i64, Option<(i64, bool, u32)>) {
    let n = data.len() as i64;
    let mut frag = None;
    loop {
        if nh == IPV6_HOPOPTS || nh == IPV6_ROUTING || nh == IPV6_DSTOPTS || nh == IPV6_MOBILITY {
            if n < pos + 2 {
                return (-1, pos, frag);
            }
            let p = pos as usize;
            nh = data[p] as i32;
            pos += (data[p + 1] as i64 + 1) * 8;
        } else if nh == IPV6_FRAGMENT {
            if n < pos + 8 {
                return (-1, pos, frag);
            }
            let p = pos as usize;
            let offm = u16::from_be_bytes([data[p + 2], data[p + 3]]) as i64;
            let ident = u32::from_be_bytes([data[p + 4], data[p + 5], data[p + 6], data[p + 7]]);
            // An "atomic fragment" (offset 0, M clear) is a whole datagram.
            if offm & 0xFFF9 != 0 {
                frag = Some((offm & 0xFFF8, offm & 1 != 0, ident));
            }
            nh = data[p] as i32;
            pos += 8;
            if frag.is_some() {
                return (nh, pos, frag);
            }
        } else if nh == IPV6_AH {
            if n < pos + 2 {
                return (-1, pos, frag);
            }
            let p = pos as usize;
            nh = data[p] as i32;
            pos += (data[p + 1] as i64 + 2) * 4;
        } else {
            return if pos <= end {
                (nh, pos, frag)
            } else {
                (-1, pos, frag)
            };
        }
    }
}
