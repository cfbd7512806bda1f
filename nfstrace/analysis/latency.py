"""Per-operation latency: count, mean, p50/p90/p99, max, errors and calls
without reply, per operation (and per client/server pair); for NFSv4 also per
operation inside COMPOUNDs (a compound's latency counts for each of its ops).

Latency is the headline ``latency_ns`` (first packet of the first call to the
reply) unless another transactions column is named.  Output columns are in
milliseconds (floats, for presentation).
"""

from __future__ import annotations

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
    "mean_ms": "mean latency",
    "p50_ms": "median",
    "p90_ms": "90th percentile",
    "p99_ms": "99th percentile",
    "max_ms": "maximum",
    "server_p50_ms": "median server time: from the call's last packet to the reply "
    "(tshark's rpc.time; below p50_ms by the time the call took to cross)",
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
    nfs_error = tx["status"].fillna(0).astype("int64") > 0
    rpc_error = (tx["reply_stat"] == "denied") | (tx["accept_stat"].fillna(0).astype("int64") != 0)
    return (nfs_error | rpc_error) & (tx["n_replies"] > 0)


def _rows(column: pd.Series, rows: np.ndarray | None) -> pd.Series:
    """A column's values at ``rows`` (None: all of them, not copied)."""
    return column if rows is None else column.take(rows)


def _samples(
    tx: pd.DataFrame,
    rows: np.ndarray | None,
    column: str,
    server_time: bool = True,
    error_rows: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """What the latency tables aggregate, per call (``tx`` at ``rows``) as plain
    arrays: the latency and (``server_time``) server time in ms (NaN: unknown), replied,
    re-sent, and the error name code (-1: no error) with the names by code
    (``error_rows``: ``error_mask(tx)`` when the caller has it).

    Only these few arrays are made: a copy of the transactions' columns (a
    DataFrame selection) would cost more than the analysis (measured: 1 GB of
    the 5M-packet capture's peak came from copies here)."""
    srt = server_time and "srt_ns" in tx and column == "latency_ns"
    n_calls = _rows(tx["n_calls"], rows).to_numpy()
    out: dict[str, np.ndarray] = {
        "lat_ms": _rows(tx[column], rows).to_numpy("float64", na_value=np.nan) / 1e6,
        "srt_ms": _rows(tx["srt_ns"], rows).to_numpy("float64", na_value=np.nan) / 1e6
        if srt
        else np.empty(0),
        "replied": _rows(tx["n_replies"], rows).to_numpy() > 0,
        "retransmitted": n_calls > 1,
    }
    errors = error_mask(tx).to_numpy(dtype=bool) if error_rows is None else error_rows
    errors = errors if rows is None else errors[rows]
    code = np.full(len(errors), -1, "int64")
    names = np.empty(0, dtype=object)
    if errors.any():
        at = np.flatnonzero(errors) if rows is None else rows[errors]
        code[errors], names = _short_error_names(tx[list(_ERROR_COLUMNS)].take(at))
    out["error"], out["error_names"] = code, names
    return out


def _aggregate(
    keys: list[pd.Series], samples: dict[str, np.ndarray], by: list[str] | None
) -> pd.DataFrame:
    """The latency table of the samples grouped by ``keys`` (the key columns at
    the samples' rows)."""
    group, parts = group_codes(keys)  # integers, not strings
    srt = len(samples["srt_ms"]) > 0
    errors = samples["error"] >= 0
    work = pd.DataFrame(
        {
            "lat_ms": samples["lat_ms"],
            "srt_ms": samples["srt_ms"] if srt else np.nan,
            "replied": samples["replied"],
            "retransmitted": samples["retransmitted"],
            "errors": errors,
        },
        copy=False,
    )
    g = work.groupby(group, sort=True)
    quantiles = g["lat_ms"].quantile([0.5, 0.9, 0.99]).unstack()  # one sort for the three
    # float64 with NaN for unknown gives the aggregates of the nullable column
    # (the same algorithms skip NaN as they skip <NA>); shown nullable, as before
    nullable = {
        "mean_ms": g["lat_ms"].mean(),
        "p50_ms": quantiles[0.5],
        "p90_ms": quantiles[0.9],
        "p99_ms": quantiles[0.99],
        "max_ms": g["lat_ms"].max(),
    }
    if srt:
        nullable["server_p50_ms"] = g["srt_ms"].median()
    out = pd.DataFrame(
        {
            "calls": g.size(),
            "replied": g["replied"].sum(),
            "retransmitted": g["retransmitted"].sum(),
            "errors": g["errors"].sum(),
            **{name: values.astype("Float64") for name, values in nullable.items()},
        }
    )
    if not srt:
        out["server_p50_ms"] = np.nan
    out["no_reply"] = out["calls"] - out["replied"]
    out["error_names"] = ""
    if errors.any():
        names = samples["error_names"]
        # counted by name codes: the same groups, in the same order, as by the names
        counts = (
            pd.DataFrame({"g": group[errors], "name": samples["error"][errors]})
            .value_counts(sort=True)
            .reset_index()
        )
        name = pd.Series(names[counts["name"].to_numpy()], index=counts.index, dtype=object)
        text = name + " ×" + counts["count"].map("{:,}".format)
        out.loc[:, "error_names"] = text.groupby(counts["g"], sort=False).agg(", ".join)
        out["error_names"] = out["error_names"].fillna("")
    out = pd.concat([group_keys(group, parts), out.reset_index(drop=True)], axis=1)
    names_of_keys = [part[0] for part in parts]
    return out[[*(by or []), *LATENCY_COLUMNS]].sort_values(
        ["calls", *names_of_keys], ascending=[False, *[True] * len(parts)], ignore_index=True
    )


def latency_table(
    tx: pd.DataFrame, by: list[str] | None = None, column: str = "latency_ns"
) -> pd.DataFrame:
    """One row per (by..., program, vers, op)."""
    keys = [*(by or []), "program", "vers", "op"]
    called = (tx["n_calls"] > 0).to_numpy(dtype=bool)
    if not called.any():
        return pd.DataFrame(columns=[*(by or []), *LATENCY_COLUMNS])
    rows = None if called.all() else np.flatnonzero(called)
    return _aggregate([_rows(tx[k], rows) for k in keys], _samples(tx, rows, column), by)


def by_time_spent(latency: pd.DataFrame) -> pd.DataFrame:
    """A latency table ordered by the time its operations took (answered calls x
    mean latency), most first: where an administrator looks first."""
    spent = (latency["replied"] * latency["mean_ms"].astype("float64").fillna(0)).to_numpy()
    return latency.iloc[np.argsort(-spent, kind="stable")]


def compound_op_latency(tx: pd.DataFrame, column: str = "latency_ns") -> pd.DataFrame:
    """NFSv4: latency of the COMPOUNDs containing each operation."""
    v4 = np.flatnonzero(
        ((tx["ops"].astype(object).fillna("") != "") & (tx["n_calls"] > 0)).to_numpy(dtype=bool)
    )
    if not len(v4):
        return pd.DataFrame(columns=list(LATENCY_COLUMNS))
    # Each distinct operation list is split once; rows repeat once per operation.
    lists, unique_lists = pd.factorize(tx["ops"].take(v4))
    split = [str(ops).split(" ") for ops in unique_lists]
    names, name_code = np.unique(np.concatenate(split), return_inverse=True)
    lengths = np.array([len(x) for x in split], "int64")
    offsets = np.r_[0, np.cumsum(lengths)[:-1]]
    per_row = lengths[lists]
    row = np.repeat(np.arange(len(v4)), per_row)
    nth = np.arange(len(row)) - np.repeat(np.cumsum(per_row) - per_row, per_row)
    op = name_code[offsets[lists[row]] + nth]
    # An operation counts once per compound (and per client, server, xid and call
    # time): the first of each name in its list, and where one call is on several
    # rows (rare), the first of each (call, operation) over those rows.
    once = np.concatenate([[x not in ops[:i] for i, x in enumerate(ops)] for ops in split])
    first = once[offsets[lists[row]] + nth]
    # (rows of one call share their call time: only those get the whole key)
    when = tx["t_call_ns"].take(v4).to_numpy("int64", na_value=-1)  # (times are >= 0)
    maybe = np.flatnonzero(pd.Series(when).duplicated(keep=False).to_numpy())
    call = np.full(len(v4), -1, "int64")
    key = ("client", "server", "xid", "t_call_ns")
    call[maybe] = row_codes([tx[c].take(v4[maybe]) for c in key]) if len(maybe) else []
    shared = (pd.Series(call).duplicated(keep=False).to_numpy() & (call >= 0))[row]
    if shared.any():
        again = pd.Series(call[row[shared]] * len(names) + op[shared]).duplicated()
        first[shared] = ~again.to_numpy()
    # the transactions' rows, once per operation counted (no table of them is
    # made), aggregated one operation at a time: a group is one operation, so
    # the tables of each add up to the whole one, and the work arrays are as
    # long as one operation's rows rather than every operation's (the peak of
    # a big capture's analysis was here)
    rows, op = v4[row[first]], op[first]
    errors = error_mask(tx).to_numpy(dtype=bool)
    tables = []
    for code in np.unique(op):
        at = rows[op == code]
        keys = [
            tx["program"].take(at),
            tx["vers"].take(at),
            pd.Series(
                pd.Categorical.from_codes(np.zeros(len(at), "int8"), [names[code]]), name="op"
            ),
        ]
        tables.append(_aggregate(keys, _samples(tx, at, column, False, errors), None))
    return pd.concat(tables, ignore_index=True).sort_values(
        ["calls", "program", "vers", "op"], ascending=[False, True, True, True], ignore_index=True
    )
