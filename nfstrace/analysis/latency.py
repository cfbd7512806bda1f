"""Per-operation latency: count, mean, p50/p90/p99, max, errors and calls
without reply, per operation (and per client/server pair); for NFSv4 also per
operation inside COMPOUNDs (a compound's latency counts for each of its ops).

Latency is the headline ``latency_ns`` (first packet of the first call to the
reply) unless another transactions column is named.  Output columns are in
milliseconds (floats, for presentation).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from nfstrace.analysis.grouping import first_rows, group_codes, group_keys, row_codes
from nfstrace.protocol.nfs3 import STATUS_NAMES as NFS3_STATUS_NAMES
from nfstrace.protocol.nfs4 import STATUS_NAMES as NFS4_STATUS_NAMES

LATENCY_COLUMNS = {
    "program": "RPC program name",
    "vers": "program version",
    "op": "operation",
    "calls": "transactions with a call in the capture",
    "replied": "transactions with a reply (the latency sample)",
    "no_reply": "calls never answered in the capture",
    "retransmitted": "transactions whose call was re-sent",
    "errors": "replies with a non-zero status (NFS status, or RPC not accepted/denied)",
    "min_ms": "minimum latency",
    "mean_ms": "mean latency",
    "p50_ms": "median",
    "p90_ms": "90th percentile",
    "p99_ms": "99th percentile",
    "max_ms": "maximum",
    "sum_ms": "the latencies summed: the operation's time in all (tshark's SRT table's sum)",
    "server_p50_ms": "median server time: from the call's last packet to the reply, less the "
    "network round trip that time holds at the capture point (on the client side the whole "
    "round trip, on the server side none; not known: not subtracted)",
    "srt_p50_ms": "median call->reply as tshark's rpc.time measures it: from the call's last "
    "packet to the reply (the server's time and, at the client, the round trip)",
    "error_names": "the errors by name, most frequent first (NOENT ×7, ACCES ×1)",
}
_ERROR_COLUMNS = ("status", "reply_stat", "accept_stat", "vers")
# accept_stat (RFC 5531): why an accepted call was not run
_ACCEPT_NAMES = {1: "PROG_UNAVAIL", 2: "PROG_MISMATCH", 3: "PROC_UNAVAIL", 4: "GARBAGE_ARGS",
                 5: "SYSTEM_ERR"}  # fmt: skip


def status_name(status: int, vers: int) -> str:
    """An NFS status by its RFC name (NFS3ERR_NOENT, NFS4ERR_DELAY); the number if unknown."""
    names = NFS4_STATUS_NAMES if vers == 4 else NFS3_STATUS_NAMES
    return names.get(status, str(status))


def _short_error_names(t: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per error row of ``t`` (status, vers, accept_stat, reply_stat), the code of
    its short name (NOENT, JUKEBOX, RPC denied, PROC_UNAVAIL), and the names by
    code (object array).  Each distinct status, version, accept_stat and denial
    is named once; kinds of one name share its code."""
    status = t["status"].fillna(0).astype("int64").to_numpy()
    vers = t["vers"].fillna(0).astype("int64").to_numpy()
    accept = t["accept_stat"].fillna(0).astype("int64").to_numpy()
    denied = (t["reply_stat"] == "denied").to_numpy(dtype=bool)
    kind = row_codes([status, vers, accept, denied])
    at = first_rows(kind)
    names = [
        "RPC denied" if d else _ACCEPT_NAMES.get(a, f"RPC {a}") if a else
        status_name(int(s), int(v)).removeprefix("NFS3ERR_").removeprefix("NFS4ERR_")
        for s, v, a, d in zip(status[at], vers[at], accept[at], denied[at], strict=True)
    ]  # fmt: skip
    code, unique = pd.factorize(np.array(names, dtype=object))
    return code[kind], np.asarray(unique, dtype=object)


def error_mask(tx: pd.DataFrame) -> pd.Series:
    """Answered calls whose reply is an error (NFS status or RPC), on tx's index.
    (The columns' arrays: each Series operation costs more than a small table's work.)"""
    nfs_error = tx["status"].to_numpy("int64", na_value=0) > 0
    denied = (tx["reply_stat"] == "denied").to_numpy(dtype=bool)
    rpc_error = denied | (tx["accept_stat"].to_numpy("int64", na_value=0) != 0)
    answered = (tx["n_replies"] > 0).to_numpy(dtype=bool)
    return pd.Series((nfs_error | rpc_error) & answered, index=tx.index)


def _rows(column: pd.Series, rows: np.ndarray | None) -> pd.Series:
    """A column's values at ``rows`` (None: all of them, not copied)."""
    return column if rows is None else column.take(rows)


def _samples(
    tx: pd.DataFrame,
    rows: np.ndarray | None,
    column: str,
    server_time: bool = True,
    network_ns: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """What the latency tables aggregate, per call (``tx`` at ``rows``) as plain
    arrays: the latency and (``server_time``) server time in ms (NaN: unknown), replied,
    re-sent, and the error name code (-1: no error) with the names by code.

    Only these few arrays are made: a copy of the transactions' columns (a
    DataFrame selection) would cost more than the analysis (measured: 1 GB of
    the 5M-packet capture's peak came from copies here)."""
    srt = server_time and "srt_ns" in tx and column == "latency_ns"
    n_calls = _rows(tx["n_calls"], rows).to_numpy()
    # (milliseconds worked out in place, in the copies made here: the same
    # arithmetic without a temporary array per step)
    srt_ms = _ms(_rows(tx["srt_ns"], rows)) if srt else np.empty(0)
    net_ms = srt_ms
    if srt and network_ns is not None:
        network = network_ns if rows is None else network_ns[rows]
        net_ms = np.nan_to_num(network, nan=0.0)  # (a copy)
        del network
        net_ms /= 1e6
        np.subtract(srt_ms, net_ms, out=net_ms)
        np.maximum(net_ms, 0.0, out=net_ms)
        net_ms[np.isnan(srt_ms)] = np.nan
    out: dict[str, np.ndarray] = {
        "lat_ms": _ms(_rows(tx[column], rows)),
        "srt_ms": srt_ms,
        "server_ms": net_ms,
        "replied": _rows(tx["n_replies"], rows).to_numpy() > 0,
        "retransmitted": n_calls > 1,
    }
    errors = error_mask(tx).to_numpy(dtype=bool)
    errors = errors if rows is None else errors[rows]
    code = np.full(len(errors), -1, "int64")
    names = np.empty(0, dtype=object)
    if errors.any():
        at = np.flatnonzero(errors) if rows is None else rows[errors]
        code[errors], names = _short_error_names(tx[list(_ERROR_COLUMNS)].take(at))
    out["error"], out["error_names"] = code, names
    return out


def _ms(ns: pd.Series) -> np.ndarray:
    """Nanoseconds as float milliseconds (NaN: missing), ``to_numpy / 1e6``."""
    out = ns.to_numpy("float64", na_value=np.nan, copy=True)
    out /= 1e6
    return out


class _Sorted:
    """One sort of a sample per group (NaN: no sample, left out), for the
    aggregates the latency tables show.

    numpy, not ``groupby``: a groupby on the samples copies them (and its keys)
    several times over; here the arrays are the sample, its order and the sorted
    values.  The quantiles interpolate linearly between the sorted values at
    q x (n - 1) exactly as pandas' groupby quantile does (same positions, same
    arithmetic); the mean is the plain sum over the count (pandas' compensated
    sum can differ in the last bit)."""

    def __init__(self, group: np.ndarray, values: np.ndarray, n: int) -> None:
        known = ~np.isnan(values)
        # (every sample known, the usual case: the arrays themselves, not copies)
        g, v = (group, values) if known.all() else (group[known], values[known])
        del known
        self.values = _sorted_in_groups(g, v, n)
        self.count = np.bincount(g, minlength=n)
        self.start = np.cumsum(self.count) - self.count
        self.total = np.bincount(g, weights=v, minlength=n)

    def mean(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.count > 0, self.total / self.count, np.nan)

    def quantile(self, q: float) -> np.ndarray:
        some = self.count > 0
        at = q * (np.maximum(self.count, 1) - 1).astype("float64")
        low = self.start + at.astype("int64")
        frac = at % 1
        value = self.values[np.where(some, low, 0)] if len(self.values) else np.zeros(len(at))
        after = self.values[np.where(some & (frac > 0), low + 1, 0)] if len(self.values) else value
        out = np.where(frac > 0, value + (after - value) * frac, value)
        return np.where(some, out, np.nan)


# Nanosecond samples below 2**SAMPLE_BITS (18 minutes) and groups below
# 2**(63 - SAMPLE_BITS) sort as one int64 key, group above sample: 3x quicker
# than a lexsort of the two (4M samples: 0.43 s, 1.34 s).
SAMPLE_BITS = 40


def _sorted_in_groups(g: np.ndarray, v: np.ndarray, n: int) -> np.ndarray:
    """The samples ``v`` sorted by group ``g`` (0 .. n - 1), then value."""
    if not len(v):
        return v
    whole = n < 1 << (63 - SAMPLE_BITS) and v.min() >= 0 and v.max() < 1 << SAMPLE_BITS
    if not whole or not np.array_equal(v, np.floor(v)):
        # v[np.lexsort((v, g))] without its index arrays: the samples in group
        # order (stable), then each group's sorted in place (stable: ties, and
        # -0.0 beside 0.0, in the order the lexsort leaves them)
        if (g == g[0]).all():
            return np.sort(v, kind="stable")
        # (the group codes narrow first when they fit 16 bits: numpy sorts those
        # by radix, stable, three times quicker; the same order)
        narrow = g.astype(np.int16) if n <= np.iinfo(np.int16).max else g
        out = v[np.argsort(narrow, kind="stable")]
        del narrow
        ends = np.cumsum(np.bincount(g, minlength=n))
        for a, b in zip(np.r_[0, ends[:-1]].tolist(), ends.tolist(), strict=True):
            if b - a > 1:
                out[a:b].sort(kind="stable")
        return out
    key = g.astype("int64") << SAMPLE_BITS
    key |= v.astype("int64")
    key.sort()
    key &= (1 << SAMPLE_BITS) - 1
    return key.astype("float64")


# The figures a group without a sample lacks (nullable floats in the table).
_MAY_BE_MISSING = frozenset(
    ("min_ms", "mean_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms", "sum_ms")
    + ("server_p50_ms", "srt_p50_ms")
)


def _aggregate(
    group: np.ndarray, keys: pd.DataFrame, samples: dict[str, np.ndarray]
) -> pd.DataFrame:
    """The latency table of the samples in groups (``group``: 0, 1, ... per
    sample), each group's key values a row of ``keys``, unsorted."""
    return _table(keys, [_figures(group, len(keys), samples)])


def _figures(group: np.ndarray, n: int, samples: dict[str, np.ndarray]) -> dict[str, Any]:
    """The latency table's columns but the keys, per group (0 .. n - 1), as
    arrays: the figures that may be missing as floats (NaN), or None where no
    sample has a server time."""
    srt = len(samples["srt_ms"]) > 0
    errors = samples["error"] >= 0
    lat = _Sorted(group, samples["lat_ms"], n)
    nullable: dict[str, np.ndarray | None] = {
        "min_ms": lat.quantile(0.0),
        "mean_ms": lat.mean(),
        "p50_ms": lat.quantile(0.5),
        "p90_ms": lat.quantile(0.9),
        "p99_ms": lat.quantile(0.99),
        "max_ms": lat.quantile(1.0),
        "sum_ms": np.where(lat.count > 0, lat.total, np.nan),
    }
    del lat  # (its sorted samples: not held beside the server times')
    if srt:
        nullable["server_p50_ms"] = _Sorted(group, samples["server_ms"], n).quantile(0.5)
        nullable["srt_p50_ms"] = _Sorted(group, samples["srt_ms"], n).quantile(0.5)
    if not srt:
        nullable["server_p50_ms"] = nullable["srt_p50_ms"] = None
    calls = np.bincount(group, minlength=n)
    replied = np.bincount(group[samples["replied"]], minlength=n)
    return {
        "calls": calls,
        "replied": replied,
        "retransmitted": np.bincount(group[samples["retransmitted"]], minlength=n),
        "errors": np.bincount(group[errors], minlength=n),
        **nullable,
        "no_reply": calls - replied,
        "error_names": _error_names(group, n, samples, errors),
    }


def _error_names(
    group: np.ndarray, n: int, samples: dict[str, np.ndarray], errors: np.ndarray
) -> np.ndarray:
    """Per group its errors by name, most frequent first ('' without errors):
    counted by (group, name code) as ``DataFrame.value_counts`` counts them, in
    its order (its sort of the counts, ties as it leaves them), the texts made
    per counted pair (a few), not through a table per group's errors."""
    out = np.full(n, "", dtype=object)
    if not errors.any():
        return out
    names = samples["error_names"]
    key = group[errors].astype("int64") * len(names) + samples["error"][errors]
    pairs, counts = np.unique(key, return_counts=True)  # by group, then name: groupby's order
    ranked = pd.Series(counts).sort_values(ascending=False).index.to_numpy()  # (value_counts')
    texts: dict[int, list[str]] = {}
    for pair, count in zip(pairs[ranked].tolist(), counts[ranked].tolist(), strict=True):
        g, name = divmod(pair, len(names))
        texts.setdefault(g, []).append(f"{names[name]} ×{count:,}")
    for g, listed in texts.items():
        out[g] = ", ".join(listed)
    return out


def _table(keys: pd.DataFrame, parts: list[dict[str, Any]]) -> pd.DataFrame:
    """One table of the keys (a row per group) and the figures of ``_figures``
    (``parts``: of consecutive runs of the keys' rows, joined in order): one
    DataFrame made, not one per part and a concat."""

    def joined(name: str) -> Any:
        values = [part[name] for part in parts]
        if values[0] is None:  # no server times at all: NaN
            return np.full(len(keys), np.nan)
        whole = np.concatenate(values) if len(values) > 1 else values[0]
        # NaN (no sample) shown as <NA>, as the nullable columns always were
        return pd.array(whole, dtype="Float64") if name in _MAY_BE_MISSING else whole

    return pd.DataFrame(
        {
            **{c: keys[c].reset_index(drop=True) for c in keys.columns},
            **{name: joined(name) for name in parts[0]},
        }
    )


def _most_called_first(table: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    return table[[*keys[:-3], *LATENCY_COLUMNS]].sort_values(
        ["calls", *keys], ascending=[False, *[True] * len(keys)], ignore_index=True
    )


def latency_table(
    tx: pd.DataFrame,
    by: list[str] | None = None,
    column: str = "latency_ns",
    network_ns: np.ndarray | None = None,
) -> pd.DataFrame:
    """One row per (by..., program, vers, op).  ``network_ns``: per transaction,
    the round trip its call->reply holds at the capture point (subtracted from
    the server time; NaN or None: nothing known, nothing subtracted)."""
    keys = [*(by or []), "program", "vers", "op"]
    called = (tx["n_calls"] > 0).to_numpy(dtype=bool)
    if not called.any():
        return pd.DataFrame(columns=[*(by or []), *LATENCY_COLUMNS])
    rows = None if called.all() else np.flatnonzero(called)
    group, parts = group_codes([_rows(tx[k], rows) for k in keys])  # integers, not strings
    samples = _samples(tx, rows, column, network_ns=network_ns)
    table = _aggregate(group, group_keys(group, parts), samples)
    return _most_called_first(table, keys)


def server_time_note(visible_rtt_s: float) -> str:
    """What ``server_p50_ms`` holds, in words, for a capture whose call->reply
    times hold ``visible_rtt_s`` of network (NaN: not known)."""
    if visible_rtt_s > 0:
        less = f"less the network round trip ({visible_rtt_s * 1e3:.3g} ms here)"
    elif visible_rtt_s == 0:
        less = "a server-side capture: no network in it"
    else:
        less = "the round trip not known here, so not subtracted"
    return f"server: from the call's last packet to the reply (tshark's rpc.time), {less}"


def by_time_spent(latency: pd.DataFrame) -> pd.DataFrame:
    """A latency table ordered by the time its operations took (answered calls x
    mean latency), most first: where an administrator looks first."""
    spent = (latency["replied"] * latency["mean_ms"].astype("float64").fillna(0)).to_numpy()
    return latency.iloc[np.argsort(-spent, kind="stable")]


def compound_op_latency(tx: pd.DataFrame, column: str = "latency_ns") -> pd.DataFrame:
    """NFSv4: latency of the COMPOUNDs containing each operation.

    One operation at a time: its rows are the compounds that list it, so no
    table with a row per (compound, operation) is made (on a 5M-packet capture
    that table and its work arrays were the analysis' peak, 1 GB)."""
    ops = tx["ops"]  # (compared in its own type: not a Python object per row)
    v4 = np.flatnonzero((ops.notna() & ops.ne("") & (tx["n_calls"] > 0)).to_numpy(dtype=bool))
    del ops
    if not len(v4):
        return pd.DataFrame(columns=list(LATENCY_COLUMNS))
    # Each distinct operation list is split once.
    lists, unique_lists = pd.factorize(tx["ops"].take(v4))
    lists = lists.astype(np.min_scalar_type(-max(len(unique_lists), 1)))  # (narrow: held)
    listed = [set(str(ops).split(" ")) for ops in unique_lists]
    # An operation counts once per compound (and per client, server, xid and call
    # time): once per row, and where one call is on several rows (rare), on the
    # first of its rows that lists it.  (Rows of one call share their call time:
    # only those get the whole key.)
    when = tx["t_call_ns"].take(v4).to_numpy("int64", na_value=-1)  # (times are >= 0)
    maybe = _repeated(when)
    call = np.full(len(v4), -1, "int64")
    key = ("client", "server", "xid", "t_call_ns")
    call[maybe] = row_codes([tx[c].take(v4[maybe]) for c in key]) if len(maybe) else []
    shared = pd.Series(call).duplicated(keep=False).to_numpy() & (call >= 0)
    # (only the shared rows' calls are looked at again: the row-long arrays let go)
    shared = np.flatnonzero(shared)
    call = call[shared]
    del when, maybe
    samples = _samples(tx, v4, column, server_time=False)
    pair, parts = group_codes([tx["program"].take(v4), tx["vers"].take(v4)])
    del v4
    pair_keys = group_keys(pair, parts)
    pair = pair.astype(np.min_scalar_type(-max(len(pair_keys), 1)))  # (narrow: held)
    n_pairs = len(pair_keys)
    # each operation's figures and keys, one table made of them all at the end
    figures: list[dict[str, Any]] = []
    key_rows: list[np.ndarray] = []
    key_ops: list[str] = []
    for op in sorted(set().union(*listed)):
        has = np.array([op in ops for ops in listed])[lists]
        again = np.flatnonzero(has[shared])
        has[shared[again[pd.Series(call[again]).duplicated().to_numpy()]]] = False
        if has.all():  # (an operation of every compound, SEQUENCE: no copies)
            mine, sample = pair, samples
        else:
            at = np.flatnonzero(has)
            mine, sample = pair[at], _at(samples, at)
            del at
        del has
        # the pairs present, in order, and each row's among them (np.unique's
        # inverse, by a count per pair instead of a sort of the rows)
        present = np.bincount(mine, minlength=n_pairs) > 0
        group = (np.cumsum(present) - 1)[mine]
        key_rows.append(np.flatnonzero(present))
        key_ops.append(op)
        figures.append(_figures(group, len(key_rows[-1]), sample))
        del mine, sample, group
    rows = np.concatenate(key_rows)
    ops_column = np.repeat(np.array(key_ops, dtype=object), [len(r) for r in key_rows])
    keys = pair_keys.iloc[rows].assign(op=ops_column)
    return _most_called_first(_table(keys, figures), ["program", "vers", "op"])


def _repeated(values: np.ndarray) -> np.ndarray:
    """Positions of the values that occur more than once (``duplicated(keep=False)``):
    by a sorted copy and a search among the few repeated values, not a hash of
    every value."""
    ordered = np.sort(values, kind="stable")  # (a merge sort: quick on nearly sorted times)
    twice = ordered[1:][ordered[1:] == ordered[:-1]]
    del ordered
    if not len(twice):
        return np.zeros(0, "int64")
    twice = np.unique(twice)
    at = np.searchsorted(twice, values)
    np.minimum(at, len(twice) - 1, out=at)
    return np.flatnonzero(twice[at] == values)


def _at(samples: dict[str, np.ndarray], at: np.ndarray) -> dict[str, np.ndarray]:
    """The samples of rows ``at`` (the names by error code are the same)."""
    return {k: v if k == "error_names" or not len(v) else v[at] for k, v in samples.items()}
