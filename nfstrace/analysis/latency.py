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


def _sorted_codes(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Codes of a column's values numbered in the values' sort order, missing last
    (the order of groupby(sort=True, dropna=False)), and the value of each code."""
    if pd.api.types.is_numeric_dtype(column.dtype):
        codes, uniques = pd.factorize(column, sort=True)
        values = np.asarray(uniques, dtype=object)
    else:  # strings, categories: sort the (few) distinct values, not the rows
        codes, uniques = pd.factorize(column)
        values = np.asarray(uniques, dtype=object)
        order = np.argsort(values, kind="stable")
        rank = np.empty(len(values), "int64")
        rank[order] = np.arange(len(values))
        ranked = rank[codes] if len(rank) else codes  # (no values: every row missing)
        codes, values = np.where(codes < 0, -1, ranked), values[order]
    return np.where(codes < 0, len(values), codes), np.append(values, np.nan)


def _group_codes(columns: list[pd.Series]) -> tuple[np.ndarray, list[tuple]]:
    """One integer per row for the combination of ``columns``, numbered in the
    combinations' sort order (grouping by integers, not by object columns of
    strings); and per column its codes and the value of each code."""
    parts = [(column.name, *_sorted_codes(column)) for column in columns]
    group = np.zeros(len(columns[0]), "int64")
    for _, codes, values in parts:  # mixed radix, re-numbered before it could overflow
        if group.max(initial=0) >= np.iinfo("int64").max // len(values):
            group = pd.factorize(group, sort=True)[0]
        group = group * len(values) + codes
    return pd.factorize(group, sort=True)[0], parts


def latency_table(
    tx: pd.DataFrame, by: list[str] | None = None, column: str = "latency_ns"
) -> pd.DataFrame:
    """One row per (by..., program, vers, op)."""
    keys = [*(by or []), "program", "vers", "op"]
    called = (tx["n_calls"] > 0).to_numpy(dtype=bool)
    if not called.any():
        return pd.DataFrame(columns=[*(by or []), *LATENCY_COLUMNS])
    t = tx.loc[called, [*dict.fromkeys([*keys, column, "n_calls", "n_replies"]), *_ERROR_COLUMNS]]
    group, parts = _group_codes([t[k] for k in keys])
    # each group's key values, from its first row (as a list: pd.Index then infers
    # the dtype, int64 or str, as groupby does for its keys)
    first = pd.Series(group).drop_duplicates()
    at = np.empty(len(first), "int64")
    at[first.to_numpy()] = first.index.to_numpy()
    key_values = {name: pd.Index(values[codes[at]].tolist()) for name, codes, values in parts}
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
    out = pd.concat([pd.DataFrame(key_values), out.reset_index(drop=True)], axis=1)
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
    call = _group_codes([v4[c] for c in ("client", "server", "xid", "t_call_ns")])[0]
    first = ~pd.Series(call[row] * len(names) + op).duplicated().to_numpy()
    row, op = row[first], op[first]
    exploded = v4[["program", "vers", column, "n_calls", "n_replies", *_ERROR_COLUMNS]].iloc[row]
    exploded = exploded.assign(op=pd.Index(names.astype(object))[op])
    return latency_table(exploded, column=column)
