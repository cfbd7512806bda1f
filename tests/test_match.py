"""match(): calls and replies paired by XID on tiny hand-built messages tables
(re-sends, xid reuse, duplicate and stale replies, replies without call)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from nfstrace.match import match
from nfstrace.parsers.nfs_fields import NFS_FIELDS
from nfstrace.schema import MESSAGE_DTYPES, TRANSACTION_DTYPES

T0 = 1_700_000_000 * 10**9 + 1  # odd: a float64 round trip would show
MS = 1_000_000
CLIENT, SERVER = "10.0.0.1", "10.0.0.2"


def messages(rows: list[dict]) -> pd.DataFrame:
    """A messages table (MESSAGE_DTYPES) from a few fields per row: msgtype, t
    (ts_first_ns; ts_last_ns = t + 10), xid, and optionally client/server/proc/..."""
    defaults = {
        **{name: default for name, (_, default, _) in NFS_FIELDS.items()},
        "frame_first": 1, "frame_last": 1, "sport": 800, "dport": 2049,
        "transport": "tcp", "conn": 1, "prog": 100003, "vers": 3, "proc": 7,
        "auth": "sys", "auth_uid": 0, "auth_gid": 0, "auth_machine": "", "gss_proc": -1,
        "gss_service": "", "reply_stat": "", "accept_stat": -1, "reject_stat": -1,
        "rpc_len": 100, "captured_len": 100, "body_offset": 28, "record_frags": 1,
        "frames": 1, "ip_frags": 1, "truncated": False, "op": "WRITE",
    }  # fmt: skip
    out = []
    for i, r in enumerate(rows, start=1):
        r = dict(r)
        client, server = r.pop("client", CLIENT), r.pop("server", SERVER)
        call = r["msgtype"] == "call"
        row = {**defaults, "frame_first": i, "frame_last": i}
        row.update(src=client if call else server, dst=server if call else client)
        if not call:
            row.update(sport=2049, dport=800, reply_stat="accepted", accept_stat=0, nfs_status=0)
        t = r.pop("t")
        row.update(ts_first_ns=T0 + t, ts_last_ns=T0 + t + 10, **r)
        out.append(row)
    return pd.DataFrame(out, columns=list(MESSAGE_DTYPES)).astype(MESSAGE_DTYPES)


def test_times_stay_exact_with_replies_without_call() -> None:
    tx = match(
        messages(
            [
                {"msgtype": "call", "t": 0, "xid": 1},
                {"msgtype": "reply", "t": 3 * MS, "xid": 1},
                {"msgtype": "reply", "t": 5 * MS, "xid": 2},  # its call is not in the capture
            ]
        )
    )
    assert list(tx.columns) == list(TRANSACTION_DTYPES)
    assert tx["n_calls"].tolist() == [1, 0]
    assert tx["t_call_ns"].tolist() == [T0, pd.NA]
    assert tx["latency_ns"].tolist() == [3 * MS + 10, pd.NA]
    assert tx["t_reply_ns"].tolist() == [T0 + 3 * MS + 10, T0 + 5 * MS + 10]
    assert np.array_equal(tx["t_reply_ns"].to_numpy("int64") % 2, [1, 1])
