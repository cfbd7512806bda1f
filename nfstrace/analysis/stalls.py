"""Stalls: intervals of the write activity without write progress, each with
the cause the trace shows, and the throughput of the stretches between them.

Write progress is a successful WRITE reply (``writes.write_progress``).  Per
client/server pair, within its write activity (first WRITE call to last WRITE
reply), the gaps between successive progress points (the activity's start,
each successful WRITE reply, its end) longer than the threshold are stalls.

Default threshold: ``THRESHOLD_PACE_MULTIPLE`` x the trace's own pace, with a
floor of ``THRESHOLD_FLOOR_NS``.  The pace is the larger of the median WRITE
call->reply time and the median gap between successive WRITE replies (pooled
over pairs).  Why medians, not the p99 of the gaps: in the traces this tool
is for, stalls are common enough to be the p99 themselves (lab run
``win16``: p99 of the gaps = 2.4 s, the stall itself; ``mtu1000`` with loss:
305 ms); a median moves only when most of the trace is stalled.  Why the WRITE
latency too: a client that sends a batch of WRITEs and waits for all of them
(libnfs ``nfs-cp``) leaves a gap of one round trip between batches while
nothing is wrong; a gap of several round trips is the pace, not a stall.  Why
the floor: the delays explained here are long (RPC re-send timeouts >= 0.1 s,
JUKEBOX back-off of seconds, flushing a COMMIT, a TCP retransmission timeout
>= 200 ms); shorter hiccups cost little and would drown them.

Cause of a stall, from the evidence of the same client/server pair:
- ``server_delay``: a reply with NFS3ERR_JUKEBOX / NFS4ERR_DELAY (10008); the
  evidence runs from that call to the client's retry (its next call of the
  same operation on the same file handle);
- ``commit``: a COMMIT in flight (call to reply);
- ``zero_window``: the server advertised a zero TCP window (event
  ``tcp_zero_window`` from server to client, lasting its ``duration_ns``;
  without a duration it is a point that counts when inside the stall);
- ``retransmission``: an RPC that was re-sent, from its first send to its reply;
- ``client_idle``: nothing outstanding at all (the client sent nothing);
- ``unknown``: none of these.
A cause applies when its evidence covers at least half of the stall (a
point-only zero window: when inside).  Of the causes that apply the first in
``CAUSES`` (the precedence) is chosen: the server's explicit "wait" first;
then a COMMIT, since zero windows and re-sends during a flush are its
consequences (the study's trace re-sent a WRITE during a commit stall); then
the closed window, which makes the client's calls time out; then re-sends;
the idle client last.  When none applies, the cause covering most of the
stall is chosen if it covers at least a fifth of it (causes that share a stall,
e.g. 40% COMMIT then 40% re-sends, still name one); else ``unknown``, with the
RPC the stall waited on in the detail.

Its size (over 600 lines): finding stalls and naming their causes share the
same intervals and evidence tables; the causes' rules are the module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from nfstrace.analysis.findings import Finding, Severity
from nfstrace.analysis.grouping import rows_where
from nfstrace.analysis.pace import call_ends_ns, steps_with_pairs, trace_end_ns
from nfstrace.analysis.writes import activity_with_pairs, prepared, progress_with_pairs
from nfstrace.jsonable import json_field
from nfstrace.protocol.nfs3 import NFS3ERR_JUKEBOX
from nfstrace.protocol.procedures import COMMIT_OP, WRITE_OP
from nfstrace.text import seconds_text

SERVER_DELAY_STATUS = NFS3ERR_JUKEBOX  # the same value as NFS4ERR_DELAY: 10008

CAUSES = ("server_delay", "commit", "zero_window", "retransmission", "client_idle")  # precedence
UNKNOWN = "unknown"
APPLIES_AT = 0.5  # share of the stall a cause's evidence must cover
FALLBACK_AT = 0.2  # when none applies: the best-covering cause if it covers this much

THRESHOLD_FLOOR_NS = 50_000_000
THRESHOLD_PACE_MULTIPLE = 10

STALL_COLUMNS: dict[str, str] = {
    "start_ns": "int64: last write progress before the stall (or the activity's start)",
    "end_ns": "int64: next write progress (or the activity's end)",
    "duration_ns": "int64: end - start",
    "cause": f"str: one of {', '.join((*CAUSES, UNKNOWN))}",
    "detail": "str: the evidence in words",
    "client": "str: client address",
    "server": "str: server address",
    "cause_share": "float: share of the stall covered by the cause's evidence",
}

# The stalls the JSON summary lists (StallsResult.longest), and what of each
LONGEST_LISTED = 10
LONGEST_COLUMNS = ("start_ns", "duration_ns", "cause", "detail")

SEGMENT_COLUMNS: dict[str, str] = {
    "start_ns": "int64: end of the previous stall (or the activity's start)",
    "end_ns": "int64: start of the next stall (or the activity's end)",
    "duration_ns": "int64: end - start",
    "bytes": "int64: bytes acknowledged in (start, end]",
    "writes": "int64: successful WRITE replies in (start, end]",
    "mbit_s": "float: bytes * 8 / duration: the transfer-only slope (10^6 bit/s)",
    "client": "str: client address",
    "server": "str: server address",
}

_PHRASES = {
    "server_delay": ("server-delay stall", "server-delay stalls", " (JUKEBOX/DELAY replies)"),
    "commit": ("commit stall", "commit stalls", ""),
    "zero_window": ("zero-window stall", "zero-window stalls", ""),
    "retransmission": ("stall waiting on a re-sent RPC", "stalls waiting on re-sent RPCs", ""),
    "client_idle": ("client-idle stall", "client-idle stalls", " (the client sent nothing)"),
    UNKNOWN: ("unexplained stall", "unexplained stalls", ""),
}


def _empty(columns: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})


# ---- intervals ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Evidence:
    """Intervals of one cause for one pair, sorted by start.  ``describe(i)``
    words interval ``ids[i]`` (its position as given): labels are made only
    for the few intervals a stall's detail names."""

    starts: np.ndarray
    ends: np.ndarray
    ids: np.ndarray
    describe: Callable[[int], str]

    @staticmethod
    def of(starts: np.ndarray, ends: np.ndarray, describe: Callable[[int], str]) -> _Evidence:
        order = np.argsort(starts, kind="stable")
        return _Evidence(
            starts[order].astype("int64"), ends[order].astype("int64"), order, describe
        )

    def coverage(self, qs: np.ndarray, qe: np.ndarray) -> np.ndarray:
        """Nanoseconds of each [qs, qe] covered by the union of the intervals."""
        if len(self.starts) == 0:
            return np.zeros(len(qs), "int64")
        run_end = np.maximum.accumulate(self.ends)
        new_block = np.r_[True, self.starts[1:] > run_end[:-1]]
        idx = np.flatnonzero(new_block)
        b_start = self.starts[idx]
        b_end = np.maximum.reduceat(self.ends, idx)
        b_len = b_end - b_start
        before = np.r_[0, np.cumsum(b_len)]  # union length before each block

        def upto(t: np.ndarray) -> np.ndarray:
            i = np.searchsorted(b_start, t, side="right") - 1
            inside = np.clip(t - b_start[np.maximum(i, 0)], 0, b_len[np.maximum(i, 0)])
            return np.where(i >= 0, before[np.maximum(i, 0)] + inside, 0)

        return upto(qe) - upto(qs)

    def points_inside(self, qs: np.ndarray, qe: np.ndarray) -> np.ndarray:
        """Zero-length intervals (instants) inside each [qs, qe]."""
        points = self.starts[self.ends == self.starts]
        return np.searchsorted(points, qe, side="right") - np.searchsorted(points, qs, "left")

    def best(self, s: int, e: int) -> str:
        """Words for the interval overlapping [s, e] the most ('' if none)."""
        if len(self.starts) == 0:
            return ""
        longest = int((self.ends - self.starts).max())
        lo = np.searchsorted(self.starts, s - longest, side="left")
        hi = np.searchsorted(self.starts, e, side="right")
        if hi <= lo:
            return ""
        overlap = np.minimum(self.ends[lo:hi], e) - np.maximum(self.starts[lo:hi], s)
        k = int(np.argmax(overlap))
        return self.describe(int(self.ids[lo + k])) if overlap[k] >= 0 else ""


def _no_evidence() -> _Evidence:
    empty = np.array([], "int64")
    return _Evidence(empty, empty, empty, str)


def _xid(x: int) -> str:
    return f"xid {int(x):#010x}"


@dataclass(frozen=True)
class _Calls:
    """One pair's calls (prepared transactions with a call), as arrays."""

    frame: pd.DataFrame  # every pair's calls, sorted by pair ...
    rows: slice  # ... and this pair's (a frame for the rare JUKEBOX/DELAY retry lookup)
    ops: np.ndarray  # op names, "?" where unknown
    t_call: np.ndarray
    t_reply: np.ndarray  # unanswered: when it stopped being outstanding (call_ends_ns)
    answered: np.ndarray
    xids: np.ndarray
    n_calls: np.ndarray
    status: np.ndarray  # -1 where unknown


class _ByPair:
    """The calls, the outstanding steps and the TCP events of each client/server
    pair: each table converted and split once, so a stalled pair costs a slice of
    arrays (not a filter of every table per pair)."""

    def __init__(self, tx: pd.DataFrame, steps: pd.DataFrame, events: pd.DataFrame | None):
        self.end_of_trace = trace_end_ns(tx)
        calls = rows_where(tx, tx["n_calls"] > 0)
        calls = calls.iloc[np.argsort(calls["pair"].to_numpy(), kind="stable")]
        self._call_pair = calls["pair"].to_numpy()
        self._calls = _Calls(
            calls,
            slice(0, len(calls)),
            calls["op"].astype(object).fillna("?").to_numpy(),
            calls["t_call_ns"].to_numpy("int64"),
            call_ends_ns(calls, self.end_of_trace),
            calls["t_reply_ns"].notna().to_numpy(),
            calls["xid"].to_numpy("int64"),
            calls["n_calls"].to_numpy("int64"),
            calls["status"].astype("Int64").fillna(-1).to_numpy("int64"),
        )
        # steps_with_pairs: sorted by pair, then time
        self._step_pair = steps["pair"].to_numpy()
        self._step_t = steps["t_ns"].to_numpy("int64")
        self._step_level = steps["outstanding"].to_numpy("int64")
        self._zero_windows: dict[tuple, pd.DataFrame] = {}
        self._retransmissions: dict[frozenset, np.ndarray] = {}
        if events is None or events.empty or "kind" not in events:
            return
        kind = events["kind"].astype(object)
        z = events[kind.eq("tcp_zero_window")]
        for key, rows in _by_hosts(z).items():
            self._zero_windows[key] = z.iloc[rows]
        r = events[kind.eq("tcp_retransmission")]
        ts = r["ts_ns"].to_numpy("int64")
        for (src, dst), rows in _by_hosts(r).items():  # either direction
            hosts = frozenset((src, dst))
            self._retransmissions[hosts] = np.r_[self._retransmissions.get(hosts, []), ts[rows]]

    def calls(self, pair: int) -> _Calls:
        lo, hi = np.searchsorted(self._call_pair, [pair, pair + 1])
        c = self._calls
        return _Calls(
            frame=c.frame,
            rows=slice(lo, hi),
            ops=c.ops[lo:hi],
            t_call=c.t_call[lo:hi],
            t_reply=c.t_reply[lo:hi],
            answered=c.answered[lo:hi],
            xids=c.xids[lo:hi],
            n_calls=c.n_calls[lo:hi],
            status=c.status[lo:hi],
        )

    def steps(self, pair: int) -> tuple[np.ndarray, np.ndarray]:
        """The pair's outstanding step function: change times and levels."""
        lo, hi = np.searchsorted(self._step_pair, [pair, pair + 1])
        return self._step_t[lo:hi], self._step_level[lo:hi]

    def zero_windows(self, client: str, server: str) -> pd.DataFrame | None:
        """Zero windows the server advertised to the client."""
        return self._zero_windows.get((server, client))

    def retransmissions(self, client: str, server: str) -> np.ndarray:
        """Times of the TCP retransmissions between the two, sorted."""
        times = self._retransmissions.get(frozenset((client, server)))
        return np.zeros(0, "int64") if times is None else np.sort(times.astype("int64"))


def _by_hosts(events: pd.DataFrame) -> dict[tuple, np.ndarray]:
    """Row positions per (src, dst) (addresses as Python strings; missing ones left out)."""
    hosts = [events["src"].astype(object), events["dst"].astype(object)]
    return dict(events.groupby(hosts, sort=False).indices) if len(events) else {}


def _evidence(
    p: _Calls,
    end_of_trace: int,
    steps: tuple[np.ndarray, np.ndarray],
    zero_windows: pd.DataFrame | None,
) -> dict[str, _Evidence]:
    """Every cause's intervals for one client/server pair: ``p`` its calls,
    ``steps`` its outstanding steps, ``zero_windows`` those the server advertised."""
    ops, t_call, t_reply, xids, n_calls = p.ops, p.t_call, p.t_reply, p.xids, p.n_calls
    out: dict[str, _Evidence] = {}

    def where(mask: np.ndarray, describe: Callable[[int], str]) -> _Evidence:
        rows = np.flatnonzero(mask)
        return _Evidence.of(t_call[rows], t_reply[rows], lambda i: describe(int(rows[i])))

    def waited(i: int) -> str:
        return seconds_text(t_reply[i] - t_call[i])

    out["commit"] = where(
        ops == COMMIT_OP, lambda i: f"COMMIT {_xid(xids[i])} in flight {waited(i)}"
    )
    out["retransmission"] = where(
        n_calls > 1,
        lambda i: f"{ops[i]} {_xid(xids[i])} sent {n_calls[i]} times, waited {waited(i)}",
    )

    delayed = (p.status == SERVER_DELAY_STATUS) & p.answered
    if delayed.any():
        rows = np.flatnonzero(delayed)
        retry = _next_same_call(p.frame.iloc[p.rows], delayed, end_of_trace)
        out["server_delay"] = _Evidence.of(
            t_call[rows],
            np.maximum(retry, t_reply[rows]),
            lambda i: (
                f"{ops[rows[i]]} {_xid(xids[rows[i]])} answered JUKEBOX/DELAY (10008), "
                f"retried after {seconds_text(retry[i] - t_reply[rows[i]])}"
            ),
        )
    else:
        out["server_delay"] = _no_evidence()

    out["zero_window"] = _zero_windows(zero_windows)

    # Not a cause: every RPC in flight, to name the one an unexplained stall waited on.
    out["in_flight"] = where(
        np.ones(len(t_call), dtype=bool),
        lambda i: f"{ops[i]} {_xid(xids[i])} waited {waited(i)} for its reply",
    )

    t, level = steps
    idle = level == 0
    idle_end = np.r_[t[1:], end_of_trace][idle]
    out["client_idle"] = _Evidence.of(t[idle], idle_end, lambda i: "nothing outstanding")
    return out


def _next_same_call(p: pd.DataFrame, delayed: np.ndarray, end_of_trace: int) -> np.ndarray:
    """For each delayed transaction, the client's next call of the same
    operation on the same file handle after the reply (the retry)."""
    keys = ["op", "fh"]
    calls = pd.DataFrame(
        {
            "t": p["t_call_ns"].to_numpy("int64"),
            "retry": p["t_call_ns"].astype("Int64").array,  # nullable: stays exact ns
            "op": p["op"].astype(object).fillna("").to_numpy(),
            "fh": p["fh"].astype(object).fillna("").to_numpy(),
        }
    ).sort_values("t", kind="stable")
    d = p[delayed]
    q = pd.DataFrame(
        {
            "t": d["t_reply_ns"].astype("int64").to_numpy(),
            "op": d["op"].astype(object).fillna("").to_numpy(),
            "fh": d["fh"].astype(object).fillna("").to_numpy(),
            "row": np.arange(len(d)),
        }
    ).sort_values("t", kind="stable")
    linked = pd.merge_asof(q, calls, on="t", by=keys, direction="forward")
    linked = linked.sort_values("row")
    return linked["retry"].fillna(end_of_trace).to_numpy("int64")


def _zero_windows(z: pd.DataFrame | None) -> _Evidence:
    if z is None or z.empty:
        return _no_evidence()
    start = z["ts_ns"].to_numpy("int64")
    if "duration_ns" in z:
        duration = z["duration_ns"].astype("Int64").fillna(0).to_numpy("int64")
    else:
        duration = np.zeros(len(z), "int64")

    def describe(i: int) -> str:
        lasted = f" for {seconds_text(duration[i])}" if duration[i] else ""
        return f"server advertised a zero TCP window{lasted}"

    return _Evidence.of(start, start + duration, describe)


# ---- threshold ---------------------------------------------------------------------


def _progress_points(
    activity: pd.DataFrame, progress: pd.DataFrame
) -> list[tuple[int, str, str, np.ndarray, np.ndarray]]:
    """Per pair: its code, client, server, progress points (start, each WRITE
    reply, end) and the cumulative bytes at each point."""
    rows = progress.groupby("pair", sort=False).indices
    # the columns as arrays once (per pair, the whole column each time: quadratic)
    times, sizes = progress["t_ns"].to_numpy("int64"), progress["bytes"].to_numpy("int64")
    out = []
    for a in activity.itertuples(index=False):
        at = rows.get(a.pair, np.array([], "int64"))
        t, b = times[at], sizes[at]
        keep = (t >= a.start_ns) & (t <= a.end_ns)
        t, b = t[keep], b[keep]
        points = np.r_[a.start_ns, t, a.end_ns]
        cum = np.r_[0, np.cumsum(b), b.sum()]
        out.append((a.pair, a.client, a.server, points, cum))
    return out


def default_threshold(tx: pd.DataFrame, gaps: np.ndarray) -> tuple[int, str]:
    """The threshold from the trace's own pace, and how it was derived."""
    w = tx[tx["op"].eq(WRITE_OP) & tx["latency_ns"].notna()]
    latency = float(np.median(w["latency_ns"].to_numpy("int64"))) if len(w) else 0.0
    gap = float(np.median(gaps)) if len(gaps) else 0.0
    pace = max(latency, gap)
    threshold = int(max(THRESHOLD_FLOOR_NS, THRESHOLD_PACE_MULTIPLE * pace))
    method = (
        f"max({seconds_text(THRESHOLD_FLOOR_NS)} floor, {THRESHOLD_PACE_MULTIPLE} x pace); "
        f"pace = max(median WRITE call->reply {seconds_text(latency)}, median gap between "
        f"WRITE replies {seconds_text(gap)}) = {seconds_text(pace)}"
    )
    return threshold, method


# ---- the result ---------------------------------------------------------------------


@dataclass(frozen=True)
class StallsResult:
    """Stalls of the write activity and the stretches between them.

    stalls: ``STALL_COLUMNS``; segments: ``SEGMENT_COLUMNS``.  Times add over
    client/server pairs (pair-time); throughputs are bytes over that time.
    """

    threshold_ns: int
    threshold_method: str
    stalls: pd.DataFrame = field(metadata=json_field(convert=len, then=("stalls_by_cause",)))
    time_lost_by_cause: dict[str, int]
    activity_ns: int  # write activity, pair-time
    bytes_written: int  # acknowledged within it
    throughput_mbit_s: float  # bytes / activity
    transfer_mbit_s: float  # bytes in segments / segment time (the slope between stalls)
    segments: pd.DataFrame = field(metadata=json_field(convert=len, then=("longest",)))

    @property
    def stalled_ns(self) -> int:
        return int(sum(self.time_lost_by_cause.values()))

    @property
    def stalls_by_cause(self) -> dict[str, int]:
        return {str(k): int(v) for k, v in self.stalls["cause"].value_counts().items()}

    @property
    def longest(self) -> pd.DataFrame:
        """The LONGEST_LISTED longest stalls, longest first: when, how long, why."""
        if self.stalls.empty:
            return pd.DataFrame(columns=list(LONGEST_COLUMNS))
        return self.stalls.nlargest(LONGEST_LISTED, "duration_ns")[list(LONGEST_COLUMNS)]

    def findings(self) -> list[Finding]:
        out: list[Finding] = []
        if self.stalls.empty or self.activity_ns <= 0:
            return out
        total = seconds_text(self.activity_ns)
        for cause in (*CAUSES, UNKNOWN):
            part = self.stalls[self.stalls["cause"] == cause]
            if part.empty:
                continue
            lost = int(part["duration_ns"].sum())
            share = lost / self.activity_ns
            one, many, note = _PHRASES[cause]
            n = len(part)
            severity: Severity = (
                "info" if cause == "client_idle" else "problem" if share >= 0.2 else "warning"
            )
            out.append(
                Finding(
                    kind=f"{cause}_stall",
                    title=f"{n} {one if n == 1 else many}{note} cost {seconds_text(lost)} "
                    f"of {total} ({share:.0%})",
                    severity=severity,
                    time_lost_ns=lost,
                    details={
                        "stalls": n,
                        "time_lost_ns": lost,
                        "activity_ns": self.activity_ns,
                        "share": share,
                        "longest_ns": int(part["duration_ns"].max()),
                        "threshold_ns": self.threshold_ns,
                    },
                )
            )
        out.append(
            Finding(
                kind="stall_throughput",
                title=f"Writes moved at {self.throughput_mbit_s:,.1f} Mbit/s overall, "
                f"{self.transfer_mbit_s:,.1f} Mbit/s between stalls",
                details={
                    "throughput_mbit_s": self.throughput_mbit_s,
                    "transfer_mbit_s": self.transfer_mbit_s,
                    "stalled_ns": self.stalled_ns,
                },
            )
        )
        return out


def _mbit_s(nbytes: float, ns: float) -> float:
    return nbytes * 8e3 / ns if ns > 0 else float("nan")


def _attribute(
    s: np.ndarray, e: np.ndarray, evidence: dict[str, _Evidence]
) -> tuple[list[str], list[str], list[float]]:
    length = np.maximum(e - s, 1).astype("float64")
    share = {c: evidence[c].coverage(s, e) / length for c in CAUSES}
    points = evidence["zero_window"].points_inside(s, e) > 0
    causes, details, shares = [], [], []
    for i in range(len(s)):
        applies = [c for c in CAUSES if share[c][i] >= APPLIES_AT]
        if points[i] and "zero_window" not in applies:
            applies = [c for c in CAUSES if c in applies or c == "zero_window"]
        if applies:
            cause = applies[0]
        else:
            best = max(CAUSES, key=lambda c: share[c][i])
            cause = best if share[best][i] >= FALLBACK_AT else UNKNOWN
        others = [f"{c} {share[c][i]:.0%}" for c in CAUSES if c != cause and share[c][i] >= 0.01]
        if cause == UNKNOWN:
            waited = evidence["in_flight"].best(int(s[i]), int(e[i]))
            text = (f"{waited}; " if waited else "") + (
                "no COMMIT, re-send, JUKEBOX/DELAY, zero window or idle client in the interval"
            )
        else:
            label = evidence[cause].best(int(s[i]), int(e[i])) or cause
            text = f"{label}; covers {share[cause][i]:.0%} of the stall"
        if others:
            text += "; also " + ", ".join(others)
        causes.append(cause)
        details.append(text)
        shares.append(float(share[cause][i]) if cause != UNKNOWN else 0.0)
    return causes, details, shares


def _table(parts: list[dict[str, np.ndarray]]) -> pd.DataFrame:
    """The pairs' parts as one table, made once (not a frame per pair, then a
    concat); text columns as the str dtype, as pandas makes them from strings."""
    columns = {c: np.concatenate([part[c] for part in parts]) for c in parts[0]}
    return pd.DataFrame(
        {c: pd.array(v, dtype="str") if v.dtype == object else v for c, v in columns.items()}
    )


def find_stalls(
    transactions: pd.DataFrame,
    events: pd.DataFrame | None,
    threshold_ns: int | None = None,
    capture_point: str = "unknown",
    *,
    activity: pd.DataFrame | None = None,
    progress: pd.DataFrame | None = None,
) -> StallsResult:
    """Stalls and the segments between them (``capture_point``: from
    ``quality.assess_capture``; on the server side a call lost on the way never
    shows, so "nothing outstanding" may be a re-send the server did not see).
    ``activity`` / ``progress``: ``writes.activity_with_pairs`` and
    ``progress_with_pairs`` of the prepared transactions when the caller has
    them (the diagnosis shares them with pace and the progress table)."""
    tx = prepared(transactions)
    if activity is None:
        activity = activity_with_pairs(tx)
    if progress is None:
        progress = progress_with_pairs(tx)
    per_pair = _progress_points(activity, progress)
    gaps = np.concatenate([np.diff(points[:-1]) for *_, points, _ in per_pair] or [np.zeros(0)])
    if threshold_ns is None:
        threshold_ns, method = default_threshold(tx, gaps)
    else:
        method = f"given: {seconds_text(threshold_ns)}"
    by_pair = None  # the tables split by pair, made when a first stall needs them

    stall_parts, segment_parts = [], []
    activity_ns = bytes_written = 0
    for pair, client, server, points, cum in per_pair:
        activity_ns += int(points[-1] - points[0])
        bytes_written += int(cum[-1])
        gap = np.diff(points)
        stalled = np.flatnonzero(gap > threshold_ns)
        s, e = points[stalled], points[stalled + 1]
        if len(stalled):
            by_pair = by_pair or _ByPair(tx, steps_with_pairs(tx), events)
            evidence = _evidence(
                by_pair.calls(pair),
                by_pair.end_of_trace,
                by_pair.steps(pair),
                by_pair.zero_windows(client, server),
            )
            causes, details, shares = _attribute(s, e, evidence)
            retrans = by_pair.retransmissions(client, server)
            for i, cause in enumerate(causes):
                if cause == "client_idle" and capture_point == "server":
                    details[i] += (
                        "; seen from the server: the client sent nothing, or its calls were "
                        "lost on the way (a server-side capture cannot tell)"
                    )
                if cause == UNKNOWN:
                    n = int(
                        np.searchsorted(retrans, e[i], "right")
                        - np.searchsorted(retrans, s[i], "left")
                    )
                    if n:
                        details[i] += f"; {n} TCP retransmissions"
            stall_parts.append(
                {
                    "start_ns": s,
                    "end_ns": e,
                    "duration_ns": e - s,
                    "cause": np.array(causes, dtype=object),
                    "detail": np.array(details, dtype=object),
                    "client": np.full(len(s), client, dtype=object),
                    "server": np.full(len(s), server, dtype=object),
                    "cause_share": np.array(shares, dtype="float64"),
                }
            )
        # segments between stalls: progress point indices [0, stalled..., stalled+1..., last]
        seg_lo = np.r_[0, stalled + 1]
        seg_hi = np.r_[stalled, len(points) - 1]
        seg_s, seg_e = points[seg_lo], points[seg_hi]
        nbytes = cum[seg_hi] - cum[seg_lo]
        nwrites = np.minimum(seg_hi, len(points) - 2) - np.minimum(seg_lo, len(points) - 2)
        keep = seg_e > seg_s
        segment_parts.append(
            {
                "start_ns": seg_s[keep],
                "end_ns": seg_e[keep],
                "duration_ns": (seg_e - seg_s)[keep],
                "bytes": nbytes[keep],
                "writes": nwrites[keep],
                "mbit_s": nbytes[keep] * 8e3 / (seg_e - seg_s)[keep],
                "client": np.full(keep.sum(), client, dtype=object),
                "server": np.full(keep.sum(), server, dtype=object),
            }
        )

    stalls = _table(stall_parts) if stall_parts else _empty(STALL_COLUMNS)
    segments = _table(segment_parts) if segment_parts else _empty(SEGMENT_COLUMNS)
    if len(stalls):
        stalls = stalls.sort_values("start_ns", kind="stable", ignore_index=True)
    lost = stalls.groupby("cause")["duration_ns"].sum() if len(stalls) else pd.Series()
    time_lost = {c: int(lost[c]) for c in (*CAUSES, UNKNOWN) if c in lost.index}
    seg_ns = int(segments["duration_ns"].sum()) if len(segments) else 0
    seg_bytes = int(segments["bytes"].sum()) if len(segments) else 0
    return StallsResult(
        threshold_ns=int(threshold_ns),
        threshold_method=method,
        stalls=stalls[list(STALL_COLUMNS)] if len(stalls) else stalls,
        segments=segments[list(SEGMENT_COLUMNS)] if len(segments) else segments,
        time_lost_by_cause=time_lost,
        activity_ns=activity_ns,
        bytes_written=bytes_written,
        throughput_mbit_s=_mbit_s(bytes_written, activity_ns),
        transfer_mbit_s=_mbit_s(seg_bytes, seg_ns),
    )
