"""Per-operation latency: count, mean, p50/p90/p99, max, errors and calls
without reply, per operation (and per client/server pair); for NFSv4 also per
operation inside COMPOUNDs (a compound's latency counts for each of its ops).

Latency is the headline ``latency_ns`` (first packet of the first call to the
reply) unless another transactions column is named.  Output columns are in
milliseconds (floats, for presentation).
"""

from __future__ import annotations

import pandas as pd

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


def error_mask(tx: pd.DataFrame) -> pd.Series:
    nfs_error = tx["status"].fillna(0).astype("int64") > 0
    rpc_error = tx["reply_stat"].astype(object).eq("denied") | (
        tx["accept_stat"].fillna(0).astype("int64") != 0
    )
    return (nfs_error | rpc_error) & (tx["n_replies"] > 0)


def latency_table(
    tx: pd.DataFrame, by: list[str] | None = None, column: str = "latency_ns"
) -> pd.DataFrame:
    """One row per (by..., program, vers, op)."""
    keys = [*(by or []), "program", "vers", "op"]
    t = tx[tx["n_calls"] > 0]
    if t.empty:
        return pd.DataFrame(columns=[*(by or []), *LATENCY_COLUMNS])
    work = pd.DataFrame(
        {
            **{k: t[k].astype(object) for k in keys},
            "lat_ms": t[column].astype("Float64") / 1e6,
            "replied": t["n_replies"] > 0,
            "retransmitted": t["n_calls"] > 1,
            "errors": error_mask(t),
        }
    )
    g = work.groupby(keys, sort=True, dropna=False)
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
    out = out.reset_index()
    return out[[*(by or []), *LATENCY_COLUMNS]].sort_values(
        ["calls", *keys], ascending=[False, *[True] * len(keys)], ignore_index=True
    )


def compound_op_latency(tx: pd.DataFrame, column: str = "latency_ns") -> pd.DataFrame:
    """NFSv4: latency of the COMPOUNDs containing each operation."""
    v4 = tx[(tx["ops"].fillna("") != "") & (tx["n_calls"] > 0)]
    if v4.empty:
        return pd.DataFrame(columns=list(LATENCY_COLUMNS))
    exploded = v4.assign(op=v4["ops"].str.split(" ")).explode("op")
    exploded = exploded.drop_duplicates(subset=["client", "server", "xid", "t_call_ns", "op"])
    return latency_table(exploded, column=column)
