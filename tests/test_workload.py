"""The workload view: operation mix vs LADDIS, load windows and signature, Little's law."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import SAMPLES, ground_truth, load_sample
from test_model import T0, US, make_tx

from nfstrace.analysis.workload import (
    LADDIS_MIX,
    LITTLE_TOLERANCE,
    analyze_workload,
    outstanding,
    outstanding_means,
)
from nfstrace.jsonable import jsonable


def calls(ops: list[str], spacing_ns: int = 100 * US, latency_ns: int = 50 * US) -> list[dict]:
    return [
        {"op": op, "t_call_ns": T0 + i * spacing_ns, "latency_ns": latency_ns}
        for i, op in enumerate(ops)
    ]


def test_op_mix_maps_v3_and_v4_operations_to_laddis() -> None:
    ops = ["LOOKUP"] * 4 + ["READDIRPLUS", "FSSTAT", "ACCESS", "MKDIR", "RMDIR", "COMMIT"]
    rows = calls(ops) + [{"op": "NULL", "prog": 100005, "t_call_ns": T0, "latency_ns": US}]
    mix = analyze_workload(make_tx(rows)).op_mix.set_index("category")
    assert list(mix.index[: len(LADDIS_MIX)]) == list(LADDIS_MIX)  # LADDIS rows first
    assert mix.loc["LOOKUP", "calls"] == 4 and mix.loc["LOOKUP", "laddis_share"] == 0.34
    for v2 in ("READDIR", "STATFS", "GETATTR", "CREATE", "REMOVE"):
        assert mix.loc[v2, "calls"] == 1
    assert (
        mix.loc["other: COMMIT", "calls"] == 1 and mix.loc["other: COMMIT"].isna()["laddis_share"]
    )
    assert mix["calls"].sum() == 10  # the MOUNT call is not NFS
    assert mix["share"].sum() == pytest.approx(1.0)


def test_mix_finding_names_the_laddis_category_as_such() -> None:
    """ACCESS counts in the LADDIS GETATTR category: a capture without a single
    GETATTR call is not 'mostly GETATTR' but mostly ACCESS, in that category."""
    mix = analyze_workload(make_tx(calls(["ACCESS"] * 2 + ["LOOKUP", "WRITE"])))
    assert mix.op_mix.set_index("category").loc["GETATTR", "ops"] == "ACCESS"
    title = next(f.title for f in mix.findings() if f.kind == "workload_mix")
    assert title.startswith("4 NFS calls, mostly ACCESS (50%, the LADDIS GETATTR category);")
    both = analyze_workload(make_tx(calls(["ACCESS"] * 2 + ["GETATTR"] * 3 + ["WRITE"])))
    assert both.op_mix.set_index("category").loc["GETATTR", "ops"] == "GETATTR, ACCESS"
    own = analyze_workload(make_tx(calls(["GETATTR"] * 3 + ["WRITE"])))
    title = next(f.title for f in own.findings() if f.kind == "workload_mix")
    assert title.startswith("4 NFS calls, mostly GETATTR (75%);")
    one = analyze_workload(make_tx(calls(["COMMIT"])))
    title = next(f.title for f in one.findings() if f.kind == "workload_mix")
    assert title.startswith("1 NFS call, mostly COMMIT (100%, outside the LADDIS mix);")


def test_outstanding_is_time_weighted() -> None:
    # two calls overlapping half of the 300 µs span: 0-200 and 100-300 -> mean 400/300
    tx = make_tx(calls(["WRITE", "WRITE"], spacing_ns=100 * US, latency_ns=200 * US))
    mean, peak = outstanding(tx)
    assert mean == pytest.approx(400 / 300) and peak == 2
    mean, peak = outstanding(tx, T0 + 200 * US, T0 + 300 * US)
    assert mean == pytest.approx(1.0) and peak == 1


def test_windows_and_littles_law() -> None:
    # 100 calls, one every 100 µs, each 250 µs: 10,000 ops/s, 2.5 in flight
    tx = make_tx(calls(["GETATTR"] * 100, 100 * US, 250 * US))
    r = analyze_workload(tx, window_ns=1_000 * US)
    full = r.windows[r.windows["calls"] == 10]
    assert len(full) == 10
    assert full["ops_per_s"].tolist() == pytest.approx([10_000] * 10)
    assert full["mean_latency_ms"].tolist() == pytest.approx([0.25] * 10)
    assert r.outstanding_source == "computed" and r.little_ok
    assert r.outstanding_mean == pytest.approx(r.little_product)
    assert r.little_product == pytest.approx(2.5, rel=0.03)
    assert not [f for f in r.findings() if f.kind == "littles_law_mismatch"]
    # a given outstanding count that disagrees beyond the tolerance is flagged
    wrong = analyze_workload(tx, outstanding_mean=2.5 * (1 + 2 * LITTLE_TOLERANCE))
    assert wrong.little_ok is False and wrong.outstanding_source == "given"
    assert [f.kind for f in wrong.findings()].count("littles_law_mismatch") == 1
    json.dumps(jsonable(wrong), allow_nan=False)


def test_signature_finds_where_latency_turns_up() -> None:
    # windows of 1 ms at growing load; latency flat at 0.2 ms, then x5 above 6,000 ops/s
    rows, t = [], T0
    for load in range(1, 11):  # calls per window
        latency = 200 * US if load <= 5 else 1000 * US
        for i in range(load * 1):
            rows.append(
                {"op": "WRITE", "t_call_ns": t + i * (1000 * US // load), "latency_ns": latency}
            )
        t += 1000 * US
    r = analyze_workload(make_tx(rows), window_ns=1000 * US)
    assert r.base_ms == pytest.approx(0.2)
    assert r.slope > 0
    assert r.saturation is not None and 5_000 < r.saturation <= 7_000
    assert "workload_saturation" in [f.kind for f in r.findings()]


def test_flat_latency_has_no_saturation() -> None:
    rows = calls(["READ"] * 200, 50 * US, 100 * US)
    r = analyze_workload(make_tx(rows), window_ns=1000 * US)
    assert r.saturation is None and r.base_ms == pytest.approx(0.1)


def test_lab_capture_mix_matches_ground_truth() -> None:
    capture = SAMPLES / "v3-tcp-nfscp-w64k-d2-l0.pcap"
    gt = ground_truth(capture)
    r = analyze_workload(load_sample(capture).transactions)
    mix = r.op_mix.set_index("category")["calls"]
    assert mix["WRITE"] == gt["client"]["expected_write_rpcs"]
    assert mix["other: COMMIT"] == gt["client"]["expected_commit_rpcs"]
    assert r.little_ok  # computed from the same calls: holds by construction
    d = json.loads(json.dumps(jsonable(r), allow_nan=False))
    assert d["calls"] == int(mix.sum())


def test_render_workload() -> None:
    from rich.console import Console

    from nfstrace.reports.model_view import render_workload

    console = Console(record=True, width=200)
    render_workload(analyze_workload(make_tx(calls(["LOOKUP", "WRITE", "COMMIT"]))), console)
    text = console.export_text()
    assert "LOOKUP" in text and "34%" in text and "other: COMMIT" in text
    assert "Little's law holds" in text


def test_outstanding_means_over_many_windows_equal_one_at_a_time() -> None:
    rng = np.random.default_rng(5)
    calls = 1_700_000_000 * 10**9 + np.sort(rng.integers(0, 10**10, 500))
    tx = pd.DataFrame(
        {
            "t_call_ns": pd.array(calls, dtype="Int64"),
            "t_reply_ns": pd.array(calls + (10 ** rng.uniform(3, 9, 500)).astype("int64")),
        }
    )
    tx.loc[rng.random(500) < 0.1, "t_reply_ns"] = pd.NA  # unanswered: not counted
    starts = np.sort(rng.choice(calls, 60)) + rng.integers(-(10**6), 10**6, 60)
    ends = starts + rng.integers(-(10**3), 10**9, 60)  # a few empty (end <= start)
    got = outstanding_means(tx, starts, ends)
    expected = [outstanding(tx, int(s), int(e))[0] for s, e in zip(starts, ends, strict=True)]
    assert np.array_equal(got, np.array(expected), equal_nan=True)
    assert np.isnan(got).sum() < 10 and not np.isnan(got).all()


def test_re_sent_calls_are_not_load() -> None:
    """UDP with loss: the calls re-sent after a timeout have the timeout as their
    latency; counted as load they made a 'latency turns up' knee (issue 15). The
    windows take calls sent once, so there is none; with the re-sent calls' times
    put back, the knee returns (the test can fail)."""
    t = load_sample(SAMPLES / "causes" / "v3-udp-py-w32k-mtu1000-d2-l0.5.pcap")
    tx = t.transactions
    assert (tx["n_calls"] > 1).sum() >= 3
    r = analyze_workload(tx)
    assert r.saturation is None
    assert "workload_saturation" not in [f.kind for f in r.findings()]
    as_once = tx.assign(n_calls=np.minimum(tx["n_calls"], 1))
    assert analyze_workload(as_once).saturation is not None
