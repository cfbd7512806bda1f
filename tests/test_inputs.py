"""What comes before the parse (issue 30 items 7 and 8): a directory of many
files or of odd entries, a device or an endless pipe as input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

import nfstrace
from nfstrace.errors import ExitStatus
from nfstrace.parsers import capture

SAMPLE = ROOT / "sample-pcaps" / "v3-tcp-nfscp-w1m-d0-l0.pcap"
NFSTRACE = [sys.executable, "-m", "nfstrace.cli"]


def _run(args: list[str], tmp: Path, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "TMPDIR": str(tmp)}
    return subprocess.run([*NFSTRACE, *args], capture_output=True, env=env, timeout=120, **kw)


def _small_captures(directory: Path, n: int) -> None:
    """n one-call captures, one after the other in time (rotated files)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import scaling

    directory.mkdir()
    for i in range(n):
        p = scaling.Pcap(directory / f"rotated-{i:05d}.pcap")
        xid, t = 0x50000000 + i, scaling.BASE_NS + i * 1_000_000
        call = scaling.udp(scaling.CLIENT, scaling.SERVER, 900, 2049, scaling.getattr_call(xid))
        reply = scaling.udp(scaling.SERVER, scaling.CLIENT, 2049, 900, scaling.getattr_reply(xid))
        p.add(t, scaling.ipv4(scaling.CLIENT, scaling.SERVER, 17, call, i))
        p.add(t + 300_000, scaling.ipv4(scaling.SERVER, scaling.CLIENT, 17, reply, i))
        p.close()


# ---- item 8: devices and endless pipes -------------------------------------------------


def test_a_device_or_an_endless_pipe_is_refused_before_it_is_copied(tmp_path: Path) -> None:
    """/dev/zero and ``yes |`` never end: their first bytes are checked before
    anything is copied (they were copied whole into $TMPDIR first), and nothing
    is left there."""
    r = _run(["analyze", "/dev/zero"], tmp_path)
    assert r.returncode == ExitStatus.UNREADABLE, r.stderr
    assert b"not a pcap or pcapng capture file (/dev/zero)" in r.stderr
    yes = subprocess.Popen(["yes"], stdout=subprocess.PIPE)
    try:
        r = _run(["analyze", "-"], tmp_path, stdin=yes.stdout)
    finally:
        yes.kill()
        yes.wait()
    assert r.returncode == ExitStatus.UNREADABLE, r.stderr
    assert b"not a pcap or pcapng capture file (-)" in r.stderr
    assert not list(tmp_path.iterdir())


def test_the_copy_of_a_pipe_stops_at_its_bound(tmp_path: Path) -> None:
    """ParseLimits.max_spool_bytes: past it the rest of the pipe is not read,
    a warning says where, and what was copied is analysed."""
    code = (
        "import nfstrace\n"
        "from nfstrace.config import ParseLimits\n"
        "from nfstrace.trace import AnalysisConfig\n"
        "t = nfstrace.load('-', AnalysisConfig(limits=ParseLimits(max_spool_bytes=200_000)))\n"
        "print(t.stats.frames); print(t.stats.warnings[0])\n"
    )
    with open(SAMPLE, "rb") as f:
        r = subprocess.run(
            [sys.executable, "-c", code],
            stdin=f,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "TMPDIR": str(tmp_path)},
        )
    assert r.returncode == 0, r.stderr
    frames, warning = r.stdout.splitlines()[:2]
    whole = nfstrace.load(SAMPLE).stats.frames
    assert 0 < int(frames) < whole
    assert "the copy of this pipe stopped at 200,000 bytes" in warning
    assert not list(tmp_path.iterdir())  # the copy removed


def test_the_spool_bound_leaves_room_on_the_disk(tmp_path: Path) -> None:
    free = os.statvfs(tmp_path)
    room = free.f_bavail * free.f_frsize - capture.SPOOL_RESERVE_BYTES
    assert capture.spool_bound(1 << 62, str(tmp_path)) == max(0, room)
    assert capture.spool_bound(1000, str(tmp_path)) == min(1000, max(0, room))


# ---- item 7: directories ---------------------------------------------------------------


def test_odd_entries_of_a_directory_are_skipped_with_a_warning(tmp_path: Path) -> None:
    """A symlink loop (was: internal error, exit 1) and a 10-byte stub that
    begins as a pcap (was: exit 3) no longer stop the directory: each is
    skipped with a warning naming it, and the capture beside them is analysed."""
    d = tmp_path / "caps"
    d.mkdir()
    (d / "a.pcap").write_bytes(SAMPLE.read_bytes())
    os.symlink("loop2", d / "loop1")
    os.symlink("loop1", d / "loop2")
    (d / "stub.pcap").write_bytes(b"\xd4\xc3\xb2\xa1\x02\x00\x04\x00\x00\x00")
    t = nfstrace.load(d)
    alone = nfstrace.load(SAMPLE)
    assert len(t.transactions) == len(alone.transactions)
    warnings = "\n".join(t.stats.warnings)
    assert f"{d / 'loop1'}: skipped: Too many levels of symbolic links" in warnings
    assert f"{d / 'stub.pcap'}: skipped: pcap file header cut short" in warnings
    r = _run(["analyze", str(d), "--quiet", "--no-report", "--parser", "native"], tmp_path)
    assert r.returncode == ExitStatus.DAMAGED, r.stderr
    assert b"Traceback" not in r.stderr


def test_many_files_are_opened_as_they_are_due(tmp_path: Path) -> None:
    """1,100 rotated files under a limit of 256 open files: each file is opened
    when its first frame is due and closed at its end (all were opened at once:
    beyond the limit an error naming no file, and 4 MB of buffer each)."""
    d = tmp_path / "rotated"
    _small_captures(d, 1100)
    code = (
        "import resource, sys, nfstrace\n"
        "from nfstrace.trace import AnalysisConfig\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))\n"
        f"t = nfstrace.load({str(d)!r}, AnalysisConfig(parser='native'))\n"
        "print(len(t.transactions), len(t.stats.files))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["1100", "1100"]


def test_too_many_open_files_names_the_file(tmp_path: Path) -> None:
    """When files overlap in time they must be open together: past the limit of
    open files the error names the file that could not be opened."""
    d = tmp_path / "same-time"
    d.mkdir()
    for i in range(300):
        (d / f"copy-{i:03d}.pcap").write_bytes(SAMPLE.read_bytes())
    code = (
        "import resource, nfstrace\n"
        "import sys\n"
        "from nfstrace.cli import main\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (200, 200))\n"
        f"sys.argv = ['nfstrace', 'analyze', {str(d)!r}, '--quiet', '--no-report',"
        f" '--parser', 'native', '--merge']\n"  # (copies: the same traffic, merged on purpose)
        "main()\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == ExitStatus.UNREADABLE, r.stderr[-2000:]
    line = r.stderr.strip().splitlines()[-1]
    assert "Too many open files" in line and f"({d}/copy-" in line, line
