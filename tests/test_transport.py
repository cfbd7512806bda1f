"""analysis.transport: TCP events and window stretches linked to the RPCs
they overlap (crafted captures with exact timing, and a lossy lab run)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import SAMPLES, load_sample

import nfstrace
from nfstrace.analysis.transport import EVENT_LINK_COLUMNS, analyze_transport

try:
    from crafted import make_damaged as md
    from crafted import make_frames as mf
except ImportError:  # tests/ not on sys.path: import as a package
    from tests.crafted import make_damaged as md
    from tests.crafted import make_frames as mf


@pytest.fixture(scope="module")
def frames(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return mf.build_all(tmp_path_factory.mktemp("frames"))


def transport(path: Path):
    t = load_sample(path)
    return t, analyze_transport(t.transactions, t.events)


def test_zero_window_delays_the_write_not_the_getattr(frames) -> None:
    t, r = transport(frames["zero_window"])
    (ev,) = r.events.itertuples()
    write = t.transactions.set_index("op").loc["WRITE"]
    assert (ev.kind, ev.rpcs, ev.rpc_ops) == ("tcp_zero_window", 1, "WRITEx1")
    assert ev.rpc_latency_ns == write.latency_ns
    assert r.zero_window_ns == (mf.at(mf.ZERO_WINDOW_US[1]) - mf.at(mf.ZERO_WINDOW_US[0]))
    (f,) = [f for f in r.findings() if f.kind == "tcp_zero_window"]
    assert f.time_lost_ns == r.zero_window_ns and r.rpcs_in_zero_window == 1
    assert list(r.events.columns) == list(EVENT_LINK_COLUMNS)


def test_window_full_stretches_linked_to_the_write(frames) -> None:
    _, r = transport(frames["window_full"])
    assert r.window_full == len(mf.FULL_STRETCHES_US)
    assert (r.events.rpc_ops == "WRITEx1").all()
    assert r.rpcs_in_window_full == 1
    (conn,) = r.connections.itertuples()
    assert (conn.window_full, conn.rpcs_delayed, conn.zero_windows) == (3, 1, 0)
    assert conn.window_full_ns == sum((b - a) * 1000 for a, b in mf.FULL_STRETCHES_US)


def test_tcp_retransmission_linked(frames) -> None:
    _, r = transport(frames["tcp_retransmission"])
    assert r.events[["kind", "rpcs", "length"]].values.tolist() == [
        ["tcp_retransmission", 1, mf.MSS]
    ]
    assert "tcp_retransmission_delay" in {f.kind for f in r.findings()}


def test_clean_exchange_has_nothing_to_report(frames) -> None:
    _, r = transport(frames["plain"])
    assert r.events.empty and r.connections.empty and r.findings() == []


def test_lossy_lab_run() -> None:
    _, r = transport(SAMPLES / "v3-tcp-nfscp-w64k-d2-l0.5.pcap")
    assert r.retransmissions == 4
    rt = r.events[r.events.kind == "tcp_retransmission"]
    assert (rt.rpcs > 0).all() and rt.rpc_ops.str.contains("WRITE").all()
    assert r.zero_windows == 0 and r.holes == 0


def _reference(ev: pd.DataFrame, tx: pd.DataFrame) -> tuple[list, list, list, list]:
    """The definition, one event at a time: RPCs first sent on the event's
    connection whose [call, reply (else last send)] overlaps the event."""
    rpcs = tx[tx["n_calls"] > 0]
    start = rpcs["t_call_ns"].astype("int64").to_numpy()
    end = rpcs["t_reply_ns"].fillna(rpcs["t_call_last_end_ns"]).astype("int64").to_numpy()
    conn = rpcs["conn"].to_numpy("int64")
    counts, sums, ops, ids = [], [], [], []
    for e in ev.itertuples():
        hit = [
            i
            for i in range(len(rpcs))
            if conn[i] == e.conn and start[i] <= e.ts_ns + e.duration_ns and end[i] >= e.ts_ns
        ]
        names, n = np.unique(rpcs["op"].iloc[hit].astype(str), return_counts=True)
        counts.append(len(hit))
        sums.append(int(rpcs["latency_ns"].iloc[hit].fillna(0).sum()))
        ops.append(" ".join(f"{o}x{c}" for o, c in zip(names, n, strict=True)))
        ids.append(set(hit))
    return counts, sums, ops, ids


def test_events_linked_to_overlapping_rpcs_of_their_connection() -> None:
    rng = np.random.default_rng(11)
    hosts = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    n = 400
    t_call = np.sort(rng.integers(0, 10**9, n))
    # latencies over several orders of magnitude (and a few very long ones)
    latency = (10 ** rng.uniform(3, 7, n)).astype("int64")
    latency[rng.random(n) < 0.02] = 5 * 10**8
    answered = rng.random(n) < 0.9
    client = rng.choice(hosts[:2], n)
    tx = pd.DataFrame(
        {
            "client": pd.array(client, dtype="string"),
            "server": pd.array(["10.0.0.3"] * n, dtype="string"),
            "conn": pd.array(rng.integers(1, 6, n), dtype="Int64"),
            "op": pd.array(rng.choice(["WRITE", "COMMIT", "GETATTR"], n), dtype="string"),
            "n_calls": rng.choice([1, 1, 1, 0], n),
            "t_call_ns": pd.array(t_call, dtype="Int64"),
            "t_call_last_end_ns": pd.array(t_call + 1000, dtype="Int64"),
            "t_reply_ns": pd.array(np.where(answered, t_call + latency, 0), dtype="Int64"),
            "latency_ns": pd.array(np.where(answered, latency, 0), dtype="Int64"),
            "call_frame": pd.array(np.arange(n) + 1, dtype="Int64"),
        }
    )
    tx.loc[~answered, ["t_reply_ns", "latency_ns"]] = pd.NA
    m = 300
    kinds = rng.choice(list(("tcp_retransmission", "tcp_zero_window", "tcp_window_full")), m)
    src = rng.choice(hosts, m)
    ev = pd.DataFrame(
        {
            "ts_ns": np.sort(rng.integers(0, 10**9, m)),
            "frame": np.arange(m),
            "conn": rng.integers(1, 6, m),
            "src": pd.array(src, dtype="string"),
            "sport": 2049,
            "dst": pd.array(np.where(src == "10.0.0.3", rng.choice(hosts[:2], m), "10.0.0.3")),
            "dport": 800,
            "kind": pd.array(kinds, dtype="string"),
            "seq": 0,
            "length": rng.integers(0, 65536, m),
            "duration_ns": np.where(kinds == "tcp_retransmission", 0, rng.integers(0, 10**7, m)),
        }
    )
    r = analyze_transport(tx, ev)
    counts, sums, ops, ids = _reference(ev, tx)
    assert r.events["rpcs"].tolist() == counts and sum(counts) > 100
    assert r.events["rpc_latency_ns"].tolist() == sums
    assert r.events["rpc_ops"].tolist() == ops
    zero = set().union(*(ids[i] for i in range(m) if kinds[i] == "tcp_zero_window"))
    assert r.rpcs_in_zero_window == len(zero)
    rpcs = tx[tx["n_calls"] > 0]
    for c in r.connections.itertuples():
        hit = set().union(*(ids[i] for i in range(m) if ev["conn"][i] == c.conn))
        assert c.rpcs_delayed == len(hit)
        assert c.delayed_latency_ns == int(rpcs["latency_ns"].iloc[sorted(hit)].fillna(0).sum())
        assert c.window_full == int(((ev["conn"] == c.conn) & (kinds == "tcp_window_full")).sum())


@pytest.mark.slow
def test_linking_grows_linearly_with_connections(tmp_path: Path) -> None:
    """N connections of one client/server pair, each closing its window for good
    (issue 20, item 5): joined by host pair each zero window overlapped every
    later RPC (N^2/2 links: 4,000 connections took 15 s and 0.8 GB); by
    connection one RPC each.  Compared as a ratio in one run: 4N links are 4x N's."""
    links = {}
    for n in (200, 800):
        path = tmp_path / f"zw{n}.pcap"
        md.zero_windows(n).write(path)
        t = load_sample(path)
        r = t.diagnosis.transport
        assert r.zero_windows == n
        links[n] = int(r.events["rpcs"].sum())
        assert r.rpcs_in_zero_window == n
    assert links[800] == 4 * links[200] == 4 * 200


# ---- tshark's expert info, linked to the RPCs (issue 34, item 10) -----------------------

LOSSY = [
    SAMPLES / "causes" / "v3-tcp-nfscp-w64k-d2-l0.5.pcap",
    SAMPLES / "v3-tcp-nfscp-w64k-d2-l0.5.pcap",
    SAMPLES / "causes" / "v41-tcp-nfsrs-w1m-d2-l0.5.pcap",
]


@pytest.mark.parametrize("capture", LOSSY, ids=lambda p: p.stem)
def test_expert_info_counts_tsharks_retransmissions_and_links_the_writes(capture: Path) -> None:
    """The segments re-sent are the frames tshark's expert info flags as a
    retransmission or out of order (the same bytes again: tshark tells the two
    by timing), each kind linked to the distinct RPCs in progress meanwhile,
    the WRITEs among them, and the call frames of the slowest."""
    import subprocess

    from tshark_ref import tshark

    flagged = subprocess.run(
        [tshark(), "-n", "-r", str(capture), "-Y",
         "tcp.analysis.retransmission or tcp.analysis.out_of_order", "-T", "fields", "-e",
         "frame.number"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    t = load_sample(capture)
    result = t.diagnosis.transport
    ev = result.events
    ours = sorted(ev.loc[ev["kind"] == "tcp_retransmission", "frame"].tolist())
    assert ours == sorted(map(int, flagged)) and ours
    expert = result.expert.set_index("kind")
    row = expert.loc["tcp_retransmission"]
    assert row["what"] == "Retransmission" and row["events"] == len(ours)
    assert row["first_frame"] == ours[0]
    # the RPCs: distinct, at most the per-event overlaps summed, WRITEs among them
    linked = ev.loc[ev["kind"] == "tcp_retransmission", "rpcs"]
    assert 0 < row["rpcs"] <= linked.sum() and 0 < row["writes"] <= row["rpcs"]
    tx = t.transactions
    frames = [int(f) for f in row["rpc_frames"].split()]
    assert 0 < len(frames) <= 5 and len(set(frames)) == len(frames)
    resent = ev.loc[ev["kind"] == "tcp_retransmission", "ts_ns"].to_numpy()
    during = [
        tx[(tx["call_frame"] == f) & tx.apply(
            lambda r: ((resent >= r["t_call_ns"]) & (resent <= r["t_reply_ns"])).any(), axis=1
        )]
        for f in frames
    ]  # fmt: skip
    assert all(len(d) for d in during)  # each was in progress during one of them
    slowest = [d["latency_ns"].max() for d in during]
    assert slowest == sorted(slowest, reverse=True)  # the slowest first
    # shown: in --full and in the HTML report
    full = nfstrace.summary(t, full=True, width=120)
    assert "TCP expert info" in full and "Retransmission" in full
    from nfstrace.reports.html import render_report

    page = render_report(t, t.diagnosis)
    assert 'id="tcp-expert"' in page and f">{row['rpc_frames']}<" in page


def test_latency_table_gives_min_and_sum() -> None:
    """tshark's SRT table gives min and sum beside the average: the latency
    table has them (min_ms, sum_ms), and the terminal's and the report's
    operations show them beside p50/p99."""
    t = load_sample(LOSSY[0])
    writes = t.transactions[
        (t.transactions["op"] == "WRITE") & t.transactions["latency_ns"].notna()
    ]
    row = t.latency[t.latency["op"] == "WRITE"].iloc[0]
    assert row["min_ms"] == pytest.approx(writes["latency_ns"].min() / 1e6)
    assert row["sum_ms"] == pytest.approx(writes["latency_ns"].sum() / 1e6)
    assert row["min_ms"] <= row["p50_ms"] <= row["p99_ms"] <= row["max_ms"] <= row["sum_ms"]
    text = nfstrace.summary(t, width=120)
    head = next(line for line in text.splitlines() if " op " in line and "calls" in line)
    assert [h.strip() for h in head.split("┃")[2:6]] == ["min", "p50", "p99", "sum"]
    assert f"{row['sum_ms']:,.3f}" in text and f"{row['min_ms']:,.3f}" in text
