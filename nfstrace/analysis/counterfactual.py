"""What fixing each cause would gain: the pair's write activity predicted with
that cause alone removed, and the speed-up (the activity now over the
prediction).  The gains the findings and the verdict quote.

A cause's time in the budget is not its gain: causes overlap (while the server
works on one WRITE the round trip of another runs) and a removed cause can
expose another that its time hid.  The prediction starts from the cause's time
on the critical path (``critical_path.py``: only that can be given back), keeps
what the fix leaves of it, and cannot be shorter than what the rest of the
writes still needs (a floor):

``round_trip``
    the path's round trips shrink to a LAN's (``LAN_RTT_NS``, or the round
    trip the capture shows if that is shorter): each keeps that share.
``server``
    each server wait on the path shrinks to a healthy server's time for one
    WRITE (``SERVER_REF_CALL_NS`` plus its bytes at ``SERVER_REF_BPS``), unless
    the capture's own fastest is shorter.
``commit``, ``loss_recovery``, ``window``, ``server_busy``, ``client_idle``
    gone (a COMMIT's round trip stays: it is the round trip's): a fast flush, no
    loss and the window it collapsed restored (its re-send waits, timeouts and
    regrowth are on the path as ``loss_recovery``), a window as big as the
    path holds, no JUKEBOX back-off, no pauses.
``bandwidth``
    (not a budget cause: ``transfer`` at a steady ceiling) the data's time on
    the path at the next standard link rate instead of the ceiling: a faster
    link must be named, so the gain is "with a 1 Gbit/s path".

Floors: the server's busy time (at least one WRITE with it) bounds every
removal but the server's own; the data's own moving time (``transfer``), and
its bytes at the rate the path acknowledged a call alone on the wire
(``delivery_floor_ns``: a client that bursts a whole call into an open window
sends faster than the path carries it), bound every removal but the
bandwidth's; a sender that waits for each call's
ACK before the next (``ack_chain_ns``) needs that chain whatever the server
or its flushes do.  Without the losses, and without the round trip of a
loss-limited window whose calls queue in the client's socket (``stream_bound``:
TCP's window, not the RPC round trip, sets their pace; Mathis: the window's
rate scales with 1/RTT), the data moves no faster than the fastest the capture
shows the path carried it (``peak_floor_ns``): how far the window grows back
is up to the path, which a capture of the limited run does not show beyond
that (a 60 Mbit/s limit with 0.5% loss: 1.03x, measured 1.01x) — unless that
fastest stretch ran at the losses' own pace (within PEAK_OVER_LOSS_BOUND of
what they let a window keep, Mathis: the budget's ``loss_bound_mbit_s``): then
the window regrows from TCP's initial one (``slow_start_ns`` of round trips)
and the data moves as fast as its flights did (``transfer_ns``), a prediction
that assumes the client keeps that pace (lab, the kernel client through 1%
loss, 4-64 MiB, with and without 5 ms: 7 of 11 twins within 25%, 2 with the
fastest stretch as the bound).

Measured in the lab (``../shared/lab``, counterfactual twins: the same run
with one cause removed): see the README's table and ``tests/test_diagnosis.py``.
A pure function of a budget pairs row; no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from nfstrace.analysis.critical_path import PATH_CAUSES

# A LAN round trip: switched Ethernet in one room, 0.1-0.3 ms between hosts.
LAN_RTT_NS = 200_000
# A healthy server's time for one WRITE: a fixed cost and its bytes at a
# gigabit, the rate below which the verdict calls a server slow
# (``verdict.SERVER_SLOW_BPS``; lab: healthy ganesha on a CPU it shares took
# 0.1-0.45 ms per 32-64 KiB WRITE and 1 ms per 1 MiB).
SERVER_REF_CALL_NS = 100_000
SERVER_REF_BPS = 1e9

# A client kept its window full when its WRITEs were outstanding at least this
# share of its most at once, on average over the write activity: removing a wait
# then lets every slot cycle faster, not only the ones on the critical path
# (Little's law: the WRITEs' summed latencies over the window).
WINDOW_FULL = 0.75
# A pair whose critical path spent this share of its time waiting on a window
# its losses kept small was paced by the losses (budget's loss_recovery_also_ns).
LOSS_PACED = 0.05
# A fastest stretch at most this many times the rate the losses let a window
# keep (budget's loss_bound_mbit_s) is the losses' pace: a Reno-like window
# swings between half and all of its peak (1.33x its mean at its fastest), and a
# short copy's first slow start runs further before its first loss.  Lab, the
# kernel client through 5 ms and 1% loss, 8 MiB: its fastest stretch 2.0-2.5x
# the bound, its loss-free twins 12.4-13.3x faster, predicted 14.2-15.9x (with
# the fastest stretch as the bound: at least 2.6-2.8x); 4 MiB: 1.8-4.4x the
# bound, the twins 4.2-8.9x, predicted 3.4x (at least: 4.4x), 8.3-10.6x.
PEAK_OVER_LOSS_BOUND = 3.0
# Waits outside the WRITEs' own timelines that a windowed client still pays.
BARRIERS = ("commit", "client_idle", "capture_gap", "server_busy")

# Every cause but the data's own moving and what the capture cannot tell.
REMOVABLE = tuple(c for c in PATH_CAUSES if c not in ("transfer", "capture_gap", "unknown"))


@dataclass(frozen=True)
class Removal:
    """The prediction for one cause of one pair."""

    cause: str
    elapsed_ns: int  # the write activity as captured
    predicted_ns: int  # with the cause removed
    saved_ns: int  # the critical path's time the fix gives back
    floor_ns: int  # what the rest of the writes still needs
    how: str  # what was assumed, in words
    # the prediction is the fastest stretch the capture shows (``peak_floor_ns``):
    # how far the window would grow without the losses it cannot show, so the
    # speed-up is a lower bound
    at_least: bool = False
    # the losses kept the window small at their own pace (Mathis): the prediction
    # is a window regrown from TCP's initial one, the data moving as fast as its
    # flights did; how fast the client keeps up beyond them the capture cannot
    # show (kernel client, 4 MiB through 5-10 ms and 1% loss: predicted 10.6x
    # where the loss-free twin measures 8.9x; on a busier host 12-25x where the
    # twins without the delay too measured 7.8-12.8x)
    paced: bool = False

    @property
    def speedup(self) -> float:
        return self.elapsed_ns / self.predicted_ns if self.predicted_ns > 0 else math.inf


def _size(row: Any) -> float:
    return float(row.get("write_size", -1) or -1)


def _server_ref_ns(write_size: float) -> float:
    size = write_size if write_size and write_size > 0 else 64 * 1024
    return SERVER_REF_CALL_NS + size * 8e9 / SERVER_REF_BPS


def removal(row: Any, cause: str, lan_rtt_ns: float = LAN_RTT_NS) -> Removal | None:
    """The pair's write activity predicted without ``cause`` (None: the cause
    took no time on the critical path)."""
    return removal_of(row, (cause,), lan_rtt_ns)


def removal_of(row: Any, causes: tuple[str, ...], lan_rtt_ns: float = LAN_RTT_NS) -> Removal | None:
    """The pair's write activity predicted without every cause in ``causes``
    (several: fixed together)."""
    elapsed = int(row["elapsed_ns"])
    if elapsed <= 0 or any(c not in REMOVABLE for c in causes):
        return None
    saved = calls_saved = 0
    hows = []
    for cause in causes:
        own = int(row.get(f"{cause}_path_ns", 0) or 0)
        also = int(row.get(f"{cause}_also_ns", 0) or 0)
        if own + also <= 0:
            continue
        keep, how = _kept(row, cause, lan_rtt_ns)
        hows.append(how)
        saved += int(own - keep(own, int(row.get("path_server_waits", 0) or 0)))
        if also and cause == "round_trip":  # behind a loss: each wait one round trip shorter
            rtt = float(row.get("rtt_ns", math.nan))
            count = int(row.get("round_trip_also_count", 0) or 0)
            shorter = count * (rtt - min(lan_rtt_ns, rtt))
            saved += int(min(also - keep(also, 0), shorter)) if math.isfinite(shorter) else 0
        elif also:
            saved += also
        in_calls = int(row.get(f"{cause}_calls_ns", 0) or 0)
        calls_saved += int(in_calls - keep(in_calls, int(row.get("writes", 0) or 0)))
    if not hows:
        return None
    predicted = elapsed - saved
    # a client that kept its window full: its calls' own times over the window
    window = int(row.get("max_outstanding", 0) or 0)
    latency = int(row.get("write_latency_ns", 0) or 0)
    if window >= 2 and latency >= WINDOW_FULL * window * elapsed:
        # Little's law as a ratio: the same formula with nothing removed is the
        # activity as captured (its own estimate of that can be 10% off either
        # way, an error a removal must not be credited with: the client's
        # pauses, 4% of a lossy copy's time, were 1.28x from the formula's 12%)
        barrier = {c: int(row.get(f"{c}_path_ns", 0) or 0) for c in BARRIERS}
        now = latency / window + sum(barrier.values())
        rest = sum(ns for c, ns in barrier.items() if c not in causes)
        after = (latency - calls_saved) / window + rest
        if now > 0:
            predicted = min(predicted, int(elapsed * after / now))
    floors = [int(row.get("transfer_ns", 0) or 0), int(row.get("delivery_floor_ns", 0) or 0)]
    if "server" not in causes:
        floors.append(int(row.get("server_work_ns", 0) or 0))
    else:  # a healthy server still answers each WRITE in its time, one after another at worst
        floors.append(int(int(row.get("writes", 0) or 0) * _server_ref_ns(_size(row))))
    chain = int(row.get("ack_chain_ns", 0) or 0)
    if (
        chain
        and set(causes) <= {"server", "commit", "server_busy", "round_trip"}
        and ("round_trip" not in causes or len(causes) > 1)
    ):  # (the round trip alone: its own removal shortens the chain; it is not a floor)
        if "round_trip" in causes:  # each of its calls waited a round trip: a LAN's now
            rtt = float(row.get("rtt_ns", math.nan))
            shorter = rtt - min(lan_rtt_ns, rtt) if math.isfinite(rtt) else 0.0
            chain -= int(int(row.get("ack_chain_calls", 0) or 0) * shorter)
        floors.append(chain)
    peak = int(row.get("peak_floor_ns", 0) or 0)
    lossy = int(row.get("loss_recovery_also_ns", 0) or 0)
    regrown = bool(
        peak
        and lossy > 0
        and ("loss_recovery" in causes or ("round_trip" in causes and row.get("stream_bound")))
    )
    sacked = peak and "loss_recovery" in causes and row.get("transport") == "tcp"
    # ... unless the losses kept its window small (ACK waits of such a window on
    # its path) and its fastest stretch ran no faster than they let a window
    # run (Mathis): then that stretch shows their pace, not the path's, and the
    # data's own moving time is what stays (the kernel client through 1% loss
    # and 5 ms: 20 Mbit/s, its fastest 32, the losses' bound 27; predicted 1.6x
    # where its loss-free twin measures 23x, now 21x; through 1% loss alone:
    # 1.8x and 1.3x where the twins measure 2.5x and 1.7x, now 2.35x and 1.9x)
    bound = float(row.get("loss_bound_mbit_s", math.nan))
    paced = (
        regrown
        and lossy >= LOSS_PACED * elapsed
        and math.isfinite(bound)
        and float(row.get("peak_mbit_s", math.nan)) <= PEAK_OVER_LOSS_BOUND * bound
    )
    if paced:
        # the window regrows from TCP's initial one: its round trips stay (the
        # kernel client through 5 ms and 1% loss, 4 MiB: 8.9x without the loss,
        # its twin through 5 ms alone 44 ms of round trips, 8 of them)
        floors.append(int(row.get("transfer_ns", 0) or 0) + int(row.get("slow_start_ns", 0) or 0))
    if (regrown or sacked) and not paced:
        # a window the losses cut regrows only as far as the path carries; and
        # without TCP's losses the data moves no faster than the capture shows
        # the path carrying it at its fastest (SACK recovery keeps sending while
        # it repairs: nfs-cp through 2% loss moved at 1.05 Gbit/s between its
        # repairs, its twin without them at 0.62; a UDP client's re-send
        # timeouts leave no stretch of the path's own pace to see)
        floors.append(peak)
    floor = min(max(floors), elapsed)
    at_least = regrown and not paced and floor == peak and predicted < floor
    predicted = max(predicted, floor, 1)
    return Removal(
        "+".join(causes),
        elapsed,
        predicted,
        elapsed - predicted,
        floor,
        " and ".join(hows),
        at_least=at_least,
        paced=bool(paced) and floor < elapsed,
    )


def _kept(row: Any, cause: str, lan_rtt_ns: float) -> tuple[Any, str]:
    """What the fix leaves of ``ns`` of the cause's time spread over ``n`` waits
    (a function), and the assumption in words."""
    if cause == "round_trip":
        rtt = float(row.get("rtt_ns", math.nan))
        if not (math.isfinite(rtt) and rtt > 0):
            return (lambda ns, n: 0.0), f"round trips of {lan_rtt_ns / 1e6:.2g} ms (a LAN's)"
        lan = min(lan_rtt_ns, rtt)
        return (lambda ns, n: ns * lan / rtt), f"round trips of {lan / 1e6:.2g} ms (a LAN's)"
    if cause == "server":
        ref = _server_ref_ns(float(row.get("write_size", -1)))
        return (lambda ns, n: min(float(ns), n * ref)), (
            f"a server answering each WRITE in {ref / 1e6:.2g} ms"
        )
    return (lambda ns, n: 0.0), "gone"


def faster_link(row: Any, link_bps: float) -> Removal | None:
    """The pair's write activity predicted with its data moving at ``link_bps``
    instead of the ceiling it ran at (``bandwidth``)."""
    elapsed = int(row["elapsed_ns"])
    rate = float(row["mbit_s"]) * 1e6
    moving = int(row.get("transfer_path_ns", 0) or 0)
    if elapsed <= 0 or not rate > 0 or link_bps <= rate or moving <= 0:
        return None
    saved = int(moving * (1 - rate / link_bps))
    floor = min(int(row.get("server_work_ns", 0) or 0), elapsed)
    predicted = max(elapsed - saved, floor, 1)
    speed = f"{link_bps / 1e9:g} Gbit/s" if link_bps >= 1e9 else f"{link_bps / 1e6:g} Mbit/s"
    return Removal("bandwidth", elapsed, predicted, saved, floor, f"a {speed} path")
