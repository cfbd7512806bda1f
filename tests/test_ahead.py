"""The Rust parse begun while the analysis imports (nfstrace/parsers/ahead.py):
taken by the load only for exactly the files and settings it parses, with
what a parse of its own gives; dropped otherwise; never for what Python
reads (compressed files, pipes) or a plan of several partitions."""

from __future__ import annotations

import dataclasses
import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import SAMPLES

from nfstrace.config import ParseLimits
from nfstrace.errors import CaptureError
from nfstrace.parsers import ahead, backends, partitioning
from nfstrace.trace import AnalysisConfig, load

SAMPLE = SAMPLES / "v3-tcp-nfscp-w64k-d2-l0.5.pcap"


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The files of every call of the Rust parse, by the ahead thread or the load."""
    native = backends.native_extension()
    seen: list[list[str]] = []
    real = native.parse

    def counted(paths, readers, settings, progress):  # type: ignore[no-untyped-def]
        seen.append(list(paths))
        return real(paths, readers, settings, progress)

    monkeypatch.setattr(native, "parse", counted)
    yield seen
    for left in ahead._started:  # (begun, not taken: the load failed before its parse)
        assert left.thread is not None
        left.thread.join()
    ahead._started.clear()


def _same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True))


def _copy(tmp_path: Path, name: str = "x.pcap") -> str:
    out = tmp_path / name
    shutil.copyfile(SAMPLE, out)
    return str(out)


def test_the_load_takes_the_parse_begun_ahead(calls: list[list[str]], tmp_path: Path) -> None:
    path = _copy(tmp_path)
    limits = ParseLimits()
    assert ahead.start([path], limits, "native", 1, 0)
    got = load(path, AnalysisConfig(limits=limits))
    assert calls == [[path]]  # parsed once: by the thread
    assert not ahead._started
    alone = load(path, AnalysisConfig(limits=limits))
    assert len(calls) == 2
    _same(got.transactions, alone.transactions)
    _same(got.messages, alone.messages)
    _same(got.events, alone.events)
    assert got.stats == alone.stats
    assert [f.kind for f in got.diagnosis.findings] == [f.kind for f in alone.diagnosis.findings]


def test_other_settings_or_a_changed_file_are_parsed_again(
    calls: list[list[str]], tmp_path: Path
) -> None:
    path = _copy(tmp_path)
    limits = ParseLimits()
    other = dataclasses.replace(limits, max_messages=limits.max_messages + 1)
    assert ahead.start([path], other, "native", 1, 0)
    load(path, AnalysisConfig(limits=limits))
    assert calls == [[path], [path]]  # the one begun ahead is not the load's
    calls.clear()
    assert ahead.start([path], limits, "native", 1, 0)
    ahead._started[0].thread.join()  # type: ignore[union-attr]
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # written again
    load(path, AnalysisConfig(limits=limits))
    assert calls == [[path], [path]]


def test_a_damaged_capture_warns_alike(calls: list[list[str]], tmp_path: Path) -> None:
    bad = tmp_path / "cut.pcap"
    bad.write_bytes(SAMPLE.read_bytes()[:300_000] + b"\xff" * 40)  # then a record of 4 GB
    alone = load(str(bad))
    assert alone.stats.warnings
    calls.clear()
    limits = ParseLimits()
    assert ahead.start([str(bad)], limits, "native", 1, 0)
    got = load(str(bad), AnalysisConfig(limits=limits))
    assert len(calls) == 1
    assert got.stats.warnings == alone.stats.warnings
    _same(got.transactions, alone.transactions)


def test_a_file_that_is_no_capture_is_refused_alike(calls: list[list[str]], tmp_path: Path) -> None:
    bad = tmp_path / "notes.pcap"
    bad.write_text("not a capture\n" * 100)
    with pytest.raises(CaptureError) as alone:
        load(str(bad))
    limits = ParseLimits()
    ahead.start([str(bad)], limits, "native", 1, 0)
    with pytest.raises(CaptureError) as taken:
        load(str(bad), AnalysisConfig(limits=limits))
    assert str(taken.value) == str(alone.value)


def test_not_begun_for_what_python_reads_or_several_workers(
    calls: list[list[str]], tmp_path: Path
) -> None:
    path = _copy(tmp_path)
    packed = tmp_path / "x.pcap.gz"
    packed.write_bytes(gzip.compress(SAMPLE.read_bytes()))
    limits = ParseLimits()
    assert not ahead.start([str(packed)], limits, "native", 1, 0)  # Python unpacks it
    assert not ahead.start(["-"], limits, "native", 1, 0)  # standard input: spooled
    assert not ahead.start([str(tmp_path)], limits, "native", 1, 0)  # a directory
    assert not ahead.start([path], limits, "native", 2, 0)  # worker processes
    assert not ahead.start([path], limits, "pyshark", 1, 0)
    many = [_copy(tmp_path, f"part{i}.pcap") for i in range(ahead.MAX_FILES + 1)]
    assert not ahead.start(many, limits, "native", 1, 0)  # (their files open at once)
    assert not ahead._started and not calls


def test_a_plan_of_several_partitions_parses_its_first_ahead(
    calls: list[list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A capture too big for one partition's parse in the memory available:
    planned as the load plans it, its first partition parsed ahead and taken
    by the load, the others parsed by the load; the same transactions as one
    parse."""
    import threading

    path = _copy(tmp_path)
    monkeypatch.setattr(partitioning, "MIN_ESTIMATED_BYTES", 0)
    frames = partitioning.estimated_frames([path])
    room = frames * partitioning.PARSE_BYTES_PER_FRAME / partitioning.PARTITION_MEMORY_SHARE
    monkeypatch.setattr(partitioning, "memory_available", lambda: room / 3)
    native = backends.native_extension()
    counted = native.parse
    by: list[tuple[str, int, int]] = []

    def which(paths, readers, settings, progress):  # type: ignore[no-untyped-def]
        by.append((threading.current_thread().name, settings["partition"], settings["partitions"]))
        return counted(paths, readers, settings, progress)

    monkeypatch.setattr(native, "parse", which)
    limits = ParseLimits()
    assert ahead.start([path], limits, "native", 1, 0)
    got = load(path, AnalysisConfig(limits=limits))
    assert calls == [[path]] * 3  # three partitions, each parsed once
    assert by == [("nfstrace-parse-ahead", 0, 3), ("MainThread", 1, 3), ("MainThread", 2, 3)]
    assert not ahead._started
    by.clear()  # partitions asked for (--partitions 2): the same
    assert ahead.start([path], limits, "native", 1, 2)
    asked = load(path, AnalysisConfig(limits=limits, partitions=2))
    assert by == [("nfstrace-parse-ahead", 0, 2), ("MainThread", 1, 2)]
    _same(asked.transactions, got.transactions)
    monkeypatch.setattr(partitioning, "memory_available", lambda: room * 2)
    alone = load(path, AnalysisConfig(limits=limits))
    _same(got.transactions, alone.transactions)


def test_the_command_line_parses_ahead_with_the_loads_limits(tmp_path: Path) -> None:
    """``nfstrace analyze`` begins the parse on its thread (before pandas and
    the analysis are imported) and its load takes it: one parse."""
    code = (
        "import threading\n"
        "from nfstrace.parsers import ahead, backends\n"
        "native = backends.native_extension()\n"
        "real, seen = native.parse, []\n"
        "def parse(*a):\n"
        "    seen.append(threading.current_thread().name)\n"
        "    return real(*a)\n"
        "native.parse = parse\n"
        "from nfstrace.cli import app\n"
        f"app(['analyze', {str(SAMPLE)!r}, '--no-report', '--quiet'], standalone_mode=False)\n"
        "print('parses', seen)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "parses ['nfstrace-parse-ahead']"


def test_the_loads_progress_follows_the_parse_ahead(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """While the load waits for the parse begun ahead, that parse's progress
    (a ``_native.ParseProgress`` the Rust parse sets without the GIL, every
    16,384 frames) reaches the load's callback (the progress bar on a terminal)."""
    import threading

    from conftest import bench_module

    native = backends.native_extension()
    real = native.parse
    go = threading.Event()
    given: list[object] = []

    def slow(paths, readers, settings, progress):  # type: ignore[no-untyped-def]
        given.append(progress)
        out = real(paths, readers, settings, progress)
        go.wait(30)  # (the load waits here, reading the progress)
        return out

    monkeypatch.setattr(native, "parse", slow)
    path = tmp_path / "meta.pcap"
    bench = bench_module()
    frames = bench.replicate_small_rpcs(bench.METADATA_SOURCE, path, 40_000)
    limits = ParseLimits()
    assert ahead.start([str(path)], limits, "native", 1, 0)
    seen: list[tuple[int, int]] = []
    threading.Timer(1.0, go.set).start()
    got = load(str(path), AnalysisConfig(limits=limits), progress=lambda f, b: seen.append((f, b)))
    assert isinstance(given[0], native.ParseProgress)  # (not a callable: no GIL taken)
    assert seen and seen[-1][0] == frames - frames % 16_384
    assert 0 < seen[-1][1] <= path.stat().st_size
    assert len(got.transactions)
