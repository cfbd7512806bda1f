"""The report's figures (nfstrace/reports/figures.py) on hand-built tables with
known answers, and on a real sample capture against its ground truth.

The builders here (a study-like write trace, its time budget, a diagnosis
with every table) are also used by tests/test_report_browser.py; the time
budget's figures are tested in tests/test_report_budget.py.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from conftest import SAMPLES, ground_truth, load_sample

from nfstrace.analysis.budget import CAUSES, PAIR_COLUMNS, Budget
from nfstrace.analysis.diagnosis import Diagnosis, diagnose
from nfstrace.analysis.findings import Finding
from nfstrace.analysis.latency import compound_op_latency, latency_table
from nfstrace.analysis.overview import overview
from nfstrace.analysis.pace import outstanding_steps
from nfstrace.analysis.timeline import timeline
from nfstrace.analysis.verdict import PairVerdict, Verdict
from nfstrace.analysis.writes import commit_table, write_progress
from nfstrace.parsers.stats import ParseStats
from nfstrace.reports import figures as fg
from nfstrace.schema import (
    EVENT_DTYPES,
    MESSAGE_DTYPES,
    MESSAGE_FACTS,
    TRANSACTION_DTYPES,
)
from nfstrace.trace import Trace

START_NS = 1_700_000_000 * 10**9
BLOCK = 8192
CYCLE_NS = 390_000  # the study's pace: call→reply 360 µs + 30 µs to the next call
LATENCY_NS = 360_000
STALL_NS = 2_266_000_000  # the study's gap: a COMMIT flushing 100 MB
CLIENT, SERVER = "10.0.0.1", "10.0.0.2"
# The study's split of a WRITE's call→reply time (the model's terms, ns): 8 KiB
# crossing at 1 Gbit/s, then the round trip, then the server (the rest).
TRANSFER_NS, ROUND_TRIP_NS = 65_536, 192_680
VERIFIER = "0102030405060708"
WRITE_CALL_HEADER = 116  # an NFSv3 WRITE call's RPC bytes before its data
# What every call of a write_trace shares: one TCP connection of one NFSv3 client,
# every call answered once, wholly captured and decoded.
CONNECTION: dict[str, object] = {
    "client": CLIENT,
    "client_port": 686,
    "server": SERVER,
    "server_port": 2049,
    "transport": "tcp",
    "conn": 1,
    "call_conns": 1,
    "prog": 100003,
    "program": "nfs",
    "vers": 3,
    "auth": "sys",
    "n_replies": 1,
    "reply_stat": "accepted",
    "accept_stat": 0,
    "status": 0,
    "call_truncated": False,
    "call_decode": "ok",
    "reply_decode": "ok",
    "inferred": "",
}


# ---- builders ---------------------------------------------------------------------------


def transactions(rows: dict[str, object], n: int) -> pd.DataFrame:
    """A transactions table of n rows: the given columns (arrays, lists or one
    value for all rows), <NA> (or 0) elsewhere."""
    table = {}
    for col, dtype in TRANSACTION_DTYPES.items():
        value = rows.get(col)
        if dtype == "object":
            table[col] = pd.Series(value if value is not None else [None] * n, dtype=object)
        elif value is None:
            fill = 0 if dtype in ("int64", "int32") else pd.NA
            table[col] = pd.Series(fill, index=range(n), dtype=dtype)
        elif np.ndim(value) == 0:
            table[col] = pd.Series(value, index=range(n)).astype(dtype)
        else:
            table[col] = pd.Series(value).astype(dtype)
    return pd.DataFrame(table)


def write_trace(
    n_writes: int, *, stall_after: int | None = None, resent: int | None = None, name: str = ""
) -> pd.DataFrame:
    """n_writes sequential 8 KiB UNSTABLE WRITEs at the study's pace; optionally a
    COMMIT stall of STALL_NS after write `stall_after`, WRITE `resent` sent three
    times (the study's 0xa29a2094), and a LOOKUP of `name` answered NFS3ERR_NOENT."""
    i = np.arange(n_writes, dtype="int64")
    t_call = START_NS + i * CYCLE_NS
    if stall_after is not None:
        t_call = t_call + np.where(i > stall_after, STALL_NS + CYCLE_NS, 0)
    latency = np.full(n_writes, LATENCY_NS, dtype="int64")
    n_calls = np.ones(n_writes, dtype="int32")
    call_times: list[object] = [None] * n_writes
    if resent is not None:
        n_calls[resent] = 3
        latency[resent] = 2_266_000_000
        first = int(t_call[resent])
        call_times[resent] = [first, first + 369_000_000, first + 1_779_000_000]
    last_send = t_call + np.where(n_calls > 1, 1_779_000_000, 0)  # the re-sent one's third
    t_reply = t_call + latency
    writes = {
        **CONNECTION,
        "xid": 0x1000 + i,
        "proc": 7,
        "op": "WRITE",
        "t_call_ns": t_call,
        "t_call_end_ns": t_call + TRANSFER_NS,  # 8 KiB at 1 Gbit/s
        "t_call_last_ns": last_send,
        "t_call_last_end_ns": last_send + TRANSFER_NS,
        "t_reply_first_ns": t_reply,
        "t_reply_ns": t_reply,
        "latency_ns": latency,
        "latency_last_ns": t_reply - last_send - TRANSFER_NS,
        "srt_ns": latency - TRANSFER_NS,
        "n_calls": n_calls,
        "call_times_ns": call_times,
        "offset": i * BLOCK,
        "count": BLOCK,
        "stable": 0,
        "reply_count": BLOCK,
        "committed": 0,
        "verifier": VERIFIER,
        "write_bytes": BLOCK,
        "call_bytes": BLOCK + WRITE_CALL_HEADER,
        "reply_bytes": 136,
    }
    parts = [transactions(writes, n_writes)]

    def extra(op: str, proc: int, t: int, lat: int, status: int, fname: str = "") -> None:
        row = {
            **CONNECTION,
            "xid": [0x9000 + len(parts)],
            "proc": proc,
            "op": op,
            "t_call_ns": [t],
            "t_call_end_ns": [t],
            "t_call_last_ns": [t],
            "t_call_last_end_ns": [t],
            "t_reply_first_ns": [t + lat],
            "t_reply_ns": [t + lat],
            "latency_ns": [lat],
            "latency_last_ns": [lat],
            "srt_ns": [lat],
            "n_calls": 1,
            "status": status,
            "name": fname,
            "verifier": VERIFIER if op == "COMMIT" else None,
            "call_bytes": 108,
            "reply_bytes": 128,
        }
        parts.append(transactions(row, 1))

    if stall_after is not None:  # the COMMIT that fills the stall
        extra("COMMIT", 21, int(t_call[stall_after]) + CYCLE_NS, STALL_NS, 0)
    if name:
        extra("LOOKUP", 3, START_NS - 1_000_000, 100_000, 2, name)
    tx = pd.concat(parts, ignore_index=True)
    rows, call, first, _ = _in_time_order(tx)
    frame = np.arange(1, len(rows) + 1, dtype="int64")  # a frame each, in time order
    call_frame = np.empty(len(tx), dtype="int64")
    call_frame[rows[first]] = frame[first]
    reply_frame = np.empty(len(tx), dtype="int64")
    reply_frame[rows[~call]] = frame[~call]
    return tx.assign(call_frame_first=call_frame, call_frame=call_frame, reply_frame=reply_frame)


def _in_time_order(tx: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every send of every call (call_times_ns after the first where re-sent)
    and every reply of a transactions table, in time order (a reply at a call's
    time after it): their rows in tx, whether each is a call, whether it is its
    call's first send, and its time."""
    n = len(tx)
    resends = [(i, t) for i, ts in enumerate(tx["call_times_ns"]) if isinstance(ts, list)
               for t in ts[1:]]  # fmt: skip
    again = np.array([i for i, _ in resends], dtype="int64")
    rows = np.r_[np.arange(n), again, np.arange(n)]
    call = np.r_[np.ones(n + len(again), dtype=bool), np.zeros(n, dtype=bool)]
    first = np.r_[np.ones(n, dtype=bool), np.zeros(len(again) + n, dtype=bool)]
    start = np.r_[
        tx["t_call_ns"].to_numpy("int64"),
        np.array([t for _, t in resends], dtype="int64"),
        tx["t_reply_first_ns"].to_numpy("int64"),
    ]
    order = np.lexsort((~call, start))
    return rows[order], call[order], first[order], start[order]


def messages_of(tx: pd.DataFrame) -> pd.DataFrame:
    """The messages behind a write_trace as a capture gives them: every send of
    every call and every reply, one frame each, in time order, with the columns
    the analysis reads (``schema.MESSAGE_FACTS``: what the command line keeps)."""
    rows, call, _, start = _in_time_order(tx)
    sent = tx["t_call_end_ns"].to_numpy("int64") - tx["t_call_ns"].to_numpy("int64")
    size = np.where(call, tx["call_bytes"].to_numpy("int64")[rows],
                    tx["reply_bytes"].to_numpy("int64")[rows])  # fmt: skip
    hosts = tx[["client", "server"]].astype(str).to_numpy()[rows]
    return pd.DataFrame(
        {
            "ts_first_ns": start,
            "ts_last_ns": start + np.where(call, sent[rows], 0),
            "frame_first": np.arange(1, len(rows) + 1, dtype="int64"),
            "src": np.where(call, hosts[:, 0], hosts[:, 1]),
            "dst": np.where(call, hosts[:, 1], hosts[:, 0]),
            "transport": tx["transport"].astype(str).to_numpy()[rows],
            "xid": tx["xid"].to_numpy("int64")[rows],
            "msgtype": np.where(call, "call", "reply"),
            "op": tx["op"].astype(str).to_numpy()[rows],
            "rpc_len": size,
            "frames": 1,
            "ip_frags": 1,
        }
    ).astype({c: MESSAGE_DTYPES[c] for c in MESSAGE_FACTS})


def synthetic_trace(tx: pd.DataFrame, path: str = "synthetic.pcap") -> Trace:
    """A Trace around a transactions table (a write_trace): its messages
    (messages_of), no transport events, and the diagnosis ``diagnose`` makes of
    them, as ``nfstrace.load`` does."""
    messages = messages_of(tx)
    events = pd.DataFrame(columns=list(EVENT_DTYPES)).astype(EVENT_DTYPES)
    stats = ParseStats()
    return Trace(
        paths=(path,),
        messages=messages,
        transactions=tx,
        latency=latency_table(tx),
        latency_by_pair=latency_table(tx, by=["client", "server"]),
        compound_latency=compound_op_latency(tx),
        events=events,
        stats=stats,
        overview=overview(messages, tx),
        diagnosis=diagnose(messages, tx, events, stats),
    )


def _pair_table(values: dict[str, object]) -> pd.DataFrame:
    """One budget.pairs row (``PAIR_COLUMNS``, in their types): the values
    given, 0 for the other times and counts, NaN for the other rates."""
    row = {}
    for column, doc in PAIR_COLUMNS.items():
        kind = doc.split(":")[0]
        value = values.get(column, 0 if kind == "int64" else math.nan)
        row[column] = pd.array(
            [value], dtype="str" if kind == "str" else kind.replace("float", "float64")
        )
    return pd.DataFrame(row)


def study_budget(tx: pd.DataFrame) -> Budget:
    """The time budget of a write_trace of one client/server pair, as the study
    splits it: each WRITE's call→reply split into transfer (TRANSFER_NS),
    round_trip (ROUND_TRIP_NS) and server (the rest), each COMMIT in flight
    commit, the time between them client_idle.  Re-sends are left out: every
    WRITE is split as if sent once.  From the first WRITE call to the last
    reply; four intervals per WRITE (a million WRITEs: four million).  One
    WRITE in flight at a time: each cause's time is on the critical path."""
    w = tx[tx["op"] == "WRITE"]
    client, server = str(w["client"].iloc[0]), str(w["server"].iloc[0])
    t = w["t_call_ns"].to_numpy("int64")
    reply = t + LATENCY_NS
    cuts = [t, t + TRANSFER_NS, t + TRANSFER_NS + ROUND_TRIP_NS]
    xids = np.char.mod("0x%08x", w["xid"].to_numpy("int64"))
    starts = [*cuts]
    ends = [*cuts[1:], reply]
    causes = [np.full(len(t), c, dtype=object) for c in ("transfer", "round_trip", "server")]
    evidence = [np.char.add("WRITE xid ", xids).astype(object)] * 3
    c = tx[tx["op"] == "COMMIT"]
    starts.append(c["t_call_ns"].to_numpy("int64"))
    ends.append(c["t_reply_ns"].to_numpy("int64"))
    causes.append(np.full(len(c), "commit", dtype=object))
    evidence.append(np.full(len(c), "COMMIT in flight", dtype=object))
    start, end = np.concatenate(starts), np.concatenate(ends)
    cause, words = np.concatenate(causes), np.concatenate(evidence)
    order = np.argsort(start, kind="stable")
    start, end, cause, words = start[order], end[order], cause[order], words[order]
    gap = np.flatnonzero(start[1:] > end[:-1])  # nothing outstanding: the client's time
    start = np.r_[start, end[gap]]
    end = np.r_[end, start[gap + 1]]
    cause = np.r_[cause, np.full(len(gap), "client_idle", dtype=object)]
    words = np.r_[words, np.full(len(gap), "nothing outstanding", dtype=object)]
    order = np.argsort(start, kind="stable")
    n = len(order)
    intervals = pd.DataFrame(
        {
            "client": pd.Series([client], dtype="str").repeat(n).to_numpy(),
            "server": pd.Series([server], dtype="str").repeat(n).to_numpy(),
            "start_ns": start[order],
            "end_ns": end[order],
            "duration_ns": (end - start)[order],
            "cause": pd.array(cause[order], dtype="str"),
            "evidence": pd.array(words[order], dtype="str"),
            "frame": np.full(n, -1, dtype="int64"),
        }
    )
    per_cause = intervals.groupby("cause")["duration_ns"].sum()
    elapsed = int(intervals["end_ns"].max() - intervals["start_ns"].min())
    nbytes = int(w["write_bytes"].sum())
    pairs = _pair_table(
        {
            "client": client,
            "server": server,
            "start_ns": int(intervals["start_ns"].min()),
            "end_ns": int(intervals["end_ns"].max()),
            "elapsed_ns": elapsed,
            "bytes": nbytes,
            "mbit_s": nbytes * 8e3 / elapsed,
            "writes": len(w),
            "write_size": BLOCK,
            "rtt_ns": float(ROUND_TRIP_NS),
            "capture_point": "client",
            "transport": "tcp",
            "max_outstanding": 1,
            **{f"{c}_ns": int(per_cause.get(c, 0)) for c in CAUSES},
            **{f"{c}_path_ns": int(per_cause.get(c, 0)) for c in CAUSES},
        }
    )
    return Budget(pairs=pairs, intervals=intervals)


def full_diagnosis(trace: Trace, stall_after: int) -> Diagnosis:
    """The diagnosis of a write_trace (``trace.diagnosis``) with the study's
    numbers where a test needs known answers: its budget (study_budget), the
    verdict "commit", the COMMIT stall and the slopes around it, the model's
    parameters and terms, the workload's mix and windows, a write verifier
    change at the COMMIT's reply, and the findings in the study's order."""
    tx, base = trace.transactions, trace.diagnosis
    commit = tx[tx["op"] == "COMMIT"].iloc[0]
    w = tx[tx["op"] == "WRITE"]
    start_ns = int(w["t_reply_ns"].min())
    stalls = pd.DataFrame(
        {
            "start_ns": [int(commit["t_call_ns"])],
            "end_ns": [int(commit["t_reply_ns"])],
            "duration_ns": [STALL_NS],
            "cause": ["commit"],
            "detail": ["COMMIT of 100 MB in flight"],
            "client": [CLIENT],
            "server": [SERVER],
            "cause_share": [1.0],
        }
    )
    seg_end = int(w["t_reply_ns"].iloc[stall_after])
    segments = pd.DataFrame(
        {
            "start_ns": [start_ns, int(commit["t_reply_ns"])],
            "end_ns": [seg_end, int(w["t_reply_ns"].max())],
            "duration_ns": [seg_end - start_ns, int(w["t_reply_ns"].max() - commit["t_reply_ns"])],
            "bytes": [BLOCK * (stall_after + 1), BLOCK * (len(w) - stall_after - 1)],
            "writes": [stall_after + 1, len(w) - stall_after - 1],
            "mbit_s": [259.99, 133.85],
            "client": [CLIENT, CLIENT],
            "server": [SERVER, SERVER],
        }
    )
    model = replace(
        base.model,
        parameters=pd.DataFrame(
            {
                "name": ["T_prop", "T_ser", "T_B", "T_op"],
                "value_s": [96.34e-6, 65.536e-6, 175.98e-6, 61.87e-6],
                "method": ["NULL call→reply", "link rate", "COMMIT µs per byte", "residual"],
                "samples": [12, 0, 3, 500],
                "spread_s": [4e-6, np.nan, 10e-6, 20e-6],
                "note": ["", "given: 1 Gbit/s", "", ""],
            }
        ),
        terms={"2·T_prop": 192.68e-6, "T_ser": 65.536e-6, "T_B": 175.98e-6, "T_op": 61.87e-6},
        predictions=pd.DataFrame(
            {
                "scenario": ["sequential", "observed concurrency"],
                "outstanding": [1.0, 1.04],
                "predicted_mbit_s": [132.11, 136.88],
                "measured_mbit_s": [128.08, 137.58],
                "error_pct": [3.1, -0.5],
            }
        ),
        what_if=pd.DataFrame(
            {
                "change": ["rtt=+5ms", "disk=2x", "outstanding=16"],
                "outstanding": [1.0, 1.0, 16.0],
                "t_cycle_us": [5320.0, 408.1, 69.6],
                "predicted_mbit_s": [12.3, 160.2, 941.0],
                "dominant": ["2·T_prop", "2·T_prop", "link"],
            }
        ),
    )
    workload = replace(
        base.workload,
        op_mix=pd.DataFrame(
            {
                "category": ["WRITE", "LOOKUP", "READ", "other: COMMIT"],
                "calls": [len(w), 1, 0, 1],
                "share": [0.98, 0.01, 0.0, 0.01],
                "laddis_share": [0.15, 0.34, 0.22, 0.29],
                "ops": ["WRITE", "LOOKUP", "", "COMMIT"],
            }
        ),
        windows=pd.DataFrame(
            {
                "start_ns": START_NS + np.arange(5) * 10**9,
                "calls": [100, 500, 1000, 2000, 2500],
                "ops_per_s": [100.0, 500.0, 1000.0, 2000.0, 2500.0],
                "mbit_s": [6.5, 32.8, 65.5, 131.0, 163.8],
                "mean_latency_ms": [0.30, 0.32, 0.35, 0.40, 0.45],
            }
        ),
        base_ms=0.3,
        slope=6e-5,
    )
    budget = study_budget(tx)
    row = budget.pairs.iloc[0]
    said = f"COMMITs held the writes for {row['commit_ns'] / row['elapsed_ns']:.0%} of the time"
    pair = PairVerdict(CLIENT, SERVER, "commit", said, float(row["mbit_s"]), budget.shares())
    verdict = Verdict("commit", said, pairs=[pair])
    findings = [
        Finding(kind="verdict", title=said, severity="problem"),  # repeats the verdict
        Finding(
            kind="commit_stall",
            title="1 commit stall cost 2.266 s of the transfer",
            severity="problem",
            time_lost_ns=STALL_NS,
            details={"stalls": 1},
        ),
        Finding(
            kind="rpc_retransmission",
            title="1 WRITE re-sent twice: 2.266 s lost on one block",
            severity="warning",
            time_lost_ns=1_900_000_000,
        ),
        Finding(kind="sequential", title="WRITEs ran one at a time: pace 390 µs per 8 KiB"),
    ]
    verifier_changes = pd.DataFrame(
        {
            "t_ns": [int(commit["t_reply_ns"])],
            "client": [CLIENT],
            "server": [SERVER],
            "xid": [int(commit["xid"])],
            "op": ["COMMIT"],
            "old": [VERIFIER],
            "new": ["1112131415161718"],
            "uncommitted_bytes": [BLOCK * 4],
        }
    )
    stalls_result = replace(base.stalls, stalls=stalls, segments=segments)
    return replace(
        base,
        findings=findings,
        verdict=verdict,
        budget=budget,
        stalls=stalls_result,
        writes=replace(base.writes, verifier_changes=verifier_changes),
        model=model,
        workload=workload,
        timeline=timeline(tx, trace.events, stalls, base.repeats.retransmissions, verifier_changes),
    )


def points(fig: fg.Figure) -> int:
    return sum(len(t["x"]) for t in fig["data"] if "x" in t)


# ---- thinning ---------------------------------------------------------------------------


def test_thin_keeps_everything_under_budget() -> None:
    assert list(fg.thin_indices(np.arange(10.0), 10)) == list(range(10))


def test_thin_keeps_ends_and_spikes_within_budget() -> None:
    rng = np.random.default_rng(1)
    y = rng.normal(10, 1, 1_000_000)
    y[123_457] = 1_000.0  # a lone spike (a stuck WRITE) must survive
    y[765_432] = -1_000.0
    keep = fg.thin_indices(y, 50_000)
    assert len(keep) <= 50_000
    assert {0, 999_999, 123_457, 765_432} <= set(keep.tolist())
    assert np.all(np.diff(keep) > 0)  # still in x order


# ---- 1. cumulative transfer -----------------------------------------------------------


@pytest.fixture(scope="module")
def study() -> tuple[pd.DataFrame, Diagnosis]:
    tx = write_trace(600, stall_after=299, resent=450)
    return tx, full_diagnosis(synthetic_trace(tx), stall_after=299)


def test_cumulative_transfer_marks_everything(study) -> None:
    tx, d = study
    fig = fg.cumulative_transfer(
        d.progress,
        d.stalls.stalls,
        d.stalls.segments,
        d.repeats.retransmissions,
        d.writes.commits,
        t0_ns=START_NS,
    )
    curve = fig["data"][0]
    assert curve["y"][-1] == pytest.approx(600 * BLOCK / 1e6)  # every WRITE acknowledged
    assert curve["y"][0] == 0 and curve["x"][0] == 0  # starts at the time origin
    names = [t["name"] for t in fig["data"]]
    assert any(n.startswith("stall: commit (1, 2.266 s)") for n in names)
    resends = next(t for t in fig["data"] if t["name"].startswith("RPC re-sends"))
    assert len(resends["x"]) == 2  # two re-sends of one WRITE (call_times_ns after the first)
    t_first = int(tx.loc[450, "t_call_ns"])
    assert resends["x"][0] == pytest.approx((t_first + 369_000_000 - START_NS) / 1e9)
    commits = next(t for t in fig["data"] if t["name"].startswith("COMMIT"))
    assert len(commits["x"]) == 1 and commits["customdata"][0] == pytest.approx(STALL_NS / 1e6)
    slopes = next(t for t in fig["data"] if t["name"] == "slope between stalls")
    assert set(slopes["text"]) == {"260.0 Mbit/s", "133.8 Mbit/s"}
    stall = next(t for t in fig["data"] if t["name"].startswith("stall"))
    x = [v for v in stall["x"] if v is not None and not np.isnan(v)]
    assert max(x) - min(x) == pytest.approx(STALL_NS / 1e9)


def test_cumulative_transfer_without_writes_says_so() -> None:
    fig = fg.cumulative_transfer(pd.DataFrame(columns=["t_ns", "client", "server", "bytes"]))
    assert "no successful WRITE" in fig["layout"]["annotations"][0]["text"]


def test_cumulative_transfer_thins_a_million_acks() -> None:
    tx = write_trace(1_000_000)
    fig = fg.cumulative_transfer(write_progress(tx), t0_ns=START_NS)
    assert points(fig) <= fg.POINT_BUDGET
    assert fig["data"][0]["type"] == "scatter"  # SVG: the report's plotly.js bundle has no WebGL
    assert fig["data"][0]["y"][-1] == pytest.approx(1_000_000 * BLOCK / 1e6)
    assert "points drawn" in fig["layout"]["title"]["text"] and fig["layout"]["meta"]["notes"]


# ---- 2-4 ---------------------------------------------------------------------------


def test_transaction_throughput_is_block_over_latency(study) -> None:
    tx, _ = study
    fig = fg.transaction_throughput(tx, t0_ns=START_NS)
    (trace,) = fig["data"]
    expected = BLOCK * 8 / (LATENCY_NS / 1e9) / 1e6  # 182.04 Mbit/s
    assert np.median(trace["y"]) == pytest.approx(expected)
    assert min(trace["y"]) == pytest.approx(BLOCK * 8 / 2.266 / 1e6)  # the re-sent one


def test_write_latency_marks_resent_writes_on_a_log_axis(study) -> None:
    tx, _ = study
    fig = fg.write_latency(tx, t0_ns=START_NS)
    assert fig["layout"]["yaxis"]["type"] == "log"
    normal, resent = fig["data"]
    assert len(normal["x"]) == 599 and set(normal["y"]) == {LATENCY_NS / 1e6}
    assert list(resent["y"]) == [2266.0] and list(resent["customdata"]) == [3]


def test_outstanding_steps(study) -> None:
    _, d = study
    fig = fg.outstanding_rpcs(d.pace.outstanding, t0_ns=START_NS)
    # one WRITE at a time (the COMMIT is alone in flight during the stall), except
    # while the re-sent WRITE waits 2.266 s: each following WRITE is a second one
    assert max(fig["data"][0]["y"]) == 2 and min(fig["data"][0]["y"]) == 0
    assert fig["layout"]["yaxis"]["title"]["text"] == "RPCs in flight"


# ---- 5-8 ------------------------------------------------------------------------------


def test_latency_cdf_per_operation(study) -> None:
    tx, _ = study
    fig = fg.latency_cdf(tx)
    write = next(t for t in fig["data"] if t["name"].startswith("nfsv3 WRITE"))
    assert write["y"][0] == 0 and write["y"][-1] == 1
    assert write["x"][-1] == pytest.approx(2266.0)  # slowest WRITE
    assert fig["layout"]["xaxis"]["type"] == "log"


def test_latency_cdf_thins_by_quantile() -> None:
    tx = write_trace(200_000)
    fig = fg.latency_cdf(tx, point_budget=1_000)
    assert points(fig) <= 1_001 and fig["data"][0]["y"][-1] == 1


def test_operation_mix_in_percent(study) -> None:
    _, d = study
    fig = fg.operation_mix(d.workload.op_mix)
    mine, laddis = fig["data"]
    assert list(mine["y"]) == pytest.approx([98, 1, 0, 1])
    assert list(laddis["y"]) == pytest.approx([15, 34, 22, 29])


def test_response_vs_throughput_fit_line(study) -> None:
    _, d = study
    fig = fg.response_vs_throughput(d.workload.windows, d.workload.base_ms, d.workload.slope)
    fit = fig["data"][1]
    assert fit["y"][0] == pytest.approx(0.3) and fit["y"][-1] == pytest.approx(0.3 + 6e-5 * 2500)


def test_model_figure_stacks_the_study_terms(study) -> None:
    _, d = study
    fig = fg.model_figure(d.model.terms, d.model.predictions, d.model.what_if)
    bars = [t for t in fig["data"] if t.get("offsetgroup") == "T_cycle"]
    assert [b["name"] for b in bars] == ["2·T_prop", "T_ser", "T_B", "T_op"]
    top = bars[-1]["base"][0] + bars[-1]["y"][0]
    assert top == pytest.approx(496.066)  # µs: 8 KiB at 132.11 Mbit/s
    assert 8192 * 8 / (top * 1e-6) / 1e6 == pytest.approx(132.11, abs=0.01)
    assert any(a["text"] == "496.1 µs" for a in fig["layout"]["annotations"])
    predicted = next(t for t in fig["data"] if t["name"] == "predicted")
    assert list(predicted["y"]) == [132.11, 136.88]


def test_model_figure_without_model() -> None:
    fig = fg.model_figure(None)
    assert "could not be fitted" in fig["layout"]["annotations"][0]["text"]


def test_model_figure_without_any_term_leaves_t_cycle_out(study) -> None:
    """No term estimated (a capture without NULL calls, COMMITs or a link rate:
    write_trace's): no T_cycle to stack.  Its empty panel made the browser fail
    on its axis ("rotate(0,NaN,...)"): it is left out, and the note says why."""
    _, d = study
    unknown = dict.fromkeys(d.model.terms, math.nan)
    fig = fg.model_figure(unknown, d.model.predictions, d.model.what_if)
    titles = [a["text"] for a in fig["layout"]["annotations"]]
    assert titles[:2] == ["predicted vs measured (Mbit/s)", "what if (Mbit/s)"]
    assert not any("µs" in t for t in titles) and all(t["type"] == "bar" for t in fig["data"])
    assert "T_cycle" not in {t.get("offsetgroup") for t in fig["data"]}
    assert fig["layout"]["meta"]["notes"] == [
        "cannot estimate 2·T_prop, T_ser, T_B, T_op: T_cycle not drawn"
    ]
    assert "could not be fitted" in fg.model_figure(unknown)["layout"]["annotations"][0]["text"]


def test_capture_strings_are_escaped_in_labels() -> None:
    tx = write_trace(3)
    tx["op"] = pd.array(["<script>alert(1)</script>"] * 3, dtype="string")
    fig = fg.latency_cdf(tx)
    assert "<script>" not in fig["data"][0]["name"] and "&lt;script&gt;" in fig["data"][0]["name"]


# ---- a real capture ----------------------------------------------------------------


def test_sample_capture_figures_match_ground_truth() -> None:
    capture = SAMPLES / "v3-tcp-nfscp-w1m-d0-l0.pcap"
    truth = ground_truth(capture)
    t = load_sample(capture)
    tx = t.transactions
    progress = write_progress(tx)
    fig = fg.cumulative_transfer(progress, commits=commit_table(tx), t0_ns=t.overview.start_ns)
    assert fig["data"][0]["y"][-1] * 1e6 == pytest.approx(truth["workload"]["bytes"])
    commits = next(tr for tr in fig["data"] if tr["name"].startswith("COMMIT"))
    assert len(commits["x"]) == truth["client"]["expected_commit_rpcs"]
    w = fg.write_latency(tx)
    assert len(w["data"][0]["x"]) == truth["client"]["expected_write_rpcs"]
    thr = fg.transaction_throughput(tx)
    # one 1 MiB WRITE: its throughput is the overview's write rate
    assert thr["data"][0]["y"][0] == pytest.approx(t.overview.write.mbits_per_s)


@pytest.mark.parametrize(
    "draw", [fg.transaction_throughput, fg.write_latency, fg.latency_cdf], ids=lambda f: f.__name__
)
def test_point_budget_holds_per_figure(draw) -> None:
    tx = write_trace(200_000, resent=1)
    fig = draw(tx, point_budget=10_000)
    assert points(fig) <= 10_000 + len(fig["data"])  # the CDF adds its 0 point per operation
    assert fig["layout"]["meta"]["notes"]  # and says what it thinned


def test_point_budget_holds_for_outstanding() -> None:
    tx = write_trace(200_000)
    fig = fg.outstanding_rpcs(outstanding_steps(tx), point_budget=10_000)
    assert points(fig) <= 10_000 and max(fig["data"][0]["y"]) == 1


# ---- legibility (issue 18) -----------------------------------------------------------------


def test_log_axes_are_labelled_in_full() -> None:
    """plotly writes 200 and 300 ms on a log axis as "2" and "3": the axes carry
    their own labels at 1, 2 and 5 of each decade the values span."""
    axis = fg.log_axis(np.array([0.15, 3.0, 260.0]), "ms")
    assert axis["type"] == "log"
    assert axis["ticktext"] == ["0.1", "0.2", "0.5", "1", "2", "5", "10", "20", "50", "100",
                                "200", "500"]  # fmt: skip
    assert axis["tickvals"][-2] == 200
    wide = fg.log_axis(np.array([1e-3, 1e6]), "ms")  # 9 decades: the powers of ten
    assert wide["ticktext"][:3] == ["0.001", "0.01", "0.1"] and "1,000,000" in wide["ticktext"]
    fig = fg.write_latency(write_trace(50))
    assert fig["layout"]["yaxis"]["ticktext"] and fig["layout"]["yaxis"]["exponentformat"] == "none"


@pytest.mark.parametrize(
    ("values", "labels"),
    [
        ([10.4, 12.9, 29.4], ["10", "20", "50"]),  # the d10 capture's WRITEs: plotly showed "20"
        ([36.0], ["20", "50"]),  # one WRITE
        ([20.0], ["10", "20", "50"]),  # one value on a label: one each side too
        ([0.061, 0.068], ["0.05", "0.1"]),
        ([3.0, 4.0], ["2", "5"]),
    ],
)
def test_log_axes_span_two_labels_at_least(values: list[float], labels: list[str]) -> None:
    """Issue 34, item 3: a narrow range of values (10-30 ms) had one label in
    view; the axis runs from the 1-2-5 label at or below the smallest value to
    the one at or above the largest, so a value can be read off it."""
    axis = fg.log_axis(np.array(values), "ms")
    assert axis["ticktext"] == labels
    lo, hi = axis["range"]
    assert lo < np.log10(axis["tickvals"][0]) and hi > np.log10(axis["tickvals"][-1])
    assert lo < np.log10(min(values)) and hi > np.log10(max(values))


def test_latency_cdf_draws_the_busiest_operations_and_the_rest_as_one() -> None:
    """18 operations gave 18 lines in reused colours: the 7 busiest and "other"."""
    ops = [f"OP{i:02d}" for i in range(18)]
    counts = np.arange(18, 0, -1)  # OP00 the busiest
    n = int(counts.sum())
    tx = transactions(
        {
            "program": "nfs", "vers": 3, "op": np.repeat(ops, counts), "n_calls": 1,
            "n_replies": 1, "latency_ns": np.arange(1, n + 1) * 1_000_000,
        },
        n,
    )  # fmt: skip
    fig = fg.latency_cdf(tx)
    names = [t["name"] for t in fig["data"]]
    assert len(names) == fg.MAX_CDF_LINES
    assert names[0].startswith("nfsv3 OP00 (18)") and names[-2].startswith("nfsv3 OP06 (12)")
    assert names[-1] == f"other (11 operations) ({int(counts[7:].sum())})"


def test_response_fit_line_never_goes_below_zero() -> None:
    """A falling fit (-50 ms predicted at the busiest window) stops at zero."""
    windows = pd.DataFrame(
        {"ops_per_s": [100.0, 1000.0], "mbit_s": [1.0, 10.0], "mean_latency_ms": [40.0, 5.0],
         "calls": [10, 100]}
    )  # fmt: skip
    fig = fg.response_vs_throughput(windows, base_ms=50.0, slope=-0.1)
    fit = fig["data"][1]
    assert min(fit["y"]) == pytest.approx(0) and list(fit["x"]) == pytest.approx([0, 500])
    fig = fg.response_vs_throughput(windows, base_ms=-5.0, slope=0.01)
    assert list(fig["data"][1]["x"]) == pytest.approx([500, 1000]) and min(fig["data"][1]["y"]) >= 0


def test_a_burst_after_a_long_silence_is_zoomed_to() -> None:
    """A 1 s burst of writes 99 s into the capture was a step at the edge of the
    plot: the time axis zooms to the write activity and says so."""
    t = START_NS + 99_000_000_000 + np.arange(100) * 10_000_000
    progress = pd.DataFrame({"t_ns": t, "client": "c", "server": "s", "bytes": 65_536})
    fig = fg.cumulative_transfer(progress, t0_ns=START_NS)
    lo, hi = fig["layout"]["xaxis"]["range"]
    assert 98.9 < lo < 99.0 and 99.99 < hi < 100.1
    assert "zoomed to the write activity, 99.000-99.990 s" in fig["layout"]["meta"]["notes"][0]
    steady = progress.assign(t_ns=START_NS + np.arange(100) * 10_000_000)
    assert "range" not in fg.cumulative_transfer(steady, t0_ns=START_NS)["layout"]["xaxis"]


def test_tcp_retransmissions_are_marked_on_the_transfer() -> None:
    """TCP retransmissions were on no time plot (issue 18): each is marked on the
    cumulative transfer, at the curve's height at its time."""
    t = load_sample(SAMPLES / "v3-tcp-nfscp-w64k-d2-l0.5.pcap")
    from nfstrace.analysis.writes import write_progress

    ev = t.events[t.events["kind"].astype(str) == "tcp_retransmission"]
    assert len(ev) == t.stats.tcp["retransmitted"] == 4
    fig = fg.cumulative_transfer(
        write_progress(t.transactions), tcp_resends=ev, t0_ns=t.overview.start_ns
    )
    (marks,) = [d for d in fig["data"] if d["name"].startswith("TCP retransmissions")]
    assert marks["name"] == "TCP retransmissions (4)" and len(marks["x"]) == 4
    expect = (np.sort(ev["ts_ns"].to_numpy("float64")) - t.overview.start_ns) / 1e9
    assert list(marks["x"]) == pytest.approx(list(expect))
    curve = fig["data"][0]
    assert all(0 <= y <= max(curve["y"]) for y in marks["y"])


def test_close_stall_labels_do_not_print_over_each_other() -> None:
    """Stalls side by side: their labels step down instead of overlapping."""
    ms = 1_000_000
    stalls = pd.DataFrame(
        {
            "start_ns": START_NS + np.array([100, 110, 120, 900]) * ms,
            "duration_ns": np.array([5, 6, 7, 8]) * ms,
            "cause": ["commit", "server", "commit", "commit"],
            "detail": "",
        }
    )
    stalls["end_ns"] = stalls["start_ns"] + stalls["duration_ns"]
    progress = pd.DataFrame(
        {"t_ns": START_NS + np.arange(1, 11) * 100 * ms, "client": "c", "server": "s",
         "bytes": 65_536}
    )  # fmt: skip
    fig = fg.cumulative_transfer(progress, stalls, t0_ns=START_NS)
    shifts = [(a["x"], a["yshift"]) for a in fig["layout"]["annotations"] if "s" in a["text"]]
    assert [y for _, y in sorted(shifts)] == [0, -14, -28, 0]


# ---- the figure specs, as plotly.py would write them ---------------------------------


def _every_figure(tx: pd.DataFrame, d: Diagnosis) -> list[fg.Figure]:
    return [
        fg.cumulative_transfer(
            d.progress,
            d.stalls.stalls,
            d.stalls.segments,
            d.repeats.retransmissions,
            d.writes.commits,
            t0_ns=START_NS,
            budget_intervals=d.budget.intervals,
        ),
        fg.transaction_throughput(tx, t0_ns=START_NS),
        fg.write_latency(tx, t0_ns=START_NS),
        fg.outstanding_rpcs(d.pace.outstanding, t0_ns=START_NS),
        fg.latency_cdf(tx),
        fg.operation_mix(d.workload.op_mix),
        fg.response_vs_throughput(d.workload.windows, d.workload.base_ms, d.workload.slope),
        fg.model_figure(d.model.terms, d.model.predictions, d.model.what_if),
        fg.time_budget(d.budget.pairs),
        fg.model_figure(None),  # an empty one
    ]


def test_the_specs_are_what_plotly_py_writes(study) -> None:
    """Each figure spec, read by plotly.py (which validates every property: a
    misspelt one raises) and written by it, is the JSON ``to_json`` writes
    itself: the same properties, the same typed arrays (int64 narrowed as
    plotly narrows it), NaN as null."""
    import json

    import plotly.graph_objects as go
    import plotly.io as pio

    tx, d = study
    figures = _every_figure(tx, d)
    assert {t["type"] for f in figures for t in f["data"]} == {"scatter", "bar"}
    for fig in figures:
        ours = json.loads(fg.to_json(fig))
        theirs = json.loads(pio.to_json(go.Figure(fig), validate=True))
        assert ours == theirs, fig["layout"]["title"]["text"]
    big = fg.scatter(x=np.array([3, 300, 70_000, 2**40], dtype="int64"), y=np.array([3]))
    ours = json.loads(fg.to_json(big))
    assert ours == json.loads(pio.to_json(go.Figure(fg.figure(big))))["data"][0]
    assert ours["y"] == {"dtype": "i1", "bdata": "Aw=="}  # int64 narrowed as plotly does
    assert ours["x"] == [3, 300, 70_000, 2**40]  # too big for plotly.js's typed arrays


def test_to_json_is_safe_in_a_script() -> None:
    fig = fg.figure(fg.scatter(x=np.array([1.0, np.nan]), y=[np.inf, 2], name="</script>é"))
    text = fg.to_json(fig)
    assert "</" not in text and "é" not in text and "NaN" not in text and "Infinity" not in text
    assert (
        '"y":[null,2]' in text and '"x":{"dtype":"f8","bdata":"AAAAAAAA8D8AAAAAAAD4fw=="}' in text
    )


def test_the_template_asset_is_plotlys() -> None:
    """assets/plotly_white.json is plotly.py's "plotly_white" template
    (assets/plotly_white.README.md says how to regenerate it)."""
    import json

    import plotly.io as pio

    expected = json.loads(json.dumps(pio.templates["plotly_white"].to_plotly_json()))
    assert fg.template() == expected
    assert fg.template() is not fg.template()  # each figure its own copy


def test_subplots_lay_out_as_make_subplots() -> None:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    for n in (1, 2, 3):
        titles = [f"panel {i}" for i in range(n)]
        ours = fg.subplots(titles)
        fg.add_trace(ours, fg.bar(x=["a"], y=[1.0]), row=1, col=n)
        fg.add_annotation(ours, x="a", y=1.0, text="top", row=1, col=n)
        theirs = make_subplots(rows=1, cols=n, subplot_titles=titles)
        theirs.add_trace(go.Bar(x=["a"], y=[1.0]), row=1, col=n)
        theirs.add_annotation(x="a", y=1.0, text="top", row=1, col=n)
        expected = theirs.to_plotly_json()
        expected["layout"].pop("template")
        assert ours["data"] == expected["data"]
        assert ours["layout"].keys() == expected["layout"].keys()
        for key, value in expected["layout"].items():
            if "axis" in key:
                assert ours["layout"][key]["anchor"] == value["anchor"]
                assert ours["layout"][key]["domain"] == pytest.approx(value["domain"])
        for mine, plotlys in zip(
            ours["layout"]["annotations"], expected["layout"]["annotations"], strict=True
        ):
            assert mine == {**plotlys, "x": pytest.approx(plotlys["x"])}
