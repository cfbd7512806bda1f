"""Stalls: each cause on a crafted capture made to show it (and not the
others), the lab captures (loss-free: no retransmission stall; the win16 run:
its time lost to re-sends), and speed on a million transactions' table."""

from __future__ import annotations

import json
import re
import time
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from conftest import LAB_CAPTURES, SAMPLES, ground_truth, load_sample

import nfstrace
from nfstrace.analysis.stalls import (
    CAUSES,
    SEGMENT_COLUMNS,
    STALL_COLUMNS,
    THRESHOLD_FLOOR_NS,
    find_stalls,
)
from nfstrace.jsonable import jsonable

try:
    from crafted import make_writes as mw
except ImportError:  # tests/ not on sys.path: import as a package
    from tests.crafted import make_writes as mw

CAPTURES = sorted([*SAMPLES.glob("*.pcap"), *LAB_CAPTURES])
US, MS = 1_000, 1_000_000


@cache
def _trace(path: Path) -> nfstrace.Trace:
    return load_sample(path)


@pytest.fixture(scope="module")
def crafted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, nfstrace.Trace]:
    paths = mw.build_all(tmp_path_factory.mktemp("writes"))
    return {name: load_sample(path) for name, path in paths.items()}


def _stalls(trace: nfstrace.Trace):
    return find_stalls(trace.transactions, trace.events)


# ---- one crafted capture per cause --------------------------------------------------

# capture -> (cause, the event's own length in µs: what the stall must last, give or
# take the pace around it)
CAUSE_CASES = {
    "commit_stall": ("commit", mw.COMMIT_US),
    "jukebox": ("server_delay", mw.BACKOFF_US),
    "retransmission": ("retransmission", mw.RETRANS_TIMEOUT_US),
    "client_idle": ("client_idle", mw.IDLE_US),
    "zero_window": ("zero_window", mw.ZERO_WINDOW_US),
}


@pytest.mark.parametrize("name", CAUSE_CASES)
def test_one_stall_of_its_cause(crafted: dict[str, nfstrace.Trace], name: str) -> None:
    cause, event_us = CAUSE_CASES[name]
    result = _stalls(crafted[name])
    assert list(result.stalls.columns) == list(STALL_COLUMNS)
    assert list(result.segments.columns) == list(SEGMENT_COLUMNS)
    (stall,) = result.stalls.itertuples(index=False)
    assert stall.cause == cause
    assert stall.cause_share > 0.99
    # the event plus at most one WRITE cycle around it
    assert event_us * US <= stall.duration_ns <= (event_us + 2 * (mw.LATENCY_US + mw.TURN_US)) * US
    assert stall.client == mw.mc.CLIENT and stall.server == mw.mc.SERVER
    assert result.time_lost_by_cause == {cause: stall.duration_ns}
    # the finding carries the time lost; no finding for the other causes
    stall_findings = [f for f in result.findings() if f.kind.endswith("_stall")]
    (finding,) = stall_findings
    assert finding.kind == f"{cause}_stall" and finding.time_lost_ns == stall.duration_ns
    words = r"^1 [a-zA-Z -]*stall[^0-9]* cost [\d.]+ m?s of [\d.]+ m?s \(\d+%\)$"
    assert re.search(words, finding.title), finding.title
    json.dumps(jsonable(result), allow_nan=False)


def test_commit_stall_lasts_the_commit(crafted: dict[str, nfstrace.Trace]) -> None:
    trace = crafted["commit_stall"]
    tx = trace.transactions
    commit = tx[tx["op"] == "COMMIT"].iloc[0]
    result = _stalls(trace)
    (stall,) = result.stalls.itertuples(index=False)
    assert abs(stall.duration_ns - int(commit["latency_ns"])) <= 1 * MS
    assert stall.start_ns < commit["t_call_ns"] < commit["t_reply_ns"] < stall.end_ns
    assert "COMMIT xid 0x0000c000" in stall.detail
    finding = next(f for f in result.findings() if f.kind == "commit_stall")
    assert finding.title == "1 commit stall cost 2 s of 2 s (100%)"
    assert finding.severity == "problem"


def test_segments_between_stalls(crafted: dict[str, nfstrace.Trace]) -> None:
    result = _stalls(crafted["commit_stall"])
    (stall,) = result.stalls.itertuples(index=False)
    before, after = result.segments.itertuples(index=False)
    assert before.end_ns == stall.start_ns and after.start_ns == stall.end_ns
    # the reply ending the stall belongs to it: 10 WRITEs before, 9 after
    assert (before.writes, after.writes) == (mw.BEFORE, mw.AFTER - 1)
    assert before.bytes == mw.BEFORE * mw.BLOCK and after.bytes == (mw.AFTER - 1) * mw.BLOCK
    # WRITE every 250 µs, the first one 200 µs after the activity's start
    assert before.duration_ns == (mw.BEFORE * 250 - 50) * US
    assert before.mbit_s == pytest.approx(before.bytes * 8 / (before.duration_ns / 1e9) / 1e6)
    total = mw.BLOCK * (mw.BEFORE + mw.AFTER)
    assert result.bytes_written == total
    assert result.throughput_mbit_s == pytest.approx(total * 8e3 / result.activity_ns)
    assert result.transfer_mbit_s == pytest.approx(
        (before.bytes + after.bytes) * 8e3 / (before.duration_ns + after.duration_ns)
    )


def test_jukebox_beats_the_idle_client_it_causes(crafted: dict[str, nfstrace.Trace]) -> None:
    # during the back-off nothing is outstanding: both apply, the server's word wins
    (stall,) = _stalls(crafted["jukebox"]).stalls.itertuples(index=False)
    assert stall.cause == "server_delay"
    assert "JUKEBOX" in stall.detail and "also client_idle 100%" in stall.detail


def test_no_stall_without_a_long_gap(crafted: dict[str, nfstrace.Trace]) -> None:
    for name in ("window", "verifier_change"):
        result = _stalls(crafted[name])
        assert result.stalls.empty and result.time_lost_by_cause == {}
        assert result.threshold_ns == THRESHOLD_FLOOR_NS
        assert len(result.segments) == 1
        assert result.throughput_mbit_s == result.transfer_mbit_s
        assert not [f for f in result.findings() if f.kind.endswith("_stall")]


def test_given_threshold(crafted: dict[str, nfstrace.Trace]) -> None:
    trace = crafted["commit_stall"]
    assert find_stalls(trace.transactions, trace.events, 3_000 * MS).stalls.empty
    result = find_stalls(trace.transactions, trace.events, 1 * MS)
    assert result.threshold_method.startswith("given") and len(result.stalls) == 1


def test_default_threshold_follows_the_pace() -> None:
    # WRITEs every 10 ms (call->reply 9 ms): threshold 10 x 10 ms = 100 ms, so a
    # 60 ms gap is pace, a 150 ms one a stall (nothing in flight: client_idle)
    rows, t = [], 0
    for gap in [1] * 10 + [60] + [1] * 10 + [150] + [1] * 10:
        rows.append({"op": "WRITE", "t_call_ns": t, "t_reply_ns": t + 9 * MS, "count": 8})
        t += 9 * MS + gap * MS
    result = find_stalls(mw.transactions_table(rows), None)
    assert result.threshold_ns == 100 * MS
    (stall,) = result.stalls.itertuples(index=False)
    assert stall.duration_ns == 159 * MS and stall.cause == "client_idle"


def test_unknown_when_nothing_explains(crafted: dict[str, nfstrace.Trace]) -> None:
    # a WRITE answered after 1 s: no COMMIT, no re-send, no delay status, busy client
    rows = [{"op": "WRITE", "t_call_ns": i * MS, "t_reply_ns": i * MS + 500 * US} for i in range(5)]
    rows.append({"op": "WRITE", "t_call_ns": 5 * MS, "t_reply_ns": 1_005 * MS})
    rows += [
        {"op": "WRITE", "t_call_ns": (1_006 + i) * MS, "t_reply_ns": (1_006 + i) * MS + 500 * US}
        for i in range(5)
    ]
    for r in rows:
        r["count"] = 8
    (stall,) = find_stalls(mw.transactions_table(rows), None).stalls.itertuples(index=False)
    assert stall.cause == "unknown" and "waited 1 s for its reply" in stall.detail


# ---- lab captures -------------------------------------------------------------------


def _loss_free(capture: Path) -> bool:
    truth = ground_truth(capture)
    return truth["clean"] and not truth["impairment"]["loss_percent_each_direction"]


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_lab_captures(capture: Path) -> None:
    trace = _trace(capture)
    result = _stalls(trace)
    assert set(result.stalls["cause"]) <= {*CAUSES, "unknown"}
    assert (
        result.activity_ns > 0
        and result.bytes_written == ground_truth(capture)["workload"]["bytes"]
    )
    assert result.stalled_ns <= result.activity_ns
    if _loss_free(capture):
        assert "retransmission" not in set(result.stalls["cause"])
        assert not trace.transactions["n_calls"].gt(1).any()  # what makes the check honest
    json.dumps(jsonable(result), allow_nan=False)


def test_win16_lost_its_time_to_re_sends() -> None:
    # 16 x 32 KiB overflow the server's socket buffer: 21 re-sends (ground truth),
    # nearly the whole 4.9 s write phase waits on them
    capture = SAMPLES / "v3-udp-py-w32k-win16-d0-l0.pcap"
    result = _stalls(_trace(capture))
    assert set(result.stalls["cause"]) == {"retransmission"}
    lost = result.time_lost_by_cause["retransmission"]
    assert lost >= 0.8 * result.activity_ns
    phase_ns = ground_truth(capture)["client"]["write_phase_seconds"] * 1e9
    assert result.activity_ns == pytest.approx(phase_ns, rel=0.05)
    assert result.transfer_mbit_s > 50 * result.throughput_mbit_s


# ---- speed ------------------------------------------------------------------------------


def test_large_table_in_seconds() -> None:
    n = 200_000
    tx = mw.synthetic_writes(n)
    started = time.perf_counter()
    result = find_stalls(tx, None)
    elapsed = time.perf_counter() - started
    commits = n // 3200
    resent = n // 1000
    by_cause = result.stalls["cause"].value_counts().to_dict()
    assert by_cause == {"commit": commits, "retransmission": resent}
    assert np.all(result.stalls["duration_ns"] > 1_000 * MS)
    assert elapsed < 30  # seconds; measured about 1 s on the 2-core CI machine
