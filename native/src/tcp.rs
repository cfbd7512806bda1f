//! TCP stream reassembly and ONC-RPC record marking (RFC 5531 §11).
//!
//! One `HalfStream` per direction of a connection runs two small state machines:
//!
//! * ordering: segments are taken in sequence order; retransmitted bytes are
//!   dropped (and counted), overlapping ones trimmed, early ones held until the
//!   hole before them is filled.  A hole that stays open (past the limits in
//!   `ParseLimits`) is declared lost and stepped over.
//! * record marking: `Mark` (reading a 4-byte record mark) -> `Frag` (inside a
//!   fragment of known length) -> `Mark` ...; `Resync` after losing the
//!   framing; `Ignore` for a stream that never looked like RPC.
//!
//! Only the first `head_bytes` of each message are kept; the rest is counted.
//! Bytes that were not captured (snaplen, lost segments) are stepped over by
//! length, so a `-s 256` capture keeps every message whose header was captured.
//!
//! The two machines are a `HalfStream`'s `order` and `framing` parts, the
//! message being assembled its `msg`; its other parts hold what the frame loop
//! keeps per direction (dissector.rs, tcp_state.rs): IP counts (`ip`),
//! handshake and windows (`win`: window scale and MSS, the bytes in flight
//! against the peer's window, open zero-window / window-full stretches),
//! data->ACK round trips (`rtt`), send gaps (`gaps`) and the ACKs whole
//! messages wait for (`acks`).
//!
//! Resync acceptance (Zeek's rule, adapted): a position is a record start when
//! the 4-byte mark gives a plausible fragment length and the bytes after it are
//! a plausible call (RPC version 2, known program) or a plausible reply whose xid
//! is an outstanding call in the other direction, or any plausible reply that
//! starts a segment.

use crate::ip::Addr;
use crate::maps::HashMap;
use crate::rpc;
use crate::tcp_state::ack_point;
use std::cell::Cell;
use std::collections::VecDeque;

/// The record-marking state of one direction (the module's second state machine).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    /// reading a 4-byte record mark
    Mark,
    /// inside a fragment of known length
    Frag,
    /// looking for a record start after losing the framing
    Resync,
    /// a stream that never looked like RPC
    Ignore,
}

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

/// Sequence ordering of one direction (the module's first state machine): the next byte
/// expected and the segments held until the hole before them is filled.
/// Mutated by `TcpReassembler`; the dissector reads `next_seq`.
pub struct Ordering {
    /// sequence number of the next byte in order (-1: none yet)
    pub next_seq: i64,
    pub pending: HashMap<u32, Held>,
    /// captured bytes held in pending
    pub pending_bytes: i64,
    /// when the hole before the held segments opened (-1: none)
    pub hole_since: i64,
}

impl Default for Ordering {
    fn default() -> Self {
        Ordering {
            next_seq: -1,
            pending: HashMap::default(),
            pending_bytes: 0,
            hole_since: -1,
        }
    }
}

/// ONC-RPC record marking of one direction. Mutated by
/// `TcpReassembler`; `tcp_state::watch` reads `mode`, the dissector `synced`.
pub struct Framing {
    pub mode: Mode,
    /// the bytes of a record mark split across segments
    mark: [u8; 4],
    mark_len: usize,
    /// (ts, frame, ip_frags) of a split mark
    mark_pkt: Option<(i64, i64, i64)>,
    /// bytes of the current fragment still to come
    frag_left: i64,
    /// the current fragment ends its record
    frag_last: bool,
    /// a record mark was accepted once
    pub synced: bool,
    /// bytes searched for a first record start
    unsynced_bytes: i64,
    /// an unframed stretch (event rpc_unframed): the sequence number of the
    /// record boundary where a record mark lay in bytes not captured (-1: none
    /// open), the time and frame of the segment there, and the time of the last
    /// segment whose bytes belong to the stretch
    lost_at: i64,
    lost_ts: i64,
    lost_frame: i64,
    lost_last_ts: i64,
    /// the last record framed (mark included, a single-fragment record; 0 unknown)
    last_len: i64,
    /// the stretch's records: their length (0: not split), where the next one
    /// begins (bytes into the stretch), the (ts, frame, captured?) where the
    /// current one began, the records ended so far as (offset, ts, frame, end
    /// ts, first byte captured?, last byte captured?); the (frame, ts) of the
    /// latest captured segment of the current one (frame -1: none yet): a
    /// record ends when its last bytes came, a hole in it filled after the
    /// segments held behind the hole (each fed at its own capture time)
    pred_len: i64,
    pred_off: i64,
    pred_start: Option<(i64, i64, bool)>,
    pred_last: (i64, i64),
    pred: Vec<(i64, i64, i64, i64, bool, bool)>,
}

impl Default for Framing {
    fn default() -> Self {
        Framing {
            mode: Mode::Resync,
            mark: [0; 4],
            mark_len: 0,
            mark_pkt: None,
            frag_left: 0,
            frag_last: false,
            synced: false,
            unsynced_bytes: 0,
            lost_at: -1,
            lost_ts: 0,
            lost_frame: 0,
            lost_last_ts: 0,
            last_len: 0,
            pred_len: 0,
            pred_off: 0,
            pred_start: None,
            pred_last: (-1, 0),
            pred: Vec::new(),
        }
    }
}

/// The RPC message being assembled, and where the last one
/// handed on ended. Mutated by `TcpReassembler`; the dissector reads
/// `assembling` and `ts_last` / `frame_last`.
pub struct Message {
    /// a record mark began a message not yet handed on
    pub assembling: bool,
    /// sequence number of the message's record mark
    pub start: i64,
    /// sequence number past the last message handed on (-1: cut short)
    pub end: i64,
    head: Vec<u8>,
    head_open: bool,
    /// bytes of its fragments so far
    length: i64,
    captured: i64,
    ts_first: i64,
    pub ts_last: i64,
    frame_first: i64,
    pub frame_last: i64,
    frames: i64,
    ip_frags: i64,
    record_frags: i64,
}

impl Default for Message {
    fn default() -> Self {
        Message {
            assembling: false,
            start: 0,
            end: -1,
            head: Vec::new(),
            head_open: false,
            length: 0,
            captured: 0,
            ts_first: 0,
            ts_last: 0,
            frame_first: 0,
            frame_last: 0,
            frames: 0,
            ip_frags: 0,
            record_frags: 0,
        }
    }
}

/// The IP packets of one direction: counts and extremes,
/// and the facts slot of its address pair. Mutated by the dissector and
/// `tcp_state::ip_extremes` / `retire`.
pub struct IpFacts {
    pub facts: usize,
    pub packets: i64,
    pub ip_bytes: i64,
    pub max_ip_len: i64,
    /// TTL of the last packet (-2: none yet)
    pub ttl: i64,
}

impl IpFacts {
    pub fn new(facts: usize) -> Self {
        IpFacts {
            facts,
            packets: 0,
            ip_bytes: 0,
            max_ip_len: 0,
            ttl: -2,
        }
    }
}

/// The handshake and the windows of one direction (RFC 9293, RFC 7323):
/// options of its SYN, the window scale and MSS in effect, its bytes in flight
/// against the peer's window, open zero-window / window-full stretches.
/// Mutated by `tcp_state` (`on_syn`, `watch`, `window_reached`,
/// `close_stretches`) and by the dissector on the peer's ACKs (the peer's window).
pub struct WindowWatch {
    /// true while the slow path must look at every packet of this direction
    /// (a handshake ACK is due or a zero-window stretch is open)
    pub watch: bool,
    /// our peer's SYN-ACK seen, our ACK not yet
    pub handshake_ack_due: bool,
    /// window scale in our SYN: -2 no SYN seen, -1 none offered
    pub syn_wscale: i64,
    /// MSS option in our SYN / SYN-ACK (-1 none)
    pub syn_mss: i64,
    /// the window in our SYN / SYN-ACK (never scaled)
    pub syn_window: i64,
    /// shift applied to the windows we advertise (-1 unknown)
    pub wshift: i64,
    /// largest segment the peer accepts (its MSS option)
    pub mss: i64,
    /// our bytes in flight are checked against the peer's window
    pub wtrack: bool,
    /// end of the highest byte sent (when wtrack, up to a full window)
    pub seq_hi: i64,
    /// (when wtrack) the sequence number our data reaches when it fills the
    /// peer's window within one MSS: peer's ack + window - mss
    pub wlimit: i64,
    /// (when wtrack) the peer's last scaled window
    pub peer_wnd: i64,
    /// the peer's ACK number and raw window wlimit was computed from (-1:
    /// none), so that only a change recomputes it
    pub wack: i64,
    pub wwin: i64,
    /// open stretch of a zero window we advertise: start time (-1 none),
    /// frame, sequence number
    pub zw_since: i64,
    pub zw_frame: i64,
    pub zw_seq: i64,
    /// open stretch of our data filling the peer's window: start time (-1
    /// none), frame, sequence number, window
    pub wfull_since: i64,
    pub wfull_frame: i64,
    pub wfull_seq: i64,
    pub wfull_wnd: i64,
}

impl Default for WindowWatch {
    fn default() -> Self {
        WindowWatch {
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
        }
    }
}

/// Data->ACK round trips of one direction, one segment
/// timed at a time, of at most RTT_MAX_SEGMENT bytes. Mutated by the dissector
/// and `tcp_state::ack_rtt_sample` / `retire`.
pub struct RttWatch {
    /// the end of the highest byte sent (-1: none yet)
    pub hi: i64,
    /// the end of the segment being timed (-1: none)
    pub end: i64,
    /// its (ts, frame, seq, length)
    pub start: [i64; 4],
    /// the smallest sample as (round trip ns, ts, frame, seq, length) (round trip -1: none)
    pub best: [i64; 5],
}

impl Default for RttWatch {
    fn default() -> Self {
        RttWatch {
            hi: -1,
            end: -1,
            start: [0; 4],
            best: [-1, 0, 0, 0, 0],
        }
    }
}

/// Where this direction's last data segment left it, for the send gap after it.
/// Mutated by the dissector; `tcp_state::send_gap` reads it.
pub struct SendGaps {
    /// time and frame of our last data segment (-1: none yet)
    pub last_ts: i64,
    pub last_frame: i64,
    /// it left an RPC message part-sent
    pub mid: bool,
    /// the bytes we then had unacknowledged (-1: unknown)
    pub flight: i64,
    /// when the peer had acknowledged everything we had sent (-1: not yet)
    pub acked: i64,
}

impl Default for SendGaps {
    fn default() -> Self {
        SendGaps {
            last_ts: -1,
            last_frame: -1,
            mid: false,
            flight: 0,
            acked: -1,
        }
    }
}

/// What the peer acknowledged of this direction's data: its
/// highest ACK number and the whole messages waiting for their ACK. Mutated by
/// `TcpReassembler::emit`,
/// and by the dissector on the peer's ACKs.
pub struct Acks {
    /// the peer's highest ACK number (-1: none yet)
    pub hi: i64,
    /// the longest data segment seen (bytes)
    pub max_seg: i64,
    /// (the sequence number an ACK must reach, row of the message), oldest first
    pub due: VecDeque<(i64, u64)>,
    /// the records of unframed stretches waiting likewise: (the sequence number
    /// an ACK must reach, where the record begins, its length), oldest first
    pub records: VecDeque<(i64, i64, i64)>,
}

impl Default for Acks {
    fn default() -> Self {
        Acks {
            hi: -1,
            max_seg: 0,
            due: VecDeque::new(),
            records: VecDeque::new(),
        }
    }
}

/// One direction of one TCP connection: who it is, and
/// one part per concern.
pub struct HalfStream {
    pub src: Addr,
    pub sport: i32,
    pub dst: Addr,
    pub dport: i32,
    pub conn: i64,
    /// frame number of its last packet (the idlest connections are forgotten)
    pub seen: i64,
    /// a FIN or RST seen from this direction (or an RST from the other)
    pub ended: bool,
    pub order: Ordering,
    pub framing: Framing,
    pub msg: Message,
    pub ip: IpFacts,
    pub win: WindowWatch,
    pub rtt: RttWatch,
    pub gaps: SendGaps,
    pub acks: Acks,
    /// the other direction of the same connection, once seen (arena index)
    pub rev: Option<usize>,
    /// the ids of `src` and `dst` in the collector's address interner, once
    /// its first message interned them (the collector's cache: each message
    /// would otherwise hash both addresses again)
    pub addr_ids: Cell<Option<(u32, u32)>>,
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
            ended: false,
            order: Ordering::default(),
            framing: Framing::default(),
            msg: Message::default(),
            ip: IpFacts::new(facts),
            win: WindowWatch::default(),
            rtt: RttWatch::default(),
            gaps: SendGaps::default(),
            acks: Acks::default(),
            rev: None,
            addr_ids: Cell::new(None),
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

impl HalfStream {
    /// tcp.part_sent: did the bytes in order so far leave an RPC message
    /// part-sent?  One being assembled, or in an unframed stretch a record
    /// begun and not ended (its records not split: taken as part-sent).
    pub fn part_sent(&self) -> bool {
        if self.msg.assembling {
            return true;
        }
        let fr = &self.framing;
        fr.lost_at >= 0 && (fr.pred_len <= 0 || fr.pred_start.is_some())
    }
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
    pub max_unframed_records: usize,
}

/// Feeds segments into half-streams and emits RPC messages: it mutates a
/// stream's `order`, `framing` and `msg` parts, and its `acks` (a whole message
/// waits for its ACK).
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

/// The earliest held segment: (its sequence number, distance from the next byte).
fn first_pending(o: &Ordering) -> Option<(u32, i64)> {
    o.pending
        .keys()
        .map(|&s| (s, rel_of(o.next_seq, s as i64)))
        .min_by_key(|&(_, r)| r)
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
        let (ts, frame) = (hs.msg.ts_last, hs.msg.frame_last);
        self.flush(hs, ts, frame, sink);
        hs.order.next_seq = (isn + 1).rem_euclid(SEQ_MOD);
        hs.framing.mode = Mode::Mark;
        hs.framing.mark_len = 0;
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
        if hs.framing.mode == Mode::Ignore {
            return;
        }
        if hs.order.next_seq < 0 {
            hs.order.next_seq = seq; // first data seen without the SYN: mid-stream start
        }
        let rel = rel_of(hs.order.next_seq, seq);
        if rel == 0 {
            if !hs.order.pending.is_empty() {
                // it fills the hole the held segments wait behind
                let age = ts - hs.order.hole_since;
                sink.event(hs, Ev::TcpHoleFilled, ts, frame, seq, wire_len, age);
            }
            self.feed(hs, data, wire_len, ts, frame, ip_frags, sink);
            if !hs.order.pending.is_empty() {
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
            if !hs.order.pending.is_empty() {
                let age = ts - hs.order.hole_since;
                sink.event(hs, Ev::TcpHoleFilled, ts, frame, seq, wire_len, age);
            }
            let cut = (-rel) as usize;
            let rest = if cut < data.len() {
                &data[cut..]
            } else {
                &data[data.len()..]
            };
            self.feed(hs, rest, wire_len + rel, ts, frame, ip_frags, sink);
            if !hs.order.pending.is_empty() {
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
        if hs.order.pending.contains_key(&key) {
            self.stats.retransmitted += 1;
            sink.event(hs, Ev::TcpRetransmission, ts, frame, seq, wire_len, 0);
            return;
        }
        hs.order.pending_bytes += data.len() as i64;
        self.pending_total += data.len() as i64;
        hs.order.pending.insert(
            key,
            Held {
                data: data.to_vec(),
                wire_len,
                ts,
                frame,
                ip_frags,
            },
        );
        if hs.order.hole_since < 0 {
            hs.order.hole_since = ts;
        }
        let lim = &self.limits;
        if hs.order.pending.len() > lim.max_pending_segments
            || hs.order.pending_bytes > lim.max_pending_bytes
            || ts - hs.order.hole_since > lim.max_hole_age_ns
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
        hs.order.next_seq = seq;
        hs.framing.mode = Mode::Resync;
        self.feed(hs, data, wire_len, ts, frame, ip_frags, sink);
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
        while !hs.order.pending.is_empty() && hs.order.next_seq >= 0 {
            let (_, first_rel) = first_pending(&hs.order).unwrap();
            if rel_of(hs.order.next_seq, ack) < first_rel {
                break;
            }
            self.skip_hole(hs, ts, frame, true, sink);
        }
    }

    /// Feed held segments that are now in order (each at its own capture time).
    fn drain<S: Sink>(&mut self, hs: &mut HalfStream, ts: i64, frame: i64, sink: &mut S) {
        let mut order: Vec<(i64, u32)> = hs
            .order
            .pending
            .keys()
            .map(|&s| (rel_of(hs.order.next_seq, s as i64), s))
            .collect();
        order.sort_unstable();
        for (_, seq) in order {
            let rel = rel_of(hs.order.next_seq, seq as i64);
            if rel > 0 {
                break;
            }
            let held = match hs.order.pending.remove(&seq) {
                Some(h) => h,
                None => break, // the stream was given up (Mode::Ignore) while feeding
            };
            hs.order.pending_bytes -= held.data.len() as i64;
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
        if !hs.order.pending.is_empty() {
            if hs.order.hole_since < 0 {
                hs.order.hole_since = ts;
            }
        } else {
            hs.order.hole_since = -1;
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
        let (_, gap) = match first_pending(&hs.order) {
            Some(f) => f,
            None => return,
        };
        self.stats.holes += 1;
        self.stats.hole_bytes += gap;
        if acked {
            self.stats.holes_acked += 1;
            self.stats.hole_bytes_acked += gap;
        }
        sink.event(hs, Ev::TcpHole, ts, frame, hs.order.next_seq, gap, 0);
        self.feed(hs, &[], gap, ts, frame, 0, sink);
        hs.order.hole_since = -1;
        self.drain(hs, ts, frame, sink);
    }

    /// End of stream (FIN/RST/end of capture): step over held holes and emit
    /// a message left incomplete.
    pub fn flush<S: Sink>(&mut self, hs: &mut HalfStream, ts: i64, frame: i64, sink: &mut S) {
        while !hs.order.pending.is_empty() {
            self.skip_hole(hs, ts, frame, false, sink);
        }
        if hs.msg.assembling {
            self.emit(hs, false, -1, sink);
        }
        if hs.framing.lost_at >= 0 {
            let end = hs.order.next_seq;
            self.unframed(hs, end, sink);
        }
        if hs.framing.mode != Mode::Ignore {
            hs.framing.mode = Mode::Resync;
        }
        hs.framing.mark_len = 0;
        hs.order.next_seq = -1;
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
        let base = hs.order.next_seq; // the sequence number of data[0]
        hs.order.next_seq = (hs.order.next_seq + wire_len).rem_euclid(SEQ_MOD);
        let cap = (data.len() as i64).min(wire_len);
        let mut pos: i64 = 0;
        let hole = cap == 0 && ip_frags == 0; // bytes lost by the capture, no packet
        let mut counted = false; // this segment already counted in the message's frames
        let head_limit = self.limits.head_bytes;
        while pos < wire_len {
            match hs.framing.mode {
                Mode::Frag => {
                    let n = hs.framing.frag_left.min(wire_len - pos);
                    if !counted && !hole {
                        hs.msg.frames += 1;
                        hs.msg.ip_frags += ip_frags;
                        counted = true;
                    }
                    if pos < cap {
                        let got = (cap - pos).min(n);
                        if hs.msg.head_open {
                            let room = head_limit as i64 - hs.msg.head.len() as i64;
                            if room > 0 {
                                let take = got.min(room);
                                hs.msg
                                    .head
                                    .extend_from_slice(&data[pos as usize..(pos + take) as usize]);
                            }
                            if got < n && hs.msg.head.len() < head_limit {
                                hs.msg.head_open = false;
                            }
                        }
                        hs.msg.captured += got;
                    } else if hs.msg.head_open && hs.msg.head.len() < head_limit {
                        hs.msg.head_open = false;
                    }
                    hs.msg.length += n;
                    hs.framing.frag_left -= n;
                    pos += n;
                    if frame > hs.msg.frame_last && !hole {
                        hs.msg.ts_last = ts;
                        hs.msg.frame_last = frame;
                    }
                    if hs.framing.frag_left == 0 {
                        hs.framing.mode = Mode::Mark;
                        if hs.framing.frag_last {
                            self.emit(hs, true, (base + pos).rem_euclid(SEQ_MOD), sink);
                        }
                    }
                }
                Mode::Mark => {
                    let need = 4 - hs.framing.mark_len as i64;
                    let avail = cap - pos;
                    if avail < need && pos + avail < wire_len {
                        // The mark lies (partly) in bytes that were not captured: the
                        // records from here are stepped over unframed until one is
                        // found again, their bytes an rpc_unframed stretch.
                        let fr = &hs.framing;
                        let at = if hs.msg.assembling {
                            -1
                        } else {
                            (base + pos - fr.mark_len as i64).rem_euclid(SEQ_MOD)
                        };
                        let began = match fr.mark_pkt {
                            Some((mts, mframe, _)) if fr.mark_len > 0 => (mts, mframe),
                            _ => (ts, frame),
                        };
                        self.lose_sync(hs, sink);
                        if at >= 0 && !hole {
                            let fr = &mut hs.framing;
                            fr.lost_at = at;
                            fr.lost_ts = began.0;
                            fr.lost_frame = began.1;
                            fr.pred_len = fr.last_len;
                            fr.pred_off = 0;
                            fr.pred_start = Some((began.0, began.1, true));
                            fr.pred_last = (-1, 0);
                            fr.pred.clear();
                        }
                        continue;
                    }
                    if avail < need {
                        // mark split across segments
                        if hs.framing.mark_len == 0 && !hs.msg.assembling {
                            hs.framing.mark_pkt = Some((ts, frame, ip_frags));
                        }
                        for &b in &data[pos as usize..cap as usize] {
                            hs.framing.mark[hs.framing.mark_len] = b;
                            hs.framing.mark_len += 1;
                        }
                        break;
                    }
                    let mut mark = hs.framing.mark;
                    let had = hs.framing.mark_len;
                    for i in 0..need as usize {
                        mark[had + i] = data[pos as usize + i];
                    }
                    hs.framing.mark_len = 0;
                    let value = u32::from_be_bytes(mark);
                    let mark_pkt = hs.framing.mark_pkt.take();
                    let flen = (value & rpc::FRAG_LEN_MASK) as i64;
                    let start = !hs.msg.assembling;
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
                    if start
                        && need == 4
                        && flen > 0
                        && value & rpc::LAST_FRAG != 0
                        && flen <= cap - hdr
                    {
                        // A whole record, its mark too, in this segment's
                        // captured bytes (a metadata capture's every
                        // message): handed on from them, not copied into the
                        // stream's head buffer first (the copy, and each new
                        // stream's buffer growing, were 3% of the parse of
                        // many short connections).  The state it leaves is
                        // the one the steps below would (mark -> one
                        // fragment -> emit).
                        let m = &mut hs.msg;
                        m.start = (base + hdr - 4).rem_euclid(SEQ_MOD);
                        m.assembling = true;
                        m.head.clear();
                        m.head_open = true;
                        m.length = flen;
                        m.captured = flen;
                        m.ts_first = ts;
                        m.frame_first = frame;
                        m.ts_last = ts;
                        m.frame_last = frame;
                        m.frames = 1;
                        m.ip_frags = ip_frags;
                        m.record_frags = 1;
                        counted = true;
                        let fr = &mut hs.framing;
                        fr.frag_left = 0;
                        fr.frag_last = true;
                        fr.synced = true;
                        fr.mode = Mode::Mark;
                        pos = hdr + flen;
                        let take = flen.min(head_limit as i64);
                        let head = &data[hdr as usize..(hdr + take) as usize];
                        self.emit_from(
                            hs,
                            true,
                            (base + pos).rem_euclid(SEQ_MOD),
                            Some(head),
                            sink,
                        );
                        continue;
                    }
                    if start {
                        hs.msg.start = (base + hdr - 4).rem_euclid(SEQ_MOD); // its record mark
                        hs.msg.assembling = true;
                        hs.msg.head.clear();
                        hs.msg.head_open = true;
                        hs.msg.length = 0;
                        hs.msg.captured = 0;
                        hs.msg.ts_first = ts;
                        hs.msg.frame_first = frame;
                        hs.msg.ts_last = ts;
                        hs.msg.frame_last = frame;
                        hs.msg.frames = 1;
                        hs.msg.ip_frags = ip_frags;
                        if let Some((mts, mframe, mfrags)) = mark_pkt {
                            if need < 4 && mframe != frame {
                                hs.msg.ts_first = mts;
                                hs.msg.frame_first = mframe;
                                hs.msg.frames = 2;
                                hs.msg.ip_frags += mfrags;
                            }
                        }
                        hs.msg.record_frags = 0;
                        counted = true;
                    } else if !counted {
                        hs.msg.frames += 1;
                        hs.msg.ip_frags += ip_frags;
                        counted = true;
                    }
                    hs.msg.record_frags += 1;
                    hs.framing.frag_left = flen;
                    hs.framing.frag_last = value & rpc::LAST_FRAG != 0;
                    hs.framing.synced = true;
                    hs.framing.mode = Mode::Frag;
                    if flen == 0 && hs.framing.frag_last {
                        hs.framing.mode = Mode::Mark;
                        self.emit(hs, true, (base + pos).rem_euclid(SEQ_MOD), sink);
                    }
                }
                Mode::Resync => {
                    let q = self.find_record(
                        hs,
                        data,
                        pos as usize,
                        cap.max(0) as usize,
                        cap < wire_len,
                        sink,
                    );
                    if hs.framing.lost_at >= 0 && (q < 0 || q > pos) {
                        // bytes of the stretch
                        if !hole {
                            hs.framing.lost_last_ts = ts;
                        }
                        let upto = if q >= 0 { q } else { wire_len };
                        let end = (base + upto - hs.framing.lost_at).rem_euclid(SEQ_MOD);
                        self.records(&mut hs.framing, &mut hs.acks, end, ts, frame, !hole);
                    }
                    if q < 0 {
                        let skipped = wire_len - pos;
                        self.stats.resync_skipped_bytes += skipped;
                        if !hs.framing.synced {
                            hs.framing.unsynced_bytes += skipped;
                            if hs.framing.unsynced_bytes > self.limits.max_unsynced_bytes {
                                hs.framing.mode = Mode::Ignore;
                                hs.order.pending.clear();
                                self.pending_total -= hs.order.pending_bytes;
                                hs.order.pending_bytes = 0;
                                self.stats.ignored_streams += 1;
                            }
                        }
                        break;
                    }
                    if q > pos || hs.framing.synced {
                        self.stats.resyncs += 1;
                        sink.event(hs, Ev::RpcResync, ts, frame, hs.order.next_seq, q - pos, 0);
                    }
                    self.stats.resync_skipped_bytes += q - pos;
                    pos = q;
                    if hs.framing.lost_at >= 0 {
                        self.unframed(hs, (base + q).rem_euclid(SEQ_MOD), sink);
                    }
                    hs.framing.mode = Mode::Mark;
                    hs.framing.mark_len = 0;
                }
                Mode::Ignore => break,
            }
        }
    }

    /// The stretch's bytes up to `end` (bytes into it) have come, the last of
    /// them in this segment (`seen` false: bytes the capture missed, a hole
    /// stepped over at ts): the records of `pred_len` bytes that began or ended
    /// in it; each one ended waits for the peer's ACK of it, as a message does
    /// (event rpc_unframed_acked).
    #[allow(clippy::too_many_arguments)]
    fn records(
        &self,
        fr: &mut Framing,
        acks: &mut Acks,
        end: i64,
        ts: i64,
        frame: i64,
        seen: bool,
    ) {
        let n = fr.pred_len;
        if n <= 0 {
            return;
        }
        loop {
            if fr.pred_start.is_none() && fr.pred_off < end {
                fr.pred_start = Some((ts, frame, seen));
            }
            if seen && frame > fr.pred_last.0 {
                fr.pred_last = (frame, ts);
            }
            if fr.pred_off + n > end {
                return;
            }
            if fr.pred.len() >= self.limits.max_unframed_records {
                fr.pred_len = 0;
                fr.pred.clear();
                return;
            }
            let (ts0, frame0, first) = fr.pred_start.unwrap_or((ts, frame, seen));
            let ts1 = if fr.pred_last.0 >= 0 {
                fr.pred_last.1
            } else {
                ts
            };
            fr.pred.push((fr.pred_off, ts0, frame0, ts1, first, seen));
            let seq = (fr.lost_at + fr.pred_off).rem_euclid(SEQ_MOD);
            if acks.records.len() >= self.limits.max_ack_waiting.max(1) {
                acks.records.pop_front();
            }
            let point = ack_point(seq, (seq + n).rem_euclid(SEQ_MOD), acks.max_seg);
            acks.records.push_back((point, seq, n));
            fr.pred_off += n;
            fr.pred_start = None;
            fr.pred_last = (-1, 0);
        }
    }

    /// Close the unframed stretch open since `framing.lost_at` at sequence
    /// number `end` (a record found, or where the stream's bytes ended): one
    /// rpc_unframed event, and one rpc_unframed_record per record of the last
    /// length framed that the stretch holds from its start (all of it when it
    /// is a whole number of them).
    fn unframed<S: Sink>(&mut self, hs: &mut HalfStream, end: i64, sink: &mut S) {
        let fr = &mut hs.framing;
        let length = (end - fr.lost_at).rem_euclid(SEQ_MOD);
        let pred = std::mem::take(&mut fr.pred);
        let (lost_at, lost_ts, lost_frame, n) =
            (fr.lost_at, fr.lost_ts, fr.lost_frame, fr.pred_len);
        let duration = fr.lost_last_ts - fr.lost_ts;
        fr.lost_at = -1;
        fr.pred_len = 0;
        if length != 0 {
            sink.event(
                hs,
                Ev::RpcUnframed,
                lost_ts,
                lost_frame,
                lost_at,
                length,
                duration,
            );
            // (a stretch that is not a whole number of records: the ones that fit
            // from its start, predicted; inference keeps those its replies confirm)
            if n > 0 {
                for &(off, ts0, frame0, ts1, first, last) in
                    pred.iter().filter(|p| p.0 + n <= length)
                {
                    let seq = (lost_at + off).rem_euclid(SEQ_MOD);
                    let duration = match (first, last) {
                        (true, true) => ts1 - ts0,
                        (true, false) => -1,
                        _ => -2,
                    };
                    sink.event(hs, Ev::RpcUnframedRecord, ts0, frame0, seq, n, duration);
                }
            }
        }
        hs.framing.pred = pred;
        hs.framing.pred.clear();
    }

    fn lose_sync<S: Sink>(&mut self, hs: &mut HalfStream, sink: &mut S) {
        if hs.msg.assembling {
            self.emit(hs, false, -1, sink);
        }
        hs.framing.mode = Mode::Resync;
        hs.framing.mark_len = 0;
    }

    /// Offset of the first plausible record start in data[pos..cap], or -1;
    /// `cut`: the segment's bytes after `cap` were not captured (a call header
    /// they cut after its procedure number is judged on what came).
    fn find_record<S: Sink>(
        &self,
        hs: &HalfStream,
        data: &[u8],
        pos: usize,
        cap: usize,
        cut: bool,
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
                if rpc::plausible_call(buf, q + 4, q != 0 || hs.framing.synced, cut) {
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
    /// for the peer's ACK of its last byte.
    fn emit<S: Sink>(&mut self, hs: &mut HalfStream, complete: bool, end: i64, sink: &mut S) {
        self.emit_from(hs, complete, end, None, sink);
    }

    /// `emit`, the message's head bytes `from` a segment (None: those
    /// assembled in `hs.msg.head`).
    fn emit_from<S: Sink>(
        &mut self,
        hs: &mut HalfStream,
        complete: bool,
        end: i64,
        from: Option<&[u8]>,
        sink: &mut S,
    ) {
        hs.msg.assembling = false;
        hs.msg.end = end;
        hs.framing.last_len = if complete && hs.msg.record_frags == 1 {
            hs.msg.length + 4
        } else {
            0
        };
        let head = std::mem::take(&mut hs.msg.head);
        let row = sink.emit(
            hs,
            Assembled {
                head: from.unwrap_or(&head),
                rpc_len: hs.msg.length + hs.framing.frag_left, // declared length, also when cut short
                captured: hs.msg.captured,
                ts_first: hs.msg.ts_first,
                ts_last: hs.msg.ts_last,
                frame_first: hs.msg.frame_first,
                frame_last: hs.msg.frame_last,
                frames: hs.msg.frames,
                ip_frags: hs.msg.ip_frags,
                record_frags: hs.msg.record_frags,
                complete,
            },
        );
        hs.msg.head = head;
        hs.msg.head.clear();
        hs.framing.frag_left = 0;
        if let (Some(row), true) = (row, end >= 0) {
            if hs.acks.due.len() >= self.limits.max_ack_waiting.max(1) {
                hs.acks.due.pop_front();
            }
            hs.acks
                .due
                .push_back((ack_point(hs.msg.start, end, hs.acks.max_seg), row));
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
