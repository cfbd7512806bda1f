"""The command line, run in-process: exit codes and one-line errors, never a
traceback for bad input."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nfstrace.analysis.diagnosis import rank
from nfstrace.analysis.findings import Finding
from nfstrace.cli import app
from nfstrace.errors import ExitStatus

try:
    from crafted import make_writes as mw
except ImportError:  # tests/ not on sys.path: import as a package
    from tests.crafted import make_writes as mw

SAMPLE = Path(__file__).resolve().parent.parent / "sample-pcaps" / "v3-tcp-nfscp-w1m-d0-l0.pcap"
SAMPLES = SAMPLE.parent
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
    assert out.index("Diagnosis") < out.index("Transactions") < out.index("Operations by time")
    assert f"HTML report: {report}" in out
    # plotly.js's basic bundle inlined (opens offline), gzip-packed: 0.7 MB, not 2.1 MB
    # (issue 34, item 4) nor 5 MB (issue 18)
    assert 500_000 < report.stat().st_size < 1_000_000
    d = json.loads(summary.read_text())["diagnosis"]
    assert d["findings"] and all(f["title"] for f in d["findings"])
    assert d["quality"]["capture_point"] == "client"  # the lab captured on the client


def test_default_is_one_screen_and_full_adds_the_tables(tmp_path: Path) -> None:
    """The default terminal view fits a screen (issue 18): the verdict, the budget,
    the busiest operations with their server time and errors by name, the
    capture's limits, tables in 100 columns; --full adds every latency table, the
    model and the workload."""
    capture = SAMPLES / "causes" / "v3-tcp-nfsrs-w1m-d0-l0.pcap"  # a LOOKUP gets NOENT
    short = _run("analyze", str(capture), "--no-report")
    assert short.exit_code == 0, short.output
    lines = short.stdout.splitlines()
    assert len(lines) <= 45  # sentences wrap at the terminal; tables fit 100 columns:
    assert max(len(line) for line in lines if "━" in line or "│" in line) <= 100
    assert "Time budget of the writes" in short.stdout and "NOENT ×1" in short.stdout
    assert "server p50" in short.stdout and "tshark's rpc.time" in short.stdout
    assert "Transactional latency model" not in short.stdout and "LADDIS" not in short.stdout
    full = _run("analyze", str(capture), "--no-report", "--full")
    assert full.exit_code == 0, full.output
    for section in ("Latency per operation", "Transactional latency model", "Workload"):
        assert section in full.stdout and section not in short.stdout
    assert len(full.stdout.splitlines()) > len(lines) + 30
    files = full.stdout.split("Files written (the slowest first", 1)[1]
    assert "w-v3-tcp-nfsrs-w1m-d0-l0" in files.split("\n\n")[0]  # named from CREATE


@pytest.mark.parametrize(
    ("option", "text"),
    [
        (["--stall-threshold", "200"], "--stall-threshold: a duration needs a unit: 200ms or 200s"),
        (["--server", "notanip"], "--server 'notanip': not an IP address"),
        (["--client", "10.0.0.300"], "--client '10.0.0.300': not an IP address"),
        (["--port", "99999"], "--port 99999: a port is 0 to 65535"),
    ],
)
def test_option_values_are_checked_before_reading(
    tmp_path: Path, option: list[str], text: str
) -> None:
    """Malformed filters and a duration without its unit are usage errors (issue 18:
    ``--stall-threshold 200`` meant 200 s), said before the capture is read (an
    unreadable capture is not even opened)."""
    r = _run("analyze", str(tmp_path / "absent.pcap"), "--no-report", *option)
    assert r.exit_code == ExitStatus.USAGE, r.output
    assert r.stderr.strip() == f"nfstrace: error: {text}" or f"error: {text}" in r.stderr


# A malformed value of each option the commands share, and the error naming it.
SHARED_OPTIONS = {
    "--client": (["10.0.0.300"], "--client '10.0.0.300'"),
    "--server": (["notanip"], "--server 'notanip'"),
    "--port": (["99999"], "--port 99999"),
    "--parser": (["nope"], "unknown parser 'nope'"),
    "--stall-threshold": (["200"], "--stall-threshold"),
    "--workers": (["-1"], "--workers -1"),
    "--partitions": (["0"], "--partitions 0"),
    "--rtt": (["fast"], "fast"),
    "--link-rate": (["fast"], "fast"),
    "--disk-rate": (["fast"], "fast"),
    "--block": (["big"], "big"),
    "--what-if": (["warp=9"], "warp"),
}
MODEL_OPTIONS = ("--rtt", "--link-rate", "--disk-rate", "--block", "--what-if")


@pytest.mark.parametrize(
    ("command", "option"),
    [("analyze", o) for o in SHARED_OPTIONS]
    + [("model", o) for o in SHARED_OPTIONS]
    + [("compare", o) for o in SHARED_OPTIONS if o not in MODEL_OPTIONS],
)
def test_each_command_passes_on_every_shared_option(command: str, option: str) -> None:
    """Every option a command shares with the others reaches the analysis: a
    malformed value is the usage error naming it (the commands hand their
    parameters over by name, ``cli._choices``: a parameter misnamed would be
    dropped silently)."""
    value, text = SHARED_OPTIONS[option]
    captures = [str(SAMPLE)] * (2 if command == "compare" else 1)
    extra = ["--no-report"] if command != "model" else []
    r = _run(command, *captures, *extra, option, *value)
    _one_line_error(r, ExitStatus.USAGE, text)


def test_addresses_are_compared_as_addresses(tmp_path: Path) -> None:
    """--client 2001:DB8::1 and 2001:db8:0::1 are the same address (normalised)."""
    from nfstrace.cli import _addresses

    assert _addresses("--client", ["2001:DB8:0::1", " 10.0.0.1 "]) == ("2001:db8::1", "10.0.0.1")
    r = _run("analyze", str(SAMPLE), "--no-report", "--server", "169.254.77.2", "--port", "2049")
    assert r.exit_code == 0 and "transactions" in r.stdout


def test_text_from_the_capture_is_never_made_emoji(tmp_path: Path) -> None:
    """rich makes emoji of codes such as :b: and :ab: by default: an IPv6
    address (2001:db8:a:b::1) or a file named after one came out as 2001:db8:a🅱:1.
    Every console nfstrace prints on keeps the text as it is."""
    import io

    from nfstrace.reports.console import Console

    out = io.StringIO()
    Console(file=out, width=80, highlight=False).print("2001:db8:a:b::1 fe80::ab:cd:1")
    assert out.getvalue() == "2001:db8:a:b::1 fe80::ab:cd:1\n"
    named = tmp_path / "2001:db8:a:b::1.pcap"
    named.write_bytes(SAMPLE.read_bytes())
    r = _run("analyze", str(named), "--no-report")
    assert r.exit_code == 0, r.output
    assert f"nfstrace {named}" in r.stdout
    assert "\N{NEGATIVE SQUARED LATIN CAPITAL LETTER B}" not in r.stdout
    missing = _run("analyze", str(tmp_path / ":ab:.pcap"))
    assert ":ab:.pcap" in missing.stderr


def _diagnosis_lines(stdout: str) -> list[str]:
    """The findings, each on one line again (the terminal wraps them to its width)."""
    import re

    block = stdout.split("Diagnosis\n", 1)[1].split("\n\n", 1)[0]
    items = re.split(r"\n(?= +\d+\. )", block)
    return [" ".join(item.split()).split(". ", 1)[1] for item in items]


def test_diagnosis_leads_with_the_verdict_then_the_costliest_cause(tmp_path: Path) -> None:
    """A 2 s COMMIT holds 20 sequential WRITEs: the verdict names it, in plain words,
    then its finding with the remedy; facts that cost no time (the sequential pace,
    the capture point) are not in the diagnosis.  --stall-threshold moves the stalls
    table, not the verdict."""
    capture = mw.build_all(tmp_path)["commit_stall"]
    summary = tmp_path / "s.json"
    r = _run("analyze", str(capture), "--no-report", "--json", str(summary))
    lines = _diagnosis_lines(r.stdout)
    assert lines[0].startswith("COMMITs (the server flushing to disk) held the writes for 100%")
    assert lines[1].startswith("COMMITs (the server flushing to disk) held the writes 2 s of 2 s")
    assert "The server's flush (COMMIT -> fsync) is slow" in lines[1]
    assert not any("one at a time" in line or "Capture point" in line for line in lines)
    d = json.loads(summary.read_text())["diagnosis"]
    assert d["verdict"]["primary"] == "commit"
    assert [f["kind"] for f in d["findings"]][:2] == ["verdict", "commit"]
    assert {"sequential_writes", "capture_point"} <= {f["kind"] for f in d["notes"]}
    for threshold, stalls in (("3s", 0), ("1ms", 1)):
        r = _run("analyze", str(capture), "--no-report", "--stall-threshold", threshold,
                 "--json", str(summary))  # fmt: skip
        assert r.exit_code == 0, r.output
        d = json.loads(summary.read_text())["diagnosis"]
        assert d["stalls"]["stalls"] == stalls and d["verdict"]["primary"] == "commit"
    _one_line_error(
        _run("analyze", str(capture), "--no-report", "--stall-threshold", "soon"),
        ExitStatus.USAGE,
        "soon",
    )


def test_capture_limits_lead_the_diagnosis(tmp_path: Path) -> None:
    """-s 256 hid the NFSv4.1 WRITEs' stable_how: the verdict says so, and the
    snaplen finding comes before every cause."""
    cut = SAMPLE.parent / "v41-tcp-nfsrs-w1m-d0-l0.s256.pcap"
    summary = tmp_path / "s.json"
    r = _run("analyze", str(cut), "--no-report", "--json", str(summary))
    assert r.exit_code == 0, r.output
    lines = _diagnosis_lines(r.stdout)
    assert lines[0].endswith(
        "(limited: the snaplen cut 2 WRITE calls before their stable_how or count)"
    )
    assert "frames were cut by the snaplen to 256 bytes" in lines[1]
    assert "not captured: stable_how of 2 WRITEs, the count of 2 WRITEs" in lines[1]
    # a snaplen that reads the NFSv4.1 WRITE's stable_how after SEQUENCE and PUTFH
    assert lines[1].endswith("capture again with -s 272 to read them")
    findings = json.loads(summary.read_text())["diagnosis"]["findings"]
    assert findings[1]["kind"] == "snaplen_truncation" and findings[1]["limits_conclusions"]


def test_rank_limits_then_time_lost_then_severity() -> None:
    f = [
        Finding("a", "a", "problem", time_lost_ns=5),
        Finding("b", "b", "info", limits_conclusions=True),
        Finding("c", "c", "info", time_lost_ns=9),
        Finding("d", "d", "info", time_lost_ns=5),
        Finding("e", "e", "warning"),
    ]
    assert [x.kind for x in rank(f)] == ["b", "c", "a", "d", "e"]


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


def _entry_point(*args: str, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    """The console entry point (nfstrace.cli.main) in its own process, as users run it."""
    code = "import sys; from nfstrace.cli import main; sys.argv[1:] = sys.argv[2:]; main()"
    return subprocess.run(
        [sys.executable, "-c", code, "nfstrace", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )


def test_entry_point_keeps_exit_status_and_output(tmp_path: Path) -> None:
    # main() ends with os._exit: the output must still be flushed, the status kept.
    done = _entry_point("analyze", str(SAMPLE), "--no-report", "--full")
    assert done.returncode == 0, done.stderr
    assert "16 transactions (32 RPC messages)" in done.stdout
    assert "Workload" in done.stdout  # the last section: nothing lost at exit
    missing = _entry_point("analyze", str(tmp_path / "absent.pcap"))
    assert missing.returncode == ExitStatus.UNREADABLE
    assert missing.stderr.startswith("nfstrace: error: ") and "Traceback" not in missing.stderr
    usage = _entry_point("analyze", str(SAMPLE), "--no-such-option")
    assert usage.returncode == 2 and "Traceback" not in usage.stderr


def test_entry_point_reader_gone_is_not_a_traceback() -> None:
    # `nfstrace analyze x.pcap | head -1`: the reader closes the pipe early.
    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    with os.fdopen(write_fd, "w") as closed_pipe:
        done = _entry_point("analyze", str(SAMPLE), "--no-report", stdout=closed_pipe)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr


def test_standard_input_and_a_pipe_are_read(tmp_path: Path, monkeypatch) -> None:
    """`tcpdump -w - | nfstrace analyze -` and `nfstrace analyze <(...)` (issue 20,
    item 10): once refused as "not seekable"; read through a temporary copy that
    is gone afterwards, named as given, the default report in the current
    directory."""
    import tempfile
    import threading

    monkeypatch.chdir(tmp_path)
    spool = tmp_path / "spool"
    spool.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spool))
    data = SAMPLE.read_bytes()
    r = runner.invoke(app, ["analyze", "-", "-q", "--json", "s.json"], input=data)
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("nfstrace -\n")
    assert "16 transactions (32 RPC messages): 16 answered" in r.stdout
    assert (tmp_path / "stdin.report.html").stat().st_size > 500_000
    assert json.loads((tmp_path / "s.json").read_text())["captures"][0]["path"] == "-"
    fifo = tmp_path / "capture.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(data))
    writer.start()
    r = runner.invoke(app, ["analyze", str(fifo), "-q", "--no-report"])
    writer.join()
    assert r.exit_code == 0, r.output
    assert "16 transactions (32 RPC messages): 16 answered" in r.stdout
    assert list(spool.iterdir()) == []  # the temporary copies are gone
    r = runner.invoke(app, ["analyze", "-", "-q", "--no-report"], input=b"not a capture")
    assert r.exit_code == ExitStatus.UNREADABLE
    assert r.stderr.strip() == "nfstrace: error: not a pcap or pcapng capture file (-)"


def test_help_has_examples_and_plain_value_names() -> None:
    """--help (issue 18): examples, value names (FILE, ADDRESS, DURATION) instead
    of <bool>/<list[str]>, the extras a parser needs, shell completion offered."""
    r = _run("analyze", "--help")
    assert r.exit_code == 0, r.output
    assert "Examples:" in r.stdout and "nfstrace analyze capture.pcap" in r.stdout
    ours = [line for line in r.stdout.splitlines() if "--" in line and "--help" not in line]
    assert ours and not [line for line in ours if "<" in line.split("--", 1)[1][:40]], ours
    for name in ("FILE", "ADDRESS", "PORT", "DURATION", "RATE", "SIZE", "CHANGE"):
        assert name in r.stdout, name
    # (the words, wherever rich wraps the help's lines and boxes)
    assert "nfstrace[pyshark]" in "".join(r.stdout.replace("│", "").split())
    root = _run("--help")
    assert "--install-completion" in root.stdout


def test_a_capture_as_first_argument_means_analyze(tmp_path: Path) -> None:
    """`nfstrace x.pcap` is `nfstrace analyze x.pcap` (issue 34, item 9): a
    path that exists, ``-`` or a capture's suffix; anything else stays an
    unknown command, and the commands keep their names."""
    r = _run(str(SAMPLE), "--no-report", "--quiet")
    assert r.exit_code == 0, r.output
    assert r.stdout == _run("analyze", str(SAMPLE), "--no-report", "--quiet").stdout
    assert "16 transactions (32 RPC messages): 16 answered" in r.stdout
    r = runner.invoke(app, ["-", "--no-report", "--quiet"], input=SAMPLE.read_bytes())
    assert r.exit_code == 0, r.output  # standard input
    assert r.stdout.startswith("nfstrace -\n")
    missing = _run(str(tmp_path / "absent.pcap.gz"))
    _one_line_error(missing, ExitStatus.UNREADABLE, "no such file")
    typo = _run("analyse", str(SAMPLE))
    assert typo.exit_code == 2 and "No such command" in typo.output
    assert _run("model", str(SAMPLE), "--quiet").exit_code == 0
    via_main = _entry_point(str(SAMPLE), "--no-report")
    assert via_main.returncode == 0 and "Diagnosis" in via_main.stdout
