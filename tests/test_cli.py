"""The command line, run in-process: exit codes and one-line errors, never a
traceback for bad input."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from typer.testing import CliRunner

from nfstrace.cli import app
from nfstrace.errors import ExitStatus

SAMPLE = Path(__file__).resolve().parent.parent / "sample-pcaps" / "v3-tcp-nfscp-w1m-d0-l0.pcap"
runner = CliRunner()


def _run(*args: str):
    return runner.invoke(app, list(args))


def _one_line_error(result, status: ExitStatus, text: str) -> None:
    assert result.exit_code == status, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nfstrace: error: ") and text in lines[0]


def test_analyze_sample_prints_counts(tmp_path: Path) -> None:
    r = _run("analyze", str(SAMPLE), "-o", str(tmp_path / "r.html"))
    assert r.exit_code == 0, r.output
    assert "16 transactions (32 RPC messages): 16 answered" in r.stdout
    assert "WRITE" in r.stdout and "COMMIT" in r.stdout


def test_analyze_leads_with_the_diagnosis_and_writes_the_report(tmp_path: Path) -> None:
    report, summary = tmp_path / "r.html", tmp_path / "s.json"
    r = _run("analyze", str(SAMPLE), "-o", str(report), "--json", str(summary))
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert out.index("Diagnosis") < out.index("Transactions") < out.index("Latency per operation")
    assert f"HTML report: {report}" in out
    assert report.stat().st_size > 1_000_000  # plotly.js inlined: opens offline
    d = json.loads(summary.read_text())["diagnosis"]
    assert d["findings"] and all(f["title"] for f in d["findings"])
    assert d["quality"]["capture_point"] == "client"  # the lab captured on the client


def test_default_report_beside_the_capture_and_no_report(tmp_path: Path) -> None:
    capture = tmp_path / "c.pcap"
    capture.write_bytes(SAMPLE.read_bytes())
    assert _run("analyze", str(capture), "--no-report").exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.pcap"]
    assert _run("analyze", str(capture)).exit_code == 0
    assert (tmp_path / "c.pcap.report.html").is_file()
    assert capture.read_bytes() == SAMPLE.read_bytes()  # the capture is not modified


def test_model_command_with_what_ifs(tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    r = _run(
        "model",
        str(SAMPLE),
        "--what-if",
        "rtt=+5ms",
        "--what-if",
        "link=10G,outstanding=16",
        "--json",
        str(out),
    )
    assert r.exit_code == 0, r.output
    assert "Transactional latency model" in r.stdout
    model = json.loads(out.read_text())["model"]
    assert {p["name"] for p in model["parameters"]} == {"T_prop", "T_ser", "T_B", "T_op"}
    assert all("method" in p and "samples" in p for p in model["parameters"])
    assert [w["change"] for w in model["what_if"]] == ["rtt=+5ms", "link=10G,outstanding=16"]


def test_bad_model_option_is_a_usage_error() -> None:
    _one_line_error(_run("model", str(SAMPLE), "--rtt", "fast"), ExitStatus.USAGE, "fast")
    _one_line_error(
        _run("analyze", str(SAMPLE), "--no-report", "--what-if", "warp=9"), ExitStatus.USAGE, "warp"
    )
    _one_line_error(
        _run("analyze", str(SAMPLE), "--no-report", "--parser", "nope"), ExitStatus.USAGE, "nope"
    )


def test_missing_file(tmp_path: Path) -> None:
    _one_line_error(
        _run("analyze", str(tmp_path / "nope.pcap")), ExitStatus.UNREADABLE, "no such file"
    )


def test_empty_file(tmp_path: Path) -> None:
    p = tmp_path / "empty.pcap"
    p.write_bytes(b"")
    _one_line_error(_run("analyze", str(p)), ExitStatus.UNREADABLE, "empty file")


def test_text_file(tmp_path: Path) -> None:
    p = tmp_path / "notes.txt"
    p.write_text("this is not a capture\n" * 10)
    _one_line_error(_run("analyze", str(p)), ExitStatus.UNREADABLE, "not a pcap or pcapng")


def test_directory(tmp_path: Path) -> None:
    _one_line_error(_run("analyze", str(tmp_path)), ExitStatus.UNREADABLE, "directory")


def test_capture_without_rpc(tmp_path: Path) -> None:
    p = tmp_path / "nothing.pcap"
    p.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    _one_line_error(_run("analyze", str(p)), ExitStatus.NO_RPC, "no ONC-RPC traffic")


def test_truncated_capture_warns_and_analyses(tmp_path: Path) -> None:
    data = SAMPLE.read_bytes()
    p = tmp_path / "cut.pcap"
    p.write_bytes(data[: len(data) // 2])
    r = _run("analyze", str(p))
    assert r.exit_code == ExitStatus.DAMAGED, r.output  # analysed, but damaged
    assert "nfstrace: warning:" in r.stderr and "cut off" in r.stderr
    assert "Traceback" not in r.output
    assert "RPC messages" in r.stdout
    assert SAMPLE.read_bytes() == data  # the user's file is untouched


def test_version() -> None:
    r = _run("--version")
    assert r.exit_code == 0 and "nfstrace" in r.stdout
