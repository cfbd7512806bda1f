"""TCP state beyond reassembly, for the transport events: the handshake (MSS
and window scale options, RFC 9293 / RFC 7323), advertised windows (zero and
full windows), data->ACK round trips, send gaps, and what a stream leaves in
its direction's facts when it ends.  Functions of a ``HalfStream`` (tcp.py)
and an ``EventSink`` (the dissector's collector) called from the frame loop's
slow paths."""

from __future__ import annotations

from typing import Protocol

from nfstrace.parsers.capture import Bytes
from nfstrace.parsers.ip import F_IP_BYTES, F_MAX_IP_LEN, F_PACKETS, F_TTL_MAX, F_TTL_MIN
from nfstrace.parsers.tcp import IGNORE, HalfStream

# TCP flags
TH_FIN = 0x01
TH_SYN = 0x02
TH_RST = 0x04
TH_ACK = 0x10
# TCP options (RFC 9293, RFC 7323)
TCPOPT_EOL, TCPOPT_NOP, TCPOPT_MSS, TCPOPT_WSCALE = 0, 1, 2, 3
MAX_WSCALE = 14
# RFC 9293: the MSS a sender assumes when the peer's SYN carried none.
DEFAULT_MSS = 536

SEQ_MASK = (1 << 32) - 1
SEQ_HALF = 1 << 31
# A SYN whose sequence number is within this many bytes (or the peer's last
# window, if larger) of the next byte its direction of an established
# connection expects is not a new connection (see Dissector._syn_dropped).
SYN_WINDOW = 65535


class EventSink(Protocol):
    """Where the functions below record events (collector.Collector)."""

    def event(
        self,
        hs: HalfStream,
        kind: str,
        ts: int,
        frame: int,
        seq: int,
        length: int,
        duration: int = 0,
    ) -> None: ...


def tcp_options(p: Bytes, hl: int) -> tuple[int, int]:
    """(MSS, window scale) options of a SYN or SYN-ACK; -1 where absent."""
    mss = wscale = -1
    end = min(hl, len(p))
    i = 20
    while i < end:
        kind = p[i]
        if kind == TCPOPT_EOL:
            break
        if kind == TCPOPT_NOP:
            i += 1
            continue
        if i + 1 >= end or p[i + 1] < 2:
            break
        size = p[i + 1]
        if kind == TCPOPT_MSS and size == 4 and i + 4 <= end:
            mss = (p[i + 2] << 8) | p[i + 3]
        elif kind == TCPOPT_WSCALE and size == 3 and i + 3 <= end:
            wscale = min(p[i + 2], MAX_WSCALE)  # RFC 7323: larger values mean 14
        i += size
    return mss, wscale


def on_syn(
    col: EventSink,
    hs: HalfStream,
    rev: HalfStream | None,
    p: Bytes,
    hl: int,
    flags: int,
    seq: int,
    ack: int,
    window: int,
    ts: int,
    frame: int,
) -> bool:
    """A SYN or SYN-ACK: handshake event, MSS and window scale.

    Window scaling is in effect only when both the SYN and the SYN-ACK carry
    the option (RFC 7323).  A SYN-ACK without it settles both directions at
    shift 0 even when the SYN was not captured; one with it gives the
    server's shift, and the client's is known only from its SYN.  Returns
    True when both directions' shifts are known (window tracking on)."""
    mss, wscale = tcp_options(p, hl)
    hs.syn_mss = mss
    hs.syn_window = window
    hs.seq_hi = (seq + 1) & SEQ_MASK
    if not flags & TH_ACK:
        hs.syn_wscale = wscale
        col.event(hs, "tcp_syn", ts, frame, seq, 0)
        return False
    col.event(hs, "tcp_syn_ack", ts, frame, seq, 0)
    if rev is None:
        hs.wshift = wscale if wscale >= 0 else 0
        return False
    if wscale < 0 or rev.syn_wscale == -1:  # scaling off both ways
        hs.wshift = rev.wshift = 0
    else:
        hs.wshift = wscale
        rev.wshift = rev.syn_wscale  # -2 (SYN not seen) -> unknown
        if rev.wshift < 0:
            rev.wshift = -1
    if rev.syn_wscale == -2:  # the SYN was not captured: the client's next byte is our ack
        rev.seq_hi = ack
    rev.handshake_ack_due = rev.watch = True
    rev.mss = mss if mss > 0 else DEFAULT_MSS  # the client's segments fit our MSS
    hs.mss = rev.syn_mss if rev.syn_mss > 0 else DEFAULT_MSS
    # The windows of the SYN and SYN-ACK (never scaled) hold until the first ACKs.
    rev.peer_wnd = window
    rev.wlimit = (rev.seq_hi + window - rev.mss) & SEQ_MASK
    hs.wack = hs.wwin = rev.wack = rev.wwin = -1  # the next ACKs set the limits anew
    hs.peer_wnd = rev.syn_window if rev.syn_wscale != -2 else 0
    if hs.peer_wnd:
        hs.wlimit = (hs.seq_hi + hs.peer_wnd - hs.mss) & SEQ_MASK
    else:  # no window known yet: no check before the client's first ACK
        hs.wlimit = (hs.seq_hi + SEQ_HALF - 1) & SEQ_MASK
    rev.wtrack = hs.wshift >= 0
    hs.wtrack = rev.wshift >= 0
    return rev.wtrack and hs.wtrack


def watch(
    col: EventSink, hs: HalfStream, flags: int, window: int, seq: int, ts: int, frame: int
) -> None:
    """A packet of a direction under watch, or one advertising a zero window."""
    if hs.handshake_ack_due and flags & TH_ACK:
        hs.handshake_ack_due = False
        col.event(hs, "tcp_handshake_ack", ts, frame, seq, 0)
    if not window and not flags & TH_RST:
        if hs.zw_since < 0 and hs.mode != IGNORE:
            hs.zw_since, hs.zw_frame, hs.zw_seq = ts, frame, seq
    elif hs.zw_since >= 0:
        end_zero_window(col, hs, ts)
    hs.watch = hs.handshake_ack_due or hs.zw_since >= 0


def window_reached(hs: HalfStream, seq: int, end: int, ts: int, frame: int) -> None:
    """A data segment reaching (within one MSS) the window the peer advertised."""
    if (end - hs.seq_hi) & SEQ_MASK < SEQ_HALF:
        hs.seq_hi = end
    if hs.wfull_since < 0 and hs.peer_wnd > 0:  # a zero window is a stretch of its own
        hs.wfull_since, hs.wfull_frame = ts, frame
        hs.wfull_seq, hs.wfull_wnd = seq, hs.peer_wnd


def end_zero_window(col: EventSink, hs: HalfStream, ts: int) -> None:
    col.event(hs, "tcp_zero_window", hs.zw_since, hs.zw_frame, hs.zw_seq, 0, ts - hs.zw_since)
    hs.zw_since = -1


def end_window_full(col: EventSink, hs: HalfStream, ts: int) -> None:
    col.event(
        hs,
        "tcp_window_full",
        hs.wfull_since,
        hs.wfull_frame,
        hs.wfull_seq,
        hs.wfull_wnd,
        ts - hs.wfull_since,
    )
    hs.wfull_since = -1


def close_stretches(col: EventSink, hs: HalfStream, ts: int) -> None:
    """End the stretches still open on a direction (connection reset or
    replaced, or the end of the capture)."""
    if hs.zw_since >= 0:
        end_zero_window(col, hs, max(ts, hs.zw_since))
        hs.watch = hs.handshake_ack_due
    if hs.wfull_since >= 0:
        end_window_full(col, hs, max(ts, hs.wfull_since))


def ip_extremes(hs: HalfStream, ip_len: int, ttl: int) -> None:
    """A packet with a new largest length or another TTL than the last one."""
    if ttl < 0:  # reassembled from fragments, which were counted one by one
        hs.packets -= 1
        hs.ip_bytes -= ip_len
        return
    f = hs.facts
    hs.ttl = ttl
    if ttl < f[F_TTL_MIN]:
        f[F_TTL_MIN] = ttl
    if ttl > f[F_TTL_MAX]:
        f[F_TTL_MAX] = ttl
    if ip_len > hs.max_ip_len:
        hs.max_ip_len = ip_len
        if ip_len > f[F_MAX_IP_LEN]:
            f[F_MAX_IP_LEN] = ip_len


def ack_rtt_sample(hs: HalfStream, ts: int) -> None:
    """The peer acknowledged the segment of hs being timed: a round-trip sample."""
    hs.rtt_end = -1
    sample = ts - hs.rtt_start[0]
    if sample >= 0 and (hs.rtt_best is None or sample < hs.rtt_best[0]):
        hs.rtt_best = (sample, *hs.rtt_start)


def ack_point(start: int, end: int, max_seg: int) -> int:
    """The sequence number the receiver's ACK must reach for a message at
    [start, end) to count as received: all of it but its last segment (at most
    max_seg bytes).  A receiver may hold the ACK of a short last segment (Linux's
    delayed ACK, up to 40 ms, or until its reply) after the bytes arrived; a
    one-segment message: any of its bytes."""
    length = (end - start) & SEQ_MASK
    back = max_seg if length > max_seg else length - 1
    return (end - back) & SEQ_MASK


def send_gap(col: EventSink, hs: HalfStream, ts: int, seq: int, resent: bool) -> None:
    """hs sends data at ts after a gap of at least ParseLimits.send_gap_ns that it
    began part-way through an RPC message or ends by re-sending bytes: a gap
    ended by re-sent bytes (tcp_resend_gap), else the part with bytes
    unacknowledged (tcp_send_gap) and the part with none (tcp_send_idle)."""
    start, acked, flight = hs.gap_t, hs.gap_acked, hs.gap_flight
    if resent:
        col.event(hs, "tcp_resend_gap", start, hs.gap_frame, seq, flight, ts - start)
        return
    if flight < 0 or (flight > 0 and acked != start):  # unknown ack state counts as waiting
        end = acked if acked >= 0 else ts
        col.event(hs, "tcp_send_gap", start, hs.gap_frame, seq, flight, end - start)
    if acked >= 0 and hs.gap_mid and ts > acked:
        col.event(hs, "tcp_send_idle", acked, hs.gap_frame, seq, 0, ts - acked)


def retire(col: EventSink, hs: HalfStream, ts: int) -> None:
    """A stream replaced or at the end: close its stretches, record its
    smallest data->ACK round trip, fold its counts into its direction's facts."""
    close_stretches(col, hs, ts)
    if hs.rtt_best is not None:
        rtt, start, frame, seq, length = hs.rtt_best
        col.event(hs, "tcp_ack_rtt", start, frame, seq, length, rtt)
        hs.rtt_best = None
    f = hs.facts
    f[F_PACKETS] += hs.packets
    f[F_IP_BYTES] += hs.ip_bytes
    hs.packets = hs.ip_bytes = 0
