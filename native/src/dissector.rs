//! The transport layer: mirror copies, TCP
//! connections and streams (handshake, windows and round trips through
//! `tcp_state`, reassembly and record marking through `tcp`), UDP datagrams
//! (fragments given up included), per-direction facts; messages and events go
//! to its `Collector` (collector.rs).  The frame loop (frame_loop.rs) feeds it.

use crate::capture::{Frame, Merge};
use crate::collector::Collector;
use crate::ip::{self, Addr, Datagram, Facts, Reassembler};
use crate::link::locate_ip;
use crate::maps::{HashMap, HashSet, IndexMap};
use crate::rpc;
use crate::stats::FrameCounts;
use crate::tables::{
    is_rpc_well_known_port as well_known, MAX_RECENT_FRAMES, SEQ_HALF, SEQ_MASK, SYN_WINDOW,
    TH_ACK, TH_FIN, TH_RST, TH_SYN,
};
use crate::tcp::{Assembled, Ev, HalfStream, Limits, Sink, TcpReassembler, RTT_MAX_SEGMENT};
use crate::tcp_state::{
    ack_rtt_sample, close_stretches, end_window_full, ip_extremes, on_syn, retire, send_gap, watch,
    window_reached,
};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// Where the UDP header starts in an IP datagram's first fragment (IPv6: after
/// the extension headers); -1 if not UDP (dissector._udp_offset).
fn udp_offset(version: u8, proto: i32, data: &[u8]) -> i64 {
    if version == 4 {
        return if proto == ip::PROTO_UDP { 0 } else { -1 };
    }
    let (nh, pos, _) = ip::walk_extensions(data, proto, 0, data.len() as i64);
    if nh == ip::PROTO_UDP {
        pos
    } else {
        -1
    }
}

/// Limits and settings from ParseLimits (and capture.MAX_INTERFACE_DROPS,
/// config.CHECK_EVERY_FRAMES).
pub struct Settings {
    pub tcp: Limits,
    pub max_frame_bytes: usize,
    /// capture.MAX_INTERFACE_DROPS
    pub max_interface_drops: u64,
    /// ParseLimits.max_messages, checked every config.CHECK_EVERY_FRAMES frames
    pub max_messages: i64,
    pub check_every_frames: i64,
    pub ip_reassembly_timeout_ns: i64,
    pub max_ip_reassemblies: usize,
    pub max_ip_reassembly_bytes: i64,
    pub max_fragments_per_datagram: i64,
    pub max_pending_calls: usize,
    pub max_connections: usize,
    pub max_directions: usize,
    pub max_events_per_kind: usize,
    pub duplicate_window_ns: i64,
    pub send_gap_ns: i64,
    /// ParseLimits.partitions / partition: read only the frames of this
    /// partition of the host pairs (ip::partition_of)
    pub partitions: usize,
    pub partition: usize,
    /// ParseLimits.buckets: the partition of each CRC bucket (empty: CRC % partitions)
    pub buckets: Vec<usize>,
}

type StreamKey = (Addr, i32, Addr, i32);

/// Slots of `Dissector::recent_streams`: more than the directions a capture
/// has active at once, few enough to stay in the L1 cache (16 KiB).
const RECENT_STREAMS: usize = 256;

/// The slot of a stream in `recent_streams`: its ports and its addresses'
/// last bytes mixed (no full hash: the slot is only a guess, checked against
/// the whole key).  A client's connections differ in their port, which the
/// client numbers in sequence: they fall in different slots.
#[inline]
fn recent_slot(key: &StreamKey) -> usize {
    let last = |a: &Addr| a.as_bytes().last().copied().unwrap_or(0) as u32;
    let x = (key.1 as u32) ^ (key.3 as u32).rotate_left(7) ^ last(&key.0) << 3 ^ last(&key.2) << 11;
    (x ^ x >> 8) as usize % RECENT_STREAMS
}

/// The transport layer (dissector.Dissector).
pub struct Dissector {
    settings_dup_window: i64,
    send_gap_ns: i64,
    pub col: Collector,
    pub facts: Facts,
    pub reasm: Reassembler,
    pub tcp: TcpReassembler,
    arena: Vec<HalfStream>,
    /// arena slots of forgotten streams, reused by new ones (the arena never
    /// shrinks: without reuse, a capture of many connections would keep every
    /// stream it ever saw, buffers and all)
    free: Vec<usize>,
    /// arena slots whose pages are made ready (`arena_room`)
    arena_ready: usize,
    streams: IndexMap<StreamKey, usize>,
    /// the streams of recent segments (a subset of `streams`, each in the slot
    /// `recent_slot` gives it): a capture of many connections, tens of
    /// thousands of them in `streams`, looked each segment's stream up there,
    /// a hash of its 40-byte key and a probe of tables larger than the L2
    /// cache (6% of the parse of a metadata capture of 37,000 connections)
    recent_streams: Box<[Option<(StreamKey, usize)>]>,
    conns: IndexMap<StreamKey, i64>,
    /// UDP flows: frame number of their last RPC message
    udp_seen: HashMap<StreamKey, i64>,
    pub(crate) tracked_conns: HashSet<i64>,
    max_connections: usize,
    pub n_forgotten: i64,
    pub n_cut: i64,
    /// SYN segments dropped: a bad checksum / inside an established window
    pub(crate) bad_checksum: i64,
    pub(crate) syn_in_window: i64,
    pub(crate) lost_listed: i64,
    n_conns: i64,
    /// the frame that began each connection id (from 1): ParseStats.connection_frames
    pub conn_frames: Vec<i64>,
    pub n_tcp_conns: i64,
    pub n_dup: i64,
    pub n_frames: i64,
    pub(crate) max_messages: i64,
    partitions: usize,
    partition: usize,
    buckets: Vec<usize>,
    pub(crate) check_every_frames: i64,
    /// the frame not read: max_messages reached (0: read to the end)
    pub stopped_at: i64,
    ts: i64,
    pub counts: FrameCounts,
    // frames of the last duplicate window by fingerprint (time, what is held
    // of its bytes), in two generations (dissector.Dissector.frames), and
    // when the current one began
    recent: HashMap<u64, (i64, Held)>,
    older: HashMap<u64, (i64, Held)>,
    since: Option<i64>,
    /// the mapped files that `Held::At` frames are in (a few: files no frame
    /// held is in are let go)
    files: Vec<(u32, Arc<File>)>,
    /// `files` looked over for files to let go when it grows to this
    files_bound: usize,
    /// an earlier frame's bytes read again from its file
    scratch: Vec<u8>,
}

/// What the mirror-copy check holds of a frame: never a copy of its bytes.
#[derive(Clone, Copy)]
enum Held {
    /// a frame read from a stream (a decompressed file): its `frame_hash`
    Hash(u128),
    /// a frame of a mapped file: where its bytes are, compared again when a
    /// frame of the same fingerprint comes (from the mapped window when still
    /// there, else read from the file)
    At { file: u32, len: u32, offset: u64 },
}

/// The mirror-copy check's hash of a frame's bytes: XXH3's 128 bits with its
/// fixed seed and secret (the same in every run, so every run finds the same
/// copies), held in place of a copy of a frame read from a stream (a frame
/// of a mapped file is held by where it is: `Held::At`).
///
/// A frame is taken for a copy of an earlier one when their fingerprints
/// (length and five bytes) and these hashes are equal.  Frames that differ
/// with the same fingerprint and hash are a chance of about 2^-128 per
/// comparison (XXH3-128 passes SMHasher's collision tests: its output is as
/// good as random for frames not crafted against it): each frame is compared
/// with at most two remembered frames (one per generation, the latest of its
/// fingerprint) and a generation holds at most MAX_RECENT_FRAMES (4,096), so
/// even 10^12 frames, at two comparisons each, leave the odds of one frame
/// wrongly skipped below 10^-26.  The hash is not a cryptographic one:
/// someone who writes the capture could make two different frames collide,
/// and the later one would be skipped as a copy (as they could drop it from
/// the capture in the first place).
pub(crate) fn frame_hash(data: &[u8]) -> u128 {
    xxhash_rust::xxh3::xxh3_128(data)
}

impl Dissector {
    pub fn new(s: Settings) -> Self {
        Dissector {
            settings_dup_window: s.duplicate_window_ns,
            send_gap_ns: s.send_gap_ns,
            col: Collector::new(s.max_pending_calls, s.max_events_per_kind),
            facts: Facts::new(s.max_directions),
            reasm: Reassembler::new(
                s.ip_reassembly_timeout_ns,
                s.max_ip_reassemblies.max(1),
                s.max_ip_reassembly_bytes,
                s.max_fragments_per_datagram,
                s.max_events_per_kind,
            ),
            tcp: TcpReassembler::new(s.tcp),
            arena: Vec::new(),
            free: Vec::new(),
            arena_ready: 0,
            streams: IndexMap::default(),
            recent_streams: vec![None; RECENT_STREAMS].into_boxed_slice(),
            conns: IndexMap::default(),
            udp_seen: HashMap::default(),
            tracked_conns: Default::default(),
            max_connections: s.max_connections.max(1),
            n_forgotten: 0,
            n_cut: 0,
            bad_checksum: 0,
            syn_in_window: 0,
            lost_listed: 0,
            n_conns: 0,
            conn_frames: Vec::new(),
            n_tcp_conns: 0,
            n_dup: 0,
            n_frames: 0,
            max_messages: s.max_messages,
            partitions: s.partitions.max(1),
            partition: s.partition,
            buckets: s.buckets.clone(),
            check_every_frames: s.check_every_frames.max(1),
            stopped_at: 0,
            ts: 0,
            counts: FrameCounts::default(),
            recent: HashMap::default(),
            older: HashMap::default(),
            since: None,
            files: Vec::new(),
            files_bound: 8,
            scratch: Vec::new(),
        }
    }

    /// One frame (of file `from.1` of the merge `from.0`, None: a frame
    /// from nowhere to read it again, as in the tests): skip mirror copies,
    /// then the layers.
    pub fn frame(
        &mut self,
        f: &Frame,
        data: &[u8],
        from: Option<(&Merge, usize)>,
        progress: &mut dyn FnMut(i64),
    ) {
        self.n_frames += 1;
        let frame_no = self.n_frames;
        let ts = f.ts;
        self.ts = ts;
        if frame_no & 0x3FFF == 0 {
            progress(frame_no);
        }
        // dissector.Dissector.frames: length, last two bytes, bytes 19, 25, 51
        let n = data.len();
        let fp = if n >= 52 {
            n as u64
                | (data[n - 1] as u64) << 20
                | (data[n - 2] as u64) << 28
                | (data[19] as u64) << 36
                | (data[25] as u64) << 44
                | (data[51] as u64) << 52
        } else {
            n as u64
        };
        // a frame of a mapped file is held by where it is; its hash is
        // taken only when needed (a frame of a stream, or one compared with
        // such a frame): hashing every frame would read every byte of the
        // capture, where the parse reads the headers of a frame (and its
        // last two bytes) and a mapped file's other bytes are never touched
        let origin = from.and_then(|(m, i)| m.origin(i, f).map(|(at, file)| (i, at, file)));
        let mut hash = None;
        let window = self.settings_dup_window;
        // one partition of the host pairs (ParseLimits.partitions): every
        // frame is looked at for copies, only the partition's are read
        let mine = self.partitions == 1 || {
            let (ver, off) = locate_ip(f.linktype, data);
            ip::partition_of(ver, data, off, self.partitions, &self.buckets) == self.partition
        };
        let (a, b) = (self.recent.get(&fp).copied(), self.older.get(&fp).copied());
        if self.same(a, ts, data, &mut hash, from) || self.same(b, ts, data, &mut hash, from) {
            if mine {
                self.n_dup += 1;
                self.duplicate_event(f, data, frame_no);
            }
            return;
        }
        if self.since.is_none_or(|t| ts - t > window) || self.recent.len() >= MAX_RECENT_FRAMES {
            std::mem::swap(&mut self.recent, &mut self.older);
            self.recent.clear();
            self.since = Some(ts);
        }
        let held = match origin {
            Some((i, offset, file)) if data.len() <= u32::MAX as usize => {
                let i = i as u32;
                if self.files.last().is_none_or(|(j, _)| *j != i) {
                    self.hold_file(i, file);
                }
                Held::At {
                    file: i,
                    len: data.len() as u32,
                    offset,
                }
            }
            _ => Held::Hash(hash.unwrap_or_else(|| frame_hash(data))),
        };
        self.recent.insert(fp, (ts, held));
        if mine {
            self.layers(f, data, frame_no);
        }
    }

    /// Is `data` (at `ts`) a copy of the frame held in `e`: within the
    /// window, the same bytes (or, for a frame of a stream, the same hash).
    fn same(
        &mut self,
        e: Option<(i64, Held)>,
        ts: i64,
        data: &[u8],
        hash: &mut Option<u128>,
        from: Option<(&Merge, usize)>,
    ) -> bool {
        let Some((t, held)) = e else {
            return false;
        };
        if ts - t > self.settings_dup_window {
            return false;
        }
        match held {
            Held::Hash(h) => *hash.get_or_insert_with(|| frame_hash(data)) == h,
            Held::At { file, len, offset } => {
                if len as usize != data.len() {
                    return false;
                }
                if let Some(b) =
                    from.and_then(|(m, _)| m.bytes_at(file as usize, offset, data.len()))
                {
                    return b == data;
                }
                // no longer mapped: read again from the file
                let Some((_, f)) = self.files.iter().find(|(j, _)| *j == file) else {
                    return false; // (every file a frame is held in is kept)
                };
                self.scratch.resize(data.len(), 0);
                f.read_exact_at(&mut self.scratch, offset).is_ok() && self.scratch == data
            }
        }
    }

    /// Keep file `i` open for the frames held in it (`Held::At`); past a few
    /// files, those no frame held is in are let go (rotated files are read
    /// one after another: each is held only until its frames age out; files
    /// read side by side are all held: the bound doubles past them).
    fn hold_file(&mut self, i: u32, file: &Arc<File>) {
        if let Some(k) = self.files.iter().position(|(j, _)| *j == i) {
            let held = self.files.remove(k);
            self.files.push(held); // the current file last
            return;
        }
        if self.files.len() >= self.files_bound {
            let used: HashSet<u32> = self
                .recent
                .values()
                .chain(self.older.values())
                .filter_map(|(_, h)| match h {
                    Held::At { file, .. } => Some(*file),
                    Held::Hash(_) => None,
                })
                .collect();
            self.files.retain(|(j, _)| used.contains(j));
            self.files_bound = (2 * self.files.len()).max(8);
        }
        self.files.push((i, Arc::clone(file)));
    }

    /// Into its direction's facts: the slot (None: reassembled from fragments,
    /// which were counted one by one).
    pub(crate) fn count_packet(&mut self, dg: &Datagram) -> Option<usize> {
        if dg.ttl >= 0 {
            let s = self.facts.slot(dg.src, dg.dst);
            self.facts.count_packet(s, dg.ip_len, dg.ttl);
            return Some(s);
        }
        None
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn tcp_segment(
        &mut self,
        dg: &Datagram,
        ts: i64,
        frame: i64,
        sport: i32,
        dport: i32,
        seq: i64,
        ack: i64,
        flags: u8,
        window: i64,
        hl: usize,
    ) {
        let seg: &[u8] = &dg.payload;
        let key = (dg.src, sport, dg.dst, dport);
        let mut h = match self.stream_of(&key) {
            Some(h) => h,
            None => self.new_stream(None, dg, sport, dport, ts, frame),
        };
        let slot = self.arena[h].ip.facts;
        // this segment's checksum: right, bad, or None: not verified
        let mut csum = None;
        if self.facts.rows[slot][ip::F_CSUM_CHECKED] < ip::CHECKSUM_SAMPLE
            && dg.ttl >= 0
            && seg.len() as i64 == dg.wire_len
        {
            csum = self
                .facts
                .sample_checksum(slot, dg.src, dg.dst, ip::PROTO_TCP, seg);
        }
        if flags & TH_SYN != 0 && self.arena[h].framing.synced {
            if self.syn_dropped(h, dg, seq, csum) {
                return;
            }
            if flags & TH_ACK == 0 {
                h = self.new_stream(Some(h), dg, sport, dport, ts, frame);
            }
        }
        let ip_len = dg.ip_len;
        {
            let hs = &mut self.arena[h];
            hs.seen = frame;
            let ipf = &mut hs.ip;
            ipf.packets += 1;
            ipf.ip_bytes += ip_len;
            if ip_len > ipf.max_ip_len || dg.ttl != ipf.ttl {
                ip_extremes(&mut self.facts, ipf, ip_len, dg.ttl);
            }
        }
        let rev_i = self.arena[h].rev;
        if flags & TH_SYN != 0 {
            {
                let hs = &mut self.arena[h];
                self.tcp.start(hs, seq, &mut self.col);
            }
            let tracked = on_syn(
                &mut self.col,
                &mut self.arena,
                h,
                rev_i,
                seg,
                hl,
                flags,
                seq,
                ack,
                window,
                ts,
                frame,
            );
            if tracked {
                self.tracked_conns.insert(self.arena[h].conn);
            }
        } else if self.arena[h].win.watch || window == 0 {
            watch(
                &mut self.col,
                &mut self.arena[h],
                flags,
                window,
                seq,
                ts,
                frame,
            );
        }
        if flags & TH_ACK != 0 {
            if let Some(r) = rev_i {
                let wshift = self.arena[h].win.wshift;
                let rev = &mut self.arena[r];
                if rev.rtt.end >= 0 && ((ack - rev.rtt.end) & SEQ_MASK) < SEQ_HALF {
                    ack_rtt_sample(&mut rev.rtt, ts);
                }
                let acks = &mut rev.acks;
                if acks.hi < 0 || ((ack - acks.hi) & SEQ_MASK) < SEQ_HALF {
                    acks.hi = ack;
                    while let Some(&(end, row)) = acks.due.front() {
                        if ((ack - end) & SEQ_MASK) >= SEQ_HALF {
                            break;
                        }
                        acks.due.pop_front();
                        self.col.acked_rows.push(row);
                        self.col.acked_ts.push(ts);
                    }
                    while let Some(&(end, seq, length)) = rev.acks.records.front() {
                        if ((ack - end) & SEQ_MASK) >= SEQ_HALF {
                            break;
                        }
                        rev.acks.records.pop_front();
                        self.col
                            .event(rev, Ev::RpcUnframedAcked, ts, frame, seq, length, 0);
                    }
                    let gaps = &mut rev.gaps;
                    if gaps.acked < 0
                        && gaps.last_ts >= 0
                        && ((ack - rev.rtt.hi) & SEQ_MASK) < SEQ_HALF
                    {
                        gaps.acked = ts; // everything the peer sent is acknowledged
                    }
                }
                if !rev.order.pending.is_empty() {
                    self.tcp.acked(rev, ack, ts, frame, &mut self.col);
                }
                let w = &mut rev.win;
                if w.wtrack && (ack != w.wack || window != w.wwin) && flags & TH_SYN == 0 {
                    // The peer (rev) fills our window when its data reaches wlimit.
                    w.wack = ack;
                    w.wwin = window;
                    let wnd = window << wshift.max(0);
                    w.peer_wnd = wnd;
                    let limit = (ack + wnd - w.mss) & SEQ_MASK;
                    w.wlimit = limit;
                    if w.wfull_since >= 0 && ((w.seq_hi - limit) & SEQ_MASK) >= SEQ_HALF {
                        end_window_full(&mut self.col, rev, ts);
                    }
                }
            }
        }
        let wire = dg.wire_len - hl as i64;
        if wire > 0 {
            let hs = &mut self.arena[h];
            if wire > hs.acks.max_seg {
                hs.acks.max_seg = wire;
            }
            let end = (seq + wire) & SEQ_MASK;
            if hs.gaps.last_ts >= 0 && ts - hs.gaps.last_ts >= self.send_gap_ns {
                let before = (hs.rtt.hi - seq) & SEQ_MASK;
                let resent = hs.rtt.hi >= 0 && before > 0 && before < SEQ_HALF;
                if hs.gaps.mid || resent {
                    send_gap(&mut self.col, hs, ts, seq, resent);
                }
            }
            let rtt = &mut hs.rtt;
            if rtt.end >= 0 {
                let before = (rtt.end - seq) & SEQ_MASK;
                if before > 0 && before < SEQ_HALF {
                    // bytes re-sent: no sample (Karn: which copy the ACK answers is unknown)
                    rtt.end = -1;
                }
            } else if wire <= RTT_MAX_SEGMENT
                && rtt.hi >= 0
                && ((seq - rtt.hi) & SEQ_MASK) < SEQ_HALF
            {
                rtt.end = end; // all new bytes: time this segment
                rtt.start = [ts, frame, seq, wire];
            }
            if rtt.hi < 0 || ((end - rtt.hi) & SEQ_MASK) < SEQ_HALF {
                rtt.hi = end;
            }
            let w = &mut hs.win;
            if w.wtrack && ((seq + wire - w.wlimit) & SEQ_MASK) < SEQ_HALF {
                window_reached(w, seq, (seq + wire) & SEQ_MASK, ts, frame);
            }
            let payload = if hl < seg.len() {
                &seg[hl..]
            } else {
                &seg[seg.len()..]
            };
            self.tcp.segment(
                hs,
                seq,
                payload,
                wire,
                dg.ts_first,
                frame,
                dg.frags,
                &mut self.col,
            );
            let mid = hs.part_sent();
            let gaps = &mut hs.gaps;
            gaps.last_ts = ts;
            gaps.last_frame = frame;
            gaps.mid = mid;
            gaps.acked = -1;
            gaps.flight = if hs.acks.hi >= 0 {
                (hs.rtt.hi - hs.acks.hi) & SEQ_MASK
            } else {
                -1
            };
        }
        if flags & (TH_FIN | TH_RST) != 0 {
            self.end_of_stream(h, flags, ts, frame);
        }
    }

    /// The stream of this key, if there is one: from `recent_streams` when
    /// it is there, else from `streams` (and then kept in its slot).
    #[inline]
    fn stream_of(&mut self, key: &StreamKey) -> Option<usize> {
        let slot = &mut self.recent_streams[recent_slot(key)];
        if let Some((k, h)) = slot {
            if k == key {
                return Some(*h);
            }
        }
        let h = self.streams.get(key).copied()?;
        *slot = Some((*key, h));
        Some(h)
    }

    /// A segment with SYN set on a direction that has carried RPC records:
    /// true when the receiver would have dropped it (dissector.Dissector._syn_dropped).
    fn syn_dropped(&mut self, h: usize, dg: &Datagram, seq: i64, mut csum: Option<bool>) -> bool {
        let seg: &[u8] = &dg.payload;
        let f = &self.facts.rows[self.arena[h].ip.facts];
        let good = f[ip::F_CSUM_CHECKED] - f[ip::F_CSUM_BAD];
        let mut bad = f[ip::F_CSUM_BAD];
        if csum == Some(false) {
            bad -= 1; // counted in the sample
        } else if csum.is_none() && dg.ttl >= 0 && seg.len() as i64 == dg.wire_len {
            csum = Some(ip::checksum_ok(dg.src, dg.dst, ip::PROTO_TCP, seg));
        }
        if csum == Some(false) && good > 4 * bad {
            self.bad_checksum += 1;
            self.count_packet(dg);
            return true;
        }
        let hs = &self.arena[h];
        let rev_ended = hs.rev.is_some_and(|r| self.arena[r].ended);
        let next_seq = hs.order.next_seq;
        if hs.ended || rev_ended || next_seq < 0 {
            return false;
        }
        let wnd = hs.win.peer_wnd.max(SYN_WINDOW);
        let d = (seq + 1 - next_seq) & SEQ_MASK;
        if d <= wnd || SEQ_MASK + 1 - d <= wnd {
            self.syn_in_window += 1;
            self.count_packet(dg);
            return true;
        }
        false
    }

    /// A FIN (this direction is done) or RST (both are).
    fn end_of_stream(&mut self, h: usize, flags: u8, ts: i64, frame: i64) {
        self.tcp.flush(&mut self.arena[h], ts, frame, &mut self.col);
        self.arena[h].ended = true;
        if flags & TH_RST != 0 {
            close_stretches(&mut self.col, &mut self.arena[h], ts);
            if let Some(r) = self.arena[h].rev {
                self.arena[r].ended = true;
                self.tcp.flush(&mut self.arena[r], ts, frame, &mut self.col);
                close_stretches(&mut self.col, &mut self.arena[r], ts);
            }
        }
    }

    /// A direction not seen before, or a new SYN on ports in use.
    fn new_stream(
        &mut self,
        old: Option<usize>,
        dg: &Datagram,
        sport: i32,
        dport: i32,
        ts: i64,
        frame: i64,
    ) -> usize {
        let key = (dg.src, sport, dg.dst, dport);
        let rkey = (dg.dst, dport, dg.src, sport);
        let ckey = if key < rkey { key } else { rkey };
        let mut conn = self.conns.get(&ckey).copied().unwrap_or(0);
        if old.is_some() || conn == 0 {
            if conn == 0 && self.conns.len() >= self.max_connections {
                self.forget_idlest(ts, frame);
            }
            self.n_conns += 1;
            self.n_tcp_conns += 1;
            conn = self.n_conns;
            self.conn_frames.push(frame);
            self.conns.insert(ckey, conn);
            let rev = self.streams.get(&rkey).copied();
            if let Some(o) = old {
                self.tcp.flush(&mut self.arena[o], ts, frame, &mut self.col);
                retire(&mut self.col, &mut self.facts, &mut self.arena[o], ts);
                if let Some(r) = rev {
                    self.tcp.flush(&mut self.arena[r], ts, frame, &mut self.col);
                    retire(&mut self.col, &mut self.facts, &mut self.arena[r], ts);
                    let (rs, rsp, rd, rdp, rf) = {
                        let x = &self.arena[r];
                        (x.src, x.sport, x.dst, x.dport, x.ip.facts)
                    };
                    // in its slot: the stream it replaces is gone (streams[rkey] is r)
                    self.arena[r] = HalfStream::new(rs, rsp, rd, rdp, conn, rf);
                }
            }
        }
        let facts = match old {
            Some(o) => self.arena[o].ip.facts,
            None => self.facts.slot(dg.src, dg.dst),
        };
        let hs = HalfStream::new(dg.src, sport, dg.dst, dport, conn, facts);
        let h = if let Some(o) = old {
            self.arena[o] = hs; // replaces the old stream in its slot
            o
        } else if let Some(f) = self.free.pop() {
            self.arena[f] = hs;
            f
        } else {
            self.arena_room();
            self.arena.push(hs);
            self.arena.len() - 1
        };
        self.streams.insert(key, h);
        self.recent_streams[recent_slot(&key)] = Some((key, h));
        if let Some(&r) = self.streams.get(&rkey) {
            self.arena[h].rev = Some(r);
            self.arena[r].rev = Some(h);
        }
        h
    }

    /// Room in the arena for the next new streams, its pages faulted in at
    /// once: tens of thousands of streams (872 bytes each) written one by one
    /// into fresh pages took a page fault every few streams (6% of the parse
    /// of a metadata capture of 37,000 connections).
    #[inline]
    fn arena_room(&mut self) {
        let len = self.arena.len();
        if len < self.arena_ready {
            return;
        }
        let more = (len / 4).clamp(64, 4096);
        self.arena.reserve(more);
        self.arena_ready = len + more;
        let size = std::mem::size_of::<HalfStream>();
        let base = self.arena.as_mut_ptr() as usize;
        populate(base + len * size, base + (len + more) * size);
    }

    /// The connection table is full: forget its least recently active eighth
    /// (TCP streams flushed, a message in progress emitted cut short).
    fn forget_idlest(&mut self, ts: i64, frame: i64) {
        let reverse = |k: &StreamKey| (k.2, k.3, k.0, k.1);
        let mut seen: Vec<(i64, StreamKey)> = self
            .conns
            .keys()
            .map(|ckey| {
                let a = self.streams.get(ckey).map_or(-1, |&h| self.arena[h].seen);
                let b = self
                    .streams
                    .get(&reverse(ckey))
                    .map_or(-1, |&h| self.arena[h].seen);
                let u = self.udp_seen.get(ckey).copied().unwrap_or(-1);
                (a.max(b).max(u), *ckey)
            })
            .collect();
        seen.sort_by_key(|x| x.0); // stable: ties in table order
        let n = (seen.len() / 8).max(1);
        let mut gone_conns: HashSet<StreamKey> = HashSet::default();
        let mut gone_streams: HashSet<StreamKey> = HashSet::default();
        for (_, ckey) in seen.into_iter().take(n) {
            let conn = self.conns[&ckey];
            gone_conns.insert(ckey);
            self.udp_seen.remove(&ckey);
            self.tracked_conns.remove(&conn);
            self.n_forgotten += 1;
            for key in [ckey, reverse(&ckey)] {
                if gone_streams.contains(&key) {
                    continue;
                }
                let Some(&h) = self.streams.get(&key) else {
                    continue;
                };
                gone_streams.insert(key);
                if self.arena[h].msg.assembling {
                    self.n_cut += 1;
                }
                self.tcp.flush(&mut self.arena[h], ts, frame, &mut self.col);
                retire(&mut self.col, &mut self.facts, &mut self.arena[h], ts);
                self.arena[h].rev = None;
                self.free.push(h);
            }
        }
        self.conns.retain(|k, _| !gone_conns.contains(k));
        self.streams.retain(|k, _| !gone_streams.contains(k));
        // (streams gone, their slots free for others: none of them is found)
        self.recent_streams.fill(None);
    }

    /// One UDP datagram's payload: an RPC message if it looks like one
    /// (`complete` false: a datagram given up with fragments missing).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn udp_datagram(
        &mut self,
        dg: &Datagram,
        ts: i64,
        frame: i64,
        sport: i32,
        dport: i32,
        body: &[u8],
        complete: bool,
    ) {
        if body.len() < 12 {
            return;
        }
        let (src, dst) = (dg.src, dg.dst);
        if body[7] as u32 == rpc::CALL {
            let rpc_port = well_known(sport)
                || well_known(dport)
                || self.col.rpc_ports.contains(&(dst, dport));
            if !rpc::udp_call(body, dg.wire_len - 8, rpc_port) {
                return;
            }
        } else if body[7] as u32 == rpc::REPLY {
            let xid = rpc::be32(body, 0);
            if !rpc::plausible_reply(body, 0) {
                return;
            }
            if !self.reasm.pending_is_empty() && !self.col.has_call(dst, src, xid) {
                self.call_in_fragments(src, dst, sport, dport, xid);
            }
            if !self.col.has_call(dst, src, xid)
                && !well_known(sport)
                && !self.col.rpc_ports.contains(&(src, sport))
            {
                return;
            }
        } else {
            return;
        }
        let ckey = (src, sport, dst, dport);
        let rkey = (dst, dport, src, sport);
        let conn = match self.conns.get(&ckey).or_else(|| self.conns.get(&rkey)) {
            Some(&c) if c != 0 => c,
            _ => {
                if self.conns.len() >= self.max_connections {
                    self.forget_idlest(ts, frame);
                }
                self.n_conns += 1;
                let c = self.n_conns;
                self.conn_frames.push(frame);
                self.conns.insert(ckey.min(rkey), c);
                c
            }
        };
        self.udp_seen.insert(ckey.min(rkey), frame);
        let head_bytes = self.tcp.limits.head_bytes;
        let head = &body[..body.len().min(head_bytes)];
        let m = Assembled {
            head,
            rpc_len: dg.wire_len - 8,
            captured: body.len() as i64,
            ts_first: dg.ts_first,
            ts_last: ts,
            frame_first: dg.frame_first,
            frame_last: frame,
            frames: dg.frags,
            ip_frags: dg.frags,
            record_frags: 1,
            complete,
        };
        self.col
            .message(src, sport, dst, dport, false, conn, head, &m, None);
    }

    /// A reply whose call is not known: give up the incomplete datagram that
    /// holds the call in its first fragment, if one is held (dissector.Dissector._call_in_fragments).
    fn call_in_fragments(&mut self, src: Addr, dst: Addr, sport: i32, dport: i32, xid: u32) {
        let test = |version: u8, proto: i32, data: &[u8]| -> bool {
            let at = udp_offset(version, proto, data);
            if at < 0 {
                return false;
            }
            let at = at as usize;
            data.len() >= at + 16
                && u16::from_be_bytes([data[at], data[at + 1]]) as i32 == dport
                && u16::from_be_bytes([data[at + 2], data[at + 3]]) as i32 == sport
                && rpc::be32(data, at + 8) == xid
                && rpc::be32(data, at + 12) == rpc::CALL
        };
        if self.reasm.take_first(&mut self.facts, dst, src, test) {
            self.partial_datagrams();
        }
    }

    /// The UDP datagrams given up whose first fragment was captured: each an
    /// RPC message cut short if it holds one (dissector.Dissector.partial_datagrams).
    pub(crate) fn partial_datagrams(&mut self) {
        let partial = std::mem::take(&mut self.reasm.partial);
        for pd in partial {
            let at = udp_offset(pd.version, pd.proto, &pd.data);
            if at < 0 || pd.data.len() < at as usize + 8 {
                continue;
            }
            let udp = &pd.data[at as usize..];
            let sport = u16::from_be_bytes([udp[0], udp[1]]) as i32;
            let dport = u16::from_be_bytes([udp[2], udp[3]]) as i32;
            let ulen = u16::from_be_bytes([udp[4], udp[5]]) as i64;
            let dg = Datagram {
                src: pd.src,
                dst: pd.dst,
                proto: ip::PROTO_UDP,
                payload: std::borrow::Cow::Borrowed(udp),
                wire_len: ulen.max(udp.len() as i64),
                frags: pd.count,
                ts_first: pd.ts_first,
                frame_first: pd.frame_first,
                ttl: -1,
                ip_len: 0,
            };
            self.udp_datagram(
                &dg,
                pd.ts_last,
                pd.frame_last,
                sport,
                dport,
                &udp[8..],
                false,
            );
        }
    }

    /// The frame_duplicate event of a skipped frame: its endpoints as far as
    /// the headers allow.
    fn duplicate_event(&mut self, f: &Frame, data: &[u8], frame: i64) {
        let mut src = Addr::default();
        let mut dst = Addr::default();
        let (mut sport, mut dport, mut conn) = (0i32, 0i32, 0i64);
        let mut seq = -1i64;
        let (ver, off) = locate_ip(f.linktype, data);
        let (mut proto, mut l4) = (-1i32, 0usize);
        if ver == 4 && data.len() >= off + 20 {
            proto = data[off + 9] as i32;
            l4 = off + ((data[off] & 0x0F) as usize) * 4;
            src = Addr::new(&data[off + 12..off + 16]);
            dst = Addr::new(&data[off + 16..off + 20]);
            if u16::from_be_bytes([data[off + 6], data[off + 7]]) & 0x1FFF != 0 {
                proto = -1; // a later fragment: no transport header
            }
        } else if ver == 6 && data.len() >= off + 40 {
            proto = data[off + 6] as i32;
            l4 = off + 40;
            src = Addr::new(&data[off + 8..off + 24]);
            dst = Addr::new(&data[off + 24..off + 40]);
        }
        if (proto == ip::PROTO_TCP || proto == ip::PROTO_UDP) && data.len() >= l4 + 4 {
            sport = u16::from_be_bytes([data[l4], data[l4 + 1]]) as i32;
            dport = u16::from_be_bytes([data[l4 + 2], data[l4 + 3]]) as i32;
            if proto == ip::PROTO_TCP && data.len() >= l4 + 8 {
                seq = rpc::be32(data, l4 + 4) as i64;
            }
            let key = (src, sport, dst, dport);
            let rkey = (dst, dport, src, sport);
            conn = self.conns.get(&key.min(rkey)).copied().unwrap_or(0);
        }
        self.col.push_event(
            f.ts,
            frame,
            conn,
            src,
            sport,
            dst,
            dport,
            Ev::FrameDuplicate,
            seq,
            f.origlen,
            0,
        );
    }

    /// End of the capture: flush every stream, give up incomplete datagrams.
    pub fn finish(&mut self) {
        let order: Vec<usize> = self.streams.values().copied().collect();
        for h in order {
            let hs = &mut self.arena[h];
            let (t, fr) = (hs.msg.ts_last, hs.msg.frame_last);
            self.tcp.flush(hs, t, fr, &mut self.col);
            retire(&mut self.col, &mut self.facts, hs, self.ts);
        }
        self.reasm.finish(&mut self.facts);
        self.partial_datagrams();
        let lost = std::mem::take(&mut self.reasm.lost);
        self.lost_listed = lost.len() as i64;
        for (ts, frame, src, dst, ip_id, _frags, got) in lost {
            self.col.push_event(
                ts,
                frame,
                0,
                src,
                0,
                dst,
                0,
                Ev::IpDatagramIncomplete,
                ip_id as i64,
                got,
                0,
            );
        }
    }
}

/// Fault in the pages of memory [from, to) (owned, written soon) in one call
/// where the kernel can (Linux 5.14); else they fault when written.
#[cfg(target_os = "linux")]
fn populate(from: usize, to: usize) {
    const PAGE: usize = 4096;
    let start = from & !(PAGE - 1);
    let end = to & !(PAGE - 1);
    if end > start {
        // SAFETY: MADV_POPULATE_WRITE only faults in mapped pages (of the
        // arena's allocation, the first shared with the heap below it), their
        // contents unchanged; an error (an older kernel, 64 KiB pages) leaves
        // them to fault when written
        unsafe {
            libc::madvise(
                start as *mut libc::c_void,
                end - start,
                libc::MADV_POPULATE_WRITE,
            );
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn populate(_from: usize, _to: usize) {}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame_at(d: &mut Dissector, ts: i64, data: &[u8]) {
        let f = Frame {
            ts,
            linktype: 1,
            start: 0,
            len: data.len(),
            origlen: data.len() as i64,
        };
        d.frame(&f, data, None, &mut |_| {});
    }

    /// The frames of a capture of `frames` (ts ns, bytes) parsed from a
    /// mapped file and from a stream: (frames, copies) of each.
    fn parse_both(name: &str, frames: &[(i64, Vec<u8>)]) -> [(i64, i64); 2] {
        use crate::capture::{file_source, test_pcap, Opener, Source};
        let bytes = test_pcap(frames);
        let path = std::env::temp_dir().join(format!("nfstrace-{}-{name}", std::process::id()));
        std::fs::write(&path, &bytes).unwrap();
        let p = path.clone();
        let mapped: Opener = Box::new(move |_| {
            let f = std::fs::File::open(&p).map_err(|e| e.to_string())?;
            let src = file_source(f, Default::default());
            assert!(matches!(src, Source::Mapped(_)));
            Ok(src)
        });
        let streamed: Opener = Box::new(move |_| {
            Ok(Source::Stream(Box::new(std::io::Cursor::new(
                bytes.clone(),
            ))))
        });
        let out = [mapped, streamed].map(|o| {
            let (d, _) =
                crate::parse_sources(vec![o], crate::default_settings(), &mut |_| {}).unwrap();
            (d.n_frames, d.n_dup)
        });
        std::fs::remove_file(&path).unwrap();
        out
    }

    #[test]
    fn copies_found_alike_in_a_mapped_file_and_a_stream() {
        let window = crate::default_settings().duplicate_window_ns;
        let t0 = 1_000_000_000;
        let a: Vec<u8> = (0..1500u32).map(|i| (i * 7 + 3) as u8).collect();
        let mut b = a.clone();
        b[700] ^= 0x10; // same fingerprint, one byte apart
        let frames = vec![
            (t0, a.clone()),
            (t0 + window / 4, a.clone()),     // a copy
            (t0 + window / 2, b.clone()),     // not one
            (t0 + window / 2 + 1, b.clone()), // a copy of that
            (t0 + 5 * window, b.clone()),     // past the window: not one
        ];
        assert_eq!(parse_both("copies", &frames), [(5, 2), (5, 2)]);
        // copies far apart in the file (the first no longer in the window
        // mapped: read again from the file), frames of other lengths between
        let mut frames = vec![(t0, a.clone())];
        for k in 0..3000 {
            let mut other = vec![0x55; 2000 + (k as usize % 7)];
            other[60..62].copy_from_slice(&(k as u16).to_le_bytes()); // all different
            frames.push((t0 + 1 + k, other));
        }
        frames.push((t0 + window / 2, a.clone()));
        frames.push((t0 + window / 2 + 1, b.clone()));
        assert_eq!(parse_both("far", &frames), [(3003, 1), (3003, 1)]);
    }

    #[test]
    fn copies_are_frames_hashed_alike_within_the_window() {
        let window = crate::default_settings().duplicate_window_ns;
        let mut d = Dissector::new(crate::default_settings());
        let a: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        frame_at(&mut d, 1_000_000_000, &a);
        frame_at(&mut d, 1_000_000_000 + window / 2, &a);
        assert_eq!(d.n_dup, 1, "the same bytes within the window: a copy");
        // one byte changed where the fingerprint does not look: not a copy
        let mut b = a.clone();
        b[100] ^= 1;
        assert_eq!(d.n_dup, 1);
        frame_at(&mut d, 1_000_000_000 + window / 2 + 1, &b);
        assert_eq!(d.n_dup, 1, "a frame differing in one byte is no copy");
        assert_eq!(d.n_frames, 3);
        // the same bytes again past the window: not a copy either
        frame_at(&mut d, 1_000_000_000 + 3 * window, &b);
        assert_eq!(d.n_dup, 1, "past the window: no copy");
        frame_at(&mut d, 1_000_000_000 + 3 * window + 1, &b);
        assert_eq!(d.n_dup, 2);
        assert_ne!(frame_hash(&a), frame_hash(&b));
        assert_eq!(frame_hash(&a), frame_hash(&a.clone()));
    }
}
