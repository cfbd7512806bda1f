"""analysis.latency on a tiny hand-built transactions table: grouping, order,
errors, NFSv4 operations inside COMPOUNDs (each counted once per compound)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from conftest import SAMPLES

import nfstrace
from nfstrace.analysis import latency
from nfstrace.analysis.grouping import first_rows, row_codes
from nfstrace.analysis.latency import compound_op_latency, latency_table

MS = 1_000_000


def tx(rows: list[tuple]) -> pd.DataFrame:
    """(client, program, vers, op, ops, n_calls, n_replies, latency_ms, status, t_call_ns)"""
    cols = ["client", "program", "vers", "op", "ops", "n_calls", "n_replies", "lat", "status", "t"]
    t = pd.DataFrame(rows, columns=cols)
    return pd.DataFrame(
        {
            "client": t["client"].astype("string"),
            "server": pd.array(["10.0.0.9"] * len(t), dtype="string"),
            "xid": pd.Series(range(len(t)), dtype="int64") % 3,  # xids repeat
            "program": t["program"].astype("category"),
            "vers": t["vers"].astype("int32"),
            "op": t["op"].astype("string"),
            "ops": t["ops"].astype("string"),
            "n_calls": t["n_calls"].astype("int32"),
            "n_replies": t["n_replies"].astype("int32"),
            "latency_ns": (t["lat"] * MS).astype("Int64"),
            "status": t["status"].astype("Int64"),
            "reply_stat": pd.Categorical(["accepted"] * len(t)),
            "accept_stat": pd.array([0] * len(t), dtype="Int32"),
            "t_call_ns": t["t"].astype("Int64"),
        }
    )


ROWS = [
    ("10.0.0.2", "nfs", 4, "OPEN", "SEQUENCE PUTFH OPEN GETFH GETATTR", 1, 1, 2.0, 0, 100),
    ("10.0.0.1", "nfs", 4, "OPEN", "SEQUENCE PUTFH OPEN GETFH GETATTR", 1, 1, 4.0, 2, 200),
    ("10.0.0.1", "nfs", 4, "GETATTR", "SEQUENCE PUTFH GETATTR PUTFH GETATTR", 2, 1, 1.0, 0, 300),
    ("10.0.0.1", "nfs", 4, "GETATTR", "SEQUENCE PUTFH GETATTR", 1, 0, None, None, 400),
    ("10.0.0.1", "nfs", 3, "WRITE", "", 1, 1, 3.0, 0, 500),
    ("10.0.0.1", "mount", 3, "MNT", None, 1, 1, 0.5, 0, 600),
    ("10.0.0.1", "nfs", 3, "WRITE", "", 0, 1, None, 0, None),  # a reply without call
]


def test_latency_per_operation() -> None:
    t = latency_table(tx(ROWS))
    assert t[["program", "vers", "op", "calls", "replied", "no_reply"]].values.tolist() == [
        ["nfs", 4, "GETATTR", 2, 1, 1],  # most calls first, then by program, version, op
        ["nfs", 4, "OPEN", 2, 2, 0],
        ["mount", 3, "MNT", 1, 1, 0],
        ["nfs", 3, "WRITE", 1, 1, 0],
    ]
    assert t["retransmitted"].tolist() == [1, 0, 0, 0]
    assert t["errors"].tolist() == [0, 1, 0, 0]
    assert t.loc[1, ["mean_ms", "p50_ms", "max_ms"]].tolist() == [3.0, 3.0, 4.0]
    by_pair = latency_table(tx(ROWS), by=["client", "server"])
    assert by_pair[["client", "op", "calls"]].values.tolist()[:3] == [
        ["10.0.0.1", "GETATTR", 2],
        ["10.0.0.1", "MNT", 1],  # mount < nfs
        ["10.0.0.1", "WRITE", 1],  # version 3 < 4
    ]


def test_compound_operations_count_once_per_compound() -> None:
    t = compound_op_latency(tx(ROWS)).set_index("op")
    assert t["calls"].to_dict() == {"SEQUENCE": 4, "PUTFH": 4, "GETATTR": 4, "OPEN": 2, "GETFH": 2}
    assert t.loc["PUTFH", "mean_ms"] == (2.0 + 4.0 + 1.0) / 3
    assert t.loc["GETATTR", ["replied", "retransmitted", "errors"]].tolist() == [3, 1, 1]
    # two transactions with the same client, server, xid and call time are one compound
    twice = tx([ROWS[0], ROWS[0], ROWS[0]])
    twice["xid"] = 7
    assert compound_op_latency(twice).set_index("op")["calls"].to_dict() == dict.fromkeys(
        ["SEQUENCE", "PUTFH", "OPEN", "GETFH", "GETATTR"], 1
    )

    # ... also when their lists differ: each operation once, where it came first
    other = tx([ROWS[0], ROWS[3], ROWS[2]])
    other["client"] = pd.array(["10.0.0.1"] * 3, dtype="string")
    other["xid"], other["t_call_ns"] = 7, pd.array([100, 100, 300], dtype="Int64")
    assert compound_op_latency(other).set_index("op")["calls"].to_dict() == {
        "SEQUENCE": 2, "PUTFH": 2, "OPEN": 1, "GETFH": 1, "GETATTR": 2
    }  # fmt: skip


def test_row_codes_tell_equal_rows() -> None:
    """Equal rows share a code (missing equal to missing), numbered in order of
    appearance, also past the int64 range of the mixed radix (re-numbered)."""
    a = pd.array(["x", None, "x", "y", None], dtype="string")
    codes = row_codes([np.array([3, 1, 3, 3, 1]), a])
    assert codes.tolist() == [0, 1, 0, 2, 1]
    assert first_rows(codes).tolist() == [0, 1, 3]
    assert first_rows(codes[:0]).tolist() == []
    wide = [np.arange(1000) % k for k in range(2, 40)]  # 39! combinations >> 2**63
    codes = row_codes(wide)
    assert codes.tolist() == list(range(1000))
    assert row_codes([*wide, np.zeros(1000)]).tolist() == codes.tolist()


def test_errors_by_name_and_server_time() -> None:
    """Errors are named (issue 18: ``NOENT ×7``), the most frequent first, by the
    status table of the reply's NFS version; an RPC-level refusal by its RFC 5531
    name.  The server's median time (tshark's rpc.time, from the call's last
    packet) sits beside the first-packet latency."""
    rows = [("10.0.0.1", "nfs", 3, "LOOKUP", "", 1, 1, 1.0, 2, i) for i in range(7)]
    rows += [("10.0.0.1", "nfs", 3, "LOOKUP", "", 1, 1, 1.0, 13, 7)]  # ACCES
    rows += [("10.0.0.1", "nfs", 4, "OPEN", "SEQUENCE PUTFH OPEN", 1, 1, 2.0, 10008, 8)]
    rows += [("10.0.0.1", "nfs", 3, "WRITE", "", 1, 1, 3.0, 0, 9)]
    t = tx(rows)
    t.loc[9, "accept_stat"] = 3  # PROC_UNAVAIL: accepted, not run
    t["srt_ns"] = t["latency_ns"] - MS // 2
    out = latency_table(t).set_index("op")
    assert out.loc["LOOKUP", "error_names"] == "NOENT ×7, ACCES ×1"
    assert out.loc["OPEN", "error_names"] == "DELAY ×1"  # 10008 in NFSv4: NFS4ERR_DELAY
    assert out.loc["WRITE", "error_names"] == "PROC_UNAVAIL ×1"
    assert out["errors"].tolist() == [8, 1, 1]
    assert out.loc["LOOKUP", "server_p50_ms"] == 0.5 and out.loc["WRITE", "server_p50_ms"] == 2.5
    assert latency_table(tx(ROWS))["error_names"].tolist() == ["", "NOENT ×1", "", ""]


def _by_definition(t: pd.DataFrame) -> pd.DataFrame:
    """compound_op_latency the slow way: a table with a row per distinct
    operation of each compound, through latency_table."""
    v4 = t[(t["ops"].astype(object).fillna("") != "") & (t["n_calls"] > 0)]
    rows, ops = [], []
    for i, listed in enumerate(v4["ops"].astype(str)):
        for op in dict.fromkeys(listed.split(" ")):
            rows.append(i)
            ops.append(op)
    exploded = v4.iloc[rows].drop(columns=["srt_ns"], errors="ignore").assign(op=ops)
    return latency_table(exploded)


def test_compound_latency_one_operation_at_a_time_is_the_whole_table() -> None:
    """compound_op_latency aggregates each operation's rows on their own (to
    bound its memory): the table is the one of every operation's rows at once."""
    pd.testing.assert_frame_equal(compound_op_latency(tx(ROWS)), _by_definition(tx(ROWS)))
    trace = nfstrace.load(SAMPLES / "v41-tcp-nfsrs-w1m-d0-l0.pcap")
    got = compound_op_latency(trace.transactions)
    assert len(got) > 3  # SEQUENCE, PUTFH, WRITE, COMMIT...
    pd.testing.assert_frame_equal(got, _by_definition(trace.transactions))


def test_samples_sorted_in_groups_as_a_lexsort() -> None:
    """The one-key sort (whole nanoseconds below 2**SAMPLE_BITS) and the lexsort
    it falls back to (fractions, negatives, values past the bits) sort alike."""
    rng = np.random.default_rng(5)
    g = rng.integers(0, 7, 5000)
    cases = {
        "ns": rng.integers(0, 10**9, 5000).astype("float64"),
        "fractions": rng.random(5000) * 1000,
        "negative": rng.integers(-(10**6), 10**6, 5000).astype("float64"),
        "past the bits": rng.integers(0, 2**45, 5000).astype("float64"),
    }
    for name, v in cases.items():
        expected = v[np.lexsort((v, g))]
        np.testing.assert_array_equal(latency._sorted_in_groups(g, v, 7), expected, name)
    assert not len(latency._sorted_in_groups(g[:0], cases["ns"][:0], 7))
