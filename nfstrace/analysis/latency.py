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

from nfstrace.analysis.grouping import group_codes, group_keys

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
}
_ERROR_COLUMNS = ("status", "reply_stat", "accept_stat")


def error_mask(tx: pd.DataFrame) -> pd.Series:
    nfs_error = tx["status"].fillna(0).astype("int64") > 0
    rpc_error = (tx["reply_stat"] == "denied") | (tx["accept_stat"].fillna(0).astype("int64") != 0)
    return (nfs_error | rpc_error) & (tx["n_replies"] > 0)


def latency_table(
    tx: pd.DataFrame, by: list[str] | None = None, column: str = "latency_ns"
) -> pd.DataFrame:
    """One row per (by..., program, vers, op)."""
    keys = [*(by or []), "program", "vers", "op"]
    called = (tx["n_calls"] > 0).to_numpy(dtype=bool)
    if not called.any():
        return pd.DataFrame(columns=[*(by or []), *LATENCY_COLUMNS])
    t = tx.loc[called, [*dict.fromkeys([*keys, column, "n_calls", "n_replies"]), *_ERROR_COLUMNS]]
    group, parts = group_codes([t[k] for k in keys])  # integers, not strings
    work = pd.DataFrame(
        {
            "lat_ms": t[column].astype("Float64") / 1e6,
            "replied": t["n_replies"] > 0,
            "retransmitted": t["n_calls"] > 1,
            "errors": error_mask(t),
        }
    )
    g = work.groupby(group, sort=True)
    out = pd.DataFrame(
        {
            "calls": g.size(),
            "replied": g["replied"].sum(),
            "retransmitted": g["retransmitted"].sum(),
            "errors": g["errors"].sum(),
            "mean_ms": g["lat_ms"].mean(),
            "p50_ms": g["lat_ms"].quantile(0.5),
            "p90_ms": g["lat_ms"].quantile(0.9),
            "p99_ms": g["lat_ms"].quantile(0.99),
            "max_ms": g["lat_ms"].max(),
        }
    )
    out["no_reply"] = out["calls"] - out["replied"]
    out = pd.concat([group_keys(group, parts), out.reset_index(drop=True)], axis=1)
    return out[[*(by or []), *LATENCY_COLUMNS]].sort_values(
        ["calls", *keys], ascending=[False, *[True] * len(keys)], ignore_index=True
    )


def compound_op_latency(tx: pd.DataFrame, column: str = "latency_ns") -> pd.DataFrame:
    """NFSv4: latency of the COMPOUNDs containing each operation."""
    v4 = tx[(tx["ops"].fillna("") != "") & (tx["n_calls"] > 0)]
    if v4.empty:
        return pd.DataFrame(columns=list(LATENCY_COLUMNS))
    # Each distinct operation list is split once; rows repeat once per operation.
    lists, unique_lists = pd.factorize(v4["ops"])
    split = [str(ops).split(" ") for ops in unique_lists]
    names, name_code = np.unique(np.concatenate(split), return_inverse=True)
    lengths = np.array([len(x) for x in split], "int64")
    offsets = np.r_[0, np.cumsum(lengths)[:-1]]
    per_row = lengths[lists]
    row = np.repeat(np.arange(len(v4)), per_row)
    nth = np.arange(len(row)) - np.repeat(np.cumsum(per_row) - per_row, per_row)
    op = name_code[offsets[lists[row]] + nth]
    # An operation counts once per compound (and per client, server, xid and call time).
    call = group_codes([v4[c] for c in ("client", "server", "xid", "t_call_ns")])[0]
    first = ~pd.Series(call[row] * len(names) + op).duplicated().to_numpy()
    row, op = row[first], op[first]
    exploded = v4[["program", "vers", column, "n_calls", "n_replies", *_ERROR_COLUMNS]].iloc[row]
    exploded = exploded.assign(op=pd.Index(names.astype(object))[op])
    return latency_table(exploded, column=column)
