"""analysis.transport: TCP events and window stretches linked to the RPCs
they overlap (crafted captures with exact timing, and a lossy lab run)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SAMPLES

import nfstrace
from nfstrace.analysis.transport import EVENT_LINK_COLUMNS, analyze_transport

try:
    from crafted import make_frames as mf
except ImportError:  # tests/ not on sys.path: import as a package
    from tests.crafted import make_frames as mf


@pytest.fixture(scope="module")
def frames(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return mf.build_all(tmp_path_factory.mktemp("frames"))


def transport(path: Path):
    t = nfstrace.load(path)
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
