"""Damaged captures never crash, never hang, never lose what was readable.

One test per kind of damage (built by tests/crafted/make_damaged.py from a
healthy exchange: frames 1-3 a TCP handshake, GETATTR call i in frame 4 + 2i,
its reply in frame 5 + 2i): what is still found, and the warning given.
Then the limits that bound memory, the files that are not captures, and the
crashes fuzzing found (tests/fuzz/regressions/).
"""

from __future__ import annotations

import gzip
import json
import math
import os
import struct
import time
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import nfstrace
from nfstrace.cli import app
from nfstrace.config import ParseLimits
from nfstrace.errors import CaptureError, ExitStatus
from nfstrace.parsers import capture
from nfstrace.protocol import capture_format
from nfstrace.trace import AnalysisConfig

try:
    from crafted import make_crafted as mc
    from crafted import make_damaged as md
    from fuzz.mutate import run_pipeline
except ImportError:  # tests/ not on sys.path: import as a package
    from tests.crafted import make_crafted as mc
    from tests.crafted import make_damaged as md
    from tests.fuzz.mutate import run_pipeline

REGRESSIONS = Path(__file__).resolve().parent / "fuzz" / "regressions"
SAMPLE = Path(__file__).resolve().parent.parent / "sample-pcaps" / "v3-tcp-nfscp-w1m-d0-l0.pcap"
runner = CliRunner()
XIDS = [md.XID0 + i for i in range(md.N)]


def load_bytes(tmp_path: Path, blob: bytes, name: str = "damaged.pcap") -> nfstrace.Trace:
    path = tmp_path / name
    path.write_bytes(blob)
    return nfstrace.load(path)


def answered(t: nfstrace.Trace) -> list[int]:
    """xids of the calls answered by a reply (both in the capture)."""
    tx = t.transactions
    ok = tx[tx["t_call_ns"].notna() & tx["t_reply_ns"].notna()]
    return sorted(int(x) for x in ok["xid"])


def calls(t: nfstrace.Trace) -> list[int]:
    m = t.messages
    return sorted(int(x) for x in m[m["msgtype"] == "call"]["xid"])


def warnings_of(t: nfstrace.Trace) -> str:
    return "\n".join(t.stats.warnings)


# ---- the capture file cut off ------------------------------------------------------------


@pytest.mark.parametrize("where", [0, 7, 16, 40])
def test_pcap_cut_mid_record_keeps_every_transaction_before_the_cut(
    tmp_path: Path, where: int
) -> None:
    blob = md.pcap_bytes(md.exchange())
    # cut inside the record of call 7 (frame 18): `where` bytes into its header/data
    cut = md.record_offsets(blob)[md.call_frame(7) - 1] + where
    t = load_bytes(tmp_path, blob[: cut if where else cut + 3])
    assert answered(t) == XIDS[:7]
    assert t.stats.frames == md.call_frame(7) - 1
    assert "capture cut off" in warnings_of(t) and "17 frames before it kept" in warnings_of(t)
    assert t.stats.files[0].damage["cut"].count == 1


def test_pcapng_cut_mid_block_keeps_every_transaction_before_the_cut(tmp_path: Path) -> None:
    blob = md.pcapng_bytes(md.exchange())
    cut = md.block_offsets(blob)[md.call_frame(9) + 1] + 30  # inside frame 22's block
    t = load_bytes(tmp_path, blob[:cut], "cut.pcapng")
    assert answered(t) == XIDS[:9]
    assert "the file ends inside a block (capture cut off)" in warnings_of(t)


def test_gzip_cut_off_keeps_what_was_decompressed(tmp_path: Path) -> None:
    """A cut gzip stream: every whole frame decompressed before the cut is kept
    (reading in one-step pieces: a failing read loses nothing before it)."""
    data = SAMPLE.read_bytes()
    packed = gzip.compress(data, mtime=0)
    t = load_bytes(tmp_path, packed[: len(packed) * 2 // 3], "cut.pcap.gz")
    whole = nfstrace.load(SAMPLE)
    assert t.stats.frames > whole.stats.frames // 2  # most of the decompressed part
    # everything answered before the cut is found, as in the whole capture
    last = t.messages["ts_last_ns"].max()
    tx = whole.transactions
    before = tx[tx["t_reply_ns"] < last - 1_000_000]
    assert set(before["xid"]) <= set(t.transactions["xid"])
    assert "decompression stopped" in warnings_of(t)


def test_gzip_corrupt_in_the_middle(tmp_path: Path) -> None:
    packed = bytearray(md.gz(md.pcap_bytes(md.exchange(200))))
    for i in range(len(packed) // 2, len(packed) // 2 + 64):
        packed[i] ^= 0x5A
    t = load_bytes(tmp_path, bytes(packed), "corrupt.pcap.gz")
    assert len(answered(t)) > 20
    assert "decompression stopped" in warnings_of(t)


def _zero_frames(n: int, *, varying: bool) -> bytes:
    """n pcap records of 1,514-byte frames (little-endian, microseconds): all
    zeros and one timestamp (a bomb), or zero-filled TCP segments with their
    timestamps, IP ids and sequence numbers moving as in a real transfer."""
    out = []
    for i in range(n):
        if varying:
            head = bytes(12) + b"\x08\x00\x45\x00\x05\xdc" + struct.pack(">H", i & 0xFFFF)
            head += b"\x40\x00\x40\x06\x00\x00\x0a\x00\x00\x01\x0a\x00\x00\x02"
            head += struct.pack(">HHIIHHHH", 800, 2049, 1000 + 1448 * i, 5000, 0x5010, 65535, 0, 0)
            frame = head + bytes(1514 - len(head))
            ts = (1_700_000_000 + i // 1000, (i * 37) % 1_000_000)
        else:
            frame, ts = bytes(1514), (1_700_000_000, 0)
        out.append(struct.pack("<IIII", *ts, 1514, 1514) + frame)
    return b"".join(out)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["gz", "bz2", "xz"])
def test_a_decompression_bomb_is_stopped_whatever_the_format(tmp_path: Path, fmt: str) -> None:
    """One rule for every format (issue 30 item 5): a capture followed by 128 MB
    of zeros (zero-length records), packed at the most each compressor does
    (gzip ~1,030:1), stops at RATIO_CHECK_BYTES with the bomb warning, in both
    parsers; its packed bytes counted exactly (gzip.GzipFile's read-ahead kept
    a gzip bomb below the ratio: 1 GB was read, 16M records)."""
    import bz2
    import lzma

    pack = {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}[fmt]
    zeros = bytes(2 * capture.RATIO_CHECK_BYTES)
    path = tmp_path / f"bomb.pcap.{fmt}"
    path.write_bytes(pack(md.pcap_bytes(md.exchange()) + zeros))
    t = nfstrace.load(path, AnalysisConfig())
    assert answered(t) == XIDS
    assert "decompression bomb" in warnings_of(t)
    unpacked = t.stats.files[0].bytes
    assert capture.RATIO_CHECK_BYTES <= unpacked < capture.RATIO_CHECK_BYTES + 8 * capture.CHUNK


@pytest.mark.slow
def test_a_decompression_bomb_is_stopped(tmp_path: Path) -> None:
    """A small .xz that unpacks to gigabytes (issue 20, item 4): past
    RATIO_CHECK_BYTES at more than MAX_DECOMPRESSION_RATIO bytes out per byte
    in, reading stops with a warning (exit 6); what came before is analysed."""
    import lzma

    pack = lzma.LZMACompressor(preset=0)
    parts = [pack.compress(md.pcap_bytes(md.exchange()))]
    bomb = _zero_frames(4096, varying=False)  # 6.2 MB, packed to almost nothing
    for _ in range(2 * capture.RATIO_CHECK_BYTES // len(bomb)):
        parts.append(pack.compress(bomb))
    parts.append(pack.flush())
    path = tmp_path / "bomb.pcap.xz"
    path.write_bytes(b"".join(parts))
    assert path.stat().st_size < 100_000  # 134 MB unpacked
    t = nfstrace.load(path, AnalysisConfig())
    assert answered(t) == XIDS
    assert "decompression bomb" in warnings_of(t)
    unpacked = t.stats.files[0].bytes
    assert capture.RATIO_CHECK_BYTES <= unpacked < capture.RATIO_CHECK_BYTES + 8 * capture.CHUNK
    result = runner.invoke(app, ["analyze", str(path), "--quiet"])
    assert result.exit_code == ExitStatus.DAMAGED, result.output


@pytest.mark.slow
def test_highly_compressible_real_traffic_is_not_a_bomb(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Zero-filled TCP segments (the most compressible real traffic) pack far
    below the bomb ratio with every compressor, and are read whole; the same
    frames with nothing changing between them are a bomb.  (The check starts
    at 2 MB here instead of 64 MB, to keep the test small.)"""
    import bz2
    import lzma

    monkeypatch.setattr(capture, "RATIO_CHECK_BYTES", 2 * 1024 * 1024)
    real = md.pcap_bytes(md.exchange()) + _zero_frames(4000, varying=True)
    frames = load_bytes(tmp_path, real, "zeros.pcap").stats.frames
    for name, pack in (("gz", gzip.compress), ("bz2", bz2.compress), ("xz", lzma.compress)):
        packed = pack(real)
        assert len(real) / len(packed) < capture.MAX_DECOMPRESSION_RATIO / 3, name
        t = load_bytes(tmp_path, packed, f"zeros.pcap.{name}")
        assert "decompression" not in warnings_of(t), name
        assert t.stats.frames == frames > 4000, name
    bomb = md.pcap_bytes(md.exchange()) + _zero_frames(4000, varying=False)
    t = load_bytes(tmp_path, lzma.compress(bomb), "same.pcap.xz")
    assert "decompression bomb" in warnings_of(t)


# ---- corrupt records and blocks --------------------------------------------------------


def test_pcapng_corrupt_block_is_stepped_over(tmp_path: Path) -> None:
    """The block of frame 12 (call 4) gets an impossible length; the reader finds
    the next block whose two length fields agree and reads on."""
    blob = md.pcapng_bytes(md.exchange())
    at = md.block_offsets(blob)[md.call_frame(4) + 1]
    t = load_bytes(tmp_path, md.set_u32(blob, at + 4, 0x00FFFF01), "bad.pcapng")
    assert answered(t) == [x for x in XIDS if x != md.XID0 + 4]
    assert calls(t) == [x for x in XIDS if x != md.XID0 + 4]
    d = t.stats.files[0].damage["bad_block"]
    assert (d.count, d.offset) == (1, at)
    assert "1 pcapng blocks with impossible lengths (first at byte" in warnings_of(t)


def test_pcapng_block_whose_trailing_length_disagrees(tmp_path: Path) -> None:
    blob = md.pcapng_bytes(md.exchange())
    offs = md.block_offsets(blob)
    at = offs[md.call_frame(5) + 1]
    end = offs[md.call_frame(5) + 2]
    t = load_bytes(tmp_path, md.set_u32(blob, end - 4, 12345), "bad.pcapng")
    assert calls(t) == [x for x in XIDS if x != md.XID0 + 5]
    assert t.stats.files[0].damage["bad_block"].offset == at


def test_pcapng_packet_block_inconsistent_inside(tmp_path: Path) -> None:
    """Frame 14's block is whole, but its captured length runs past it, and frame
    16's names an interface that does not exist: both skipped, nothing else."""
    blob = md.pcapng_bytes(md.exchange())
    offs = md.block_offsets(blob)
    blob = md.set_u32(blob, offs[md.call_frame(5) + 1] + 20, 5000)  # EPB captured length
    blob = md.set_u32(blob, offs[md.call_frame(6) + 1] + 8, 3)  # EPB interface id
    t = load_bytes(tmp_path, blob, "inside.pcapng")
    assert calls(t) == [x for x in XIDS if x not in (md.XID0 + 5, md.XID0 + 6)]
    d = t.stats.files[0].damage["bad_packet_block"]
    assert (d.count, d.detail) == (2, "captured length 5000")
    assert "2 pcapng packet blocks inconsistent inside" in warnings_of(t)


@pytest.mark.parametrize("caplen", [0x7FFFFFFF, 262_145, 100_000])
def test_pcap_record_with_impossible_length_is_stepped_over(tmp_path: Path, caplen: int) -> None:
    """Frame 12's record claims `caplen` bytes (above 256 KiB, or above the
    snaplen with no record after it): the reader searches the next plausible
    record and reads on: only that frame's call is lost."""
    cap = md.exchange()
    cap.snaplen = 65535
    blob = md.pcap_bytes(cap)
    at = md.record_offsets(blob)[md.call_frame(4) - 1]
    t = load_bytes(tmp_path, md.set_u32(blob, at + 8, caplen))
    assert calls(t) == [x for x in XIDS if x != md.XID0 + 4]
    d = t.stats.files[0].damage["bad_record"]
    assert (d.count, d.offset) == (1, at) and d.skipped > 0
    assert "pcap record headers with impossible lengths" in warnings_of(t)


def test_frame_longer_than_the_snaplen_is_kept(tmp_path: Path) -> None:
    """A header snaplen of 100 with frames up to 178 bytes: the records are
    consistent with each other, so the frames are kept (and the oddity said)."""
    cap = md.exchange()
    cap.snaplen = 100
    cap.frames = [(t, d, w) for t, d, w in md.exchange().frames]  # not cut at 100
    t = load_bytes(tmp_path, md.pcap_bytes(cap))
    assert answered(t) == XIDS
    assert "frames longer than the snaplen in the file header" in warnings_of(t)


def test_damage_near_the_end_loses_only_that_frame(tmp_path: Path) -> None:
    blob = md.pcap_bytes(md.exchange())
    at = md.record_offsets(blob)[md.call_frame(10) - 1]
    t = load_bytes(tmp_path, md.set_u32(blob, at + 8, 0xFFFFFFFF))
    assert calls(t) == XIDS[:10] + XIDS[11:]


def test_garbage_to_the_end_loses_only_the_tail(tmp_path: Path) -> None:
    blob = md.pcap_bytes(md.exchange())
    at = md.record_offsets(blob)[md.call_frame(10) - 1]
    t = load_bytes(tmp_path, blob[:at] + b"\xff" * (len(blob) - at))
    assert answered(t) == XIDS[:10]
    d = t.stats.files[0].damage["lost_tail"]
    assert (d.offset, d.skipped) == (at, len(blob) - at)
    assert f"no plausible record after the damage at byte {at:,}" in warnings_of(t)


def test_concatenated_pcaps_are_read_whole(tmp_path: Path) -> None:
    """`cat a.pcap b.pcap > c.pcap`, b in the other byte order and a later time."""
    a = md.pcap_bytes(md.exchange())
    later = md.exchange(xid0=0x7000, cport=43000)
    later.frames = [(t + 10**9, d, w) for t, d, w in later.frames]
    b = md.pcap_bytes(later, endianness=">")
    t = load_bytes(tmp_path, a + b)
    assert answered(t) == XIDS + [0x7000 + i for i in range(md.N)]
    assert t.stats.frames == 2 * (3 + 2 * md.N)
    assert "1 more capture file headers inside the file (files concatenated" in warnings_of(t)


def test_pcap_and_pcapng_concatenated(tmp_path: Path) -> None:
    a = md.pcap_bytes(md.exchange())
    later = md.exchange(xid0=0x7000, cport=43000)
    later.frames = [(t + 10**9, d, w) for t, d, w in later.frames]
    t = load_bytes(tmp_path, a + md.pcapng_bytes(later))
    assert len(answered(t)) == 2 * md.N
    assert t.stats.files[0].damage["concatenated"].offset == len(a)


# ---- packets with impossible lengths -------------------------------------------------------


def test_ip_total_length_that_lies(tmp_path: Path) -> None:
    """Call 3's IP header claims 65,000 bytes: taken as long as its frame, so
    the TCP stream is not derailed (every call and reply found)."""
    path = md.ip_len_lie().write(tmp_path / "ip.pcap")
    t = nfstrace.load(path)
    assert answered(t) == XIDS
    assert t.stats.anomalies == {"ip_length_exceeds_frame": 1}
    assert "1 IP packets claiming more bytes than their frame" in warnings_of(t)


def test_tcp_header_length_that_lies(tmp_path: Path) -> None:
    """Calls 3 and 6 carry TCP data offsets of 8 bytes and of more than the
    packet: those segments are skipped, the stream resynchronises after each."""
    path = md.tcp_hl_lie().write(tmp_path / "tcp.pcap")
    t = nfstrace.load(path)
    lost = {md.XID0 + 3, md.XID0 + 6}
    assert calls(t) == [x for x in XIDS if x not in lost]
    assert set(answered(t)) >= set(XIDS) - lost
    assert t.stats.anomalies == {"tcp_header_length": 2}
    assert "2 TCP segments with an impossible header length" in warnings_of(t)


# ---- RPC with absurd counts -------------------------------------------------------------------

BEFORE = [md.XID0, md.XID0 + 1, md.XID0 + 2]
AFTER = [md.XID0 + 103, md.XID0 + 104, md.XID0 + 105]


def test_record_mark_of_two_gigabytes(tmp_path: Path) -> None:
    path = md.huge_record_mark().write(tmp_path / "mark.pcap")
    t = nfstrace.load(path)
    assert answered(t) == BEFORE + AFTER
    assert t.stats.anomalies["record_mark_too_long"] == 1
    assert t.stats.tcp["resyncs"] == 1
    assert (t.events["kind"] == "rpc_resync").sum() == 1


def test_opaque_length_past_the_end(tmp_path: Path) -> None:
    path = md.opaque_past_end().write(tmp_path / "opaque.pcap")
    t = nfstrace.load(path)
    assert answered(t) == BEFORE + AFTER
    m = t.messages.set_index("xid")
    assert (m.loc[md.XID0 + 50, "op"], m.loc[md.XID0 + 50, "nfs_decode"]) == ("LOOKUP", "truncated")
    assert m.loc[md.XID0 + 50, "name"] == ""


def test_ten_thousand_credentials_and_a_machine_name_past_the_end(tmp_path: Path) -> None:
    path = md.many_credentials().write(tmp_path / "cred.pcap")
    t = nfstrace.load(path)
    assert answered(t) == BEFORE + AFTER
    m = t.messages.set_index("xid")
    big, lying = m.loc[md.XID0 + 60], m.loc[md.XID0 + 61]
    # kept with its RPC header, without arguments (its credential is 40 KB: RFC says 400)
    assert (big["op"], big["auth"], big["body_offset"], big["nfs_decode"]) == (
        "GETATTR",
        "sys",
        -1,
        "truncated",
    )
    assert (lying["auth_machine"], lying["auth_uid"]) == ("", -1)
    assert t.stats.anomalies == {"rpc_auth_too_long": 1}


def test_huge_nfsv4_operation_count(tmp_path: Path) -> None:
    path = md.huge_op_count().write(tmp_path / "ops.pcap")
    start = time.monotonic()
    t = nfstrace.load(path)
    assert time.monotonic() - start < 30
    assert answered(t) == BEFORE + AFTER
    m = t.messages.set_index("xid").loc[md.XID0 + 70]
    assert (m["ops"], m["nfs_decode"]) == ("PUTROOTFH GETFH", "truncated")


# ---- TCP sequence jumps -------------------------------------------------------------------------


def test_wild_sequence_jumps_restart_the_stream(tmp_path: Path) -> None:
    """2**31 ahead, then 2**30 + 12345 back: both are jumps (a retransmission is
    never that far behind); the stream restarts there and finds every call."""
    path = md.seq_jumps().write(tmp_path / "jumps.pcap")
    t = nfstrace.load(path)
    assert answered(t) == [md.XID0 + i for i in range(9)]
    assert (t.events["kind"] == "seq_jump").sum() == 2


def test_one_segment_with_a_wild_sequence_number(tmp_path: Path) -> None:
    path = md.one_wild_segment().write(tmp_path / "wild.pcap")
    t = nfstrace.load(path)
    assert answered(t) == [md.XID0 + i for i in range(8)]


# ---- bounded memory ----------------------------------------------------------------------


def test_many_flows_and_xids_stay_within_the_limits(tmp_path: Path) -> None:
    """300 connections from 300 addresses, each holding an early segment for a
    hole that never fills, parsed with small limits: every table the parser
    hands back stays within its limit, those it holds are bounded by what it
    forgot (268 = 300 - 32 connections), every message is still found, and
    what was cut is said.  (The exact tables: tests/test_native.py's golden
    record damaged/many_flows-small-limits.)"""
    path = md.many_flows(300).write(tmp_path / "flows.pcap")
    limits = ParseLimits(
        max_connections=32,
        max_directions=40,
        max_pending_bytes_total=3_000,
        max_pending_calls=50,
        max_events_per_kind=20,
    )
    t = nfstrace.load(path, AnalysisConfig(limits=limits))
    assert len(t.stats.directions) == 40
    assert (t.events["kind"].value_counts() <= 20).all()
    assert len(answered(t)) == 300  # each reply right after its call
    a = t.stats.anomalies
    assert a["connections_forgotten"] == 300 - 32 and a["tcp_holes_by_memory"] > 0
    assert a["directions_untracked"] > 0 and a["events_not_recorded"] > 0
    text = warnings_of(t)
    assert "max_pending_bytes_total" in text and "max_events_per_kind" in text


def test_fragments_stay_within_the_limits(tmp_path: Path) -> None:
    """200 datagrams of which only the first fragment was captured, and 20,000
    bytes to hold them: the oldest are given up as the bound is reached, not
    kept to the reassembly timeout (with the default bound none is)."""
    path = md.many_fragments(200).write(tmp_path / "frags.pcap")
    limits = ParseLimits(max_ip_reassembly_bytes=20_000, max_events_per_kind=50)
    t = nfstrace.load(path, AnalysisConfig(limits=limits))
    assert t.stats.ip_datagrams_incomplete == 200
    assert t.stats.anomalies["ip_datagrams_given_up"] > 100
    assert (t.events["kind"] == "ip_datagram_incomplete").sum() == 50
    wide = nfstrace.load(path, AnalysisConfig(limits=ParseLimits(max_events_per_kind=50)))
    assert "ip_datagrams_given_up" not in wide.stats.anomalies


def test_a_fragment_repeated_thousands_of_times(tmp_path: Path) -> None:
    """Exact repeats are not held: fast, and one incomplete datagram."""
    path = md.repeated_fragment(3000).write(tmp_path / "repeat.pcap")
    start = time.monotonic()
    t = nfstrace.load(path)
    assert time.monotonic() - start < 30
    assert t.stats.ip_fragments == 3000 and t.stats.ip_datagrams_incomplete == 1


def test_a_flood_of_pcapng_interfaces_and_statistics(tmp_path: Path) -> None:
    """70,000 interface blocks and statistics for interfaces never described:
    at most 65,536 interfaces are kept, the packets of interface 0 are read."""
    cap = md.exchange()
    blob = md.pcapng_bytes(cap)
    offs = md.block_offsets(blob)
    idb = mc.pcapng_idb(mc.LINKTYPE_ETHERNET, 65535)
    isb = mc.pcapng_isb(4_000_000, 0, (mc.ISB_IFDROP, struct.pack("<Q", 99)))
    blob = blob[: offs[2]] + idb * 70_000 + isb * 1000 + blob[offs[2] :]
    t = load_bytes(tmp_path, blob, "flood.pcapng")
    assert answered(t) == XIDS
    assert t.stats.interface_drops == 0
    d = t.stats.files[0].damage["bad_packet_block"]
    assert d.count == 70_001 - 65_536


def test_limits_do_not_change_a_healthy_capture() -> None:
    """The default limits are far above what a real capture needs."""
    t = nfstrace.load(SAMPLE)
    assert t.stats.anomalies == {} and t.stats.warnings == []


# ---- not a capture -------------------------------------------------------------------------------


def _one_line_error(result, status: ExitStatus, text: str) -> None:
    assert result.exit_code == status, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nfstrace: error: ") and text in lines[0]


@pytest.mark.parametrize(
    ("content", "text"),
    [
        (b"", "empty file"),
        (b"\xd4\xc3", "too short to be a capture file"),
        (b"hello, this is a text file\n" * 20, "not a pcap or pcapng capture file"),
        (b"\xd4\xc3\xb2\xa1\x02\x00\x04\x00", "pcap file header cut short"),
        (gzip.compress(b"not a capture at all, compressed", mtime=0), "not a pcap or pcapng"),
        (b"\x1f\x8b\x08\x00garbage", "cannot read gzip data"),
    ],
)
def test_files_that_are_not_captures(tmp_path: Path, content: bytes, text: str) -> None:
    path = tmp_path / "x.pcap"
    path.write_bytes(content)
    _one_line_error(runner.invoke(app, ["analyze", str(path)]), ExitStatus.UNREADABLE, text)
    with pytest.raises(CaptureError, match=text):
        nfstrace.load(path)


def test_permission_denied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "secret.pcap"
    path.write_bytes(SAMPLE.read_bytes())
    if os.geteuid() == 0:  # root reads anything: make open() refuse as the kernel would
        from nfstrace.parsers import capture

        def refuse(p, mode="r", *a, **k):
            raise PermissionError(13, "Permission denied", str(p))

        monkeypatch.setattr(capture, "open", refuse, raising=False)
    else:
        path.chmod(0)
    _one_line_error(
        runner.invoke(app, ["analyze", str(path)]), ExitStatus.UNREADABLE, "Permission denied"
    )


def test_a_directory_and_a_device(tmp_path: Path) -> None:
    _one_line_error(runner.invoke(app, ["analyze", str(tmp_path)]), ExitStatus.UNREADABLE, "dir")
    _one_line_error(
        runner.invoke(app, ["analyze", "/dev/null"]), ExitStatus.UNREADABLE, "empty file"
    )


# ---- the command line on damaged captures -------------------------------------------------------


def test_damaged_capture_exit_status_and_outputs(tmp_path: Path) -> None:
    """Analysed as far as it goes: every output written, the warnings on stderr
    (and in the JSON), exit status DAMAGED (6)."""
    blob = md.pcap_bytes(md.exchange())
    path = tmp_path / "cut.pcap"
    path.write_bytes(blob[: len(blob) - 30])
    out = tmp_path / "s.json"
    r = runner.invoke(app, ["analyze", str(path), "--json", str(out), "-o", str(tmp_path / "r")])
    assert r.exit_code == ExitStatus.DAMAGED, r.output
    assert "nfstrace: warning:" in r.stderr and "capture cut off" in r.stderr
    assert "Traceback" not in r.output
    assert "damage:" in r.stdout  # the summary's capture section says it too
    summary = json.loads(out.read_text())
    assert any("capture cut off" in w for w in summary["warnings"])
    assert "capture cut off" in (tmp_path / "r").read_text(encoding="utf-8")  # the report too
    assert path.read_bytes() == blob[: len(blob) - 30]  # the user's file untouched


def test_no_rpc_in_a_damaged_capture(tmp_path: Path) -> None:
    blob = md.pcap_bytes(md.exchange())[:100]
    path = tmp_path / "tiny.pcap"
    path.write_bytes(blob)
    r = runner.invoke(app, ["analyze", str(path), "--no-report"])
    assert r.exit_code == ExitStatus.NO_RPC
    assert "capture cut off" in r.stderr and "no ONC-RPC traffic" in r.stderr


def test_internal_error_is_one_line_and_debug_shows_the_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import nfstrace.trace

    def broken(*a, **k):
        raise RuntimeError("a bug")

    monkeypatch.setattr(nfstrace.trace, "load", broken)  # (the command imports it when it runs)
    r = runner.invoke(app, ["analyze", str(SAMPLE), "--no-report"])
    assert r.exit_code == ExitStatus.ERROR
    assert "Traceback" not in r.output
    assert r.stderr.strip().splitlines() == [
        "nfstrace: internal error: RuntimeError: a bug (run with --debug for details)"
    ]
    r = runner.invoke(app, ["analyze", str(SAMPLE), "--no-report", "--debug"])
    assert r.exit_code == ExitStatus.ERROR
    assert "Traceback (most recent call last)" in r.stderr and "RuntimeError: a bug" in r.stderr


def test_debug_shows_the_traceback_of_an_input_error(tmp_path: Path) -> None:
    r = runner.invoke(app, ["analyze", str(tmp_path / "none.pcap"), "--debug"])
    assert r.exit_code == ExitStatus.UNREADABLE
    assert "Traceback (most recent call last)" in r.stderr and "CaptureError" in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("nfstrace: error: no such file")


def test_output_not_writable(tmp_path: Path) -> None:
    r = runner.invoke(
        app, ["analyze", str(SAMPLE), "--no-report", "--json", str(tmp_path / "no" / "s.json")]
    )
    _one_line_error(r, ExitStatus.OUTPUT, "cannot write")


def test_hostile_capture_path_in_the_terminal(tmp_path: Path) -> None:
    """A capture named like rich markup is printed as it is, not interpreted."""
    path = tmp_path / "[red]x[bold]y[link=file:x]z.pcap"
    path.write_bytes(SAMPLE.read_bytes())
    r = runner.invoke(app, ["analyze", str(path), "--no-report"])
    assert r.exit_code == 0, r.output
    assert "[red]x[bold]y[link=file:x]z.pcap" in r.stdout


# ---- crashes found by fuzzing ---------------------------------------------------------------


REGRESSION_FILES = sorted(REGRESSIONS.glob("*.pcap*"))


def test_there_are_regression_captures() -> None:
    assert len(REGRESSION_FILES) >= 1


@pytest.mark.parametrize("path", REGRESSION_FILES, ids=lambda p: p.name)
def test_fuzz_regressions_end_in_a_result_or_an_nfstrace_error(path: Path, tmp_path: Path) -> None:
    """Each capture once crashed the pipeline (regressions/README.md says how)."""
    outcome, seconds = run_pipeline(path.read_bytes(), tmp_path, html=True)
    assert outcome == "ok" or outcome.endswith("Error")
    assert seconds < 60


# ---- the capture's clock running backwards (issue 20, item 3) --------------------------


@pytest.mark.parametrize("transport", ["udp", "tcp"])
def test_reply_stamped_before_its_call(tmp_path: Path, transport: str) -> None:
    """Two packets, the reply 1 µs before its WRITE call: once a TypeError (the
    reply became a reply without call whose bytes reached the throughput code).
    Matched in capture order, as tshark does; its latency negative in the table,
    0 in the analyses; the capture fact said; the command line exits 0."""
    path = tmp_path / f"back_{transport}.pcap"
    path.write_bytes(md.pcap_bytes(md.reply_before_call(transport)))
    t = nfstrace.load(path, AnalysisConfig())
    w = t.transactions[t.transactions["op"] == "WRITE"]
    assert len(w) == 1 and int(w["n_calls"].iloc[0]) == 1 and int(w["n_replies"].iloc[0]) == 1
    assert int(w["latency_ns"].iloc[0]) == -1_000
    assert int(w["write_bytes"].iloc[0]) == 4096
    d = t.diagnosis
    assert d.quality.replies_before_call == 1
    kinds = [f.kind for f in d.findings]
    assert "clock_backwards" in kinds
    assert (d.pace.outstanding["outstanding"] >= 0).all()
    r = runner.invoke(app, ["analyze", str(path), "-q", "--no-report"])
    assert r.exit_code == 0, r.output
    assert "reply stamped before its call" in r.stdout


def test_clock_running_backwards_limits_the_conclusions(tmp_path: Path) -> None:
    """Every frame stamped 1 ms before the previous one: all 50 WRITEs matched,
    the diagnosis leads with the clock and the verdict is hedged."""
    path = tmp_path / "backwards.pcap"
    path.write_bytes(md.pcap_bytes(md.clock_running_backwards()))
    t = nfstrace.load(path, AnalysisConfig())
    assert answered(t) == [md.XID0 + i for i in range(50)]
    q = t.diagnosis.quality
    assert q.replies_before_call == 50 and q.messages_back_in_time == 99 and q.clock_limits
    first = t.diagnosis.findings[0]
    assert "clock ran backwards" in first.title
    assert any("clock ran backwards" in limit for limit in t.diagnosis.verdict.limits)
    out = tmp_path / "s.json"
    r = runner.invoke(app, ["analyze", str(path), "-q", "--json", str(out)])
    assert r.exit_code == 0, r.output
    assert '"replies_before_call": 50' in out.read_text()


def test_throughput_of_replies_without_their_call() -> None:
    """An NFSv4 WRITE reply decoded without its call carries bytes but no call
    time: the throughput's span starts at its reply (int(NA) once crashed)."""
    from nfstrace.analysis.overview import throughput

    tx = pd.DataFrame(
        {
            "write_bytes": [4096, 4096],
            "t_call_ns": pd.array([None, 5_000], dtype="Int64"),
            "t_reply_ns": pd.array([1_005_000, 9_000], dtype="Int64"),
        }
    )
    t = throughput(tx, "write_bytes")
    assert t is not None and t.bytes == 8192 and t.seconds == pytest.approx(0.001)
    alone = throughput(tx.iloc[:1], "write_bytes")
    assert alone is not None and alone.seconds == 0 and math.isnan(alone.mbits_per_s)


def test_forgetting_calls_waiting_for_a_reply_is_a_warning(tmp_path: Path) -> None:
    """60 WRITE calls outstanding with room for 50 (issue 20, item 6): the 10
    oldest are forgotten; the replies to 5 of them cannot be decoded (no bytes
    written). Once silent: now a warning naming the limit. Calls answered
    before being forgotten are no loss and no warning."""
    path = md.outstanding_calls(60, answered=5).write(tmp_path / "outstanding.pcap")
    t = nfstrace.load(path, AnalysisConfig(limits=ParseLimits(max_pending_calls=50)))
    assert t.stats.anomalies.get("calls_forgotten") == 10
    assert "max_pending_calls" in warnings_of(t)
    assert t.stats.replies_without_call_info == 5
    roomy = nfstrace.load(path, AnalysisConfig())
    assert "calls_forgotten" not in roomy.stats.anomalies and not roomy.stats.warnings
    assert int(roomy.transactions["write_bytes"].sum()) == 5 * 512
    answered_first = md.exchange(60).write(tmp_path / "answered.pcap")
    quiet = nfstrace.load(answered_first, AnalysisConfig(limits=ParseLimits(max_pending_calls=50)))
    assert "calls_forgotten" not in quiet.stats.anomalies


def test_calls_waiting_for_a_reply_are_bounded_in_memory(tmp_path: Path) -> None:
    """Not only their count: max_pending_call_bytes at PENDING_CALL_BYTES each
    (a million unanswered calls held ~170 MB in the Rust parser, ~360 MB in the
    Python one; now 128 MiB at most), the same calls forgotten in both parsers
    (issue 30 item 6)."""
    from nfstrace.config import PENDING_CALL_BYTES

    limits = ParseLimits(max_pending_call_bytes=50 * PENDING_CALL_BYTES)
    assert limits.pending_calls == 50 < limits.max_pending_calls
    assert ParseLimits().pending_calls * PENDING_CALL_BYTES <= 128 * 1024 * 1024
    path = md.outstanding_calls(60, answered=5).write(tmp_path / "outstanding.pcap")
    t = nfstrace.load(path, AnalysisConfig(limits=limits))
    assert t.stats.anomalies.get("calls_forgotten") == 10
    assert "max_pending_call_bytes" in warnings_of(t)
    assert t.stats.replies_without_call_info == 5


def test_impossible_interface_drop_count_is_left_out(tmp_path: Path) -> None:
    """An interface statistics block with a drop count of all ones (issue 20, item
    10: once summed into 9.2e18 drops): left out and said; a real count beside it
    (interface 0's OS drops) is kept."""
    blob = md.pcapng_bytes(md.exchange())
    isb = mc.pcapng_isb(
        0,
        0,
        (mc.ISB_IFDROP, struct.pack("<Q", 2**64 - 1)),
        (capture_format.ISB_OSDROP, struct.pack("<Q", 7)),
    )
    path = tmp_path / "drops.pcapng"
    path.write_bytes(blob + isb)
    t = nfstrace.load(path, AnalysisConfig())
    assert answered(t) == XIDS
    assert t.stats.interface_drops == 7
    assert "impossible drop count" in warnings_of(t)
    assert "18,446,744,073,709,551,615" in warnings_of(t)


@pytest.mark.slow
def test_reading_stops_at_the_message_limit(tmp_path: Path) -> None:
    """Millions of tiny RPCs would fill memory (issue 20, item 4: ~1 KB per
    message through the analysis): past ParseLimits.max_messages (checked every
    CHECK_EVERY_FRAMES frames) the parser stops, says where, and what it read is
    analysed."""
    from nfstrace.config import CHECK_EVERY_FRAMES, default_max_messages

    path = md.exchange(3000).write(tmp_path / "many.pcap")  # 6,003 frames
    t = nfstrace.load(path, AnalysisConfig(limits=ParseLimits(max_messages=1000)))
    assert t.stats.anomalies["messages_limit"] == CHECK_EVERY_FRAMES
    assert t.stats.frames == CHECK_EVERY_FRAMES - 1
    assert len(t.messages) == CHECK_EVERY_FRAMES - 1 - 3  # after the handshake
    assert "max_messages" in warnings_of(t) and "not analysed" in warnings_of(t)
    assert len(answered(t)) == (CHECK_EVERY_FRAMES - 1 - 3) // 2
    whole = nfstrace.load(path, AnalysisConfig())
    assert "messages_limit" not in whole.stats.anomalies and len(whole.messages) == 6000
    assert ParseLimits().max_messages == pytest.approx(default_max_messages(), rel=0.2)
    assert ParseLimits().max_messages >= 1_000_000


def test_a_fraction_of_a_second_past_one_second_is_read_clamped(tmp_path: Path) -> None:
    """A pcap record with ts_usec 0xFFFFFFFF is read (tshark reads it), its time
    clamped to its second's last tick: every frame and every call/reply kept
    whichever record it is (it was taken as damage to search past, or its time
    carried 71 minutes ahead aged out the state; issue 30 item 9)."""
    blob = md.pcap_bytes(md.exchange())
    whole = load_bytes(tmp_path, blob, "whole.pcap")
    starts, pos = [], 24
    while pos < len(blob):
        starts.append(pos)
        pos += 16 + struct.unpack_from("<I", blob, pos + 8)[0]
    for at in starts[::3]:  # calls, replies, handshake, first and last records
        odd = bytearray(blob)
        struct.pack_into("<I", odd, at + 4, 0xFFFFFFFF)
        t = nfstrace.load(_write(tmp_path, bytes(odd)), AnalysisConfig())
        assert t.stats.frames == whole.stats.frames, at
        assert answered(t) == answered(whole), at
        assert len(t.transactions) == len(whole.transactions), at
        assert "impossible timestamp" in warnings_of(t), at
        assert (t.messages["ts_first_ns"] < whole.messages["ts_last_ns"].max() + 10**9).all()


def _write(tmp_path: Path, blob: bytes) -> Path:
    path = tmp_path / "odd-usec.pcap"
    path.write_bytes(blob)
    return path
