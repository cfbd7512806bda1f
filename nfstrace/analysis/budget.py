"""The time budget of the writes: every nanosecond of each client/server pair's
write activity attributed to one cause, with the evidence behind it.

The write activity of a pair runs from the first packet of its first WRITE
call to the last packet of its last WRITE or COMMIT reply.  It is cut into
exclusive intervals that add up to it exactly, each labelled with one cause:

``transfer``
    bytes of a call (or a reply) are crossing the capture point: data moving
    (also of calls a short snaplen left unread: rpc_unframed stretches).
``round_trip``
    waiting on the network's propagation: a call fully sent waits for its
    reply while the round trip runs (the first 2·T_prop of the wait, as far
    as the capture point sees it), a TCP sender with too little in flight
    for the round trip waits for ACKs part-way through a call (slow start, a
    small window: fewer bytes unacknowledged than the path holds), or, where
    the capture point does not see the round trip inside call->reply (server
    side), the first round trip of a spell with nothing outstanding.
``server``
    a call fully sent waits for its reply beyond the round trip: the server's
    processing, storage and queueing; or the server read the calls more slowly
    than they came (it closed its TCP window, or the client filled a window big
    enough for the round trip).
``commit``
    a COMMIT is outstanding and nothing else is moving (its flush).
``loss_recovery``
    a TCP sender is silent before re-sending bytes (a retransmission
    timeout), or an RPC waits between its first send and its re-send (an RPC
    re-send timeout, UDP).
``window``
    a TCP sender filled a window its peer advertised that was smaller than the
    path holds in a round trip: the window, not the peer, limited the flow.
``server_busy``
    the server answered NFS3ERR_JUKEBOX / NFS4ERR_DELAY: from that call to the
    client's retry.
``client_idle``
    nothing is outstanding (the client sent nothing), or the client stopped
    part-way through sending a call with its data acknowledged.
``capture_gap``
    the capture missed traffic: a silence of the pair bounded by evidence that
    messages went unrecorded (replies without their call after it, calls whose
    reply never came before it, TCP bytes the receiver acknowledged but the
    capture never saw).
``unknown``
    none of these (should not happen: kept so that the budget always adds up).

Precedence, when several apply at once: ``PRECEDENCE`` (below) is the order
the rules claim time, one rule per kind of evidence (a cause can stand at
several ranks: a TCP sender's silence before a re-send blocks the stream, an
RPC's re-send timer only runs beside the others), with why each stands where
it does.  An instant no rule claims is the client's idleness (nothing
outstanding) or ``unknown``.

Interval merging: adjacent pieces of the same cause become one interval,
whose evidence names the RPCs and frames behind it (for Wireshark).

Several pairs: each has its own budget; the capture's budget is their sum in
pair-time (two pairs writing at once count their time twice), so its shares
are shares of the pairs' total elapsed time.

A pure function of the transactions and events tables; no I/O.  Per pair:
the evidence (``_Pair``: calls, transport events, capture gaps, TCP stops,
each call's wait split), a rule per kind of evidence giving its cause's
intervals, the precedence table, then the interval algebra (``_pieces``: each
instant given to the first rule covering it; ``_intervals``: runs merged).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import pandas as pd

from nfstrace.analysis.critical_path import (
    PATH_CAUSES,
    CallTimes,
    Stops,
    call_totals,
    critical_path,
)
from nfstrace.analysis.critical_path import Path as CriticalPath
from nfstrace.analysis.critical_path import code as path_code
from nfstrace.analysis.grouping import group_indices, is_value, rows_where, sorted_unique
from nfstrace.analysis.pace import UNANSWERED_HORIZON_NS
from nfstrace.jsonable import NOT_IN_JSON, json_field
from nfstrace.protocol.nfs3 import NFS3ERR_JUKEBOX
from nfstrace.protocol.procedures import COMMIT_OP, WRITE_OP
from nfstrace.protocol.xids import counts_little_endian, swapped
from nfstrace.text import seconds_text

# The causes an instant of the write activity can have, in the order the
# tables list them (declared once, in critical_path.py, which budget builds on).
CAUSES = PATH_CAUSES
SERVER_DELAY_STATUS = NFS3ERR_JUKEBOX  # the same value as NFS4ERR_DELAY: 10008

# A silence of the pair this long or longer is looked at as a possible capture
# gap (it is one only with evidence of unrecorded messages).
GAP_MIN_NS = 1_000_000
# A client numbers its calls one by one when at least this share of a
# connection's successive calls (of at least XID_RUN_MIN, in time order) have
# xids one apart; then xids it skipped across a silence (up to XID_SKIP_MAX at
# once, else a new numbering) and that the capture never shows are calls the
# capture missed.
XID_RUN_MIN = 8
XID_SEQUENTIAL_SHARE = 0.5
XID_SKIP_MAX = 1 << 20
# Calls at least this big time the pair's sending rate (bytes over first->last packet).
RATE_MIN_BYTES = 8192
# Calls sent at one rate: their rates' interquartile range at most this share of
# their median (_sending_rate_spread).  Lab: rate limits of 50 and 60 Mbit/s
# 0.2-1.9% (seen at the server with 0.5% loss: 0.02%); the kernel client through
# the CPU-bound impair.py bridge of the emulated guests (120-280 Mbit/s, not a
# ceiling of the path but of whatever CPU was free) 24-40%; a healthy bridge 38%;
# a window 1% loss kept small 24-48%.
STEADY_SPREAD = 0.1
# ... and leaving at most this many times faster than the pair's overall rate (the
# path clocked the sender: verdict's steady ceiling).
STEADY_RATIO = 1.25
# ... of at least this many calls: a few 1 MiB WRITEs through a window 1% loss
# keeps small each average out to the same rate (the kernel client through 10 ms
# and 1% loss, 4 WRITEs: 2.2% apart, "transfer 65%"; 32 of them: 24-48%).
STEADY_MIN_CALLS = 8
# ... each timed over about this many bytes of consecutive calls (the size of the
# lab's rate-limited 1 MiB WRITEs, whose spreads above are one call's each).
SPREAD_RUN_BYTES = 1 << 20
# A UDP sender is not clocked by ACKs: its calls leave at its own rate and, behind a
# slower hop, wait in that hop's queue, which looks like server time from before
# the hop.  The hop sends a call on when the one ahead has crossed: the replies to
# calls queued behind one another come back one call's bytes at the hop's rate
# apart, on one clock (``_reply_clock``).  What tells that clock from a server's
# pace: the replies keep the calls' order (a FIFO hop feeding a server faster than
# it cannot reorder them); their spacing is regular (a link's clock is exact: only
# the fast server's own jitter after the hop moves a reply, by a small part of a
# call's time on the link: at most CLOCK_JITTER of the spacing, as a standard
# deviation); and that jitter is not carried over (a reply late by the server's
# jitter does not delay the next, which the hop has already sent on), where a
# server's service times add up: a late reply delays every later one.  Measured
# as a variance ratio over the queued calls of stretches of at least CLOCK_LAG:
# the spread of the replies' offsets from the clock over CLOCK_LAG calls grows by
# (CLOCK_LAG - 1) times the carried part of the spread over one call; the share
# carried is 0 for a clock, 1 for a server (CLOCK_CARRY between).  Lab (client
# side, 32 KiB WRITEs, 3 or 8 in flight, 1 and 4 MiB): hops of 40/80/160 Mbit/s
# carry -0.02..0.08 with a spacing jitter of 0.6-6% (16 MiB at 80 Mbit/s on a
# busier host: carry 0.02, jitter 30%); a server sleeping 2/5/10 ms per WRITE
# 0.54-4.9.  A server that takes exactly the same time for every WRITE
# is a clock too (the lab's 5 ms sleep with 8 in flight: 0.09): with calls of one
# size nothing from the client side tells the two apart, and the verdict says so.
CLOCK_MIN_CALLS = 16
CLOCK_LAG = 8
CLOCK_JITTER = 0.4
CLOCK_CARRY = 0.3

INTERVAL_COLUMNS: dict[str, str] = {
    "client": "str: client address",
    "server": "str: server address",
    "start_ns": "int64: start of the interval",
    "end_ns": "int64: end of the interval",
    "duration_ns": "int64: end - start",
    "cause": f"str: one of {', '.join(CAUSES)}",
    "evidence": "str: the RPCs (xid, frames) or transport events (frame) behind it",
    "frame": "int64: a frame to open in Wireshark (-1: none)",
}

PAIR_COLUMNS: dict[str, str] = {
    "client": "str: client address",
    "server": "str: server address",
    "start_ns": "int64: first packet of the pair's first WRITE call",
    "end_ns": "int64: last packet of its last WRITE/COMMIT reply",
    "elapsed_ns": "int64: end - start (the sum of the cause columns)",
    "bytes": "int64: bytes acknowledged by its successful WRITE replies",
    "mbit_s": "float: bytes over the elapsed time (10^6 bit/s)",
    "writes": "int64: WRITE calls",
    "writes_unseen": "int64: WRITE replies in its activity whose calls the capture did not "
    "show (a snaplen that cut their headers, a capture point that missed them): their bytes "
    "are in bytes",
    "write_size": "int64: most common WRITE size (bytes: the call's count, else the bytes "
    "its record carried; -1 unknown)",
    "send_mbit_s": "float: median rate of its big calls from first to last packet (NaN: none)",
    "send_spread": "float: their rates' interquartile range over their median, small calls "
    "timed in runs of about a MiB (NaN: fewer than 8 calls)",
    "ack_mbit_s": "float: TCP, seen at the client: the median rate its WRITE calls were "
    "acknowledged at while they kept the receiver busy, timed as send_spread (NaN: unknown)",
    "ack_spread": "float: those rates' interquartile range over their median (NaN: unknown)",
    "peak_mbit_s": "float: the fastest its WRITE calls' bytes crossed over PEAK_WINDOW_NS "
    "(or PEAK_WINDOW_RTTS round trips): what the path was seen to carry (NaN: none)",
    "peak_floor_ns": "int64: its bytes at peak_mbit_s (0: unknown): how fast the writes can be "
    "without a faster path than the capture shows",
    "delivery_floor_ns": "int64: its bytes at the fastest rate a WRITE call alone on the wire "
    "was acknowledged, less a round trip (client side; 0: unknown): how fast the path moves "
    "the data, whatever the client's bursts",
    "stream_bound": "bool: its WRITE calls went back to back in their TCP streams (queued in "
    "the client's socket: TCP's window, not the RPC round trip, set their pace)",
    "clock_mbit_s": "float: UDP, captured before a slower hop: the rate (call bytes) of the "
    "clock its replies came back on, the hop its calls queued at (NaN: none found)",
    "queued_ns": "int64: of transfer_ns, the time its data sat in a queue in the path (ACKs "
    "held back behind a bottleneck)",
    "rtt_ns": "float: the round trip its waits were split with (NaN: unknown)",
    "rtt_loaded_ns": "float: seen downstream of the client, the round trip under the writes' "
    "load when longer than rtt_ns (the times from a reply to the next call: _loaded_hidden; "
    "NaN: not measured, or no longer)",
    "capture_point": "str: client / server / between / unknown",
    "transport": "str: tcp, udp, or tcp+udp: how its calls went",
    **{f"{c}_ns": f"int64: time attributed to {c}" for c in CAUSES},
    **{
        f"{c}_path_ns": f"int64: time {c} took on the critical path (critical_path.py): what "
        "removing it can give back"
        for c in CAUSES
    },
    **{
        f"{c}_also_ns": f"int64: time on the critical path another cause owns that {c} made "
        "too (an ACK wait of a window a loss cut: the round trip's and the loss's)"
        for c in CAUSES
    },
    **{
        f"{c}_calls_ns": f"int64: {c}'s time in the WRITEs' own timelines summed (each from its "
        "first packet to its reply, whatever ran beside it)"
        for c in CAUSES
    },
    "write_latency_ns": "int64: the WRITEs' latencies summed (first packet to reply)",
    "max_outstanding": "int64: the most calls the client had outstanding at once",
    "round_trip_also_count": "int64: how many segments round_trip_also_ns holds",
    "resent_segment_share": "float: TCP segments of the client's re-sent, over the segments "
    "its calls took (full-size segments: bytes / SEGMENT_BYTES)",
    "slow_start_ns": "int64: TCP: the round trips (the pair's) a window that starts at "
    "INITIAL_WINDOW segments and doubles each round trip needs to send its calls' bytes "
    "over its connections, at least (0: UDP or no round trip)",
    "loss_bound_mbit_s": "float: the rate its TCP connections' windows could keep at that "
    "share of losses and its round trip (Mathis: SEGMENT_BYTES / RTT * MATHIS_C / sqrt(share), "
    "per connection; NaN: nothing re-sent or no round trip)",
    "path_server_waits": "int64: calls whose server (or COMMIT) wait is on the critical path",
    "ack_chain_ns": "int64: a sender that starts each call once the last one's bytes are "
    "acknowledged (ACK-clocked: 90% of its calls): the longest such chain of one connection, "
    "from each call's first packet to that ACK (0: not such a sender)",
    "ack_chain_calls": "int64: the calls of that chain (each holds a round trip)",
    "server_work_ns": "int64: time at least one WRITE was with the server (its calls' server "
    "waits together): no removal of another cause makes the writes shorter",
}


def _words_at(words: Callable[[int], str], index: np.ndarray, i: int) -> str:
    """The words of interval i of a layer: of row ``index[i]`` of its table."""
    return words(index.item(i))


@dataclass(frozen=True)
class BudgetOptions:
    """The round trip the budget splits waits with (nanoseconds; NaN: unknown).

    rtt_ns: the network round trip (2·T_prop); rtt_visible_ns: the part of it a
    call->reply time contains at the capture point (all of it on the client
    side, none on the server side)."""

    rtt_ns: float = math.nan
    rtt_visible_ns: float = math.nan
    capture_point: str = "unknown"


@dataclass(frozen=True)
class Budget:
    """Per pair and for the whole capture (``PAIR_COLUMNS``), and the intervals
    (``INTERVAL_COLUMNS``), in pair then time order."""

    pairs: pd.DataFrame = field(metadata=NOT_IN_JSON)
    intervals: pd.DataFrame = field(metadata=NOT_IN_JSON)
    # the JSON: the round trips, then per cause and per pair (pair_summaries)
    options: BudgetOptions = field(
        default_factory=BudgetOptions,
        metadata=json_field(
            omit=True,
            then=(
                ("rtt_ns", "options.rtt_ns"),
                ("rtt_visible_ns", "options.rtt_visible_ns"),
                "elapsed_s",
                ("total", "cause_times"),
                ("pairs", "pair_summaries"),
            ),
        ),
    )

    @property
    def elapsed_ns(self) -> int:
        return int(self.pairs["elapsed_ns"].sum()) if len(self.pairs) else 0

    @property
    def elapsed_s(self) -> float:
        return self.elapsed_ns / 1e9

    def seconds(self) -> dict[str, int]:
        """Nanoseconds per cause over every pair (pair-time)."""
        if self.pairs.empty:
            return {}
        return {c: int(self.pairs[f"{c}_ns"].sum()) for c in CAUSES}

    def shares(self) -> dict[str, float]:
        total = self.elapsed_ns
        return {c: v / total for c, v in self.seconds().items()} if total else {}

    @property
    def cause_times(self) -> list[dict[str, Any]]:
        """Over every pair: each cause that took time, its seconds and share."""
        total = {f"{c}_ns": v for c, v in self.seconds().items()}
        return _cause_times(total, self.elapsed_ns) if total else []

    @property
    def pair_summaries(self) -> list[dict[str, Any]]:
        """Per pair: its span, bytes and rate, each cause's time, and its
        JSON_INTERVALS longest intervals (in time order) of all it has."""
        out = []
        for p in self.pairs.to_dict("records"):
            mine = self.intervals[
                (self.intervals["client"] == p["client"])
                & (self.intervals["server"] == p["server"])
            ]
            longest = mine.nlargest(JSON_INTERVALS, "duration_ns").sort_values("start_ns")
            out.append(
                {
                    "client": p["client"],
                    "server": p["server"],
                    "start_ns": int(p["start_ns"]),
                    "end_ns": int(p["end_ns"]),
                    "elapsed_s": p["elapsed_ns"] / 1e9,
                    "bytes": int(p["bytes"]),
                    "mbit_s": float(p["mbit_s"]),
                    "causes": _cause_times(p, int(p["elapsed_ns"])),
                    "intervals": len(mine),
                    "longest_intervals": [
                        {
                            "start_ns": int(r.start_ns),
                            "end_ns": int(r.end_ns),
                            "seconds": r.duration_ns / 1e9,
                            "cause": r.cause,
                            "evidence": r.evidence,
                            "frame": int(r.frame),
                        }
                        for r in longest.itertuples(index=False)
                    ],
                }
            )
        return out


# The intervals of a pair the JSON summary lists: its longest
JSON_INTERVALS = 200


def _cause_times(row: dict[str, Any], elapsed: int) -> list[dict[str, Any]]:
    """Each cause that took time in ``row`` (``{cause}_ns`` keys): its seconds
    and its share of ``elapsed`` (ns)."""
    return [
        {
            "cause": c,
            "seconds": row[f"{c}_ns"] / 1e9,
            "share": row[f"{c}_ns"] / elapsed if elapsed else 0.0,
        }
        for c in CAUSES
        if row[f"{c}_ns"]
    ]


# ---- layers ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Block:
    """Intervals [start, end) from one kind of evidence: words and a frame for each."""

    starts: np.ndarray
    ends: np.ndarray
    words: Callable[[int], str]
    frames: np.ndarray


def _block(
    starts: np.ndarray,
    ends: np.ndarray,
    words: Callable[[int], str],
    frames: np.ndarray | None = None,
) -> _Block:
    """The non-empty intervals of [starts, ends); ``words(i)`` and ``frames[i]``
    describe interval i of the arrays given (frames -1: none)."""
    starts = np.asarray(starts, "int64")
    ends = np.asarray(ends, "int64")
    keep = ends > starts
    index = np.flatnonzero(keep)
    f = np.full(len(starts), -1, "int64") if frames is None else np.asarray(frames, "int64")
    return _Block(starts[keep], ends[keep], functools.partial(_words_at, words, index), f[keep])


@dataclass(frozen=True)
class _Layer:
    """The intervals one rule gives a cause (``PRECEDENCE``), in blocks."""

    cause: str
    blocks: tuple[_Block, ...]

    @functools.cached_property
    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """starts, ends, block of each interval, index within its block, frames
        (made once: the pieces' bounds and their cover both read them)."""
        if not self.blocks:
            e = np.array([], "int64")
            return e, e, e, e, e
        block = np.concatenate(
            [np.full(len(b.starts), k, "int64") for k, b in enumerate(self.blocks)]
        )
        within = np.concatenate([np.arange(len(b.starts)) for b in self.blocks]).astype("int64")
        return (
            np.concatenate([b.starts for b in self.blocks]),
            np.concatenate([b.ends for b in self.blocks]),
            block,
            within,
            np.concatenate([b.frames for b in self.blocks]),
        )


class _Cover:
    """Which elementary pieces a layer covers, and one interval covering each
    (``which``: asked only of the pieces whose words are shown)."""

    def __init__(self, layer: _Layer, mids: np.ndarray):
        s, e, self.block, self.within, self.frames = layer.arrays
        self.words = [b.words for b in layer.blocks]
        self.starts, self.ends = s, e
        if len(s) == 0:
            self.covered = np.zeros(len(mids), bool)
            return
        # the mids (sorted) each interval [s, e) holds are a run of them: +1 at
        # its first, -1 after its last, summed (not a search of every mid)
        first = np.searchsorted(mids, s, side="left")
        after = np.searchsorted(mids, e, side="left")
        n = len(mids) + 1
        held = np.bincount(first, minlength=n) - np.bincount(after, minlength=n)
        self.covered = np.cumsum(held[:-1]) > 0

    def which(self, mids: np.ndarray) -> np.ndarray:
        """Per mid, an interval covering it (its position in the layer's arrays;
        -1: none): the one with the latest end among those started at or
        before it (the first such in start order)."""
        if len(self.starts) == 0:
            return np.full(len(mids), -1, "int64")
        if len(self.starts) <= _FEW_INTERVALS:
            return self._which_each(mids)
        order = np.argsort(self.starts, kind="stable")
        s, e = self.starts[order], self.ends[order]
        best = np.maximum.accumulate(e)
        arg = np.zeros(len(e), "int64")
        running = np.flatnonzero(np.r_[True, e[1:] > best[:-1]])
        arg[running] = running
        arg = np.maximum.accumulate(arg)
        k = np.searchsorted(s, mids, side="right") - 1
        ok = k >= 0
        at = np.where(ok, arg[np.maximum(k, 0)], 0)
        return np.where(ok & (e[at] > mids), order[at], -1)

    def _which_each(self, mids: np.ndarray) -> np.ndarray:
        """``which`` of a layer of a few intervals, in Python."""
        s, e = self.starts.tolist(), self.ends.tolist()
        order = sorted(range(len(s)), key=s.__getitem__)  # (stable)
        out = []
        for mid in mids.tolist():
            end, j = None, -1  # the latest end so far, and the first interval to reach it
            for k in order:
                if s[k] > mid:
                    break
                if end is None or e[k] > end:
                    end, j = e[k], k
            out.append(j if end is not None and end > mid else -1)
        return np.array(out, "int64")


# A layer of at most this many intervals finds them one by one (``_Cover.which``).
_FEW_INTERVALS = 32


# ---- one pair ----------------------------------------------------------------------


def _xid(x: int) -> str:
    return f"xid {int(x):#010x}"


@dataclass(frozen=True)
class _PairCalls:
    """A pair's calls as arrays (times in ns; unanswered replies at ``end``)."""

    op: np.ndarray
    xid: np.ndarray
    fh: np.ndarray
    cs: np.ndarray  # first packet of the first send
    ce: np.ndarray  # last packet of the first send
    ls: np.ndarray  # first packet of the last send
    le: np.ndarray  # last packet of the last send
    rf: np.ndarray  # first packet of the reply
    rl: np.ndarray  # last packet of the reply
    answered: np.ndarray
    n_calls: np.ndarray
    status: np.ndarray
    frame_first: np.ndarray
    frame_last: np.ndarray
    reply_frame: np.ndarray
    call_bytes: np.ndarray
    write_bytes: np.ndarray
    count: np.ndarray
    acked: np.ndarray  # the receiver's ACK of the last send's last byte (-1: none)
    conn: np.ndarray  # connection of the first send
    udp: np.ndarray  # bool: sent over UDP


def _int(s: pd.Series, missing: int = -1) -> np.ndarray:
    return s.astype("Int64").fillna(missing).to_numpy("int64")


def _calls(tx: pd.DataFrame) -> _PairCalls:
    cs = _int(tx["t_call_ns"])
    ce = _int(tx["t_call_end_ns"])
    rl = _int(tx["t_reply_ns"])
    rf = _int(tx["t_reply_first_ns"]) if "t_reply_first_ns" in tx else rl.copy()
    rf = np.where(rf < 0, rl, rf)
    return _PairCalls(
        op=tx["op"].astype(object).fillna("?").to_numpy(),
        xid=tx["xid"].to_numpy("int64"),
        fh=tx["fh"].astype(object).fillna("").to_numpy() if "fh" in tx else np.full(len(tx), ""),
        cs=cs,
        ce=np.maximum(ce, cs),
        ls=np.maximum(_int(tx["t_call_last_ns"]), cs),
        le=np.maximum(_int(tx["t_call_last_end_ns"]), ce),
        rf=rf,
        rl=rl,
        answered=rl >= 0,
        n_calls=tx["n_calls"].to_numpy("int64"),
        status=_int(tx["status"]),
        frame_first=_int(tx["call_frame_first"])
        if "call_frame_first" in tx
        else _int(tx["call_frame"]),
        frame_last=_int(tx["call_frame"]),
        reply_frame=_int(tx["reply_frame"]),
        call_bytes=_int(tx["call_bytes"], 0),
        write_bytes=tx["write_bytes"].to_numpy("int64"),
        count=_int(tx["count"]),
        acked=_int(tx["t_call_acked_ns"]) if "t_call_acked_ns" in tx else np.full(len(tx), -1),
        conn=_int(tx["conn"]),
        udp=tx["transport"].astype(object).eq("udp").to_numpy(bool),
    )


def _take(c: _PairCalls, rows: np.ndarray) -> _PairCalls:
    """The calls at these positions (one pair's, out of every pair's)."""
    return _PairCalls(**{f.name: getattr(c, f.name)[rows] for f in fields(c)})


def _call_words(c: _PairCalls) -> Callable[[int], str]:
    # (``item``: a Python value, without making a numpy scalar first; each call's
    # words made once: its sending, round trip, server and reply all name it)
    made: dict[int, str] = {}

    def words(i: int) -> str:
        got = made.get(i)
        if got is None:
            got = made[i] = _words_of_call(c, i)
        return got

    return words


def _words_of_call(c: _PairCalls, i: int) -> str:
    frames = f"frames {c.frame_first.item(i)}-{c.frame_last.item(i)}"
    if c.answered.item(i):
        return f"{c.op[i]} {_xid(c.xid.item(i))} ({frames}, reply frame {c.reply_frame.item(i)})"
    return f"{c.op[i]} {_xid(c.xid.item(i))} ({frames}, no reply captured)"


def _call_rates_bps(c: _PairCalls) -> np.ndarray:
    """Bits per second of the pair's big calls, first to last packet."""
    big = (c.call_bytes >= RATE_MIN_BYTES) & (c.ce > c.cs)
    return c.call_bytes[big] * 8e9 / (c.ce[big] - c.cs[big])


def _sending_rate_bps(c: _PairCalls) -> float:
    """Median rate of the pair's big calls (NaN: none)."""
    rates = _call_rates_bps(c)
    return float(np.median(rates)) if len(rates) else math.nan


def _sent_at_pair_rate(c: _PairCalls) -> bool:
    """Whether the big calls left at most STEADY_RATIO times faster than the pair's
    WRITE bytes moved over its whole write activity (back to back: the path, not
    the calls' turns, set the pace)."""
    w = np.flatnonzero(c.op == WRITE_OP)
    send = _sending_rate_bps(c)
    if not len(w) or not send > 0:
        return False
    span = float(c.rl[w].max() - c.cs[w].min())
    return span > 0 and send <= STEADY_RATIO * float(c.call_bytes[w].sum()) * 8e9 / span


def _sending_rate_spread(c: _PairCalls) -> float:
    """How much the big calls' rates differ: interquartile range over median
    (NaN: fewer than STEADY_MIN_CALLS).  Small calls are timed in runs of
    consecutive ones of about SPREAD_RUN_BYTES (keeping at least
    STEADY_MIN_CALLS runs): a 64 KiB call through a 60 Mbit/s limit lasts 9 ms,
    and where its segments leave within it moves with the ACKs' jitter (lab,
    ``nfs-cp`` 64 KiB WRITEs: one by one 18% apart, by the MiB 2%)."""
    big = np.flatnonzero((c.call_bytes >= RATE_MIN_BYTES) & (c.ce > c.cs))
    big = big[np.argsort(c.cs[big], kind="stable")]
    return _spread_in_runs(c.call_bytes[big], c.ce[big] - c.cs[big])[1]


def _spread_in_runs(nbytes: np.ndarray, dur: np.ndarray) -> tuple[float, float]:
    """The median rate (bit/s) of calls of ``nbytes`` that took ``dur`` ns each,
    in order, timed in runs of about SPREAD_RUN_BYTES, and the rates'
    interquartile range over that median (NaNs: fewer than STEADY_MIN_CALLS)."""
    if len(nbytes) < STEADY_MIN_CALLS:
        return math.nan, math.nan
    nbytes, dur = nbytes.astype("float64"), dur.astype("float64")
    per = int(SPREAD_RUN_BYTES // float(np.median(nbytes)))
    per = max(1, min(per, len(nbytes) // STEADY_MIN_CALLS))
    if per > 1:
        run = np.arange(len(nbytes)) // per
        # a short last run joins the one before it
        run = np.minimum(run, run[-1] - (len(nbytes) % per != 0))
        nbytes, dur = np.bincount(run, nbytes), np.bincount(run, dur)
    rates = nbytes * 8e9 / dur
    q1, q2, q3 = np.percentile(rates, [25, 50, 75])
    return float(q2), (float((q3 - q1) / q2) if q2 > 0 else math.nan)


def _acked_rate(c: _PairCalls) -> tuple[float, float]:
    """How fast the receiver acknowledged the pair's WRITE calls over TCP, seen
    at the client, while they kept it busy: each call's bytes over the time from
    the ACK of the call before it (or its own first packet, if later) to the ACK
    of its last byte, on one connection only (an nconnect mount's ACKs
    interleave); the median (bit/s) and spread as
    ``_spread_in_runs`` (NaNs: too few).  Behind a rate limit the ACKs come back
    on its clock however the client hands over its calls: ACK-clocked (sending
    at that rate), or bursting each call into a window that holds it (sending
    at its own speed, the bytes waiting in the limit's queue)."""
    w = np.flatnonzero(
        (c.op == WRITE_OP) & ~c.udp & (c.acked > c.cs) & (c.call_bytes >= RATE_MIN_BYTES)
    )
    if len(w) < STEADY_MIN_CALLS or len(np.unique(c.conn[w])) != 1:
        return math.nan, math.nan
    w = w[np.argsort(c.acked[w], kind="stable")]
    prev = np.r_[c.cs[w[0]], c.acked[w][:-1]]
    start = np.maximum(prev, c.cs[w])
    ok = c.acked[w] > start
    return _spread_in_runs(c.call_bytes[w][ok], (c.acked[w] - start)[ok])


def _clocked(c: _PairCalls) -> np.ndarray:
    """The pair's calls a hop's clock can time, in send order: UDP, sent once,
    answered."""
    on = np.flatnonzero(c.udp & c.answered & (c.n_calls == 1))
    return on[np.argsort(c.cs[on], kind="stable")]


def _reply_clock(c: _PairCalls) -> float:
    """The rate (bit/s of call bytes) of a hop that queued the pair's UDP calls
    and whose clock their replies came back on; NaN when the replies do not show
    one (see CLOCK_CARRY)."""
    k = _clocked(c)
    if len(k) <= CLOCK_MIN_CALLS:
        return math.nan
    rf, nbytes = c.rf[k], c.call_bytes[k].astype(float)
    # queued: sent before the reply to the call ahead of it came back
    queued = np.r_[False, c.cs[k][1:] < rf[:-1]]
    if (queued[1:] & (rf[1:] <= rf[:-1])).any():
        return math.nan  # a reply overtook one to an earlier call: no single file
    at = np.flatnonzero(queued)
    runs = [r for r in np.split(at, np.flatnonzero(np.diff(at) > 1) + 1) if len(r) >= CLOCK_LAG]
    if sum(len(r) for r in runs) < CLOCK_MIN_CALLS:
        return math.nan
    spacing = np.concatenate([rf[r] - rf[r - 1] for r in runs]).astype(float)
    sent = np.concatenate([nbytes[r] for r in runs])
    if spacing.sum() <= 0 or sent.sum() <= 0:
        return math.nan
    per_byte = spacing.sum() / sent.sum()  # ns per byte
    # each reply's offset from the clock, per stretch of queued calls
    offsets = [rf[np.r_[r[0] - 1, r]] - np.r_[0.0, np.cumsum(nbytes[r])] * per_byte for r in runs]
    one = float(np.var(np.concatenate([np.diff(y) for y in offsets])))
    if math.sqrt(one) > CLOCK_JITTER * spacing.mean():
        return math.nan
    lagged = float(np.var(np.concatenate([y[CLOCK_LAG:] - y[:-CLOCK_LAG] for y in offsets])))
    if one > 0 and (lagged - one) / (CLOCK_LAG - 1) > CLOCK_CARRY * one:
        return math.nan  # the jitter carried over: service times adding up
    return 8e9 / per_byte


def _hop_departures(c: _PairCalls, bps: float) -> np.ndarray:
    """When each call's bytes would have left a FIFO hop of ``bps`` fed by the
    calls as captured (ns; the call's last packet where the hop does not time
    it): each leaves its own bytes' time after it came or after the one ahead
    left, whichever is later."""
    out = c.le.copy()
    t = -np.inf
    for i in _clocked(c):
        t = max(float(c.le[i]), t) + float(c.call_bytes[i]) * 8e9 / bps
        out[i] = int(t)
    return out


def _path_bytes(c: _PairCalls, rtt: float) -> float:
    """Bytes the path holds over one round trip at the rate the pair's calls
    crossed it (their bytes over the time any of them was being sent).  A
    sender waiting for ACKs with less than that in flight could not keep the
    path busy: its window was too small for the round trip.  With more, its
    ACKs were held back by a queue in the path: a sender clocked by a
    bottleneck.  The rate the calls crossed at, not the sender's burst rate: a
    sender's own link says nothing of a slower hop behind it (lab, 16 MiB
    through a bridge that forwards 650 Mbit/s: calls leave at 1-5 Gbit/s).
    Lab runs at 2 and 10 ms added round trip put 17-44% and 53-93% of the
    write activity into waiting on it (16 MiB and 1 MiB)."""
    if not rtt > 0 or not len(c.cs):
        return math.inf
    order = np.argsort(c.cs, kind="stable")
    s, e = c.cs[order], np.maximum.accumulate(c.ce[order])
    first = np.flatnonzero(np.r_[True, s[1:] > e[:-1]])
    sending = float((np.maximum.reduceat(c.ce[order], first) - s[first]).sum())
    if sending <= 0:
        return math.inf
    rate = float(c.write_bytes.sum()) * 8e9 / sending
    return rate / 8 * rtt / 1e9 if rate > 0 else math.inf


def _activity_end(
    c: _PairCalls, wc: np.ndarray, done: np.ndarray, orphans: np.ndarray, orphan_xids: np.ndarray
) -> int:
    """The last WRITE/COMMIT reply; when the capture missed the end of the writes,
    the last reply without its call that came before the client's next other
    call: a reply to a WRITE or COMMIT the capture missed, when WRITE/COMMIT calls
    were left unanswered or the reply's xid lies between the last WRITE/COMMIT
    call's and the next call's (a client numbering its calls in order)."""
    end = int(c.rl[done].max())
    if not len(orphans):
        return end
    last = int(np.argmax(np.where(wc, c.cs, np.iinfo("int64").min)))
    later_other = ~wc & (c.cs > c.cs[last])
    before = int(c.cs[later_other].min()) if later_other.any() else np.iinfo("int64").max
    after_end = (orphans > end) & (orphans < before)
    if not (wc & ~c.answered).any():
        next_xid = c.xid[later_other][np.argmin(c.cs[later_other])] if later_other.any() else None
        after_end &= orphan_xids > c.xid[last]
        if next_xid is not None:
            after_end &= orphan_xids < next_xid
    theirs = orphans[after_end]
    return int(max(end, theirs.max())) if len(theirs) else end


def _xid_skips(c: _PairCalls, client_xids: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per silence (a, b), the calls the capture missed by their xids: on a
    connection whose calls number their xids one by one (in time order), the xid
    of its first call after the silence minus that of its last call before, less
    one, less the xids of the client seen anywhere between them."""
    missing = np.zeros(len(a), "int64")
    for conn in np.unique(c.conn):
        mine = np.flatnonzero(c.conn == conn)
        mine = mine[np.argsort(c.cs[mine], kind="stable")]
        if len(mine) < XID_RUN_MIN:
            continue
        xids, t = c.xid[mine], c.cs[mine]
        known = client_xids
        if counts_little_endian(xids):  # (the Linux kernel's numbering: protocol.xids)
            xids, known = swapped(xids), np.sort(swapped(client_xids))
        if (np.diff(xids) == 1).mean() < XID_SEQUENTIAL_SHARE:
            continue  # xids not numbered one by one: a skip says nothing
        before = np.searchsorted(t, a, side="right") - 1
        after = np.searchsorted(t, b, side="left")
        ok = (before >= 0) & (after < len(t))
        x0, x1 = xids[before[ok]], xids[after[ok]]
        step = x1 - x0
        seen = np.searchsorted(known, x1) - np.searchsorted(known, x0 + 1)
        add = np.where((step > 1) & (step <= XID_SKIP_MAX), np.maximum(step - 1 - seen, 0), 0)
        missing[np.flatnonzero(ok)] += add
    return missing


def _in_range(sorted_values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per i, how many of the sorted values lie in [lo[i], hi[i]]."""
    return np.searchsorted(sorted_values, hi, side="right") - np.searchsorted(
        sorted_values, lo, side="left"
    )


def _capture_gaps(
    c: _PairCalls,
    orphans: np.ndarray,
    holes: np.ndarray,
    activity: np.ndarray,
    start: int,
    end: int,
    client_xids: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Silences of the pair (no packet of its messages nor events) with evidence
    that the capture missed messages: (starts, ends, words).

    Over TCP the evidence must be bytes the capture never saw (a hole the
    receiver acknowledged): a capture that missed packets of a connection
    misses sequence numbers.  Replies without their call and skipped xids are
    not enough there: a ``-s 256`` capture cuts the header of a call that
    starts late in a segment, with nothing missing on the wire.  Over UDP (a
    datagram is a message) they are the evidence: replies without a call after
    the silence, calls before it never answered, xids skipped across it.

    Counted for all silences at once (sorted arrays and searchsorted: a busy
    pair has thousands of silences of a millisecond)."""
    t = sorted_unique(activity[(activity >= start) & (activity <= end)])
    if len(t) < 2:
        return np.array([], "int64"), np.array([], "int64"), []
    idx = np.flatnonzero(np.diff(t) >= GAP_MIN_NS)
    a, b = t[idx], t[idx + 1]
    span = b - a
    skipped = _xid_skips(c, client_xids, a, b)
    n_holes = _in_range(np.sort(holes), a, b + span)
    n_orphans = _in_range(np.sort(orphans), b, b + span)
    # the calls around each silence, by their first packet: over TCP only bytes
    # missing count (a silence with no call near is judged by the pair's calls)
    order = np.argsort(c.cs, kind="stable")
    cs = c.cs[order]
    tcp_sum = np.concatenate([[0], np.cumsum(~c.udp[order])])
    lonely = ((~c.answered) & (c.n_calls <= 1))[order]
    lonely_sum = np.concatenate([[0], np.cumsum(lonely)])
    near_lo = np.searchsorted(cs, a - span, side="left")
    near_hi = np.searchsorted(cs, b + span, side="right")
    any_near = near_hi > near_lo
    tcp = np.where(any_near, tcp_sum[near_hi] - tcp_sum[near_lo] > 0, bool((~c.udp).any()))
    n_lonely = lonely_sum[np.searchsorted(cs, a, side="right")] - lonely_sum[near_lo]
    starts, ends, words = [], [], []
    evidence = (  # per silence: how many, one, more than one
        (n_holes, "TCP range never captured", "TCP ranges never captured"),
        (n_orphans, "reply without a call after it", "replies without a call after it"),
        (n_lonely, "call before it never answered", "calls before it never answered"),
        (skipped, "call xid never seen", "call xids never seen"),
    )
    for k in np.flatnonzero((n_holes > 0) | ~tcp):
        counts = [(int(per[k]), one, more) for per, one, more in evidence]
        why = [f"{n} {one if n == 1 else more}" for n, one, more in counts if n]
        if why:
            starts.append(int(a[k]))
            ends.append(int(b[k]))
            words.append(f"no packet for {seconds_text(int(span[k]))}: " + ", ".join(why))
    return np.array(starts, "int64"), np.array(ends, "int64"), words


# ---- the evidence of one pair ------------------------------------------------------


@dataclass(frozen=True)
class _Events:
    """A pair's transport events (the events table's rows) as arrays."""

    kind: np.ndarray  # int: codes of kinds (the rules ask for a kind a dozen times)
    ts: np.ndarray
    dur: np.ndarray
    length: np.ndarray
    frame: np.ndarray
    from_client: np.ndarray  # bool: sent by the client
    conn: np.ndarray
    kinds: dict[str, int]  # a kind's code

    def of(self, kind: str, by_client: bool | None = None) -> np.ndarray:
        """Positions of the events of ``kind`` (``by_client``: sent by the client,
        or by the server; None: either)."""
        m = self.kind == self.kinds.get(kind, -2)  # (-1: a missing kind)
        if by_client is not None:
            m &= self.from_client == by_client
        return np.flatnonzero(m)


@dataclass(frozen=True)
class _EventTable:
    """The whole events table as arrays, converted once: each pair takes its
    rows by position (``pair``; a DataFrame per pair cost ~2 ms: 300 writing
    pairs, 0.6 s)."""

    kind: np.ndarray  # int: codes of kinds
    ts: np.ndarray
    dur: np.ndarray
    length: np.ndarray
    frame: np.ndarray
    src: np.ndarray  # object: the sender's address
    conn: np.ndarray
    kinds: dict[str, int]  # a kind's code

    @classmethod
    def of(cls, ev: pd.DataFrame | None) -> _EventTable:
        if ev is None or not len(ev):
            none = np.array([], "int64")
            return cls(none, none, none, none, none, np.array([], object), none, {})
        kind, names = pd.factorize(ev["kind"])  # (missing: -1)
        return cls(
            kind=kind,
            kinds={str(name): code for code, name in enumerate(names)},
            ts=ev["ts_ns"].to_numpy("int64"),
            dur=ev["duration_ns"].to_numpy("int64"),
            length=ev["length"].to_numpy("int64"),
            frame=ev["frame"].to_numpy("int64"),
            src=ev["src"].astype(object).to_numpy(),
            conn=ev["conn"].to_numpy("int64"),
        )

    def pair(self, rows: np.ndarray, client: str) -> _Events:
        """The events at positions ``rows`` (in the table's order), ``client``'s
        marked as sent by the client."""
        return _Events(
            kind=self.kind[rows],
            ts=self.ts[rows],
            dur=self.dur[rows],
            length=self.length[rows],
            frame=self.frame[rows],
            from_client=np.asarray(self.src[rows] == client, bool),
            conn=self.conn[rows],
            kinds=self.kinds,
        )


def _event_block(
    e: _Events,
    idx: np.ndarray,
    text: str | Callable[[int], str],
    ends: np.ndarray | None = None,
    starts: np.ndarray | None = None,
) -> _Block:
    """Transport events ``idx`` as intervals (default: each event's own span);
    ``text`` is a label or words for an event's position in ``e``."""
    if isinstance(text, str):
        label = text
        text = lambda j: f"{label} (frame {e.frame[j]})"  # noqa: E731
    return _block(
        e.ts[idx] if starts is None else starts,
        e.ts[idx] + e.dur[idx] if ends is None else ends,
        functools.partial(_words_at, text, idx),
        e.frame[idx],
    )


@dataclass(frozen=True)
class _TcpStops:
    """The pair's TCP stops (events), by what held the sender up."""

    # The client's re-sent segments: repeats of bytes the capture saw, and, where
    # the loss happened before the capture point (a capture at the server), the
    # segments that filled a hole after later bytes had come (tcp_hole_filled).
    resent_by_client: np.ndarray
    # TCP send gaps (tcp_send_gap) of the server, and of the client while a call
    # was being sent: between calls (the last one's bytes all sent) the time is the
    # reply's or the client's, and a parser that cannot see where records end (a
    # short snaplen) reports stops there too (the 256-byte cut of a 4 ms server:
    # 90% round trip).
    send_gaps: np.ndarray
    # per send gap: at least as many bytes in flight as the path holds (the ACKs
    # queued behind a bottleneck: transfer), else too few (a round trip)
    queued: np.ndarray
    path_bytes: float  # _path_bytes
    # the client's full windows (tcp_window_full): held by a loss (_held_by_loss),
    # smaller than the path holds, or as big or bigger
    window_held: np.ndarray
    window_small: np.ndarray
    window_big: np.ndarray
    # the client's stops part-way through a call with its data acknowledged
    # (tcp_send_idle), the end of the ACK's travel back to it (the hidden round
    # trip) for each, whether the capture point sees the client's side (a
    # capture at the client), and, where it does not, those of at least a
    # retransmission timeout, and the shorter ones on a connection the losses
    # limit (_loss_limited): the client holding back with the window they cut
    pauses: np.ndarray
    head: np.ndarray
    client_seen: bool
    timed_out: np.ndarray
    cut: np.ndarray


def _tcp_stops(c: _PairCalls, e: _Events, rtt: float, hidden: float, point: str) -> _TcpStops:
    resent = np.sort(np.r_[e.of("tcp_retransmission", True), e.of("tcp_hole_filled", True)])
    gaps = e.of("tcp_send_gap")
    gaps = gaps[~e.from_client[gaps] | _sending_at(c, e.ts[gaps], e)]
    # a connection's share of what the path holds: the calls of an nconnect mount
    # go over its connections at once, each with its part of the path in flight
    path_bytes = _path_bytes(c, rtt) / max(len(np.unique(c.conn[c.op == WRITE_OP])), 1)
    w = e.of("tcp_window_full", True)
    held = _held_by_loss(w, e.ts, e.dur, e.conn, resent, _loaded_rtt(c, rtt))
    w, w_held = w[~held], w[held]
    s = e.of("tcp_send_idle", True)
    s = s[_sending_at(c, e.ts[s], e)]
    client_seen = point not in ("server", "between")
    # Seen downstream on a connection the losses limit (as at the client its ACK
    # waits are the window the loss cut: _path_inputs), a shorter stop with
    # every byte acknowledged is the client holding back with that window (lab
    # 0.5% loss, 1 MiB WRITEs, at the server: 8% of the time the loss's before,
    # 15% now; its twin measures 32%).
    # But calls that arrived at one steady rate came through a ceiling before the
    # capture point whatever the losses (a 60 Mbit/s limit with 0.5% loss at the
    # server: its stops are the limit's pacing, 36% 'loss' where removing the
    # loss measured 1.00x): its sending (below, ``queued``).
    cut = s[:0]
    steady = _sending_rate_spread(c) <= STEADY_SPREAD
    # (and at the pair's own rate: calls one after another, not a round trip's
    # flights that each arrive at one rate, as 1 MiB WRITEs through 20 ms do)
    ceiling = steady and not client_seen and _sent_at_pair_rate(c)
    if not client_seen and not steady:
        rest = s[e.dur[s] < RTO_MIN_NS]
        cut = rest[np.isin(e.conn[rest], _loss_limited(resent, e.conn, c, rtt))]
    # A connection the losses limit moves at about its window per round trip
    # (Mathis): its ACK waits hold about what the path carried in a round trip
    # at that rate, the window swinging to twice its mean between losses; only
    # well beyond that is a queue in the path (_loss_limited).  But calls sent
    # at one steady rate are a ceiling's, whatever the losses (a limit before the
    # capture point with its queue out of sight, as at the server).
    queued = e.length[gaps] >= path_bytes
    if ceiling:
        # downstream of such a ceiling the bytes in flight are in its queue, out
        # of sight: the client's stops are its pacing (60 Mbit/s, 0.5% loss,
        # 64 KiB WRITEs at the server: 47% 'round trip' of 0.2 ms)
        queued[:] = True
    elif not steady:
        lossy = np.isin(e.conn[gaps], _loss_limited(resent, e.conn, c, rtt))
        queued &= ~lossy | (e.length[gaps] >= LOSS_WINDOW_SWING * path_bytes)
    return _TcpStops(
        resent_by_client=resent,
        send_gaps=gaps,
        queued=queued,
        path_bytes=path_bytes,
        window_held=w_held,
        window_small=w[e.length[w] < path_bytes],
        window_big=w[e.length[w] >= path_bytes],
        pauses=s,
        head=np.minimum(e.ts[s] + int(hidden), e.ts[s] + e.dur[s]),
        client_seen=client_seen,
        # Seen downstream of the client, a stop of at least a retransmission
        # timeout (RTO_MIN_NS) with every byte acknowledged is a lost tail segment
        # the capture never saw, re-sent when the client's timer fired (the client
        # side shows the re-send): the loss's (the lab's 1% loss at the server:
        # one 207 ms stop, a third of the writes' time).
        timed_out=s[:0] if client_seen else s[e.dur[s] >= RTO_MIN_NS],
        cut=cut,
    )


@dataclass(frozen=True)
class _Waits:
    """Each call's wait for its reply, split (ns, per call).

    When the receiver's ACK of its last byte came before the reply, the bytes
    were crossing until then (a round trip, and a queue in the path beyond it)
    and the server worked from then on; without such an ACK (UDP, an ACK riding
    on the reply), the first round trip of the wait is the network's and the
    rest the server's.  A UDP call seen before a slower hop whose clock the
    replies came back on (CLOCK_CARRY): its bytes queued at the hop and crossed
    it until the hop's clock sent them on; then the round trip, then the
    server."""

    # the reply's first and last packets; an unanswered call is outstanding until
    # the next capture gap (its reply was in it) or the end of the activity, at
    # most UNANSWERED_HORIZON_NS after its last send (given up: pace.call_ends_ns)
    rf: np.ndarray
    rl: np.ndarray
    clock: float  # bit/s of the hop the replies' clock shows (_reply_clock; NaN: none)
    left: np.ndarray  # when its bytes left that hop (its last packet without one)
    acked: np.ndarray  # bool: the receiver's ACK of its last byte came before the reply
    rt_from: np.ndarray  # the round trip from (the queue in the path before)
    wait_from: np.ndarray  # the server from
    # the loss from (a call some of whose bytes TCP re-sent: _loss_delays; else rt_from)
    loss_from: np.ndarray


def _waits(
    c: _PairCalls,
    e: _Events,
    tcp: _TcpStops,
    gap_starts: np.ndarray,
    end: int,
    visible: float,
    point: str,
) -> _Waits:
    nxt = np.searchsorted(gap_starts, c.cs, side="left")
    open_end = np.minimum(np.r_[gap_starts, end][nxt], c.le + UNANSWERED_HORIZON_NS)
    rf = np.where(c.answered, c.rf, np.maximum(open_end, c.le))
    rl = np.where(c.answered, c.rl, rf)
    clock = _reply_clock(c) if point != "server" else math.nan
    left = c.le.copy()
    if clock > 0:
        left = np.clip(_hop_departures(c, clock), c.le, np.maximum(rf - int(visible), c.le))
    acked = (c.acked > c.le) & (c.acked < rf) & ~_ack_delayable(c, rf)
    rt_from = np.where(acked, np.maximum(c.acked - int(visible), c.le), left)
    wait_from = np.where(acked, c.acked, np.minimum(left + int(visible), rf))
    resent = _resent_after_ack(c, e.ts, e.conn, tcp.resent_by_client, rf, acked)
    held = resent > 0
    acked &= ~held
    rt_from = np.where(held, resent, rt_from)
    wait_from = np.where(held, np.minimum(resent + int(visible), rf), wait_from)
    return _Waits(
        rf=rf,
        rl=rl,
        clock=clock,
        left=left,
        acked=acked,
        rt_from=rt_from,
        wait_from=wait_from,
        loss_from=_loss_delays(c, e.ts, e.conn, tcp.resent_by_client, rt_from),
    )


def _resent_after_ack(
    c: _PairCalls,
    ts: np.ndarray,
    ev_conn: np.ndarray,
    retx: np.ndarray,
    rf: np.ndarray,
    acked: np.ndarray,
) -> np.ndarray:
    """Per call, the client's last re-send on its connection after the ACK taken
    for its own (``acked``) and before its reply (0: none).  That ACK reaches all
    of a call but its last segment (a receiver may hold the ACK of a short last
    segment: the parser's ``acked_ns``); a re-send after it, the reply right
    behind the re-send, is that last segment lost: the server had not the call
    until the re-send came (lab, nfs-rs through 1.5% loss: a 376-byte tail lost,
    the client silent for its retransmission timeout of 207 ms, counted as the
    server's time; the server's busy time, a floor of every other removal, then
    held 515 ms of a write activity whose loss-free twin took 420).  Not a
    re-send after the ACK of the next call of its connection up to that call's
    last segment: that ACK covered all of this call (a slow server answering
    one WRITE at a time, 40 ms after their bytes came: the re-sends of later
    calls' segments before each reply were every call's lost tail, the server's
    time the loss's)."""
    out = np.zeros(len(c.cs), "int64")
    if not len(retx) or not acked.any():
        return out
    for conn in np.unique(ev_conn[retx]).tolist():
        r = np.sort(ts[retx][ev_conn[retx] == conn])
        every = np.flatnonzero(c.conn == conn)
        every = every[np.argsort(c.cs[every], kind="stable")]
        # per call, when a later call's ACK covered all of it (the next call's)
        covered = np.r_[c.acked[every][1:], -1]
        covered = np.where(covered >= 0, covered, np.iinfo("int64").max)
        whole = np.full(len(c.cs), np.iinfo("int64").max)
        whole[every] = covered
        mine = np.flatnonzero((c.conn == conn) & acked)
        last = np.searchsorted(r, rf[mine], side="left") - 1  # the last re-send before the reply
        ok = last >= 0
        when = np.where(ok, r[np.maximum(last, 0)], 0)
        out[mine] = np.where(ok & (when > c.acked[mine]) & (when < whole[mine]), when, 0)
    return out


def _ack_delayable(c: _PairCalls, rf: np.ndarray) -> np.ndarray:
    """Calls whose ACK may be the receiver's delayed ACK rather than a sign of a
    queue: a call of one segment (SEGMENT_BYTES at most, sent once) sent when
    every earlier call of its connection had its reply, so that none of the
    client's bytes were ahead of it in the path.  A receiver acknowledges a lone
    segment only when its delayed-ACK timer fires (40 ms and more on Linux,
    RFC 1122: up to 500 ms) or with its reply; a late ACK of it shows the
    receiver waiting, not the call's bytes queued (lab: nfs-rs's COMMITs to a
    server flushing 500 ms, each ACKed 43 ms after it was sent, counted as 172 ms
    of moving data: the removal of the COMMITs' delay predicted 6.0x where its
    twin measured 9.5x)."""
    small = (c.call_bytes > 0) & (c.call_bytes <= SEGMENT_BYTES) & (c.n_calls == 1) & ~c.udp
    out = np.zeros(len(c.cs), bool)
    if not small.any():
        return out
    reply = np.where(c.answered, rf, np.iinfo(np.int64).max)
    for k in np.unique(c.conn[small]).tolist():
        mine = np.flatnonzero(c.conn == k)
        mine = mine[np.argsort(c.cs[mine], kind="stable")]
        # the latest reply of the calls sent before each (none: the start)
        before = np.r_[np.iinfo(np.int64).min, np.maximum.accumulate(reply[mine])[:-1]]
        out[mine] = small[mine] & (before <= c.cs[mine])
    return out


@dataclass(frozen=True)
class _Pair:
    """What the rules read of one pair: its calls and events, the span of its
    write activity, the round trip (rtt; the part a call->reply time holds at
    the capture point, ``visible``, and the rest, ``hidden``), its capture gaps
    (_capture_gaps), TCP stops and waits."""

    c: _PairCalls
    e: _Events
    start: int
    end: int
    rtt: float
    hidden: float
    gap_starts: np.ndarray
    gap_ends: np.ndarray
    gap_words: list[str]
    tcp: _TcpStops
    waits: _Waits
    words: Callable[[int], str]  # a call's (_call_words)


# ---- the rules: each cause's intervals, from one kind of evidence ------------------------


def _capture_gap(p: _Pair) -> tuple[_Block, ...]:
    return (_block(p.gap_starts, p.gap_ends, lambda i: p.gap_words[i]),)


def _jukebox(p: _Pair) -> tuple[_Block, ...]:
    """From a call the server answered JUKEBOX/DELAY to its retry (the same
    operation on the same file; else the end of the activity)."""
    c = p.c
    delayed = np.flatnonzero((c.status == SERVER_DELAY_STATUS) & c.answered)
    if not len(delayed):
        return ()
    retry = np.full(len(delayed), p.end, "int64")
    for k, i in enumerate(delayed):
        later = np.flatnonzero((c.cs > c.rl[i]) & (c.op == c.op[i]) & (c.fh == c.fh[i]))
        if len(later):
            retry[k] = c.cs[later].min()
    words = lambda k: (  # noqa: E731
        f"{p.words(int(delayed[k]))} answered JUKEBOX/DELAY; retried after "
        f"{seconds_text(retry[k] - c.rl[delayed[k]])}"
    )
    return (_block(c.cs[delayed], retry, words, c.frame_first[delayed]),)


def _tcp_silence(p: _Pair) -> tuple[_Block, ...]:
    """A TCP sender silent before re-sending bytes; the client filling a window
    a loss's hole held shut; a client's stop of a retransmission timeout seen
    downstream of it."""
    e, tcp = p.e, p.tcp
    return (
        _event_block(
            e,
            e.of("tcp_resend_gap"),
            lambda j: (
                f"TCP silent {seconds_text(e.dur[j])}, then bytes of "
                f"{'a call' if e.from_client[j] else 'a reply'} re-sent (frame {e.frame[j]})"
            ),
        ),
        # A window filled while a lost segment's hole held the receiver's ACK back
        # (a re-send of the client's bytes on the connection within a loaded round
        # trip of the stall) was the loss's: the receiver kept the bytes after the
        # hole, unread, until the re-send came (lab 0.5% loss: 7.3 ms of 78 ms).
        _event_block(
            e,
            tcp.window_held,
            lambda j: (
                f"the client filled the server's TCP window of {e.length[j]:,} bytes while a "
                f"lost segment's hole held its ACKs back (frame {e.frame[j]})"
            ),
        ),
        _event_block(
            e,
            tcp.timed_out,
            lambda j: (
                f"the client stopped part-way through a call for {seconds_text(e.dur[j])} with "
                "every byte acknowledged, a retransmission timeout: bytes lost before the "
                f"capture point, re-sent (frame {e.frame[j]})"
            ),
        ),
        _event_block(
            e,
            tcp.cut,
            lambda j: (
                f"the client stopped part-way through a call for {seconds_text(e.dur[j])} "
                f"with every byte acknowledged, {CUT_WINDOW_EVIDENCE} (frame {e.frame[j]})"
            ),
        ),
    )


def _small_window(p: _Pair) -> tuple[_Block, ...]:
    """A full TCP window smaller than the path holds in a round trip."""
    e = p.e
    words = lambda j: (  # noqa: E731
        f"the client filled the server's TCP window of {e.length[j]:,} bytes, less "
        f"than the path holds in a round trip (frame {e.frame[j]})"
    )
    return (_event_block(e, p.tcp.window_small, words),)


def _slow_reader(p: _Pair) -> tuple[_Block, ...]:
    """A full TCP window as big as the path holds or more, or one closed to zero:
    the server read the calls more slowly than they came (its own doing)."""
    e = p.e
    words = lambda j: (  # noqa: E731
        f"the client filled the server's TCP window of {e.length[j]:,} bytes: the server "
        f"read the calls more slowly than they came (frame {e.frame[j]})"
    )
    return (
        _event_block(e, p.tcp.window_big, words),
        _event_block(
            e,
            e.of("tcp_zero_window", False),
            "the server advertised a zero TCP window: it stopped reading the calls",
        ),
    )


# Seen from the server (or between), a client whose bytes stop part-way through a
# call with all of them acknowledged may be waiting for those ACKs to reach it (a
# slow hop or a queue on the way back, a rate limit pacing its segments) as well as
# pausing: its sending (``transfer``), not the client's idleness nor a round trip;
# a capture at the client tells them apart.  At the client, its ACKs had come: the
# pause is its own (``_client_pause``), after the ACK's travel the capture cannot
# see (``_ack_wait``).


def _client_pause(p: _Pair) -> tuple[_Block, ...]:
    tcp = p.tcp
    if not tcp.client_seen:
        return ()
    label = "the client paused part-way through a call, its data acknowledged"
    return (_stop_block(p, tcp.pauses, label, starts=tcp.head),)


def _ack_wait(p: _Pair) -> tuple[_Block, ...]:
    """A TCP sender waiting for ACKs part-way through a call with fewer bytes in
    flight than the path holds (slow start, a small window); the ACK of a
    client's pause travelling back to it."""
    e, tcp = p.e, p.tcp
    travel = (
        (_stop_block(p, tcp.pauses, "the ACK travelling back to the client", ends=tcp.head),)
        if tcp.client_seen
        else ()
    )
    words = lambda j: (  # noqa: E731
        f"{'client' if e.from_client[j] else 'server'} waited for ACKs with "
        f"{e.length[j]:,} bytes in flight (frame {e.frame[j]})"
    )
    return (*travel, _stop_block(p, tcp.send_gaps[~tcp.queued], words))


def _stop_block(
    p: _Pair,
    idx: np.ndarray,
    text: str | Callable[[int], str],
    ends: np.ndarray | None = None,
    starts: np.ndarray | None = None,
) -> _Block:
    """``_event_block`` of a connection's stops, where the pair's calls went over
    several connections (nconnect) only where none of its other connections
    moved data: while one waits for its ACKs another sends, and the pair's data
    is moving (``_moving``)."""
    e = p.e
    conns = np.unique(p.c.conn[p.c.op == WRITE_OP])
    mine = idx[e.from_client[idx]] if len(idx) else idx
    if len(conns) < 2 or not len(mine):
        return _event_block(e, idx, text, ends, starts)
    a = e.ts[idx] if starts is None else starts
    b = e.ts[idx] + e.dur[idx] if ends is None else ends
    if isinstance(text, str):
        label = text
        words: Callable[[int], str] = lambda j: f"{label} (frame {e.frame[j]})"  # noqa: E731
    else:
        words = text
    moving = _moving(p)
    out_s, out_e, out_j = [], [], []
    for k in range(len(idx)):
        j = int(idx[k])
        if not e.from_client[j]:
            pieces = [(int(a[k]), int(b[k]))]
        else:
            os_, oe = moving.get(int(e.conn[j]), (np.array([], "int64"),) * 2)
            pieces = _minus(int(a[k]), int(b[k]), os_, oe)
        for lo, hi in pieces:
            out_s.append(lo)
            out_e.append(hi)
            out_j.append(j)
    which = np.array(out_j, "int64")
    return _block(
        np.array(out_s, "int64"),
        np.array(out_e, "int64"),
        lambda i: words(int(which[i])),
        e.frame[which] if len(which) else which,
    )


def _moving(p: _Pair) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per connection of the pair's client, when its other connections moved
    data: their calls being sent less their own ACK waits and pauses (sorted,
    disjoint intervals)."""
    c, e, tcp = p.c, p.e, p.tcp
    stops = np.r_[tcp.send_gaps[~tcp.queued], tcp.pauses]
    stops = stops[e.from_client[stops]] if len(stops) else stops
    own: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for k in np.unique(c.conn[c.op == WRITE_OP]).tolist():
        m = c.conn == k
        s_, e_ = _union(np.r_[c.cs[m], c.ls[m]], np.r_[c.ce[m], c.le[m]])
        g = stops[e.conn[stops] == k]
        gs, ge = _union(e.ts[g], e.ts[g] + e.dur[g])
        pieces = [piece for lo, hi in zip(s_.tolist(), e_.tolist(), strict=True)
                  for piece in _minus(lo, hi, gs, ge)]  # fmt: skip
        arr = np.array(pieces, "int64").reshape(-1, 2)
        own[k] = (arr[:, 0], arr[:, 1])
    out = {}
    for k in own:
        others = [own[j] for j in own if j != k]
        out[k] = _union(
            np.concatenate([o[0] for o in others]), np.concatenate([o[1] for o in others])
        )
    return out


def _union(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals [s, e) as sorted, disjoint intervals."""
    keep = e > s
    s, e = s[keep], e[keep]
    if not len(s):
        return s.astype("int64"), e.astype("int64")
    order = np.argsort(s, kind="stable")
    s, e = s[order], np.maximum.accumulate(e[order])
    first = np.flatnonzero(np.r_[True, s[1:] > e[:-1]])
    return s[first], np.maximum.reduceat(e, first)


def _minus(a: int, b: int, os_: np.ndarray, oe: np.ndarray) -> list[tuple[int, int]]:
    """The parts of [a, b) outside the sorted, disjoint intervals [os_, oe)."""
    out = []
    k = int(np.searchsorted(oe, a, side="right"))
    cur = a
    while k < len(os_) and os_[k] < b:
        if os_[k] > cur:
            out.append((cur, int(os_[k])))
        cur = max(cur, int(oe[k]))
        k += 1
    if cur < b:
        out.append((cur, b))
    return out


def _sending(p: _Pair) -> tuple[_Block, ...]:
    """Bytes of a call, of its re-send or of a reply crossing the capture point."""
    c, w, e = p.c, p.words, p.e
    resent = np.flatnonzero(c.n_calls > 1)
    words = lambda j: (  # noqa: E731
        f"sending calls the snaplen left unread ({e.length[j]:,} bytes, frame {e.frame[j]})"
    )
    return (
        _block(c.cs, c.ce, lambda i: f"sending {w(i)}", c.frame_first),
        _block(c.ls[resent], c.le[resent], lambda k: f"re-sending {w(resent[k])}"),
        _block(p.waits.rf, p.waits.rl, lambda i: f"reply to {w(i)}", c.reply_frame),
        _event_block(e, _unread(e), words),
    )


def _queued(p: _Pair) -> tuple[_Block, ...]:
    """Bytes sitting in a queue in the path: ACK waits with more in flight than
    the path holds, a UDP call queued at a slower hop (``_Waits``), a call's
    last bytes acknowledged later than a round trip."""
    c, e, tcp, wt, w = p.c, p.e, p.tcp, p.waits, p.words
    out = [
        _event_block(
            e,
            tcp.send_gaps[tcp.queued],
            lambda j: (
                f"{'client' if e.from_client[j] else 'server'} waited for ACKs with "
                f"{e.length[j]:,} bytes in flight, more than the path holds in a round trip: "
                f"queued at a bottleneck (frame {e.frame[j]})"
            ),
        )
    ]
    if wt.clock > 0:
        h = np.flatnonzero(wt.left > c.le)
        out.append(
            _block(
                c.le[h],
                wt.left[h],
                lambda k: (
                    f"{w(h[k])}: its bytes queued in the path, at a hop of "
                    f"{wt.clock / 1e6:,.1f} Mbit/s whose clock the replies came back on "
                    f"(left it {seconds_text(wt.left[h[k]] - c.le[h[k]])} after they were sent)"
                ),
                c.frame_first[h],
            )
        )
    q = np.flatnonzero(wt.acked)
    out.append(
        _block(
            c.le[q],
            wt.rt_from[q],
            lambda k: (
                f"{w(q.item(k))}: its last bytes queued in the path "
                f"(ACKed {seconds_text(c.acked.item(q.item(k)) - c.le.item(q.item(k)))} after "
                "they were sent)"
            ),
            c.frame_first[q],
        )
    )
    return tuple(out)


def _blocked(p: _Pair) -> tuple[_Block, ...]:
    """Behind a lost segment (a TCP retransmission of the client's bytes) a
    call's last bytes wait for the re-send to be acknowledged (the receiver holds
    them: head-of-line blocking) longer than a call's usually do: that excess is
    the loss's (_loss_delays), where no data moves."""
    c, wt = p.c, p.waits
    hit = np.flatnonzero(wt.loss_from < wt.rt_from)
    words = lambda k: (  # noqa: E731
        f"{p.words(int(hit[k]))}: bytes of it re-sent by TCP; its last bytes were acknowledged "
        f"{seconds_text(wt.rt_from[hit[k]] - wt.loss_from[hit[k]])} later than usual"
    )
    return (_block(wt.loss_from[hit], wt.rt_from[hit], words, c.frame_first[hit]),)


def _resend_timer(p: _Pair) -> tuple[_Block, ...]:
    """An RPC waiting between its first send and its re-send; seen from the
    server, a UDP call whose fragments did not all arrive is lost on the way:
    the client waited for its re-send timer until its next call."""
    c, e = p.c, p.e
    resent = np.flatnonzero(c.n_calls > 1)
    words = lambda k: (  # noqa: E731
        f"{p.words(int(resent[k]))} sent {c.n_calls[resent[k]]} times: waited "
        f"{seconds_text(c.ls[resent[k]] - c.cs[resent[k]])} to re-send"
    )
    out = [_block(c.cs[resent], c.ls[resent], words, c.frame_first[resent])]
    lost = e.of("ip_datagram_incomplete", True)
    # but one whose call (kept from its first fragment) was answered, sent once,
    # reached the server whole: the capture, not the network, missed fragments
    whole = c.frame_first[c.answered & (c.n_calls == 1)]
    lost = lost[~np.isin(e.frame[lost], whole)]
    if len(lost):
        order = np.sort(c.cs)
        until = np.r_[order, p.end][np.searchsorted(order, e.ts[lost], side="right")]
        out.append(
            _event_block(
                e,
                lost,
                lambda j: (
                    f"a datagram from the client lost fragments (frame {e.frame[j]}): "
                    "the call never arrived; the client waited to re-send"
                ),
                ends=until,
            )
        )
    return tuple(out)


def _flush(p: _Pair) -> tuple[_Block, ...]:
    """A COMMIT's flush: from when the server had it (its wait's first round
    trip is the network's, as for any call) to its reply."""
    c, wt = p.c, p.waits
    commits = np.flatnonzero(c.op == COMMIT_OP)
    words = lambda k: (  # noqa: E731
        f"{p.words(int(commits[k]))}: the server flushed for "
        f"{seconds_text(wt.rl[commits[k]] - wt.wait_from[commits[k]])} (in flight "
        f"{seconds_text(wt.rl[commits[k]] - c.cs[commits[k]])})"
    )
    return (_block(wt.wait_from[commits], wt.rl[commits], words, c.frame_first[commits]),)


def _service(p: _Pair) -> tuple[_Block, ...]:
    """A call's wait for its reply beyond the round trip; the server pausing
    part-way through a reply."""
    wt = p.waits
    words = lambda i: (  # noqa: E731
        f"{p.words(i)}: the server took {seconds_text(wt.rf.item(i) - wt.wait_from.item(i))} "
        "to answer"
    )
    return (
        _block(wt.wait_from, wt.rf, words, p.c.frame_first),
        _event_block(
            p.e, p.e.of("tcp_send_idle", False), "the server paused part-way through a reply"
        ),
    )


def _reply_trip(p: _Pair) -> tuple[_Block, ...]:
    """The round trip of a call's wait for its reply (up to the ACK of its last
    byte where that came first)."""
    wt = p.waits
    rtt = seconds_text(p.rtt)
    return (
        _block(
            wt.rt_from,
            np.where(wt.acked, p.c.acked, wt.wait_from),
            lambda i: f"{p.words(i)}: the round trip ({rtt})",
            p.c.frame_first,
        ),
    )


_Rule = Callable[[_Pair], tuple[_Block, ...]]

# The precedence: (cause, rule) in the order they claim time.  Each instant of a
# pair's write activity goes to the first rule here whose intervals cover it; a
# cause can stand at several ranks, one per kind of evidence.  An instant no
# rule claims, with nothing outstanding, is the client's (``client_idle``; within
# the round trip the capture point does not see after a reply, ``round_trip``),
# else ``unknown``.  Why this order:
PRECEDENCE: tuple[tuple[str, _Rule], ...] = (
    # nothing seen can be attributed: the capture, not the traffic, decides
    ("capture_gap", _capture_gap),
    # the server said explicitly to wait
    ("server_busy", _jukebox),
    # the stream is blocked: data after the loss cannot be delivered
    ("loss_recovery", _tcp_silence),
    # the sender may not send: what it has queued waits
    ("window", _small_window),
    ("server", _slow_reader),
    # stops inside a call's transmission: they override the call's transfer
    ("client_idle", _client_pause),
    ("round_trip", _ack_wait),
    # while data moves the time is not lost to anything slower that runs beside
    # it (a COMMIT, a server, a re-send timer of another call)
    ("transfer", _sending),
    ("transfer", _queued),
    # what the calls in flight wait on, the most specific first; a COMMIT's flush
    # is a server's work but the study's commit stalls are their own cause
    ("loss_recovery", _blocked),
    ("loss_recovery", _resend_timer),
    ("commit", _flush),
    ("server", _service),
    ("round_trip", _reply_trip),
)


# ---- one pair's budget-------------------------------------------------------------------


def _path_inputs(p: _Pair) -> tuple[CallTimes, Stops]:
    """The calls' times and the transport's stops, as the critical path reads
    them (critical_path.py)."""
    c, e, tcp, wt = p.c, p.e, p.tcp, p.waits
    seen = tcp.pauses if tcp.client_seen else tcp.pauses[:0]
    head = tcp.head if tcp.client_seen else tcp.head[:0]
    stop_parts = []
    for idx, cause, s_, e_ in (
        (e.of("tcp_resend_gap", True), "loss_recovery", None, None),
        (tcp.timed_out, "loss_recovery", None, None),
        (tcp.cut, "loss_recovery", None, None),
        (tcp.window_held, "loss_recovery", None, None),
        (tcp.window_small, "window", None, None),
        (tcp.window_big, "server", None, None),
        (seen, "round_trip", None, head),
        (seen, "client_idle", head, None),
        (tcp.send_gaps[~tcp.queued], "round_trip", None, None),
    ):
        a = e.ts[idx] if s_ is None else s_
        b = e.ts[idx] + e.dur[idx] if e_ is None else e_
        conn = e.conn[idx] if len(e.conn) else np.zeros(len(idx), "int64")
        also = np.full(len(idx), -1, "int64")
        if cause == "round_trip" and e_ is None:  # ACK waits of a window a loss cut
            retx = tcp.resent_by_client
            made = _regrowing(idx, e.ts, e.length, e.conn, retx, _loaded_rtt(c, p.rtt))
            made |= np.isin(conn, _loss_limited(retx, e.conn, c, p.rtt))
            also[made] = path_code("loss_recovery")
        stop_parts.append((a, b, np.full(len(idx), path_code(cause)), conn, also))
    stops = Stops(*(np.concatenate([sp[k] for sp in stop_parts]) for k in range(5)))
    wait_cause = np.full(len(c.cs), path_code("server"), "int64")
    wait_cause[c.op == COMMIT_OP] = path_code("commit")
    wait_cause[(c.status == SERVER_DELAY_STATUS) & c.answered] = path_code("server_busy")
    times = CallTimes(
        cs=c.cs,
        tx_from=c.ls,
        tx_end=c.le,
        loss_from=wt.loss_from,
        acked=np.where(wt.acked, c.acked, -1),
        rt_from=wt.rt_from,
        wait_from=wt.wait_from,
        rf=wt.rf,
        rl=wt.rl,
        wait_cause=wait_cause,
        conn=c.conn,
    )
    return times, stops


@dataclass(frozen=True)
class _Pieces:
    """The write activity cut at every interval's bounds into elementary pieces
    [lo, hi), each labelled with the first layer covering it (a position in
    ``PRECEDENCE``) or one of IDLE, HIDDEN, UNKNOWN after them."""

    lo: np.ndarray
    hi: np.ndarray
    label: np.ndarray
    covers: list[_Cover]


def _pieces(p: _Pair, layers: list[_Layer]) -> _Pieces:
    bounds = [np.array([p.start, p.end], "int64")]
    for lay in layers:
        s_, e_, *_ = lay.arrays
        bounds += [s_, e_]
    bounds += [p.c.cs, p.waits.rl]
    t = sorted_unique(np.concatenate(bounds))
    t = t[(t >= p.start) & (t <= p.end)]
    lo, hi = t[:-1], t[1:]
    mids = lo + (hi - lo) // 2  # pieces are at least 1 ns long
    covers = [_Cover(lay, mids) for lay in layers]
    label = np.full(len(mids), -1, "int64")
    for k, cov in enumerate(covers):
        label[(label < 0) & cov.covered] = k
    # nothing outstanding: client idle, after the round trip the capture point does not see
    cs_sorted = p.c.cs[np.argsort(p.c.cs, kind="stable")]
    ends_sorted = np.sort(p.waits.rl)
    out = (
        np.searchsorted(cs_sorted, mids, "right") - np.searchsorted(ends_sorted, mids, "right")
    ) == 0
    last_end = np.concatenate(([p.start], ends_sorted))[np.searchsorted(ends_sorted, mids, "right")]
    idle = (label < 0) & out
    idle_label, hidden_label, unknown_label = len(layers), len(layers) + 1, len(layers) + 2
    label[idle] = np.where(mids[idle] - last_end[idle] < p.hidden, hidden_label, idle_label)
    label[label < 0] = unknown_label
    return _Pieces(lo, hi, label, covers)


# What an instant no rule claims is (after the layers, in this order), and its words.
_UNCLAIMED = (
    ("client_idle", "nothing outstanding: the client sent nothing"),
    ("round_trip", "a reply and the next call travelling (round trip not seen here)"),
    ("unknown", "no evidence"),
)


def _intervals(
    pieces: _Pieces, causes: np.ndarray, client: str, server: str
) -> dict[str, np.ndarray]:
    """Runs of pieces of the same cause merged into intervals (vectorised: a
    capture has tens of thousands), each with the evidence of its longest piece
    (``INTERVAL_COLUMNS``)."""
    lo, hi, label = pieces.lo, pieces.hi, pieces.label
    n = len(lo)
    change = np.concatenate(([True], causes[1:] != causes[:-1]))  # (not np.r_: a pair each)
    runs = np.flatnonzero(change)
    run_end = np.append(runs[1:], n)
    run_id = np.cumsum(change) - 1
    # each run's longest piece (the first of the longest): the runs are
    # consecutive, so a maximum per run and a search, not a sort of the pieces
    length = hi - lo
    if n:
        most = np.maximum.reduceat(length, runs)[run_id]
        at = np.flatnonzero(length == most)
        longest = at[np.concatenate(([True], run_id[at][1:] != run_id[at][:-1]))]
    else:
        longest = np.zeros(0, "int64")
    # each run's words, a layer at a time (its covering intervals looked up at once)
    texts = np.empty(len(longest), dtype=object)
    frames_out = np.full(len(longest), -1, "int64")
    layers = len(pieces.covers)
    k_of = label[longest]
    for k in np.unique(k_of).tolist():
        at = np.flatnonzero(k_of == k)
        if k >= layers:
            texts[at] = _UNCLAIMED[k - layers][1]
            continue
        cov = pieces.covers[k]
        piece = longest[at]
        j = cov.which(lo[piece] + (hi[piece] - lo[piece]) // 2)
        frames_out[at] = cov.frames[j]
        words = cov.words
        pairs = zip(cov.block[j].tolist(), cov.within[j].tolist(), strict=True)
        texts[at] = np.fromiter((words[b](w) for b, w in pairs), dtype=object, count=len(at))
    s0, e0 = lo[runs], hi[run_end - 1]
    return {
        "client": np.full(len(runs), client, dtype=object),
        "server": np.full(len(runs), server, dtype=object),
        "start_ns": s0,
        "end_ns": e0,
        "duration_ns": e0 - s0,
        "cause": causes[runs],
        "evidence": texts,
        "frame": frames_out,
    }


# Seen downstream, the round trip a reply and the client's next call take
# under load: the LOADED_GAP_SHARE-th shortest of the times from a WRITE's
# reply to the next WRITE with nothing outstanding, when it is longer than the
# quiet round trip (the handshake's, or a UDP client's one-at-a-time calls) by at
# most LOADED_EXTRA_NS: a queue on the way (the lab's user-space bridge under a
# 500 Mbit/s copy: 0.3 ms where its handshake took 0.1), not a pause -- which
# only a capture at the client can tell from the client's own quickest turnaround
# (the verdict's words say so).  Longer, the gaps are the client's.
LOADED_GAP_SHARE = 10
LOADED_EXTRA_NS = 1_000_000


def _visible_rtt(options: BudgetOptions) -> float:
    """The part of the round trip a call->reply holds at the capture point (ns)."""
    rtt = options.rtt_ns if math.isfinite(options.rtt_ns) else 0.0
    return options.rtt_visible_ns if math.isfinite(options.rtt_visible_ns) else rtt


def _loaded_hidden(c: _PairCalls, hidden: float) -> float:
    """The hidden round trip of a capture downstream of the client, as loaded
    by the writes (see LOADED_GAP_SHARE)."""
    w = np.flatnonzero((c.op == WRITE_OP) & c.answered)
    if len(w) < STEADY_MIN_CALLS:
        return hidden
    w = w[np.argsort(c.cs[w], kind="stable")]
    last_reply = np.maximum.accumulate(c.rl[w])
    gaps = (c.cs[w][1:] - last_reply[:-1]).astype("float64")
    gaps = gaps[gaps > 0]
    if len(gaps) < STEADY_MIN_CALLS:
        return hidden
    loaded = float(np.percentile(gaps, LOADED_GAP_SHARE))
    return loaded if hidden < loaded <= hidden + LOADED_EXTRA_NS else hidden


def _loaded_rtt_ns(p: _Pair, options: BudgetOptions) -> float:
    """The pair's round trip as its hidden part grew under load (_loaded_hidden),
    NaN where it did not."""
    quiet_hidden = max(p.rtt - _visible_rtt(options), 0.0)
    return p.rtt - quiet_hidden + p.hidden if p.hidden > quiet_hidden + 1 else math.nan


def _pair(
    c: _PairCalls,
    e: _Events,
    orphans: np.ndarray,
    client_xids: np.ndarray,
    client: str,
    start: int,
    end: int,
    options: BudgetOptions,
) -> _Pair:
    """The evidence of a pair's write activity from ``start`` to ``end``."""
    rtt = options.rtt_ns if math.isfinite(options.rtt_ns) else 0.0
    visible = _visible_rtt(options)
    hidden = max(rtt - visible, 0.0)
    if options.capture_point in ("server", "between"):
        hidden = _loaded_hidden(c, hidden)
    activity = [c.cs, c.ce, c.ls, c.le, c.rf[c.answered], c.rl[c.answered], orphans]
    activity += [e.ts, e.ts + e.dur]
    gap_s, gap_e, gap_words = _capture_gaps(
        c, orphans, e.ts[e.of("tcp_hole")], np.concatenate(activity), start, end, client_xids
    )
    tcp = _tcp_stops(c, e, rtt, hidden, options.capture_point)
    waits = _waits(c, e, tcp, gap_s, end, visible, options.capture_point)
    return _Pair(c, e, start, end, rtt, hidden, gap_s, gap_e, gap_words, tcp, waits, _call_words(c))


def _pair_row(
    p: _Pair,
    by_label: np.ndarray,
    cause_of: np.ndarray,
    times: CallTimes,
    stops: Stops,
    path: CriticalPath,
    options: BudgetOptions,
    unseen: tuple[int, int] = (0, 0),
) -> dict[str, Any]:
    """The pair's row of ``PAIR_COLUMNS`` but client and server: ``by_label``
    the time each label of the pieces took (``cause_of`` its cause), ``unseen``
    the WRITE replies without their calls in its activity and their bytes, ``path``
    the critical path (critical_path.py)."""
    c, start, end = p.c, p.start, p.end
    is_write = c.op == WRITE_OP
    row: dict[str, Any] = {f"{cause}_ns": 0 for cause in CAUSES}
    for k, ns in enumerate(by_label):
        row[f"{cause_of[k]}_ns"] += int(ns)
    row["queued_ns"] = int(
        sum(by_label[k] for k, (_, rule) in enumerate(PRECEDENCE) if rule is _queued)
    )
    for cause, ns in path.ns.items():
        row[f"{cause}_path_ns"] = ns
        row[f"{cause}_also_ns"] = path.also_ns[cause]
    row["round_trip_also_count"] = path.also_count["round_trip"]
    row["ack_chain_ns"], row["ack_chain_calls"] = _ack_chain(c, p.waits.acked)
    segments = c.call_bytes.sum() / SEGMENT_BYTES
    resent_segments = len(p.tcp.resent_by_client)
    row["resent_segment_share"] = resent_segments / segments if segments > 0 else 0.0
    conns = len(np.unique(c.conn[is_write]))
    row["loss_bound_mbit_s"] = _loss_bound_bps(row["resent_segment_share"], p.rtt, conns) / 1e6
    row["slow_start_ns"] = _slow_start_ns(segments, p.rtt, conns) if (~c.udp).any() else 0
    mine, latency = call_totals(times, stops, np.flatnonzero(is_write))
    for cause, ns in mine.items():
        row[f"{cause}_calls_ns"] = ns
    row["write_latency_ns"] = latency
    row["max_outstanding"] = int(path.window)
    row["path_server_waits"] = path.server_waits
    nbytes = int(c.write_bytes.sum()) + unseen[1]
    peak = _peak_rate_bps(c, p.rtt)
    delivery = _delivery_rate_bps(c, p.rtt, options.capture_point)
    acked = _acked_rate(c) if options.capture_point != "server" else (math.nan, math.nan)
    sizes = np.where(c.count > 0, c.count, c.write_bytes)
    row.update(
        start_ns=start,
        end_ns=end,
        elapsed_ns=end - start,
        bytes=nbytes,
        mbit_s=nbytes * 8e3 / (end - start),
        writes=int(is_write.sum()),
        writes_unseen=unseen[0],
        send_mbit_s=_sending_rate_bps(c) / 1e6,
        send_spread=_sending_rate_spread(c),
        ack_mbit_s=acked[0] / 1e6,
        ack_spread=acked[1],
        peak_mbit_s=peak / 1e6,
        peak_floor_ns=int(nbytes * 8e9 / peak) if peak > 0 else 0,
        delivery_floor_ns=int(nbytes * 8e9 / delivery) if delivery > 0 else 0,
        stream_bound=_stream_bound(c, p.rtt),
        clock_mbit_s=p.waits.clock / 1e6,
        rtt_ns=options.rtt_ns,
        rtt_loaded_ns=_loaded_rtt_ns(p, options),
        capture_point=options.capture_point,
        transport="+".join(
            t for t, used in (("tcp", (~c.udp).any()), ("udp", c.udp.any())) if used
        ),
        # the call's count; where the snaplen cut it, the bytes its record carried
        # (writes.write_sizes' rule: a -s 160 UDP capture's WRITEs have sizes too)
        write_size=_most_common(sizes[is_write & (sizes > 0)]),
        server_work_ns=_union_ns(p.waits.wait_from[is_write], p.waits.rf[is_write], start, end),
    )
    return row


def _pair_budget(
    c: _PairCalls,
    e: _Events,
    orphans: np.ndarray,
    orphan_xids: np.ndarray,
    orphan_bytes: np.ndarray,
    client_xids: np.ndarray,
    client: str,
    server: str,
    options: BudgetOptions,
) -> tuple[dict[str, Any], dict[str, np.ndarray]] | None:
    """One pair's row of ``PAIR_COLUMNS`` and its intervals (``INTERVAL_COLUMNS``);
    None when it has no answered WRITE.  ``orphans``: the reply times of its
    replies without call, with their xids and the bytes they acknowledged."""
    is_write = c.op == WRITE_OP
    wc = is_write | (c.op == COMMIT_OP)
    done = wc & c.answered
    if not (is_write.any() and done.any()):
        return None
    start = int(c.cs[is_write].min())
    end = _activity_end(c, wc, done, orphans, orphan_xids)
    if end <= start:
        return None
    p = _pair(c, e, orphans, client_xids, client, start, end, options)
    layers = [_Layer(cause, rule(p)) for cause, rule in PRECEDENCE]
    times, stops = _path_inputs(p)
    last = int(np.flatnonzero(done)[np.argmax(c.rl[done])])
    u = _unread(p.e)
    path = critical_path(
        times,
        stops,
        (p.gap_starts, p.gap_ends),
        start,
        end,
        last,
        int(p.hidden),
        (p.e.ts[u], p.e.ts[u] + p.e.dur[u]),
    )
    pieces = _pieces(p, layers)
    cause_of = np.array([cause for cause, _ in PRECEDENCE] + [u for u, _ in _UNCLAIMED])
    by_label = np.bincount(
        pieces.label, weights=pieces.hi - pieces.lo, minlength=len(cause_of)
    ).astype("int64")
    # WRITEs whose calls the capture did not show (a snaplen that cut their
    # headers, a capture point that missed them) answered after the first
    # captured WRITE's reply: their bytes moved in the window too (those
    # answered before it may have been sent before the capture began)
    first = int(c.rl[is_write & c.answered].min()) if (is_write & c.answered).any() else end
    late = (orphans > first) & (orphans <= end) & (orphan_bytes > 0)
    unseen = (int(late.sum()), int(orphan_bytes[late].sum()))
    row = _pair_row(p, by_label, cause_of, times, stops, path, options, unseen)
    row.update(client=client, server=server)
    return row, _intervals(pieces, cause_of[pieces.label], client, server)


# A sender waits for the last call's ACK before its next call when at least this
# share of its calls do (nfs-rs over NFSv4.1 in the lab: all of them).
ACK_CLOCKED_SHARE = 0.9


def _ack_chain(c: _PairCalls, acked: np.ndarray) -> tuple[int, int]:
    """The time an ACK-clocked sender's chain of WRITEs needs whatever the server
    does (``ack_chain_ns``): per connection whose WRITEs start after the previous
    one's last byte was acknowledged, the sum of each WRITE's first packet to
    that ACK; the longest connection's, and how many WRITEs it holds."""
    best, calls = 0, 0
    writes = c.op == WRITE_OP
    for conn in np.unique(c.conn[writes]):
        mine = np.flatnonzero((c.conn == conn) & writes)
        mine = mine[np.argsort(c.cs[mine], kind="stable")]
        if len(mine) < XID_RUN_MIN:
            continue
        ack = np.where(acked[mine], c.acked[mine], -1)
        prev_ack = ack[:-1]
        waited = (prev_ack > 0) & (c.cs[mine][1:] >= prev_ack)
        if waited.mean() < ACK_CLOCKED_SHARE:
            continue
        chain = int((prev_ack[waited] - c.cs[mine][:-1][waited]).sum())
        if chain > best:
            best, calls = chain, int(waited.sum())
    return best, calls


# A connection that re-sends at least this share of its segments never lets its
# window grow back between losses (Mathis et al., CCR 1997: the rate of a
# loss-limited flow is about MSS/RTT * 1.22/sqrt(p)): every ACK wait of its
# window is the loss's as much as the round trip's.  Lab, the kernel client
# through 1% loss each way: 1.5% of its segments re-sent, 3-8 segments in flight
# at its ACK waits, 2.7x slower than without the loss; loss-free runs: none.
LOSS_LIMITED_SHARE = 0.002
# ... and at least this many (a short copy that lost a few segments in its slow
# start waited on slow start, not on a window the losses kept small).
LOSS_LIMITED_MIN = 20
# ... unless it moved its bytes faster than this many times the rate such a
# window keeps (Mathis's bound, MATHIS_C for Reno's halving; CUBIC, Linux's
# default, backs off to 0.7 of its window: about 2.4x that rate): then the
# losses did not set its pace and its ACK waits are the path's.  Lab: the
# kernel client through 1% loss (with 0-10 ms), 0.3-0.85x the bound, 2.7-25x
# slower than without the loss; nfs-rs through 5 ms and 1% loss 1.2x (1.27x
# slower); nfs-cp 64 KiB through 2 ms and 0.5% loss 4.6x the bound and 3%
# slower than its loss-free twin (1.46x predicted before, its ACK waits all the
# losses'), nfs-rs 1 MiB 3.3x (1.41x; 2.18x predicted before).
LOSS_LIMITED_OVER_BOUND = 2.5
SEGMENT_BYTES = 1448  # a full TCP segment of a 1500-byte path: counts segments from bytes
# An ACK wait of a loss-limited connection with less than this many times the
# bytes the path holds in a round trip (_path_bytes, at the pair's own rate) in
# flight is its window, not a queue in the path.  A window the losses limit swings
# between half and all of its peak, so its waits hold up to about twice the
# mean; a bottleneck's queue holds far more (lab, the kernel client through 1%
# loss and 5 ms: 0.5-2x at 97% of its waits' time, 18.7 Mbit/s where its
# loss-free twin ran 225 Mbit/s; rate limits of 40-60 Mbit/s, with 0.5% loss or
# none: more than 4x at every wait).
LOSS_WINDOW_SWING = 4.0


# Mathis et al. (CCR 1997): a TCP flow that loses a share p of its segments
# keeps a window of about MATHIS_C / sqrt(p) segments: it moves about
# SEGMENT_BYTES / RTT * MATHIS_C / sqrt(p) (periodic losses, an ACK per segment).
MATHIS_C = 1.22


def _loss_bound_bps(share: float, rtt: float, conns: int) -> float:
    """The rate (bit/s) ``conns`` TCP connections that re-sent ``share`` of their
    segments over a round trip of ``rtt`` ns can keep (NaN: no re-sends, no RTT)."""
    if not (share > 0 and rtt > 0 and conns > 0):
        return math.nan
    return conns * SEGMENT_BYTES * 8e9 / rtt * MATHIS_C / math.sqrt(share)


# TCP's initial window (RFC 6928; Linux's default): a window growing from it
# doubles each round trip in slow start.
INITIAL_WINDOW = 10


def _slow_start_ns(segments: float, rtt: float, conns: int) -> int:
    """The round trips a window starting at INITIAL_WINDOW and doubling each one
    needs to send ``segments`` over ``conns`` connections at once (0: none)."""
    if not (segments > 0 and rtt > 0 and conns > 0):
        return 0
    return int(rtt * math.log2(segments / conns / INITIAL_WINDOW + 1))


def _loss_limited(retx: np.ndarray, conn: np.ndarray, c: _PairCalls, rtt: float) -> np.ndarray:
    """The connections of the pair that re-sent at least LOSS_LIMITED_SHARE of
    the segments its calls took (and LOSS_LIMITED_MIN), and moved their calls'
    bytes no faster than LOSS_LIMITED_OVER_BOUND times what a window keeps at
    that share over a round trip of ``rtt`` (Mathis)."""
    if not len(retx):
        return np.array([], "int64")
    out = []
    for k in np.unique(conn[retx]):
        mine = c.conn == k
        nbytes = float(c.call_bytes[mine].sum())
        segments = nbytes / SEGMENT_BYTES
        resent = int((conn[retx] == k).sum())
        if resent < max(LOSS_LIMITED_SHARE * segments, LOSS_LIMITED_MIN):
            continue
        span = float(c.rl[mine].max() - c.cs[mine].min())
        bound = _loss_bound_bps(resent / segments, rtt, 1)
        fast = span > 0 and nbytes * 8e9 / span > LOSS_LIMITED_OVER_BOUND * bound
        if fast and math.isfinite(bound):
            continue  # faster than the losses let a window run: they did not set its pace
        out.append(int(k))
    return np.array(out, "int64")


def _regrowing(
    gaps: np.ndarray,
    ts: np.ndarray,
    length: np.ndarray,
    conn: np.ndarray,
    retx: np.ndarray,
    loaded_ns: float,
) -> np.ndarray:
    """Which ACK waits (events ``gaps``) a loss made: those of the loaded round
    trip before a re-sent segment on their connection (the hole held the ACKs
    back: the lost segment left about that long before the sender learnt of
    it), and those after it while the window the loss cut regrew (fewer bytes in
    flight than the connection's usual, its 90th percentile, until the first
    wait with the usual again)."""
    out = np.zeros(len(gaps), bool)
    if not len(retx) or not len(gaps):
        return out
    for k in np.unique(conn[gaps]):
        mine = np.flatnonzero(conn[gaps] == k)
        mine = mine[np.argsort(ts[gaps][mine], kind="stable")]
        r = np.sort(ts[retx][conn[retx] == k])
        if not len(r):
            continue
        nxt = np.searchsorted(r, ts[gaps][mine], side="left")
        ahead = nxt < len(r)
        out[mine[ahead]] = r[nxt[ahead]] - ts[gaps][mine[ahead]] <= loaded_ns
        flight = length[gaps][mine]
        usual = np.percentile(flight[flight >= 0], 90) if (flight >= 0).any() else 0
        t = ts[gaps][mine]
        last_loss = np.searchsorted(r, t, side="right") - 1
        regrown = -1
        for n, g in enumerate(mine):
            if last_loss[n] < 0 or last_loss[n] <= regrown:
                continue
            if flight[n] >= usual:
                regrown = last_loss[n]
                continue
            out[g] = True
    return out


# The fastest rate a pair's calls crossed the capture point at is taken over
# windows of at least this long (and PEAK_WINDOW_RTTS round trips): long enough
# to hold many round trips of a window's flights, short enough to find a stretch
# between losses (lab: the kernel client through 1% loss at 5 ms, 18.7 Mbit/s on
# average, 103 Mbit/s at its fastest; its loss-free twin 225 Mbit/s).
PEAK_WINDOW_NS = 50_000_000
PEAK_WINDOW_RTTS = 10


def _peak_rate_bps(c: _PairCalls, rtt: float) -> float:
    """The fastest the pair's WRITE calls' bytes crossed the capture point over a
    window (PEAK_WINDOW_NS or PEAK_WINDOW_RTTS round trips; the whole span when
    shorter): each call's bytes spread evenly from its last send's first packet
    to its last (NaN: no WRITE bytes)."""
    w = np.flatnonzero((c.op == WRITE_OP) & (c.call_bytes > 0))
    if not len(w):
        return math.nan
    t0 = int(c.ls[w].min())  # (relative: ns since the epoch lose their units in a float)
    a = (c.ls[w] - t0).astype("float64")
    b = np.maximum((c.le[w] - t0).astype("float64"), a + 1)
    slope = c.call_bytes[w] / (b - a)
    t = np.r_[a, b]
    order = np.argsort(t, kind="stable")
    t = t[order]
    rate = np.cumsum(np.r_[slope, -slope][order])  # bytes/ns from each point on
    sent = np.r_[0.0, np.cumsum(rate[:-1] * np.diff(t))]  # bytes by each point
    window = min(max(PEAK_WINDOW_NS, PEAK_WINDOW_RTTS * rtt if rtt > 0 else 0), t[-1] - t[0])
    if window <= 0:
        return math.nan
    ahead = np.interp(t + window, t, sent)
    return float((ahead - sent).max()) * 8e9 / window


def _delivery_rate_bps(c: _PairCalls, rtt: float, point: str) -> float:
    """The fastest a WRITE call alone on the wire (no other of the pair's WRITEs
    between its first packet and the ACK of its last byte) crossed the path, seen
    at the client: its bytes over that time less one round trip (NaN: none such,
    or not a client-side capture).  A client that hands a whole call to a window
    that holds it sends it at its own speed; the ACKs come back at the path's
    (nfs-cp's 1 MiB WRITEs through 20 ms: sent in 2 ms, acknowledged over 11 ms
    after the round trip: the path, not the 4 Gbit/s burst, is how fast the
    data would move without the round trip; its twin: 0.46 Gbit/s)."""
    if point not in ("client", "unknown") or not rtt > 0:
        return math.nan
    # (an ACK that came with the reply, or a delayed one, times the server or the
    # receiver's timer: big calls acknowledged before their replies only)
    w = np.flatnonzero(
        (c.op == WRITE_OP)
        & ~c.udp
        & (c.acked > c.cs)
        & (c.acked < c.rf)
        & (c.call_bytes >= DELIVERY_MIN_BYTES)
    )
    if len(w) < 2:
        return math.nan
    w = w[np.argsort(c.cs[w], kind="stable")]
    a, b = c.cs[w], c.acked[w]
    before = np.r_[np.iinfo("int64").min, np.maximum.accumulate(b)[:-1]]  # the calls ahead's ends
    alone = (before < a) & (np.r_[a[1:], np.iinfo("int64").max] > b)
    span = (b - a - rtt)[alone]
    nbytes = c.call_bytes[w][alone]
    ok = span > 0
    if not ok.any():
        return math.nan
    return float((nbytes[ok] * 8e9 / span[ok]).max())


# Calls this big at least time the path's delivery: at a gigabit their bytes
# take 4 ms, well beyond the round trip's jitter (a few tenths of a millisecond).
DELIVERY_MIN_BYTES = 512 * 1024


# A connection's WRITE calls follow one another in its stream (the next one's
# first packet within STREAM_GAP_NS, or half a round trip, of the last one's
# last packet) at least this share of the time: the client queues calls in its
# socket and TCP's window, not the RPC round trip, sets their pace (the Linux
# client: every call; a client that waits for each reply before the next: none).
STREAM_BOUND_SHARE = 0.75
STREAM_GAP_NS = 1_000_000
STREAM_BOUND_MIN = 3  # successive calls at least (4 MiB of the kernel's 1 MiB WRITEs)


def _stream_bound(c: _PairCalls, rtt: float) -> bool:
    """Whether the pair's WRITE calls went back to back in their connections'
    streams (STREAM_BOUND_SHARE of its successive calls)."""
    gap = max(STREAM_GAP_NS, rtt / 2 if rtt > 0 else 0)
    close = total = 0
    writes = c.op == WRITE_OP
    for conn in np.unique(c.conn[writes]):
        mine = np.flatnonzero((c.conn == conn) & writes)
        mine = mine[np.argsort(c.cs[mine], kind="stable")]
        close += int((c.cs[mine][1:] - c.le[mine][:-1] <= gap).sum())
        total += len(mine) - 1
    return total >= STREAM_BOUND_MIN and close >= STREAM_BOUND_SHARE * total


# Linux's smallest TCP retransmission timeout (TCP_RTO_MIN, 200 ms; other
# systems' are longer): a sender silent this long with bytes to send re-sent on
# a timer.
RTO_MIN_NS = 200_000_000
# The words of a stop downstream of the client on a loss-limited connection
# (the verdict finds and counts them by these words)
CUT_WINDOW_EVIDENCE = "on a connection whose window the losses cut"


def _sending_at(c: _PairCalls, t: np.ndarray, e: _Events | None = None) -> np.ndarray:
    """Whether some call of the pair was being sent at each instant of ``t``
    (from a call's first packet to before its last; with ``e``, also within the
    client's calls the capture could not read: ``_unread``)."""
    starts, ends = c.cs, c.le
    if e is not None:
        u = _unread(e)
        starts, ends = np.r_[starts, e.ts[u]], np.r_[ends, e.ts[u] + e.dur[u]]
    order = np.argsort(starts, kind="stable")
    first = starts[order]
    last = np.maximum.accumulate(ends[order]) if len(order) else ends
    k = np.searchsorted(first, t, side="right") - 1
    return (k >= 0) & (last[np.maximum(k, 0)] > t)


def _unread(e: _Events) -> np.ndarray:
    """The client's stretches of calls whose record marks the snaplen cut
    (rpc_unframed): bytes of calls moving that the capture could not read."""
    return e.of("rpc_unframed", True)


def _held_by_loss(
    w: np.ndarray,
    ts: np.ndarray,
    dur: np.ndarray,
    conn: np.ndarray,
    retx: np.ndarray,
    loaded_ns: float,
) -> np.ndarray:
    """Which window stalls (events ``w``) a loss held: a re-sent segment on
    their connection from a loaded round trip before the stall (the hole not
    yet filled) to one after it (the hole that the sender had yet to learn of)."""
    out = np.zeros(len(w), bool)
    for k in np.unique(conn[w]) if len(retx) else ():
        r = np.sort(ts[retx][conn[retx] == k])
        mine = np.flatnonzero(conn[w] == k)
        lo = np.searchsorted(r, ts[w][mine] - loaded_ns, side="left")
        hi = np.searchsorted(r, ts[w][mine] + dur[w][mine] + loaded_ns, side="right")
        out[mine] = hi > lo
    return out


def _loaded_rtt(c: _PairCalls, rtt: float) -> float:
    """The round trip under load: the median time the receiver took to
    acknowledge a call's last byte, at least the round trip."""
    delay = (c.acked - c.le)[c.acked > c.le]
    return max(float(np.median(delay)) if len(delay) else 0.0, rtt)


def _loss_delays(
    c: _PairCalls, ts: np.ndarray, ev_conn: np.ndarray, retx: np.ndarray, rt_from: np.ndarray
) -> np.ndarray:
    """Per call, from when its last bytes waited on a loss: a call some of whose
    bytes TCP re-sent (a retransmission on its connection between its first
    packet and the ACK of its last byte) had them acknowledged later than the
    calls that lost nothing; the excess over their median wait is the loss's
    (head-of-line blocking, then the window the loss cut).  ``rt_from`` where
    none."""
    out = rt_from.copy()
    if not len(retx):
        return out
    wait = rt_from - c.le
    hit = np.zeros(len(c.cs), bool)
    for conn in np.unique(ev_conn[retx]):
        r = np.sort(ts[retx][ev_conn[retx] == conn])
        mine = np.flatnonzero(c.conn == conn)
        first = np.searchsorted(r, c.cs[mine], side="left")
        last = np.searchsorted(r, rt_from[mine], side="right")
        hit[mine] = last > first
    usual = float(np.median(wait[~hit & (wait >= 0)])) if (~hit & (wait >= 0)).any() else 0.0
    out[hit] = np.minimum(c.le[hit] + int(usual), rt_from[hit])
    return np.maximum(out, c.le)


def _union_ns(s: np.ndarray, e: np.ndarray, lo: int, hi: int) -> int:
    """Nanoseconds covered by the union of [s, e) within [lo, hi)."""
    starts, ends = _union(np.clip(s, lo, hi), np.clip(e, lo, hi))
    return int((ends - starts).sum())


def _most_common(values: np.ndarray) -> int:
    """The most common value (the largest of ties; -1: none)."""
    if not len(values):
        return -1
    v, n = np.unique(values, return_counts=True)
    return int(v[n == n.max()].max())


def _empty(columns: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})


# The transactions columns the budget reads (selected once: the table is wide).
USED_COLUMNS = (
    *("client", "server", "n_calls", "op", "xid", "fh", "status", "conn", "transport"),
    *("t_call_ns", "t_call_end_ns", "t_call_last_ns", "t_call_last_end_ns", "t_call_acked_ns"),
    *("t_reply_first_ns", "t_reply_ns", "call_frame_first", "call_frame", "reply_frame"),
    *("call_bytes", "write_bytes", "count"),
)


def _indices(frame: pd.DataFrame, a: str, b: str) -> dict[tuple, np.ndarray]:
    """Row positions per (frame[a], frame[b]) as Python strings (one grouping)."""
    if not len(frame):
        return {}
    return group_indices([frame[a], frame[b]])


def time_budget(
    transactions: pd.DataFrame,
    events: pd.DataFrame | None,
    options: BudgetOptions | None = None,
    per_pair: dict[tuple[str, str], BudgetOptions] | None = None,
) -> Budget:
    """The budget of every client/server pair that wrote (``Budget``).  ``options``
    for every pair, or the pair's own in ``per_pair`` ((client, server) ->
    options: each pair's round trip and capture point)."""
    options = options or BudgetOptions()
    per_pair = per_pair or {}
    tx = transactions[[c for c in USED_COLUMNS if c in transactions.columns]]
    calls = rows_where(tx, tx["n_calls"] > 0)
    orphan = tx[tx["n_calls"] == 0]
    writers = calls[is_value(calls["op"], WRITE_OP)]
    pairs = list(_indices(writers, "client", "server"))  # sorted
    # (no pair wrote: nothing below is needed)
    by_pair = _indices(calls, "client", "server") if pairs else {}
    orphans_of = _indices(orphan, "client", "server")
    orphan_t = _int(orphan["t_reply_ns"]) if len(orphan) else np.array([], "int64")
    orphan_b = (
        orphan["write_bytes"].fillna(0).to_numpy("int64")
        * np.asarray(is_value(orphan["op"], WRITE_OP), bool)
        if len(orphan)
        else np.array([], "int64")
    )
    orphan_x = orphan["xid"].to_numpy("int64") if len(orphan) else np.array([], "int64")
    writing = {client for client, _ in pairs}
    xids_of = {
        client: sorted_unique(calls["xid"].to_numpy("int64")[rows])
        for (client,), rows in (group_indices([calls["client"]]) if pairs else {}).items()
        if client in writing
    }
    ev = events if events is not None and len(events) and "kind" in events else None
    ev_of = _indices(ev, "src", "dst") if ev is not None and pairs else {}
    table = _EventTable.of(ev if pairs else None)
    rows, intervals = [], []
    # every pair's calls as arrays at once, each pair's taken by position (a
    # conversion per pair cost ~5 ms: 500k writing pairs took minutes)
    all_calls = _calls(calls) if pairs else None
    for client, server in pairs:
        assert all_calls is not None
        part = _take(all_calls, by_pair[(client, server)])
        mine_orphans = orphans_of.get((client, server), np.array([], "int64"))
        orphans = orphan_t[mine_orphans]
        mine = [
            m for m in (ev_of.get((client, server)), ev_of.get((server, client))) if m is not None
        ]
        rows_ev = np.sort(np.concatenate(mine)) if mine else np.array([], "int64")
        got = _pair_budget(
            part,
            table.pair(rows_ev, client),
            orphans,
            orphan_x[mine_orphans],
            orphan_b[mine_orphans],
            xids_of.get(client, np.array([], "int64")),
            client,
            server,
            per_pair.get((client, server), options),
        )
        if got is None:
            continue
        row, ivs = got
        rows.append(row)
        intervals.append(ivs)
    pairs_table = pd.DataFrame(rows, columns=list(PAIR_COLUMNS)) if rows else _empty(PAIR_COLUMNS)
    table = (
        pd.DataFrame({c: np.concatenate([iv[c] for iv in intervals]) for c in INTERVAL_COLUMNS})
        if intervals
        else _empty(INTERVAL_COLUMNS)
    )
    return Budget(pairs=pairs_table, intervals=table, options=options)
