"""The diagnosis against causes known in advance: every cause-labelled lab capture
(sample-pcaps/causes/, one per scenario of ../shared/lab) gets its cause as the
verdict, its time budget adds up, healthy captures get "no problem found"; and
the failures the diagnosis issue listed, each on a capture that shows it
(tests/crafted/make_causes.py, and lab captures of delay and loss)."""

from __future__ import annotations

import json
import math
import re
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from conftest import SAMPLES, load_sample

import nfstrace
from nfstrace.analysis.budget import CAUSES, INTERVAL_COLUMNS, PAIR_COLUMNS, PRECEDENCE
from nfstrace.analysis.counterfactual import PEAK_OVER_LOSS_BOUND, removal_of
from nfstrace.analysis.verdict import VERDICTS, pair_text
from nfstrace.reports.export import summary

try:
    from crafted import make_causes as mcs
except ImportError:  # tests/ not on sys.path: import as a package
    from tests.crafted import make_causes as mcs

CAUSE_SAMPLES = SAMPLES / "causes"
CRAFTED = Path(__file__).resolve().parent / "crafted" / "captures" / "make_causes"


# The 2 ms runs of sample-pcaps/causes copy 1 MiB, the lab's labels describe its
# 16-64 MiB runs ("2 ms costs little"): a 1 MiB copy spends most of its round
# trips in TCP slow start, and the samples' own twins measure it
# (``test_short_copies_judged_by_their_own_twins``).
SHORT_COPY_TWINS = {
    # capture: {cause: (the same run without it, the capture with it)}
    "v3-tcp-nfscp-w64k-d2-l0": {"round_trip": ("v3-tcp-nfscp-w64k-bridge-d0-l0", None)},
    "v3-tcp-nfscp-w64k-d2-l0.5": {
        "round_trip": ("v3-tcp-nfscp-w64k-bridge-d0-l0", "v3-tcp-nfscp-w64k-d2-l0"),
        "loss_recovery": ("v3-tcp-nfscp-w64k-d2-l0", None),
    },
}
SHORT_COPIES = {*SHORT_COPY_TWINS, "v41-tcp-nfsrs-w1m-d2-l0", "v41-tcp-nfsrs-w1m-d2-l0.5"}


def _labelled() -> list[tuple[Path, dict]]:
    """(capture, cause) of every lab scenario whose cause the lab verified (the
    short copies apart: see SHORT_COPY_TWINS)."""
    out = []
    for j in sorted(CAUSE_SAMPLES.glob("*.json")):
        cause = json.loads(j.read_text()).get("cause") or {}
        if (
            cause.get("primary")
            and cause.get("verified") is not False
            and j.stem not in SHORT_COPIES
        ):
            out.append((j.with_suffix(".pcap"), cause))
    return out


LABELLED = _labelled()
UDP_RATE_LIMIT = "v3-udp-py-w32k-rate80mbit-d0-l0"
UDP_SLOW_SERVER = "v3-udp-py-w32k-srv5ms-d0-l0"


@cache
def trace(path: Path) -> nfstrace.Trace:
    return load_sample(path)


def test_every_visible_scenario_has_a_sample() -> None:
    """One capture per cause-labelled scenario of the lab, every cause represented."""
    causes = {c["primary"] for _, c in LABELLED}
    assert causes == {
        "none",
        "round_trip",
        "loss_recovery",
        "server",
        "commit",
        "client_idle",
        "bandwidth",
        "capture_gap",
    }
    assert len(LABELLED) + len(SHORT_COPIES) >= 28


def _phase_ns(name: str) -> int:
    return int(trace(CAUSE_SAMPLES / f"{name}.pcap").diagnosis.budget.elapsed_ns)


@pytest.mark.parametrize("name", sorted(SHORT_COPY_TWINS))
def test_short_copies_judged_by_their_own_twins(name: str) -> None:
    """A 1 MiB copy through 2 ms: the measured gain of removing each cause (the
    same 1 MiB run without it, from the same lab) decides; the verdict names a
    cause whose measured gain is within the lab's 20% of the largest, and its
    predicted gain is within 30% of its measured one."""
    measured = {}
    for cause, (without, within) in SHORT_COPY_TWINS[name].items():
        measured[cause] = _phase_ns(within or name) / _phase_ns(without)
    best = max(measured.values())
    d = trace(CAUSE_SAMPLES / f"{name}.pcap").diagnosis
    assert measured.get(d.verdict.primary, 0) * 1.2 >= best, (measured, d.verdict.text)
    assert best >= 1.25  # a cause by the lab's own rule, though labelled none at 16 MiB
    named = d.verdict.primary
    got = next(f for f in d.findings if f.kind == named).details["speedup_if_removed"]
    assert abs(math.log(got / measured[named])) <= math.log(1.3), (got, measured)


@pytest.mark.parametrize(
    ("capture", "cause"),
    LABELLED,
    ids=lambda v: v.stem if isinstance(v, Path) else "",
)
def test_verdict_names_the_injected_cause(capture: Path, cause: dict) -> None:
    d = trace(capture).diagnosis
    assert d.verdict.primary == cause["primary"], d.verdict.text
    assert d.findings[0].kind == "verdict"
    problems = [f.kind for f in d.findings if f.severity == "problem"]
    if cause["primary"] == "none":
        assert not problems and d.verdict.text.startswith("no problem found")
    else:
        assert cause["primary"] in problems or cause["primary"] == "bandwidth"
    assert len(d.findings) <= 8  # the diagnosis, not every fact


def test_udp_rate_limit_is_the_path_not_the_server() -> None:
    """Over UDP seen from the client a rate-limited path holds the calls in its
    queue, which looks like server time; the replies came back on the hop's clock
    (one call's bytes at its rate apart): the budget gives that wait to the queue
    in the path, and the verdict names the path, at about the injected rate."""
    d = trace(CAUSE_SAMPLES / f"{UDP_RATE_LIMIT}.pcap").diagnosis
    injected = json.loads((CAUSE_SAMPLES / f"{UDP_RATE_LIMIT}.json").read_text())["cause"]
    rate = injected["injected"]["rate_mbit"]
    assert d.verdict.primary == "bandwidth"
    assert "the replies came back on the clock of a hop" in d.verdict.text
    assert "not at the server" in d.verdict.text
    pair = d.budget.pairs.iloc[0]
    # call bytes at the hop: the frame headers take ~2.5% of the rate
    assert 0.9 * rate <= pair["clock_mbit_s"] <= rate
    assert pair["queued_ns"] > 0.5 * pair["elapsed_ns"]
    assert pair["server_ns"] < 0.1 * pair["elapsed_ns"]
    assert "server" not in [f.kind for f in d.findings if f.severity == "problem"]


def test_udp_slow_server_is_not_a_clock() -> None:
    """A server slowed per WRITE: its service times add up (a late reply delays the
    later ones), no hop's clock: the server keeps the time, and the verdict says a
    slow path cannot be ruled out from the client."""
    d = trace(CAUSE_SAMPLES / f"{UDP_SLOW_SERVER}.pcap").diagnosis
    assert d.verdict.primary == "server"
    assert "over UDP nothing shows where a call waited" in d.verdict.text
    pair = d.budget.pairs.iloc[0]
    assert math.isnan(pair["clock_mbit_s"]) and pair["queued_ns"] == 0


@pytest.mark.parametrize(
    "capture",
    [c for c, _ in LABELLED] + sorted(CRAFTED.glob("*.pcap")),
    ids=lambda p: p.stem,
)
def test_budget_adds_up_to_the_write_activity(capture: Path) -> None:
    """Per pair the causes add up to the elapsed time exactly, the intervals tile it
    without overlap, and each names its evidence."""
    b = trace(capture).diagnosis.budget
    assert list(b.pairs.columns) == list(PAIR_COLUMNS)
    assert list(b.intervals.columns) == list(INTERVAL_COLUMNS)
    assert len(b.pairs) >= 1
    for p in b.pairs.itertuples(index=False):
        total = sum(getattr(p, f"{c}_ns") for c in CAUSES)
        assert total == p.elapsed_ns == p.end_ns - p.start_ns > 0
        iv = b.intervals[(b.intervals["client"] == p.client) & (b.intervals["server"] == p.server)]
        assert iv["start_ns"].iloc[0] == p.start_ns and iv["end_ns"].iloc[-1] == p.end_ns
        assert (iv["start_ns"].to_numpy()[1:] == iv["end_ns"].to_numpy()[:-1]).all()
        assert (iv["duration_ns"] > 0).all() and iv["evidence"].str.len().gt(0).all()
        for c in CAUSES:
            assert iv.loc[iv["cause"] == c, "duration_ns"].sum() == getattr(p, f"{c}_ns")
    assert sum(b.seconds().values()) == b.elapsed_ns
    assert math.isclose(sum(b.shares().values()), 1.0)


def test_precedence_gives_every_cause_a_rule() -> None:
    """The precedence table holds each rule once, and every cause but ``unknown``
    (what no evidence claims) has at least one rule: a cause added to CAUSES
    without a rule, or a rule of a cause not in CAUSES, fails here."""
    rules = [rule for _, rule in PRECEDENCE]
    assert len(set(rules)) == len(rules)
    assert {cause for cause, _ in PRECEDENCE} == set(CAUSES) - {"unknown"}


def test_json_has_the_verdict_and_the_budget() -> None:
    capture = CAUSE_SAMPLES / "v3-tcp-nfscp-w64k-commit1200ms-d0-l0.pcap"
    d = json.loads(json.dumps(summary(trace(capture)), allow_nan=False))["diagnosis"]
    assert d["verdict"]["primary"] == "commit" and d["verdict"]["primary"] in VERDICTS
    assert d["verdict"]["text"].startswith("COMMITs (the server flushing to disk) held")
    budget = d["budget"]
    assert budget["elapsed_s"] > 1.0
    shares = {c["cause"]: c["share"] for c in budget["total"]}
    assert shares["commit"] > 0.5 and math.isclose(sum(shares.values()), 1.0, rel_tol=1e-6)
    pair = budget["pairs"][0]
    assert pair["client"] and pair["server"] and pair["intervals"] >= 1
    longest = max(pair["longest_intervals"], key=lambda i: i["seconds"])
    assert longest["cause"] == "commit" and longest["frame"] > 0
    assert "COMMIT xid 0x" in longest["evidence"]
    finding = next(f for f in d["findings"] if f["kind"] == "commit")
    assert finding["details"]["frames"] and finding["details"]["seconds"] > 1.0


# ---- the failures the issue listed -------------------------------------------------------


def test_round_trip_is_named_not_a_full_window() -> None:
    """A 10 ms round trip with 16 WRITEs in flight: the round trip leads, with the
    remedy and the model's predicted gain; the window statistics stay in their
    section (they cost nothing)."""
    d = trace(SAMPLES / "v3-tcp-nfscp-w64k-d10-l0.pcap").diagnosis
    assert d.verdict.primary == "round_trip"
    kinds = [f.kind for f in d.findings]
    assert kinds[:2] == ["verdict", "round_trip"]
    assert not {"tcp_window_full", "model_dominant_term"} & set(kinds)
    rt = d.findings[1]
    assert "Keep more WRITEs in flight" in rt.title and rt.time_lost_ns > 0
    assert "fixing it would make the writes about" in rt.title
    assert rt.details["share"] >= 0.5 and rt.details["speedup_if_removed"] > 2


@pytest.mark.parametrize("side", ["", ".server-side"])
def test_tcp_loss_is_named_from_either_end(side: str) -> None:
    """0.5% loss on NFSv4.1/TCP (fast retransmissions): named from the client's
    capture and from the server's, with its cost in time -- the silences before
    the re-sent bytes -- and its predicted gain; no "faster link" advice.  (A 1
    MiB copy through 2 ms: the round trip costs more, see SHORT_COPIES.)"""
    d = trace(CAUSE_SAMPLES / f"v41-tcp-nfsrs-w1m-d2-l0.5{side}.pcap").diagnosis
    assert d.verdict.primary in ("loss_recovery", "round_trip")
    loss = next(f for f in d.findings if f.kind == "loss_recovery")
    gain = loss.details["speedup_if_removed"]
    assert loss.time_lost_ns > 1_000_000 and "TCP silence" in loss.title
    # its twin without the loss (sample-pcaps/causes): 1.03x; a problem from 1.1x
    assert 1.05 <= gain < 1.5
    assert (loss.severity == "problem") == (gain >= 1.1)
    assert not any("faster link" in f.title for f in d.findings)


def test_tcp_retransmission_timeout_costs_its_wait() -> None:
    """The lossy nfs-cp capture of an earlier lab run (sample-pcaps/): each silence
    before re-sent bytes is loss recovery, with the frame to open."""
    d = trace(SAMPLES / "v3-tcp-nfscp-w64k-d2-l0.5.pcap").diagnosis
    iv = d.budget.intervals
    lost = iv[iv["cause"] == "loss_recovery"]
    assert len(lost) >= 1 and (lost["frame"] > 0).all()
    loss = next(f for f in d.findings if f.kind == "loss_recovery")
    assert "TCP silence" in loss.title


def test_udp_loss_cost_said_once() -> None:
    """NFSv3/UDP with lost fragments: one finding gives the re-sends' cost, the
    verdict's share is that finding's, and the latency-vs-throughput "saturation"
    the timeouts make is not a finding of the diagnosis."""
    d = trace(CAUSE_SAMPLES / "v3-udp-py-w32k-mtu1000-d2-l0.5.pcap").diagnosis
    assert d.verdict.primary == "loss_recovery"
    costs = [f for f in d.findings if f.time_lost_ns and f.kind != "verdict"]
    loss = [f for f in costs if f.kind == "loss_recovery"]
    assert len(loss) == 1 and "RPC calls re-sent" in loss[0].title
    assert loss[0].time_lost_ns == d.budget.seconds()["loss_recovery"]
    assert f"{loss[0].details['share']:.0%} of the time" in d.verdict.text
    assert not {"rpc_retransmission", "workload_saturation"} & {f.kind for f in d.findings}


def test_silence_the_capture_missed_is_a_capture_gap() -> None:
    """99 s with no packet either way, xids jumping by 52,000, the call before it
    never answered in the capture: the capture missed the traffic.  No 99 s server
    wait, no 99 s stall of a call."""
    d = trace(CRAFTED / "silence_99s.pcap").diagnosis
    assert d.verdict.primary == "capture_gap"
    gap = next(f for f in d.findings if f.kind == "capture_gap")
    assert gap.limits_conclusions and gap.time_lost_ns >= mcs.SILENCE_US * 1_000
    assert "TCP range" in d.budget.intervals.query("cause == 'capture_gap'")["evidence"].iloc[0]
    assert d.budget.seconds()["server"] < 0.01 * d.budget.elapsed_ns
    assert not any("99" in f.title for f in d.findings if f.kind in ("server", "unknown"))
    assert "while captured" in d.verdict.text


def test_two_mounts_the_paused_one_is_named() -> None:
    """Two servers (mounts) of one client: the 512 KiB one's 17 pauses part-way
    through its calls (data acknowledged, window open) are the client's, said of
    that pair; the 32 KiB one is not blamed for them."""
    d = trace(CRAFTED / "two_mounts.pcap").diagnosis
    assert d.verdict.primary == "client_idle"
    by_pair = {p.server: p for p in d.verdict.pairs}
    big, small = by_pair[mcs.MOUNT_BIG_SERVER], by_pair[mcs.MOUNT_SMALL_SERVER]
    assert big.primary == "client_idle" and small.primary != "client_idle"
    assert f"→ {mcs.MOUNT_BIG_SERVER}: the client's own pauses" in d.verdict.text
    idle = next(f for f in d.findings if f.kind == "client_idle")
    assert idle.details["server"] == mcs.MOUNT_BIG_SERVER
    assert f"{mcs.MOUNT_PAUSED} spans of 155 ms-197 ms" in idle.title
    assert f"{mcs.MOUNT_PAUSED} of them part-way through sending a call" in idle.title
    # the server answered 4.6 ms after each call's last byte: not the cause
    assert big.shares["server"] < 0.1
    # a model per pair: each its own concurrency
    assert set(d.pair_models) == {(mcs.mc.CLIENT, s) for s in by_pair}


def test_missed_calls_lead_and_hedge() -> None:
    """-s 256 and 11 of 16 WRITE calls not captured (their replies were): the
    capture's limits come first and the verdict says so; no pace or model claims
    about the WRITEs it did not see."""
    d = trace(CRAFTED / "missed_calls_s256.pcap").diagnosis
    kinds = [f.kind for f in d.findings]
    assert kinds[0] == "verdict" and "limited:" in d.verdict.text
    assert "the capture missed calls: 11 replies whose call it never saw" in d.verdict.text
    assert "the capture missed 11.0 MiB of TCP data the receiver acknowledged" in d.verdict.text
    assert all(f.limits_conclusions for f in d.findings[1:3])
    assert not {"sequential_writes", "model_dominant_term", "write_concurrency"} & set(kinds)


def test_healthy_capture_says_no_problem_briefly() -> None:
    d = trace(CAUSE_SAMPLES / "v41-tcp-nfsrs-w1m-d0-l0.pcap").diagnosis
    assert d.verdict.primary == "none"
    assert d.verdict.text.startswith("no problem found: writes ran at")
    assert len(d.findings) <= 4
    assert all(f.severity != "problem" for f in d.findings)
    assert len(d.notes) > len(d.findings)  # the facts are kept, in their sections


def test_every_second_has_evidence_frames() -> None:
    """Intervals other than 'nothing outstanding' name a frame to open in Wireshark."""
    b = trace(CAUSE_SAMPLES / "v41-tcp-nfsrs-w1m-d2-l0.5.pcap").diagnosis.budget
    iv = b.intervals
    framed = iv[~iv["evidence"].str.startswith(("nothing outstanding", "a reply and"))]
    assert (framed["frame"] > 0).mean() > 0.95
    frames = np.asarray(framed["frame"])
    assert frames.max() <= trace(CAUSE_SAMPLES / "v41-tcp-nfsrs-w1m-d2-l0.5.pcap").stats.frames


@pytest.mark.parametrize(
    "name",
    [
        "v41-tcp-nfsrs-w1m-pause200ms-d0-l0",  # the client paused mid-call
        "v41-tcp-nfsrs-w1m-d2-l0.5",  # silences ended by re-sent bytes
        "v3-tcp-nfscp-w64k-d10-l0",  # waits for ACKs
        "v3-udp-py-w32k-mtu1000-d2-l0.5.server-side",  # datagrams missing fragments
    ],
)
def test_evidence_names_the_frame_it_points_at(name: str) -> None:
    """An interval's words name the same frame as its ``frame`` column (an
    event's "(frame N)", or an RPC's first frame in "(frames N-M")."""
    iv = trace(CAUSE_SAMPLES / f"{name}.pcap").diagnosis.budget.intervals
    named = iv["evidence"].str.extract(r"\(frames? (\d+)[)-]")[0]
    has = named.notna() & (iv["frame"] >= 0)  # (a re-sending interval has no frame)
    assert has.sum() >= 3
    assert (named[has].astype("int64") == iv.loc[has, "frame"]).all()


@pytest.mark.parametrize(
    "capture",
    [CAUSE_SAMPLES / "v41-tcp-nfsrs-w1m-pause200ms-d0-l0.pcap", CRAFTED / "two_mounts.pcap"],
)
def test_client_pauses_counted_among_the_spans_named(capture: Path) -> None:
    """'N spans of ..., M of them part-way through a call': M counts among the N
    (it counted every short pause too: '3 spans of 202 ms, 15 of them')."""
    titles = [f.title for f in trace(capture).diagnosis.findings if f.kind == "client_idle"]
    assert titles
    for title in titles:
        spans = re.search(r"(\d+) spans?\b", title)
        mid = re.search(r"(\d+) of them part-way", title)
        assert spans
        assert mid is None or int(mid.group(1)) <= int(spans.group(1))
    if capture.name == "two_mounts.pcap":
        assert "17 spans of 155 ms-197 ms, 17 of them part-way" in titles[0]


@pytest.mark.parametrize("name", ["two_clients", "three_clients"])
def test_several_clients_diagnosed_per_pair(name: str, tmp_path: Path) -> None:
    """Several clients writing to one server at once (a server-side capture's
    everyday case; issue 30 item 3: ``KeyError: 'bytes'`` in analyze, model and
    compare): every command ends well, each pair has its own verdict and
    findings, and the capture-wide verdict names the pair that suffers first."""
    from typer.testing import CliRunner

    from nfstrace.cli import app

    capture = CRAFTED / f"{name}.pcap"
    runner = CliRunner()
    for args in (
        [
            "analyze",
            str(capture),
            "-o",
            str(tmp_path / "r.html"),
            "--json",
            str(tmp_path / "s.json"),
        ],
        ["model", str(capture)],
        ["compare", str(capture), str(capture), "--no-report"],
    ):
        r = runner.invoke(app, args)
        assert r.exit_code == 0, (args, r.output)
    d = trace(capture).diagnosis
    clients = mcs.CLIENTS[: 2 if name == "two_clients" else 3]
    assert sorted(p.client for p in d.verdict.pairs) == sorted(clients)
    assert all(p.primary == "server" for p in d.verdict.pairs)
    assert d.verdict.primary == "server"
    by_client = {p.client: p for p in d.verdict.pairs}
    for client in clients:
        mine = [f for f in d.findings if f.details.get("client") == client]
        assert mine and mine[0].title.startswith(f"{client} → {mcs.mc.SERVER}: ")
    if name == "three_clients":
        slow = by_client[mcs.CLIENTS[2]]
        assert slow.mbit_s < 0.2 * by_client[mcs.CLIENTS[0]].mbit_s
        # the pair that suffers is named first among the pairs
        assert d.verdict.text.split("by pair: ", 1)[1].startswith(f"{mcs.CLIENTS[2]} → ")


# ---- issue 29: where the administrator stands -------------------------------------------


@pytest.mark.parametrize("delay", ["d10", "d2"])
def test_server_side_udp_round_trip_is_the_round_trip(delay: str) -> None:
    """Seen from the server, a UDP client's 10 (2) ms round trip is the time
    between a reply and its next call: the round trip, measured from its
    one-at-a-time metadata calls, as the client-side capture of the same run
    says -- not "the client sent nothing", never "look at the writer"."""
    name = f"v3-udp-py-w32k-{delay}-l0"
    client = trace(SAMPLES / f"{name}.pcap").diagnosis
    server = trace(SAMPLES / f"{name}.server-side.pcap").diagnosis
    assert server.quality.capture_point == "server"
    assert server.verdict.primary == client.verdict.primary == "round_trip"
    t_prop = server.model.parameters.set_index("name").loc["T_prop"]
    assert "server side" in t_prop["method"]
    injected = {"d10": 10e-3, "d2": 2e-3}[delay]
    assert injected <= 2 * t_prop["value_s"] <= injected + 1e-3
    assert not any("look at the writer" in f.title for f in server.findings)
    gain = next(f for f in server.findings if f.kind == "round_trip").details
    assert gain["speedup_if_removed"] > 1.5


def test_server_time_is_the_servers() -> None:
    """On a client-side capture through 10 ms, call->reply holds the round trip:
    the latency table's server time subtracts it; tshark's rpc.time stays beside it."""
    t = load_sample(SAMPLES / "v3-tcp-nfscp-w64k-d10-l0.pcap")
    write = t.latency.set_index("op").loc["WRITE"]
    assert write["srt_p50_ms"] > 10 and write["server_p50_ms"] < 3
    assert write["srt_p50_ms"] - write["server_p50_ms"] == pytest.approx(
        2e3 * t.diagnosis.model.parameter("T_prop"), rel=0.01
    )
    rtt_ms = 2e3 * t.diagnosis.model.parameter("T_prop")
    text = " ".join(nfstrace.summary(t).split())  # (the lines wrap at the width)
    assert f"less the network round trip ({rtt_ms:.3g} ms here)" in text


def test_file_sync_share_is_said() -> None:
    """Every WRITE asked FILE_SYNC: the server's finding says how many, in the
    terminal and the HTML report, with the remedy that asks why."""
    from nfstrace.reports.html import render_report

    t = load_sample(CAUSE_SAMPLES / "v3-udp-py-w32k-filesync-d0-l0.pcap")
    server = next(f for f in t.diagnosis.findings if f.kind == "server")
    assert "of its 32 WRITEs the client asked 32 FILE_SYNC" in server.title
    assert "the `sync` mount option" in server.title
    assert "32 FILE_SYNC" in nfstrace.summary(t)
    assert "32 FILE_SYNC" in render_report(t, t.diagnosis)


def test_capture_cut_mid_write_says_so(tmp_path: Path) -> None:
    """A capture cut before any WRITE was answered says it cannot judge the writes;
    one cut while WRITEs were outstanding says it ends mid-write."""
    data = (SAMPLES / "v3-udp-py-w32k-d10-l0.pcap").read_bytes()
    early = tmp_path / "early.pcap"
    early.write_bytes(data[:50_000])
    d = load_sample(early).diagnosis
    assert d.findings[0].kind == "verdict" and d.findings[0].limits_conclusions
    assert d.verdict.text.startswith("no WRITE was answered in the capture")
    assert "ends mid-write" in d.verdict.text
    later = tmp_path / "later.pcap"
    later.write_bytes(data[:600_000])
    d = load_sample(later).diagnosis
    assert d.budget.elapsed_ns > 0 and "ends mid-write" in d.verdict.text


def test_overlapping_causes_are_named_together() -> None:
    """An ACK-clocked client, a 4 ms server and a 3 ms round trip: removing either
    alone gains little (the other holds the writes), both together a lot; the
    verdict names the server with the round trip and both gains.  The crafted
    run's own arithmetic: without the server the client's chain of round trips
    remains (60 x 3.35 ms), without the round trip the server's 60 x 4 ms."""
    d = trace(CRAFTED / "server_and_round_trip.pcap").diagnosis
    elapsed = d.budget.elapsed_ns
    chain = (
        mcs.OVERLAP_WRITES
        * (mcs.OVERLAP_SEND_US + mcs.OVERLAP_RTT_US + mcs.OVERLAP_TURN_US)
        * 1_000
    )
    server_bound = mcs.OVERLAP_WRITES * mcs.OVERLAP_SERVER_US * 1_000
    gains = {f.kind: f.details["speedup_if_removed"] for f in d.findings if f.kind != "verdict"}
    assert gains["server"] == pytest.approx(elapsed / chain, rel=0.1)
    assert gains["round_trip"] == pytest.approx(elapsed / server_bound, rel=0.1)
    assert max(gains.values()) < 1.25
    assert d.verdict.primary == "server"
    assert "they held the writes together" in d.verdict.text
    joint = float(
        re.search(r"fixing both would make the writes about ([\d.]+)x", d.verdict.text)[1]
    )
    assert joint > 3


COUNTERFACTUAL = SAMPLES / "counterfactual"


def _measured(name: str) -> dict[str, float]:
    truth = json.loads((COUNTERFACTUAL / f"{name}.json").read_text())
    return {c: m["speedup"] for c, m in truth["cause"]["measured"]["counterfactual"].items()}


@pytest.mark.parametrize("suffix", ["", ".s256"])
def test_round_trip_setting_tcps_pace_is_the_round_trips(suffix: str) -> None:
    """NFSv4.0, 1 MiB WRITEs through 20 ms (issue 29 item 4): the data moves in
    TCP flights a round trip apart and each COMMIT waits one; that time is the
    round trip's, not the wire's.  The verdict is the round trip, and its gain is
    within 25% of the twin's measured one (at -s 256, where some calls' headers
    are cut, 30%)."""
    measured = _measured("v40-tcp-nfsrs-w1m-d20-l0")["round_trip"]
    d = trace(COUNTERFACTUAL / f"v40-tcp-nfsrs-w1m-d20-l0{suffix}.pcap").diagnosis
    assert d.verdict.primary == "round_trip", d.verdict.text
    gain = next(f for f in d.findings if f.kind == "round_trip").details["speedup_if_removed"]
    tolerance = 1.3 if suffix else 1.25
    assert abs(math.log(gain / measured)) <= math.log(tolerance), (gain, measured)


def test_loss_and_round_trip_mixed_ranked_by_their_gains() -> None:
    """5 ms and 1% loss, one 64 KiB WRITE in flight (issue 29 item 5): both
    causes get a predicted gain; the round trip, whose removal the twins measure
    as the larger (5.2x against 1.3x), leads; each prediction is within a factor
    1.5 of its twin's (2 MiB runs on a busy host: the twins themselves move by a
    quarter)."""
    measured = _measured("v41-tcp-nfsrs-w64k-d5-l1")
    d = trace(COUNTERFACTUAL / "v41-tcp-nfsrs-w64k-d5-l1.pcap").diagnosis
    assert d.verdict.primary == "round_trip"
    got = {
        f.kind: f.details["speedup_if_removed"]
        for f in d.findings
        if f.kind in measured and "speedup_if_removed" in f.details
    }
    assert set(got) == set(measured)
    assert got["round_trip"] > got["loss_recovery"] > 1.1
    for cause, value in measured.items():
        assert abs(math.log(got[cause] / value)) <= math.log(1.5), (cause, got, measured)


RATE_LOSS = "v3-tcp-nfscp-w64k-rate60mbit-d0-l0.5"


@pytest.mark.parametrize("capture", ["", ".server-side"])
def test_a_rate_limit_under_small_writes_and_loss_is_the_ceiling(capture: str) -> None:
    """A 60 Mbit/s limit with 0.5% loss, nfs-cp's 64 KiB WRITEs (4 MiB): the
    ceiling, at the client and at the server.  One by one the 64 KiB calls' rates
    were 10-18% apart (the ACKs' jitter within 9 ms a call), too far for one
    steady rate: 'no problem found, moving data 95%'; timed by the MiB they are
    2% apart.  Removing the limit is predicted within 25% of the twin without it
    (11.3x) and removing the loss at about nothing, as its twin (1.00x)."""
    measured = _measured(RATE_LOSS)
    d = trace(COUNTERFACTUAL / f"{RATE_LOSS}{capture}.pcap").diagnosis
    assert d.verdict.primary == "bandwidth", d.verdict.text
    assert float(d.budget.pairs["send_spread"].iloc[0]) <= 0.1
    got = {f.kind: f.details.get("speedup_if_removed") for f in d.findings}
    assert abs(math.log(got["bandwidth"] / measured["bandwidth"])) <= math.log(1.25), got
    assert got.get("loss_recovery") is None or got["loss_recovery"] < 1.1, got


def test_a_rate_limit_seen_downstream_paces_the_client_not_the_loss() -> None:
    """The same limit and loss seen at the server (another run, cut to -s 200):
    the calls arrive at one steady rate, the queue holding the bytes in flight is
    upstream, out of sight, so the client's stops between segments are the
    limit's pacing, not a round trip of 0.2 ms nor a window the losses cut
    (before: 'no problem found', round trip 47% 'with the window the losses kept
    small'; on the 64 MiB run at the server, loss recovery 36%, 1.6x, where its
    twin without the loss measures 1.00x)."""
    d = trace(COUNTERFACTUAL / f"{RATE_LOSS}.run2.server-side.s200.pcap").diagnosis
    assert d.verdict.primary == "bandwidth", d.verdict.text
    shares = d.verdict.pairs[0].shares
    assert shares["transfer"] >= 0.9 and shares["round_trip"] < 0.05, shares
    assert shares["loss_recovery"] < 0.05, shares


def test_a_burst_into_an_open_window_moves_at_the_paths_rate() -> None:
    """1 MiB WRITEs one at a time through 20 ms: nfs-cp sends each call in ~2 ms
    (the window holds it) and its last byte is acknowledged ~10 ms after a round
    trip: the path's delivery, not the client's burst, is how fast the data
    moves without the round trip (before: 7.2x, every call's 1 MiB at the
    burst's 4 Gbit/s; its twin measures 5.19x)."""
    measured = _measured("v3-tcp-nfscp-w1m-d20-l0")["round_trip"]
    d = trace(COUNTERFACTUAL / "v3-tcp-nfscp-w1m-d20-l0.pcap").diagnosis
    assert d.verdict.primary == "round_trip", d.verdict.text
    row = d.budget.pairs.iloc[0]
    assert int(row["delivery_floor_ns"]) > 1.5 * int(row["transfer_ns"]), row
    gain = next(f for f in d.findings if f.kind == "round_trip").details["speedup_if_removed"]
    assert abs(math.log(gain / measured)) <= math.log(1.25), (gain, measured)


def test_a_rate_limit_is_seen_in_the_acks_of_a_client_that_bursts() -> None:
    """One 64 KiB WRITE at a time through a 40 Mbit/s limit: the client sends
    each call at its own speed (the window holds it), ~20x the pair's rate, so
    its sending shows no ceiling; the ACKs come back on the limit's clock, at
    the pair's rate and one steady rate (before: 'no problem found, moving data
    96%')."""
    d = trace(COUNTERFACTUAL / "v41-tcp-nfsrs-w64k-rate40mbit-d0-l0.pcap").diagnosis
    assert d.verdict.primary == "bandwidth", d.verdict.text
    row = d.budget.pairs.iloc[0]
    assert float(row["send_mbit_s"]) > 5 * float(row["mbit_s"])
    assert float(row["ack_spread"]) <= 0.1
    assert float(row["ack_mbit_s"]) <= 1.25 * float(row["mbit_s"])


def test_without_tcps_losses_the_data_moves_no_faster_than_its_fastest_stretch() -> None:
    """nfs-cp through 2% loss: SACK recovery keeps sending while it repairs, so
    the stretches between repairs already moved at the path's pace; the loss's
    removal is bounded by the fastest 50 ms the capture shows (before: 1.56x,
    the repairs' time given back at a rate the path never showed; the twin
    without the loss measures 1.18x)."""
    measured = _measured("v3-tcp-nfscp-w64k-d0-l2")["loss_recovery"]
    d = trace(COUNTERFACTUAL / "v3-tcp-nfscp-w64k-d0-l2.pcap").diagnosis
    assert d.verdict.primary == "loss_recovery", d.verdict.text
    got = next(f for f in d.findings if f.kind == "loss_recovery")
    assert got.details["predicted_s"] * 1e9 >= int(d.budget.pairs["peak_floor_ns"].iloc[0]) - 1
    gain = got.details["speedup_if_removed"]
    assert abs(math.log(gain / measured)) <= math.log(1.25), (gain, measured)


def test_seen_at_the_server_a_loaded_round_trip_is_not_the_clients_idleness() -> None:
    """A healthy copy (one 64 KiB WRITE in flight through the lab's bridge) seen at
    the server: a reply and the client's next call take ~0.35 ms where the
    handshake took 0.07, every time (the bridge's queue under the copy), not the
    client pausing (before: 'the client itself sent nothing for 35% of the time,
    1.5x'; at the client it idles 6%).  The steady part of those gaps is the
    round trip under load, said with its two readings."""
    d = trace(COUNTERFACTUAL / "v41-tcp-nfsrs-w64k-bridge-d0-l0.server-side.pcap").diagnosis
    assert d.verdict.primary == "none", d.verdict.text
    row = d.budget.pairs.iloc[0]
    assert float(row["rtt_loaded_ns"]) > 3 * float(row["rtt_ns"]), row
    assert d.verdict.pairs[0].shares["client_idle"] < 0.1
    title = next(f.title for f in d.findings if f.kind == "round_trip")
    assert "under the writes' load" in title and "a capture at the client" in title


@pytest.mark.parametrize(
    ("name", "point", "says"),
    [
        ("v41-tcp-nfsrs-w1m-pause200ms-d0-l0", "client", "look at the writer"),
        ("v3-udp-py-w32k-pause50ms-d0-l0", "unknown", "a capture at the client tells them apart"),
    ],
)
def test_the_clients_silence_names_the_network_unless_seen_at_the_client(
    name: str, point: str, says: str
) -> None:
    """Only a capture known to be the client's rules the network out of the
    client's silences: where the capture point is not clear (UDP without a
    handshake), a reply's way back and the next call's way out may be in them,
    and the words say which capture tells them apart (before: 'not at NFS or
    the network' on either).  The verdict's headline too: 'the client itself'
    only on the client's capture (before: on either)."""
    d = trace(CAUSE_SAMPLES / f"{name}.pcap").diagnosis
    assert d.quality.capture_point == point
    title = next(f.title for f in d.findings if f.kind == "client_idle")
    assert says in title, title
    row = d.budget.pairs.iloc[0].to_dict()
    headline = pair_text(row, "client_idle", d.verdict.pairs[0].shares)
    if point != "client":
        assert "not at NFS or the network" not in title, title
        assert "itself" not in headline and "the network beyond" in headline, headline
        assert d.verdict.text == headline, d.verdict.text
    else:
        assert headline.startswith("the client itself sent nothing"), headline


def test_a_window_held_by_a_lost_segment_is_the_loss() -> None:
    """0.5% loss through 2 ms (1 MiB, 4 segments re-sent): while a lost
    segment's hole held the server's ACKs back the client filled its window;
    that stall is the loss's, not a server reading slowly (before: 'server',
    7.3 ms of 78 ms).  The predicted gain is checked against the same run
    without the loss (its healthy twin in the lab, the same day)."""
    lossy = trace(SAMPLES / "v3-tcp-nfscp-w64k-d2-l0.5.pcap").diagnosis
    healthy = trace(SAMPLES / "v3-tcp-nfscp-w64k-d2-l0.pcap").diagnosis
    assert lossy.verdict.primary == "loss_recovery", lossy.verdict.text
    measured = lossy.budget.elapsed_ns / healthy.budget.elapsed_ns
    got = next(f for f in lossy.findings if f.kind == "loss_recovery")
    assert abs(math.log(got.details["speedup_if_removed"] / measured)) <= math.log(1.25)
    assert not any(f.kind == "server" and f.severity == "problem" for f in lossy.findings)


def test_a_window_the_losses_kept_small_is_said_with_the_loss() -> None:
    """The kernel client through 1% loss: besides the loss's own silences, the
    ACK waits of the window the losses cut (the round trip's time, made by the
    loss too) are said beside the loss's share, so that a small share and a
    larger gain do not read as a contradiction."""
    d = trace(SAMPLES / "kernel/kvm-v3-ganesha-d0-l1.pcap").diagnosis
    assert d.verdict.primary == "loss_recovery"
    row = d.budget.pairs.iloc[0]
    cut = row["loss_recovery_also_ns"] / row["elapsed_ns"]
    assert cut >= 0.05
    assert f"and {cut:.0%} more went to waiting for ACKs" in d.verdict.text
    loss = next(f for f in d.findings if f.kind == "loss_recovery")
    assert "the window the losses kept small" in loss.title
    healthy = trace(SAMPLES / "kernel/kvm-v3-ganesha-d0-l0.pcap").diagnosis
    assert "window the losses kept small" not in healthy.verdict.text


def test_a_loss_seen_at_the_server_is_a_hole_filled() -> None:
    """Downstream of the loss the capture never saw the first copy of a lost
    segment: its re-send fills a hole after later bytes came (tcp_hole_filled),
    one per segment the client re-sent (the same run's client-side capture:
    its tcp_retransmission events), at the same sequence numbers."""
    server = trace(SAMPLES / "v3-tcp-nfscp-w64k-d2-l0.5.server-side.pcap").events
    client = trace(SAMPLES / "v3-tcp-nfscp-w64k-d2-l0.5.pcap").events
    filled = server[(server["kind"] == "tcp_hole_filled") & (server["src"] == "169.254.77.1")]
    resent = client[(client["kind"] == "tcp_retransmission") & (client["src"] == "169.254.77.1")]
    assert len(resent) > 0
    assert sorted(filled["seq"]) == sorted(resent["seq"])
    assert (filled["duration_ns"] > 0).all()  # each waited since the hole opened


def test_a_window_the_losses_kept_small_sets_the_pace() -> None:
    """The kernel client through 5 ms and 1% loss (4 x 1 MiB, 22.8 Mbit/s; the
    same mount through the same bridge without either: 179 Mbit/s): its calls
    queue in its socket, so TCP's window, which the losses keep small, sets the
    pace (Mathis), not the RPC round trip.  Its ACK waits hold about what the
    path carries in a round trip at that rate: the cut window's (round trip,
    made by the loss too), not a queue in the path (transfer).  Before: the
    round trip, "7.8x faster with a LAN's round trips" beside the loss's 2.1x.
    Its fastest stretch ran at the losses' own pace, so the loss's removal is a
    window regrown from TCP's initial one with the data as fast as its flights
    moved it (before: at least 2.1x, the fastest stretch as the bound)."""
    truth = json.loads((SAMPLES / "kernel/kvm-v41-ganesha-d5-l1.json").read_text())["cause"]
    measured = 1 / (1 - truth["vs_twin"]["excess_share"])  # without the loss and the delay
    d = trace(SAMPLES / "kernel/kvm-v41-ganesha-d5-l1.pcap").diagnosis
    assert d.verdict.primary == "loss_recovery", d.verdict.text
    row = d.budget.pairs.iloc[0]
    assert row["stream_bound"]
    assert row["peak_mbit_s"] >= 2 * row["mbit_s"]  # the window regrew between losses
    assert row["transfer_ns"] <= 0.2 * row["elapsed_ns"]
    assert row["loss_recovery_also_ns"] >= 0.5 * row["elapsed_ns"]
    gains = {
        f.kind: f.details["speedup_if_removed"]
        for f in d.findings
        if "speedup_if_removed" in f.details
    }
    # its fastest stretch ran at the losses' own pace (Mathis): not how fast the
    # path carries the data, which a window regrown from TCP's initial one finds
    assert row["peak_mbit_s"] <= PEAK_OVER_LOSS_BOUND * row["loss_bound_mbit_s"]
    loss = next(f for f in d.findings if f.kind == "loss_recovery")
    assert loss.details["speedup_assumes_flight_pace"]
    assert not loss.details["speedup_is_lower_bound"]
    assert "a window regrown from TCP's initial one" in loss.title
    paced = row["elapsed_ns"] / (row["transfer_ns"] + row["slow_start_ns"])
    assert gains["loss_recovery"] == pytest.approx(paced, rel=1e-3)
    assert gains["loss_recovery"] > row["elapsed_ns"] / row["peak_floor_ns"]
    assert gains.get("round_trip", 1.0) <= gains["loss_recovery"]
    both = removal_of(row, ("loss_recovery", "round_trip"))
    assert both is not None and both.speedup >= gains["loss_recovery"]
    # Its twin without the loss and the delay measured 7.8x on a host busy enough
    # that the emulated client's own pace, not its flights', set the loss-free
    # run's (its healthy 4 MiB runs there moved their data at 240 Mbit/s, its
    # flights here at 450): predicted 1.6x over; the lab's runs on a quiet host
    # (test_a_window_paced_by_its_losses_regrows_from_the_initial_window) agree
    assert gains["loss_recovery"] <= 2 * measured
    # its round trip's remedy is the loss, not more RPC slots (the window is TCP's)
    rt = next(f for f in d.findings if f.kind == "round_trip")
    assert "the TCP window the losses kept small" in rt.title
    assert "tcp_max_slot_table_entries" not in rt.title


def test_a_window_losses_keep_small_through_a_round_trip_the_kernel_hides() -> None:
    """Kernel NFSv4.2 through 10 ms and 1% loss, 4 x 1 MiB: 13x slower than its
    twin without either (the kernel client hides 10 ms with its window in
    flight: the lab's d10 runs are 'none').  Its ACK waits are the window the
    losses cut, and that is the loss's: verdict loss_recovery (before: the
    round trip, by 10 ms of 27 s on the 32 MiB run).  Four WRITEs each averaging
    the same rate are no steady ceiling (STEADY_MIN_CALLS; before: 65%
    "transfer").  The gain assumes the client keeps its flights' pace (before:
    at least 1.1x, the fastest stretch shown)."""
    name = "kernel/kvm-v42-ganesha-d10-l1"
    twin = json.loads((SAMPLES / f"{name}.json").read_text())["cause"]["vs_twin"]
    measured = twin["write_phase_s"] / twin["twin_write_phase_s"]
    d = trace(SAMPLES / f"{name}.pcap").diagnosis
    assert d.verdict.primary == "loss_recovery", d.verdict.text
    row = d.budget.pairs.iloc[0]
    assert row["transfer_ns"] <= 0.1 * row["elapsed_ns"]
    assert row["loss_recovery_also_ns"] >= 0.8 * row["elapsed_ns"]
    loss = next(f for f in d.findings if f.kind == "loss_recovery")
    # the losses' pace at its fastest (Mathis): a window regrown from TCP's
    # initial one at its flights' pace (20x), where the twin without the delay
    # too measured 12.8x on a host busy enough that the emulated client's own
    # pace set it (see test_a_window_the_losses_kept_small_sets_the_pace)
    assert loss.details["speedup_assumes_flight_pace"]
    assert not loss.details["speedup_is_lower_bound"]
    assert measured < loss.details["speedup_if_removed"] <= 2.5 * measured


def test_a_window_paced_by_its_losses_regrows_from_the_initial_window() -> None:
    """The kernel client through 5 ms and 1% loss, 8 x 1 MiB (quiet host): the
    losses keep its window at their pace (Mathis: 27.5 Mbit/s; 22.7 measured,
    54 at its fastest), its twin through the 5 ms alone measured 13.3x faster
    (8 MiB runs: 12.4-13.3x).  Without the losses the window regrows from TCP's
    initial one (slow start: its round trips stay) and the data moves as fast
    as its flights did: predicted within 25% (before: at least 2.6x, the fastest
    stretch as the bound)."""
    name = "kernel/kvm-v41-ganesha-d5-l1-8mib"
    twin = json.loads((SAMPLES / f"{name}.json").read_text())["cause"]["vs_twin"]
    assert twin["twin"] == "kvm-v41-ganesha-d5-l0"  # the same 5 ms, no loss
    measured = twin["write_phase_s"] / twin["twin_write_phase_s"]
    d = trace(SAMPLES / f"{name}.pcap").diagnosis
    assert d.verdict.primary == "loss_recovery", d.verdict.text
    row = d.budget.pairs.iloc[0]
    assert row["peak_mbit_s"] <= PEAK_OVER_LOSS_BOUND * row["loss_bound_mbit_s"]
    assert row["slow_start_ns"] >= 8 * row["rtt_ns"]  # 5,800 segments from 10
    loss = next(f for f in d.findings if f.kind == "loss_recovery")
    assert loss.details["speedup_assumes_flight_pace"]
    assert abs(math.log(loss.details["speedup_if_removed"] / measured)) <= math.log(1.25)
    assert "about" in loss.title and "whether the client keeps that pace" in loss.title
    assert "about" in d.verdict.text and "at least" not in d.verdict.text


def test_the_losses_pace_decides_whether_the_fastest_stretch_bounds_their_removal() -> None:
    """A window the losses cut (loss_recovery_also_ns at least LOSS_PACED of the
    time) whose fastest stretch ran within PEAK_OVER_LOSS_BOUND of what the
    losses let a window keep (Mathis, loss_bound_mbit_s) showed their pace, not
    the path's: their removal is the data's moving time plus a slow start's
    round trips.  A fastest stretch beyond it ran at the path's pace between
    losses: the bound stays, and the gain is a lower bound; so it does for a
    pair whose windows the losses hardly cut."""
    from nfstrace.analysis.counterfactual import removal

    lossy = _cut_window_row(slow_start_ns=1.5, peak_mbit_s=40.0, loss_bound_mbit_s=20.0)
    paced = removal(lossy, "loss_recovery")
    assert paced.predicted_ns == 2_000_000_000 and paced.paced and not paced.at_least
    beyond = removal({**lossy, "peak_mbit_s": 70.0}, "loss_recovery")
    assert beyond.predicted_ns == 4_000_000_000 and beyond.at_least and not beyond.paced
    unknown = removal({**lossy, "loss_bound_mbit_s": math.nan}, "loss_recovery")
    assert unknown.predicted_ns == 4_000_000_000 and unknown.at_least
    hardly = {**lossy, "loss_recovery_also_ns": int(0.4e9), "loss_recovery_path_ns": int(8.1e9)}
    assert not removal(hardly, "loss_recovery").paced
    assert removal(hardly, "loss_recovery").predicted_ns == 4_000_000_000


def test_a_turnaround_silent_until_a_resend_is_the_loss_not_the_client() -> None:
    """Seen at the server, a call whose first segments were lost starts with
    their re-send: the time from what released it (the last reply) to that
    re-send is the client's retransmission timer, a TCP silence before re-sent
    bytes (loss_recovery stop), not the client's own turnaround (lab, nfs-rs
    through 1.5% loss at the server: four 205 ms timeouts were 'client idle',
    33% of the path, the verdict client_idle; now loss_recovery, as at the
    client)."""
    from nfstrace.analysis.critical_path import CallTimes, Stops, code, critical_path

    ms = 1_000_000
    arr = lambda *v: np.array(v, "int64")  # noqa: E731
    times = CallTimes(
        cs=arr(0, 215 * ms),  # the second call's first packet seen: its re-send
        tx_from=arr(0, 215 * ms),
        tx_end=arr(1 * ms, 216 * ms),
        loss_from=arr(1 * ms, 216 * ms),  # (none held back by a loss)
        acked=arr(-1, -1),
        rt_from=arr(1 * ms, 216 * ms),
        wait_from=arr(1 * ms, 216 * ms),
        rf=arr(5 * ms, 220 * ms),
        rl=arr(5 * ms, 220 * ms),
        wait_cause=arr(code("server"), code("server")),
        conn=arr(1, 1),
    )
    silent = Stops(
        start=arr(8 * ms),
        end=arr(215 * ms),
        cause=arr(code("loss_recovery")),
        conn=arr(1),
        also=arr(-1),
    )
    none = Stops(*(arr() for _ in range(5)))
    empty = (arr(), arr())
    before = critical_path(times, none, empty, 0, 220 * ms, 1)
    assert before.ns["client_idle"] == 210 * ms
    path = critical_path(times, silent, empty, 0, 220 * ms, 1)
    assert path.ns["loss_recovery"] == 207 * ms
    assert path.ns["client_idle"] == 3 * ms  # the client's own, before the silence
    assert path.total_ns == 220 * ms


@pytest.mark.parametrize("silent_conn", [1, 2])
def test_a_commit_behind_a_hole_waits_on_the_loss_not_the_flush(silent_conn: int) -> None:
    """A COMMIT sent while the client's earlier bytes on its connection wait to
    be re-sent cannot reach the server until they are: its wait under the
    client's TCP silence before the re-send is the loss's (lab nfs-rs through
    1.5% loss: 433 ms of 'commit' on the path, its removal 1.74x where the lab's
    COMMITs take 2 ms; the loss's 1.27x, its twin 2.87x: now 2.1x).  A silence of
    another connection does not hold it."""
    from nfstrace.analysis.critical_path import CallTimes, Stops, code, critical_path

    ms = 1_000_000
    arr = lambda *v: np.array(v, "int64")  # noqa: E731
    times = CallTimes(  # one COMMIT: sent at 0, its reply at 230 ms
        cs=arr(0),
        tx_from=arr(0),
        tx_end=arr(0),
        loss_from=arr(0),
        acked=arr(-1),
        rt_from=arr(0),
        wait_from=arr(1 * ms),
        rf=arr(230 * ms),
        rl=arr(230 * ms),
        wait_cause=arr(code("commit")),
        conn=arr(1),
    )
    lost = arr(code("loss_recovery"))
    silence = Stops(arr(10 * ms), arr(215 * ms), lost, arr(silent_conn), arr(-1))
    path = critical_path(times, silence, (arr(), arr()), 0, 230 * ms, 0)
    if silent_conn == 1:
        assert path.ns["loss_recovery"] == 205 * ms and path.ns["commit"] == 24 * ms
    else:
        assert path.ns["loss_recovery"] == 0 and path.ns["commit"] == 229 * ms


def test_calls_the_capture_could_not_read_keep_the_path_on_its_connections() -> None:
    """Spans where the client sent calls the capture could not read cut the
    client's turnarounds into parts; the loss stops that hold a COMMIT are then
    looked up by its connection, which must follow the cut parts (before: the
    connections of the uncut segments, read at the cut ones' positions: a
    COMMIT held by its connection's loss behind such a span was read with
    another segment's connection, or past the end: IndexError)."""
    from nfstrace.analysis.critical_path import CallTimes, Stops, code, critical_path

    ms = 1_000_000
    arr = lambda *v: np.array(v, "int64")  # noqa: E731
    times = CallTimes(  # a COMMIT on connection 1, then a WRITE on connection 2
        cs=arr(0, 232 * ms),
        tx_from=arr(0, 232 * ms),
        tx_end=arr(0, 233 * ms),
        loss_from=arr(0, 233 * ms),
        acked=arr(-1, -1),
        rt_from=arr(0, 233 * ms),
        wait_from=arr(1 * ms, 234 * ms),
        rf=arr(230 * ms, 240 * ms),
        rl=arr(230 * ms, 240 * ms),
        wait_cause=arr(code("commit"), code("server")),
        conn=arr(1, 2),
    )
    silence = Stops(arr(10 * ms), arr(215 * ms), arr(code("loss_recovery")), arr(1), arr(-1))
    unread = (arr(230 * ms + ms // 2), arr(231 * ms))  # in the client's turnaround
    whole = critical_path(times, silence, (arr(), arr()), 0, 240 * ms, 1)
    cut = critical_path(times, silence, (arr(), arr()), 0, 240 * ms, 1, unread=unread)
    assert whole.ns["loss_recovery"] == cut.ns["loss_recovery"] == 205 * ms
    assert cut.ns["commit"] == whole.ns["commit"] == 24 * ms
    assert cut.ns["transfer"] - whole.ns["transfer"] == ms // 2  # the unread calls' sending
    assert cut.ns["client_idle"] == whole.ns["client_idle"] - ms // 2
    assert cut.total_ns == whole.total_ns == 240 * ms


def test_one_connections_ack_waits_while_the_others_send_are_no_round_trip() -> None:
    """The kernel client with nconnect=4 through 10 ms (4 x 1 MiB, one WRITE per
    connection): each connection has its share of what the path holds in
    flight, and while one waits for its ACKs the others send: the pair's data
    is moving (before: every ACK wait against the whole path's bytes and over
    the other connections' sending, round trip 94%, "10.0x faster with a LAN's
    round trips"; its twin without the delay measured 1.25x)."""
    name = "kernel/kvm-v3-ganesha-nconnect4-d10-l0"
    twin = json.loads((SAMPLES / f"{name}.json").read_text())["cause"]["vs_twin"]
    measured = twin["write_phase_s"] / twin["twin_write_phase_s"]
    d = trace(SAMPLES / f"{name}.pcap").diagnosis
    row = d.budget.pairs.iloc[0]
    assert row["round_trip_ns"] <= 0.3 * row["elapsed_ns"]
    assert row["transfer_ns"] >= 0.6 * row["elapsed_ns"]
    rt = next(f for f in d.findings if f.kind == "round_trip")
    assert abs(math.log(rt.details["speedup_if_removed"] / measured)) <= math.log(1.25)


def _row(**values: float) -> dict:
    """A budget pairs row of 10 s whose causes are given in seconds."""
    row = {"elapsed_ns": 10_000_000_000, "rtt_ns": 10e6, "writes": 16, "write_size": 1 << 20}
    for key, value in values.items():
        row[key] = int(value * 1e9) if key.endswith("_ns") else value
    return row


def _cut_window_row(**more: float) -> dict:
    """A pair of 10 s whose losses cut its window: 8 s of that window's ACK
    waits (the round trip's, made by the loss too), 0.5 s of the loss's own,
    0.5 s of moving data; at its fastest stretch its bytes take 4 s."""
    return _row(
        loss_recovery_path_ns=0.5,
        loss_recovery_also_ns=8,
        round_trip_path_ns=8,
        transfer_ns=0.5,
        transfer_path_ns=0.5,
        peak_floor_ns=4,
        **more,
    )


def test_a_loss_limited_window_regrows_only_as_far_as_the_path_carried() -> None:
    """Removing the losses of a window they cut (loss_recovery_also_ns) leaves the
    data no faster than the fastest the capture shows (peak_floor_ns); the round
    trip's removal too when the calls queued in the client's socket
    (stream_bound), not when the client waited for each reply.  A loss that cut
    no window (UDP: re-send timeouts) is not bounded so."""
    from nfstrace.analysis.counterfactual import removal

    lossy = _cut_window_row()
    assert removal(lossy, "loss_recovery").predicted_ns == 4_000_000_000
    assert removal(lossy, "loss_recovery").at_least  # (the window could regrow further)
    free = removal({**lossy, "peak_floor_ns": 0}, "loss_recovery")
    assert free.predicted_ns == 1_500_000_000 and not free.at_least
    rt = 10e9 - 8e9 * (1 - 0.2 / 10)  # each wait at a LAN's round trip
    assert removal(lossy, "round_trip").predicted_ns == pytest.approx(rt, abs=1)
    bound = removal({**lossy, "stream_bound": True}, "round_trip")
    assert bound.predicted_ns == 4_000_000_000
    uncut = {**lossy, "loss_recovery_also_ns": 0, "loss_recovery_path_ns": 7_000_000_000}
    assert removal(uncut, "loss_recovery").predicted_ns == 3_000_000_000  # 10 - 7 s
    assert not removal(uncut, "loss_recovery").at_least


def test_round_trip_waits_in_the_window_the_losses_cut_are_the_losses_in_a_tie() -> None:
    """Kernel NFSv4.2 through 10 ms and 1% loss, 27x slower than its twin
    (the kernel client hides 10 ms without losses): 27.1 s of ACK waits, 26.3 s
    of them with the window the losses kept small.  Both removals are bounded by
    the fastest stretch (a tie); the time the losses made is theirs, not also
    the round trip's (before: 27.31 s against 27.30 s, round trip by 10 ms)."""
    from nfstrace.analysis.verdict import _made_ns

    row = _row(
        round_trip_ns=27.08,
        round_trip_also_ns=0.23,
        loss_recovery_ns=1.04,
        loss_recovery_also_ns=26.26,
    )
    assert _made_ns(row, "loss_recovery") == pytest.approx(27.30e9)
    assert _made_ns(row, "round_trip") == pytest.approx(1.05e9)
    no_loss = _row(round_trip_ns=27.08, loss_recovery_ns=1.04)
    assert _made_ns(no_loss, "round_trip") > _made_ns(no_loss, "loss_recovery")


@pytest.mark.parametrize(("peak", "ceiling"), [(57.0, True), (120.0, False)])
def test_a_steady_rate_under_losses_is_a_ceiling(peak: float, ceiling: bool) -> None:
    """A rate limit before the capture point with 0.5% loss, seen at the server:
    its calls arrive at one rate even at their fastest (peak within STEADY_RATIO of
    the mean): the path's ceiling, though the losses' ACK waits took 10% of the
    time.  A window the losses cut regrows between them: faster than its mean at
    times, not a ceiling."""
    from nfstrace.analysis.verdict import ceiling as is_ceiling

    row = _row(transfer_ns=9.5, loss_recovery_ns=0.5, loss_recovery_also_ns=1)
    row.update(
        mbit_s=55.0,
        send_mbit_s=57.0,
        send_spread=0.001,
        peak_mbit_s=peak,
        resent_segment_share=0.005,
        clock_mbit_s=math.nan,
    )
    for cause in CAUSES:
        row.setdefault(f"{cause}_ns", 0)
    assert is_ceiling(row) is ceiling


@pytest.mark.parametrize("side", ["server", "client"])
def test_a_tail_lost_before_the_server_is_a_timeout(side: str) -> None:
    """Two 512 KiB WRITEs stop before their last segment for 210 ms with every
    byte seen acknowledged.  At the server: a tail the network lost, re-sent on
    the client's retransmission timer (at least Linux's 200 ms): loss.  At the
    client the same stop is its own pause (its bytes all acknowledged, nothing
    lost on the way): client_idle."""
    d = trace(CRAFTED / f"timeout_{side}.pcap").diagnosis
    assert d.quality.capture_point == side
    stops = len(mcs.TIMED_OUT) * mcs.TIMEOUT_MS / 1e3
    if side == "server":
        assert d.verdict.primary == "loss_recovery", d.verdict.text
        loss = next(f for f in d.findings if f.kind == "loss_recovery")
        assert loss.details["seconds"] == pytest.approx(stops, rel=0.01)
        assert f"{len(mcs.TIMED_OUT)} spans of {mcs.TIMEOUT_MS} ms" in loss.title
        assert "retransmission timeouts" in loss.title
    else:
        assert d.verdict.primary == "client_idle", d.verdict.text
        assert not any(f.kind == "loss_recovery" for f in d.findings)


def test_a_delayed_ack_of_a_lone_commit_is_no_queue_in_the_path() -> None:
    """A COMMIT sent alone in one segment, every earlier call answered: the
    server's TCP acknowledges it when its delayed-ACK timer fires (~40 ms on
    Linux) while the flush goes on.  That late ACK is the receiver waiting, not
    the COMMIT's bytes queued in the path: its whole wait is the flush's.  The
    300 ms COMMIT sample gave 43 ms of it to moving data, and the removal of the
    flush's delay predicted 6.0x where the same 4 MiB copy without it (the
    healthy sample, whose own COMMIT took 1.5 ms) runs 31.5x faster."""
    name = "v41-tcp-nfsrs-w1m-commit300ms-d0-l0"
    t = trace(CAUSE_SAMPLES / f"{name}.pcap")
    tx = t.transactions
    commit = tx[tx["op"] == "COMMIT"].iloc[0]
    late = int(commit["t_call_acked_ns"]) - int(commit["t_call_last_end_ns"])
    assert late > 30_000_000 and commit["t_call_acked_ns"] < commit["t_reply_ns"]
    iv = t.diagnosis.budget.intervals
    xid = f"xid {int(commit['xid']):#010x}"
    mine = iv[iv["evidence"].str.contains(xid, regex=False)]
    assert set(mine["cause"]) <= {"commit", "round_trip"}
    assert mine.loc[mine["cause"] == "commit", "duration_ns"].sum() > 0.99 * (
        int(commit["t_reply_ns"]) - int(commit["t_call_ns"]) - 100_000
    )
    measured = _phase_ns(name) / _phase_ns("v41-tcp-nfsrs-w1m-d0-l0")
    gain = next(f for f in t.diagnosis.findings if f.kind == "commit").details
    assert t.diagnosis.verdict.primary == "commit"
    # (the healthy copy's own 1.5 ms COMMIT stays in the measured time)
    assert measured / 1.25 < gain["speedup_if_removed"] < measured * 1.35, (gain, measured)


def test_a_lost_tail_resent_on_the_timer_is_the_loss_not_the_server() -> None:
    """The last, short segment of a WRITE lost past the capture point: the
    server acknowledges all of the call but it (the ACK the parser takes for
    the call's: a receiver may hold the ACK of a short last segment), the
    client re-sends it on its retransmission timer, then the server answers.
    Those 207 ms are the loss's, not the server's: before, 'no problem found',
    no gain from the loss and 2.4x from a faster server (lab, nfs-rs through
    1.5% loss: the server's busy time held 515 ms of 828, the loss removal
    1.29x against its twin's 1.97x; now 1.82x)."""
    d = trace(CRAFTED / "tail_resent.pcap").diagnosis
    assert d.verdict.primary == "loss_recovery", d.verdict.text
    row = d.budget.pairs.iloc[0]
    lost = mcs.TAIL_RTO_MS * 1e6
    per_call_ns = (mcs.TAIL_SERVER_US + 2 * mcs.RTT_US) * 1e3
    assert int(row["server_work_ns"]) < mcs.TAIL_WRITES * per_call_ns
    assert int(row["loss_recovery_path_ns"]) >= lost
    gains = {f.kind: f.details.get("speedup_if_removed") for f in d.findings if f.kind != "verdict"}
    elapsed = int(row["elapsed_ns"])
    assert gains["loss_recovery"] == pytest.approx(elapsed / (elapsed - lost), rel=0.05)
    assert (gains.get("server") or 1.0) < 1.1, gains


def test_a_full_windows_littles_law_is_applied_as_a_ratio() -> None:
    """A client that kept its 8 slots full: removing a cause lets every slot
    cycle faster (Little's law, the WRITEs' summed latencies over the window).
    The formula's own estimate of the activity as captured can be 10% off; that
    error is not the removed cause's gain.  The lab's 5 ms + 1% loss copy
    (nfs-rs, 64 KiB): latencies 11.72 s over 8 slots, 1.93 s elapsed, its
    client's pauses 0.19 s on the critical path: 1.28x from removing them
    before (the formula's 1.70 s against 1.93 s), 1.13x now."""
    from nfstrace.analysis.counterfactual import removal

    row = _row(
        elapsed_ns=1.925,
        write_latency_ns=11.72,
        max_outstanding=8,
        client_idle_path_ns=0.193,
        commit_path_ns=0.0437,
        transfer_ns=0.387,
        round_trip_path_ns=0.9,
    )
    latency = 11.72 / 8
    now = latency + 0.0437 + 0.193
    got = removal(row, "client_idle")
    assert got.speedup == pytest.approx(now / (latency + 0.0437), rel=0.01)
    assert got.speedup < 1.15
    # with the formula exact, a removal gains what it takes off the slots' cycle
    exact = {**row, "write_latency_ns": int((1.925 - 0.0437 - 0.193) * 8e9)}
    assert removal(exact, "client_idle").predicted_ns == pytest.approx(
        (1.925 - 0.193) * 1e9, rel=0.01
    )


def test_short_client_pauses_are_not_named_for_their_critical_path_alone() -> None:
    """The lab's healthy nfs-rs NFSv4.1 copy of 64 MiB in 1 MiB WRITEs (one at a
    time, 931 Mbit/s): nothing outstanding 16% of the time (18 pauses of
    1.5-6.7 ms), but the critical path credits the pauses with 31% (the next call
    waited on the client while the server worked on the last): removing them
    predicted 1.44x, over SPEEDUP_MIN, and the verdict was client_idle.  The
    client's own pauses need their share of the time as well; the same row with
    a third of its time paused names them."""
    from nfstrace.analysis.verdict import SPEEDUP_MIN, gains, is_significant

    row = _row(
        elapsed_ns=0.5768,
        client_idle_ns=0.0948,
        client_idle_path_ns=0.1766,
        transfer_ns=0.2636,
        server_ns=0.1784,
        server_work_ns=0.2659,
        commit_path_ns=0.0379,
        commit_ns=0.0379,
        bytes=67108864,
        mbit_s=930.8,
    )
    got = gains(row)["client_idle"]
    assert got.speedup > SPEEDUP_MIN["client_idle"]
    assert not is_significant("client_idle", row)
    paused = {**row, "client_idle_ns": int(0.35 * row["elapsed_ns"])}
    assert is_significant("client_idle", paused)


@pytest.mark.parametrize(("seconds", "limited"), [(1.209, False), (10.0, True)])
def test_a_window_is_loss_limited_only_at_the_losses_pace(seconds: float, limited: bool) -> None:
    """Re-sending 0.41% of its segments, a connection keeps a window that
    carries about 96 Mbit/s over 2.29 ms (Mathis; CUBIC up to 2.4x that).  The
    lab's nfs-cp copy of 64 MiB through 2 ms and 0.5% loss moved at 444 Mbit/s,
    3% slower than its loss-free twin: its ACK waits were the path's, not a
    window the losses kept small (all of them were the losses' before: removing
    the loss predicted 1.46x).  The same bytes over 10 s (54 Mbit/s) were."""
    from types import SimpleNamespace

    from nfstrace.analysis.budget import SEGMENT_BYTES, _loss_limited

    calls = 1024
    start = 1_000_000_000
    cs = start + np.linspace(0, seconds * 1e9 - 1e6, calls).astype("int64")
    c = SimpleNamespace(
        conn=np.zeros(calls, "int64"),
        call_bytes=np.full(calls, 65536, "int64"),
        cs=cs,
        rl=cs + 1_000_000,
    )
    segments = calls * 65536 / SEGMENT_BYTES
    resent = int(0.0041 * segments)
    retx = np.arange(resent)
    conn = np.zeros(resent, "int64")
    got = _loss_limited(retx, conn, c, 2_287_000)  # type: ignore[arg-type]
    assert list(got) == ([0] if limited else [])


def _moving_row(**values: float) -> dict:
    """A budget pairs row (``_row``) with every cause's time given, none but
    the data's moving and the round trip's unless named."""
    return _row(**{**{f"{c}_ns": 0.0 for c in CAUSES}, **values})


def test_a_timed_steady_ceiling_beside_a_round_trip_is_bandwidth() -> None:
    """nfs-cp writing 16 MiB in 64 KiB WRITEs through a 100 Mbit/s limit and a
    10 ms round trip (the lab: removing the limit 3.8x faster, the round trip
    1.1x): its data moved 77% of the time, its calls acknowledged at 85 Mbit/s
    with an interquartile range of 0.6%, the writes at 82 Mbit/s.  Below
    TRANSFER_DOMINANT, so the ceiling went unnamed (and, seen at the server,
    "no problem found"); with the steadiness timed over its 256 calls the
    limit is named, its removal predicted 3.4x.  Untimed (fewer than 8 calls:
    the kernel client's four 1 MiB WRITEs through 10 ms and nconnect=4, 79% of
    the time moving) it still needs TRANSFER_DOMINANT, as does a pace less even
    than a limiter's (CLOCKED_SPREAD)."""
    from nfstrace.analysis.verdict import TRANSFER_DOMINANT, ceiling, gains

    row = _moving_row(
        elapsed_ns=1.6287,
        transfer_ns=1.2482,
        transfer_path_ns=1.2482,
        round_trip_ns=0.3516,
        round_trip_path_ns=0.3539,
        bytes=16777216,
        mbit_s=82.41,
        send_mbit_s=107.6,
        send_spread=0.0298,
        ack_mbit_s=84.97,
        ack_spread=0.0058,
        peak_mbit_s=110.5,
    )
    assert row["transfer_ns"] < TRANSFER_DOMINANT * row["elapsed_ns"]
    assert ceiling(row)
    assert gains(row)["bandwidth"].speedup == pytest.approx(3.37, abs=0.05)
    untimed = {**row, "send_spread": math.nan, "ack_mbit_s": math.nan, "ack_spread": math.nan}
    untimed["send_mbit_s"] = 80.0
    assert not ceiling(untimed)
    # a CPU-bound forwarder's pace, less even than a limiter's (the lab's impair.py
    # bridge, healthy nfs-rs: ACKs at 540 Mbit/s, spread 6%, moving data 76% of the
    # time, bursts sent at 2 Gbit/s): no ceiling below TRANSFER_DOMINANT
    bridge = _moving_row(
        elapsed_ns=0.616,
        transfer_ns=0.4685,
        round_trip_ns=0.0494,
        bytes=33554432,
        mbit_s=435.8,
        send_mbit_s=2086.6,
        send_spread=0.0443,
        ack_mbit_s=539.6,
        ack_spread=0.0606,
        peak_mbit_s=551.8,
    )
    assert not ceiling(bridge)


def test_a_rate_limit_beside_a_round_trip_seen_at_the_server() -> None:
    """The lab's nfs-cp through a 100 Mbit/s limit and 10 ms, seen at the server
    and cut to 200 bytes a frame: the calls arrive at one steady rate, the data
    moving most of the time and the round trip taking the rest.  The verdict
    was "no problem found" (the data moved less than TRANSFER_DOMINANT of the
    time, and the calls' rate was compared with the overall rate, round trips
    included); it is the limit, whose removal the twins measure at 3.79x."""
    src = SAMPLES / "snaplen/v3-tcp-nfscp-w64k-rate100mbit-d10-l0.server-side.first3000.s200.pcap"
    measured = json.loads(src.with_suffix(".json").read_text())["cause"]["measured"]
    d = load_sample(src).diagnosis
    assert d.quality.capture_point == "server"
    assert d.verdict.primary == "bandwidth", d.verdict.text
    limit = next(f for f in d.findings if f.kind == "bandwidth")
    got = limit.details["speedup_if_removed"]
    assert 2.0 < got < 1.5 * measured["counterfactual"]["bandwidth"]["speedup"]


def test_a_resend_after_the_next_calls_ack_is_not_this_calls_tail() -> None:
    """A server answering one WRITE at a time 40 ms after its bytes came (the
    lab's 4 ms a WRITE with eight queued, through 1% loss): before each reply
    the client re-sent some later call's segment, and every call counted that
    re-send as its own lost tail (the server's time the loss's: removing the
    slow server predicted 1.44x where its twin measures 6.2x; now 3.1x).  The
    next call's ACK up to its last segment covered all of this call: a re-send
    after it is not this call's tail; the last call's still can be."""
    from types import SimpleNamespace

    from nfstrace.analysis.budget import _resent_after_ack

    ms = 1_000_000
    c = SimpleNamespace(
        cs=np.array([0, 5, 10]) * ms,
        acked=np.array([6, 11, 16]) * ms,  # each up to its last segment
        conn=np.zeros(3, "int64"),
    )
    rf = np.array([45, 50, 55]) * ms
    ts = np.array([20, 44]) * ms  # re-sends (of later segments)
    retx = np.arange(2)
    got = _resent_after_ack(c, ts, np.zeros(2, "int64"), retx, rf, np.ones(3, bool))  # type: ignore[arg-type]
    assert list(got) == [0, 0, 44 * ms]
