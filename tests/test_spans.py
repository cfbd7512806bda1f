"""Files of one capture, or captures of different traffic (issue 34, item 6):
``nfstrace analyze sample-pcaps/causes/`` merged 33 separate runs into one
("the capture missed traffic for 10.2 s").  Several files are analysed as one
only when they are pieces of one capture (``parsers.spans``); otherwise the
command says how many captures it found and stops before the analysis, unless
``--merge``."""

from __future__ import annotations

import gzip
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import SAMPLES
from typer.testing import CliRunner

from nfstrace.cli import app
from nfstrace.errors import ExitStatus
from nfstrace.parsers import spans as sp
from nfstrace.parsers.capture import CaptureInfo, read_frames

runner = CliRunner()
CAUSES = SAMPLES / "causes"
COPY = CAUSES / "v3-tcp-nfscp-w64k-d2-l0.5.pcap"  # 997 frames
A, B, C = (bytes([10, 0, 0, i]) for i in (1, 2, 3))


def pieces(tmp_path: Path, capture: Path, frames: int, fmt: str = "pcap") -> Path:
    """``capture`` cut into pieces of ``frames`` frames by editcap, in a directory."""
    out = tmp_path / "pieces"
    out.mkdir()
    editcap = shutil.which("editcap")
    if editcap is None:
        pytest.fail("editcap is required (apt-get install tshark)")
    subprocess.run(
        [editcap, "-F", fmt, "-c", str(frames), str(capture), str(out / f"piece.{fmt}")],
        check=True,
    )
    return out


def exact(path: Path) -> tuple[int, int]:
    times = [f[0] for f in read_frames(str(path), 0, CaptureInfo(str(path)))]
    return min(times), max(times)


def test_separate_runs_are_told_apart_before_the_analysis() -> None:
    r = runner.invoke(app, ["analyze", str(CAUSES), "--no-report"])
    assert r.exit_code == ExitStatus.USAGE, r.output
    assert r.stderr.startswith("nfstrace: error: 33 captures of different traffic in 33 files")
    assert "give --merge to analyse them as one" in r.stderr and r.stdout == ""
    merged = runner.invoke(app, ["analyze", str(CAUSES), "--no-report", "--merge", "-q"])
    assert merged.exit_code in (ExitStatus.OK, ExitStatus.DAMAGED), merged.output
    assert "36,561 frames" in merged.stdout


def test_a_client_and_a_server_capture_of_one_run_are_two(tmp_path: Path) -> None:
    """The same traffic captured twice overlaps in time: not pieces of one."""
    both = tmp_path / "run"
    both.mkdir()
    for name in (COPY.name, COPY.name.replace(".pcap", ".server-side.pcap")):
        shutil.copy(CAUSES / name, both / name)
    for command in (["analyze", str(both), "--no-report"], ["model", str(both)]):
        r = runner.invoke(app, command)
        assert r.exit_code == ExitStatus.USAGE and "2 captures of different traffic" in r.stderr
    r = runner.invoke(app, ["compare", str(both), str(COPY), "--no-report"])
    assert r.exit_code == ExitStatus.USAGE and "2 captures of different traffic" in r.stderr


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
@pytest.mark.parametrize("packed", [False, True], ids=["plain", "gzip"])
def test_pieces_of_one_capture_are_one(
    tmp_path: Path, fmt: str, packed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """editcap's pieces (as tcpdump -C cuts them): one capture, analysed as the
    whole was; each piece's span read from its first frames and its last bytes
    (small limits: the tail is read as the readers read past damage) is the
    span its every frame gives."""
    directory = pieces(tmp_path, COPY, 250, fmt)
    if packed:
        for p in list(directory.iterdir()):
            p.with_name(p.name + ".gz").write_bytes(gzip.compress(p.read_bytes()))
            p.unlink()
    monkeypatch.setattr(sp, "HEAD_FRAMES", 20)
    monkeypatch.setattr(sp, "TAIL_BYTES", 30_000)

    def whole(path: str) -> list:
        pytest.fail(f"{path}: its last bytes were not read alone")

    monkeypatch.setattr(sp, "_whole", whole)
    files = sorted(str(p) for p in directory.iterdir())
    assert len(files) == 4
    found = sp.spans(files)
    for f in found:
        assert (f.first_ns, f.last_ns) == exact(Path(f.path)) and f.pairs
    assert [[f.path for f in g] for g in sp.captures(found)] == [files]
    r = runner.invoke(app, ["analyze", str(directory), "--no-report", "-q"])
    whole = runner.invoke(app, ["analyze", str(COPY), "--no-report", "-q"])
    assert r.exit_code == whole.exit_code == 0, r.output
    # the same analysis but for the header, which names the files
    assert r.stdout.split("\n", 1)[1] == whole.stdout.split("\n", 1)[1]


def span(first_s: float, last_s: float, *pairs: tuple[bytes, bytes]) -> sp.FileSpan:
    return sp.FileSpan(f"{first_s}.pcap", int(first_s * 1e9), int(last_s * 1e9), frozenset(pairs))


@pytest.mark.parametrize(
    ("files", "groups"),
    [
        ([span(0, 10, (A, B)), span(10.001, 20, (A, B))], 1),  # tcpdump -C pieces
        ([span(0, 10, (A, B)), span(10.5, 20, (A, C), (A, B))], 1),  # a pair in common
        ([span(0, 10, (A, B)), span(10.001, 20, (A, C))], 2),  # no pair in common
        ([span(0, 1, (A, B)), span(3.4, 4, (A, B))], 2),  # 2.4 s apart: separate runs
        ([span(0, 100, (A, B)), span(105, 200, (A, B))], 1),  # 5 s in 100 s: a quiet spell
        ([span(0, 10, (A, B)), span(0.002, 10.1, (A, B))], 2),  # the same traffic twice
        ([span(0, 10, (A, B)), sp.FileSpan("empty.pcap", -1, -1, frozenset())], 1),
    ],
)
def test_what_makes_one_capture(files: list[sp.FileSpan], groups: int) -> None:
    assert len(sp.captures(files)) == groups
    assert sorted(f.path for g in sp.captures(files) for f in g) == sorted(f.path for f in files)
