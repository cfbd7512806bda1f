"""Messages -> transactions: calls matched to replies by XID.

One row per logical call.  The match key is (client address, server address,
program, xid) -- not the TCP connection: a Linux client re-sends a call with
the same xid on a new connection after a reconnect.  Calls with the same key
are one transaction re-sent (an RPC retransmission) while each follows the
previous within ``MatchConfig.xid_reuse_ns``; further apart, the xid was
reused and a new transaction starts.  A reply belongs to the latest
transaction of its key that started before it; a second reply is a duplicate
(the server's duplicate request cache answering a re-sent call, or a re-sent
reply).  Calls without replies and replies without calls are kept.

Times (int64 ns; <NA> where absent):
- ``t_call_ns``: first packet of the first call (client-perceived start);
- ``t_call_end_ns``: last packet of the first call;
- ``t_call_last_ns`` / ``t_call_last_end_ns``: first/last packet of the last send;
- ``t_reply_ns``: last packet of the first reply (when it could be used);
- ``latency_ns`` = t_reply - t_call (headline, as the client waits);
- ``latency_last_ns`` = t_reply - t_call_last_end (after the last re-send);
- ``srt_ns`` = t_reply - t_call_end: tshark's ``rpc.time`` (it times a call
  from the frame where its reassembly completes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from nfstrace.parsers.procnames import program_name
from nfstrace.schema import TRANSACTION_DTYPES


@dataclass(frozen=True)
class MatchConfig:
    # Two calls with the same key further apart than this are different
    # transactions (xid reuse), not a retransmission.  NFS over TCP re-sends
    # after 60 s by default (timeo=600), with back-off: stay well above it.
    xid_reuse_ns: int = 300 * 1_000_000_000


KEY = ["client", "server", "xid"]

# message column -> transaction column, taken from the first call
_CALL_COLUMNS = {
    "src": "client",
    "sport": "client_port",
    "dst": "server",
    "dport": "server_port",
    "transport": "transport",
    "conn": "conn",
    "xid": "xid",
    "prog": "prog",
    "vers": "vers",
    "proc": "proc",
    "op": "op",
    "ops": "ops",
    "auth": "auth",
    "gss_service": "gss_service",
    "fh": "fh",
    "name": "name",
    "offset": "offset",
    "count": "count",
    "stable": "stable",
    "session": "session",
    "slot": "slot",
    "seqid": "seqid",
    "minor": "minor",
    "rpc_len": "call_bytes",
    "frame_last": "call_frame",
    "truncated": "call_truncated",
    "nfs_decode": "call_decode",
}
# message column -> transaction column, taken from the first reply
_REPLY_COLUMNS = {
    "reply_stat": "reply_stat",
    "accept_stat": "accept_stat",
    "nfs_status": "status",
    "op_status": "op_status",
    "count": "reply_count",
    "committed": "committed",
    "verifier": "verifier",
    "eof": "eof",
    "rpc_len": "reply_bytes",
    "frame_last": "reply_frame",
    "nfs_decode": "reply_decode",
}


def match(messages: pd.DataFrame, config: MatchConfig | None = None) -> pd.DataFrame:
    """The transactions table (columns: ``nfstrace.schema.TRANSACTION_COLUMNS``)."""
    config = config or MatchConfig()
    calls = messages[messages["msgtype"] == "call"]
    replies = messages[messages["msgtype"] == "reply"]
    groups = _group_calls(calls, config)
    tx = _attach_replies(groups, replies, config)
    return _finish(tx)


def _group_calls(calls: pd.DataFrame, config: MatchConfig) -> pd.DataFrame:
    c = calls.sort_values(["src", "dst", "prog", "xid", "ts_first_ns"], kind="stable")
    same_key = (
        c["src"].eq(c["src"].shift())
        & c["dst"].eq(c["dst"].shift())
        & c["prog"].eq(c["prog"].shift())
        & c["xid"].eq(c["xid"].shift())
        & c["proc"].eq(c["proc"].shift())
    )
    near = (c["ts_first_ns"] - c["ts_first_ns"].shift()) <= config.xid_reuse_ns
    c = c.assign(tx=np.cumsum(~(same_key & near).to_numpy()))
    g = c.groupby("tx", sort=False)
    first = g.head(1).set_index("tx")
    out = first[list(_CALL_COLUMNS)].rename(columns=_CALL_COLUMNS)
    out["t_call_ns"] = first["ts_first_ns"]
    out["t_call_end_ns"] = first["ts_last_ns"]
    last = g.tail(1).set_index("tx")
    out["t_call_last_ns"] = last["ts_first_ns"]
    out["t_call_last_end_ns"] = last["ts_last_ns"]
    out["n_calls"] = g.size()
    out["call_conns"] = g["conn"].nunique()
    resent = c[c["tx"].isin(out.index[out["n_calls"] > 1])]
    out["call_times_ns"] = pd.Series(
        resent.groupby("tx")["ts_first_ns"].agg(tuple), dtype=object
    ).reindex(out.index)
    return out.reset_index()


def _attach_replies(
    groups: pd.DataFrame, replies: pd.DataFrame, config: MatchConfig
) -> pd.DataFrame:
    r = replies.rename(columns={"dst": "client", "src": "server"}).copy()
    r = r.sort_values("ts_last_ns", kind="stable")
    g = groups[["tx", *KEY, "t_call_ns", "t_call_last_ns"]].sort_values("t_call_ns", kind="stable")
    # merge_asof needs one key dtype on both sides
    for col in ("client", "server"):
        r[col] = r[col].astype(object)
        g[col] = g[col].astype(object)
    r["xid"] = r["xid"].astype("int64")
    g = g.astype({"xid": "int64"})
    linked = pd.merge_asof(
        r, g, left_on="ts_last_ns", right_on="t_call_ns", by=KEY, direction="backward"
    )
    # A reply long after the last send answers a later, unseen call (xid reuse).
    stale = (linked["ts_last_ns"] - linked["t_call_last_ns"]) > config.xid_reuse_ns
    linked.loc[stale, "tx"] = np.nan
    matched = linked[linked["tx"].notna()].copy()
    matched["tx"] = matched["tx"].astype("int64")
    rg = matched.groupby("tx", sort=False)
    first = rg.head(1).set_index("tx")
    rep = first[list(_REPLY_COLUMNS)].rename(columns=_REPLY_COLUMNS)
    rep["t_reply_ns"] = first["ts_last_ns"]
    rep["n_replies"] = rg.size()
    # Nullable ints before the left join: float64 would round ns times (> 2**53) to 256 ns.
    rep = rep.astype({c: "Int64" for c in rep.columns if pd.api.types.is_integer_dtype(rep[c])})
    tx = groups.set_index("tx").join(rep, how="left")
    tx["n_replies"] = tx["n_replies"].fillna(0).astype("int64")
    # Only the reply's own columns: the call side's times are NaN here, float64, and
    # concatenated with the matched rows they would round every t_call_ns to 256 ns.
    orphans = linked.loc[linked["tx"].isna(), list(r.columns)]
    if len(orphans):
        o = orphans.rename(
            columns={**_REPLY_COLUMNS, "sport": "server_port", "dport": "client_port"}
        )
        o["t_reply_ns"] = orphans["ts_last_ns"]
        o["n_replies"] = 1
        o["n_calls"] = 0
        o["op"] = orphans["op"]
        for col in ("transport", "conn", "prog", "vers", "proc", "ops"):
            o[col] = orphans[col]
        keep = [c for c in o.columns if c in TRANSACTION_DTYPES]
        tx = tx.astype({c: "Int64" for c in tx.columns if pd.api.types.is_integer_dtype(tx[c])})
        tx = pd.concat([tx.reset_index(drop=True), o[keep]], ignore_index=True)
    return tx.reset_index(drop=True)


def _finish(tx: pd.DataFrame) -> pd.DataFrame:
    t_reply = tx["t_reply_ns"].astype("Int64")
    tx["latency_ns"] = t_reply - tx["t_call_ns"].astype("Int64")
    tx["latency_last_ns"] = t_reply - tx["t_call_last_end_ns"].astype("Int64")
    tx["srt_ns"] = t_reply - tx["t_call_end_ns"].astype("Int64")
    tx["program"] = [program_name(int(p)) for p in tx["prog"]]
    ok = tx["status"].eq(0).fillna(False).to_numpy(dtype=bool)
    op = tx["op"].astype(object)
    counted = tx["reply_count"].fillna(0).to_numpy(dtype="int64")
    tx["write_bytes"] = np.where(op.eq("WRITE").to_numpy(dtype=bool) & ok, counted, 0)
    tx["read_bytes"] = np.where(op.eq("READ").to_numpy(dtype=bool) & ok, counted, 0)
    for col, dtype in TRANSACTION_DTYPES.items():
        if col not in tx:
            tx[col] = pd.NA
        tx[col] = tx[col].astype(dtype)
    tx = tx[list(TRANSACTION_DTYPES)]
    order = tx["t_call_ns"].fillna(tx["t_reply_ns"])
    return tx.iloc[np.argsort(order.to_numpy(dtype="int64"), kind="stable")].reset_index(drop=True)
