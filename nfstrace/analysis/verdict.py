"""The verdict: which cause made the writes slow, read from the time budget.

The budget (``budget.py``) attributes every nanosecond of each client/server
pair's write activity to one cause.  The verdict names the cause that cost the
most time beyond ``transfer`` -- among the causes that cost a *significant*
share of the time -- and says what would help, with the model's what-if
where it can predict one.  One finding per cause that cost time, ranked by
the seconds it cost; the capture's own limits (snaplen, drops, bytes or
spans it missed) lead and hedge the rest.

Significance (``SIGNIFICANT``: a share of the pair's elapsed time) is set per
cause by what a healthy transfer spends on it.  Measured on the lab's healthy
captures (1 to 16 MiB, one CPU for client, server and bridge): the server's
own time reaches 54% of a healthy write phase (a server slowed 2-20 ms per
WRITE, or syncing each: 75-98%), the client's work between calls 26%, a
COMMIT 23%; a round trip of 2 ms, which the lab counts as healthy ("costs
little"), 17-44% (TCP slow start and the reply waits), 10 ms 53-93%; other
injected causes cost 60-98%.  Loss recovery, a JUKEBOX back-off and a
capture gap cost nothing at all in a healthy transfer: a tenth (a twentieth
for a gap, which also limits what can be concluded) is worth naming.

``bandwidth`` is not a budget cause: it is ``transfer`` at a steady ceiling.
When no other cause is significant, the data moved nearly all the time
(``transfer`` at least ``TRANSFER_DOMINANT``: a rate limit keeps a sender
backlogged, where an ordinary path drains between the client's batches,
COMMITs and turnarounds -- lab: 94-98% under a rate limit, 82-88% through a
bridge that forwards at its own CPU-bound pace) and the sender's calls left at
the rate the writes achieved overall (big calls' first-to-last-packet rate
at most ``STEADY_RATIO`` times the overall rate: the path clocked the sender
all along, as a TCP sender is clocked by the ACKs of a bottleneck; or, over
UDP seen from before the bottleneck, the replies came back on the clock of a
hop the calls queued at, ``clock_mbit_s`` of the budget, at most
``STEADY_RATIO`` times the overall rate), the writes ran at the path's ceiling.
Where those rates were timed over enough calls and found as steady as a
limiter paces them (their interquartile range at most ``CLOCKED_SPREAD``), the
ceiling is seen directly:
the data moving ``TRANSFER_STEADY`` of the time is enough (a round trip beside
a rate limit takes the rest).
Such a clock is itself the evidence of a standing queue at the hop: the
writes ran at its ceiling also when the calls sat in that queue for at least
``QUEUED_DOMINANT`` of the time, whatever else (a COMMIT's flush) took the rest
(lab, 4 MiB at 80 Mbit/s, 8 in flight: queued 83%, a 76 ms COMMIT 15%).
A ceiling at a standard Ethernet rate of 1 Gbit/s or more (``LINK_RATES``,
80-100% of it) is the link doing its job: no problem; any other ceiling is a
rate limit, a shaper, a congested path or a slow hop: ``bandwidth``.
A UDP client-side capture shows no ACKs: where the calls waited shows only in
the replies' clock (``budget.CLOCK_CARRY``).  When they came back on a hop's
clock the verdict names the path, and says that a server taking exactly the
same time per WRITE would look the same; without such a clock it names the
server and says that the capture cannot rule out a slow path.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from nfstrace.analysis.budget import (
    CAUSES,
    CUT_WINDOW_EVIDENCE,
    STEADY_RATIO,
    STEADY_SPREAD,
    Budget,
)
from nfstrace.analysis.counterfactual import (
    LOSS_PACED,
    REMOVABLE,
    Removal,
    faster_link,
    removal,
    removal_of,
)
from nfstrace.analysis.findings import Finding, Severity
from nfstrace.text import seconds_text

# A pair's row of the budget (budget.PAIR_COLUMNS) by column name: a dict (or a
# pandas Series); read many times a pair, so decide() hands out dicts.
Row = Mapping[str, Any]
# Share of a pair's elapsed time a cause must cost to be named (see the docstring):
# the causes named and ranked by their predicted gains (``SPEEDUP_MIN``) need only
# their gain, but for a capture gap (no gain: what it hides is unknown) and the
# client's own pauses, which need both (below).
SIGNIFICANT: dict[str, float] = {
    "capture_gap": 0.05,
    "loss_recovery": 0.05,
    "server_busy": 0.1,
    "window": 0.2,
    "round_trip": 0.5,
    "commit": 0.3,
    "client_idle": 0.3,
    "server": 0.6,
    "unknown": 0.3,
}
# The predicted speed-up without a cause (counterfactual.py) that makes it worth
# naming: the lab's own rule for a cause that took effect ("removing it alone
# makes the writes at least 25% faster"); lower for causes a healthy transfer
# never has (a loss costs nothing when there is none: a tenth is worth saying;
# lab, 0.5% loss costs 10-30%, a lone 200 ms retransmission timeout in a healthy
# kernel-client run 7%), higher for the client's own time between calls
# (healthy lab clients spend 10-26% of a write phase on their own work: up to
# 1.35x).
SPEEDUP_MIN: dict[str, float] = {
    "loss_recovery": 1.1,
    "server_busy": 1.1,
    "window": 1.25,
    "round_trip": 1.25,
    "commit": 1.25,
    "client_idle": 1.43,
    "server": 1.25,
    "unknown": 1.43,
}
# ... and at least this long (a whole 1 MiB copy can take 3 ms: its one 1 ms COMMIT
# is a third of it, and nothing an administrator needs to hear about); a capture
# gap needs no minimum.
SIGNIFICANT_MIN_NS = 2_000_000
# The client's own pauses are named only when nothing was outstanding (or the
# client stopped part-way through a call) for SIGNIFICANT["client_idle"] of the
# time, besides their gain: every client spends some time on its own work, and the
# critical path can credit a one-WRITE-at-a-time client's short pauses with more
# than their time (the next call waits on the client while the server works on
# the last).  Lab, healthy user-space clients: 5-21% of the write phase, gains
# up to 1.44x (nfs-rs NFSv4.1, 1 MiB: 16%, 18 pauses of 1.5-6.7 ms, 1.44x); a
# client pausing 50-200 ms between its writes: 47-97%.
# The server's time (and a COMMIT's) is significant only when it absorbed the data
# more slowly than a gigabit link delivers it (bytes written per second of server
# or COMMIT time): the server always takes some of the time, on a fast network most
# of it (lab, healthy ganesha on one shared CPU: 45-54% of the time at 200-250 MB/s;
# a FUSE layer sleeping 2-20 ms per WRITE: 3-20 MB/s; flushing 1 MiB in 3 ms, a
# third of a short copy: 350 MB/s; fsync sleeping 0.1-1.2 s: 8-42 MB/s).
SERVER_SLOW_BPS = 1e9
# A cause below its significance but above this share, or whose removal would
# still gain this much, gets a finding (info): the JSON then has every prediction.
NOTABLE = 0.1
GAIN_NOTABLE = 1.02
# The data moved at least this share of the time ...
TRANSFER_DOMINANT = 0.9
# ... or this share where its calls' rates were timed (8 calls or more) and found
# as steady as a limiter paces them (their spread at most CLOCKED_SPREAD): the
# ceiling is then seen directly, and a round trip beside it can take more of the
# time (lab, nfs-cp 64 KiB through 100 Mbit/s and 10 ms: moving data 77% of the
# time, 88% at the server, its ACKs' or sends' spread 0.1-0.6%; removing the
# limit measured 3.8x).  A CPU-bound forwarder paces less evenly (the lab's
# impair.py bridge, healthy, nfs-rs 64 KiB: ACKs at 540 Mbit/s with a spread of
# 6%, moving data 76% of the time: no problem).
TRANSFER_STEADY = 0.7
CLOCKED_SPREAD = 0.03
# ... with its big calls leaving at most budget.STEADY_RATIO times faster than the
# overall rate.
# ... and at one rate: their rates' interquartile range at most budget.STEADY_SPREAD
# of their median.
# ... or, over UDP with the replies on a hop's clock, its calls sat in that hop's
# queue at least this share of the time (the budget's ``queued_ns``).
QUEUED_DOMINANT = 0.5
# Standard Ethernet rates (bit/s); a ceiling at 80-100% of one is that link at work.
# Not 10 and 100 Mbit/s: in a path of today a hop that slow is the problem (a port
# that negotiated 100 Mbit/s, an old switch), worth naming as ``bandwidth``.
LINK_RATES = (1e9, 2.5e9, 5e9, 10e9, 25e9, 40e9, 50e9, 100e9, 200e9, 400e9)
LINK_SHARE = 0.8

MAX_PAIRS_IN_TEXT = 3  # pairs named in a verdict whose pairs differ
MAX_PAIRS_IN_FINDINGS = 8  # pairs whose causes get findings (the busiest)

VERDICTS = (*CAUSES[1:-1], "bandwidth", "none")  # what ``primary`` can be


@dataclass(frozen=True)
class PairVerdict:
    client: str
    server: str
    primary: str
    text: str
    mbit_s: float
    shares: dict[str, float]
    gain: float = math.nan  # the predicted speed-up of fixing the primary cause


@dataclass(frozen=True)
class Verdict:
    """``primary``: a cause name, ``bandwidth`` or ``none``; ``text``: in words;
    ``pairs``: one per client/server pair; ``limits``: what the capture missed."""

    primary: str
    text: str
    limits: list[str] = field(default_factory=list)
    pairs: list[PairVerdict] = field(default_factory=list)


def link_rate(mbit_s: float) -> float | None:
    """The standard Ethernet rate (bit/s) a ceiling fills 80-100% of, if any."""
    for rate in LINK_RATES:
        if LINK_SHARE * rate <= mbit_s * 1e6 <= rate:
            return rate
    return None


def rate_text(bps: float) -> str:
    return f"{bps / 1e9:g} Gbit/s" if bps >= 1e9 else f"{bps / 1e6:g} Mbit/s"


def gains(row: Row) -> dict[str, Removal]:
    """The predicted removal of every cause that took time on the pair's critical
    path (``counterfactual.py``), and of its ceiling at the next link rate."""
    out = {}
    for cause in REMOVABLE:
        got = removal(row, cause)
        if got is not None:
            out[cause] = got
    link = next_link(float(row["mbit_s"]))
    if link is not None:
        got = faster_link(row, link)
        if got is not None:
            out["bandwidth"] = got
    return out


def next_link(mbit_s: float) -> float | None:
    """The standard Ethernet rate above a ceiling (bit/s): the faster link a
    ``bandwidth`` gain is priced with."""
    return next((r for r in LINK_RATES if r > mbit_s * 1e6 / LINK_SHARE), None)


def is_significant(cause: str, row: Row, removals: dict[str, Removal] | None = None) -> bool:
    """Whether a cause cost a pair (a budget pairs row) enough to be named: the
    writes would be at least ``SPEEDUP_MIN`` times faster without it (a capture
    gap: it hides ``SIGNIFICANT`` of the time), and at least
    SIGNIFICANT_MIN_NS (the client's pauses: and ``SIGNIFICANT`` of the time);
    a server or a COMMIT, only when it absorbed the data more
    slowly than a gigabit link delivers it."""
    elapsed = float(row["elapsed_ns"])
    lost = float(row[f"{cause}_ns"])
    if cause not in SIGNIFICANT or not elapsed:
        return False
    if cause == "capture_gap":
        return lost >= SIGNIFICANT[cause] * elapsed
    removals = gains(row) if removals is None else removals
    got = removals.get(cause)
    if got is None or got.speedup < SPEEDUP_MIN[cause] or got.saved_ns < SIGNIFICANT_MIN_NS:
        return False
    if cause == "client_idle" and lost < SIGNIFICANT[cause] * elapsed:
        return False
    if cause in ("server", "commit"):  # slower than a gigabit link delivers the data
        return lost > 0 and float(row["bytes"]) * 8e9 / lost < SERVER_SLOW_BPS
    return True


def _rank_key(cause: str, row: Row, removals: dict[str, Removal]) -> float:
    """What orders the causes: the predicted speed-up (a capture gap: as if the
    time it hides were all lost)."""
    if cause == "capture_gap":
        share = float(row[f"{cause}_ns"]) / float(row["elapsed_ns"])
        return 1 / max(1 - share, 1e-9)
    got = removals.get(cause)
    return got.speedup if got is not None else 1.0


# Two predicted gains this close (ratio) are a tie: the prediction cannot tell
# them apart; the cause that took (or made: ``_made_ns``) more of the time then
# leads.
GAIN_TIE = 1.1


def _significant(row: Row, leave_out: str = "") -> list[str]:
    """Causes beyond transfer that cost a significant share, largest gain first
    (gains within GAIN_TIE of the largest: the one that took more time first)."""
    removals = gains(row)
    named = [c for c in SIGNIFICANT if c != leave_out and is_significant(c, row, removals)]
    named.sort(key=lambda c: -_rank_key(c, row, removals))
    if len(named) > 1:
        top = _rank_key(named[0], row, removals)
        tied = [c for c in named if _rank_key(c, row, removals) * GAIN_TIE >= top]
        tied.sort(key=lambda c: -_made_ns(row, c))
        named = tied + [c for c in named if c not in tied]
    return named


def _made_ns(row: Row, cause: str) -> float:
    """The time a cause took and the time it made that another owns (the losses:
    the ACK waits of the window they cut, counted under the round trip -- the
    losses' alone here: without them the window would not have been cut, and
    the kernel client hides a 10 ms round trip with a whole window in flight;
    kernel NFSv4.2 through 10 ms and 1% loss, 27x slower than its twin: 27.3 s
    of round-trip waits, 26.3 s of them in the window the losses kept small)."""
    took = float(row[f"{cause}_ns"])
    if cause == "round_trip":
        took -= float(row.get("loss_recovery_also_ns", 0) or 0)
    return took + float(row.get(f"{cause}_also_ns", 0) or 0)


def _hop_clocked(row: Row) -> bool:
    """Whether the pair's UDP replies came back on the clock of a hop its calls
    queued at (the budget's ``clock_mbit_s``), at about the rate the writes ran."""
    clock = float(row.get("clock_mbit_s", math.nan))
    rate = float(row["mbit_s"])
    return math.isfinite(clock) and rate > 0 and clock <= STEADY_RATIO * rate


def _steady_ceiling(row: Row, shares: dict[str, float]) -> bool:
    cut = float(row.get("loss_recovery_also_ns", 0) or 0) >= LOSS_PACED * float(row["elapsed_ns"])
    peak = float(row.get("peak_mbit_s", math.nan))
    if cut and not (math.isfinite(peak) and peak <= STEADY_RATIO * float(row["mbit_s"])):
        # paced by a window the losses kept small, not by the path (a window
        # that regrew between losses ran faster than its mean; a ceiling
        # holds even at its fastest)
        return False
    if float(row.get("resent_segment_share", 0) or 0) >= LOSS_PACED_SHARE:
        return False  # a steady rate under steady loss: the losses set it (Mathis)
    return _paced(row, shares)


# A pair whose critical path spent LOSS_PACED (counterfactual.py) waiting on a
# window its losses kept small, or that re-sent this share of its TCP segments,
# was paced by the losses, not by a ceiling of the path (lab: the kernel client
# through 1% loss each way re-sent 1.0%; a 60 Mbit/s limit with 0.5% loss, bound
# by the limit, 0.52%).
LOSS_PACED_SHARE = 0.0075


def _paced(row: Row, shares: dict[str, float]) -> bool:
    send = float(row["send_mbit_s"])
    moving = shares.get("transfer", 0.0)
    # the rate the data moved at while it moved (a round trip beside a ceiling
    # takes the rest of the time)
    rate = float(row["mbit_s"]) / moving if moving > 0 else float(row["mbit_s"])
    spread = float(row.get("send_spread", math.nan))
    steady = not math.isfinite(spread) or spread <= STEADY_SPREAD
    paced = math.isfinite(send) and rate > 0 and send <= STEADY_RATIO * rate and steady
    timed = paced and math.isfinite(spread) and spread <= CLOCKED_SPREAD
    # ... or acknowledged at one steady rate, the pair's own: behind a limit the
    # ACKs come back on its clock however the client hands its calls over (a
    # client that bursts each 64 KiB call into an open window sends 14-23x
    # faster than the 40-100 Mbit/s limit delivers; 1 MiB calls timed one by
    # one, 14% apart in sending, 3% in their ACKs)
    ack = float(row.get("ack_mbit_s", math.nan))
    ack_spread = float(row.get("ack_spread", math.nan))
    acked = (
        math.isfinite(ack)
        and rate > 0
        and ack <= STEADY_RATIO * rate
        and ack_spread <= STEADY_SPREAD
    )
    paced = paced or acked
    timed = timed or (acked and ack_spread <= CLOCKED_SPREAD)
    if _hop_clocked(row):
        queued = float(row.get("queued_ns", 0) or 0) / float(row["elapsed_ns"])
        if queued >= QUEUED_DOMINANT:
            return True
    if timed and moving >= TRANSFER_STEADY:
        return True
    return moving >= TRANSFER_DOMINANT and (paced or _hop_clocked(row))


def pair_primary(row: Row) -> tuple[str, dict[str, float]]:
    """A budget pair row's primary cause, and its shares."""
    elapsed = float(row["elapsed_ns"])
    shares = {c: float(row[f"{c}_ns"]) / elapsed for c in CAUSES} if elapsed > 0 else {}
    named = _significant(row)
    if ceiling(row, shares):
        removals = gains(row)
        best = removals[named[0]].speedup if named and named[0] in removals else 1.0
        bandwidth = removals.get("bandwidth")
        if not named or (bandwidth is not None and bandwidth.speedup > best):
            return "bandwidth", shares
    if named:
        return named[0], shares
    both = overlapping(row)
    if both is not None:
        return both[0], shares
    return "none", shares


# Two causes that hid each other (removing either alone gains little) are named
# together when removing both would make the writes at least this much faster.
TOGETHER_MIN = 1.25


def overlapping(row: Row) -> tuple[str, str, Removal] | None:
    """When no cause alone is worth naming but the two that took the most time
    on the critical path did together (a slow server and a round trip: WRITEs
    queue at the server while round trips go on), those two (the one with the
    larger share of the time first) and their joint removal."""
    took = sorted(
        (c for c in REMOVABLE if float(row.get(f"{c}_path_ns", 0) or 0) > 0 and c != "client_idle"),
        key=lambda c: -float(row.get(f"{c}_path_ns", 0) or 0) - float(row[f"{c}_ns"]),
    )
    if len(took) < 2:
        return None
    a, b = sorted(took[:2], key=lambda c: -float(row[f"{c}_ns"]))
    for c in (a, b):
        lost = float(row[f"{c}_ns"])
        absorbed = float(row["bytes"]) * 8e9 / lost if lost > 0 else math.inf
        if c in ("server", "commit") and absorbed >= SERVER_SLOW_BPS:
            return None
    joint = removal_of(row, (a, b))
    if joint is None or joint.speedup < TOGETHER_MIN:
        return None
    return a, b, joint


def ceiling(row: Row, shares: dict[str, float] | None = None) -> bool:
    """Whether the pair's data moved at a steady ceiling that is not a standard
    link at work (``bandwidth``)."""
    if shares is None:
        elapsed = float(row["elapsed_ns"])
        shares = {c: float(row[f"{c}_ns"]) / elapsed for c in CAUSES} if elapsed > 0 else {}
    return _steady_ceiling(row, shares) and link_rate(float(row["mbit_s"])) is None


def _mix(shares: dict[str, float], k: int = 3) -> str:
    top = sorted(((v, c) for c, v in shares.items() if v >= 0.01), reverse=True)[:k]
    return ", ".join(f"{_WORDS[c]} {v:.0%}" for v, c in top)


# The share of the time the window the losses cut must hold to be said beside
# the loss's own time (its ACK waits, counted under the round trip).
CUT_WINDOW_SAID = 0.05

_WORDS = {
    "transfer": "moving data",
    "round_trip": "the network round trip",
    "server": "the server",
    "commit": "COMMITs",
    "loss_recovery": "recovering lost packets",
    "window": "full TCP windows",
    "server_busy": "JUKEBOX/DELAY back-off",
    "client_idle": "the client's own pauses",
    "capture_gap": "spans the capture missed",
    "unknown": "unexplained",
    "bandwidth": "a steady ceiling of the path",
}


# The verdict's headline per primary cause: {share} of the time, {rate} Mbit/s.
_HEADLINE = {
    "round_trip": "the writes waited on the network round trip for {share} of the time",
    "server": "the server took {share} of the time to answer the WRITEs",
    "commit": "COMMITs (the server flushing to disk) held the writes for {share} of the time",
    "loss_recovery": "recovering from lost packets cost {share} of the time",
    "window": "a full TCP window stopped the sender for {share} of the time",
    "server_busy": "the server's JUKEBOX/DELAY answers held the writes for {share} of the time",
    "client_idle": "the client itself sent nothing for {share} of the time",
    "capture_gap": "the capture missed {share} of the write activity: what happened then is "
    "unknown",
    "unknown": "{share} of the time is unexplained",
}
# ... the client's pauses on a capture not known to be the client's
_CLIENT_IDLE_AWAY = (
    "nothing came from the client for {share} of the time (its own pauses, or the network "
    "beyond the round trip this capture shows)"
)


def pair_text(row: Row, primary: str, shares: dict[str, float]) -> str:
    """The verdict in words for one pair (or all pairs summed)."""
    rate = float(row["mbit_s"])
    head = f"writes ran at {rate:,.1f} Mbit/s"
    gap = float(row.get("capture_gap_ns", 0) or 0)
    seen_ns = float(row["elapsed_ns"]) - gap
    if gap and seen_ns > 0:  # the rate over what the capture saw
        head = f"writes ran at {float(row['bytes']) * 8e3 / seen_ns:,.1f} Mbit/s while captured"
    if primary == "none":
        link = link_rate(rate) if _steady_ceiling(row, shares) else None
        limit = f", limited by the link ({rate_text(link)})" if link else ""
        return f"no problem found: {head}{limit}; the time went to {_mix(shares)}"
    if primary == "bandwidth":
        text = (
            f"{head}, at a steady ceiling for {shares['transfer']:.0%} of the time: the path "
            "between client and server carries no more (a rate limit, a shaper or a "
            "congested link)"
        )
        got = gains(row).get("bandwidth")
        if got is not None:
            text += f"; {gain_text('bandwidth', got)}"
        if _hop_clocked(row):
            text += (
                f"; over UDP the calls queued in the path: the replies came back on the clock "
                f"of a hop of {float(row['clock_mbit_s']):,.1f} Mbit/s, one call's bytes "
                "apart, in order and without drifting as a server's times add up; look at "
                "the path's rate limits, shapers and slowest link, not at the server (a "
                "server taking exactly the same time for every WRITE would look the same: "
                "a capture at the server tells them apart)"
            )
        return text
    text = _HEADLINE[primary].format(share=f"{shares[primary]:.0%}")
    if primary == "client_idle" and row.get("capture_point") != "client":
        # seen away from the client, a silence of the client's is also the way
        # back of a reply and the way out of the next call beyond the round trip
        # the capture shows: the headline does not say "not the network"
        text = _CLIENT_IDLE_AWAY.format(share=f"{shares[primary]:.0%}")
    cut = _cut_window_ns(row)
    if primary == "loss_recovery" and cut >= CUT_WINDOW_SAID * float(row["elapsed_ns"]):
        text += (
            f", and {cut / float(row['elapsed_ns']):.0%} more went to waiting for ACKs with the "
            "window the losses kept small"
        )
    text += f"; {head}"
    both = overlapping(row) if primary not in _significant(row) else None
    got = gains(row).get(primary)
    if both is not None and both[0] == primary:
        a, b, joint = both
        alone = gains(row)
        text += (
            f"; with {_WORDS[b]} ({shares[b]:.0%}) they held the writes together: fixing either "
            f"alone would gain little ({alone[a].speedup:.1f}x, {alone[b].speedup:.1f}x), as each "
            f"hides the other; fixing both would make the writes about {joint.speedup:.1f}x "
            f"faster ({joint.how})"
        )
    elif got is not None:
        text += f"; {gain_text(primary, got)}"
    if primary == "server" and row.get("transport") == "udp":
        text += (
            " (over UDP nothing shows where a call waited: a path slower than the server "
            "would look the same from the client; a capture at the server tells them apart)"
        )
    if primary == "client_idle" and row.get("capture_point") in ("server", "between"):
        unknown = not math.isfinite(float(row.get("rtt_ns", math.nan)))
        text += " (seen from the server: the network round trip is part of it" + (
            ", and this capture cannot measure it)" if unknown else ")"
        )
    if primary == "capture_gap":  # what the captured part shows
        seen = {c: v for c, v in shares.items() if c != "capture_gap"}
        rest = _significant(row, leave_out="capture_gap")
        text += (
            f"; in what was captured, {_WORDS[rest[0]]} cost the most ({seen[rest[0]]:.0%})"
            if rest
            else "; in what was captured, no problem shows"
        )
    return text


def cause_words(p: PairVerdict) -> str:
    """A pair's cause, its share and its predicted gain in a few words ("no
    problem"), as the capture-wide verdict and ``nfstrace watch`` say them."""
    if p.primary == "none":
        return "no problem"
    gain = f", about {p.gain:.1f}x faster fixed" if p.gain and p.gain >= 1.05 else ""
    share = f" {p.shares[p.primary]:.0%}" if p.primary in p.shares else ""
    return f"{_WORDS.get(p.primary, p.primary)}{share}{gain}"


def _pair_line(p: PairVerdict) -> str:
    """One pair in the capture-wide verdict: its cause, its gain, its rate."""
    return f"{p.client} → {p.server}: {cause_words(p)}, {p.mbit_s:,.1f} Mbit/s"


def _one(values: pd.Series) -> str:
    """The value every row shares, else 'mixed'."""
    distinct = set(values.astype(str))
    return distinct.pop() if len(distinct) == 1 else "mixed"


def decide(budget: Budget, limits: list[str] | None = None) -> Verdict:
    """The verdict over every pair (their pair-time summed) and per pair."""
    limits = limits or []
    if budget.pairs.empty:
        return Verdict("none", "no WRITE activity to judge", limits=limits)
    pairs = []
    for row in budget.pairs.to_dict("records"):  # (dicts: read ~200 times a pair)
        primary, shares = pair_primary(row)
        got = gains(row).get(primary)
        pairs.append(
            PairVerdict(
                client=str(row["client"]),
                server=str(row["server"]),
                primary=primary,
                text=pair_text(row, primary, shares),
                shares=shares,
                mbit_s=float(row["mbit_s"]),
                gain=got.speedup if got is not None else math.nan,
            )
        )
    total = budget.pairs[[c for c in budget.pairs.columns if c.endswith("_ns")]].sum()
    elapsed = float(total["elapsed_ns"])
    nbytes = float(budget.pairs["bytes"].sum())
    whole: Row = {
        **total.to_dict(),
        "bytes": nbytes,
        "writes": int(budget.pairs["writes"].sum()),
        "path_server_waits": int(budget.pairs["path_server_waits"].sum()),
        "write_size": float(budget.pairs["write_size"].median()),
        "transport": "+".join(sorted(set("+".join(budget.pairs["transport"]).split("+")))),
        "capture_point": _one(budget.pairs["capture_point"]),
        "rtt_ns": float(np.nanmedian(budget.pairs["rtt_ns"].to_numpy(float)))
        if budget.pairs["rtt_ns"].notna().any()
        else math.nan,
        "mbit_s": nbytes * 8e3 / elapsed if elapsed else math.nan,
        # several pairs: the slowest-sending pair's rate (a ceiling shows in each)
        "send_mbit_s": float(np.nanmin(budget.pairs["send_mbit_s"].to_numpy(float)))
        if budget.pairs["send_mbit_s"].notna().any()
        else math.nan,
        "clock_mbit_s": float(np.nanmin(budget.pairs["clock_mbit_s"].to_numpy(float)))
        if budget.pairs["clock_mbit_s"].notna().any()
        else math.nan,
        "send_spread": float(np.nanmax(budget.pairs["send_spread"].to_numpy(float)))
        if budget.pairs["send_spread"].notna().any()
        else math.nan,
        "stream_bound": bool(budget.pairs["stream_bound"].all()),
    }
    if len(pairs) == 1:
        primary, text = pairs[0].primary, pairs[0].text
    else:
        primary, shares = pair_primary(whole)
        text = pair_text(whole, primary, shares) + " (all client/server pairs together)"
        # which pair is which: the pairs whose primary is a problem first, then the slowest
        shown = sorted(pairs, key=lambda p: (p.primary == "none", p.mbit_s))
        text += "; by pair: " + "; ".join(_pair_line(p) for p in shown[:MAX_PAIRS_IN_TEXT])
        if len(pairs) > MAX_PAIRS_IN_TEXT:
            text += f"; {len(pairs) - MAX_PAIRS_IN_TEXT} more pairs in the budget"
    if limits:
        text = f"{text} (limited: {'; '.join(limits)})"
    return Verdict(primary, text, limits=limits, pairs=pairs)


# ---- findings ----------------------------------------------------------------------


@dataclass(frozen=True)
class Context:
    """Facts the findings quote beside the budget (all optional)."""

    rtt_ns: float = math.nan
    # seen downstream, the round trip under the writes' load (budget's rtt_loaded_ns)
    rtt_loaded_ns: float = math.nan
    writes_in_flight_max: int = 0
    writes_in_flight_mean: float = math.nan
    write_size: int | None = None
    commits: int = 0
    commit_max_ns: float = math.nan
    rpc_resent_calls: int = 0
    rpc_first_timeout_ms: float | None = None
    tcp_retransmissions: int = 0
    udp: bool = False
    capture_point: str = "unknown"
    stable_asked: dict[str, int] = field(default_factory=dict)  # WRITEs per stable_how asked
    tcp_silences_ns: tuple[int, ...] = ()  # TCP silences before re-sent bytes (tcp_resend_gap)
    snaplen_needed: int = 0  # a snaplen that keeps what the analysis reads (quality; 0: ?)


def _cut_window_ns(row: Row) -> int:
    """Time on the critical path the round trip owns that the losses made too
    (ACK waits of a window they cut: budget ``loss_recovery_also_ns``)."""
    return int(row.get("loss_recovery_also_ns", 0) or 0)


def _long(iv: pd.DataFrame) -> np.ndarray:
    """The intervals _spans counts: at least 1 ms and a tenth of the longest (all
    of them when none is)."""
    d = iv["duration_ns"].to_numpy()
    if not len(d):
        return np.zeros(0, bool)
    big = d >= max(1_000_000, 0.1 * d.max())
    return big if big.any() else np.ones(len(d), bool)


def _spans(iv: pd.DataFrame) -> str:
    """'17 spans of 155-197 ms' for the longer intervals of a cause."""
    d = iv["duration_ns"].to_numpy()
    if not len(d):
        return ""
    big = d[d >= max(1_000_000, 0.1 * d.max())]
    if not len(big):  # all short: how many, and the longest
        return f"{len(d)} span{'s' * (len(d) > 1)}, the longest {seconds_text(d.max())}"
    lo, hi = seconds_text(big.min()), seconds_text(big.max())
    return f"{len(big)} span{'s' * (len(big) > 1)} of " + (lo if lo == hi else f"{lo}-{hi}")


def _frames(iv: pd.DataFrame) -> list[int]:
    top = iv.nlargest(5, "duration_ns")
    return [int(f) for f in top["frame"] if f >= 0]


def _remedy(cause: str, ctx: Context) -> str:
    if cause == "round_trip":
        n = f" (at most {ctx.writes_in_flight_max} were)" if ctx.writes_in_flight_max else ""
        return (
            f"keep more WRITEs in flight{n}: a larger wsize, more RPC slots "
            "(sunrpc.tcp_max_slot_table_entries), nconnect, or a client that does not wait "
            "for each batch; or a server closer to the client"
        )
    if cause == "server":
        synced = sum(v for k, v in ctx.stable_asked.items() if k in ("FILE_SYNC", "DATA_SYNC"))
        if synced and synced >= 0.5 * max(sum(ctx.stable_asked.values()), 1):
            return (
                "the client asked for stable (synchronous) WRITEs: look at why (the `sync` "
                "mount option, O_SYNC/O_DSYNC or O_DIRECT in the application, a server export "
                "that forces sync) and at the server's stable storage (its disk latency, a "
                "write cache)"
            )
        return (
            "look at the server's storage and load: its disk latency, a synchronous export "
            "or FILE_SYNC writes, a slow filesystem layer, too few server threads"
        )
    if cause == "commit":
        return (
            "the server's flush (COMMIT -> fsync) is slow: faster stable storage or a "
            "battery-backed write cache; a client that commits less often waits less often"
        )
    if cause == "loss_recovery":
        where = (
            "the client re-sent RPCs after timeouts: find where datagrams are lost "
            "(interface and socket-buffer drops: netstat -su, the server's receive buffer) "
            "or use TCP"
            if ctx.udp
            else "find the packet loss: interface errors and drops (ethtool -S, ip -s link, "
            "netstat -s) on client, server and switches"
        )
        return where
    if cause == "window":
        return "a TCP receive window limits the flow: raise the receiver's buffers (tcp_rmem)"
    if cause == "server_busy":
        return (
            "the server asked the client to wait (JUKEBOX/DELAY): it is overloaded or its "
            "storage is offline"
        )
    if cause == "client_idle":
        if ctx.capture_point in ("server", "between"):
            return (
                "the client sent nothing: its application or page cache, or the network "
                "beyond the round trip this capture shows (a slow hop, a queue on the way); "
                "a capture at the client tells them apart"
            )
        if ctx.capture_point == "client":
            return (
                "the client (the application, or its page cache flushing) sent nothing: look "
                "at the writer, not at NFS or the network"
            )
        # where the capture was taken is not known: a reply's way back and the
        # client's next call's way out may be in these silences too
        return (
            "the client sent nothing: its application or page cache, or, if this capture "
            "was not taken at the client (where it was taken is not clear from it), the "
            "network beyond the round trip it shows; a capture at the client tells them apart"
        )
    if cause == "capture_gap":
        snaplen = f"-s {ctx.snaplen_needed}" if ctx.snaplen_needed else "such as -s 256"
        return (
            "capture again without loss: a bigger capture buffer (tcpdump -B), a fast disk, "
            f"a snaplen {snaplen} (what the headers seen need)"
        )
    return ""


def _title(cause: str, elapsed: int, iv: pd.DataFrame, ctx: Context) -> str:
    lost = int(iv["duration_ns"].sum())
    share = lost / elapsed if elapsed else 0.0
    cost = f"{seconds_text(lost)} of {seconds_text(elapsed)} ({share:.0%})"
    spans = _spans(iv)
    if cause == "round_trip":
        rtt = f" of {seconds_text(ctx.rtt_ns)}" if math.isfinite(ctx.rtt_ns) else ""
        if rtt and math.isfinite(ctx.rtt_loaded_ns) and ctx.rtt_loaded_ns > ctx.rtt_ns:
            rtt += (
                f" ({seconds_text(ctx.rtt_loaded_ns)} under the writes' load, from a reply "
                "to the next call here, the client's quickest turnaround in it: a capture "
                "at the client tells them apart)"
            )
        inflight = (
            f": {ctx.writes_in_flight_mean:.1f} WRITEs in flight on average, "
            f"{ctx.writes_in_flight_max} at most"
            if math.isfinite(ctx.writes_in_flight_mean)
            else ""
        )
        return f"Waiting on the network round trip{rtt} cost {cost}{inflight}"
    if cause == "server":
        return f"The server's time to answer cost {cost}{_synced_text(ctx)}"
    if cause == "commit":
        slowest = (
            f", slowest {seconds_text(ctx.commit_max_ns)}"
            if math.isfinite(ctx.commit_max_ns)
            else ""
        )
        many = "s" * (ctx.commits != 1)
        return (
            f"COMMITs (the server flushing to disk) held the writes {cost}: "
            f"{ctx.commits} COMMIT{many}{slowest}"
        )
    if cause == "loss_recovery":
        parts = []
        if ctx.rpc_resent_calls:
            timeout = (
                f" (first timeout {ctx.rpc_first_timeout_ms:.0f} ms)"
                if ctx.rpc_first_timeout_ms
                else ""
            )
            parts.append(f"{ctx.rpc_resent_calls} RPC calls re-sent{timeout}")
        if ctx.tcp_retransmissions:
            parts.append(f"{ctx.tcp_retransmissions} TCP segments re-sent")
        rtos = pd.DataFrame({"duration_ns": np.asarray(ctx.tcp_silences_ns, "int64")})
        if len(rtos):
            many = "s" * (len(rtos) > 1)
            parts.append(f"{len(rtos)} TCP silence{many} before a re-send ({_spans(rtos)})")
        timed = iv[iv["evidence"].str.contains("a retransmission timeout", regex=False)]
        if len(timed):  # (budget: a stop seen downstream of the client, RTO_MIN_NS or more)
            parts.append(
                f"the client stopped part-way through a call with every byte acknowledged "
                f"{len(timed)} time{'s' * (len(timed) > 1)} ({_spans(timed)}): retransmission "
                "timeouts of bytes lost before the capture point (a capture at the client "
                "shows them re-sent)"
            )
        cut = iv[iv["evidence"].str.contains(CUT_WINDOW_EVIDENCE, regex=False)]
        if len(cut):  # (budget: seen downstream, a loss-limited connection's stops)
            parts.append(
                f"the client stopped part-way through a call with every byte acknowledged "
                f"{len(cut)} time{'s' * (len(cut) > 1)} ({_spans(cut)}), holding back "
                "with the window the losses cut"
            )
        detail = f": {', '.join(parts)}" if parts else ""
        return f"Recovering from lost packets cost {cost}{detail}"
    if cause == "window":
        return f"A full TCP window stopped the sender for {cost}"
    if cause == "server_busy":
        return f"The server's JUKEBOX/DELAY answers made the client back off for {cost}"
    if cause == "client_idle":
        mid = iv["evidence"].str.contains("part-way", regex=False).to_numpy() & _long(iv)
        how = f": {spans}" if spans else ""
        if mid.any():
            how += (
                f", {int(mid.sum())} of them part-way through sending a call with its data "
                "acknowledged"
            )
        return f"The client sent nothing for {cost}{how}"
    if cause == "capture_gap":
        return (
            f"The capture missed traffic for {cost}{': ' + spans if spans else ''}: what "
            "happened then is unknown"
        )
    if cause == "unknown":
        return f"Unexplained time: {cost}"
    return f"{cause}: {cost}"


def _synced_text(ctx: Context) -> str:
    """': 32 of 32 WRITEs asked FILE_SYNC, ...' when any asked a stable level."""
    asked = {k: v for k, v in ctx.stable_asked.items() if k in ("FILE_SYNC", "DATA_SYNC") and v}
    if not asked:
        return ""
    total = sum(ctx.stable_asked.values())
    levels = " and ".join(f"{v:,} {k}" for k, v in asked.items())
    return (
        f"; of its {total:,} WRITEs the client asked {levels} (each waits for the server's "
        "stable storage before its reply)"
    )


def _scope_findings(
    row: Row,
    iv_all: pd.DataFrame,
    primaries: set[str],
    ctx: Context,
    prefix: str,
) -> list[Finding]:
    """The findings of one pair (``prefix`` names it when there are several)."""
    out: list[Finding] = []
    elapsed = int(row["elapsed_ns"])
    if not elapsed:
        return out
    seconds = {c: int(row[f"{c}_ns"]) for c in CAUSES}
    removals = gains(row)
    for cause in sorted(
        (c for c in CAUSES if c != "transfer" and seconds[c] > 0), key=lambda c: -seconds[c]
    ):
        iv = iv_all[iv_all["cause"] == cause]
        lost = seconds[cause]
        share = lost / elapsed
        significant = is_significant(cause, row, removals) or cause in primaries
        got = removals.get(cause)
        gains_some = got is not None and got.speedup >= GAIN_NOTABLE
        if not significant and share < NOTABLE and not gains_some:
            continue
        title = prefix + _title(cause, elapsed, iv, ctx)
        cut = _cut_window_ns(row)
        if cause == "loss_recovery" and cut >= CUT_WINDOW_SAID * elapsed:
            title += (
                f"; and {seconds_text(cut)} ({cut / elapsed:.0%}) more of waiting for ACKs with "
                "the window the losses kept small (counted under the round trip)"
            )
        if cause == "round_trip" and cut >= CUT_WINDOW_SAID * elapsed:
            title += (
                f" (of it, {seconds_text(cut)} with the window the losses kept small: the "
                "loss's too)"
            )
        remedy = _remedy(cause, ctx) if significant else ""
        if remedy and cause == "round_trip" and cut >= 0.5 * lost:
            # most of its waits are the window the losses cut: more RPC slots
            # queue behind the same window (the kernel client queues its calls
            # in the socket already); the loss is the fix
            remedy = (
                "most of these waits are the TCP window the losses kept small, not too few "
                "WRITEs in flight: find the loss first (its finding); nconnect spreads the writes "
                "over several windows, a server closer to the client shortens each wait"
            )
        if remedy and got is not None:
            remedy += "; " + gain_text(cause, got)
        text = f"{title}. {remedy[0].upper()}{remedy[1:]}" if remedy else title
        details = {
            "cause": cause,
            "client": str(row["client"]),
            "server": str(row["server"]),
            "seconds": lost / 1e9,
            "share": share,
            "intervals": len(iv),
            "frames": _frames(iv),
            "remedy": remedy,
        }
        if got is not None:
            details |= _gain_details(got)
        out.append(
            Finding(
                kind=cause,
                title=text,
                severity="problem" if significant else "info",
                time_lost_ns=lost,
                limits_conclusions=cause == "capture_gap",
                details=details,
            )
        )
    if ("bandwidth" in primaries or ceiling(row)) and "bandwidth" in removals:
        got = removals["bandwidth"]
        out.append(
            Finding(
                kind="bandwidth",
                title=f"{prefix}The data moved at a steady ceiling of {float(row['mbit_s']):,.1f} "
                f"Mbit/s for {share_of(row, 'transfer'):.0%} of the time. Look at the path's rate "
                f"limits, shapers and slowest link; {gain_text('bandwidth', got)}",
                severity="problem",
                time_lost_ns=got.saved_ns,
                details={
                    "cause": "bandwidth",
                    "client": str(row["client"]),
                    "server": str(row["server"]),
                    "remedy": "a faster path",
                    **_gain_details(got),
                },
            )
        )
    return out


def share_of(row: Row, cause: str) -> float:
    elapsed = float(row["elapsed_ns"])
    return float(row[f"{cause}_ns"]) / elapsed if elapsed else 0.0


_FIX_WORDS = {
    "round_trip": "with {how}",
    "server": "with {how}",
    "commit": "with COMMITs that return at once",
    "loss_recovery": "without the losses",
    "window": "with a window as big as the path holds",
    "server_busy": "without the JUKEBOX/DELAY back-off",
    "client_idle": "without the client's pauses",
    "bandwidth": "with {how}",
}


def gain_text(cause: str, got: Removal) -> str:
    """'fixing it would make the writes about 2.5x faster (with ...)'."""
    fix = _FIX_WORDS[cause].format(how=got.how)
    if got.speedup < 1.05:
        return f"fixing it alone would gain little ({fix}: {got.speedup:.2f}x): other limits remain"
    if got.at_least:  # (the fastest stretch the capture shows: counterfactual.Removal)
        return (
            f"fixing it would make the writes at least {got.speedup:.1f}x faster ({fix}; the "
            "fastest stretch this capture shows, and the window the losses cut could grow "
            "beyond it)"
        )
    if got.paced:  # (a window regrown at its flights' pace: counterfactual.Removal)
        return (
            f"fixing it would make the writes about {got.speedup:.1f}x faster ({fix}; a "
            "window regrown from TCP's initial one, its data as fast as its flights here: "
            "whether the client keeps that pace, this capture cannot show)"
        )
    return f"fixing it would make the writes about {got.speedup:.1f}x faster ({fix})"


def _gain_details(got: Removal) -> dict[str, float | str | bool]:
    return {
        "speedup_if_removed": round(got.speedup, 3),
        "speedup_is_lower_bound": got.at_least,
        "speedup_assumes_flight_pace": got.paced,
        "predicted_s": got.predicted_ns / 1e9,
        "saved_s": got.saved_ns / 1e9,
        "floor_s": got.floor_ns / 1e9,
        "assumed": got.how,
    }


def budget_findings(
    budget: Budget,
    verdict: Verdict,
    ctx: Context | None = None,
    pair_contexts: dict[tuple[str, str], Context] | None = None,
) -> list[Finding]:
    """One finding per cause beyond transfer that cost a pair time (significant,
    or at least NOTABLE of it), each with its remedy and evidence frames; with
    several pairs, each pair's own (the busiest MAX_PAIRS_IN_FINDINGS), named."""
    ctx = ctx or Context()
    pair_contexts = pair_contexts or {}
    pairs = budget.pairs
    if pairs.empty:
        return []
    by_pair = {(p.client, p.server): p for p in verdict.pairs}
    several = len(pairs) > 1
    out: list[Finding] = []
    busiest = pairs.sort_values("elapsed_ns", ascending=False, kind="stable")
    for row in busiest.head(MAX_PAIRS_IN_FINDINGS).to_dict("records"):
        key = (str(row["client"]), str(row["server"]))
        iv = budget.intervals
        if several:
            iv = iv[(iv["client"] == key[0]) & (iv["server"] == key[1])]
        mine = by_pair.get(key)
        primaries = {mine.primary} if mine else {verdict.primary}
        prefix = f"{key[0]} → {key[1]}: " if several else ""
        out += _scope_findings(row, iv, primaries, pair_contexts.get(key, ctx), prefix)
    return out


def verdict_finding(verdict: Verdict, budget: Budget) -> Finding:
    primary = verdict.primary
    severity: Severity = "info" if primary == "none" else "problem"
    return Finding(
        kind="verdict",
        title=verdict.text[0].upper() + verdict.text[1:],
        severity=severity,
        details={"primary": primary, "elapsed_ns": budget.elapsed_ns},
    )
