"""Outputs never replace the user's input and are written whole or not at all
(issue 20, items 1 and 2): the refusals run before the capture is read; a
failure or a signal part-way leaves the previous file and no temporary one."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from nfstrace.cli import app
from nfstrace.errors import ExitStatus, UsageError
from nfstrace.reports.files import TEMP_SUFFIX, check_outputs, write_atomically

SAMPLE = Path(__file__).resolve().parent.parent / "sample-pcaps" / "v3-tcp-nfscp-w1m-d0-l0.pcap"
runner = CliRunner()


@pytest.fixture
def capture(tmp_path: Path) -> Path:
    path = tmp_path / "x.pcap"
    shutil.copyfile(SAMPLE, path)
    return path


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(TEMP_SUFFIX))


@pytest.mark.parametrize(
    ("command", "option"),
    [
        ("analyze", "-o"),
        ("analyze", "--json"),
        ("analyze", "--csv"),
        ("analyze", "--parquet"),
        ("model", "--json"),
    ],
)
@pytest.mark.parametrize("how", ["same path", "symlink", "hard link", "relative"])
def test_output_over_the_input_is_refused(
    capture: Path, command: str, option: str, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = capture.read_bytes()
    target = str(capture)
    if how == "symlink":
        (capture.parent / "link.pcap").symlink_to(capture.name)
        target = str(capture.parent / "link.pcap")
    elif how == "hard link":
        os.link(capture, capture.parent / "hard.pcap")
        target = str(capture.parent / "hard.pcap")
    elif how == "relative":
        monkeypatch.chdir(capture.parent)
        target = f"./sub/../{capture.name}"
        (capture.parent / "sub").mkdir()
    r = runner.invoke(app, [command, str(capture), option, target, "-q"])
    assert r.exit_code == ExitStatus.USAGE, r.output
    assert "is the input capture" in r.stderr and "not overwritten" in r.stderr
    assert capture.read_bytes() == before
    assert _leftovers(capture.parent) == []


def test_refused_before_the_capture_is_read(tmp_path: Path) -> None:
    """A file that is no capture at all: the usage error (2), not 'unreadable' (3),
    shows the check came first."""
    junk = tmp_path / "notes.txt"
    junk.write_text("not a capture\n")
    r = runner.invoke(app, ["analyze", str(junk), "--json", str(junk)])
    assert r.exit_code == ExitStatus.USAGE, r.output
    assert junk.read_text() == "not a capture\n"


def test_output_over_another_input_or_output_is_refused(capture: Path, tmp_path: Path) -> None:
    second = tmp_path / "y.pcap"
    shutil.copyfile(SAMPLE, second)
    r = runner.invoke(app, ["analyze", str(capture), str(second), "--csv", str(second)])
    assert r.exit_code == ExitStatus.USAGE and "is the input capture" in r.stderr
    out = tmp_path / "out"
    r = runner.invoke(app, ["analyze", str(capture), "--json", str(out), "--csv", str(out)])
    assert r.exit_code == ExitStatus.USAGE
    assert "--json and --csv name the same file" in r.stderr and not out.exists()
    # the default report beside the first capture is the second capture
    report = tmp_path / "x.pcap.report.html"
    shutil.copyfile(SAMPLE, report)
    r = runner.invoke(app, ["analyze", str(capture), str(report)])
    assert r.exit_code == ExitStatus.USAGE and "the report" in r.stderr
    assert report.read_bytes() == SAMPLE.read_bytes()


def test_check_outputs_accepts_distinct_files(capture: Path, tmp_path: Path) -> None:
    check_outputs([capture], {"-o": tmp_path / "r.html", "--json": tmp_path / "s.json"})
    check_outputs([capture], {"-o": None, "--json": None})
    with pytest.raises(UsageError):
        check_outputs([capture], {"--json": capture})


def test_failure_part_way_leaves_the_old_file(tmp_path: Path) -> None:
    """A full disk in the middle of writing: the previous file stays as it was,
    no temporary file is left, the error reaches the caller."""
    target = tmp_path / "report.html"
    target.write_text("the previous report")

    def fill_the_disk(temp: Path) -> None:
        temp.write_text("half a rep")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        write_atomically(target, fill_the_disk)
    assert target.read_text() == "the previous report"
    assert _leftovers(tmp_path) == []


def test_modes_new_and_replaced(tmp_path: Path) -> None:
    """A new file gets 0666 less the umask (not mkstemp's 0600); a replaced one
    keeps its mode."""
    umask = os.umask(0o022)
    try:
        new = tmp_path / "new.json"
        write_atomically(new, lambda t: t.write_text("{}"))
        assert stat.S_IMODE(new.stat().st_mode) == 0o644
        kept = tmp_path / "kept.json"
        kept.write_text("old")
        kept.chmod(0o640)
        write_atomically(kept, lambda t: t.write_text("new"))
        assert kept.read_text() == "new" and stat.S_IMODE(kept.stat().st_mode) == 0o640
    finally:
        os.umask(umask)


def test_unwritable_directory_is_an_output_error(capture: Path, tmp_path: Path) -> None:
    r = runner.invoke(app, ["analyze", str(capture), "--json", str(tmp_path / "no" / "s.json")])
    assert r.exit_code == ExitStatus.OUTPUT, r.output
    assert r.stderr.startswith("nfstrace: error: cannot write")


# A run whose report takes long to render: the signal arrives while it renders.
SLOW_RENDER = """
import pathlib, sys, time
marker = pathlib.Path(sys.argv[1])
import nfstrace.reports.html as html
render = html.render_report
def slow(*args, **kwargs):
    text = render(*args, **kwargs)
    marker.write_text("rendering")
    time.sleep(60)
    return text
html.render_report = slow
from nfstrace.cli import main
sys.argv = ["nfstrace", *sys.argv[2:]]
main()
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_signal_while_rendering_leaves_the_previous_report(
    capture: Path, tmp_path: Path, sig: signal.Signals
) -> None:
    """Ctrl-C (SIGINT, also for a background job that started with it ignored),
    SIGTERM, SIGHUP: exit 128 + the signal, the previous report untouched, no
    temporary file."""
    script = tmp_path / "slow_render.py"
    script.write_text(SLOW_RENDER)
    marker = tmp_path / "marker"
    report = tmp_path / "r.html"
    report.write_text("the previous report")
    args = ["analyze", "-q", str(capture), "-o", str(report)]
    proc = subprocess.Popen(
        [sys.executable, str(script), str(marker), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        # as a shell starts a background job: SIGINT ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.05)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err
    assert err.decode().strip().startswith(("nfstrace: interrupted", "nfstrace: terminated by"))
    assert report.read_text() == "the previous report"
    assert _leftovers(tmp_path) == []


# ---- text from the capture or the user (issue 20, item 8) ----------------------------

NASTY = '=HYPERLINK("http://x")\x1b[31m\x07\x00'


def _lookup_capture(path: Path) -> Path:
    try:
        from crafted import make_crafted as mc
    except ImportError:  # tests/ not on sys.path: import as a package
        from tests.crafted import make_crafted as mc
    cap = mc.Capture()
    for i, name in enumerate((NASTY, "-2+3", "@SUM(A1)", "plain.txt")):
        call = mc.rpc_call(0x700 + i, mc.LOOKUP, mc.fhandle(1) + mc.opaque(name.encode()))
        cap.add(mc.eth(mc.udp_pkt(mc.CLIENT, mc.SERVER, 800, mc.NFS_PORT, call)))
        reply = mc.lookup_reply(0x700 + i)
        cap.add(mc.eth(mc.udp_pkt(mc.SERVER, mc.CLIENT, mc.NFS_PORT, 800, reply)))
    return cap.write(path)


def test_csv_neutralises_formulas_and_control_characters(tmp_path: Path) -> None:
    """OWASP's rule: a cell starting with = + - @ gets a leading quote; ESC, BEL,
    NUL as \\xNN.  Parquet keeps the names exact."""
    capture = _lookup_capture(tmp_path / "names.pcap")
    csv, parquet = tmp_path / "t.csv", tmp_path / "t.parquet"
    r = runner.invoke(
        app, ["analyze", str(capture), "-q", "--no-report", "--csv", str(csv),
              "--parquet", str(parquet)],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    raw = csv.read_bytes()
    assert not any(c in raw for c in (b"\x1b", b"\x07", b"\x00"))
    names = pd.read_csv(csv)["name"].tolist()
    assert '\'=HYPERLINK("http://x")\\x1b[31m\\x07\\x00' in names
    assert "'-2+3" in names and "'@SUM(A1)" in names and "plain.txt" in names
    exact = pd.read_parquet(parquet)["name"].tolist()
    assert NASTY in exact and "-2+3" in exact


def test_terminal_escapes_control_characters_of_a_file_name(tmp_path: Path) -> None:
    capture = tmp_path / "a\x1b[2Jb.pcap"
    shutil.copyfile(SAMPLE, capture)
    r = runner.invoke(app, ["analyze", str(capture), "-q", "--no-report"])
    assert r.exit_code == 0, r.output
    assert "\x1b" not in r.stdout and "a\\x1b[2Jb.pcap" in r.stdout
    r = runner.invoke(app, ["analyze", str(tmp_path / "gone\x1b[2J.pcap")])
    assert r.exit_code == ExitStatus.UNREADABLE
    assert "\x1b" not in r.stderr and "gone\\x1b[2J.pcap" in r.stderr


def test_a_trace_shows_itself_in_a_line_and_in_jupyter(tmp_path: Path) -> None:
    """repr(trace) was 25,656 characters of nested tables (issue 18): now one
    line with the verdict; Jupyter gets a small table (files, verdict, findings,
    budget), escaped."""
    import nfstrace

    hostile = tmp_path / "<b>x\x1b[31m.pcap"
    shutil.copy(SAMPLE.parent / "causes" / "v3-tcp-nfscp-w64k-d10-l0.pcap", hostile)
    t = nfstrace.load(hostile)
    line = repr(t)
    assert line.startswith("<Trace <b>x\\x1b[31m.pcap: 1,120 frames, 31 transactions, NFSv3 over")
    assert "round_trip: the writes waited on the network round trip" in line
    assert "\n" not in line and len(line) < 300
    page = t._repr_html_()
    assert "&lt;b&gt;x\\x1b[31m.pcap" in page and "<b>" not in page
    assert "round trip 75%" in page.replace("round_trip", "round trip")
    assert page.count("<tr>") == 3 + min(5, len(t.diagnosis.findings)) + 1  # + one pair


def test_markdown_for_a_ticket(tmp_path: Path) -> None:
    """--markdown (issue 18): the verdict, the findings, the budget and the
    busiest operations as Markdown, written whole like every output; text from
    the capture cannot make markup (a file name with ``*``, ``|`` or ``<``)."""
    from nfstrace.reports.markdown import md

    out = tmp_path / "ticket.md"
    capture = SAMPLE.parent / "causes" / "v41-tcp-nfsrs-w1m-pause200ms-d0-l0.pcap"
    r = CliRunner().invoke(app, ["analyze", str(capture), "--no-report", "--markdown", str(out)])
    assert r.exit_code == 0, r.output
    text = out.read_text(encoding="utf-8")
    assert text.startswith("## nfstrace: v41-tcp-nfsrs-w1m-pause200ms-d0-l0.pcap\n")
    # (its first COMMIT took 617 ms: the flushes, 51%, outweigh the pauses, 47%)
    assert "**Verdict (`commit`):** COMMITs (the server flushing to disk) held the writes" in text
    budget = text.split("### Time budget", 1)[1].split("\n\n")[1].splitlines()
    assert budget[0] == (
        "| client → server | write activity s | Mbit/s | transfer | round trip | server | commit "
        "| client idle |"
    )
    assert budget[2].endswith("| 51% | 47% |")
    assert "| nfs LAYOUTGET | 8 |" in text and "LAYOUTUNAVAILABLE ×8" in text
    assert md("a|b *x* <i>\x1b") == "a\\|b \\*x\\* &lt;i&gt;\\\\x1b"
    assert not list(tmp_path.glob(".*part*"))


def test_readable_transactions_for_jupyter() -> None:
    """Times as Timestamps/Timedeltas and status names beside codes (issue 18);
    the exact integer columns kept."""
    import nfstrace

    t = nfstrace.load(SAMPLE.parent / "causes" / "v3-tcp-nfsrs-w1m-d0-l0.pcap")
    r = t.readable()
    tx = t.transactions
    assert len(r) == len(tx) and set(tx.columns) <= set(r.columns)
    lookup = r[(r["op"] == "LOOKUP") & (r["status"] == 2)].iloc[0]
    assert lookup["status_name"] == "NFS3ERR_NOENT"
    assert (r.loc[r["program"] != "nfs", "status_name"] == "").all()
    first = tx.iloc[0]
    assert r["t_call"].iloc[0] == pd.Timestamp(int(first["t_call_ns"]), unit="ns", tz="UTC")
    assert r["latency"].iloc[0] == pd.Timedelta(int(first["latency_ns"]), unit="ns")


def test_report_and_summary_from_python(tmp_path: Path) -> None:
    """nfstrace.report(t, path) and nfstrace.summary(t) (issue 18): the same
    report and text the command writes."""
    import nfstrace

    t = nfstrace.load(SAMPLE)
    text = nfstrace.summary(t)
    assert text.startswith("nfstrace ") and "Diagnosis" in text and "\x1b" not in text
    assert "Transactional latency model" in nfstrace.summary(t, full=True)
    assert "Transactional latency model" not in text
    path = tmp_path / "x.html"
    nfstrace.report(t, path)
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_png_without_a_browser_is_a_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--png with no Chromium/Chrome found: a one-line error naming what to
    install, before anything is left behind."""
    monkeypatch.setenv("NFSTRACE_BROWSER", "no-such-browser-here")
    png = tmp_path / "t.png"
    r = CliRunner().invoke(app, ["analyze", str(SAMPLE), "--no-report", "--png", str(png)])
    assert r.exit_code == ExitStatus.OUTPUT, r.output
    assert "--png needs Chromium or Chrome" in r.stderr and "Traceback" not in r.output
    assert not png.exists() and not list(tmp_path.iterdir())


def test_counts_and_rates_read_as_english() -> None:
    """'1 call', not '1 calls'; a rate only over a time span, never 'nan MB/s'."""
    from nfstrace.analysis.overview import Throughput, throughput_text
    from nfstrace.text import count

    assert count(1, "call") == "1 call" and count(2_000, "call") == "2,000 calls"
    assert count(1, "reply", "replies") == "1 reply" and count(0, "reply", "replies") == "0 replies"
    one = Throughput(4096, 1, 0.0, float("nan"), float("nan"))
    assert throughput_text(one) == "0.004 MB in 1 RPC, all at one instant: no rate"
    two = Throughput(2_000_000, 2, 0.5, 4.0, 32.0)
    assert throughput_text(two) == "2.000 MB in 2 RPCs over 0.500 s: 4.00 MB/s (32.0 Mbit/s)"


def test_csv_gives_the_xid_in_hex_and_unknowns_empty(tmp_path: Path) -> None:
    """The CSV's xid also in hex (as the terminal, the report and Wireshark show
    it), and a reply without its call has empty offset/count/stable, as its other
    unknowns, not -1."""
    from crafted import make_crafted as mc

    cap = mc.Capture()
    cap.add(mc.eth(mc.udp_pkt(mc.SERVER, mc.CLIENT, mc.NFS_PORT, 900, mc.getattr_reply(0xBEEF))))
    cap.add(mc.eth(mc.udp_pkt(mc.CLIENT, mc.SERVER, 900, mc.NFS_PORT, mc.write_call(0x51, 8))))
    path = cap.write(tmp_path / "orphan.pcap")
    csv = tmp_path / "t.csv"
    r = CliRunner().invoke(app, ["analyze", str(path), "-q", "--no-report", "--csv", str(csv)])
    assert r.exit_code == 0, r.output
    table = pd.read_csv(csv, keep_default_na=False, dtype=str).set_index("xid_hex")
    assert sorted(table.index) == ["0x00000051", "0x0000beef"]
    assert table.loc["0x0000beef", "xid"] == str(0xBEEF)
    orphan = table.loc["0x0000beef"]
    for column in ("offset", "count", "stable", "slot", "seqid", "minor", "t_call_ns"):
        assert orphan[column] == "", column
    write = table.loc["0x00000051"]
    assert (write["offset"], write["count"]) == ("0", "8")


def test_csv_has_no_minus_one_for_unknown(tmp_path: Path) -> None:
    """Issue 34, item 8: a real capture's portmap and MOUNT rows (no NFS status,
    no reply count) and its NULL calls have those cells empty: no -1 anywhere in
    the CSV, and a null, not -1, in the Parquet file."""
    capture = SAMPLE.parent / "causes" / "v3-tcp-nfscp-w64k-d10-l0.pcap"
    csv, parquet = tmp_path / "t.csv", tmp_path / "t.parquet"
    r = CliRunner().invoke(
        app,
        ["analyze", str(capture), "-q", "--no-report", "--csv", str(csv), "--parquet",
         str(parquet)],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    table = pd.read_csv(csv, keep_default_na=False, dtype=str)
    assert {"portmap", "mount"} <= set(table["program"])
    assert not table.isin(["-1"]).any().any(), table.columns[table.isin(["-1"]).any()].tolist()
    other = table[table["program"] != "nfs"]
    assert (other["status"] == "").all() and (other["reply_count"] == "").all()
    nfs = table[table["op"] == "WRITE"]
    assert (nfs["status"] == "0").all() and (nfs["reply_count"] == "65536").all()
    pq = pd.read_parquet(parquet)
    assert pq.loc[pq["program"].astype(str) != "nfs", "status"].isna().all()


# ---- every file read stays as it was (issue 30, items 1 and 2) ------------------------

OUTPUT_OPTIONS = ("-o", "--json", "--csv", "--parquet", "--markdown", "--png")


def _cli(args: list[str], **kwargs: object) -> subprocess.CompletedProcess:
    """The command line as a user runs it: its own process, its own stdin/stdout."""
    return subprocess.run(
        [sys.executable, "-c", "from nfstrace.cli import main; main()", *args],
        capture_output=True,
        timeout=300,
        **kwargs,
    )


def _sums(paths: list[Path]) -> dict[Path, str]:
    import hashlib

    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


@pytest.fixture
def rotated(tmp_path: Path) -> Path:
    """A directory of captures, one of them compressed."""
    import gzip

    caps = tmp_path / "caps"
    caps.mkdir()
    shutil.copyfile(SAMPLE, caps / "a.pcap")
    (caps / "b.pcap.gz").write_bytes(gzip.compress(SAMPLE.read_bytes()))
    return caps


@pytest.mark.parametrize("option", OUTPUT_OPTIONS)
def test_no_file_of_a_directory_is_overwritten(rotated: Path, option: str) -> None:
    """The directory's captures, named directly, through ``..`` or a symlink:
    refused before anything is read (exit 2), every capture byte for byte."""
    files = sorted(rotated.iterdir())
    before = _sums(files)
    link = rotated.parent / "link.pcap"
    link.symlink_to(rotated / "a.pcap")
    for target in (
        rotated / "a.pcap",
        rotated / ".." / rotated.name / "b.pcap.gz",
        link,
    ):
        r = runner.invoke(app, ["analyze", str(rotated), option, str(target), "-q"])
        assert r.exit_code == ExitStatus.USAGE, (target, r.output)
        assert "is the input capture" in r.stderr
    assert _sums(files) == before
    assert _leftovers(rotated) == []


@pytest.mark.parametrize("option", OUTPUT_OPTIONS)
def test_standard_input_file_is_not_overwritten(capture: Path, option: str) -> None:
    """``nfstrace analyze - -o s.pcap < s.pcap``: the file behind standard input
    is an input like any other."""
    before = _sums([capture])
    with open(capture, "rb") as stdin:
        r = _cli(["analyze", "-", option, str(capture), "-q"], stdin=stdin)
    assert r.returncode == ExitStatus.USAGE, r.stderr
    assert b"is the input capture standard input" in r.stderr
    assert _sums([capture]) == before


def test_standard_output_into_the_input_is_refused(capture: Path) -> None:
    """``nfstrace analyze x.pcap >> x.pcap`` would append the summary to the
    capture it reads (as ``cat x >> x`` refuses to)."""
    before = _sums([capture])
    with open(capture, "ab") as out:
        r = subprocess.run(
            [sys.executable, "-c", "from nfstrace.cli import main; main()", "analyze",
             str(capture), "--no-report", "-q"],
            stdout=out, stderr=subprocess.PIPE, timeout=300,
        )  # fmt: skip
    assert r.returncode == ExitStatus.USAGE, r.stderr
    assert b"standard output is the input capture" in r.stderr
    assert _sums([capture]) == before


def test_fifo_input_is_not_overwritten(capture: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    r = runner.invoke(app, ["analyze", str(fifo), "--json", str(fifo), "-q"])
    assert r.exit_code == ExitStatus.USAGE and "is the input capture" in r.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_outputs_into_a_fifo_a_device_and_standard_output(capture: Path, tmp_path: Path) -> None:
    """Special files are written into, never renamed over: a FIFO's reader gets
    the JSON and the FIFO stays; a symlink to a device (``/dev/null``) stays a
    symlink to a device; ``--json -`` is standard output, the summary then on
    standard error."""
    import json
    import threading

    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    null = tmp_path / "null"
    null.symlink_to("/dev/null")
    r = _cli(
        ["analyze", str(capture), "--json", str(fifo), "--csv", str(null), "--no-report", "-q"]
    )
    reader.join(60)
    assert r.returncode == 0, r.stderr
    assert json.loads(got[0])["diagnosis"]["verdict"]["primary"] == "none"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert null.is_symlink() and stat.S_ISCHR(os.stat(null).st_mode)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    r = _cli(["analyze", str(capture), "--json", "-", "--no-report", "-q"])
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["diagnosis"]["verdict"]["primary"] == "none"
    assert b"Diagnosis" in r.stderr
    assert _leftovers(tmp_path) == []


def test_symlink_to_an_output_file_keeps_the_link(capture: Path, tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real.name)
    r = runner.invoke(app, ["analyze", str(capture), "--json", str(link), "--no-report", "-q"])
    assert r.exit_code == 0, r.output
    assert link.is_symlink() and real.read_text().startswith("{")


def test_failure_part_way_writes_nothing_into_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader waiting
    try:

        def fail(temp: Path) -> None:
            temp.write_text("half")
            raise OSError(errno.ENOSPC, "No space left on device")

        with pytest.raises(OSError, match="No space left"):
            write_atomically(fifo, fail)
        assert os.read(fd, 100) == b""
    finally:
        os.close(fd)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


UNWRITABLE_OPTIONS = [
    ("analyze", "-o"),
    ("analyze", "--json"),
    ("analyze", "--csv"),
    ("analyze", "--parquet"),
    ("analyze", "--markdown"),
    ("analyze", "--png"),
    ("model", "--json"),
    ("compare", "-o"),
    ("compare", "--json"),
]


@pytest.mark.parametrize(("command", "option"), UNWRITABLE_OPTIONS)
@pytest.mark.parametrize("where", ["missing directory", "a directory"])
def test_unwritable_output_said_before_reading(
    tmp_path: Path, where: str, command: str, option: str
) -> None:
    """An output that cannot be written is said before the capture is read
    (issue 34, item 5: every output of every command): a file that is no
    capture at all gives the output error (5), not 'unreadable' (3)."""
    junk = tmp_path / "notes.txt"
    junk.write_text("not a capture\n")
    target = tmp_path / "no" / "r.out" if where == "missing directory" else tmp_path
    inputs = [str(junk)] * (2 if command == "compare" else 1)
    r = runner.invoke(app, [command, *inputs, option, str(target)])
    assert r.exit_code == ExitStatus.OUTPUT, r.output
    assert r.stderr.startswith(f"nfstrace: error: cannot write {option}")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("signum", "whole_group", "status"),
    [(signal.SIGINT, True, 130), (signal.SIGTERM, False, 143), (signal.SIGTERM, True, 143)],
)
def test_a_signal_while_the_browser_draws_leaves_nothing_behind(
    tmp_path: Path, signum: int, whole_group: bool, status: int
) -> None:
    """Ctrl-C (SIGINT to the terminal's whole process group) or SIGTERM while
    Chromium draws --png: exit 130/143, nothing left in $TMPDIR (its profile,
    its own org.chromium.* directories were; and "Directory not empty" made it
    exit 5), no PNG at the target (issue 30 item 9)."""
    from nfstrace.reports.png import browser

    assert browser(), "chromium is needed (installed in CI)"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    png = tmp_path / "plot.png"
    proc = subprocess.Popen(
        [sys.executable, "-m", "nfstrace.cli", "analyze", str(SAMPLE), "--quiet", "--no-report"]
        + ["--png", str(png)],
        env={**os.environ, "TMPDIR": str(tmp)},
        start_new_session=True,  # its own group, as a terminal's foreground job
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not any((d / "profile").exists() for d in tmp.glob("nfstrace-png-*")):
        assert time.monotonic() < deadline and proc.poll() is None, "the browser never started"
        time.sleep(0.02)
    time.sleep(0.3)  # the browser at work
    (os.killpg if whole_group else os.kill)(proc.pid, signum)
    assert proc.wait(timeout=60) == status, proc.stderr.read() if proc.stderr else ""
    time.sleep(0.5)  # anything still running would write now
    assert not list(tmp.iterdir())
    assert not png.exists()


HOSTILE_NAMES = ("a\x1b[31mb\x07\x00c", "report\u202eexe.csv", "x\u2066y\u2069")
RAW = (b"\x1b", b"\x07", b"\x00", "\u202e".encode(), "\u2066".encode(), "\u2069".encode())


def _written_names_capture(path: Path) -> Path:
    """Files looked up by these names, then written (so the report's files
    table shows them)."""
    import struct

    try:
        from crafted import make_crafted as mc
    except ImportError:  # tests/ not on sys.path: import as a package
        from tests.crafted import make_crafted as mc
    cap = mc.Capture()
    for i, name in enumerate(HOSTILE_NAMES):
        x = 0x700 + 2 * i
        call = mc.rpc_call(x, mc.LOOKUP, mc.fhandle(1) + mc.opaque(name.encode()))
        cap.add(mc.eth(mc.udp_pkt(mc.CLIENT, mc.SERVER, 800, mc.NFS_PORT, call)))
        cap.add(mc.eth(mc.udp_pkt(mc.SERVER, mc.CLIENT, mc.NFS_PORT, 800, mc.lookup_reply(x))))
        args = mc.fhandle(x + 1) + struct.pack(">Q", 0) + mc.u32(512, 2) + mc.opaque(b"z" * 512)
        write = mc.rpc_call(x + 1, mc.WRITE, args)
        cap.add(mc.eth(mc.udp_pkt(mc.CLIENT, mc.SERVER, 800, mc.NFS_PORT, write)))
        reply = mc.write_reply(x + 1, 512)
        cap.add(mc.eth(mc.udp_pkt(mc.SERVER, mc.CLIENT, mc.NFS_PORT, 800, reply)))
    return cap.write(path)


def test_report_and_csv_show_control_and_bidi_characters_inert(tmp_path: Path) -> None:
    """ESC/BEL/NUL and the bidi overrides and isolates of an NFS name reach
    neither the HTML report's cells nor the CSV raw: they read \\x1b, \\u202e
    (nfstrace.text.printable, one rule for the terminal, the page and the CSV);
    Parquet keeps the names exact (issue 30 item 9)."""
    capture = _written_names_capture(tmp_path / "names.pcap")
    page, csv, parquet = tmp_path / "r.html", tmp_path / "t.csv", tmp_path / "t.parquet"
    r = runner.invoke(
        app, ["analyze", str(capture), "-q", "-o", str(page), "--csv", str(csv),
              "--parquet", str(parquet)],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    html_bytes, csv_bytes = page.read_bytes(), csv.read_bytes()
    for raw in RAW:
        assert raw not in html_bytes and raw not in csv_bytes, raw
    text = html_bytes.decode()
    assert "a\\x1b[31mb\\x07\\x00c" in text and "report\\u202eexe.csv" in text
    names = pd.read_csv(csv)["name"].dropna().tolist()
    assert "report\\u202eexe.csv" in names and "x\\u2066y\\u2069" in names
    assert set(HOSTILE_NAMES) <= set(pd.read_parquet(parquet)["name"].dropna())


def test_png_without_a_browser_said_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--png with no browser to draw with: said before the capture is read."""
    monkeypatch.setenv("NFSTRACE_BROWSER", "no-such-browser-here")
    junk = tmp_path / "notes.txt"
    junk.write_text("not a capture\n")
    r = runner.invoke(app, ["analyze", str(junk), "--png", str(tmp_path / "t.png")])
    assert r.exit_code == ExitStatus.OUTPUT, r.output
    assert "--png needs Chromium or Chrome" in r.stderr
