"""Parsing split by host pair (nfstrace/parsers/parallel.py): partitions
combined, several processes, a directory of rotated files and a Dask cluster
all give exactly what one parse of the whole capture gives."""

from __future__ import annotations

import dataclasses
import pickle
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import SAMPLES, bench_module

from nfstrace.cli import app
from nfstrace.config import ParseLimits
from nfstrace.errors import CaptureError
from nfstrace.parsers import backends, capture, native, parallel, partitioning
from nfstrace.trace import AnalysisConfig, load

try:
    from crafted import make_crafted, make_rpc_ports, make_tcp_damage, make_unanswered
except ImportError:  # pragma: no cover - run from the repository root
    from tests.crafted import make_crafted, make_rpc_ports, make_tcp_damage, make_unanswered

ROOT = Path(__file__).resolve().parent.parent
# The parsers that can read one partition, where built (CI's second pass hides native)
CLIENTS = 16  # the metadata capture's clients (bench/run.py METADATA_CLIENTS)


def _bench():
    return bench_module()


@pytest.fixture(scope="module")
def metadata(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The benchmark's metadata-heavy capture, small: 16 NFSv4.1 clients of one
    server, each copy of the session set-up on its own connection."""
    out = tmp_path_factory.mktemp("parallel") / "meta.pcap"
    bench = _bench()
    assert bench.METADATA_CLIENTS == CLIENTS
    bench.replicate_small_rpcs(bench.METADATA_SOURCE, out, 6000)
    return out


@pytest.fixture(scope="module")
def crafted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("parallel_crafted")
    captures: dict[str, Path] = {}
    for module in (make_crafted, make_rpc_ports, make_tcp_damage, make_unanswered):
        captures.update(module.build_all(out))
    return captures


def assert_same(got: parallel.Parsed, one: parallel.Parsed) -> None:
    pd.testing.assert_frame_equal(got[0], one[0])
    pd.testing.assert_frame_equal(got[1], one[1])
    for f in dataclasses.fields(one[2]):
        assert getattr(got[2], f.name) == getattr(one[2], f.name), f.name


def partitioned(parse, paths: list[str], n: int) -> parallel.Parsed:
    return parallel.combine(
        [parse(paths, ParseLimits(partition=i, partitions=n)) for i in range(n)]
    )


@pytest.mark.parametrize("n", [2, 3, pytest.param(7, marks=pytest.mark.slow)])
def test_partitions_combine_to_one_parse(metadata: Path, n: int) -> None:
    parse = native.parse
    one = parse([str(metadata)], ParseLimits())
    parts = [parse([str(metadata)], ParseLimits(partition=i, partitions=n)) for i in range(n)]
    # the partitions share the 16 clients, none has them all
    sizes = [len(p[0]) for p in parts]
    assert sum(sizes) == len(one[0]) and max(sizes) < len(one[0])
    assert sum(1 for s in sizes if s) >= 2  # (7: one partition gets no client)

    # each client's traffic is in one partition only
    def clients(m: pd.DataFrame) -> set[str]:
        return set(m.loc[m["msgtype"] == "call", "src"])

    assert len(clients(one[0])) == CLIENTS
    assert sum(len(clients(p[0])) for p in parts) == CLIENTS
    got = parallel.combine(parts)
    assert_same(got, one)
    # connection ids renumbered as one parse numbers them: 1..n by first frame
    assert got[2].connection_frames == sorted(got[2].connection_frames)
    assert sorted(got[0]["conn"].unique()) == list(range(1, len(got[2].connection_frames) + 1))


@pytest.mark.slow
def test_partitions_on_crafted_edge_cases(crafted: dict[str, Path]) -> None:
    """Fragments, mirror copies, damaged TCP, learnt ports, unanswered calls:
    two partitions combined are one parse."""
    parse = native.parse
    assert len(crafted) >= 15
    for name, path in sorted(crafted.items()):
        try:
            assert_same(partitioned(parse, [str(path)], 2), parse([str(path)], ParseLimits()))
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from None


@pytest.mark.slow
@pytest.mark.parametrize("capture", sorted(SAMPLES.glob("*.pcap")), ids=lambda p: p.name)
def test_partitions_on_samples(capture: Path) -> None:
    parse = native.parse
    assert_same(partitioned(parse, [str(capture)], 2), parse([str(capture)], ParseLimits()))


def test_partition_of_is_the_same_both_ways() -> None:
    """Both directions and both address orders fall in one partition, behind
    any link layer; the CRC is zlib's of the lower address first; non-IP in 0."""
    from nfstrace.parsers.backends import native_extension
    from nfstrace.protocol.link import ETHERTYPE_IPV4, LINKTYPE_ETHERNET, LINKTYPE_RAW

    n = native_extension()
    a, b = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
    ip = bytes([0x45]) + bytes(11) + a + b
    back = bytes([0x45]) + bytes(11) + b + a
    ether = bytes(12) + ETHERTYPE_IPV4.to_bytes(2, "big")
    for k in range(1, 9):
        assert n.frame_partition(LINKTYPE_RAW, ip, k) == zlib.crc32(a + b) % k
        assert n.frame_partition(LINKTYPE_RAW, back, k) == zlib.crc32(a + b) % k
        assert n.frame_partition(LINKTYPE_ETHERNET, ether + back, k) == zlib.crc32(a + b) % k
    hosts = [ip[:12] + bytes([10, 0, 0, k]) + b for k in range(40)]
    spread = {n.frame_partition(LINKTYPE_RAW, h, 4) for h in hosts}
    assert spread == {0, 1, 2, 3}
    assert n.frame_partition(LINKTYPE_ETHERNET, b"\x00" * 60, 5) == 0  # not IP
    assert n.frame_partition(LINKTYPE_RAW, ip[:19], 5) == 0  # addresses not captured
    assert n.frame_host_pair(LINKTYPE_RAW, back) == (a, b)
    assert n.frame_host_pair(LINKTYPE_ETHERNET, ether + ip) == (a, b)
    assert n.frame_host_pair(LINKTYPE_RAW, ip[:19]) is None


def test_buckets_balanced_by_the_sample() -> None:
    """The busiest bucket first to the least loaded partition; unseen buckets
    round the partitions; nothing to balance without a sample or partitions."""
    counts = np.zeros(partitioning.BUCKETS, "int64")
    counts[[3, 7, 11, 19]] = [50, 30, 20, 10]
    buckets = partitioning.balanced_buckets(counts, 2)
    assert len(buckets) == partitioning.BUCKETS and set(buckets) == {0, 1}
    load = np.bincount(buckets, weights=counts)
    assert sorted(load) == [50, 60]  # [50 10] [30 20]
    assert [buckets[b] for b in (3, 7, 11, 19)] == [0, 1, 1, 0]
    assert buckets[0] == 0 and buckets[1] == 1 and buckets[2] == 0
    assert partitioning.balanced_buckets(counts, 1) == ()
    assert partitioning.balanced_buckets(np.zeros(partitioning.BUCKETS, "int64"), 4) == ()


def test_partitions_balanced_on_uneven_pairs(tmp_path: Path) -> None:
    """16 clients whose CRCs crowd a few residues (the bench's metadata
    capture: a plain CRC modulo 4 put 94% of the frames in two partitions) are
    spread evenly by the sample's buckets, and the parse is still one parse."""
    from conftest import bench_module

    bench = bench_module()
    capture = tmp_path / "meta.pcap"
    bench.replicate_small_rpcs(bench.METADATA_SOURCE, capture, 3000)
    parser = "native"
    wanted, limits = partitioning.plan([str(capture)], ParseLimits(), parser, 1, 4)
    assert wanted == 4 and limits.buckets
    # one worker, nothing asked, a small input: one partition, nothing sampled
    assert partitioning.plan([str(capture)], ParseLimits(), parser, 1) == (1, ParseLimits())
    assert partitioning.plan([str(capture)], ParseLimits(), parser, 2)[1].buckets
    first = partitioning.sample([str(capture)])
    plain = np.bincount(np.arange(partitioning.BUCKETS) % 4, weights=first.buckets, minlength=4)
    balanced = np.bincount(limits.buckets, weights=first.buckets, minlength=4)
    assert plain.max() / plain.sum() > 0.4  # what the plain CRC does with these clients
    assert balanced.max() / balanced.sum() <= 0.3
    parts = [parallel.parse_partition([str(capture)], limits, parser, i, 4) for i in range(4)]
    sizes = [len(p[0]) for p in parts]
    assert max(sizes) <= 0.3 * sum(sizes)
    assert_same(parallel.combine(parts), native.parse([str(capture)], ParseLimits()))


@pytest.fixture(scope="module")
def split(metadata: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The metadata capture cut into 8 files by editcap -c, as a rotating
    tcpdump would: records and TCP streams split anywhere."""
    editcap = shutil.which("editcap")
    if editcap is None:
        pytest.fail(
            "editcap (tshark's package, wireshark-common) is required: apt-get install tshark"
        )
    out = tmp_path_factory.mktemp("split")
    frames = _bench().count_packets(metadata)
    subprocess.run([editcap, "-c", str(-(-frames // 8)), str(metadata), str(out / "meta.pcap")],
                   check=True)  # fmt: skip
    (out / "notes.txt").write_text("not a capture\n")  # skipped in the directory
    assert len(list(out.glob("*.pcap"))) == 8
    return out


def test_split_files_give_the_whole_capture_transactions(metadata: Path, split: Path) -> None:
    whole = load(metadata)
    files = sorted(str(p) for p in split.glob("*.pcap"))
    one = load(files)
    two = load(split, AnalysisConfig(workers=2))
    assert len(two.paths) == 8 and list(two.paths) == files
    pd.testing.assert_frame_equal(one.transactions, whole.transactions)
    pd.testing.assert_frame_equal(two.transactions, whole.transactions)
    pd.testing.assert_frame_equal(two.messages, whole.messages)
    pd.testing.assert_frame_equal(two.events, whole.events)
    assert two.diagnosis.verdict == whole.diagnosis.verdict
    assert two.stats.frames == whole.stats.frames and len(two.stats.files) == 8


def assert_same_trace(got, whole) -> None:
    """Two Traces agree table by table, and so does what the command line writes."""
    from nfstrace.reports.export import summary

    pd.testing.assert_frame_equal(got.transactions, whole.transactions)
    pd.testing.assert_frame_equal(got.messages, whole.messages[list(got.messages.columns)])
    pd.testing.assert_frame_equal(got.events, whole.events)
    for f in dataclasses.fields(whole.stats):
        if f.name != "files":
            assert getattr(got.stats, f.name) == getattr(whole.stats, f.name), f.name
    assert summary(got) == summary(whole)


@pytest.mark.parametrize("workers", [1, 2])
def test_partitions_matched_apart_give_one_match(metadata: Path, workers: int) -> None:
    """Parsed and matched in 3 host-pair partitions (in one process, one after
    another, or in two), combined: the tables and the summary of one parse."""
    whole = load(metadata)
    got = load(metadata, AnalysisConfig(partitions=3, workers=workers))
    assert len(got.messages.columns) == len(whole.messages.columns)
    assert_same_trace(got, whole)


def test_messages_facts_are_all_the_analysis_reads(metadata: Path) -> None:
    """keep_messages=False (the command line) keeps schema.MESSAGE_FACTS only,
    and the analysis of them is the analysis of the whole table."""
    from nfstrace.schema import MESSAGE_FACTS

    whole = load(metadata)
    for config in (AnalysisConfig(keep_messages=False),
                   AnalysisConfig(keep_messages=False, partitions=2)):  # fmt: skip
        got = load(metadata, config)
        assert list(got.messages.columns) == list(MESSAGE_FACTS)
        assert_same_trace(got, whole)


@pytest.mark.slow
@pytest.mark.parametrize("capture", sorted(SAMPLES.glob("**/*.pcap")), ids=lambda p: p.name)
def test_partitions_matched_apart_on_samples(capture: Path) -> None:
    whole = load(capture)
    assert_same_trace(load(capture, AnalysisConfig(partitions=2, keep_messages=False)), whole)


def test_partitions_progress_moves_once_through_the_passes(tmp_path: Path) -> None:
    """Three passes over the files move the bar once from start to end."""
    capture = tmp_path / "meta.pcap"
    frames = _bench().replicate_small_rpcs(_bench().METADATA_SOURCE, capture, 100_000)
    seen: list[int] = []
    load(capture, AnalysisConfig(partitions=3), progress=lambda frames, done: seen.append(done))
    size = capture.stat().st_size
    assert len(seen) >= 3 * (frames // 16_384)  # (capture.Progress: every 16,384 frames)
    assert seen == sorted(seen) and size * 0.9 < seen[-1] <= size
    assert any(size * 0.3 < d < size * 0.7 for d in seen)  # (not three runs to the end)


def test_frames_estimated_from_the_first_bytes(metadata: Path, tmp_path: Path) -> None:
    """estimated_frames: within 10% of the frames (one file, several; compressed)."""
    frames = _bench().count_packets(metadata)
    assert partitioning.estimated_frames([str(metadata)]) == frames  # (read whole: exact)
    big = tmp_path / "big.pcap"
    many = _bench().replicate_small_rpcs(_bench().METADATA_SOURCE, big, 200_000)
    assert abs(partitioning.estimated_frames([str(big)]) - many) < many * 0.1
    assert abs(partitioning.estimated_frames([str(big), str(big)]) - 2 * many) < many * 0.2
    packed = tmp_path / "big.pcap.gz"
    subprocess.run(["gzip", "-k", "-1", str(big)], check=True)
    assert abs(partitioning.estimated_frames([str(packed)]) - many) < many * 0.1
    assert partitioning.estimated_frames([str(tmp_path / "missing.pcap")]) == 0


def test_partitions_cut_to_the_memory_available(
    metadata: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """auto_partitions: one partition's parse within PARTITION_MEMORY_SHARE of
    the memory available; never fewer than the workers; small inputs as asked."""
    path = [str(metadata)]
    frames = _bench().count_packets(metadata)
    assert partitioning.auto_partitions(path, "native", 3) == 3  # (under MIN_ESTIMATED_BYTES)
    monkeypatch.setattr(partitioning, "MIN_ESTIMATED_BYTES", 0)
    need = frames * partitioning.PARSE_BYTES_PER_FRAME
    room = need / partitioning.PARTITION_MEMORY_SHARE  # exactly one partition's worth
    monkeypatch.setattr(partitioning, "memory_available", lambda: room)
    assert partitioning.auto_partitions(path, "native", 1) == 1
    monkeypatch.setattr(partitioning, "memory_available", lambda: room / 5)
    assert partitioning.auto_partitions(path, "native", 1) == 5
    assert partitioning.auto_partitions(path, "native", 8) == 8
    assert partitioning.auto_partitions(path, "pyshark", 1) == 1  # (cannot read a partition)
    got = load(metadata, AnalysisConfig(keep_messages=False))  # 5 partitions, as one
    assert_same_trace(got, load(metadata))


def test_worker_processes_give_one_parse(metadata: Path) -> None:
    parser = "native"
    one = backends.get(parser)([str(metadata)], ParseLimits(), None)
    assert_same(parallel.parse([str(metadata)], ParseLimits(), parser, 3), one)
    # a backend that cannot read a partition is run once, whole
    assert partitioning.auto_workers([str(metadata)], "pyshark") == 1


def test_worker_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"this is not a capture at all" * 10)
    err = pickle.loads(pickle.dumps(CaptureError("not a capture", str(bad))))
    assert err.path == str(bad) and str(bad) in str(err)
    with pytest.raises(CaptureError) as e:
        parallel.parse([str(bad)], ParseLimits(), "native", 2)
    assert e.value.path == str(bad)


def test_directory_arguments(tmp_path: Path, split: Path) -> None:
    files = capture.expand_directories([str(split)])
    assert len(files) == 8 and all(f.endswith(".pcap") for f in files) and files == sorted(files)
    (tmp_path / ".hidden.pcap").write_bytes((split / Path(files[0]).name).read_bytes())
    (tmp_path / "readme").write_text("x")
    with pytest.raises(CaptureError, match="a directory without capture files"):
        capture.expand_directories([str(tmp_path)])
    assert capture.expand_directories(["-", files[0]]) == ["-", files[0]]


def test_cli_directory_and_workers(split: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    json_out = tmp_path / "s.json"
    result = CliRunner().invoke(
        app, ["analyze", str(split), "--workers", "2", "--json", str(json_out), "-q"]
    )
    assert result.exit_code == 0, result.output
    assert "meta_00002" in result.output and "and 5 more" in result.output  # 8 files, 3 named
    assert "meta_00003" not in result.output
    report = split.parent / (split.name + ".report.html")  # beside the directory
    assert report.is_file() and json_out.is_file()
    bad = CliRunner().invoke(app, ["analyze", str(split), "--workers", "-1", "--no-report"])
    assert bad.exit_code == 2 and "--workers -1" in bad.output


@pytest.mark.slow
def test_dask_local_cluster_gives_one_parse(metadata: Path, split: Path) -> None:
    """A LocalCluster of 2 worker processes parses the 8 rotated files; the
    tables and the diagnosis are those of one process."""
    from distributed import Client, LocalCluster

    files = sorted(str(p) for p in split.glob("*.pcap"))
    parser = "native"
    one = backends.get(parser)(files, ParseLimits(), None)
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
        as cluster,
        Client(cluster) as client,
    ):  # fmt: skip
        got = parallel.parse_on_dask(files, ParseLimits(), parser, client, 2)
    assert_same(got, one)
    whole = load(metadata)
    via_cli = load(split, AnalysisConfig(dask="local", workers=2))
    pd.testing.assert_frame_equal(via_cli.transactions, whole.transactions)
    assert via_cli.diagnosis.verdict == whole.diagnosis.verdict


@pytest.mark.slow  # (waits for the connection to time out)
def test_dask_unreachable_scheduler_is_a_usage_error(
    metadata: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nfstrace.errors import UsageError

    monkeypatch.setattr(parallel, "DASK_CONNECT_TIMEOUT_S", 2)
    with pytest.raises(UsageError, match="cannot reach the scheduler"):
        parallel.parse_with_dask([str(metadata)], ParseLimits(), "native", "tcp://127.0.0.1:9", 1)


def test_no_process_for_one_worker(metadata: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pool(*args, **kwargs):  # pragma: no cover - must not be called
        raise AssertionError("a process pool for one worker")

    import concurrent.futures  # (parallel imports the pool from there when it needs one)

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", no_pool)
    assert len(parallel.parse([str(metadata)], ParseLimits(), "native", 1)[0])


def test_dask_is_imported_only_for_dask() -> None:
    code = "import nfstrace.cli, nfstrace.trace, sys; print('distributed' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
