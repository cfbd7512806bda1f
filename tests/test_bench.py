"""The benchmark script (bench/run.py): a --quick run on sample captures, and the
metadata-heavy input it generates checked against tshark."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, SAMPLES, bench_module
from tshark_ref import fields, tshark

BENCH = ROOT / "bench" / "run.py"


def _bench_module():
    return bench_module()


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    tshark()  # the comparison needs it: fail clearly when missing
    inputs = tmp_path_factory.mktemp("bench-inputs")
    shutil.copy(SAMPLES / "v3-tcp-nfscp-w1m-d0-l0.pcap", inputs)
    results = inputs / "out"
    done = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--inputs", str(inputs), "--results", str(results)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((results / "benchmark.json").read_text()), results


@pytest.mark.slow
def test_quick_run_reports_every_tool_with_positive_numbers(quick_report):
    report, results = quick_report
    absent = {a["name"] for a in report["absent"]}
    expected = {"nfstrace", "tshark", "read-floor"} | (
        set() if "epam-nfstrace" in absent else {"epam-nfstrace"}
    )
    assert "nfstrace" not in absent and "tshark" not in absent
    names = {i["name"] for i in report["inputs"]}
    assert {"v3-write", "v3-write-s256", "v41-write", "v41-metadata"} <= names
    for entry in report["inputs"]:
        assert entry["packets"] > 0 and entry["bytes"] > 0
        assert expected <= set(entry["results"]), entry["name"]
        for tool, r in entry["results"].items():
            assert r["exit_status"] == 0, (entry["name"], tool, r.get("error"))
            assert r["wall_s"] > 0 and r["packets_per_s"] > 0 and r["mb_per_s"] > 0
            assert r["peak_rss_mb"] > 0
        assert entry["speedup"]["nfstrace/tshark"] > 0
        assert entry["speedup"]["nfstrace/read-floor"] > 0
    # the copied capture was used, not fetched again
    v3 = next(i for i in report["inputs"] if i["name"] == "v3-write")
    assert Path(v3["file"]).parent == results.parent
    assert (results / "benchmark.md").read_text().count("| v3-write |") >= len(expected)
    assert report["machine"]["cores"] >= 1 and report["machine"]["python"]
    assert report["load_average"]["start"] and report["load_average"]["end"]


@pytest.mark.slow
def test_quick_run_counts_the_same_nfs_calls_as_tshark(quick_report):
    report, _ = quick_report
    for entry in report["inputs"]:
        calls = entry["nfs_calls"]
        assert calls["nfstrace"] > 0
        assert calls["nfstrace"] == calls["tshark"], entry["name"]


@pytest.mark.slow
def test_streaming_memory_pairs_full_and_s256(quick_report):
    report, _ = quick_report
    pairs = {p["full"]: p for p in report["streaming_memory"]}
    assert set(pairs) == {"v3-write", "v41-write"}
    for p in pairs.values():
        assert p["rss_full_mb"] > 0 and p["rss_s256_mb"] > 0 and p["ratio"] >= 1


@pytest.mark.slow
def test_profile_is_written(quick_report):
    report, results = quick_report
    text = (results / report["profile"]["text"]).read_text()
    assert "by cumulative" in text and "by tottime" in text
    assert report["profile"]["top_by_tottime"]


def test_metadata_capture_is_many_distinct_small_transactions(tmp_path):
    """Every copy of the leading RPCs is a separate session: tshark sees as many
    calls and replies as the copies hold, and no xid repeats on a client."""
    bench = _bench_module()
    out = tmp_path / "meta.pcap"
    frames = bench.replicate_small_rpcs(bench.METADATA_SOURCE, out, 1000)  # 38 copies
    assert frames >= 1000 and bench.count_packets(out) == frames
    per_frame = fields(str(out), ["ip.src", "tcp.srcport", "rpc.xid", "rpc.msgtyp"])
    calls = [(src, port, xid) for src, port, xid, kind in per_frame if kind == "0"]
    replies = [row for row in per_frame if row[3] == "1"]
    copies = len({(src, port) for src, port, _ in calls})  # one TCP connection per copy
    # the source's leading whole RPCs: EXCHANGE_ID .. LAYOUTGET, in 27 frames
    assert frames == 27 * copies
    assert len(calls) == len(replies) == 11 * copies
    assert len({src for src, _, _ in calls}) == min(copies, bench.METADATA_CLIENTS)
    assert len({(src, xid) for src, _, xid in calls}) == len(calls)  # no xid twice on a client
    # the checksums were adjusted, not broken
    assert _bad_checksums(out) == ""


def _bad_checksums(path) -> str:
    """tshark's frames whose IP or TCP checksum is wrong (empty: none)."""
    return subprocess.run(
        [tshark(), "-n", "-r", str(path), "-o", "tcp.check_checksum:TRUE"]
        + ["-o", "ip.check_checksum:TRUE", "-Y", "tcp.checksum.status==0 || ip.checksum.status==0"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_write_input_is_copies_from_distinct_clients(tmp_path):
    """bench/parse_speed.py's write input: the 1 MiB-write sample copied from
    clients of their own, one after the other; tshark sees each copy's calls
    and replies, every copy from its own address, checksums intact."""
    spec = importlib.util.spec_from_file_location("parse_speed", ROOT / "bench" / "parse_speed.py")
    assert spec and spec.loader
    speed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(speed)
    out = tmp_path / "writes.pcap"
    frames = speed.make_write_input(speed.WRITE_SOURCE, out, 3)
    tcp_frames = len(fields(str(speed.WRITE_SOURCE), ["ip.src"], "tcp"))
    assert frames == len(fields(str(out), ["ip.src"], "tcp")) == 3 * tcp_frames
    times = [float(t) for (t,) in fields(str(out), ["frame.time_epoch"], "frame")]
    assert len(times) == frames and times == sorted(times)  # each copy after the previous
    source = fields(str(speed.WRITE_SOURCE), ["ip.src", "rpc.xid", "rpc.msgtyp"])
    copied = fields(str(out), ["ip.src", "rpc.xid", "rpc.msgtyp"])
    calls = [(src, xid) for src, xid, kind in copied if kind == "0"]
    source_calls = [row for row in source if row[2] == "0"]
    assert len(source_calls) > 0 and len(calls) == 3 * len(source_calls)
    assert sum(1 for row in copied if row[2] == "1") == 3 * sum(1 for r in source if r[2] == "1")
    clients = {src for src, _ in calls}
    assert len(clients) == 3 and all(c.startswith("10.1.0.") for c in clients)
    assert _bad_checksums(out) == ""


def test_parsers_of_tshark_and_epam_output():
    bench = _bench_module()
    srt = """RPC SRT Statistics:
Filter: nfs.procedure_v3
Index  Procedure              Calls    Min SRT    Max SRT    Avg SRT    Sum SRT
    0  NULL                        1   0.000198   0.000198   0.000198   0.000198
    7  WRITE                     256   0.000970   0.019928   0.005455   1.396560
"""
    assert bench.tshark_srt_calls(srt) == 257
    epam = """NFS v3 protocol
Total operations: 9. Per operation:
NULL            1  11.11%
Per connection info:
Total operations: 9. Per operation:
NFS v4.0 protocol: Data transmission has not been detected.
NFS v4.1 protocol
Total operations: 4. Per operation:
"""
    assert bench.epam_operations(epam) == 13


def test_parser_backends_are_discovered_from_the_cli(tmp_path):
    """When ``nfstrace analyze`` offers --parser, every choice is benchmarked."""
    bench = _bench_module()
    package = tmp_path / "nfstrace"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "cli.py").write_text(
        "import enum\n"
        "import typer\n"
        "app = typer.Typer()\n"
        "class Parser(str, enum.Enum):\n"
        "    fast = 'fast'\n"
        "    dpkt = 'dpkt'\n"
        "    native = 'native'\n"
        "@app.command()\n"
        "def analyze(capture: str, parser: Parser = typer.Option(Parser.native, '--parser')):\n"
        "    pass\n"
        "@app.command()\n"
        "def other() -> None:\n"
        "    pass\n"
    )
    assert bench.nfstrace_parsers(bench.nfstrace_env(tmp_path)) == ("native", ["fast", "dpkt"])
    # a plain string option validated against a table the CLI imported
    (package / "cli.py").write_text(
        "import typer\n"
        "PARSERS = {'fast': None, 'pyshark': None}\n"
        "app = typer.Typer()\n"
        "@app.command()\n"
        "def analyze(capture: str, parser: str = typer.Option('fast', '--parser')):\n"
        "    pass\n"
    )
    assert bench.nfstrace_parsers(bench.nfstrace_env(tmp_path)) == ("fast", ["pyshark"])
    (package / "cli.py").write_text(
        "import typer\napp = typer.Typer()\n@app.command()\ndef analyze(capture: str):\n    pass\n"
    )
    assert bench.nfstrace_parsers(bench.nfstrace_env(tmp_path)) == (None, [])


@pytest.mark.slow
def test_missing_epam_nfstrace_is_reported_absent(tmp_path, monkeypatch):
    bench = _bench_module()
    monkeypatch.setattr(bench, "EPAM_NFSTRACE", tmp_path / "no-such-nfstrace")
    tools, absent = bench.discover_tools(tmp_path, bench.nfstrace_env(ROOT))
    assert "epam-nfstrace" not in {t.name for t in tools}
    (missing,) = [a for a in absent if a.name == "epam-nfstrace"]
    assert "apt-get install -y nfstrace" in missing.reason
    assert {"nfstrace", "read-floor"} <= {t.name for t in tools}


def test_scaling_big_sizes_frames_and_exponent():
    # bench/scaling_big.py (issue 33): its sizes, its frame count, its log-log fit
    spec = importlib.util.spec_from_file_location("scaling_big", ROOT / "bench" / "scaling_big.py")
    assert spec and spec.loader
    big = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(big)
    assert [big.packets_of(s) for s in ("1M", "5m", "500k", "20000")] == [
        1_000_000, 5_000_000, 500_000, 20_000
    ]  # fmt: skip
    sample = SAMPLES / "v3-tcp-nfscp-w1m-d0-l0.pcap"
    assert big.frames_in(sample) == len(_bench_module()._pcap_records(sample)[1]) > 0
    xs = [1e6, 5e6, 1e7]
    assert big.exponent(xs, [3 * x for x in xs]) == pytest.approx(1.0)
    assert big.exponent(xs, [x * x for x in xs]) == pytest.approx(2.0)
    assert big.exponent(xs[:1], xs[:1]) is None
