"""The Rust parser reads a plain capture file through a mapped window
(``native/src/capture.rs``'s ``Mapped``) and any other source (a
decompressing reader, here a plain ``read``) through read(): the same
messages, events, stats and file facts either way, on sample captures,
crafted ones with mirror copies (which the mapped path compares by reading
the earlier frame again, the read path by hash) and damaged ones."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SAMPLES

from nfstrace import _native
from nfstrace.config import ParseLimits
from nfstrace.parsers import ahead

try:
    from crafted import make_frames as mf
except ImportError:  # tests/ not on sys.path: import as a package
    from tests.crafted import make_frames as mf

TESTS = Path(__file__).parent


@pytest.fixture(scope="module")
def frames(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return mf.build_all(tmp_path_factory.mktemp("frames"))


def parse_both(paths: list[Path]) -> tuple[dict, dict]:
    """``_native.parse`` of the files given by path (mapped) and through
    Python readers (read)."""
    settings = ahead.native_settings(ParseLimits())
    names = [str(p) for p in paths]
    mapped = _native.parse(names, [None] * len(names), settings, None)
    opened = []

    def opener(path: str):
        def reopen():
            f = open(path, "rb")  # noqa: SIM115 - closed below
            opened.append(f)
            return f.read

        return reopen

    try:
        read = _native.parse(names, [opener(n) for n in names], settings, None)
    finally:
        for f in opened:
            f.close()
    return mapped, read


@pytest.mark.parametrize(
    "name",
    [
        "v3-tcp-nfscp-w64k-d2-l0.5.pcap",
        "v3-udp-py-w32k-mtu1000-d2-l0.5.pcap",
        "v41-tcp-nfsrs-w1m-d0-l0.s256.pcap",
    ],
)
def test_samples_parse_alike_mapped_and_read(name: str) -> None:
    mapped, read = parse_both([SAMPLES / name])
    assert mapped["stats"]["frames"] > 0
    assert mapped == read


def test_mirror_copies_found_alike_mapped_and_read(frames) -> None:
    mapped, read = parse_both([frames["mirror"]])
    assert mapped["stats"]["duplicate_frames"] == mapped["stats"]["frames"] // 2 > 0
    assert mapped == read
    # copies across two files merged (the first file's frames read again)
    mapped, read = parse_both([frames["mirror"], frames["plain"]])
    assert mapped == read


@pytest.mark.parametrize(
    "path",
    [
        "regressions/native/self-connection-syn.pcap",
        "fuzz/regressions/hunt-pcapng-12-byte-packet-block.pcapng",
        "fuzz/regressions/hypothesis-pcap-header-check-across-refill.pcap",
        "fuzz/regressions/atheris-pcapng-interface-block-without-body.pcapng",
    ],
)
def test_damaged_files_parse_alike_mapped_and_read(path: str) -> None:
    mapped, read = parse_both([TESTS / path])
    assert mapped["files"][0]["damage"]
    assert mapped == read
