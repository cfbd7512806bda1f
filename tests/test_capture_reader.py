"""The one capture reader (issue 32): ``read_frames`` and ``stream_frames`` are
the Rust core's reader (``native/src/capture.rs`` through ``_native.Frames``),
the one ``analyze`` parses with.  Here: a live stream's frame handed out as
soon as its record is whole, the CaptureInfo kept current while it reads
(watch's evidence takes its snaplen, the parallel parse's sample its bytes
read), the same facts and damage notes as the parse's, and a file's tail read
on past a second capture header."""

from __future__ import annotations

import gzip
import os
import queue
import struct
import threading
from pathlib import Path

import pytest
from conftest import SAMPLES

from nfstrace.errors import CaptureError
from nfstrace.parsers import capture, native
from nfstrace.parsers import spans as sp
from nfstrace.parsers.capture import CaptureInfo, read_frames, stream_frames

WRITE_1M = SAMPLES / "v3-tcp-nfscp-w1m-d0-l0.pcap"
T0 = 1_700_000_000


def pcap_header(snaplen: int = 65535, linktype: int = 1) -> bytes:
    return struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen, linktype)


def record(sec: int, usec: int, data: bytes) -> bytes:
    return struct.pack("<IIII", sec, usec, len(data), len(data)) + data


def block(btype: int, body: bytes) -> bytes:
    n = 12 + len(body)
    return struct.pack("<II", btype, n) + body + struct.pack("<I", n)


def pcapng_start(snaplen: int) -> bytes:
    shb = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    idb = block(1, struct.pack("<HHI", 1, 0, snaplen))
    return shb + idb


def epb(usec: int, data: bytes) -> bytes:
    pad = b"\0" * (-len(data) % 4)
    body = struct.pack("<IIIII", 0, usec >> 32, usec & 0xFFFFFFFF, len(data), len(data))
    return block(6, body + data + pad)


def test_a_streams_frame_is_handed_out_once_its_record_is_whole() -> None:
    """A pipe still open: each frame as its record arrives, not once a chunk
    (64 KiB) is full or the pipe ends (watch prints its intervals meanwhile)."""
    r, w = os.pipe()
    got: queue.Queue[object] = queue.Queue()
    info = CaptureInfo(path="-")

    def read() -> None:
        with open(r, "rb", buffering=0) as stream:
            try:
                for frame in stream_frames(stream, info):
                    got.put(frame)
            except BaseException as e:  # (handed to the test)
                got.put(e)
            got.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    second = record(T0, 2, b"b" * 100)
    try:
        os.write(w, pcap_header() + record(T0, 1, b"a" * 60) + second[:50])
        assert got.get(timeout=20) == (T0 * 10**9 + 1000, 1, b"a" * 60, 60, 0)
        assert got.empty()  # (half a record: not a frame yet)
        os.write(w, second[50:])
        assert got.get(timeout=20) == (T0 * 10**9 + 2000, 1, b"b" * 100, 100, 0)
        assert info.snaplen == 65535 and info.linktypes == {1} and info.format == "pcap"
    finally:
        os.close(w)
    assert got.get(timeout=20) is None
    reader.join(timeout=20)
    assert info.frames == 2 and info.bytes == 24 + 16 + 60 + 16 + 100 and info.warnings == []


def test_a_compressed_stream_is_refused() -> None:
    r, w = os.pipe()
    os.write(w, gzip.compress(pcap_header(), mtime=0))
    os.close(w)
    with open(r, "rb", buffering=0) as stream, pytest.raises(CaptureError) as e:
        next(stream_frames(stream, CaptureInfo(path="-")))
    assert "gzip-compressed: a stream is read as plain pcap or pcapng" in e.value.message


def test_what_the_reader_learns_is_in_the_info_while_it_reads(tmp_path: Path) -> None:
    """pcapng: the snaplen and link type of an interface block after the file
    header are in the CaptureInfo by the first frame; the bytes read (packed,
    for a compressed file) as each chunk is read."""
    data = pcapng_start(snaplen=512) + b"".join(epb(T0 * 10**6 + i, bytes(80)) for i in range(3))
    path = tmp_path / "x.pcapng.gz"
    path.write_bytes(gzip.compress(data, mtime=0))
    info = CaptureInfo(path=str(path))
    frames = read_frames(str(path), 4, info)
    assert next(frames)[1:] == (1, bytes(80), 80, 4)
    assert (info.format, info.compression, info.snaplen, info.linktypes) == (
        "pcapng",
        "gzip",
        512,
        {1},
    )
    assert info.read_bytes == path.stat().st_size  # (packed bytes: the whole small file)
    assert len(list(frames)) == 2
    assert info.frames == 3 and info.bytes == len(data)


def damaged(tmp_path: Path) -> list[Path]:
    """Captures with damage of several kinds."""
    whole = WRITE_1M.read_bytes()
    out = {
        "cut.pcap": whole[: len(whole) // 2],
        "bad-record.pcap": whole[:5000] + b"\xff" * 40 + whole[5000:200_000],
        "concatenated.pcap": whole[:300_000] + whole,
        "cut.pcap.gz": gzip.compress(whole, mtime=0)[:150_000],
        "bad-block.pcapng": pcapng_start(256)
        + epb(T0 * 10**6, bytes(64))
        + b"\x06\0\0\0\xff\xff\0\0"
        + epb(T0 * 10**6 + 9, bytes(64)),
    }
    paths = []
    for name, data in out.items():
        (tmp_path / name).write_bytes(data)
        paths.append(tmp_path / name)
    return paths


def test_the_facts_and_damage_notes_are_those_of_the_parse(tmp_path: Path) -> None:
    """One reader: read_frames says of a damaged file what analyze says."""
    for path in damaged(tmp_path):
        info = CaptureInfo(path=str(path))
        frames = list(read_frames(str(path), 0, info))
        parsed = native.parse([str(path)])[2].files[0]
        assert info.warnings and info.warnings == parsed.warnings, path.name
        assert info == parsed, path.name
        assert len(frames) == parsed.frames


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"", "empty file"),
        (b"\xd4\xc3", "too short to be a capture file"),
        (b"\xd4\xc3\xb2\xa1\x02\x00", "pcap file header cut short"),
        (b"hello, world", "not a pcap or pcapng capture file"),
        (gzip.compress(pcap_header(), mtime=0)[:12], "cannot read gzip data: "),
    ],
)
def test_not_a_capture_is_said_in_the_parses_words(tmp_path: Path, data: bytes, why: str) -> None:
    path = tmp_path / ("x.gz" if data.startswith(b"\x1f\x8b") else "x")
    path.write_bytes(data)
    with pytest.raises(CaptureError) as e:
        next(read_frames(str(path), 0, CaptureInfo(path=str(path))))
    assert e.value.message.startswith(why)
    assert capture.unusable(str(path)) == e.value.message


def test_a_files_tail_is_read_on_past_a_second_capture_header(tmp_path: Path) -> None:
    """cat a.pcap b.pcap, b short: its frames are in the tail the grouping of
    captures reads (the Python reader stopped at b's header: the span ended
    with a's last frame)."""
    a = pcap_header() + b"".join(record(T0, i, b"\xab" * 400) for i in range(3000))
    b = pcap_header() + b"".join(record(T0 + 5, i, b"\xcd" * 60) for i in range(10))
    path = tmp_path / "ab.pcap"
    path.write_bytes(a + b)
    times = [f[0] for f in read_frames(str(path), 0, CaptureInfo(str(path)))]
    assert len(times) == 3010
    span = sp.span(str(path))
    assert (
        (span.first_ns, span.last_ns)
        == (min(times), max(times))
        == (T0 * 10**9, (T0 + 5) * 10**9 + 9000)
    )
