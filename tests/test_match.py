"""match(): calls and replies paired by XID on tiny hand-built messages tables
(re-sends, xid reuse, duplicate and stale replies, replies without call)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from nfstrace.match import MatchConfig, match
from nfstrace.nfs_fields import NFS_FIELDS
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
        "frames": 1, "ip_frags": 1, "truncated": False, "op": "WRITE", "acked_ns": -1,
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


def test_resends_reuse_duplicates_and_stale_replies() -> None:
    reuse = MatchConfig(xid_reuse_ns=100 * MS)
    rows = [
        # xid 1: sent three times (the third on a new connection), answered twice
        # (a WRITE of 512 bytes: a call record of 700 bytes)
        {"msgtype": "call", "t": 0, "xid": 1, "rpc_len": 700},
        {"msgtype": "call", "t": 10 * MS, "xid": 1, "rpc_len": 700},
        {"msgtype": "call", "t": 30 * MS, "xid": 1, "conn": 2, "rpc_len": 700},
        {"msgtype": "reply", "t": 31 * MS, "xid": 1, "conn": 2, "count": 512},
        {"msgtype": "reply", "t": 32 * MS, "xid": 1, "nfs_status": 70},
        # xid 1 again, 200 ms later: reused, a new transaction; its reply is stale
        {"msgtype": "call", "t": 230 * MS, "xid": 1, "op": "COMMIT", "proc": 21},
        {"msgtype": "reply", "t": 400 * MS, "xid": 1, "op": "?", "proc": -1},
        # xid 2: the same xid from another client, and another procedure of the first
        {"msgtype": "call", "t": 40 * MS, "xid": 2, "client": "10.0.0.3", "op": "READ"},
        {"msgtype": "call", "t": 40 * MS, "xid": 2, "op": "GETATTR", "proc": 1},
        {"msgtype": "call", "t": 41 * MS, "xid": 2, "op": "GETATTR", "proc": 1},
        {"msgtype": "reply", "t": 45 * MS, "xid": 2, "client": "10.0.0.3", "count": 4096,
         "rpc_len": 4200},
        # xid 3: the reply comes before any call (the call is another transaction)
        {"msgtype": "reply", "t": 50 * MS, "xid": 3, "op": "?", "proc": -1},
        {"msgtype": "call", "t": 60 * MS, "xid": 3},
    ]  # fmt: skip
    tx = match(messages(rows), reuse)
    cols = ["client", "xid", "op", "n_calls", "call_conns", "n_replies", "t_call_ns"]
    got = [
        tuple(None if v is pd.NA else v for v in r)
        for r in tx[[*cols, "latency_ns", "status", "write_bytes", "read_bytes"]]
        .astype(object)
        .itertuples(index=False)
    ]
    # in call order (a reply without call: at its own time); equal times in
    # capture order (the frame of the call's first packet)
    assert got == [
        (CLIENT, 1, "WRITE", 3, 2, 2, T0, 31 * MS + 10, 0, 512, 0),
        ("10.0.0.3", 2, "READ", 1, 1, 1, T0 + 40 * MS, 5 * MS + 10, 0, 0, 4096),
        (CLIENT, 2, "GETATTR", 2, 1, 0, T0 + 40 * MS, None, None, 0, 0),
        (CLIENT, 3, "?", 0, None, 1, None, None, 0, 0, 0),
        (CLIENT, 3, "WRITE", 1, 1, 0, T0 + 60 * MS, None, None, 0, 0),
        (CLIENT, 1, "COMMIT", 1, 1, 0, T0 + 230 * MS, None, None, 0, 0),
        (CLIENT, 1, "?", 0, None, 1, None, None, 0, 0, 0),  # stale: 170 ms after the call
    ]
    assert tx["call_times_ns"].iloc[0] == (T0, T0 + 10 * MS, T0 + 30 * MS)
    assert pd.isna(tx["call_times_ns"].iloc[1])
    assert tx["call_times_ns"].iloc[2] == (T0 + 40 * MS, T0 + 41 * MS)
    # a reply without call names its client and server from its own addresses
    assert tx.loc[3, ["client", "server", "client_port", "server_port"]].tolist() == [
        CLIENT, SERVER, 800, 2049
    ]  # fmt: skip


def test_no_messages_no_calls_no_replies() -> None:
    tx = match(messages([]))
    assert tx.empty and list(tx.columns) == list(TRANSACTION_DTYPES)
    only_replies = match(messages([{"msgtype": "reply", "t": 0, "xid": 1}]))
    assert only_replies[["n_calls", "n_replies"]].values.tolist() == [[0, 1]]
    only_calls = match(messages([{"msgtype": "call", "t": 0, "xid": 1}]))
    assert only_calls[["n_calls", "n_replies"]].values.tolist() == [[1, 0]]


def test_reply_answers_the_call_on_its_connection() -> None:
    """The same xid on two TCP connections of one client/server pair (a WRITE on
    one, a GETATTR on the other): each reply answers the call on its own
    connection (by (client, server, xid) alone the WRITE's reply went to the
    later GETATTR: a false duplicate, the WRITE unanswered)."""
    tx = match(
        messages(
            [
                {"msgtype": "call", "t": 0, "xid": 5, "conn": 1, "sport": 800},
                {"msgtype": "call", "t": 1 * MS, "xid": 5, "conn": 2, "sport": 801,
                 "proc": 1, "op": "GETATTR"},
                {"msgtype": "reply", "t": 2 * MS, "xid": 5, "conn": 1, "dport": 800},
                {"msgtype": "reply", "t": 3 * MS, "xid": 5, "conn": 2, "dport": 801},
            ]
        )
    )  # fmt: skip
    by_op = tx.set_index(tx["op"].astype(object))
    assert by_op.loc["WRITE", "latency_ns"] == 2 * MS + 10
    assert by_op.loc["GETATTR", "latency_ns"] == 2 * MS + 10
    assert tx["n_replies"].tolist() == [1, 1] and (tx["n_calls"] == 1).all()


def test_reply_answers_a_call_of_its_port_only() -> None:
    """A MOUNT call to port 635 and an NFS call to 2049 with one xid: the reply from
    635 answers the MOUNT call, and the NFS call stays unanswered."""
    tx = match(
        messages(
            [
                {"msgtype": "call", "t": 0, "xid": 9, "dport": 635, "prog": 100005,
                 "proc": 0, "op": "NULL", "transport": "udp"},
                {"msgtype": "call", "t": 1 * MS, "xid": 9, "transport": "udp"},
                {"msgtype": "reply", "t": 2 * MS, "xid": 9, "sport": 635, "transport": "udp"},
            ]
        )
    )  # fmt: skip
    assert tx["prog"].tolist() == [100005, 100003]
    assert tx["n_replies"].tolist() == [1, 0]
    assert tx["latency_ns"].tolist() == [2 * MS + 10, pd.NA]


def test_call_re_sent_on_a_new_connection_is_answered_there() -> None:
    """A Linux client re-sends a call with its xid on a new connection after a
    reconnect: one transaction sent twice, answered on the new connection."""
    tx = match(
        messages(
            [
                {"msgtype": "call", "t": 0, "xid": 7, "conn": 1, "sport": 800},
                {"msgtype": "call", "t": 1_000 * MS, "xid": 7, "conn": 2, "sport": 801},
                {"msgtype": "reply", "t": 1_001 * MS, "xid": 7, "conn": 2, "dport": 801},
            ]
        )
    )
    assert len(tx) == 1
    row = tx.iloc[0]
    assert row["n_calls"] == 2 and row["n_replies"] == 1 and row["call_conns"] == 2
    assert row["latency_ns"] == 1_001 * MS + 10


def test_reply_counts_beyond_what_the_call_carried_are_bounded() -> None:
    """Garbage reply counts (issue 20, item 10: 11 RPCs once reported as 43 GB):
    a WRITE reply counts at most its call's count and the call's record; a READ
    reply at most the count asked for and its own record."""
    tx = match(
        messages(
            [
                {"msgtype": "call", "t": 0, "xid": 1, "count": 4096, "rpc_len": 4300},
                {"msgtype": "reply", "t": MS, "xid": 1, "count": 4_000_000_000},
                {"msgtype": "call", "t": 2 * MS, "xid": 2, "rpc_len": 300},  # count not captured
                {"msgtype": "reply", "t": 3 * MS, "xid": 2, "count": 65536},
                {"msgtype": "call", "t": 4 * MS, "xid": 3, "op": "READ", "proc": 6,
                 "count": 65536},
                {"msgtype": "reply", "t": 5 * MS, "xid": 3, "count": 65536, "rpc_len": 1000},
                {"msgtype": "call", "t": 6 * MS, "xid": 4, "count": 512, "rpc_len": 700},
                {"msgtype": "reply", "t": 7 * MS, "xid": 4, "count": 512},
            ]
        )
    )  # fmt: skip
    assert tx["write_bytes"].tolist() == [4096, 300, 0, 512]
    assert tx["read_bytes"].tolist() == [0, 0, 1000, 0]
    assert tx["reply_count"].tolist() == [4_000_000_000, 65536, 65536, 512]  # as sent


def test_a_send_after_a_reply_the_client_acknowledged_is_a_new_call() -> None:
    """A client re-sends only while it has no reply (issue 20, item 7): once its
    TCP acknowledged a reply, the same xid again is a new call (the xid reused),
    however soon; a reply it never acknowledged (the connection broke) leaves
    the next send a re-send."""
    rows = [
        {"msgtype": "call", "t": 0, "xid": 1},
        {"msgtype": "reply", "t": 2 * MS, "xid": 1, "acked_ns": T0 + 3 * MS},
        {"msgtype": "call", "t": 900 * MS, "xid": 1},
        {"msgtype": "reply", "t": 902 * MS, "xid": 1, "acked_ns": T0 + 903 * MS},
        {"msgtype": "call", "t": 2000 * MS, "xid": 2},
        {"msgtype": "reply", "t": 2002 * MS, "xid": 2},  # never acknowledged
        {"msgtype": "call", "t": 3000 * MS, "xid": 2, "conn": 2},
        {"msgtype": "reply", "t": 3002 * MS, "xid": 2, "conn": 2, "acked_ns": T0 + 3003 * MS},
    ]
    tx = match(messages(rows))
    assert tx["xid"].tolist() == [1, 1, 2]
    assert tx["n_calls"].tolist() == [1, 1, 2]
    assert tx["n_replies"].tolist() == [1, 1, 2]
    assert tx["latency_ns"].tolist() == [2 * MS + 10, 2 * MS + 10, 2 * MS + 10]


def test_an_xid_reused_every_second_is_many_calls_not_one_re_sent_for_a_day() -> None:
    """The same xid, answered each time, every second for 28 hours (issue 20,
    item 7: once chained into one call "costing 99,999 s"): a reply lost past
    the capture point explains a re-send or three, not 100,000, so a call is
    re-sent at most ``max_unheard_replies`` times after captured replies."""
    n = 100_000
    t = np.arange(n, dtype="int64") * 1_000 * MS
    rows = [{"msgtype": m, "t": int(x) + d, "xid": 7, "transport": "udp"}
            for x in t for m, d in (("call", 0), ("reply", 2 * MS))]  # fmt: skip
    limit = MatchConfig().max_unheard_replies
    tx = match(messages(rows))
    assert len(tx) == n // (limit + 1)
    assert tx["n_calls"].max() == limit + 1 and tx["n_calls"].sum() == n
    span = tx["call_times_ns"].map(lambda c: c[-1] - c[0])
    assert span.max() == limit * 1_000 * MS  # re-sent for 3 s at most, not a day
    # a reply or two lost past a server-side capture point: still one re-sent call
    tx = match(messages(rows[: 2 * (limit + 1)]))
    assert tx["n_calls"].tolist() == [limit + 1]


def test_inference_shares_the_columns_it_leaves_with_the_table() -> None:
    # issue 33: the inference made a deep copy of the whole transactions table
    # (the 10M-packet capture's peak was in it); the columns it sets are new,
    # the others the table's own arrays
    from nfstrace import inference
    from nfstrace.match import _finish

    m = messages(
        [
            {"msgtype": "call", "t": 0, "xid": 1},
            {"msgtype": "reply", "t": 3 * MS, "xid": 1},
            {"msgtype": "call", "t": 4 * MS, "xid": 2},
        ]
    )
    rows = _finish(m, match_rows(m))
    tx, out = rows[0], inference.infer(*rows[:1], m, *rows[1:], None)
    for name in ("xid", "t_call_ns", "latency_ns", "offset"):
        ours, theirs = (getattr(t[name].array, "_data", t[name].array) for t in (tx, out))
        assert np.shares_memory(ours, theirs), name
    assert out["xid"].tolist() == [1, 2]
    tx.loc[0, "xid"] = 99  # copy on write: the inference's table keeps its own value
    assert out["xid"].tolist() == [1, 2]


def match_rows(m: pd.DataFrame):
    """match's rows of a messages table, before the table is made (the
    _group_calls and _attach_replies steps of match)."""
    from nfstrace import match as mod

    calls = np.flatnonzero((m["msgtype"] == "call").to_numpy(dtype=bool))
    replies = np.flatnonzero((m["msgtype"] == "reply").to_numpy(dtype=bool))
    src, dst = mod._host_codes(m)
    groups = mod._group_calls(m, calls, src, dst, MatchConfig())
    return mod._attach_replies(m, groups, replies, src, dst, MatchConfig())[0]
