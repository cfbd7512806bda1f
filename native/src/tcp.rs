//! TCP stream reassembly and ONC-RPC record marking (RFC 5531 §11); mirrors
//! `parsers/tcp.py` (read its docstring for the two state machines and the
//! resync acceptance rule).

use crate::ip::Addr;
use crate::maps::HashMap;
use crate::rpc;
use crate::tcp_state::ack_point;
use std::collections::VecDeque;

pub const MARK: u8 = 0;
pub const FRAG: u8 = 1;
pub const RESYNC: u8 = 2;
pub const IGNORE: u8 = 3;

/// SEQ_MOD; MAX_SEQ_JUMP: a sequence jump this far ahead is not a hole to wait
/// for: restart framing.
use crate::tables::{MAX_SEQ_JUMP, SEQ_MOD};

const CALL_SIG: [u8; 8] = [0, 0, 0, 0, 0, 0, 0, 2];
const REPLY_SIG0: [u8; 8] = [0, 0, 0, 1, 0, 0, 0, 0];
const REPLY_SIG1: [u8; 8] = [0, 0, 0, 1, 0, 0, 0, 1];

/// Data->ACK round trips time segments up to a jumbo frame's payload: a larger one
/// is a TSO/GSO burst captured before the NIC split it, whose ACK waits for all of it.
pub use crate::tables::RTT_MAX_SEGMENT;

/// Event kinds and their names (schema.EVENT_KINDS): generated.
pub use crate::tables::{Ev, EVENT_KIND_NAMES};

#[derive(Default, Clone, Copy)]
pub struct TcpStats {
    pub bad_marks: i64,
    pub hole_bytes: i64,
    pub hole_bytes_acked: i64,
    pub holes: i64,
    pub holes_acked: i64,
    pub holes_by_memory: i64,
    pub ignored_streams: i64,
    pub marks_too_long: i64,
    pub out_of_order: i64,
    pub overlapping: i64,
    pub payload_bytes: i64,
    pub resync_skipped_bytes: i64,
    pub resyncs: i64,
    pub retransmitted: i64,
    pub segments: i64,
}

impl TcpStats {
    pub fn items(&self) -> [(&'static str, i64); 15] {
        [
            ("bad_marks", self.bad_marks),
            ("hole_bytes", self.hole_bytes),
            ("hole_bytes_acked", self.hole_bytes_acked),
            ("holes", self.holes),
            ("holes_acked", self.holes_acked),
            ("holes_by_memory", self.holes_by_memory),
            ("ignored_streams", self.ignored_streams),
            ("marks_too_long", self.marks_too_long),
            ("out_of_order", self.out_of_order),
            ("overlapping", self.overlapping),
            ("payload_bytes", self.payload_bytes),
            ("resync_skipped_bytes", self.resync_skipped_bytes),
            ("resyncs", self.resyncs),
            ("retransmitted", self.retransmitted),
            ("segments", self.segments),
        ]
    }
}

/// A segment held until the hole before it is filled.
pub struct Held {
    data: Vec<u8>,
    wire_len: i64,
    ts: i64,
    frame: i64,
    ip_frags: i64,
}

/// One direction of one TCP connection (tcp.py's HalfStream).
pub struct HalfStream {
    // identity
    pub src: Addr,
    pub sport: i32,
    pub dst: Addr,
    pub dport: i32,
    pub conn: i64,
    /// frame number of its last packet (the idlest connections are forgotten)
    pub seen: i64,
    // ordering
    pub next_seq: i64,
    pub pending: HashMap<u32, Held>,
    pub pending_bytes: i64,
    pub hole_since: i64,
    // record marking
    pub mode: u8,
    mark: [u8; 4],
    mark_len: usize,
    mark_pkt: Option<(i64, i64, i64)>,
    frag_left: i64,
    frag_last: bool,
    pub synced: bool,
    unsynced_bytes: i64,
    /// a FIN or RST seen from this direction (or an RST from the other)
    pub ended: bool,
    // the message being assembled
    pub in_msg: bool,
    head: Vec<u8>,
    head_open: bool,
    msg_len: i64,
    captured: i64,
    ts_first: i64,
    pub ts_last: i64,
    frame_first: i64,
    pub frame_last: i64,
    frames: i64,
    ip_frags: i64,
    record_frags: i64,
    // per-direction IP facts (the slot shared by the address pair) and counts
    pub facts: usize,
    pub packets: i64,
    pub ip_bytes: i64,
    pub max_ip_len: i64,
    pub ttl: i64,
    // handshake and window (tcp_state.rs): see tcp.py
    pub watch: bool,
    pub handshake_ack_due: bool,
    pub syn_wscale: i64,
    pub syn_mss: i64,
    pub syn_window: i64,
    pub wshift: i64,
    pub mss: i64,
    pub wtrack: bool,
    pub seq_hi: i64,
    pub wlimit: i64,
    pub peer_wnd: i64,
    pub wack: i64,
    pub wwin: i64,
    pub zw_since: i64,
    pub zw_frame: i64,
    pub zw_seq: i64,
    pub wfull_since: i64,
    pub wfull_frame: i64,
    pub wfull_seq: i64,
    pub wfull_wnd: i64,
    /// Data->ACK round trips (tcp_state.rs), one segment timed at a time (as TCP times them),
    /// of at most RTT_MAX_SEGMENT bytes: the end of the highest byte sent (-1:
    /// none yet), the end of the segment being timed (-1: none), its (ts, frame,
    /// seq, length), and the smallest sample as (round trip ns, ts, frame, seq,
    /// length) (round trip -1: none).
    pub rtt_hi: i64,
    pub rtt_end: i64,
    pub rtt_start: [i64; 4],
    pub rtt_best: [i64; 5],
    /// Send gaps (tcp_state.rs): the peer's highest ACK number (-1: none yet);
    /// the time and frame of our last data segment (-1: none yet), whether it
    /// left an RPC message part-sent, the bytes we then had unacknowledged
    /// (-1: unknown), and when the peer had acknowledged everything (-1: not yet).
    pub ack_hi: i64,
    pub gap_t: i64,
    pub gap_frame: i64,
    pub gap_mid: bool,
    pub gap_flight: i64,
    pub gap_acked: i64,
    /// sequence number of the message's record mark
    pub msg_start: i64,
    /// sequence number past the last message handed on (-1: cut short)
    pub msg_end: i64,
    /// the longest data segment seen (bytes)
    pub max_seg: i64,
    /// messages waiting for the peer's ACK: (sequence number past their last
    /// byte, row), oldest first
    pub ack_due: VecDeque<(i64, u64)>,
    /// the other direction of the same connection, once seen (arena index)
    pub rev: Option<usize>,
}

impl HalfStream {
    pub fn new(src: Addr, sport: i32, dst: Addr, dport: i32, conn: i64, facts: usize) -> Self {
        HalfStream {
            src,
            sport,
            dst,
            dport,
            conn,
            seen: 0,
            next_seq: -1,
            pending: HashMap::default(),
            pending_bytes: 0,
            hole_since: -1,
            mode: RESYNC,
            mark: [0; 4],
            mark_len: 0,
            mark_pkt: None,
            frag_left: 0,
            frag_last: false,
            synced: false,
            unsynced_bytes: 0,
            ended: false,
            in_msg: false,
            head: Vec::new(),
            head_open: false,
            msg_len: 0,
            captured: 0,
            ts_first: 0,
            ts_last: 0,
            frame_first: 0,
            frame_last: 0,
            frames: 0,
            ip_frags: 0,
            record_frags: 0,
            facts,
            packets: 0,
            ip_bytes: 0,
            max_ip_len: 0,
            ttl: -2,
            watch: false,
            handshake_ack_due: false,
            syn_wscale: -2,
            syn_mss: -1,
            syn_window: 0,
            wshift: -1,
            mss: 0,
            wtrack: false,
            seq_hi: 0,
            wlimit: 0,
            peer_wnd: 0,
            wack: -1,
            wwin: -1,
            zw_since: -1,
            zw_frame: -1,
            zw_seq: -1,
            wfull_since: -1,
            wfull_frame: -1,
            wfull_seq: -1,
            wfull_wnd: -1,
            rtt_hi: -1,
            rtt_end: -1,
            rtt_start: [0; 4],
            rtt_best: [-1, 0, 0, 0, 0],
            ack_hi: -1,
            gap_t: -1,
            gap_frame: -1,
            gap_mid: false,
            gap_flight: 0,
            gap_acked: -1,
            msg_start: 0,
            msg_end: -1,
            max_seg: 0,
            ack_due: VecDeque::new(),
            rev: None,
        }
    }
}

/// What a whole (or abandoned) RPC record hands to the collector.
pub struct Assembled<'h> {
    pub head: &'h [u8],
    pub rpc_len: i64,
    pub captured: i64,
    pub ts_first: i64,
    pub ts_last: i64,
    pub frame_first: i64,
    pub frame_last: i64,
    pub frames: i64,
    pub ip_frags: i64,
    pub record_frags: i64,
    pub complete: bool,
}

/// Where the reassembler's messages and events go.
pub trait Sink {
    /// The row the message became (None: not an RPC message).
    fn emit(&mut self, hs: &HalfStream, m: Assembled) -> Option<u64>;
    #[allow(clippy::too_many_arguments)]
    fn event(
        &mut self,
        hs: &HalfStream,
        kind: Ev,
        ts: i64,
        frame: i64,
        seq: i64,
        length: i64,
        dur: i64,
    );
    fn is_pending_call(&self, hs: &HalfStream, xid: u32) -> bool;
}

pub struct Limits {
    pub head_bytes: usize,
    pub max_record_bytes: i64,
    pub max_pending_segments: usize,
    pub max_pending_bytes: i64,
    pub max_pending_bytes_total: i64,
    pub max_hole_age_ns: i64,
    pub max_unsynced_bytes: i64,
    pub max_ack_waiting: usize,
}

pub struct TcpReassembler {
    pub limits: Limits,
    pub stats: TcpStats,
    /// bytes held by all directions
    pending_total: i64,
}

#[inline]
fn rel_of(next_seq: i64, seq: i64) -> i64 {
    let rel = (seq - next_seq).rem_euclid(SEQ_MOD);
    if rel >= SEQ_MOD >> 1 {
        rel - SEQ_MOD
    } else {
        rel
    }
}

impl TcpReassembler {
    pub fn new(limits: Limits) -> Self {
        TcpReassembler {
            limits,
            stats: TcpStats::default(),
            pending_total: 0,
        }
    }

    /// A SYN: the stream begins at isn+1 with a record mark.
    pub fn start<S: Sink>(&mut self, hs: &mut HalfStream, isn: i64, sink: &mut S) {
        let (ts, frame) = (hs.ts_last, hs.frame_last);
        self.flush(hs, ts, frame, sink);
        hs.next_seq = (isn + 1).rem_euclid(SEQ_MOD);
        hs.mode = MARK;
        hs.mark_len = 0;
    }

    /// One segment's payload: data is what was captured of wire_len bytes.
    #[allow(clippy::too_many_arguments)]
    pub fn segment<S: Sink>(
        &mut self,
        hs: &mut HalfStream,
        seq: i64,
        data: &[u8],
        wire_len: i64,
        ts: i64,
        frame: i64,
        ip_frags: i64,
        sink: &mut S,
    ) {
        self.stats.segments += 1;
        self.stats.payload_bytes += wire_len;
        if hs.mode == IGNORE {
            return;
        }
        if hs.next_seq < 0 {
            hs.next_seq = seq; // first data seen without the SYN: mid-stream start
        }
        let rel = rel_of(hs.next_seq, seq);
        if rel == 0 {
            self.feed(hs, data, wire_len, ts, frame, ip_frags, sink);
            if !hs.pending.is_empty() {
                self.drain(hs, ts, frame, sink);
            }
            return;
        }
        if rel < -MAX_SEQ_JUMP {
            // Wild jump back (corrupt, or a new connection on the same ports): no
            // retransmission is that far behind.  Restart framing there.
            self.jump(hs, seq, data, wire_len, ts, frame, ip_frags, rel, sink);
            return;
        }
        if rel < 0 {
            if rel + wire_len <= 0 {
                self.stats.retransmitted += 1;
                sink.event(hs, Ev::TcpRetransmission, ts, frame, seq, wire_len, 0);
                return;
            }
            self.stats.overlapping += 1;
            let cut = (-rel) as usize;
            let rest = if cut < data.len() {
                &data[cut..]
            } else {
                &data[data.len()..]
            };
            self.feed(hs, rest, wire_len + rel, ts, frame, ip_frags, sink);
            if !hs.pending.is_empty() {
                self.drain(hs, ts, frame, sink);
            }
            return;
        }
        if rel > MAX_SEQ_JUMP {
            // Wild jump (corrupt or a new connection on the same ports): restart.
            self.jump(hs, seq, data, wire_len, ts, frame, ip_frags, rel, sink);
            return;
        }
        // Early: hold it until the hole before it is filled.
        self.stats.out_of_order += 1;
        let key = seq as u32;
        if hs.pending.contains_key(&key) {
            self.stats.retransmitted += 1;
            sink.event(hs, Ev::TcpRetransmission, ts, frame, seq, wire_len, 0);
            return;
        }
        hs.pending_bytes += data.len() as i64;
        self.pending_total += data.len() as i64;
        hs.pending.insert(
            key,
            Held {
                data: data.to_vec(),
                wire_len,
                ts,
                frame,
                ip_frags,
            },
        );
        if hs.hole_since < 0 {
            hs.hole_since = ts;
        }
        let lim = &self.limits;
        if hs.pending.len() > lim.max_pending_segments
            || hs.pending_bytes > lim.max_pending_bytes
            || ts - hs.hole_since > lim.max_hole_age_ns
        {
            self.skip_hole(hs, ts, frame, false, sink);
        } else if self.pending_total > lim.max_pending_bytes_total {
            self.stats.holes_by_memory += 1;
            self.skip_hole(hs, ts, frame, false, sink);
        }
    }

    /// A segment more than MAX_SEQ_JUMP away from the next expected byte: the
    /// stream restarts there, looking for a record start.
    #[allow(clippy::too_many_arguments)]
    fn jump<S: Sink>(
        &mut self,
        hs: &mut HalfStream,
        seq: i64,
        data: &[u8],
        wire_len: i64,
        ts: i64,
        frame: i64,
        ip_frags: i64,
        rel: i64,
        sink: &mut S,
    ) {
        self.flush(hs, ts, frame, sink);
        sink.event(hs, Ev::SeqJump, ts, frame, seq, rel, 0);
        hs.next_seq = seq;
        hs.mode = RESYNC;
        self.feed(hs, data, wire_len, ts, frame, ip_frags, sink);
    }

    fn first_pending(hs: &HalfStream) -> Option<(u32, i64)> {
        hs.pending
            .keys()
            .map(|&s| (s, rel_of(hs.next_seq, s as i64)))
            .min_by_key(|&(_, r)| r)
    }

    /// The peer acknowledged up to `ack`: held holes before it were received
    /// by the peer, so the capture (not the network) lost them: step over now.
    pub fn acked<S: Sink>(
        &mut self,
        hs: &mut HalfStream,
        ack: i64,
        ts: i64,
        frame: i64,
        sink: &mut S,
    ) {
        while !hs.pending.is_empty() && hs.next_seq >= 0 {
            let (_, first_rel) = Self::first_pending(hs).unwrap();
            if rel_of(hs.next_seq, ack) < first_rel {
                break;
            }
            self.skip_hole(hs, ts, frame, true, sink);
        }
    }

    /// Feed held segments that are now in order (each at its own capture time).
    fn drain<S: Sink>(&mut self, hs: &mut HalfStream, ts: i64, frame: i64, sink: &mut S) {
        let mut order: Vec<(i64, u32)> = hs
            .pending
            .keys()
            .map(|&s| (rel_of(hs.next_seq, s as i64), s))
            .collect();
        order.sort_unstable();
        for (_, seq) in order {
            let rel = rel_of(hs.next_seq, seq as i64);
            if rel > 0 {
                break;
            }
            let held = match hs.pending.remove(&seq) {
                Some(h) => h,
                None => break, // the stream was given up (IGNORE) while feeding
            };
            hs.pending_bytes -= held.data.len() as i64;
            self.pending_total -= held.data.len() as i64;
            if rel + held.wire_len <= 0 {
                self.stats.retransmitted += 1;
                sink.event(
                    hs,
                    Ev::TcpRetransmission,
                    held.ts,
                    held.frame,
                    seq as i64,
                    held.wire_len,
                    0,
                );
                continue;
            }
            let cut = (-rel) as usize;
            let rest = if cut < held.data.len() {
                &held.data[cut..]
            } else {
                &held.data[held.data.len()..]
            };
            self.feed(
                hs,
                rest,
                held.wire_len + rel,
                held.ts,
                held.frame,
                held.ip_frags,
                sink,
            );
        }
        if !hs.pending.is_empty() {
            if hs.hole_since < 0 {
                hs.hole_since = ts;
            }
        } else {
            hs.hole_since = -1;
        }
        let _ = frame;
    }

    /// Declare the bytes before the earliest held segment lost; `acked`: the
    /// peer acknowledged them (the capture missed them, not the network).
    fn skip_hole<S: Sink>(
        &mut self,
        hs: &mut HalfStream,
        ts: i64,
        frame: i64,
        acked: bool,
        sink: &mut S,
    ) {
        let (_, gap) = match Self::first_pending(hs) {
            Some(f) => f,
            None => return,
        };
        self.stats.holes += 1;
        self.stats.hole_bytes += gap;
        if acked {
            self.stats.holes_acked += 1;
            self.stats.hole_bytes_acked += gap;
        }
        sink.event(hs, Ev::TcpHole, ts, frame, hs.next_seq, gap, 0);
        self.feed(hs, &[], gap, ts, frame, 0, sink);
        hs.hole_since = -1;
        self.drain(hs, ts, frame, sink);
    }

    /// End of stream (FIN/RST/end of capture): step over held holes and emit
    /// a message left incomplete.
    pub fn flush<S: Sink>(&mut self, hs: &mut HalfStream, ts: i64, frame: i64, sink: &mut S) {
        while !hs.pending.is_empty() {
            self.skip_hole(hs, ts, frame, false, sink);
        }
        if hs.in_msg {
            self.emit(hs, false, -1, sink);
        }
        if hs.mode != IGNORE {
            hs.mode = RESYNC;
        }
        hs.mark_len = 0;
        hs.next_seq = -1;
    }

    // ---- record marking ---------------------------------------------------

    /// In-order bytes: data holds the captured part of wire_len stream bytes,
    /// carried by the packet captured at ts as frame number `frame`.
    #[allow(clippy::too_many_arguments)]
    fn feed<S: Sink>(
        &mut self,
        hs: &mut HalfStream,
        data: &[u8],
        wire_len: i64,
        ts: i64,
        frame: i64,
        ip_frags: i64,
        sink: &mut S,
    ) {
        let base = hs.next_seq; // the sequence number of data[0]
        hs.next_seq = (hs.next_seq + wire_len).rem_euclid(SEQ_MOD);
        let cap = (data.len() as i64).min(wire_len);
        let mut pos: i64 = 0;
        let hole = cap == 0 && ip_frags == 0; // bytes lost by the capture, no packet
        let mut counted = false; // this segment already counted in the message's frames
        let head_limit = self.limits.head_bytes;
        while pos < wire_len {
            match hs.mode {
                FRAG => {
                    let n = hs.frag_left.min(wire_len - pos);
                    if !counted && !hole {
                        hs.frames += 1;
                        hs.ip_frags += ip_frags;
                        counted = true;
                    }
                    if pos < cap {
                        let got = (cap - pos).min(n);
                        if hs.head_open {
                            let room = head_limit as i64 - hs.head.len() as i64;
                            if room > 0 {
                                let take = got.min(room);
                                hs.head
                                    .extend_from_slice(&data[pos as usize..(pos + take) as usize]);
                            }
                            if got < n && hs.head.len() < head_limit {
                                hs.head_open = false;
                            }
                        }
                        hs.captured += got;
                    } else if hs.head_open && hs.head.len() < head_limit {
                        hs.head_open = false;
                    }
                    hs.msg_len += n;
                    hs.frag_left -= n;
                    pos += n;
                    if frame > hs.frame_last && !hole {
                        hs.ts_last = ts;
                        hs.frame_last = frame;
                    }
                    if hs.frag_left == 0 {
                        hs.mode = MARK;
                        if hs.frag_last {
                            self.emit(hs, true, (base + pos).rem_euclid(SEQ_MOD), sink);
                        }
                    }
                }
                MARK => {
                    let need = 4 - hs.mark_len as i64;
                    let avail = cap - pos;
                    if avail < need && pos + avail < wire_len {
                        // The mark lies (partly) in bytes that were not captured.
                        self.lose_sync(hs, sink);
                        continue;
                    }
                    if avail < need {
                        // mark split across segments
                        if hs.mark_len == 0 && !hs.in_msg {
                            hs.mark_pkt = Some((ts, frame, ip_frags));
                        }
                        for &b in &data[pos as usize..cap as usize] {
                            hs.mark[hs.mark_len] = b;
                            hs.mark_len += 1;
                        }
                        break;
                    }
                    let mut mark = hs.mark;
                    let had = hs.mark_len;
                    for i in 0..need as usize {
                        mark[had + i] = data[pos as usize + i];
                    }
                    hs.mark_len = 0;
                    let value = u32::from_be_bytes(mark);
                    let mark_pkt = hs.mark_pkt.take();
                    let flen = (value & rpc::FRAG_LEN_MASK) as i64;
                    let start = !hs.in_msg;
                    let hdr = pos + need;
                    if flen > self.limits.max_record_bytes
                        || (start
                            && (flen < rpc::MIN_REPLY_LEN as i64
                                || !header_ok(data, hdr as usize, cap as usize)))
                    {
                        self.stats.bad_marks += 1;
                        if flen > self.limits.max_record_bytes {
                            self.stats.marks_too_long += 1;
                        }
                        self.lose_sync(hs, sink);
                        if need == 4 {
                            pos += 1; // search again just after this false mark's first byte
                        }
                        continue;
                    }
                    pos = hdr;
                    if start {
                        hs.msg_start = (base + hdr - 4).rem_euclid(SEQ_MOD); // its record mark
                        hs.in_msg = true;
                        hs.head.clear();
                        hs.head_open = true;
                        hs.msg_len = 0;
                        hs.captured = 0;
                        hs.ts_first = ts;
                        hs.frame_first = frame;
                        hs.ts_last = ts;
                        hs.frame_last = frame;
                        hs.frames = 1;
                        hs.ip_frags = ip_frags;
                        if let Some((mts, mframe, mfrags)) = mark_pkt {
                            if need < 4 && mframe != frame {
                                hs.ts_first = mts;
                                hs.frame_first = mframe;
                                hs.frames = 2;
                                hs.ip_frags += mfrags;
                            }
                        }
                        hs.record_frags = 0;
                        counted = true;
                    } else if !counted {
                        hs.frames += 1;
                        hs.ip_frags += ip_frags;
                        counted = true;
                    }
                    hs.record_frags += 1;
                    hs.frag_left = flen;
                    hs.frag_last = value & rpc::LAST_FRAG != 0;
                    hs.synced = true;
                    hs.mode = FRAG;
                    if flen == 0 && hs.frag_last {
                        hs.mode = MARK;
                        self.emit(hs, true, (base + pos).rem_euclid(SEQ_MOD), sink);
                    }
                }
                RESYNC => {
                    let q = self.find_record(hs, data, pos as usize, cap.max(0) as usize, sink);
                    if q < 0 {
                        let skipped = wire_len - pos;
                        self.stats.resync_skipped_bytes += skipped;
                        if !hs.synced {
                            hs.unsynced_bytes += skipped;
                            if hs.unsynced_bytes > self.limits.max_unsynced_bytes {
                                hs.mode = IGNORE;
                                hs.pending.clear();
                                self.pending_total -= hs.pending_bytes;
                                hs.pending_bytes = 0;
                                self.stats.ignored_streams += 1;
                            }
                        }
                        break;
                    }
                    if q > pos || hs.synced {
                        self.stats.resyncs += 1;
                        sink.event(hs, Ev::RpcResync, ts, frame, hs.next_seq, q - pos, 0);
                    }
                    self.stats.resync_skipped_bytes += q - pos;
                    pos = q;
                    hs.mode = MARK;
                    hs.mark_len = 0;
                }
                _ => break, // IGNORE
            }
        }
    }

    fn lose_sync<S: Sink>(&mut self, hs: &mut HalfStream, sink: &mut S) {
        if hs.in_msg {
            self.emit(hs, false, -1, sink);
        }
        hs.mode = RESYNC;
        hs.mark_len = 0;
    }

    /// Offset of the first plausible record start in data[pos..cap], or -1.
    fn find_record<S: Sink>(
        &self,
        hs: &HalfStream,
        data: &[u8],
        pos: usize,
        cap: usize,
        sink: &S,
    ) -> i64 {
        if cap < pos + 16 {
            return -1;
        }
        let buf = &data[pos..cap];
        let mut cands: Vec<usize> = Vec::new();
        for sig in [&CALL_SIG, &REPLY_SIG0, &REPLY_SIG1] {
            let mut from = 0usize;
            // every occurrence, overlapping ones too (as bytes.find from i + 1)
            while let Some(k) = memchr::memmem::find(&buf[from..], sig) {
                let i = from + k;
                if i >= 8 {
                    cands.push(i - 8);
                }
                from = i + 1;
                if from >= buf.len() {
                    break;
                }
            }
        }
        cands.sort_unstable();
        cands.dedup();
        for q in cands {
            let value = rpc::be32(buf, q);
            let flen = (value & rpc::FRAG_LEN_MASK) as i64;
            if flen < rpc::MIN_REPLY_LEN as i64 || flen > self.limits.max_record_bytes {
                continue;
            }
            if buf[q + 11] as u32 == rpc::CALL {
                if rpc::plausible_call(buf, q + 4, q != 0 || hs.synced) {
                    return (pos + q) as i64;
                }
            } else if rpc::plausible_reply(buf, q + 4) {
                let xid = rpc::be32(buf, q + 4);
                if sink.is_pending_call(hs, xid) || (q == 0 && value & rpc::LAST_FRAG != 0) {
                    return (pos + q) as i64;
                }
            }
        }
        -1
    }

    /// Hand on the message assembled; `end`: the sequence number just past its
    /// last byte (-1: cut short, not waited for an ACK).  A whole message waits
    /// for the peer's ACK of its last byte (tcp.py leaves this to dissector.py's
    /// emit_tcp).
    fn emit<S: Sink>(&mut self, hs: &mut HalfStream, complete: bool, end: i64, sink: &mut S) {
        hs.in_msg = false;
        hs.msg_end = end;
        let head = std::mem::take(&mut hs.head);
        let row = sink.emit(
            hs,
            Assembled {
                head: &head,
                rpc_len: hs.msg_len + hs.frag_left, // declared length, also when cut short
                captured: hs.captured,
                ts_first: hs.ts_first,
                ts_last: hs.ts_last,
                frame_first: hs.frame_first,
                frame_last: hs.frame_last,
                frames: hs.frames,
                ip_frags: hs.ip_frags,
                record_frags: hs.record_frags,
                complete,
            },
        );
        hs.head = head;
        hs.head.clear();
        hs.frag_left = 0;
        if let (Some(row), true) = (row, end >= 0) {
            if hs.ack_due.len() >= self.limits.max_ack_waiting.max(1) {
                hs.ack_due.pop_front();
            }
            hs.ack_due
                .push_back((ack_point(hs.msg_start, end, hs.max_seg), row));
        }
    }
}

/// Check the RPC header after a record mark, as far as it was captured.
fn header_ok(data: &[u8], pos: usize, cap: usize) -> bool {
    if cap < pos + 8 {
        return true; // not captured here: accept the mark on its length alone
    }
    let mtype = rpc::be32(data, pos + 4);
    if mtype == rpc::CALL {
        return cap < pos + 12 || rpc::be32(data, pos + 8) == rpc::RPC_VERSION;
    }
    mtype == rpc::REPLY
}
