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
import sys
import tempfile
import zlib
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from nfstrace.errors import CaptureError
from nfstrace.parsers.pcap import read_pcap

# Re-exported: native.py hands it to the Rust reader as capture.MAX_INTERFACE_DROPS.
from nfstrace.parsers.pcapng import MAX_INTERFACE_DROPS as MAX_INTERFACE_DROPS
from nfstrace.parsers.pcapng import read_pcapng
from nfstrace.parsers.resync import MAX_CAPLEN, PCAP_MAGIC_BYTES, PCAPNG_SHB_BYTES, format_at

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
# A compressed capture that has unpacked to more than RATIO_CHECK_BYTES at more
# than this many bytes out per byte in is not a capture but a decompression
# bomb: reading stops there (a warning, exit 6; what was read is analysed).
# Real captures stay far below it: gzip cannot pass ~1,030:1 at all, and a
# capture of zero-filled 1,448-byte TCP segments (the most compressible real
# traffic: headers and timestamps change in every frame) packs 107:1 with
# gzip, 246:1 with bzip2 and 283:1 with xz.
MAX_DECOMPRESSION_RATIO = 1000
RATIO_CHECK_BYTES = 64 * 1024 * 1024

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
    cut_len: int = 0  # the largest caplen of those: the length actually captured
    cut_headers: int = 0  # the longest link + IP + TCP/UDP header of those (the parser's)
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


class Buffer:
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


def read_frames(
    path: str, index: int, info: CaptureInfo, max_frame: int = MAX_CAPLEN
) -> Generator[Frame, None, None]:
    """Frames of one file, in file order; frames above max_frame bytes are damage."""
    stream, info.compression = open_stream(path)
    with stream:
        buf = Buffer(stream, compressed=bool(info.compression), info=info)
        if not buf.fill(4):
            if buf.error:
                raise CaptureError(f"cannot read {info.compression} data: {buf.error}", path)
            raise CaptureError(
                "empty file" if not buf.buf else "too short to be a capture file", path
            )
        fmt = format_at(buf)
        if not fmt:
            raise CaptureError("not a pcap or pcapng capture file", path)
        info.format = fmt
        first = True
        while fmt:
            if fmt == "pcap":
                fmt = yield from read_pcap(buf, index, info, max_frame, first)
            else:
                fmt = yield from read_pcapng(buf, index, info, max_frame)
            first = False
            if fmt:
                info.note("concatenated", buf.at())
        if buf.error:
            info.note("decompression", buf.at(), detail=buf.error)
        info.bytes = buf.at()
        info.finish()


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
