"""Pace and concurrency: RPCs outstanding over time, the call->reply and
reply->next-call gaps (the study's 360 µs / 34 µs pace), and whether the
WRITEs ran one at a time ("sequential mode").

An RPC is outstanding from the first packet of its first call (``t_call_ns``)
to its reply (``t_reply_ns``): what the client waits.  A call never answered
in the capture stays outstanding for ``UNANSWERED_HORIZON_NS`` after its last
send, or to the end of the trace (the last call or reply seen) if that comes
first (``call_ends_ns``).  Replies without a call are left out.

Time shares are per client/server pair, pooled: the WRITE figures over each
pair's write activity (``writes.write_activity``: first WRITE call to last
WRITE reply), the all-RPC figures over each pair's whole span (first call to
last reply).  Several pairs add their time together, so a level's share is
the share of pair-time spent at it, and two sequential clients do not look
concurrent because they overlap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from nfstrace.analysis.findings import Finding
from nfstrace.analysis.grouping import narrow_codes, rows_where, sorted_search
from nfstrace.analysis.writes import activity_with_pairs, prepared, write_sizes
from nfstrace.jsonable import NOT_IN_JSON, json_field
from nfstrace.protocol.procedures import WRITE_OP
from nfstrace.text import bytes_text, seconds_text

OUTSTANDING_COLUMNS: dict[str, str] = {
    "t_ns": "int64: time of the change",
    "client": "category (str): client address",
    "server": "category (str): server address",
    "outstanding": "int32: RPCs of the pair called and not yet answered, from t_ns on",
    "outstanding_writes": "int32: the WRITEs among them",
}

LEVEL_COLUMNS: dict[str, str] = {
    "level": "int64: RPCs outstanding",
    "all_ns": "int64: pair-time at this level over the pairs' whole spans (all RPCs)",
    "all_share": "float: all_ns / total",
    "writes_ns": "int64: pair-time with this many WRITEs outstanding, over the write activity",
    "writes_share": "float: writes_ns / total",
}

GAP_COLUMNS: dict[str, str] = {
    "gap": "str: 'call_to_reply' (first packet of the call to the reply) or "
    "'reply_to_next_call' (a reply to the pair's next call: the client's turnaround)",
    "scope": "str: 'write' (WRITE replies and calls only) or 'all' (every RPC)",
    "n": "int64: samples",
    "p10_ns": "float: 10th percentile",
    "p50_ns": "float: median",
    "p90_ns": "float: 90th percentile",
    "mean_ns": "float: mean",
}

# Sequential mode: at most one WRITE in flight for at least this share of the
# write activity.  Then the one-at-a-time cycle (call->reply + turnaround)
# sets at least 80% of the elapsed time, so it is the pace that bounds the
# throughput; below it, concurrent stretches weigh enough that a single
# per-WRITE cycle no longer describes the transfer.  Not 100%: a client that
# works one WRITE at a time still overlaps briefly (a COMMIT or GETATTR
# beside a WRITE, a call leaving in the same microsecond as a reply).
SEQUENTIAL_SHARE = 0.8

# Turnaround gaps up to this multiple of the median are the client's regular
# reply->next-call time; longer ones are application pauses, which more
# WRITEs in flight would not remove.
TURNAROUND_MULTIPLE = 10

# Idle time worth a finding: share of the write activity with nothing outstanding.
IDLE_FINDING_SHARE = 0.1

PAIR = ["client", "server"]


def _empty(columns: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})


# An unanswered call counts as outstanding for at most this long after the last
# packet of its last send.  A client still waiting for its reply sends the call
# again within this time (the longest default retransmission interval of common
# clients is Linux's over TCP, timeo=600: 60 s; over UDP it is seconds), so a
# call neither answered nor re-sent for this long was given up (a soft mount, an
# rpcbind query that timed out, a client that went away) or its reply fell
# outside the capture: it no longer holds anything up.
UNANSWERED_HORIZON_NS = 60_000_000_000
# The step table's levels and pair codes (a level is at most the calls of one pair).
STEP_LEVEL = "int32"
# Step rows that time_at_levels works through at once.
LEVEL_CHUNK = 1 << 20


def trace_end_ns(tx: pd.DataFrame) -> int:
    """The last call or reply of the trace: where unanswered calls stop being outstanding."""
    ends = [tx[c].max() for c in ("t_call_ns", "t_reply_ns")]
    return int(max(e for e in ends if not pd.isna(e)))


def call_ends_ns(calls: pd.DataFrame, trace_end: int | None = None) -> np.ndarray:
    """Per call (rows of ``calls``, transactions with a call), when it stopped
    being outstanding: the last packet of its reply; for an unanswered call the
    last packet of its last send plus ``UNANSWERED_HORIZON_NS``, at most
    ``trace_end`` (default: the trace's end, ``trace_end_ns``)."""
    if not len(calls):
        return np.zeros(0, "int64")
    end = trace_end_ns(calls) if trace_end is None else int(trace_end)
    last = calls["t_call_last_end_ns"].astype("Int64").fillna(calls["t_call_ns"].astype("Int64"))
    given_up = np.minimum(last.to_numpy("int64") + UNANSWERED_HORIZON_NS, end)
    reply = calls["t_reply_ns"].astype("Int64")
    return np.where(reply.notna().to_numpy(), reply.fillna(0).to_numpy("int64"), given_up)


def outstanding_steps(transactions: pd.DataFrame) -> pd.DataFrame:
    """The outstanding-RPC step function (``OUTSTANDING_COLUMNS``): one row per
    change per client/server pair, sorted by pair then time.  Changes at the
    same nanosecond are merged into one row."""
    return steps_with_pairs(prepared(transactions)).drop(columns="pair")


def steps_with_pairs(transactions: pd.DataFrame) -> pd.DataFrame:
    """outstanding_steps with the pair code kept (``transactions`` prepared)."""
    tx = rows_where(transactions, transactions["n_calls"] > 0)
    if tx.empty:
        return _empty({**OUTSTANDING_COLUMNS, "pair": ""})
    pair = tx["pair"].to_numpy()
    labels = _pair_labels(tx, pair)
    t, p, d_all, d_write = _changes(
        pair,
        tx["t_call_ns"].to_numpy(dtype="int64"),
        call_ends_ns(tx, trace_end_ns(transactions)),
        tx["op"].eq(WRITE_OP).to_numpy(dtype=bool),
    )
    # changes that cancel at one nanosecond (a reply and the next call) are
    # dropped; without any, every column is kept as it is (no copies)
    changed = (d_all != 0) | (d_write != 0)
    keep = slice(None) if changed.all() else changed
    del changed
    # Every call's +1 has its -1 in the same pair, so one running sum serves all pairs.
    level_all = np.cumsum(d_all, dtype=STEP_LEVEL)[keep]
    del d_all
    level_write = np.cumsum(d_write, dtype=STEP_LEVEL)[keep]
    del d_write
    p = p[keep]

    def label(column: str) -> pd.Categorical:
        # one string per pair, repeated by code: a category (a string array of
        # the rows cost 0.2 GB and 0.2 s on a 5M-packet capture)
        codes, names = pd.factorize(labels[column].astype(object), sort=True)
        return pd.Categorical.from_codes(codes[p], categories=names)

    return pd.DataFrame(
        {
            "t_ns": t[keep],
            "client": label("client"),
            "server": label("server"),
            "outstanding": level_all,
            "outstanding_writes": level_write,
            "pair": p,
        },
        copy=False,
    )


def _pair_labels(tx: pd.DataFrame, pair: np.ndarray) -> pd.DataFrame:
    """``tx.groupby("pair", sort=True)[["client", "server"]].first()`` reindexed
    by every code up to the largest: where no client or server is missing (a
    call's never are), each code's first row taken, found by a minimum per code
    (not a groupby's factorize and hash of the rows)."""
    both = tx[["client", "server"]]
    if both.isna().to_numpy().any():
        labels = tx.groupby("pair", sort=True)[["client", "server"]].first()
        return labels.reindex(np.arange(pair.max() + 1))
    first = np.full(int(pair.max()) + 1, len(pair))
    np.minimum.at(first, pair, np.arange(len(pair)))
    codes = np.flatnonzero(first < len(pair))
    labels = both.take(first[codes]).set_axis(pd.Index(codes, name="pair"))
    return labels.reindex(np.arange(pair.max() + 1))


def _changes(
    pair: np.ndarray, start: np.ndarray, end: np.ndarray, write: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The outstanding counts' changes (all RPCs, WRITEs), per pair and time,
    those at the same nanosecond merged: (time, pair, change, WRITE change),
    sorted by pair then time.  Each call is +1 at its start and -1 at its end;
    pair codes and changes are narrow (``STEP_LEVEL``; signs int8): on a
    10M-packet capture this table was most of the diagnosis' peak."""
    n = len(pair)
    t = np.concatenate([start, end])
    p = np.empty(2 * n, STEP_LEVEL)  # (narrow from the start: no int64 copy)
    p[:n] = pair
    p[n:] = pair
    order = np.lexsort((t, p))
    t, p = t[order], p[order]
    sign = np.where(order < n, np.int8(1), np.int8(-1))
    wrote = sign * np.concatenate([write, write])[order].astype("int8")
    del order
    first = np.flatnonzero(np.r_[True, (p[1:] != p[:-1]) | (t[1:] != t[:-1])])
    if len(first) == len(t):  # no two changes of a pair at one nanosecond
        return t, p, sign.astype(STEP_LEVEL), wrote.astype(STEP_LEVEL)
    d_all = np.add.reduceat(sign, first, dtype=STEP_LEVEL)
    d_write = np.add.reduceat(wrote, first, dtype=STEP_LEVEL)
    return t[first], p[first], d_all, d_write


def time_at_levels(steps: pd.DataFrame, column: str, windows: pd.DataFrame) -> pd.Series:
    """Nanoseconds spent at each level of ``steps[column]`` (a step function per
    client/server pair, 0 before its first row, sorted by pair then time) inside
    each pair's window (``windows``: client, server, start_ns, end_ns), summed
    over pairs.  Index: level; only levels held for some time.  Worked through
    LEVEL_CHUNK rows at a time: its work arrays do not grow with the trace."""
    if steps.empty or windows.empty:
        return pd.Series(dtype="int64")
    # windows looked up per step row by pair code (no string merge)
    if "pair" in steps and "pair" in windows:
        key, w_key = steps["pair"].to_numpy(), windows["pair"].to_numpy("int64")
    else:
        client, clients = pd.factorize(steps["client"].astype(object))
        server, servers = pd.factorize(steps["server"].astype(object))
        key = client * (len(servers) + 1) + server
        w_key = pd.Index(clients).get_indexer(windows["client"].astype(object)) * (
            len(servers) + 1
        ) + pd.Index(servers).get_indexer(windows["server"].astype(object))
    t = steps["t_ns"].to_numpy("int64")
    level = steps[column].to_numpy()
    if not in_order(key, t):  # (steps come sorted by pair, then time: no sort needed)
        order = np.lexsort((t, key))
        key, t, level = key[order], t[order], level[order]
    if level.min() < 0:
        raise ValueError(f"negative {column} level")
    window_of = _window_rows(w_key, key)
    starts, ends = windows["start_ns"].to_numpy("int64"), windows["end_ns"].to_numpy("int64")
    total = np.zeros(int(level.max()) + 1)
    n = len(t)
    for a in range(0, n, LEVEL_CHUNK):
        b = min(a + LEVEL_CHUNK, n)
        k, tt = key[a:b], t[a:b]
        row = window_of(k)
        mine = row >= 0  # a pair without a window spends no time in it
        lo, hi = starts[row], ends[row]
        # each row holds its level to the pair's next row, or to the window's end
        t_next = hi.copy()
        following = slice(a + 1, min(b + 1, n))  # (the rows after these, the next chunk's first)
        more = key[following] == k[: following.stop - following.start]
        np.copyto(t_next[: len(more)], t[following], where=more)
        del more
        dur = np.minimum(t_next, hi, out=t_next)
        dur -= np.maximum(tt, lo)
        np.clip(dur, 0, None, out=dur)
        dur[~mine] = 0
        total += np.bincount(level[a:b], weights=dur, minlength=len(total))
        # level 0 from the window's start to the pair's first change
        first = np.flatnonzero(np.r_[a == 0 or key[a - 1] != k[0], k[1:] != k[:-1]] & mine)
        total[0] += np.clip(np.minimum(tt[first], hi[first]) - lo[first], 0, None).sum()
    held = np.flatnonzero(total > 0)
    return pd.Series(total[held].round().astype("int64"), index=pd.Index(held, name="level"))


def _window_rows(w_key: np.ndarray, key: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """A lookup of keys' rows in ``w_key`` (-1: none), ``pd.Index(w_key).get_indexer``:
    of pair codes (small non-negative integers, distinct) by a table of their
    rows, not a hash of every step row."""
    if (
        len(w_key)
        and len(key)
        and key.dtype.kind in "iu"
        and min(int(w_key.min()), int(key.min())) >= 0
        and max(int(w_key.max()), int(key.max())) <= 4 * (len(w_key) + len(key)) + 4096
        and len(np.unique(w_key)) == len(w_key)
    ):
        table = np.full(max(int(w_key.max()), int(key.max())) + 1, -1, "int64")
        table[w_key] = np.arange(len(w_key))
        return lambda k: table[k]
    index = pd.Index(w_key)
    return index.get_indexer


def in_order(key: np.ndarray, t: np.ndarray) -> bool:
    """Whether rows are sorted by ``key``, then ``t`` (a stable ``np.lexsort((t,
    key))`` would leave them as they are)."""
    return bool(np.all((key[1:] > key[:-1]) | ((key[1:] == key[:-1]) & (t[1:] >= t[:-1]))))


def time_weighted_mean(at_levels: pd.Series) -> float:
    """Mean level weighted by the time at each level (NaN when no time)."""
    total = at_levels.sum()
    if total <= 0:
        return float("nan")
    return float(
        (at_levels.index.to_numpy("float64") * at_levels.to_numpy("float64")).sum() / total
    )


def _pair_spans(tx: pd.DataFrame) -> pd.DataFrame:
    """Per pair, first call to last reply (``tx`` prepared); the client and
    server of its first call (a call's are always known).  By ufunc.at on the
    columns' arrays, not a groupby."""
    called = (tx["n_calls"] > 0).to_numpy()
    if not called.any():
        return pd.DataFrame(columns=["pair", *PAIR, "start_ns", "end_ns"])
    # (pair codes are 0, 1, ...: per code arrays, the codes present kept; np.unique's
    # sort, index and inverse of every call not made)
    pair = tx["pair"].to_numpy("int64")[called]
    seen = np.bincount(pair)
    pairs = np.flatnonzero(seen)
    first = np.full(len(seen), len(pair))
    np.minimum.at(first, pair, np.arange(len(pair)))
    first = first[pairs]
    start = np.full(len(seen), np.iinfo("int64").max)
    np.minimum.at(start, pair, tx["t_call_ns"].to_numpy("int64", na_value=0)[called])
    start = start[pairs]
    end = np.full(len(seen), np.iinfo("int64").min)
    np.maximum.at(end, pair, tx["t_reply_ns"].to_numpy("int64", na_value=trace_end_ns(tx))[called])
    end = end[pairs]
    del pair
    return pd.DataFrame(
        {
            "pair": pairs,
            **{c: tx[c].take(np.flatnonzero(called)[first]).to_numpy(dtype=object) for c in PAIR},
            "start_ns": start,
            "end_ns": end,
        }
    )


def _stats(gap: str, scope: str, values: np.ndarray) -> dict[str, Any]:
    row: dict[str, Any] = {"gap": gap, "scope": scope, "n": len(values)}
    if len(values):
        p10, p50, p90 = np.percentile(values, [10, 50, 90])
        row.update(p10_ns=p10, p50_ns=p50, p90_ns=p90, mean_ns=float(values.mean()))
    else:
        row.update(p10_ns=np.nan, p50_ns=np.nan, p90_ns=np.nan, mean_ns=np.nan)
    return row


def turnaround_gaps(transactions: pd.DataFrame, writes_only: bool) -> np.ndarray:
    """For each reply, the time to the pair's next call (sent at or after it);
    the replies in time order (ties in table order).  A forward as-of match by
    pair, as integer keys: each time replaced by its rank among all the times,
    then (pair, rank) as one number, so one sorted search finds every reply's
    next call."""
    tx = prepared(transactions)
    call = (tx["n_calls"] > 0).to_numpy()
    if writes_only:
        call = call & tx["op"].eq(WRITE_OP).to_numpy(dtype=bool)
    answered = call & tx["t_reply_ns"].notna().to_numpy()
    if not answered.any():
        return np.array([], dtype="int64")
    pair = tx["pair"].to_numpy("int64")
    reply_t = tx["t_reply_ns"].to_numpy("int64", na_value=0)[answered]
    order = np.argsort(reply_t, kind="stable")
    reply_t, reply_pair = reply_t[order], pair[answered][order]
    call_t = tx["t_call_ns"].to_numpy("int64", na_value=0)[call]
    lo = min(int(call_t.min()), int(reply_t.min()))
    span = max(int(call_t.max()), int(reply_t.max())) - lo + 1
    if span * (int(pair.max()) + 1) < 2**62:
        # the times themselves as the ranks (offset from the first): no unique of
        # every call and reply time, its sort and inverse (on a 10M-packet
        # capture half a GB of the diagnosis' peak)
        calls = pair[call] * span
        calls -= lo  # (then the times: no sum past int64)
        calls += call_t
        del call_t
        calls.sort(kind="stable")  # (a merge sort: quick on the pairs' sorted runs)
        wanted = reply_pair * span
        wanted -= lo
        wanted += reply_t
        del reply_t
        # the first call at or after the reply, the replies searched in (pair,
        # time) order (their pair codes' stable sort): sorted, they are merged
        # with the sorted calls (sorted_search), not searched one by one in
        # time order, pairs interleaved (30 -> 5 ms for 400k replies)
        by_pair = np.argsort(narrow_codes(reply_pair), kind="stable")
        at = np.empty(len(wanted), "int64")
        at[by_pair] = sorted_search(calls, wanted[by_pair], side="left")
        del by_pair, reply_pair
        found = at < len(calls)
        np.minimum(at, len(calls) - 1, out=at)  # (answered rows are calls: never empty)
        key = calls[at]
        del at, calls
        found &= key // span == wanted // span  # (the same pair)
        key -= wanted  # (same pair: the call's time less the reply's)
        del wanted
        return key[found].astype("int64")
    times, rank = np.unique(np.concatenate([call_t, reply_t]), return_inverse=True)
    n = len(times)
    calls = np.sort(pair[call] * n + rank[: len(call_t)])
    wanted = reply_pair * n + rank[len(call_t) :]
    at = np.searchsorted(calls, wanted, side="left")  # the first call at or after the reply
    key = calls[np.minimum(at, len(calls) - 1)]  # (answered rows are calls: never empty)
    found = (at < len(calls)) & (key // n == reply_pair)
    return (times[key[found] % n] - reply_t[found]).astype("int64")


def _latencies(tx: pd.DataFrame, writes_only: bool) -> np.ndarray:
    keep = ((tx["n_calls"] > 0) & tx["latency_ns"].notna()).to_numpy(dtype=bool)
    if writes_only:
        keep = keep & tx["op"].eq(WRITE_OP).to_numpy(dtype=bool)
    return tx["latency_ns"].to_numpy("int64", na_value=0)[keep]


@dataclass(frozen=True)
class PaceResult:
    """RPC concurrency and pace of a trace.

    outstanding: ``OUTSTANDING_COLUMNS`` (step function); levels:
    ``LEVEL_COLUMNS`` (share of time at each level); gaps: ``GAP_COLUMNS``.
    Means are time-weighted; WRITE figures over the write activity, all-RPC
    figures over the pairs' spans.
    """

    outstanding: pd.DataFrame = field(metadata=NOT_IN_JSON)
    outstanding_mean: float
    outstanding_max: int
    outstanding_writes_mean: float  # NaN without write activity
    outstanding_writes_max: int
    write_activity_ns: int  # pair-time of the write activity
    sequential_share: float  # share of it with <= 1 WRITE outstanding (NaN: no writes)
    sequential: bool  # sequential_share >= SEQUENTIAL_SHARE
    idle_ns: int  # within the write activity, nothing outstanding at all
    write_size: int | None  # median WRITE size (bytes)
    pace_ns: int | None  # median WRITE call->reply + median reply->next WRITE call
    saving_ns: int  # sequential: lower bound of what concurrency would save (else 0)
    levels: pd.DataFrame = field(
        metadata=json_field(omit=True, then=("writes_share_by_level", "all_share_by_level"))
    )
    gaps: pd.DataFrame

    @property
    def writes_share_by_level(self) -> dict[int, float]:
        """WRITEs outstanding -> share of the write activity at that level (levels seen)."""
        return _shares(self.levels, "writes")

    @property
    def all_share_by_level(self) -> dict[int, float]:
        """RPCs outstanding -> share of the pairs' spans at that level (levels seen)."""
        return _shares(self.levels, "all")

    def gap(self, gap: str, scope: str = "write", stat: str = "p50_ns") -> float:
        row = self.gaps[(self.gaps["gap"] == gap) & (self.gaps["scope"] == scope)]
        return float(row[stat].iloc[0]) if len(row) else float("nan")

    def findings(self) -> list[Finding]:
        out: list[Finding] = []
        if self.write_activity_ns <= 0:
            return out
        if self.sequential and self.pace_ns is not None:
            size = f" per {bytes_text(self.write_size)}" if self.write_size else ""
            reply = self.gap("call_to_reply")
            turn = self.gap("reply_to_next_call")
            out.append(
                Finding(
                    kind="sequential_writes",
                    title=f"WRITEs ran one at a time: pace {seconds_text(self.pace_ns)}{size} "
                    f"(call→reply {seconds_text(reply)} + reply→next call "
                    f"{seconds_text(turn)})",
                    severity="warning",
                    time_lost_ns=self.saving_ns,
                    details={
                        "sequential_share": self.sequential_share,
                        "pace_ns": self.pace_ns,
                        "write_size": self.write_size,
                        "call_to_reply_p50_ns": reply,
                        "reply_to_next_call_p50_ns": turn,
                        "time_lost_method": "lower bound: the client's regular turnaround "
                        "(reply->next WRITE call, up to "
                        f"{TURNAROUND_MULTIPLE}x its median) summed; with two WRITEs in "
                        "flight it would overlap the other's transfer",
                    },
                )
            )
        elif not self.sequential:
            out.append(
                Finding(
                    kind="write_concurrency",
                    title=f"Up to {self.outstanding_writes_max} WRITEs in flight "
                    f"(mean {self.outstanding_writes_mean:.1f} over the write activity)",
                    details={
                        "max": self.outstanding_writes_max,
                        "mean": self.outstanding_writes_mean,
                        "sequential_share": self.sequential_share,
                    },
                )
            )
        idle_share = self.idle_ns / self.write_activity_ns
        if idle_share >= IDLE_FINDING_SHARE:
            out.append(
                Finding(
                    kind="idle_time",
                    title=f"The client had nothing outstanding for {seconds_text(self.idle_ns)} "
                    f"of {seconds_text(self.write_activity_ns)} of write activity "
                    f"({idle_share:.0%})",
                    details={"idle_ns": self.idle_ns, "share": idle_share},
                )
            )
        return out


def _shares(levels: pd.DataFrame, scope: str) -> dict[int, float]:
    """Level -> share of time (``LEVEL_COLUMNS``), for the levels of ``scope``
    (writes / all) seen at all."""
    return {
        int(level): float(share)
        for level, share, ns in zip(
            levels["level"], levels[f"{scope}_share"], levels[f"{scope}_ns"], strict=True
        )
        if ns > 0
    }


def _levels_table(all_levels: pd.Series, write_levels: pd.Series) -> pd.DataFrame:
    t = pd.DataFrame({"all_ns": all_levels, "writes_ns": write_levels}).fillna(0)
    t = t.astype("int64").rename_axis("level").reset_index()
    for col in ("all", "writes"):
        total = t[f"{col}_ns"].sum()
        t[f"{col}_share"] = t[f"{col}_ns"] / total if total else 0.0
    return t[list(LEVEL_COLUMNS)]


def analyze_pace(transactions: pd.DataFrame, activity: pd.DataFrame | None = None) -> PaceResult:
    """``activity``: ``writes.activity_with_pairs`` of the prepared transactions
    when the caller has it (the diagnosis shares it with the stalls)."""
    tx = prepared(transactions)
    steps = steps_with_pairs(tx)
    if activity is None:
        activity = activity_with_pairs(tx)
    all_levels = time_at_levels(steps, "outstanding", _pair_spans(tx))
    write_levels = time_at_levels(steps, "outstanding_writes", activity)
    idle_levels = time_at_levels(steps, "outstanding", activity)
    activity_ns = int(write_levels.sum())
    writes_at_most_one = int(write_levels[write_levels.index <= 1].sum())

    write_lat, all_lat = _latencies(tx, True), _latencies(tx, False)
    write_turn, all_turn = turnaround_gaps(tx, True), turnaround_gaps(tx, False)
    gaps = pd.DataFrame(
        [
            _stats("call_to_reply", "write", write_lat),
            _stats("reply_to_next_call", "write", write_turn),
            _stats("call_to_reply", "all", all_lat),
            _stats("reply_to_next_call", "all", all_turn),
        ]
    )

    sequential_share = writes_at_most_one / activity_ns if activity_ns else float("nan")
    sequential = bool(activity_ns and sequential_share >= SEQUENTIAL_SHARE)
    pace_ns = None
    if len(write_lat) and len(write_turn):
        pace_ns = int(np.median(write_lat) + np.median(write_turn))
    saving_ns = 0
    if sequential and len(write_turn):
        regular = write_turn[write_turn <= TURNAROUND_MULTIPLE * np.median(write_turn)]
        saving_ns = int(regular.sum())
    # (row by row: the sizes of every row, then the WRITE calls', not a selection of them)
    sizes = write_sizes(tx)[(tx["op"].eq(WRITE_OP) & (tx["n_calls"] > 0)).to_numpy(dtype=bool)]
    sizes = sizes[sizes > 0]
    return PaceResult(
        outstanding=steps.drop(columns="pair"),
        levels=_levels_table(all_levels, write_levels),
        gaps=gaps,
        outstanding_mean=time_weighted_mean(all_levels),
        outstanding_max=int(all_levels.index.max()) if len(all_levels) else 0,
        outstanding_writes_mean=time_weighted_mean(write_levels),
        outstanding_writes_max=int(write_levels.index.max()) if len(write_levels) else 0,
        write_activity_ns=activity_ns,
        sequential_share=sequential_share,
        sequential=sequential,
        idle_ns=int(idle_levels.get(0, 0)),
        write_size=int(np.median(sizes)) if len(sizes) else None,
        pace_ns=pace_ns,
        saving_ns=saving_ns,
    )
