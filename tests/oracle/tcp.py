"""TCP stream reassembly and ONC-RPC record marking (RFC 5531 §11).

One ``HalfStream`` per direction of a connection runs two small state machines:

* ordering: segments are taken in sequence order; retransmitted bytes are
  dropped (and counted), overlapping ones trimmed, early ones held until the
  hole before them is filled.  A hole that stays open (past the limits in
  ``ParseLimits``) is declared lost and stepped over.
* record marking: ``MARK`` (reading a 4-byte record mark) -> ``FRAG`` (inside a
  fragment of known length) -> ``MARK`` ...; ``RESYNC`` after losing the
  framing; ``IGNORE`` for a stream that never looked like RPC.

Only the first ``head_bytes`` of each message are kept; the rest is counted.
Bytes that were not captured (snaplen, lost segments) are stepped over by
length, so a `-s 256` capture keeps every message whose header was captured.

The two machines are a ``HalfStream``'s ``order`` and ``framing`` parts, the
message being assembled its ``msg``; its other parts hold what the frame loop
keeps per direction (``dissector.py``, ``tcp_state.py``): IP counts (``ip``),
handshake and windows (``win``: window scale and MSS, the bytes in flight
against the peer's window, open zero-window / window-full stretches),
data->ACK round trips (``rtt``), send gaps (``gaps``) and the ACKs whole
messages wait for (``acks``).

Resync acceptance (Zeek's rule, adapted): a position is a record start when
the 4-byte mark gives a plausible fragment length and the bytes after it are
a plausible call (RPC version 2, known program) or a plausible reply whose xid
is an outstanding call in the other direction, or any plausible reply that
starts a segment.

Its size (over 600 lines): the stream's parts and the reassembly that uses
them are one piece of logic, mirrored line for line by native/src/tcp.rs;
splitting it would separate each part from the code that reads it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, fields

from nfstrace.config import ParseLimits
from nfstrace.parsers.capture import Bytes
from nfstrace.protocol import rpc
from oracle.rpc import plausible_call, plausible_reply

# record-marking states
MARK, FRAG, RESYNC, IGNORE = 0, 1, 2, 3

SEQ_MOD = 1 << 32
# A sequence jump this far ahead is not a hole to wait for: restart framing.
MAX_SEQ_JUMP = 1 << 30
# Data->ACK round trips time segments up to a jumbo frame's payload: a larger one
# is a TSO/GSO burst captured before the NIC split it, whose ACK waits for all of it.
RTT_MAX_SEGMENT = 9000

_CALL_SIG = b"\x00\x00\x00\x00\x00\x00\x00\x02"  # msg_type CALL, rpcvers 2
_REPLY_SIGS = (b"\x00\x00\x00\x01\x00\x00\x00\x00", b"\x00\x00\x00\x01\x00\x00\x00\x01")


@dataclass(slots=True)
class TcpStats:
    """What TCP reassembly met, counted (``ParseStats.tcp``)."""

    bad_marks: int = 0
    hole_bytes: int = 0
    hole_bytes_acked: int = 0
    holes: int = 0
    holes_acked: int = 0
    holes_by_memory: int = 0
    ignored_streams: int = 0
    marks_too_long: int = 0
    out_of_order: int = 0
    overlapping: int = 0
    payload_bytes: int = 0
    resync_skipped_bytes: int = 0
    resyncs: int = 0
    retransmitted: int = 0
    segments: int = 0

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


# emit(stream, head, rpc_len, captured, ts_first, ts_last, frame_first,
#      frame_last, frames, ip_frags, record_frags, complete)
Emit = Callable[..., None]
# event(stream, kind, ts, frame, seq, length[, duration])
Event = Callable[..., None]


class Ordering:
    """Sequence ordering of one direction: the next byte expected and the
    segments held until the hole before them is filled.  Mutated by
    ``TcpReassembler`` (its ordering half); the dissector reads ``next_seq``
    (a SYN inside the window is dropped, ``Dissector._syn_dropped``)."""

    __slots__ = ("next_seq", "pending", "pending_bytes", "hole_since")

    def __init__(self) -> None:
        self.next_seq = -1  # sequence number of the next byte in order (-1: none yet)
        # early segments by sequence number: (captured bytes, wire length, ts, frame, ip_frags)
        self.pending: dict[int, tuple[bytes, int, int, int, int]] = {}
        self.pending_bytes = 0  # captured bytes held in pending
        self.hole_since = -1  # when the hole before the held segments opened (-1: none)


class Framing:
    """ONC-RPC record marking of one direction: the MARK / FRAG / RESYNC /
    IGNORE state machine of the module docstring.  Mutated by
    ``TcpReassembler`` (its record-marking half); ``tcp_state.watch`` reads
    ``mode`` (no zero-window stretch on a stream given up) and the dissector
    ``synced`` (a SYN on a direction that carried RPC records)."""

    __slots__ = (
        "mode",
        "mark",
        "mark_pkt",
        "frag_left",
        "frag_last",
        "synced",
        "unsynced_bytes",
        "lost_at",
        "lost_ts",
        "lost_frame",
        "lost_last_ts",
        "last_len",
        "pred_len",
        "pred_off",
        "pred_start",
        "pred_last",
        "pred",
    )

    def __init__(self) -> None:
        self.mode = RESYNC
        self.mark = b""  # the bytes of a record mark split across segments
        self.mark_pkt: tuple[int, int, int] | None = None  # (ts, frame, ip_frags) of a split mark
        self.frag_left = 0  # bytes of the current fragment still to come
        self.frag_last = False  # the current fragment ends its record
        self.synced = False  # a record mark was accepted once
        self.unsynced_bytes = 0  # bytes searched for a first record start
        # An unframed stretch (event rpc_unframed): the sequence number of the
        # record boundary where a record mark lay in bytes not captured (-1:
        # none open), the time and frame of the segment there, and the time of
        # the last segment whose bytes belong to the stretch.
        self.lost_at = -1
        self.lost_ts = self.lost_frame = self.lost_last_ts = 0
        # Its records, taken as long as the last record framed before it
        # (``last_len``: mark included, a single-fragment record; 0 unknown):
        # ``pred_len`` that length (0: not split), ``pred_off`` where the next
        # record begins (bytes into the stretch), ``pred_start`` the (ts, frame,
        # captured?) of the segment where the current one began (None: not
        # begun; not captured: a hole stepped over then), ``pred`` the records
        # ended so far as (offset, ts, frame, end ts, first byte captured?, last
        # byte captured?); ``pred_last`` the (frame, ts) of the latest captured
        # segment of the current one (frame -1: none yet): a record ends when its
        # last bytes came, a hole in it filled after the segments held behind the
        # hole (each fed at its own capture time).
        self.last_len = 0
        self.pred_len = self.pred_off = 0
        self.pred_start: tuple[int, int, bool] | None = None
        self.pred_last = (-1, 0)
        self.pred: list[tuple[int, int, int, int, bool, bool]] = []


class Message:
    """The RPC message being assembled from its record's fragments (only its
    first ``head_bytes`` kept), and where the last one handed on ended.
    Mutated by ``TcpReassembler``; the dissector reads ``start`` / ``end``
    (the ACK a whole message waits for), ``assembling`` (a send gap part-way
    through a message) and ``ts_last`` / ``frame_last`` (a stream flushed)."""

    __slots__ = (
        "assembling",
        "start",
        "end",
        "head",
        "head_open",
        "length",
        "captured",
        "ts_first",
        "ts_last",
        "frame_first",
        "frame_last",
        "frames",
        "ip_frags",
        "record_frags",
    )

    def __init__(self) -> None:
        self.assembling = False  # a record mark began a message not yet handed on
        self.start = 0  # sequence number of the message's record mark
        self.end = -1  # sequence number past the last message handed on (-1: cut short)
        self.head = bytearray()
        self.head_open = False  # bytes still go to head (none missed before its limit)
        self.length = self.captured = 0  # bytes of its fragments so far, and of them captured
        self.ts_first = self.ts_last = 0
        self.frame_first = self.frame_last = 0
        self.frames = self.ip_frags = self.record_frags = 0


class IpFacts:
    """The IP packets of one direction: counts and extremes, and the facts
    list of its address pair (shared by every stream of the pair).  Mutated by
    the dissector (per packet) and ``tcp_state.ip_extremes`` / ``retire``
    (which folds the counts into ``facts`` when the stream ends)."""

    __slots__ = ("facts", "packets", "ip_bytes", "max_ip_len", "ttl")

    def __init__(self, facts: list[int]) -> None:
        self.facts = facts
        self.packets = self.ip_bytes = self.max_ip_len = 0
        self.ttl = -2  # TTL of the last packet (-2: none yet)


class WindowWatch:
    """The handshake and the windows of one direction (RFC 9293, RFC 7323):
    options of its SYN, the window scale and MSS in effect, its bytes in
    flight against the peer's window, open zero-window / window-full
    stretches.  Mutated by ``tcp_state`` (``on_syn``, ``watch``,
    ``window_reached``, ``close_stretches``) and by the dissector on the
    peer's ACKs (the peer's window)."""

    __slots__ = (
        "watch",
        "handshake_ack_due",
        "syn_wscale",
        "syn_mss",
        "syn_window",
        "wshift",
        "mss",
        "wtrack",
        "seq_hi",
        "wlimit",
        "peer_wnd",
        "wack",
        "wwin",
        "zw_since",
        "zw_frame",
        "zw_seq",
        "wfull_since",
        "wfull_frame",
        "wfull_seq",
        "wfull_wnd",
    )

    def __init__(self) -> None:
        # True while the slow path must look at every packet of this direction
        # (a handshake ACK is due or a zero-window stretch is open).
        self.watch = False
        self.handshake_ack_due = False  # our peer's SYN-ACK seen, our ACK not yet
        self.syn_wscale = -2  # window scale in our SYN: -2 no SYN seen, -1 none offered
        self.syn_mss = -1  # MSS option in our SYN / SYN-ACK (-1 none)
        self.syn_window = 0  # the window in our SYN / SYN-ACK (never scaled)
        self.wshift = -1  # shift applied to the windows we advertise (-1 unknown)
        self.mss = 0  # largest segment the peer accepts (its MSS option)
        self.wtrack = False  # our bytes in flight are checked against the peer's window
        self.seq_hi = 0  # end of the highest byte sent (when wtrack, up to a full window)
        # (when wtrack) the peer's last scaled window, and the sequence number our
        # data reaches when it fills it within one MSS: peer's ack + window - mss
        self.peer_wnd = 0
        self.wlimit = 0
        # the peer's ACK number and raw window wlimit was computed from (-1: none),
        # so that only a change recomputes it
        self.wack = self.wwin = -1
        # open stretches: start time (-1 none), frame, sequence number, window
        self.zw_since = self.zw_frame = self.zw_seq = -1  # we advertise a zero window
        self.wfull_since = self.wfull_frame = self.wfull_seq = self.wfull_wnd = -1  # we fill
        # the peer's window


class RttWatch:
    """Data->ACK round trips of one direction, one segment timed at a time (as
    TCP times them), of at most RTT_MAX_SEGMENT bytes.  Mutated by the
    dissector (our data segments, the peer's ACKs) and
    ``tcp_state.ack_rtt_sample`` / ``retire`` (the smallest sample becomes a
    ``tcp_ack_rtt`` event)."""

    __slots__ = ("hi", "end", "start", "best")

    def __init__(self) -> None:
        self.hi = -1  # the end of the highest byte sent (-1: none yet)
        self.end = -1  # the end of the segment being timed (-1: none)
        self.start: tuple[int, int, int, int] = (0, 0, 0, 0)  # its (ts, frame, seq, length)
        # the smallest sample as (round trip ns, ts, frame, seq, length)
        self.best: tuple[int, int, int, int, int] | None = None


class SendGaps:
    """Where this direction's last data segment left it, for the send gap
    after it.  Mutated by the dissector (each data segment, the peer's ACKs);
    ``tcp_state.send_gap`` reads it when the next segment comes late."""

    __slots__ = ("last_ts", "last_frame", "mid", "flight", "acked")

    def __init__(self) -> None:
        self.last_ts = self.last_frame = -1  # time and frame of our last data segment
        self.mid = False  # it left an RPC message part-sent
        self.flight = 0  # the bytes we then had unacknowledged (-1: unknown)
        self.acked = -1  # when the peer had acknowledged everything we had sent (-1: not yet)


class Acks:
    """What the peer acknowledged of this direction's data: its highest ACK
    number and the whole messages waiting for their ACK (which the longest
    data segment places, ``tcp_state.ack_point``).  Mutated by the dissector:
    its ``emit_tcp`` queues a message, the peer's ACKs release them
    (``collector.Collector.acked``)."""

    __slots__ = ("hi", "max_seg", "due", "records")

    def __init__(self) -> None:
        self.hi = -1  # the peer's highest ACK number (-1: none yet)
        self.max_seg = 0  # the longest data segment seen (bytes)
        # (the sequence number an ACK must reach, row of the message), oldest first
        self.due: deque[tuple[int, int]] | None = None  # made when first needed
        # the records of unframed stretches waiting likewise: (the sequence number
        # an ACK must reach, where the record begins, its length), oldest first
        self.records: deque[tuple[int, int, int]] | None = None  # made when first needed


class HalfStream:
    """One direction of one TCP connection: who it is, and one part per
    concern (each says what mutates it), so that a function's arguments show
    which state it touches."""

    __slots__ = (
        "src",
        "sport",
        "dst",
        "dport",
        "conn",
        "seen",
        "ended",
        "order",
        "framing",
        "msg",
        "ip",
        "win",
        "rtt",
        "gaps",
        "acks",
        "rev",
    )

    def __init__(
        self,
        src: bytes,
        sport: int,
        dst: bytes,
        dport: int,
        conn: int,
        facts: list[int] | None = None,
    ) -> None:
        self.src, self.sport, self.dst, self.dport, self.conn = src, sport, dst, dport, conn
        # frame number of its last packet (dissector.Dissector: the idlest are forgotten)
        self.seen = 0
        # a FIN or RST was seen from this direction (or an RST from the other):
        # a SYN on its ports after that is a new connection (dissector.Dissector)
        self.ended = False
        self.order = Ordering()
        self.framing = Framing()
        self.msg = Message()
        self.ip = IpFacts(facts if facts is not None else [])
        self.win = WindowWatch()
        self.rtt = RttWatch()
        self.gaps = SendGaps()
        self.acks = Acks()
        # the other direction of the same connection, once seen (dissector.Dissector)
        self.rev: HalfStream | None = None


class TcpReassembler:
    """Feeds segments into half-streams and emits RPC messages: it mutates a
    stream's ``order``, ``framing`` and ``msg`` parts (the stream itself is
    handed on as the subject of events and messages)."""

    def __init__(
        self,
        limits: ParseLimits,
        emit: Emit,
        event: Event,
        is_pending_call: Callable[[HalfStream, int], bool],
    ) -> None:
        self.limits = limits
        self.head_limit = limits.head_bytes
        self.emit = emit
        self.event = event
        self.is_pending_call = is_pending_call
        self.stats = TcpStats()
        self.pending_total = 0  # bytes held by all directions

    # ---- ordering ---------------------------------------------------------

    def start(self, hs: HalfStream, isn: int) -> None:
        """A SYN: the stream begins at isn+1 with a record mark."""
        self.flush(hs, ts=hs.msg.ts_last, frame=hs.msg.frame_last)
        hs.order.next_seq = (isn + 1) % SEQ_MOD
        fr = hs.framing
        fr.mode = MARK
        fr.mark = b""

    def segment(
        self,
        hs: HalfStream,
        seq: int,
        data: Bytes,
        wire_len: int,
        ts: int,
        frame: int,
        ip_frags: int,
    ) -> None:
        """One segment's payload: data is what was captured of wire_len bytes."""
        st = self.stats
        st.segments += 1
        st.payload_bytes += wire_len
        if hs.framing.mode == IGNORE:
            return
        o = hs.order
        if o.next_seq < 0:  # first data seen without the SYN: mid-stream start
            o.next_seq = seq
        rel = (seq - o.next_seq) % SEQ_MOD
        if rel >= SEQ_MOD >> 1:
            rel -= SEQ_MOD
        if rel == 0:
            if o.pending:  # it fills the hole the held segments wait behind
                self.event(hs, "tcp_hole_filled", ts, frame, seq, wire_len, ts - o.hole_since)
            self._feed(hs, data, wire_len, ts, frame, ip_frags)
            if o.pending:
                self._drain(hs, ts, frame)
            return
        if rel < -MAX_SEQ_JUMP:
            # Wild jump back (corrupt, or a new connection on the same ports): no
            # retransmission is that far behind.  Restart framing there.
            self._jump(hs, seq, data, wire_len, ts, frame, ip_frags, rel)
            return
        if rel < 0:
            if rel + wire_len <= 0:
                st.retransmitted += 1
                self.event(hs, "tcp_retransmission", ts, frame, seq, wire_len)
                return
            st.overlapping += 1
            if o.pending:
                self.event(hs, "tcp_hole_filled", ts, frame, seq, wire_len, ts - o.hole_since)
            cut = -rel
            self._feed(hs, data[cut:], wire_len - cut, ts, frame, ip_frags)
            if o.pending:
                self._drain(hs, ts, frame)
            return
        if rel > MAX_SEQ_JUMP:
            # Wild jump (corrupt or a new connection on the same ports): restart.
            self._jump(hs, seq, data, wire_len, ts, frame, ip_frags, rel)
            return
        # Early: hold it until the hole before it is filled.
        st.out_of_order += 1
        if seq in o.pending:
            st.retransmitted += 1
            self.event(hs, "tcp_retransmission", ts, frame, seq, wire_len)
            return
        kept = bytes(data)
        o.pending[seq] = (kept, wire_len, ts, frame, ip_frags)
        o.pending_bytes += len(kept)
        self.pending_total += len(kept)
        if o.hole_since < 0:
            o.hole_since = ts
        lim = self.limits
        if (
            len(o.pending) > lim.max_pending_segments
            or o.pending_bytes > lim.max_pending_bytes
            or ts - o.hole_since > lim.max_hole_age_ns
        ):
            self._skip_hole(hs, ts, frame)
        elif self.pending_total > lim.max_pending_bytes_total:
            self.stats.holes_by_memory += 1
            self._skip_hole(hs, ts, frame)

    def _jump(
        self,
        hs: HalfStream,
        seq: int,
        data: Bytes,
        wire_len: int,
        ts: int,
        frame: int,
        ip_frags: int,
        rel: int,
    ) -> None:
        """A segment more than MAX_SEQ_JUMP away from the next expected byte:
        the stream restarts there, looking for a record start."""
        self.flush(hs, ts, frame)
        self.event(hs, "seq_jump", ts, frame, seq, rel)
        hs.order.next_seq = seq
        hs.framing.mode = RESYNC
        self._feed(hs, data, wire_len, ts, frame, ip_frags)

    def acked(self, hs: HalfStream, ack: int, ts: int, frame: int) -> None:
        """The peer acknowledged up to `ack`: held holes before it were received
        by the peer, so the capture (not the network) lost them; step over them
        now rather than wait (tshark's "ACKed segment that wasn't captured")."""
        o = hs.order
        while o.pending and o.next_seq >= 0:
            first = min(o.pending, key=lambda s: _rel(o, s))
            if _rel(o, ack) < _rel(o, first):
                break
            self._skip_hole(hs, ts, frame, acked=True)

    def _drain(self, hs: HalfStream, ts: int, frame: int) -> None:
        """Feed held segments that are now in order.

        Each keeps its own capture time: a message wholly inside held segments
        ends at its own last segment (as tshark reports it), not at the
        retransmission that filled an earlier hole."""
        o = hs.order
        for seq in sorted(o.pending, key=lambda s: _rel(o, s)):
            rel = _rel(o, seq)
            if rel > 0:
                break
            held = o.pending.pop(seq, None)
            if held is None:  # the stream was given up (IGNORE) while feeding
                break
            data, wire_len, seg_ts, seg_frame, ip_frags = held
            o.pending_bytes -= len(data)
            self.pending_total -= len(data)
            if rel + wire_len <= 0:
                self.stats.retransmitted += 1
                self.event(hs, "tcp_retransmission", seg_ts, seg_frame, seq, wire_len)
                continue
            mv = memoryview(data)[-rel:] if rel else memoryview(data)
            self._feed(hs, mv, wire_len + rel, seg_ts, seg_frame, ip_frags)
        if o.pending:
            o.hole_since = ts if o.hole_since < 0 else o.hole_since
        else:
            o.hole_since = -1

    def _skip_hole(self, hs: HalfStream, ts: int, frame: int, acked: bool = False) -> None:
        """Declare the bytes before the earliest held segment lost; `acked`:
        the peer acknowledged them (the capture missed them, not the network)."""
        o = hs.order
        first = min(o.pending, key=lambda s: _rel(o, s))
        gap = _rel(o, first)
        self.stats.holes += 1
        self.stats.hole_bytes += gap
        if acked:
            self.stats.holes_acked += 1
            self.stats.hole_bytes_acked += gap
        self.event(hs, "tcp_hole", ts, frame, o.next_seq, gap)
        self._feed(hs, memoryview(b""), gap, ts, frame, 0)
        o.hole_since = -1
        self._drain(hs, ts, frame)

    def flush(self, hs: HalfStream, ts: int, frame: int) -> None:
        """End of stream (FIN/RST/end of capture): step over held holes and emit
        a message left incomplete."""
        o, fr = hs.order, hs.framing
        while o.pending:
            self._skip_hole(hs, ts, frame)
        if hs.msg.assembling:
            self._emit(hs, complete=False)
        if fr.lost_at >= 0:
            self._unframed(hs, o.next_seq)
        if fr.mode != IGNORE:
            fr.mode = RESYNC
        fr.mark = b""
        o.next_seq = -1

    # ---- record marking ---------------------------------------------------

    def _feed(
        self,
        hs: HalfStream,
        data: Bytes,
        wire_len: int,
        ts: int,
        frame: int,
        ip_frags: int,
    ) -> None:
        """In-order bytes: data holds the captured part of wire_len stream bytes,
        carried by the packet captured at ts as frame number `frame`."""
        o, fr, m = hs.order, hs.framing, hs.msg
        base = o.next_seq  # the sequence number of data[0]
        o.next_seq = (o.next_seq + wire_len) % SEQ_MOD
        cap = len(data)
        if cap > wire_len:
            cap = wire_len
        pos = 0
        hole = cap == 0 and ip_frags == 0  # bytes lost by the capture, no packet
        counted = False  # this segment already counted in the message's frames
        while pos < wire_len:
            mode = fr.mode
            if mode == FRAG:
                n = fr.frag_left
                if n > wire_len - pos:
                    n = wire_len - pos
                if not counted and not hole:
                    m.frames += 1
                    m.ip_frags += ip_frags
                    counted = True
                if pos < cap:
                    got = cap - pos if cap - pos < n else n
                    if m.head_open:
                        room = self.head_limit - len(m.head)
                        if room > 0:
                            m.head += data[pos : pos + (got if got < room else room)]
                        if got < n and len(m.head) < self.head_limit:
                            m.head_open = False
                    m.captured += got
                elif m.head_open and len(m.head) < self.head_limit:
                    m.head_open = False
                m.length += n
                fr.frag_left -= n
                pos += n
                if frame > m.frame_last and not hole:
                    m.ts_last, m.frame_last = ts, frame
                if fr.frag_left == 0:
                    fr.mode = MARK
                    if fr.frag_last:
                        self._emit(hs, complete=True, end=(base + pos) % SEQ_MOD)
            elif mode == MARK:
                need = 4 - len(fr.mark)
                avail = cap - pos
                if avail < need and pos + avail < wire_len:
                    # The mark lies (partly) in bytes that were not captured: the
                    # records from here are stepped over unframed until one is
                    # found again, their bytes an rpc_unframed stretch.
                    at = -1 if m.assembling else (base + pos - len(fr.mark)) % SEQ_MOD
                    began = fr.mark_pkt if fr.mark and fr.mark_pkt is not None else (ts, frame)
                    self._lose_sync(hs)
                    if at >= 0 and not hole:
                        fr.lost_at, fr.lost_ts, fr.lost_frame = at, began[0], began[1]
                        fr.pred_len, fr.pred_off = fr.last_len, 0
                        fr.pred_start = (began[0], began[1], True)
                        fr.pred_last = (-1, 0)
                        fr.pred = []
                    continue
                if avail < need:  # mark split across segments
                    if not fr.mark and not m.assembling:
                        fr.mark_pkt = (ts, frame, ip_frags)
                    fr.mark += bytes(data[pos:cap])
                    pos = cap
                    break
                mark = (
                    fr.mark + bytes(data[pos : pos + need])
                    if fr.mark
                    else bytes(data[pos : pos + 4])
                )
                fr.mark = b""
                value = int.from_bytes(mark, "big")
                mark_pkt, fr.mark_pkt = fr.mark_pkt, None
                flen = value & rpc.FRAG_LEN_MASK
                start = not m.assembling
                hdr = pos + need
                if flen > self.limits.max_record_bytes or (
                    start and (flen < rpc.MIN_REPLY_LEN or not _header_ok(data, hdr, cap))
                ):
                    self.stats.bad_marks += 1
                    if flen > self.limits.max_record_bytes:
                        self.stats.marks_too_long += 1
                    self._lose_sync(hs)
                    if need == 4:
                        pos += 1  # search again just after this false mark's first byte
                    continue
                pos = hdr
                if start:
                    m.start = (base + hdr - 4) % SEQ_MOD  # its record mark
                    m.assembling = True
                    m.head = bytearray()
                    m.head_open = True
                    m.length = m.captured = 0
                    m.ts_first, m.frame_first = ts, frame
                    m.ts_last, m.frame_last = ts, frame
                    m.frames = 1
                    m.ip_frags = ip_frags
                    if mark_pkt is not None and need < 4 and mark_pkt[1] != frame:
                        m.ts_first, m.frame_first = mark_pkt[0], mark_pkt[1]
                        m.frames = 2
                        m.ip_frags += mark_pkt[2]
                    m.record_frags = 0
                    counted = True
                elif not counted:
                    m.frames += 1
                    m.ip_frags += ip_frags
                    counted = True
                m.record_frags += 1
                fr.frag_left = flen
                fr.frag_last = bool(value & rpc.LAST_FRAG)
                fr.synced = True
                fr.mode = FRAG
                if flen == 0 and fr.frag_last:
                    fr.mode = MARK
                    self._emit(hs, complete=True, end=(base + pos) % SEQ_MOD)
            elif mode == RESYNC:
                q = self._find_record(hs, data, pos, cap, cap < wire_len)
                if fr.lost_at >= 0 and (q < 0 or q > pos):  # bytes of the stretch
                    if not hole:
                        fr.lost_last_ts = ts
                    end = (base + (q if q >= 0 else wire_len) - fr.lost_at) % SEQ_MOD
                    self._records(fr, hs.acks, end, ts, frame, not hole)
                if q < 0:
                    skipped = wire_len - pos
                    self.stats.resync_skipped_bytes += skipped
                    if not fr.synced:
                        fr.unsynced_bytes += skipped
                        if fr.unsynced_bytes > self.limits.max_unsynced_bytes:
                            fr.mode = IGNORE
                            o.pending.clear()
                            self.pending_total -= o.pending_bytes
                            o.pending_bytes = 0
                            self.stats.ignored_streams += 1
                    break
                if q > pos or fr.synced:
                    self.stats.resyncs += 1
                    self.event(hs, "rpc_resync", ts, frame, o.next_seq, q - pos)
                self.stats.resync_skipped_bytes += q - pos
                pos = q
                if fr.lost_at >= 0:
                    self._unframed(hs, (base + q) % SEQ_MOD)
                fr.mode = MARK
                fr.mark = b""
            else:  # IGNORE
                break

    def _records(self, fr: Framing, acks: Acks, end: int, ts: int, frame: int, seen: bool) -> None:
        """The stretch's bytes up to ``end`` (bytes into it) have come, the last
        of them in this segment (``seen`` False: bytes the capture missed, a
        hole stepped over at ts): the records of ``pred_len`` bytes that began
        or ended in it; each one ended waits for the peer's ACK of it, as a
        message does (event rpc_unframed_acked)."""
        n = fr.pred_len
        if n <= 0:
            return
        while True:
            if fr.pred_start is None and fr.pred_off < end:
                fr.pred_start = (ts, frame, seen)
            if seen and frame > fr.pred_last[0]:
                fr.pred_last = (frame, ts)
            if fr.pred_off + n > end:
                return
            if len(fr.pred) >= self.limits.max_unframed_records:
                fr.pred_len = 0
                fr.pred = []
                return
            start = fr.pred_start or (ts, frame, seen)
            ts1 = fr.pred_last[1] if fr.pred_last[0] >= 0 else ts
            fr.pred.append((fr.pred_off, start[0], start[1], ts1, start[2], seen))
            from oracle.tcp_state import ack_point  # (it imports this module)

            seq = (fr.lost_at + fr.pred_off) % SEQ_MOD
            waiting = acks.records
            if waiting is None:
                waiting = acks.records = deque()
            elif len(waiting) >= max(self.limits.max_ack_waiting, 1):
                waiting.popleft()
            waiting.append((ack_point(seq, (seq + n) % SEQ_MOD, acks.max_seg), seq, n))
            fr.pred_off += n
            fr.pred_start = None
            fr.pred_last = (-1, 0)

    def _unframed(self, hs: HalfStream, end: int) -> None:
        """Close the unframed stretch open since ``framing.lost_at`` at sequence
        number ``end`` (a record found, or where the stream's bytes ended): one
        rpc_unframed event, and one rpc_unframed_record per record when the
        stretch is a whole number of records of the last length framed."""
        fr = hs.framing
        length = (end - fr.lost_at) % SEQ_MOD
        if length:
            duration = fr.lost_last_ts - fr.lost_ts
            self.event(hs, "rpc_unframed", fr.lost_ts, fr.lost_frame, fr.lost_at, length, duration)
            n = fr.pred_len
            if n > 0 and length % n == 0 and len(fr.pred) == length // n:
                for off, ts0, frame0, ts1, first, last in fr.pred:
                    seq = (fr.lost_at + off) % SEQ_MOD
                    duration = ts1 - ts0 if first and last else -1 if first else -2
                    self.event(hs, "rpc_unframed_record", ts0, frame0, seq, n, duration)
        fr.lost_at = -1
        fr.pred_len = 0
        fr.pred = []

    def _lose_sync(self, hs: HalfStream) -> None:
        if hs.msg.assembling:
            self._emit(hs, complete=False)
        fr = hs.framing
        fr.mode = RESYNC
        fr.mark = b""

    def _find_record(self, hs: HalfStream, data: Bytes, pos: int, cap: int, cut: bool) -> int:
        """Offset of the first plausible record start in data[pos:cap], or -1;
        ``cut``: the segment's bytes after ``cap`` were not captured (a call
        header they cut after its procedure number is judged on what came)."""
        if cap - pos < 16:
            return -1
        buf = bytes(data[pos:cap])
        synced = hs.framing.synced
        cands: list[int] = []
        for sig in (_CALL_SIG, *_REPLY_SIGS):
            i = buf.find(sig)
            while i >= 0:
                if i >= 8:
                    cands.append(i - 8)
                i = buf.find(sig, i + 1)
        for q in sorted(set(cands)):
            value = int.from_bytes(buf[q : q + 4], "big")
            flen = value & rpc.FRAG_LEN_MASK
            if flen < rpc.MIN_REPLY_LEN or flen > self.limits.max_record_bytes:
                continue
            if buf[q + 11] == rpc.CALL:
                if plausible_call(buf, q + 4, not (q == 0 and not synced), cut):
                    return pos + q
            elif plausible_reply(buf, q + 4):
                xid = int.from_bytes(buf[q + 4 : q + 8], "big")
                if self.is_pending_call(hs, xid) or (q == 0 and value & rpc.LAST_FRAG):
                    return pos + q
        return -1

    def _emit(self, hs: HalfStream, complete: bool, end: int = -1) -> None:
        """Hand on the message assembled; ``end``: the sequence number just past
        its last byte (-1: cut short, not waited for an ACK)."""
        m, fr = hs.msg, hs.framing
        m.assembling = False
        m.end = end
        fr.last_len = m.length + 4 if complete and m.record_frags == 1 else 0
        self.emit(
            hs,
            bytes(m.head),
            m.length + fr.frag_left,  # declared length, also when cut short
            m.captured,
            m.ts_first,
            m.ts_last,
            m.frame_first,
            m.frame_last,
            m.frames,
            m.ip_frags,
            m.record_frags,
            complete,
        )
        m.head = bytearray()
        fr.frag_left = 0


def part_sent(hs: HalfStream) -> bool:
    """Did the bytes in order so far leave an RPC message part-sent?  One being
    assembled, or in an unframed stretch a record begun and not ended (its
    records not split: taken as part-sent, a boundary being one byte of many)."""
    if hs.msg.assembling:
        return True
    fr = hs.framing
    if fr.lost_at < 0:
        return False
    return fr.pred_len <= 0 or fr.pred_start is not None


def _rel(o: Ordering, seq: int) -> int:
    """seq's distance from the next byte in order (negative: behind it)."""
    rel = (seq - o.next_seq) % SEQ_MOD
    return rel - SEQ_MOD if rel >= SEQ_MOD >> 1 else rel


def _header_ok(data: Bytes, pos: int, cap: int) -> bool:
    """Check the RPC header after a record mark, as far as it was captured."""
    if cap < pos + 8:
        return True  # not captured here: accept the mark on its length alone
    mtype = int.from_bytes(data[pos + 4 : pos + 8], "big")
    if mtype == rpc.CALL:
        return cap < pos + 12 or int.from_bytes(data[pos + 8 : pos + 12], "big") == rpc.RPC_VERSION
    return mtype == rpc.REPLY
