"""Capture files -> raw frames.

Reads libpcap (both byte orders, micro- and nanosecond timestamps) and pcapng
(several sections and interfaces, per-interface link type and timestamp
resolution, interface statistics with drop counts), plain or compressed with
gzip, bzip2 or xz, and merges several files in time order.

Each frame is a tuple ``(ts_ns, linktype, data, orig_len, file_index)``: data
is a memoryview into a read chunk of several MB; copy it (``bytes(data)``) to
keep it long without pinning the chunk.  Nothing here knows about IP or RPC.

Damaged files are read as far as they go, and past the damage where a record
can be found again (wiretap and libpcap stop at the first bad record):

* cut off (in a record, a block, or the compressed stream): every whole frame
  before the cut is kept;
* a pcap record header with impossible lengths (captured length above
  ``ParseLimits.max_frame_bytes`` (256 KiB, the libpcap/wiretap maximum), or
  above the file's snaplen or its own wire length without a plausible record
  after it): the reader steps forward byte by byte to the next position where
  a plausible record header is followed by another one (or the end of the
  file) and goes on from there;
* a pcapng block whose length is impossible or disagrees with its trailing
  copy: the same search for the next block whose two lengths agree;
  a packet block inconsistent inside (unknown interface, captured length past
  the block) is skipped;
* captures concatenated into one file (``cat a.pcap b.pcap``): the second
  file header is read as such, and its frames follow;
* a timestamp outside what a pcap can express (pcapng with a corrupt
  resolution or offset) is clamped to that range.

Each kind of damage is counted per file (``CaptureInfo.damage``) and reported
as one warning with its count, where it was first seen and the bytes skipped.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import heapq
import lzma
import os
import shutil
import stat
import struct
import sys
import tempfile
import zlib
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

import numpy as np

from nfstrace.errors import CaptureError

# Bytes as read: the readers hand out memoryviews of their buffers, the
# backends and the tests bytes; the dissectors take either.
Bytes = bytes | memoryview
Frame = tuple[int, int, Bytes, int, int]
# progress(frames read, bytes read from the capture files on disk, or -1 when
# the reader does not count them): called every 16,384 frames while parsing.
Progress = Callable[[int, int], None]

CHUNK = 4 * 1024 * 1024
# Compressed streams are read in pieces of this size: a read that fails (data
# cut off or corrupt) loses nothing decompressed before it.
COMPRESSED_PIECE = 256 * 1024
# The largest frame libpcap and wiretap accept (WTAP_MAX_PACKET_SIZE_STANDARD);
# the default of ParseLimits.max_frame_bytes.
MAX_CAPLEN = 262144
# A compressed capture that has unpacked to more than RATIO_CHECK_BYTES at more
# than this many bytes out per byte in is not a capture but a decompression
# bomb: reading stops there (a warning, exit 6; what was read is analysed).
# Real captures stay far below it: gzip cannot pass ~1,030:1 at all, and a
# capture of zero-filled 1,448-byte TCP segments (the most compressible real
# traffic: headers and timestamps change in every frame) packs 107:1 with
# gzip, 246:1 with bzip2 and 283:1 with xz.
MAX_DECOMPRESSION_RATIO = 1000
RATIO_CHECK_BYTES = 64 * 1024 * 1024
# A pcapng block longer than this is damage (bounds what one block may pin in
# memory; packet blocks are bounded by the frame limit as well).
MAX_BLOCK = 32 * 1024 * 1024
# Interfaces one pcapng section may describe (interface ids in packet blocks
# are 16 or 32 bits: a flood of interface blocks is damage).
MAX_INTERFACES = 65536
# Kept for the dpkt backend's own reader.
MAX_FRAME = 256 * 1024 * 1024
# A frame's wire length above this is taken as damage when searching for a record.
MAX_WIRE = 256 * 1024 * 1024
# Timestamps are kept within what a pcap can express (u32 seconds).
MAX_TS_NS = (1 << 32) * 1_000_000_000
# A candidate record header found by the resync search must be stamped within
# this long of the last good frame.
RESYNC_TS_WINDOW_S = 30 * 86400
# Bytes examined at a time by the resync search.
RESYNC_WINDOW = 1024 * 1024

# pcap magic numbers, as read little-endian
PCAP_MAGIC_US = 0xA1B2C3D4
PCAP_MAGIC_NS = 0xA1B23C4D
# ... and as the file's first four bytes: (byte order, nanoseconds)
PCAP_MAGIC_BYTES = {
    b"\xd4\xc3\xb2\xa1": ("<", False),
    b"\x4d\x3c\xb2\xa1": ("<", True),
    b"\xa1\xb2\xc3\xd4": (">", False),
    b"\xa1\xb2\x3c\x4d": (">", True),
}
# pcapng block types
PCAPNG_SHB = 0x0A0D0D0A
PCAPNG_IDB = 0x00000001
PCAPNG_PB = 0x00000002  # obsolete Packet Block
PCAPNG_SPB = 0x00000003
PCAPNG_NRB = 0x00000004
PCAPNG_ISB = 0x00000005
PCAPNG_EPB = 0x00000006
PCAPNG_JOURNAL = 0x00000009
PCAPNG_DSB = 0x0000000A
PCAPNG_CUSTOM = (0x00000BAD, 0x40000BAD)
PCAPNG_BLOCKS = frozenset(
    (
        PCAPNG_SHB,
        PCAPNG_IDB,
        PCAPNG_PB,
        PCAPNG_SPB,
        PCAPNG_NRB,
        PCAPNG_ISB,
        PCAPNG_EPB,
        PCAPNG_JOURNAL,
        PCAPNG_DSB,
        *PCAPNG_CUSTOM,
    )
)
PCAPNG_SHB_BYTES = b"\x0a\x0d\x0d\x0a"
# A pcap magic number where a record or block was expected, read in either byte order
PCAP_MAGIC_INTS = frozenset((PCAP_MAGIC_US, PCAP_MAGIC_NS, 0xD4C3B2A1, 0x4D3CB2A1))
HEADER_INTS = PCAP_MAGIC_INTS | {PCAPNG_SHB}
PCAPNG_BOM = 0x1A2B3C4D
# pcapng options
OPT_ENDOFOPT = 0
IF_TSRESOL = 9
IF_TSOFFSET = 14
ISB_IFDROP = 5
ISB_OSDROP = 7

# Kinds of damage (CaptureInfo.damage keys) and how each is reported
DAMAGE = {
    "cut": "the file ends inside a {what} (capture cut off): {count} frames before it kept",
    "decompression": "decompression stopped ({detail}): every frame before it kept",
    "bad_record": "{count} pcap record headers with impossible lengths (first at byte "
    "{offset}): {skipped:,} bytes skipped to the next plausible record",
    "bad_block": "{count} pcapng blocks with impossible lengths (first at byte {offset}): "
    "{skipped:,} bytes skipped to the next plausible block",
    "bad_packet_block": "{count} pcapng packet blocks inconsistent inside (first at byte "
    "{offset}: {detail}): skipped",
    "over_snaplen": "{count} frames longer than the snaplen in the file header (first at "
    "byte {offset}): kept",
    "bad_timestamp": "{count} frames with an impossible timestamp (first at byte {offset}): "
    "clamped to the range of a pcap",
    "concatenated": "{count} more capture file headers inside the file (files concatenated; "
    "first at byte {offset}): their frames read on",
    "lost_tail": "no plausible record after the damage at byte {offset}: the last "
    "{skipped:,} bytes skipped",
    "bad_drop_count": "{count} interface statistics with an impossible drop count (first at "
    "byte {offset}: {detail}): left out of the drops",
}


@dataclass
class Damage:
    """One kind of damage in one file: how often, where first, bytes skipped."""

    count: int = 0
    offset: int = -1  # file byte (uncompressed) where first seen
    skipped: int = 0  # bytes stepped over because of it
    detail: str = ""  # what the first one was
    what: str = ""


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
    # bytes read from the file on disk so far (packed): progress only, not a fact of the file
    read_bytes: int = field(default=0, compare=False)
    truncated_frames: int = 0  # caplen < orig_len
    interface_drops: int = 0  # from pcapng interface statistics blocks
    damage: dict[str, Damage] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def note(
        self, kind: str, offset: int, skipped: int = 0, detail: str = "", what: str = ""
    ) -> None:
        """Count one piece of damage of this kind (see DAMAGE)."""
        d = self.damage.get(kind)
        if d is None:
            d = self.damage[kind] = Damage(offset=offset, detail=detail, what=what)
        d.count += 1
        d.skipped += skipped

    @property
    def skipped_bytes(self) -> int:
        return sum(d.skipped for d in self.damage.values())

    def finish(self) -> None:
        """Turn the damage counts into warnings (one per kind, in DAMAGE order)."""
        for kind, text in DAMAGE.items():
            d = self.damage.get(kind)
            if d is not None:
                self.warnings.append(
                    text.format(
                        count=f"{d.count:,}" if kind != "cut" else f"{self.frames:,}",
                        offset=f"{d.offset:,}",
                        skipped=d.skipped,
                        detail=d.detail,
                        what=d.what,
                    )
                )


STDIN = "-"  # the capture path that means standard input
SPOOL_CHUNK = 1024 * 1024  # bytes copied at a time from a pipe to its temporary file
# A pcapng interface-statistics drop count above this is no count (some writers
# fill an unknown one with all ones): left out (noted as damage), never summed.
MAX_INTERFACE_DROPS = 1 << 48


def _needs_spooling(path: str) -> bool:
    if path == STDIN:
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False  # missing or unreadable: opening it says why
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode)


@contextlib.contextmanager
def regular_files(paths: list[str]) -> Iterator[list[str]]:
    """The captures as files that can be read twice: standard input (``-``) and
    pipes, FIFOs or devices (``<(tcpdump -w - ...)``, ``/dev/stdin``) are copied
    once into a temporary file (as large as the capture; under $TMPDIR),
    deleted afterwards; regular files are read where they are."""
    spooled: list[str] = []
    try:
        out = []
        for path in paths:
            if not _needs_spooling(path):
                out.append(path)
                continue
            fd, name = tempfile.mkstemp(prefix="nfstrace-input-", suffix=".capture")
            spooled.append(name)
            try:
                with os.fdopen(fd, "wb") as copy:
                    if path == STDIN:
                        shutil.copyfileobj(sys.stdin.buffer, copy, SPOOL_CHUNK)
                    else:
                        with open(path, "rb") as source:
                            shutil.copyfileobj(source, copy, SPOOL_CHUNK)
            except OSError as e:
                raise CaptureError(f"cannot read: {e.strerror or e}", path) from None
            out.append(name)
        yield out
    finally:
        for name in spooled:
            with contextlib.suppress(OSError):
                os.unlink(name)


# The first bytes of the files a directory argument contributes: pcap (either
# byte order, µs or ns), pcapng, and the compressions open_stream reads.
CAPTURE_STARTS = (
    *PCAP_MAGIC_BYTES,
    PCAPNG_SHB_BYTES,
    b"\x1f\x8b",
    b"BZh",
    b"\xfd7zXZ\x00",
)


def expand_directories(paths: list[str]) -> list[str]:
    """The captures named, a directory standing for the capture files directly
    in it (rotated ``tcpdump -C/-G`` output): its regular, not hidden files
    that begin as a pcap, pcapng or compressed file, by name (the frames are
    merged in time order whatever the order).  A directory without one is an
    error naming it."""
    out: list[str] = []
    for path in paths:
        if path == STDIN or not os.path.isdir(path):
            out.append(path)
            continue
        found = []
        with os.scandir(path) as entries:
            for entry in entries:
                if entry.name.startswith(".") or not entry.is_file():
                    continue
                try:
                    with open(entry.path, "rb") as f:
                        head = f.read(6)
                except OSError:
                    continue
                if head.startswith(CAPTURE_STARTS):
                    found.append(entry.path)
        if not found:
            raise CaptureError(
                "a directory without capture files (pcap, pcapng, .gz/.bz2/.xz)", path
            )
        out.extend(sorted(found))
    return out


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
    try:
        magic = raw.read(6)
        raw.seek(0)
    except OSError as e:  # a device, a pipe, an I/O error
        raw.close()
        raise CaptureError(f"cannot read: {e.strerror or e}", path) from None
    counted = _Counted(raw)
    if magic[:2] == b"\x1f\x8b":
        return _Gzip(counted), "gzip"  # type: ignore[return-value]
    if magic[:3] == b"BZh":
        return _Bzip2(counted), "bzip2"  # type: ignore[return-value]
    if magic == b"\xfd7zXZ\x00":
        return _Xz(counted), "xz"  # type: ignore[return-value]
    return raw, ""


class _Counted:
    """A file read by a decompressor, counting the compressed bytes it took."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.taken = 0
        self.name = getattr(raw, "name", "")

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        self.taken += len(data)
        return data

    def close(self) -> None:
        self.raw.close()


class _ClosesItsFile:
    """Mixin for a decompressing stream over a ``_Counted`` file: keeps it as
    ``counted`` and closes it too (gzip, bz2 and lzma leave a file object they
    were given open)."""

    counted: _Counted

    def close(self) -> None:
        super().close()  # type: ignore[misc]
        self.counted.close()


class _Gzip(_ClosesItsFile, gzip.GzipFile):
    def __init__(self, counted: _Counted) -> None:
        super().__init__(fileobj=counted)  # type: ignore[call-overload]
        self.counted = counted


class _Bzip2(_ClosesItsFile, bz2.BZ2File):
    def __init__(self, counted: _Counted) -> None:
        super().__init__(counted)  # type: ignore[call-overload]
        self.counted = counted


class _Xz(_ClosesItsFile, lzma.LZMAFile):
    def __init__(self, counted: _Counted) -> None:
        super().__init__(counted)  # type: ignore[arg-type]
        self.counted = counted


def file_bytes_read(stream: BinaryIO, unpacked: int) -> int:
    """Bytes taken from the file on disk so far: of a decompressing stream (from
    ``open_stream``) the packed bytes its decompressor took, else ``unpacked``."""
    counted = getattr(stream, "counted", None)
    return unpacked if counted is None else counted.taken


def _bomb(stream: BinaryIO) -> str:
    """Why reading this decompressing stream must stop as a decompression bomb
    ('' if it need not): see MAX_DECOMPRESSION_RATIO."""
    out = stream.tell()
    taken = getattr(stream, "counted", None)
    if taken is None or out < RATIO_CHECK_BYTES:
        return ""
    if out > MAX_DECOMPRESSION_RATIO * max(taken.taken, 1):
        return (
            f"{out:,} bytes unpacked from {taken.taken:,}, above "
            f"{MAX_DECOMPRESSION_RATIO:,}:1: a decompression bomb, not a capture"
        )
    return ""


def read_up_to(stream: BinaryIO, n: int, compressed: bool) -> tuple[bytes, str]:
    """Up to n bytes of a capture file and why reading stopped early ('' if it
    did not): gzip/bz2/xz raise at corrupt or cut-off data; what was read
    before it is kept.  (The native parser reads compressed files through this.)"""
    parts: list[bytes] = []
    got = 0
    try:
        if not compressed:
            return stream.read(n), ""
        # read1: one decompression step per call, so a failing step loses
        # only itself, not the data decompressed before it
        while got < n:
            piece = stream.read1(min(COMPRESSED_PIECE, n - got))  # type: ignore[attr-defined]
            if not piece:
                break
            parts.append(piece)
            got += len(piece)
            bomb = _bomb(stream)
            if bomb:
                return b"".join(parts), bomb
    except (OSError, EOFError, ValueError, lzma.LZMAError, zlib.error) as e:
        return b"".join(parts), str(e) or type(e).__name__
    return b"".join(parts), ""


class _Buffer:
    """Chunked reader: hands out memoryviews of at least n bytes."""

    __slots__ = ("buf", "compressed", "consumed", "eof", "error", "info", "pos", "stream")

    def __init__(
        self, stream: BinaryIO, compressed: bool = False, info: CaptureInfo | None = None
    ) -> None:
        self.stream = stream
        self.compressed = compressed
        self.info = info  # its read_bytes kept current
        self.buf = b""
        self.pos = 0
        self.consumed = 0
        self.eof = False
        self.error = ""

    def _read(self, n: int) -> bytes:
        """Up to n bytes; at corrupt or cut-off compressed data, what was read
        before it, with self.error set."""
        data, error = read_up_to(self.stream, n, self.compressed)
        if error:
            self.error = error
        return data

    def fill(self, n: int) -> bool:
        """Make n bytes available at self.pos; False at end of data."""
        have = len(self.buf) - self.pos
        if have >= n:
            return True
        parts = [self.buf[self.pos :]]
        while have < n and not self.eof:
            chunk = self._read(max(CHUNK, n - have))
            if chunk:
                parts.append(chunk)
                have += len(chunk)
            if not chunk or self.error:
                self.eof = True
                break
        self.consumed += self.pos
        self.buf = b"".join(parts)
        self.pos = 0
        if self.info is not None:
            self.info.read_bytes = file_bytes_read(self.stream, self.consumed + len(self.buf))
        return have >= n

    def at(self) -> int:
        """File offset (uncompressed) of self.pos."""
        return self.consumed + self.pos

    def available(self) -> int:
        return len(self.buf) - self.pos


def _format_at(buf: _Buffer, at: int = 0) -> str:
    """'pcap' / 'pcapng' when a capture file header starts at buf.pos + at, else ''."""
    buf.fill(at + 4)  # from buf.pos: nothing before it is let go
    p = buf.pos + at
    magic = bytes(buf.buf[p : p + 4])
    if magic in PCAP_MAGIC_BYTES:
        return "pcap"
    if magic == PCAPNG_SHB_BYTES:
        return "pcapng"
    return ""


def _header_follows(buf: _Buffer, at: int = 0) -> str:
    """Like _format_at, for a header met where a record was expected: checked
    further (pcap version 2.x, pcapng byte-order magic), so that frame bytes
    that happen to look like a magic number are not taken for one."""
    fmt = _format_at(buf, at)
    buf.fill(at + 24)
    p = buf.pos + at
    if fmt == "pcap" and len(buf.buf) >= p + 24:
        e = PCAP_MAGIC_BYTES[bytes(buf.buf[p : p + 4])][0]
        (vmaj,) = struct.unpack_from(e + "H", buf.buf, p + 4)
        return fmt if vmaj == 2 else ""
    if fmt == "pcapng" and len(buf.buf) >= p + 12:
        bom = bytes(buf.buf[p + 8 : p + 12])
        return fmt if bom in (b"\x4d\x3c\x2b\x1a", b"\x1a\x2b\x3c\x4d") else ""
    return ""


def read_frames(
    path: str, index: int, info: CaptureInfo, max_frame: int = MAX_CAPLEN
) -> Generator[Frame, None, None]:
    """Frames of one file, in file order; frames above max_frame bytes are damage."""
    stream, info.compression = open_stream(path)
    with stream:
        buf = _Buffer(stream, compressed=bool(info.compression), info=info)
        if not buf.fill(4):
            if buf.error:
                raise CaptureError(f"cannot read {info.compression} data: {buf.error}", path)
            raise CaptureError(
                "empty file" if not buf.buf else "too short to be a capture file", path
            )
        fmt = _format_at(buf)
        if not fmt:
            raise CaptureError("not a pcap or pcapng capture file", path)
        info.format = fmt
        first = True
        while fmt:
            if fmt == "pcap":
                fmt = yield from _pcap(buf, index, info, max_frame, first)
            else:
                fmt = yield from _pcapng(buf, index, info, max_frame)
            first = False
            if fmt:
                info.note("concatenated", buf.at())
        if buf.error:
            info.note("decompression", buf.at(), detail=buf.error)
        info.bytes = buf.at()
        info.finish()


def _cut(buf: _Buffer, info: CaptureInfo, what: str) -> None:
    """The data ends inside a record: count the bytes left over."""
    left = buf.available()
    info.note("cut", buf.at(), skipped=left, what=what)
    buf.pos += left


def _u32_at_every_byte(window: np.ndarray, e: str) -> np.ndarray:
    """u32 values starting at every byte offset of window (len - 3 of them)."""
    a = window.astype(np.uint32)
    if e == "<":
        return a[:-3] | a[1:-2] << 8 | a[2:-1] << 16 | a[3:] << 24
    return a[:-3] << 24 | a[1:-2] << 16 | a[2:-1] << 8 | a[3:]


def _resync(buf: _Buffer, candidates, accept) -> int:
    """Step buf.pos forward (at least one byte) to the first position that
    `candidates` proposes and `accept` confirms; returns the bytes skipped, and
    leaves buf.pos at the end of the data when nothing is found.

    candidates(window: np.ndarray) -> offsets of possible starts in window
    (a vectorised filter); accept(buf) -> bool, at buf.pos (it may fill, so
    positions are kept as file offsets here)."""
    start = buf.at()
    buf.pos += 1
    while True:
        buf.fill(RESYNC_WINDOW + MAX_CAPLEN + 64)
        avail = buf.available()
        if avail < 16:
            buf.pos += avail
            return buf.at() - start
        n = min(RESYNC_WINDOW, avail - 15)
        window = np.frombuffer(buf.buf, dtype=np.uint8, count=n + 15, offset=buf.pos)
        base = buf.at()
        for q in candidates(window):
            buf.pos = base + int(q) - buf.consumed
            if accept(buf):
                return buf.at() - start
        buf.pos = base + n - buf.consumed


class _PcapRecords:
    """Plausibility of pcap record headers (the resync test)."""

    def __init__(self, e: str, nanos: bool, max_frame: int) -> None:
        self.e = e
        self.frac_limit = 1_000_000_000 if nanos else 1_000_000
        self.max_frame = max_frame
        self.last_sec = -1  # seconds of the last good record (-1: none yet)
        self.rec = struct.Struct(e + "IIII").unpack_from

    def plausible(self, sec: int, sub: int, caplen: int, origlen: int, near: int) -> bool:
        return (
            caplen <= self.max_frame
            and caplen <= origlen <= MAX_WIRE
            and sub < self.frac_limit
            and (near < 0 or abs(sec - near) <= RESYNC_TS_WINDOW_S)
        )

    def next_ok(self, buf: _Buffer, at: int, sec: int) -> bool:
        """Is there a plausible record (or a capture header, or the end of the
        data) at buf.pos + at?"""
        if not buf.fill(at + 16):
            return buf.eof and buf.available() == at  # the record ends the file
        if _header_follows(buf, at):
            return True
        ts_sec, ts_sub, caplen, origlen = self.rec(buf.buf, buf.pos + at)
        return self.plausible(ts_sec, ts_sub, caplen, origlen, near=sec)

    def accept(self, buf: _Buffer) -> bool:
        """A resync candidate at buf.pos: it and the record after it plausible."""
        if _header_follows(buf):
            return True
        if not buf.fill(16):
            return False
        sec, sub, caplen, origlen = self.rec(buf.buf, buf.pos)
        if not self.plausible(sec, sub, caplen, origlen, self.last_sec):
            return False
        return self.next_ok(buf, 16 + caplen, sec)

    def candidates(self, window: np.ndarray) -> np.ndarray:
        w = _u32_at_every_byte(window, self.e)
        n = len(window) - 15
        sec, sub, caplen, origlen = w[:n], w[4 : n + 4], w[8 : n + 8], w[12 : n + 12]
        ok = (caplen <= self.max_frame) & (caplen <= origlen) & (sub < self.frac_limit)
        if self.last_sec >= 0:
            ok &= np.abs(sec.astype(np.int64) - self.last_sec) <= RESYNC_TS_WINDOW_S
        return np.flatnonzero(ok | np.isin(sec, list(HEADER_INTS)))


def _pcap(
    buf: _Buffer, index: int, info: CaptureInfo, max_frame: int, first: bool
) -> Generator[Frame, None, str]:
    """Frames of one pcap section (a file header and its records); returns the
    format of a capture header met where a record was expected ('' at the end)."""
    if not buf.fill(24):
        if first:
            raise CaptureError("pcap file header cut short", info.path)
        _cut(buf, info, "file header")
        return ""
    e, nanos = PCAP_MAGIC_BYTES[bytes(buf.buf[buf.pos : buf.pos + 4])]
    _magic, _vmaj, _vmin, _zone, _sigfigs, snaplen, linktype = struct.unpack_from(
        e + "IHHiIII", buf.buf, buf.pos
    )
    # The upper bits of the link-type field may carry FCS length flags.
    linktype &= 0x0FFFFFFF
    info.snaplen = max(info.snaplen, snaplen)
    info.linktypes.add(linktype)
    buf.pos += 24
    records = _PcapRecords(e, nanos, max_frame)
    rec = records.rec
    frac = 1 if nanos else 1000
    frac_limit = records.frac_limit
    frames = info.frames
    truncated = info.truncated_frames
    while True:
        if not buf.fill(16):
            if buf.available():
                _cut(buf, info, "frame header")
            return ""
        sec, sub, caplen, origlen = rec(buf.buf, buf.pos)
        if sec in HEADER_INTS:
            fmt = _header_follows(buf)
            if fmt:  # another capture file begins here (files concatenated)
                return fmt
        if caplen > max_frame or (
            (caplen > snaplen > 0 or origlen < caplen or sub >= frac_limit)
            and not records.next_ok(buf, 16 + caplen, sec)
        ):
            # Impossible, or odd and not followed by a record: damage.  (An odd
            # record followed by a plausible one is taken as a frame.)
            at = buf.at()
            skipped = _resync(buf, records.candidates, records.accept)
            info.note("bad_record" if buf.available() else "lost_tail", at, skipped=skipped)
            continue
        if not buf.fill(16 + caplen):
            # The file ends inside this frame, or its length is wrong: a record
            # further on tells them apart.
            at, left = buf.at(), buf.available()
            skipped = _resync(buf, records.candidates, records.accept)
            if buf.available():
                info.note("bad_record", at, skipped=skipped)
                continue
            info.note("cut", at, skipped=left, what="frame")
            return ""
        if caplen > snaplen > 0:
            info.note("over_snaplen", buf.at())
        start = buf.pos + 16
        buf.pos = start + caplen
        records.last_sec = sec
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


class _PcapngBlocks:
    """Plausibility of pcapng blocks (the resync test): a known type and two
    equal lengths at its ends."""

    def __init__(self, e: str) -> None:
        self.e = e

    def accept(self, buf: _Buffer) -> bool:
        if not buf.fill(12):
            return False
        if _header_follows(buf):
            return True
        btype, blen = struct.unpack_from(self.e + "II", buf.buf, buf.pos)
        if btype not in PCAPNG_BLOCKS or blen < 12 or blen % 4 or blen > MAX_BLOCK:
            return False
        if not buf.fill(blen):
            return False
        return struct.unpack_from(self.e + "I", buf.buf, buf.pos + blen - 4)[0] == blen

    def candidates(self, window: np.ndarray) -> np.ndarray:
        w = _u32_at_every_byte(window, self.e)
        n = len(window) - 15
        btype, blen = w[:n], w[4 : n + 4]
        ok = np.isin(btype, list(PCAPNG_BLOCKS)) & (blen >= 12) & (blen % 4 == 0)
        ok &= blen <= MAX_BLOCK
        return np.flatnonzero(ok | np.isin(btype, list(PCAP_MAGIC_INTS)))


def _timestamp(ts: int, buf: _Buffer, info: CaptureInfo) -> int:
    if 0 <= ts <= MAX_TS_NS:
        return ts
    info.note("bad_timestamp", buf.at())
    return 0 if ts < 0 else MAX_TS_NS


def _pcapng(
    buf: _Buffer, index: int, info: CaptureInfo, max_frame: int
) -> Generator[Frame, None, str]:
    """Frames of pcapng sections; returns 'pcap' when a pcap file header is met
    where a block was expected ('' at the end)."""
    e = "<"
    ifaces: list[_Interface] = []
    frames = info.frames
    truncated = info.truncated_frames
    drops: dict[int, int] = {}
    blocks = _PcapngBlocks(e)
    while True:
        if not buf.fill(12):
            if buf.available():
                _cut(buf, info, "block header")
            return ""
        btype, blen = struct.unpack_from(e + "II", buf.buf, buf.pos)
        if btype in PCAP_MAGIC_INTS and _header_follows(buf):
            return "pcap"  # a pcap file begins here (files concatenated)
        bad = False
        if btype == PCAPNG_SHB:
            bom = bytes(buf.buf[buf.pos + 8 : buf.pos + 12])
            if bom == b"\x4d\x3c\x2b\x1a":
                e = "<"
            elif bom == b"\x1a\x2b\x3c\x4d":
                e = ">"
            else:
                bad = True
            blocks = _PcapngBlocks(e)
            (blen,) = struct.unpack_from(e + "I", buf.buf, buf.pos + 4)
            ifaces = []  # interface ids are per section
        cut = False
        if bad or blen < 12 or blen % 4 or blen > MAX_BLOCK:
            bad = True
        elif not buf.fill(blen):
            bad = cut = True  # the file ends inside the block, or its length is wrong
        elif struct.unpack_from(e + "I", buf.buf, buf.pos + blen - 4)[0] != blen:
            bad = True  # the trailing copy of the length disagrees
        if bad:
            at, left = buf.at(), buf.available()
            skipped = _resync(buf, blocks.candidates, blocks.accept)
            if buf.available():
                info.note("bad_block", at, skipped=skipped)
                continue
            if cut:
                info.note("cut", at, skipped=left, what="block")
                return ""
            info.note("lost_tail", at, skipped=skipped)
            return ""
        block = memoryview(buf.buf)[buf.pos : buf.pos + blen]
        at = buf.at()
        buf.pos += blen
        body = block[8 : blen - 4]
        if btype in (PCAPNG_EPB, PCAPNG_PB):
            if len(body) < 20:
                info.note("bad_packet_block", at, detail="too short")
                continue
            if btype == PCAPNG_EPB:
                iface_id, ts_hi, ts_lo, caplen, origlen = struct.unpack_from(e + "IIIII", body, 0)
            else:
                iface_id, _drops, ts_hi, ts_lo, caplen, origlen = struct.unpack_from(
                    e + "HHIIII", body, 0
                )
            if iface_id >= len(ifaces):
                info.note("bad_packet_block", at, detail=f"unknown interface {iface_id}")
                continue
            if 20 + caplen > len(body) or caplen > max_frame:
                info.note("bad_packet_block", at, detail=f"captured length {caplen}")
                continue
            iface = ifaces[iface_id]
            if caplen > iface.snaplen > 0:
                info.note("over_snaplen", at)
            ticks = (ts_hi << 32) | ts_lo
            ts = _timestamp(ticks * iface.ts_mul // iface.ts_div + iface.ts_offset_ns, buf, info)
            frames += 1
            if caplen < origlen:
                truncated += 1
            info.frames = frames
            info.truncated_frames = truncated
            yield ts, iface.linktype, body[20 : 20 + caplen], origlen, index
        elif btype == PCAPNG_IDB:
            if len(body) < 8 or len(ifaces) >= MAX_INTERFACES:
                info.note("bad_packet_block", at, detail="interface block too short or too many")
                continue
            iface = _interface(body, e)
            ifaces.append(iface)
            info.linktypes.add(iface.linktype)
            info.snaplen = max(info.snaplen, iface.snaplen)
        elif btype == PCAPNG_SPB:
            # No timestamp and no interface id: interface 0, time unknown (0).
            if not ifaces or len(body) < 4:
                info.note("bad_packet_block", at, detail="simple packet block without interface")
                continue
            (origlen,) = struct.unpack_from(e + "I", body, 0)
            caplen = min(origlen, len(body) - 4, ifaces[0].snaplen or origlen, max_frame)
            frames += 1
            info.frames = frames
            yield 0, ifaces[0].linktype, body[4 : 4 + caplen], origlen, index
        elif btype == PCAPNG_ISB and len(body) >= 12:
            (iface_id,) = struct.unpack_from(e + "I", body, 0)
            if iface_id >= len(ifaces):
                continue  # statistics of no interface: nothing to count them for
            for code, value in _parse_options(body[12:], e):
                if code in (ISB_IFDROP, ISB_OSDROP) and len(value) >= 8:
                    # Statistics are cumulative: keep the latest per interface.
                    key = (iface_id << 1) | (code == ISB_OSDROP)
                    (count,) = struct.unpack_from(e + "Q", value, 0)
                    if count > MAX_INTERFACE_DROPS:
                        info.note("bad_drop_count", at, detail=f"{count:,}")
                        continue
                    drops[key] = count
            info.interface_drops = sum(drops.values())
        # other blocks (name resolution, decryption secrets, custom) are skipped


def read_many(
    paths: list[str], infos: list[CaptureInfo], max_frame: int = MAX_CAPLEN
) -> Iterator[Frame]:
    """Frames of several files merged in time order (rotated captures).

    The merge trusts each file to be in time order, as tcpdump writes them.
    """
    streams = [
        read_frames(p, i, info, max_frame)
        for i, (p, info) in enumerate(zip(paths, infos, strict=True))
    ]
    if len(streams) == 1:
        return streams[0]
    return heapq.merge(*streams, key=lambda f: f[0])


def file_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
