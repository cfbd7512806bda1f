"""The workload view: what the client asked for and how the server answered under load.

- Operation mix against the LADDIS / SPEC SFS default mix (NFSv3 and v4
  operations mapped to their NFSv2 counterparts; the rest shown apart).
- Response time vs throughput per time window, summarised as the SFS
  "signature": the base latency at low load, the slope of latency against
  throughput, and where latency turns up (saturation).
- Little's law: the mean number of calls outstanding should equal
  throughput x mean latency; when a given outstanding count disagrees, the
  capture misses calls or replies, or the count measures something else.

Only NFS calls with a reply count (a call without a reply has no latency).
A pure function of the transactions table; no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from nfstrace.analysis.findings import Finding
from nfstrace.analysis.grouping import rows_where, sorted_search
from nfstrace.jsonable import NOT_IN_JSON, json_field, jsonable
from nfstrace.protocol.rpc import NFS_PROGRAM

# SPEC SFS 1.0 (LADDIS) default operation mix, NFSv2 operation names.
LADDIS_MIX: dict[str, float] = {
    "LOOKUP": 0.34,
    "READ": 0.22,
    "WRITE": 0.15,
    "GETATTR": 0.13,
    "READLINK": 0.08,
    "READDIR": 0.03,
    "CREATE": 0.03,
    "SETATTR": 0.01,
    "REMOVE": 0.01,
    "STATFS": 0.01,
}

# NFSv3 / NFSv4 operation -> its NFSv2 (LADDIS) counterpart.  Operations
# absent here and from LADDIS_MIX are shown apart as "other: <op>".
V2_COUNTERPART: dict[str, str] = {
    "LOOKUPP": "LOOKUP",
    "ACCESS": "GETATTR",
    "READDIRPLUS": "READDIR",
    "MKDIR": "CREATE",
    "MKNOD": "CREATE",
    "SYMLINK": "CREATE",
    "RMDIR": "REMOVE",
    "FSSTAT": "STATFS",
}

OP_MIX_COLUMNS: dict[str, str] = {
    "category": "LADDIS operation (NFSv2 name), or 'other: <op>' for operations outside the mix",
    "calls": "NFS calls in the capture of that category",
    "share": "calls / all NFS calls",
    "laddis_share": "share in the LADDIS default mix (NaN for 'other')",
    "ops": "the capture's operations counted in the category, most calls first "
    "('ACCESS, GETATTR'; empty when none)",
}

WINDOW_COLUMNS: dict[str, str] = {
    "start_ns": "window start (int ns since epoch)",
    "calls": "answered NFS calls sent once whose call started in the window (a re-sent "
    "call's latency is its timeout, not the server's load)",
    "ops_per_s": "calls / window length",
    "mbit_s": "bytes written + read by replies in the window, Mbit/s (10^6 bits)",
    "mean_latency_ms": "mean call->reply latency of the window's calls (NaN: none)",
}

# Default window: the answered span cut into this many windows, at least 1 ms each.
DEFAULT_WINDOWS = 20
MIN_WINDOW_NS = 1_000_000
# A window takes part in the signature fit with at least this many calls.
MIN_WINDOW_CALLS = 3
# Latency "turns up" when it exceeds this multiple of the base latency.
SATURATION_FACTOR = 2.0
# Little's law holds when |N - X*R| <= this fraction of X*R.
LITTLE_TOLERANCE = 0.10


def outstanding(
    transactions: pd.DataFrame, start_ns: int | None = None, end_ns: int | None = None
) -> tuple[float, int]:
    """Time-weighted mean and maximum of calls outstanding (call sent, reply not yet seen).

    Counts answered transactions only, each from ``t_call_ns`` to ``t_reply_ns``, over
    [start_ns, end_ns] (default: first call to last reply).  (NaN, 0) when empty.
    """
    call, reply = transactions["t_call_ns"], transactions["t_reply_ns"]
    answered = (call.notna() & reply.notna()).to_numpy()  # (two columns, not every one)
    if not answered.any():
        return math.nan, 0
    calls = call.to_numpy("int64", na_value=0)[answered]
    replies = reply.to_numpy("int64", na_value=0)[answered]
    del answered
    t0 = int(calls.min()) if start_ns is None else start_ns
    t1 = int(replies.max()) if end_ns is None else end_ns
    if t1 <= t0:
        return math.nan, 0
    busy = np.minimum(replies, t1)
    busy -= np.maximum(calls, t0)
    mean = float(np.clip(busy, 0, None, out=busy).sum()) / (t1 - t0)
    del busy
    inside = (calls < t1) & (replies > t0)
    # (stable: a merge sort, quick on the nearly sorted times; the same values)
    calls = np.sort(calls[inside], kind="stable")
    replies = np.sort(replies[inside], kind="stable")
    # Sweep: +1 at each call, -1 at each reply (replies first on ties): the count
    # is highest just after a call, at (calls so far) - (replies at or before it).
    # (Sorted calls and replies apart: not a sort of both with their steps.)
    if not len(calls):
        return mean, 0
    after = np.arange(1, len(calls) + 1)
    after -= sorted_search(replies, calls, side="right")
    return mean, int(after.max())


def outstanding_means(
    transactions: pd.DataFrame, starts: np.ndarray, ends: np.ndarray
) -> np.ndarray:
    """``outstanding(transactions, s, e)[0]`` for many windows at once.

    The busy time in [s, e] is I(e) - I(s), where I(x) = sum over calls of the time
    each was outstanding before x = x * #(calls <= x) - sum(call times <= x)
    - x * #(replies <= x) + sum(reply times <= x): prefix sums of the sorted call and
    reply times, not a pass over every call per window.  Exact integers, so the
    means are those ``outstanding`` gives.
    """
    starts, ends = np.asarray(starts, "int64"), np.asarray(ends, "int64")
    means = np.full(len(starts), math.nan)
    answered = transactions.dropna(subset=["t_call_ns", "t_reply_ns"])
    if answered.empty:
        return means
    calls = answered["t_call_ns"].to_numpy(dtype="int64")
    replies = answered["t_reply_ns"].to_numpy(dtype="int64")
    if (replies < calls).any():  # not intervals: the per-window definition
        pairs = zip(starts.tolist(), ends.tolist(), strict=True)
        return np.array([outstanding(answered, s, e)[0] for s, e in pairs], dtype="float64")
    base = int(calls.min())  # times relative to it, and Python ints: no int64 overflow
    c, r = np.sort(calls - base, kind="stable"), np.sort(replies - base, kind="stable")
    sum_c = np.r_[0, np.cumsum(c.astype(object))]
    sum_r = np.r_[0, np.cumsum(r.astype(object))]

    def before(x: int) -> int:
        x -= base
        nc, nr = int(np.searchsorted(c, x, "right")), int(np.searchsorted(r, x, "right"))
        return x * nc - sum_c[nc] - x * nr + sum_r[nr]

    for i, (s, e) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        if e > s:
            means[i] = float(before(e) - before(s)) / (e - s)
    return means


def _category(op: str) -> str:
    v2 = V2_COUNTERPART.get(op, op)
    return v2 if v2 in LADDIS_MIX else f"other: {op}"


def op_mix(nfs_calls: pd.DataFrame) -> pd.DataFrame:
    """Calls per LADDIS category, LADDIS categories first (in mix order), then the others."""
    # each distinct operation categorised once, then the rows' categories counted
    names, per_op = _ops_counted(nfs_calls["op"])
    categories = np.array([_category(str(op)) for op in names], dtype=object)
    # the calls per category, the categories in the order of their first call,
    # most first (ties in that order): value_counts of the rows' categories
    first_seen: dict[str, int] = {}
    for category, n in zip(categories, per_op, strict=True):
        first_seen[category] = first_seen.get(category, 0) + int(n)
    counts = pd.Series(first_seen, dtype="int64").sort_values(ascending=False, kind="stable")
    ops: dict[str, list[tuple[int, str]]] = {}
    for op, category, n in zip(names, categories, per_op, strict=True):
        ops.setdefault(category, []).append((-int(n), str(op)))
    total = int(counts.sum())
    rows = [(c, int(counts.get(c, 0)), share) for c, share in LADDIS_MIX.items()]
    rows += [(c, int(n), math.nan) for c, n in counts.items() if c not in LADDIS_MIX]
    table = pd.DataFrame(rows, columns=["category", "calls", "laddis_share"])
    table["share"] = table["calls"] / total if total else math.nan
    table["ops"] = [", ".join(op for _n, op in sorted(ops.get(c, []))) for c in table["category"]]
    return table[list(OP_MIX_COLUMNS)]


def _ops_counted(op: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """The operations called (missing: '?'), in the order of their first call,
    and the calls of each: ``pd.factorize(op.astype(object).fillna("?"))``'s
    names and a count per code, from a category column's codes (no Python
    object per row, no hash of the rows)."""
    if (
        not isinstance(op.dtype, pd.CategoricalDtype)
        or not pd.api.types.is_string_dtype(op.cat.categories.dtype)
        or "?" in op.cat.categories
    ):
        codes, names = pd.factorize(op.astype(object).fillna("?"))
        return np.asarray(names, dtype=object), np.bincount(codes, minlength=len(names))
    codes = op.cat.codes.to_numpy()
    counted = np.bincount(codes.astype("int64") + 1, minlength=len(op.cat.categories) + 1)
    present = np.flatnonzero(counted)  # 0: missing, k: category k - 1
    first = [int(np.argmax(codes == code - 1)) for code in present]
    present = present[np.argsort(first, kind="stable")]
    values = np.asarray(op.cat.categories, dtype=object)
    names = np.array(["?" if code == 0 else values[code - 1] for code in present], dtype=object)
    return names, counted[present]


def _mix_text(top: pd.Series) -> str:
    """The largest category of the mix in words: its operations, and the LADDIS
    category they fall in when that is not their own name (ACCESS counts as
    GETATTR)."""
    category, ops = str(top["category"]), str(top["ops"])
    if category.startswith("other: "):
        return f"{ops} ({top['share']:.0%}, outside the LADDIS mix)"
    if ops == category:
        return f"{ops} ({top['share']:.0%})"
    return f"{ops} ({top['share']:.0%}, the LADDIS {category} category)"


def _windows(answered: pd.DataFrame, window_ns: int) -> pd.DataFrame:
    t0 = int(answered["t_call_ns"].min())
    t1 = int(answered["t_reply_ns"].max())
    n = max(1, math.ceil((t1 - t0) / window_ns))
    starts = t0 + window_ns * np.arange(n, dtype="int64")
    by_call = ((answered["t_call_ns"].to_numpy(dtype="int64") - t0) // window_ns).clip(0, n - 1)
    by_reply = ((answered["t_reply_ns"].to_numpy(dtype="int64") - t0) // window_ns).clip(0, n - 1)
    latency = answered["latency_ns"].to_numpy(dtype="float64")
    moved = (answered["write_bytes"] + answered["read_bytes"]).to_numpy(dtype="float64")
    calls = np.bincount(by_call, minlength=n)
    latency_sum = np.bincount(by_call, weights=latency, minlength=n)
    bytes_moved = np.bincount(by_reply, weights=moved, minlength=n)
    seconds = window_ns / 1e9
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_ms = np.where(calls > 0, latency_sum / calls / 1e6, np.nan)
    return pd.DataFrame(
        {
            "start_ns": starts,
            "calls": calls.astype("int64"),
            "ops_per_s": calls / seconds,
            "mbit_s": bytes_moved * 8 / seconds / 1e6,
            "mean_latency_ms": mean_ms,
        }
    )


def _signature(windows: pd.DataFrame) -> tuple[float, float, float | None]:
    """(base_ms, slope in ms per op/s, saturation ops/s or None) of latency vs throughput."""
    w = windows[windows["calls"] >= MIN_WINDOW_CALLS].sort_values("ops_per_s", kind="stable")
    if w.empty:
        return math.nan, math.nan, None
    x = w["ops_per_s"].to_numpy(dtype="float64")
    y = w["mean_latency_ms"].to_numpy(dtype="float64")
    # Base: latency of the lightest-loaded third of the windows (robust to a few slow ones).
    base = float(np.median(y[: max(1, len(y) // 3)]))
    if len(w) < 3 or w["ops_per_s"].nunique() < 2:
        return base, math.nan, None  # one load level: no slope, no knee
    slope = float(np.polyfit(x, y, 1)[0])
    high = y > SATURATION_FACTOR * base
    # Saturation: the lowest throughput from which on most windows are slow.
    for i in np.flatnonzero(high):
        if high[i:].mean() >= 0.5 and (len(y) - i) >= 2:
            return base, slope, float(x[i])
    return base, slope, None


@dataclass(frozen=True)
class WorkloadResult:
    """Operation mix, load windows, SFS signature and Little's-law check.

    op_mix: ``OP_MIX_COLUMNS``; windows: ``WINDOW_COLUMNS``.
    base_ms / slope (ms per op/s) / saturation (ops/s): latency vs throughput per window.
    Little: outstanding_mean (source "given" or "computed") vs throughput_ops_s x
    mean_latency_s over [span_start_ns, span_end_ns]; little_ok within LITTLE_TOLERANCE.
    """

    calls: int
    op_mix: pd.DataFrame
    window_ns: int
    windows: pd.DataFrame = field(
        metadata=json_field(convert=len, then=("signature", "littles_law"))
    )
    # in the JSON under signature and littles_law
    base_ms: float = field(metadata=NOT_IN_JSON)
    slope: float = field(metadata=NOT_IN_JSON)
    saturation: float | None = field(metadata=NOT_IN_JSON)
    span_start_ns: int = field(metadata=NOT_IN_JSON)
    span_end_ns: int = field(metadata=NOT_IN_JSON)
    outstanding_mean: float = field(metadata=NOT_IN_JSON)
    outstanding_source: str = field(metadata=NOT_IN_JSON)
    throughput_ops_s: float = field(metadata=NOT_IN_JSON)
    mean_latency_s: float = field(metadata=NOT_IN_JSON)
    little_product: float = field(metadata=NOT_IN_JSON)  # throughput x mean latency
    little_ok: bool | None = field(metadata=NOT_IN_JSON)  # None: nothing to check

    def findings(self) -> list[Finding]:
        out: list[Finding] = []
        if self.calls == 0:
            return out
        mix = self.op_mix
        top = mix.sort_values("calls", ascending=False).iloc[0]
        writes = float(mix.loc[mix["category"] == "WRITE", "share"].sum())
        out.append(
            Finding(
                kind="workload_mix",
                title=(
                    f"{self.calls:,} NFS call{'s' * (self.calls != 1)}, mostly "
                    f"{_mix_text(top)}; WRITE is {writes:.0%} of calls "
                    f"(LADDIS mix: {LADDIS_MIX['WRITE']:.0%})"
                ),
                details={"op_mix": jsonable(mix)},
            )
        )
        if self.saturation is not None:
            out.append(
                Finding(
                    kind="workload_saturation",
                    title=(
                        f"latency turns up above {self.saturation:,.0f} ops/s "
                        f"(more than {SATURATION_FACTOR:g}x the base {self.base_ms:.3f} ms)"
                    ),
                    severity="warning",
                    details={"base_ms": self.base_ms, "slope": self.slope},
                )
            )
        if self.little_ok is False:
            out.append(
                Finding(
                    kind="littles_law_mismatch",
                    title=(
                        f"Little's law does not hold: {self.outstanding_mean:.2f} calls "
                        f"outstanding ({self.outstanding_source}) vs throughput x latency "
                        f"= {self.little_product:.2f}: calls or replies are missing from the "
                        "capture, or the outstanding count measures something else"
                    ),
                    severity="warning",
                    details=jsonable(self.littles_law),
                )
            )
        return out

    @property
    def signature(self) -> dict[str, Any]:
        """Latency vs throughput per window, in the units its keys say."""
        return {
            "base_ms": self.base_ms,
            "slope_ms_per_op_s": self.slope,
            "saturation_ops_s": self.saturation,
        }

    @property
    def littles_law(self) -> dict[str, Any]:
        """The Little's-law check: what it compared, over which span, its verdict."""
        return {
            "outstanding_mean": self.outstanding_mean,
            "outstanding_source": self.outstanding_source,
            "throughput_ops_s": self.throughput_ops_s,
            "mean_latency_s": self.mean_latency_s,
            "product": self.little_product,
            "tolerance": LITTLE_TOLERANCE,
            "ok": self.little_ok,
            "span_start_ns": self.span_start_ns,
            "span_end_ns": self.span_end_ns,
        }


def analyze_workload(
    transactions: pd.DataFrame,
    *,
    outstanding_mean: float | None = None,
    window_ns: int | None = None,
) -> WorkloadResult:
    """The workload view of the NFS calls in ``transactions`` (schema TRANSACTION_COLUMNS).

    outstanding_mean: time-weighted mean of NFS calls outstanding over the span of the
    answered NFS calls (first call to last reply), e.g. from the pace module; computed
    from the transactions when None.  window_ns: load-window length (default: the span
    cut in DEFAULT_WINDOWS, at least MIN_WINDOW_NS).
    """
    # the columns read (rows of every column would be copied where some are left out)
    used = ["op", "n_calls", "t_call_ns", "t_reply_ns", "latency_ns", "write_bytes", "read_bytes"]
    nfs = rows_where(
        transactions[used], (transactions["prog"] == NFS_PROGRAM) & (transactions["n_calls"] > 0)
    )
    mix = op_mix(nfs)
    answered = nfs.dropna(subset=["t_call_ns", "t_reply_ns", "latency_ns"])
    if answered.empty:
        empty = pd.DataFrame({c: pd.Series(dtype="float64") for c in WINDOW_COLUMNS})
        return WorkloadResult(
            op_mix=mix,
            windows=empty,
            window_ns=window_ns or MIN_WINDOW_NS,
            calls=len(nfs),
            base_ms=math.nan,
            slope=math.nan,
            saturation=None,
            span_start_ns=0,
            span_end_ns=0,
            outstanding_mean=math.nan if outstanding_mean is None else outstanding_mean,
            outstanding_source="computed" if outstanding_mean is None else "given",
            throughput_ops_s=math.nan,
            mean_latency_s=math.nan,
            little_product=math.nan,
            little_ok=None,
        )
    t0 = int(answered["t_call_ns"].min())
    t1 = int(answered["t_reply_ns"].max())
    span_ns = max(1, t1 - t0)
    if window_ns is None:
        window_ns = max(MIN_WINDOW_NS, math.ceil(span_ns / DEFAULT_WINDOWS))
    if window_ns <= 0:
        raise ValueError(f"window_ns must be positive, got {window_ns}")
    once = rows_where(answered, answered["n_calls"] == 1)
    if once.empty:
        windows = pd.DataFrame({c: pd.Series(dtype="float64") for c in WINDOW_COLUMNS})
    else:
        windows = _windows(once, window_ns)
    base_ms, slope, saturation = _signature(windows)

    source = "given"
    if outstanding_mean is None:
        outstanding_mean, _ = outstanding(answered, t0, t1)
        source = "computed"
    throughput = len(answered) / (span_ns / 1e9)
    mean_latency = float(answered["latency_ns"].astype("float64").mean()) / 1e9
    product = throughput * mean_latency
    ok = abs(outstanding_mean - product) <= LITTLE_TOLERANCE * product if product > 0 else None
    return WorkloadResult(
        op_mix=mix,
        windows=windows,
        window_ns=int(window_ns),
        calls=len(nfs),
        base_ms=base_ms,
        slope=slope,
        saturation=saturation,
        span_start_ns=t0,
        span_end_ns=t1,
        outstanding_mean=float(outstanding_mean),
        outstanding_source=source,
        throughput_ops_s=throughput,
        mean_latency_s=mean_latency,
        little_product=product,
        little_ok=ok,
    )
