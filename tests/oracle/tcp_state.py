"""TCP state beyond reassembly, for the transport events: the handshake (MSS
and window scale options, RFC 9293 / RFC 7323), advertised windows (zero and
full windows), data->ACK round trips, send gaps, and what a stream leaves in
its direction's facts when it ends.  Called from the frame loop's slow paths.

A function that only updates state takes the part of a ``HalfStream``
(tcp.py) it changes (``window_reached(win, ...)``); one that records events
takes the stream, the events' subject, with the ``EventSink`` (the
dissector's collector), and says which parts it touches."""

from __future__ import annotations

from typing import Protocol

from nfstrace.parsers.capture import Bytes
from oracle.ip import F_IP_BYTES, F_MAX_IP_LEN, F_PACKETS, F_TTL_MAX, F_TTL_MIN
from oracle.tcp import IGNORE, HalfStream, IpFacts, RttWatch, WindowWatch

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
    """A SYN or SYN-ACK: handshake event, MSS and window scale (the ``win``
    parts of hs and rev).

    Window scaling is in effect only when both the SYN and the SYN-ACK carry
    the option (RFC 7323).  A SYN-ACK without it settles both directions at
    shift 0 even when the SYN was not captured; one with it gives the
    server's shift, and the client's is known only from its SYN.  Returns
    True when both directions' shifts are known (window tracking on)."""
    mss, wscale = tcp_options(p, hl)
    w = hs.win
    w.syn_mss = mss
    w.syn_window = window
    w.seq_hi = (seq + 1) & SEQ_MASK
    if not flags & TH_ACK:
        w.syn_wscale = wscale
        col.event(hs, "tcp_syn", ts, frame, seq, 0)
        return False
    col.event(hs, "tcp_syn_ack", ts, frame, seq, 0)
    if rev is None:
        w.wshift = wscale if wscale >= 0 else 0
        return False
    r = rev.win  # (w itself when a host talks to itself on one port)
    if wscale < 0 or r.syn_wscale == -1:  # scaling off both ways
        w.wshift = r.wshift = 0
    else:
        w.wshift = wscale
        r.wshift = r.syn_wscale  # -2 (SYN not seen) -> unknown
        if r.wshift < 0:
            r.wshift = -1
    if r.syn_wscale == -2:  # the SYN was not captured: the client's next byte is our ack
        r.seq_hi = ack
    r.handshake_ack_due = r.watch = True
    r.mss = mss if mss > 0 else DEFAULT_MSS  # the client's segments fit our MSS
    w.mss = r.syn_mss if r.syn_mss > 0 else DEFAULT_MSS
    # The windows of the SYN and SYN-ACK (never scaled) hold until the first ACKs.
    r.peer_wnd = window
    r.wlimit = (r.seq_hi + window - r.mss) & SEQ_MASK
    w.wack = w.wwin = r.wack = r.wwin = -1  # the next ACKs set the limits anew
    w.peer_wnd = r.syn_window if r.syn_wscale != -2 else 0
    if w.peer_wnd:
        w.wlimit = (w.seq_hi + w.peer_wnd - w.mss) & SEQ_MASK
    else:  # no window known yet: no check before the client's first ACK
        w.wlimit = (w.seq_hi + SEQ_HALF - 1) & SEQ_MASK
    r.wtrack = w.wshift >= 0
    w.wtrack = r.wshift >= 0
    return r.wtrack and w.wtrack


def watch(
    col: EventSink, hs: HalfStream, flags: int, window: int, seq: int, ts: int, frame: int
) -> None:
    """A packet of a direction under watch, or one advertising a zero window
    (hs's ``win``; its ``framing`` read: a stream given up opens no stretch)."""
    w = hs.win
    if w.handshake_ack_due and flags & TH_ACK:
        w.handshake_ack_due = False
        col.event(hs, "tcp_handshake_ack", ts, frame, seq, 0)
    if not window and not flags & TH_RST:
        if w.zw_since < 0 and hs.framing.mode != IGNORE:
            w.zw_since, w.zw_frame, w.zw_seq = ts, frame, seq
    elif w.zw_since >= 0:
        end_zero_window(col, hs, ts)
    w.watch = w.handshake_ack_due or w.zw_since >= 0


def window_reached(win: WindowWatch, seq: int, end: int, ts: int, frame: int) -> None:
    """A data segment reaching (within one MSS) the window the peer advertised."""
    if (end - win.seq_hi) & SEQ_MASK < SEQ_HALF:
        win.seq_hi = end
    if win.wfull_since < 0 and win.peer_wnd > 0:  # a zero window is a stretch of its own
        win.wfull_since, win.wfull_frame = ts, frame
        win.wfull_seq, win.wfull_wnd = seq, win.peer_wnd


def end_zero_window(col: EventSink, hs: HalfStream, ts: int) -> None:
    """The zero-window stretch open on hs's ``win`` ends at ts."""
    w = hs.win
    col.event(hs, "tcp_zero_window", w.zw_since, w.zw_frame, w.zw_seq, 0, ts - w.zw_since)
    w.zw_since = -1


def end_window_full(col: EventSink, hs: HalfStream, ts: int) -> None:
    """The window-full stretch open on hs's ``win`` ends at ts."""
    w = hs.win
    col.event(
        hs,
        "tcp_window_full",
        w.wfull_since,
        w.wfull_frame,
        w.wfull_seq,
        w.wfull_wnd,
        ts - w.wfull_since,
    )
    w.wfull_since = -1


def close_stretches(col: EventSink, hs: HalfStream, ts: int) -> None:
    """End the stretches still open on a direction's ``win`` (connection reset
    or replaced, or the end of the capture)."""
    w = hs.win
    if w.zw_since >= 0:
        end_zero_window(col, hs, max(ts, w.zw_since))
        w.watch = w.handshake_ack_due
    if w.wfull_since >= 0:
        end_window_full(col, hs, max(ts, w.wfull_since))


def ip_extremes(ip: IpFacts, ip_len: int, ttl: int) -> None:
    """A packet with a new largest length or another TTL than the last one."""
    if ttl < 0:  # reassembled from fragments, which were counted one by one
        ip.packets -= 1
        ip.ip_bytes -= ip_len
        return
    f = ip.facts
    ip.ttl = ttl
    if ttl < f[F_TTL_MIN]:
        f[F_TTL_MIN] = ttl
    if ttl > f[F_TTL_MAX]:
        f[F_TTL_MAX] = ttl
    if ip_len > ip.max_ip_len:
        ip.max_ip_len = ip_len
        if ip_len > f[F_MAX_IP_LEN]:
            f[F_MAX_IP_LEN] = ip_len


def ack_rtt_sample(rtt: RttWatch, ts: int) -> None:
    """The peer acknowledged the segment being timed: a round-trip sample."""
    rtt.end = -1
    sample = ts - rtt.start[0]
    if sample >= 0 and (rtt.best is None or sample < rtt.best[0]):
        rtt.best = (sample, *rtt.start)


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
    unacknowledged (tcp_send_gap) and the part with none (tcp_send_idle).
    Reads hs's ``gaps``."""
    g = hs.gaps
    start, acked, flight = g.last_ts, g.acked, g.flight
    if resent:
        col.event(hs, "tcp_resend_gap", start, g.last_frame, seq, flight, ts - start)
        return
    if flight < 0 or (flight > 0 and acked != start):  # unknown ack state counts as waiting
        end = acked if acked >= 0 else ts
        col.event(hs, "tcp_send_gap", start, g.last_frame, seq, flight, end - start)
    if acked >= 0 and g.mid and ts > acked:
        col.event(hs, "tcp_send_idle", acked, g.last_frame, seq, 0, ts - acked)


def retire(col: EventSink, hs: HalfStream, ts: int) -> None:
    """A stream replaced or at the end: close its stretches (``win``), record
    its smallest data->ACK round trip (``rtt``), fold its counts into its
    direction's facts (``ip``)."""
    close_stretches(col, hs, ts)
    rtt = hs.rtt
    if rtt.best is not None:
        sample, start, frame, seq, length = rtt.best
        col.event(hs, "tcp_ack_rtt", start, frame, seq, length, sample)
        rtt.best = None
    ip = hs.ip
    f = ip.facts
    f[F_PACKETS] += ip.packets
    f[F_IP_BYTES] += ip.ip_bytes
    ip.packets = ip.ip_bytes = 0
