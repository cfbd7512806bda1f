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

A ``HalfStream`` also carries the per-direction facts the parser loop keeps
(``nfstrace/parsers/tcp_state.py``): handshake state, window scale and MSS, the
bytes in flight against the peer's window, open zero-window / window-full
stretches.
Bytes that were not captured (snaplen, lost segments) are stepped over by
length, so a `-s 256` capture keeps every message whose header was captured.

Resync acceptance (Zeek's rule, adapted): a position is a record start when
the 4-byte mark gives a plausible fragment length and the bytes after it are
a plausible call (RPC version 2, known program) or a plausible reply whose xid
is an outstanding call in the other direction, or any plausible reply that
starts a segment.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, fields

from nfstrace.config import ParseLimits
from nfstrace.parsers.capture import Bytes
from nfstrace.parsers.rpc import plausible_call, plausible_reply
from nfstrace.protocol import rpc

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


class HalfStream:
    """One direction of one TCP connection."""

    __slots__ = (
        # identity
        "src",
        "sport",
        "dst",
        "dport",
        "conn",
        "seen",  # frame number of its last packet (dissector.Dissector: the idlest are forgotten)
        # ordering
        "next_seq",
        "pending",
        "pending_bytes",
        "hole_since",
        # record marking
        "mode",
        "mark",
        "mark_pkt",
        "frag_left",
        "frag_last",
        "synced",
        "unsynced_bytes",
        "ended",
        # the message being assembled
        "in_msg",
        "msg_start",
        "msg_end",
        "head",
        "head_open",
        "msg_len",
        "captured",
        "ts_first",
        "ts_last",
        "frame_first",
        "frame_last",
        "frames",
        "ip_frags",
        "record_frags",
        # per-direction IP facts (a list shared by every stream of the address
        # pair; tcp_state.retire folds the counts below into it when the stream ends)
        "facts",
        "packets",
        "ip_bytes",
        "max_ip_len",
        "ttl",
        # handshake and window (tcp_state.py): see __init__
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
        # data->ACK round trips (tcp_state.py): see __init__
        "rtt_hi",
        "rtt_end",
        "rtt_start",
        "rtt_best",
        # send gaps (tcp_state.py): see __init__
        "ack_hi",
        "max_seg",
        "gap_t",
        "gap_frame",
        "gap_mid",
        "gap_flight",
        "gap_acked",
        "ack_due",
        # the other direction of the same connection, once seen (dissector.Dissector)
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
        self.seen = 0
        self.next_seq = -1
        self.pending: dict[int, tuple[bytes, int, int, int, int]] = {}
        self.pending_bytes = 0
        self.hole_since = -1
        self.mode = RESYNC
        self.mark = b""
        self.mark_pkt: tuple[int, int, int] | None = None  # (ts, frame, ip_frags) of a split mark
        self.frag_left = 0
        self.frag_last = False
        self.synced = False
        self.unsynced_bytes = 0
        # a FIN or RST was seen from this direction (or an RST from the other):
        # a SYN on its ports after that is a new connection (dissector.Dissector)
        self.ended = False
        self.in_msg = False
        self.msg_start = 0  # sequence number of the message's record mark
        self.msg_end = -1  # sequence number past the last message handed on (-1: cut short)
        self.head = bytearray()
        self.head_open = False
        self.msg_len = self.captured = 0
        self.ts_first = self.ts_last = 0
        self.frame_first = self.frame_last = 0
        self.frames = self.ip_frags = self.record_frags = 0
        self.facts = facts if facts is not None else []
        self.packets = self.ip_bytes = self.max_ip_len = 0
        self.ttl = -2  # TTL of the last packet (-2: none yet)
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
        # Data->ACK round trips, one segment timed at a time (as TCP times them),
        # of at most RTT_MAX_SEGMENT bytes: the end of the highest byte sent
        # (-1: none yet), the end of the segment being timed (-1: none), its
        # (ts, frame, seq, length), and the smallest sample as
        # (round trip ns, ts, frame, seq, length) or None.
        self.rtt_hi = self.rtt_end = -1
        self.rtt_start: tuple[int, int, int, int] = (0, 0, 0, 0)
        self.rtt_best: tuple[int, int, int, int, int] | None = None
        # Send gaps: the peer's highest ACK number (-1: none yet); the time and
        # frame of our last data segment (-1: none yet), whether it left an RPC
        # message part-sent, the bytes we then had unacknowledged, and when the
        # peer had acknowledged everything we had sent (-1: not yet).
        self.ack_hi = -1
        self.max_seg = 0  # the longest data segment seen (bytes)
        self.gap_t = self.gap_frame = -1
        self.gap_mid = False
        self.gap_flight = 0
        self.gap_acked = -1
        # Messages waiting for the peer's ACK: (the sequence number an ACK must
        # reach, row of the message), oldest first (collector.Collector.acked).
        self.ack_due: deque[tuple[int, int]] | None = None  # made when first needed
        self.rev: HalfStream | None = None


class TcpReassembler:
    """Feeds segments into half-streams and emits RPC messages."""

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
        self.flush(hs, ts=hs.ts_last, frame=hs.frame_last)
        hs.next_seq = (isn + 1) % SEQ_MOD
        hs.mode = MARK
        hs.mark = b""

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
        if hs.mode == IGNORE:
            return
        if hs.next_seq < 0:  # first data seen without the SYN: mid-stream start
            hs.next_seq = seq
        rel = (seq - hs.next_seq) % SEQ_MOD
        if rel >= SEQ_MOD >> 1:
            rel -= SEQ_MOD
        if rel == 0:
            self._feed(hs, data, wire_len, ts, frame, ip_frags)
            if hs.pending:
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
            cut = -rel
            self._feed(hs, data[cut:], wire_len - cut, ts, frame, ip_frags)
            if hs.pending:
                self._drain(hs, ts, frame)
            return
        if rel > MAX_SEQ_JUMP:
            # Wild jump (corrupt or a new connection on the same ports): restart.
            self._jump(hs, seq, data, wire_len, ts, frame, ip_frags, rel)
            return
        # Early: hold it until the hole before it is filled.
        st.out_of_order += 1
        if seq in hs.pending:
            st.retransmitted += 1
            self.event(hs, "tcp_retransmission", ts, frame, seq, wire_len)
            return
        kept = bytes(data)
        hs.pending[seq] = (kept, wire_len, ts, frame, ip_frags)
        hs.pending_bytes += len(kept)
        self.pending_total += len(kept)
        if hs.hole_since < 0:
            hs.hole_since = ts
        lim = self.limits
        if (
            len(hs.pending) > lim.max_pending_segments
            or hs.pending_bytes > lim.max_pending_bytes
            or ts - hs.hole_since > lim.max_hole_age_ns
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
        hs.next_seq = seq
        hs.mode = RESYNC
        self._feed(hs, data, wire_len, ts, frame, ip_frags)

    def acked(self, hs: HalfStream, ack: int, ts: int, frame: int) -> None:
        """The peer acknowledged up to `ack`: held holes before it were received
        by the peer, so the capture (not the network) lost them; step over them
        now rather than wait (tshark's "ACKed segment that wasn't captured")."""
        while hs.pending and hs.next_seq >= 0:
            first = min(hs.pending, key=lambda s: self._rel(hs, s))
            if self._rel(hs, ack) < self._rel(hs, first):
                break
            self._skip_hole(hs, ts, frame, acked=True)

    def _rel(self, hs: HalfStream, seq: int) -> int:
        rel = (seq - hs.next_seq) % SEQ_MOD
        return rel - SEQ_MOD if rel >= SEQ_MOD >> 1 else rel

    def _drain(self, hs: HalfStream, ts: int, frame: int) -> None:
        """Feed held segments that are now in order.

        Each keeps its own capture time: a message wholly inside held segments
        ends at its own last segment (as tshark reports it), not at the
        retransmission that filled an earlier hole."""
        for seq in sorted(hs.pending, key=lambda s: self._rel(hs, s)):
            rel = self._rel(hs, seq)
            if rel > 0:
                break
            held = hs.pending.pop(seq, None)
            if held is None:  # the stream was given up (IGNORE) while feeding
                break
            data, wire_len, seg_ts, seg_frame, ip_frags = held
            hs.pending_bytes -= len(data)
            self.pending_total -= len(data)
            if rel + wire_len <= 0:
                self.stats.retransmitted += 1
                self.event(hs, "tcp_retransmission", seg_ts, seg_frame, seq, wire_len)
                continue
            mv = memoryview(data)[-rel:] if rel else memoryview(data)
            self._feed(hs, mv, wire_len + rel, seg_ts, seg_frame, ip_frags)
        if hs.pending:
            hs.hole_since = ts if hs.hole_since < 0 else hs.hole_since
        else:
            hs.hole_since = -1

    def _skip_hole(self, hs: HalfStream, ts: int, frame: int, acked: bool = False) -> None:
        """Declare the bytes before the earliest held segment lost; `acked`:
        the peer acknowledged them (the capture missed them, not the network)."""
        first = min(hs.pending, key=lambda s: self._rel(hs, s))
        gap = self._rel(hs, first)
        self.stats.holes += 1
        self.stats.hole_bytes += gap
        if acked:
            self.stats.holes_acked += 1
            self.stats.hole_bytes_acked += gap
        self.event(hs, "tcp_hole", ts, frame, hs.next_seq, gap)
        self._feed(hs, memoryview(b""), gap, ts, frame, 0)
        hs.hole_since = -1
        self._drain(hs, ts, frame)

    def flush(self, hs: HalfStream, ts: int, frame: int) -> None:
        """End of stream (FIN/RST/end of capture): step over held holes and emit
        a message left incomplete."""
        while hs.pending:
            self._skip_hole(hs, ts, frame)
        if hs.in_msg:
            self._emit(hs, complete=False)
        if hs.mode != IGNORE:
            hs.mode = RESYNC
        hs.mark = b""
        hs.next_seq = -1

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
        base = hs.next_seq  # the sequence number of data[0]
        hs.next_seq = (hs.next_seq + wire_len) % SEQ_MOD
        cap = len(data)
        if cap > wire_len:
            cap = wire_len
        pos = 0
        hole = cap == 0 and ip_frags == 0  # bytes lost by the capture, no packet
        counted = False  # this segment already counted in the message's frames
        while pos < wire_len:
            mode = hs.mode
            if mode == FRAG:
                n = hs.frag_left
                if n > wire_len - pos:
                    n = wire_len - pos
                if not counted and not hole:
                    hs.frames += 1
                    hs.ip_frags += ip_frags
                    counted = True
                if pos < cap:
                    got = cap - pos if cap - pos < n else n
                    if hs.head_open:
                        room = self.head_limit - len(hs.head)
                        if room > 0:
                            hs.head += data[pos : pos + (got if got < room else room)]
                        if got < n and len(hs.head) < self.head_limit:
                            hs.head_open = False
                    hs.captured += got
                elif hs.head_open and len(hs.head) < self.head_limit:
                    hs.head_open = False
                hs.msg_len += n
                hs.frag_left -= n
                pos += n
                if frame > hs.frame_last and not hole:
                    hs.ts_last, hs.frame_last = ts, frame
                if hs.frag_left == 0:
                    hs.mode = MARK
                    if hs.frag_last:
                        self._emit(hs, complete=True, end=(base + pos) % SEQ_MOD)
            elif mode == MARK:
                need = 4 - len(hs.mark)
                avail = cap - pos
                if avail < need and pos + avail < wire_len:
                    # The mark lies (partly) in bytes that were not captured.
                    self._lose_sync(hs, ts, frame)
                    continue
                if avail < need:  # mark split across segments
                    if not hs.mark and not hs.in_msg:
                        hs.mark_pkt = (ts, frame, ip_frags)
                    hs.mark += bytes(data[pos:cap])
                    pos = cap
                    break
                mark = (
                    hs.mark + bytes(data[pos : pos + need])
                    if hs.mark
                    else bytes(data[pos : pos + 4])
                )
                hs.mark = b""
                value = int.from_bytes(mark, "big")
                mark_pkt, hs.mark_pkt = hs.mark_pkt, None
                flen = value & rpc.FRAG_LEN_MASK
                start = not hs.in_msg
                hdr = pos + need
                if flen > self.limits.max_record_bytes or (
                    start and (flen < rpc.MIN_REPLY_LEN or not self._header_ok(hs, data, hdr, cap))
                ):
                    self.stats.bad_marks += 1
                    if flen > self.limits.max_record_bytes:
                        self.stats.marks_too_long += 1
                    self._lose_sync(hs, ts, frame)
                    if need == 4:
                        pos += 1  # search again just after this false mark's first byte
                    continue
                pos = hdr
                if start:
                    hs.msg_start = (base + hdr - 4) % SEQ_MOD  # its record mark
                    hs.in_msg = True
                    hs.head = bytearray()
                    hs.head_open = True
                    hs.msg_len = hs.captured = 0
                    hs.ts_first, hs.frame_first = ts, frame
                    hs.ts_last, hs.frame_last = ts, frame
                    hs.frames = 1
                    hs.ip_frags = ip_frags
                    if mark_pkt is not None and need < 4 and mark_pkt[1] != frame:
                        hs.ts_first, hs.frame_first = mark_pkt[0], mark_pkt[1]
                        hs.frames = 2
                        hs.ip_frags += mark_pkt[2]
                    hs.record_frags = 0
                    counted = True
                elif not counted:
                    hs.frames += 1
                    hs.ip_frags += ip_frags
                    counted = True
                hs.record_frags += 1
                hs.frag_left = flen
                hs.frag_last = bool(value & rpc.LAST_FRAG)
                hs.synced = True
                hs.mode = FRAG
                if flen == 0 and hs.frag_last:
                    hs.mode = MARK
                    self._emit(hs, complete=True, end=(base + pos) % SEQ_MOD)
            elif mode == RESYNC:
                q = self._find_record(hs, data, pos, cap)
                if q < 0:
                    skipped = wire_len - pos
                    self.stats.resync_skipped_bytes += skipped
                    if not hs.synced:
                        hs.unsynced_bytes += skipped
                        if hs.unsynced_bytes > self.limits.max_unsynced_bytes:
                            hs.mode = IGNORE
                            hs.pending.clear()
                            self.pending_total -= hs.pending_bytes
                            hs.pending_bytes = 0
                            self.stats.ignored_streams += 1
                    break
                if q > pos or hs.synced:
                    self.stats.resyncs += 1
                    self.event(hs, "rpc_resync", ts, frame, hs.next_seq, q - pos)
                self.stats.resync_skipped_bytes += q - pos
                pos = q
                hs.mode = MARK
                hs.mark = b""
            else:  # IGNORE
                break

    def _lose_sync(self, hs: HalfStream, ts: int, frame: int) -> None:
        if hs.in_msg:
            self._emit(hs, complete=False)
        hs.mode = RESYNC
        hs.mark = b""

    def _header_ok(self, hs: HalfStream, data: Bytes, pos: int, cap: int) -> bool:
        """Check the RPC header after a record mark, as far as it was captured."""
        if cap < pos + 8:
            return True  # not captured here: accept the mark on its length alone
        mtype = int.from_bytes(data[pos + 4 : pos + 8], "big")
        if mtype == rpc.CALL:
            return (
                cap < pos + 12 or int.from_bytes(data[pos + 8 : pos + 12], "big") == rpc.RPC_VERSION
            )
        return mtype == rpc.REPLY

    def _find_record(self, hs: HalfStream, data: Bytes, pos: int, cap: int) -> int:
        """Offset of the first plausible record start in data[pos:cap], or -1."""
        if cap - pos < 16:
            return -1
        buf = bytes(data[pos:cap])
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
                if plausible_call(buf, q + 4, known_only=not (q == 0 and not hs.synced)):
                    return pos + q
            elif plausible_reply(buf, q + 4):
                xid = int.from_bytes(buf[q + 4 : q + 8], "big")
                if self.is_pending_call(hs, xid) or (q == 0 and value & rpc.LAST_FRAG):
                    return pos + q
        return -1

    def _emit(self, hs: HalfStream, complete: bool, end: int = -1) -> None:
        """Hand on the message assembled; ``end``: the sequence number just past
        its last byte (-1: cut short, not waited for an ACK)."""
        hs.in_msg = False
        hs.msg_end = end
        self.emit(
            hs,
            bytes(hs.head),
            hs.msg_len + hs.frag_left,  # declared length, also when cut short
            hs.captured,
            hs.ts_first,
            hs.ts_last,
            hs.frame_first,
            hs.frame_last,
            hs.frames,
            hs.ip_frags,
            hs.record_frags,
            complete,
        )
        hs.head = bytearray()
        hs.frag_left = 0
