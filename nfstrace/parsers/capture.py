"""Capture files -> raw frames.

Reads libpcap (both byte orders, micro- and nanosecond timestamps) and pcapng
(several sections and interfaces, per-interface link type and timestamp
resolution, interface statistics with drop counts), plain or compressed with
gzip, bzip2 or xz, and merges several files in time order.

Each frame is a tuple ``(ts_ns, linktype, data, orig_len, file_index)``: data
is a memoryview into a read chunk of several MB; copy it (``bytes(data)``) to
keep it long without pinning the chunk.  Nothing here knows about IP or RPC.
"""

from __future__ import annotations

import bz2
import gzip
import heapq
import lzma
import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from nfstrace.errors import CaptureError

Frame = tuple[int, int, memoryview, int, int]

CHUNK = 4 * 1024 * 1024
# A frame claiming more than this is damage, not data (pcap has no way to
# resynchronise after a bad length, so reading of that file stops there).
MAX_FRAME = 256 * 1024 * 1024

# pcap magic numbers, as read little-endian
PCAP_MAGIC_US = 0xA1B2C3D4
PCAP_MAGIC_NS = 0xA1B23C4D
# pcapng block types
PCAPNG_SHB = 0x0A0D0D0A
PCAPNG_IDB = 0x00000001
PCAPNG_PB = 0x00000002  # obsolete Packet Block
PCAPNG_SPB = 0x00000003
PCAPNG_ISB = 0x00000005
PCAPNG_EPB = 0x00000006
PCAPNG_BOM = 0x1A2B3C4D
# pcapng options
OPT_ENDOFOPT = 0
IF_TSRESOL = 9
IF_TSOFFSET = 14
ISB_IFDROP = 5
ISB_OSDROP = 7


@dataclass
class CaptureInfo:
    """What the reader learned about one file (filled in while reading)."""

    path: str
    format: str = ""  # pcap / pcapng
    compression: str = ""  # '', gzip, bzip2, xz
    linktypes: set[int] = field(default_factory=set)
    snaplen: int = 0
    frames: int = 0
    bytes: int = 0  # file bytes (uncompressed) consumed
    truncated_frames: int = 0  # caplen < orig_len
    interface_drops: int = 0  # from pcapng interface statistics blocks
    warnings: list[str] = field(default_factory=list)


def open_stream(path: str) -> tuple[BinaryIO, str]:
    """Open a capture, transparently decompressing; returns (stream, compression)."""
    try:
        raw = open(path, "rb")  # noqa: SIM115 - returned to the caller
    except FileNotFoundError:
        raise CaptureError("no such file", path) from None
    except IsADirectoryError:
        raise CaptureError("is a directory, not a capture file", path) from None
    except OSError as e:
        raise CaptureError(f"cannot open: {e.strerror}", path) from None
    magic = raw.read(6)
    raw.seek(0)
    if magic[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw), "gzip"  # type: ignore[return-value]
    if magic[:3] == b"BZh":
        return bz2.BZ2File(raw), "bzip2"  # type: ignore[return-value]
    if magic == b"\xfd7zXZ\x00":
        return lzma.LZMAFile(raw), "xz"  # type: ignore[return-value]
    return raw, ""


class _Buffer:
    """Chunked reader: hands out memoryviews of at least n bytes."""

    __slots__ = ("buf", "consumed", "eof", "error", "pos", "stream")

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.buf = b""
        self.pos = 0
        self.consumed = 0
        self.eof = False
        self.error = ""

    def fill(self, n: int) -> bool:
        """Make n bytes available at self.pos; False at end of data."""
        have = len(self.buf) - self.pos
        if have >= n:
            return True
        parts = [self.buf[self.pos :]]
        while have < n and not self.eof:
            try:
                chunk = self.stream.read(max(CHUNK, n - have))
            except (OSError, EOFError, lzma.LZMAError, zlib.error) as e:
                # gzip/bz2/xz raise on corrupt or cut-off compressed data: keep
                # what was decompressed so far.
                self.error = f"decompression stopped: {e}"
                chunk = b""
            if not chunk:
                self.eof = True
                break
            parts.append(chunk)
            have += len(chunk)
        self.consumed += self.pos
        self.buf = b"".join(parts)
        self.pos = 0
        return have >= n


def read_frames(path: str, index: int, info: CaptureInfo) -> Iterator[Frame]:
    """Frames of one file, in file order."""
    stream, info.compression = open_stream(path)
    with stream:
        buf = _Buffer(stream)
        try:
            ok = buf.fill(4)
        except gzip.BadGzipFile as e:
            raise CaptureError(f"not a readable gzip file: {e}", path) from None
        if not ok:
            raise CaptureError(
                "empty file" if not buf.buf else "too short to be a capture file", path
            )
        (magic_le,) = struct.unpack_from("<I", buf.buf, 0)
        (magic_be,) = struct.unpack_from(">I", buf.buf, 0)
        if magic_le in (PCAP_MAGIC_US, PCAP_MAGIC_NS):
            info.format = "pcap"
            yield from _pcap(buf, "<", magic_le == PCAP_MAGIC_NS, index, info)
        elif magic_be in (PCAP_MAGIC_US, PCAP_MAGIC_NS):
            info.format = "pcap"
            yield from _pcap(buf, ">", magic_be == PCAP_MAGIC_NS, index, info)
        elif magic_le == PCAPNG_SHB:
            info.format = "pcapng"
            yield from _pcapng(buf, index, info)
        else:
            raise CaptureError("not a pcap or pcapng capture file", path)
        if buf.error:
            info.warnings.append(buf.error)
        info.bytes = buf.consumed + buf.pos


def _pcap(buf: _Buffer, e: str, nanos: bool, index: int, info: CaptureInfo) -> Iterator[Frame]:
    if not buf.fill(24):
        raise CaptureError("pcap file header cut short", info.path)
    _magic, _vmaj, _vmin, _zone, _sigfigs, snaplen, linktype = struct.unpack_from(
        e + "IHHiIII", buf.buf, buf.pos
    )
    # The upper bits of the link-type field may carry FCS length flags.
    linktype &= 0x0FFFFFFF
    info.snaplen = snaplen
    info.linktypes.add(linktype)
    buf.pos += 24
    rec = struct.Struct(e + "IIII").unpack_from
    frac = 1 if nanos else 1000
    frames = 0
    truncated = 0
    while True:
        if not buf.fill(16):
            if len(buf.buf) - buf.pos:
                info.warnings.append("file ends inside a frame header (capture cut off)")
            break
        sec, sub, caplen, origlen = rec(buf.buf, buf.pos)
        if caplen > MAX_FRAME:
            info.warnings.append(
                f"frame {frames + 1}: impossible captured length {caplen}; rest of file skipped"
            )
            break
        if not buf.fill(16 + caplen):
            info.warnings.append(f"file ends inside frame {frames + 1} (capture cut off)")
            break
        start = buf.pos + 16
        buf.pos = start + caplen
        frames += 1
        if caplen < origlen:
            truncated += 1
        info.frames = frames
        info.truncated_frames = truncated
        yield (
            sec * 1_000_000_000 + sub * frac,
            linktype,
            memoryview(buf.buf)[start : start + caplen],
            origlen,
            index,
        )


@dataclass
class _Interface:
    linktype: int
    snaplen: int
    ts_mul: int = 1000  # ns per tick (when resolution divides a ns)
    ts_div: int = 1  # ticks per ns unit otherwise
    ts_offset_ns: int = 0


INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def _ns(ticks: int, iface: _Interface) -> int:
    """A pcapng timestamp in ns since the epoch; absurd ones (damage) clamped
    into the int64 the tables hold."""
    ns = ticks * iface.ts_mul // iface.ts_div + iface.ts_offset_ns
    return min(max(ns, INT64_MIN), INT64_MAX)


def _parse_options(data: bytes | memoryview, e: str) -> Iterator[tuple[int, memoryview]]:
    mv = memoryview(data)
    pos = 0
    while pos + 4 <= len(mv):
        code, length = struct.unpack_from(e + "HH", mv, pos)
        if code == OPT_ENDOFOPT:
            return
        yield code, mv[pos + 4 : pos + 4 + length]
        pos += 4 + ((length + 3) & ~3)


def _interface(body: memoryview, e: str) -> _Interface:
    linktype, _reserved, snaplen = struct.unpack_from(e + "HHI", body, 0)
    iface = _Interface(linktype=linktype, snaplen=snaplen)
    for code, value in _parse_options(body[8:], e):
        if code == IF_TSRESOL and len(value) >= 1:
            v = value[0]
            if v & 0x80:  # negative power of two
                iface.ts_mul, iface.ts_div = 1_000_000_000, 1 << (v & 0x7F)
            elif v <= 9:
                iface.ts_mul, iface.ts_div = 10 ** (9 - v), 1
            else:
                iface.ts_mul, iface.ts_div = 1, 10 ** (v - 9)
        elif code == IF_TSOFFSET and len(value) >= 8:
            (iface.ts_offset_ns,) = struct.unpack_from(e + "q", value, 0)
            iface.ts_offset_ns *= 1_000_000_000
    return iface


def _pcapng(buf: _Buffer, index: int, info: CaptureInfo) -> Iterator[Frame]:
    e = "<"
    ifaces: list[_Interface] = []
    frames = 0
    truncated = 0
    drops: dict[int, int] = {}
    while True:
        if not buf.fill(12):
            if len(buf.buf) - buf.pos:
                info.warnings.append("file ends inside a block header (capture cut off)")
            break
        btype, blen = struct.unpack_from(e + "II", buf.buf, buf.pos)
        if btype == PCAPNG_SHB:
            (bom,) = struct.unpack_from("<I", buf.buf, buf.pos + 8)
            if bom == PCAPNG_BOM:
                e = "<"
            elif bom == 0x4D3C2B1A:
                e = ">"
            else:
                info.warnings.append("pcapng section header with bad byte-order magic; stopped")
                break
            (blen,) = struct.unpack_from(e + "I", buf.buf, buf.pos + 4)
            ifaces = []  # interface ids are per section
        if blen < 12 or blen % 4 or blen > MAX_FRAME:
            info.warnings.append(
                f"pcapng block with impossible length {blen}; rest of file skipped"
            )
            break
        if not buf.fill(blen):
            info.warnings.append("file ends inside a block (capture cut off)")
            break
        block = memoryview(buf.buf)[buf.pos : buf.pos + blen]
        buf.pos += blen
        body = block[8 : blen - 4]
        if btype == PCAPNG_EPB:
            iface_id, ts_hi, ts_lo, caplen, origlen = struct.unpack_from(e + "IIIII", body, 0)
            if iface_id >= len(ifaces) or 20 + caplen > len(body):
                info.warnings.append(f"pcapng packet block {frames + 1} is inconsistent; skipped")
                continue
            iface = ifaces[iface_id]
            ticks = (ts_hi << 32) | ts_lo
            ts = _ns(ticks, iface)
            frames += 1
            if caplen < origlen:
                truncated += 1
            info.frames = frames
            info.truncated_frames = truncated
            yield ts, iface.linktype, body[20 : 20 + caplen], origlen, index
        elif btype == PCAPNG_IDB:
            iface = _interface(body, e)
            ifaces.append(iface)
            info.linktypes.add(iface.linktype)
            info.snaplen = max(info.snaplen, iface.snaplen)
        elif btype == PCAPNG_SPB:
            # No timestamp and no interface id: interface 0, time unknown (0).
            if not ifaces:
                continue
            (origlen,) = struct.unpack_from(e + "I", body, 0)
            caplen = min(origlen, len(body) - 4, ifaces[0].snaplen or origlen)
            frames += 1
            info.frames = frames
            yield 0, ifaces[0].linktype, body[4 : 4 + caplen], origlen, index
        elif btype == PCAPNG_PB:
            iface_id, _drops, ts_hi, ts_lo, caplen, origlen = struct.unpack_from(
                e + "HHIIII", body, 0
            )
            if iface_id >= len(ifaces) or 20 + caplen > len(body):
                continue
            iface = ifaces[iface_id]
            ts = _ns((ts_hi << 32) | ts_lo, iface)
            frames += 1
            info.frames = frames
            yield ts, iface.linktype, body[20 : 20 + caplen], origlen, index
        elif btype == PCAPNG_ISB:
            (iface_id,) = struct.unpack_from(e + "I", body, 0)
            for code, value in _parse_options(body[12:], e):
                if code in (ISB_IFDROP, ISB_OSDROP) and len(value) >= 8:
                    # Statistics are cumulative: keep the latest per interface.
                    key = (iface_id << 1) | (code == ISB_OSDROP)
                    drops[key] = struct.unpack_from(e + "Q", value, 0)[0]
            info.interface_drops = sum(drops.values())
        # other blocks (name resolution, decryption secrets, custom) are skipped


def read_many(paths: list[str], infos: list[CaptureInfo]) -> Iterator[Frame]:
    """Frames of several files merged in time order (rotated captures).

    The merge trusts each file to be in time order, as tcpdump writes them.
    """
    streams = [
        read_frames(p, i, info) for i, (p, info) in enumerate(zip(paths, infos, strict=True))
    ]
    if len(streams) == 1:
        return streams[0]
    return heapq.merge(*streams, key=lambda f: f[0])


def file_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
