"""Pace and concurrency: the outstanding-RPC step function and its time
weighting on hand-made tables, exact figures on crafted captures, and the lab
captures' concurrency against their ground truth."""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path

import pandas as pd
import pytest
from conftest import LAB_CAPTURES, SAMPLES, ground_truth, load_sample

import nfstrace
from nfstrace.analysis import pace
from nfstrace.analysis.pace import (
    analyze_pace,
    outstanding_steps,
    time_at_levels,
    time_weighted_mean,
    turnaround_gaps,
)
from nfstrace.jsonable import jsonable

try:
    from crafted import make_writes as mw
except ImportError:  # tests/ not on sys.path: import as a package
    from tests.crafted import make_writes as mw

CLIENT_SIDE = sorted(
    p for p in [*SAMPLES.glob("*.pcap"), *LAB_CAPTURES] if ".server-side" not in p.name
)
US = 1_000


@cache
def _trace(path: Path) -> nfstrace.Trace:
    return load_sample(path)


@pytest.fixture(scope="module")
def crafted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, nfstrace.Trace]:
    paths = mw.build_all(tmp_path_factory.mktemp("writes"))
    return {name: load_sample(path) for name, path in paths.items()}


# ---- the step function on a hand-made table ---------------------------------------

C2, S2 = "10.0.0.3", "10.0.0.4"


def _tiny() -> pd.DataFrame:
    # Pair 1: GETATTR [0, 10], WRITE [5, 15], WRITE [10, 20] (starts as the
    # GETATTR ends), WRITE from 25 never answered (outstanding to the trace's
    # end, 40).  Pair 2: GETATTR [30, 40].
    return mw.transactions_table(
        [
            {"op": "GETATTR", "t_call_ns": 0, "t_reply_ns": 10},
            {"op": "WRITE", "t_call_ns": 5, "t_reply_ns": 15, "count": 8},
            {"op": "WRITE", "t_call_ns": 10, "t_reply_ns": 20, "count": 8},
            {"op": "WRITE", "t_call_ns": 25, "t_reply_ns": None, "count": 8},
            {"op": "GETATTR", "t_call_ns": 30, "t_reply_ns": 40, "client": C2, "server": S2},
        ]
    )


def test_outstanding_steps_one_row_per_change() -> None:
    steps = outstanding_steps(_tiny())
    pair1 = steps[steps["client"] == mw.mc.CLIENT]
    assert pair1[["t_ns", "outstanding", "outstanding_writes"]].values.tolist() == [
        [0, 1, 0],
        [5, 2, 1],
        [10, 2, 2],  # a GETATTR ends as a WRITE starts: only the WRITE count changes
        [15, 1, 1],
        [20, 0, 0],
        [25, 1, 1],
        [40, 0, 0],  # unanswered: outstanding to the trace's last time
    ]
    pair2 = steps[steps["client"] == C2]
    assert pair2[["t_ns", "outstanding"]].values.tolist() == [[30, 1], [40, 0]]
    assert (pair2["server"] == S2).all()


def test_same_instant_call_and_reply_is_no_change() -> None:
    tx = mw.transactions_table(
        [
            {"op": "WRITE", "t_call_ns": 0, "t_reply_ns": 10, "count": 8},
            {"op": "WRITE", "t_call_ns": 10, "t_reply_ns": 20, "count": 8},
        ]
    )
    steps = outstanding_steps(tx)
    assert steps[["t_ns", "outstanding"]].values.tolist() == [[0, 1], [20, 0]]


def _window(start: int, end: int, client: str = mw.mc.CLIENT, server: str = mw.mc.SERVER):
    return pd.DataFrame(
        {"client": [client], "server": [server], "start_ns": [start], "end_ns": [end]}
    )


def test_time_at_levels_and_mean() -> None:
    steps = outstanding_steps(_tiny())
    # pair 1 over [0, 40]: level 1 for 5+5+15, level 2 for 10, level 0 for 5
    at = time_at_levels(steps, "outstanding", _window(0, 40))
    assert at.to_dict() == {0: 5, 1: 25, 2: 10}
    assert time_weighted_mean(at) == pytest.approx((25 + 2 * 10) / 40)
    # a window cutting steps: [2, 12] -> level 1 for 3, level 2 for 7
    at = time_at_levels(steps, "outstanding", _window(2, 12))
    assert at.to_dict() == {1: 3, 2: 7}
    assert time_weighted_mean(at) == pytest.approx(1.7)
    # before the pair's first change the level is 0
    assert time_at_levels(steps, "outstanding", _window(-10, 5)).to_dict() == {0: 10, 1: 5}
    # WRITEs only, both pairs' windows: pair 2 has no WRITE (level 0 throughout)
    windows = pd.concat([_window(0, 40), _window(30, 40, C2, S2)])
    at = time_at_levels(steps, "outstanding_writes", windows)
    assert at.to_dict() == {0: 5 + 5 + 10, 1: 5 + 5 + 15, 2: 5}
    assert math.isnan(time_weighted_mean(pd.Series(dtype="int64")))


@pytest.mark.parametrize("chunk", [1, 2, 3, 5])
def test_time_at_levels_the_same_in_chunks(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    """Rows worked through a few at a time (LEVEL_CHUNK): a pair's steps cut
    across chunks, and a pair starting a chunk, give the time of one pass."""
    steps = outstanding_steps(_tiny())
    windows = pd.concat([_window(-10, 40), _window(30, 45, C2, S2)])
    whole = {c: time_at_levels(steps, c, windows) for c in ("outstanding", "outstanding_writes")}
    assert len(steps) > 5 and whole["outstanding"].sum() == 50 + 15
    monkeypatch.setattr(pace, "LEVEL_CHUNK", chunk)
    for column, expected in whole.items():
        pd.testing.assert_series_equal(time_at_levels(steps, column, windows), expected)


def test_turnaround_gaps_to_next_call_of_the_pair() -> None:
    tx = mw.transactions_table(
        [
            {"op": "WRITE", "t_call_ns": 0, "t_reply_ns": 10, "count": 8},
            {"op": "GETATTR", "t_call_ns": 12, "t_reply_ns": 14},
            {"op": "WRITE", "t_call_ns": 20, "t_reply_ns": 30, "count": 8},
            {"op": "WRITE", "t_call_ns": 11, "t_reply_ns": 50, "count": 8, "client": C2},
        ]
    )
    assert sorted(turnaround_gaps(tx, writes_only=True).tolist()) == [10]  # 10 -> 20
    assert sorted(turnaround_gaps(tx, writes_only=False).tolist()) == [2, 6]  # 10->12, 14->20


# ---- crafted captures -----------------------------------------------------------------


def test_window_of_four_exact(crafted: dict[str, nfstrace.Trace]) -> None:
    # Per batch of 4: 10 µs at 1, 2, 3; 270 µs at 4; 10 µs at 3, 2, 1; 50 µs
    # at 0 between batches (twice).
    pace = analyze_pace(crafted["window"].transactions)
    levels = pace.levels.set_index("level")["writes_ns"]
    assert levels.to_dict() == {0: 100 * US, 1: 60 * US, 2: 60 * US, 3: 60 * US, 4: 810 * US}
    assert pace.write_activity_ns == 1090 * US
    assert pace.outstanding_writes_max == mw.WINDOW == 4
    assert pace.outstanding_writes_mean == pytest.approx(3600 / 1090)
    assert pace.sequential_share == pytest.approx(160 / 1090)
    assert not pace.sequential
    assert pace.idle_ns == 100 * US
    assert pace.gap("call_to_reply") == mw.WINDOW_LATENCY_US * US
    # replies at +300..+330 µs, next batch at +380: 80, 70, 60, 50 µs, twice
    assert pace.gap("reply_to_next_call") == 65 * US
    assert pace.gap("reply_to_next_call", stat="p10_ns") == 50 * US
    kinds = [f.kind for f in pace.findings()]
    assert "sequential_writes" not in kinds and "write_concurrency" in kinds
    json.dumps(jsonable(pace), allow_nan=False)


def test_sequential_client_finding(crafted: dict[str, nfstrace.Trace]) -> None:
    pace = analyze_pace(crafted["client_idle"].transactions)
    assert pace.sequential and pace.sequential_share == 1.0
    assert pace.outstanding_writes_max == 1
    assert pace.pace_ns == (mw.LATENCY_US + mw.TURN_US) * US
    assert pace.write_size == mw.BLOCK
    (finding,) = [f for f in pace.findings() if f.kind == "sequential_writes"]
    assert "WRITEs ran one at a time: pace 250 µs per 4 KiB" in finding.title
    # 18 regular 50 µs turnarounds; the 1 s pause is not something concurrency saves
    assert finding.time_lost_ns == pace.saving_ns == 18 * mw.TURN_US * US
    # idle: the pause plus the 18 turnarounds
    assert pace.idle_ns == mw.IDLE_US * US + 18 * mw.TURN_US * US


# ---- lab captures ---------------------------------------------------------------------


@pytest.mark.parametrize("capture", CLIENT_SIDE, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_outstanding_writes_within_client_limit(capture: Path) -> None:
    client = ground_truth(capture)["client"]
    pace = analyze_pace(_trace(capture).transactions)
    assert 1 <= pace.outstanding_writes_max <= client["max_outstanding_writes"]
    assert 0 < pace.outstanding_writes_mean <= pace.outstanding_writes_max
    assert pace.levels["writes_share"].sum() == pytest.approx(1.0)
    assert pace.gap("call_to_reply", "write") > 0
    json.dumps(jsonable(pace), allow_nan=False)


def test_udp_window_16_vs_default() -> None:
    default = analyze_pace(_trace(SAMPLES / "v3-udp-py-w32k-d0-l0.pcap").transactions)
    win16 = analyze_pace(_trace(SAMPLES / "v3-udp-py-w32k-win16-d0-l0.pcap").transactions)
    default_window = ground_truth(SAMPLES / "v3-udp-py-w32k-d0-l0.pcap")["client"]["window"]
    assert default.outstanding_writes_max <= default_window == 3
    # the 16-deep window is used: more WRITEs in flight than the default ever has
    assert default_window < win16.outstanding_writes_max <= 16
    assert win16.outstanding_writes_mean > default.outstanding_writes_mean
    assert not win16.sequential
