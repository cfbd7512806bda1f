"""Writes: progress, sizes, stable levels, COMMITs, verifier changes and
sequential offsets on crafted captures (exact) and on the lab captures
(against their ground truth)."""

from __future__ import annotations

import json
import time
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from conftest import LAB_CAPTURES, SAMPLES, ground_truth, load_sample

import nfstrace
from nfstrace.analysis.writes import (
    COMMIT_COLUMNS,
    PROGRESS_COLUMNS,
    VERIFIER_CHANGE_COLUMNS,
    analyze_writes,
    write_progress,
)
from nfstrace.jsonable import jsonable

try:
    from crafted import make_writes as mw
except ImportError:  # tests/ not on sys.path: import as a package
    from tests.crafted import make_writes as mw

CAPTURES = sorted([*SAMPLES.glob("*.pcap"), *LAB_CAPTURES])
US = 1_000


@cache
def _trace(path: Path) -> nfstrace.Trace:
    return load_sample(path)


@pytest.fixture(scope="module")
def crafted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, nfstrace.Trace]:
    paths = mw.build_all(tmp_path_factory.mktemp("writes"))
    return {name: load_sample(path) for name, path in paths.items()}


# ---- crafted captures ---------------------------------------------------------------


def test_progress_in_reply_order(crafted: dict[str, nfstrace.Trace]) -> None:
    progress = write_progress(crafted["client_idle"].transactions)
    assert list(progress.columns) == list(PROGRESS_COLUMNS)
    n = mw.BEFORE + mw.AFTER
    assert len(progress) == n
    assert (progress["bytes"] == mw.BLOCK).all()
    assert progress["cum_bytes"].tolist() == [mw.BLOCK * (i + 1) for i in range(n)]
    first_reply = mw.at(mw.T0 + mw.LATENCY_US)
    assert progress["t_ns"].iloc[0] == first_reply
    assert np.all(np.diff(progress["t_ns"]) > 0)
    assert progress["xid"].iloc[0] == 0x1000


def test_failed_write_is_not_progress(crafted: dict[str, nfstrace.Trace]) -> None:
    tx = crafted["jukebox"].transactions
    progress = write_progress(tx)
    assert mw.JUKEBOX_XID not in set(progress["xid"])
    assert progress["cum_bytes"].iloc[-1] == mw.BLOCK * (mw.BEFORE + mw.AFTER)
    result = analyze_writes(tx)
    assert (result.writes, result.answered, result.failed) == (21, 21, 1)
    assert result.failed_by_status == {"NFS3ERR_JUKEBOX": 1}
    (finding,) = [f for f in result.findings() if f.kind == "write_errors"]
    assert finding.title == "1 of 21 WRITE replies were errors (NFS3ERR_JUKEBOX ×1)"
    # the retry starts where the refused WRITE did: 19 of 20 continue the previous one
    assert result.sequential_share == pytest.approx(19 / 20)


def test_verifier_change_flags_the_uncommitted_bytes(crafted: dict[str, nfstrace.Trace]) -> None:
    result = analyze_writes(crafted["verifier_change"].transactions)
    changes = result.verifier_changes
    assert list(changes.columns) == list(VERIFIER_CHANGE_COLUMNS)
    (change,) = changes.itertuples(index=False)
    assert (change.old, change.new) == (mw.VERF_A.hex(), mw.VERF_B.hex())
    assert (change.op, change.xid) == ("COMMIT", mw.VERIFIER_COMMIT2)
    # WRITEs 6..10 after the first COMMIT, less the FILE_SYNC one
    assert change.uncommitted_bytes == mw.VERIFIER_AT_RISK == 4 * mw.BLOCK
    (finding,) = [f for f in result.findings() if f.kind == "verifier_change"]
    assert finding.severity == "problem"
    assert finding.details["uncommitted_bytes"] == 4 * mw.BLOCK
    assert "16 KiB written unstable and not yet committed must be re-sent" in finding.title
    assert result.stable_asked == {"UNSTABLE": 14, "FILE_SYNC": 1}
    assert result.committed_granted == {"UNSTABLE": 14, "FILE_SYNC": 1}
    assert result.unstable_bytes == 14 * mw.BLOCK
    json.dumps(jsonable(result), allow_nan=False)


def test_verifier_change_before_any_commit() -> None:
    # no COMMIT before the change: everything written unstable is at risk
    rows = [
        {"op": "WRITE", "t_call_ns": 0, "t_reply_ns": 10, "count": 100, "verifier": "aa"},
        {"op": "WRITE", "t_call_ns": 20, "t_reply_ns": 30, "count": 50, "verifier": "aa"},
        {"op": "WRITE", "t_call_ns": 40, "t_reply_ns": 50, "count": 70, "verifier": "bb"},
        {"op": "COMMIT", "t_call_ns": 60, "t_reply_ns": 70, "verifier": "bb"},
    ]
    for r in rows:
        r |= {"stable": mw.UNSTABLE, "committed": mw.UNSTABLE, "offset": 0}
    result = analyze_writes(mw.transactions_table(rows))
    assert result.verifier_changes[["t_ns", "op", "uncommitted_bytes"]].values.tolist() == [
        [50, "WRITE", 150]
    ]


def test_commits_table(crafted: dict[str, nfstrace.Trace]) -> None:
    commits = analyze_writes(crafted["verifier_change"].transactions).commits
    assert list(commits.columns) == list(COMMIT_COLUMNS)
    assert commits["xid"].tolist() == [
        mw.VERIFIER_COMMIT1,
        mw.VERIFIER_COMMIT2,
        mw.VERIFIER_COMMIT3,
    ]
    assert (commits["duration_ns"] == mw.LATENCY_US * US).all()
    assert (commits["status"] == 0).all() and (commits["offset"] == 0).all()
    assert commits["verifier"].tolist() == [mw.VERF_A.hex(), mw.VERF_B.hex(), mw.VERF_B.hex()]
    long = analyze_writes(crafted["commit_stall"].transactions).commits
    assert long["duration_ns"].tolist() == [mw.COMMIT_US * US]


def test_sequential_share(crafted: dict[str, nfstrace.Trace]) -> None:
    result = analyze_writes(crafted["window"].transactions)
    assert result.sequential_share == pytest.approx(mw.WINDOW_SEQUENTIAL / 11)
    (file,) = result.files.itertuples(index=False)
    assert (file.writes, file.sequential, file.bytes) == (12, mw.WINDOW_SEQUENTIAL, 12 * mw.BLOCK)
    assert not [f for f in result.findings() if f.kind == "random_writes"]  # 12 WRITEs: too few
    idle = analyze_writes(crafted["client_idle"].transactions)
    assert idle.sequential_share == 1.0
    assert idle.sizes[["size", "writes", "share"]].values.tolist() == [[mw.BLOCK, 20, 1.0]]
    assert idle.median_size == mw.BLOCK


def test_random_writes_finding() -> None:
    rng = np.random.default_rng(7)
    blocks = rng.permutation(40)
    rows = [
        {"op": "WRITE", "t_call_ns": i * 100, "t_reply_ns": i * 100 + 50, "count": 10,
         "offset": int(b) * 10, "fh": "0a"}
        for i, b in enumerate(blocks)
    ]  # fmt: skip
    expected = int(np.sum(np.diff(blocks) == 1)) / 39
    result = analyze_writes(mw.transactions_table(rows))
    assert result.sequential_share == pytest.approx(expected)
    assert [f.kind for f in result.findings()] == ["random_writes"]


# ---- lab captures -------------------------------------------------------------------


def _loss_free(capture: Path) -> bool:
    truth = ground_truth(capture)
    return truth["clean"] and not truth["impairment"]["loss_percent_each_direction"]


LOSS_FREE = [c for c in CAPTURES if _loss_free(c)]


@pytest.mark.parametrize("capture", LOSS_FREE, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_bytes_written_match_ground_truth(capture: Path) -> None:
    truth = ground_truth(capture)
    written = truth["client"].get("bytes_written") or truth["workload"]["bytes"]
    progress = write_progress(_trace(capture).transactions)
    assert progress["cum_bytes"].iloc[-1] == written == truth["workload"]["server_file_size"]


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_lab_writes_against_ground_truth(capture: Path) -> None:
    truth = ground_truth(capture)
    client = truth["client"]
    result = analyze_writes(_trace(capture).transactions)
    if "expected_commit_rpcs" in client:
        assert len(result.commits) == client["expected_commit_rpcs"]
    else:
        assert 1 <= len(result.commits) <= client["expected_commit_rpcs_max"]
    assert (result.commits["status"] == 0).all()
    # no server restarts in the lab
    assert result.verifier_changes.empty
    assert not [f for f in result.findings() if f.kind == "verifier_change"]
    asked = client.get("stable_requested") or client.get("stable_how_requested")
    assert set(result.stable_asked) <= {asked, "unknown"}  # -s 256 v4.1: not captured
    if "committed_in_replies" in client:
        assert result.committed_granted == client["committed_in_replies"]
    assert result.writes == client["expected_write_rpcs"]
    assert result.failed == 0
    json.dumps(jsonable(result), allow_nan=False)


def test_large_table_in_seconds() -> None:
    tx = mw.synthetic_writes(200_000)
    started = time.perf_counter()
    progress = write_progress(tx)
    result = analyze_writes(tx)
    elapsed = time.perf_counter() - started
    assert progress["cum_bytes"].iloc[-1] == 200_000 * 32768
    assert len(result.commits) == 200_000 // 3200 and result.sequential_share == 1.0
    assert elapsed < 30  # seconds; measured about 1 s


V3_NAMED = [
    SAMPLES / "causes" / "v3-tcp-nfsrs-w1m-d0-l0.pcap",
    SAMPLES / "v3-tcp-nfscp-w1m-d0-l0.pcap",
]


@pytest.mark.parametrize("capture", V3_NAMED, ids=lambda p: p.stem)
def test_files_are_named_from_the_replies_that_handed_out_their_handles(capture: Path) -> None:
    """Per-file view (issue 18): the handle an NFSv3 LOOKUP/CREATE reply hands out
    is decoded (as tshark's nfs.fhandle in those replies), and the file written
    through it is named by the call's name; both parsers alike."""
    import tshark_ref

    t = load_sample(capture)
    tx = t.transactions
    rows = tshark_ref.fields(
        str(capture),
        ["frame.number", "nfs.fhandle"],
        "rpc.msgtyp==1 && nfs.status3==0 && "
        "(nfs.procedure_v3==3 || nfs.procedure_v3>=8 && nfs.procedure_v3<=11)",
    )
    truth = {int(f[0]): f[1] for f in rows}
    ours = tx[tx["reply_frame"].isin(list(truth))]
    assert len(ours) == len(truth) >= 2
    assert dict(zip(ours["reply_frame"].astype(int), ours["reply_fh"], strict=True)) == truth
    (written,) = t.files.itertuples(index=False)
    create = tx[tx["op"] == "CREATE"].iloc[0]
    assert written.fh == create["reply_fh"] and written.name == create["name"] != ""
    assert written.name == ground_truth(capture)["workload"]["file_name"]
    assert written.bytes == 1_048_576 and written.seconds > 0
    from nfstrace.reports.html import render_report

    page = render_report(t, t.diagnosis)
    table = page[page.index('id="files"') : page.index("</table>", page.index('id="files"'))]
    assert f">{written.name}<" in table
