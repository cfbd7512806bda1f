"""Capture files -> raw frames.

The reader is the Rust core's (``native/src/capture.rs``, the one ``analyze``
parses with), here as ``read_frames`` (a file) and ``stream_frames`` (a live
stream); this module opens what it reads (decompression, pipes spooled into
temporary files, directories of rotated files) and holds what it learns of a
file (``CaptureInfo``, the damage notes).

It reads libpcap (both byte orders, micro- and nanosecond timestamps) and pcapng
(several sections and interfaces, per-interface link type and timestamp
resolution, interface statistics with drop counts), plain or compressed with
gzip, bzip2 or xz, and merges several files in time order.

Each frame is a tuple ``(ts_ns, linktype, data, orig_len, file_index)``, data
the frame's captured bytes (``bytes``).  Nothing here knows about IP or RPC.

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
  resolution or offset, a pcap record whose fraction of a second is a second
  or more, such as ts_usec 0xFFFFFFFF) is clamped to that range (the
  fraction: to its second's last tick); the frame is read, as tshark reads it.

Each kind of damage is counted per file (``CaptureInfo.damage``) and reported
as one warning with its count, where it was first seen and the bytes skipped.
"""

from __future__ import annotations

import bz2
import contextlib
import io
import lzma
import os
import stat
import sys
import tempfile
import zlib
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from nfstrace.errors import CaptureError, UsageError
from nfstrace.parsers import backends

# Re-exported: native.py hands it to the Rust reader as capture.MAX_INTERFACE_DROPS.
from nfstrace.protocol.capture_format import MAX_CAPLEN, PCAP_MAGIC_BYTES, PCAPNG_SHB_BYTES
from nfstrace.protocol.capture_format import MAX_INTERFACE_DROPS as MAX_INTERFACE_DROPS

# Bytes as read: the reader hands out bytes, a caller may slice memoryviews of
# them; the dissectors take either.
Bytes = bytes | memoryview
Frame = tuple[int, int, Bytes, int, int]
# progress(frames read, bytes read from the capture files on disk, or -1 when
# the reader does not count them): called every 16,384 frames while parsing.
Progress = Callable[[int, int], None]

CHUNK = 4 * 1024 * 1024  # bytes read at a time (at most)
MIN_CHUNK = 64 * 1024  # ... and at least, when many files are read side by side
# All the files the Rust reader reads at once share this many bytes of reading
# buffers (its chunk_bytes: 1,250 files did not hold CHUNK each)
READ_BUDGET = 256 * 1024 * 1024


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
# Free space left on $TMPDIR's file system when a pipe's copy stops there
# (besides ParseLimits.max_spool_bytes): the copy never fills the disk.
SPOOL_RESERVE_BYTES = 1 << 30
HEAD_BYTES = 6  # the longest first bytes CAPTURE_STARTS tests


def _needs_spooling(path: str) -> bool:
    if path == STDIN:
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False  # missing or unreadable: opening it says why
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode)


def _read_head(source: BinaryIO, n: int) -> bytes:
    """The first n bytes of a pipe (fewer at its end): a pipe gives what it has."""
    parts: list[bytes] = []
    got = 0
    while got < n:
        piece = source.read(n - got)
        if not piece:
            break
        parts.append(piece)
        got += len(piece)
    return b"".join(parts)


def spool_bound(limit: int, directory: str) -> int:
    """Bytes a pipe may be copied into ``directory``: ``limit``
    (ParseLimits.max_spool_bytes), and no more than leaves SPOOL_RESERVE_BYTES
    free there."""
    try:
        st = os.statvfs(directory)
    except OSError:
        return limit
    return max(0, min(limit, st.f_bavail * st.f_frsize - SPOOL_RESERVE_BYTES))


def _spool(
    path: str, source: BinaryIO, copy: BinaryIO, where: str, bound: int, notes: list[str]
) -> None:
    """Copy a pipe into its temporary file (in directory ``where``), its first
    bytes checked before anything is copied, at most ``bound`` bytes (then a note: the rest is not
    read).  Errors name the step that failed."""
    try:
        head = _read_head(source, HEAD_BYTES)
    except OSError as e:
        raise CaptureError(f"cannot read: {e.strerror or e}", path) from None
    if not head:
        raise CaptureError("empty file", path)
    # (shorter: copied, the reader says why; the same words as the reader's)
    if len(head) == HEAD_BYTES and not head.startswith(CAPTURE_STARTS):
        raise CaptureError("not a pcap or pcapng capture file", path)
    done = 0
    data = head
    while data:
        room = bound - done
        if len(data) > room:
            data = data[:room]
        try:
            copy.write(data)
        except OSError as e:
            raise CaptureError(
                f"cannot copy the input to a temporary file in {where}: {e.strerror or e}", path
            ) from None
        done += len(data)
        if done >= bound:
            if source.read(1):
                notes.append(
                    f"{path}: the copy of this pipe stopped at {done:,} bytes (ParseLimits."
                    f"max_spool_bytes, or 1 GiB left free in {where}): the rest was not read"
                )
            break
        try:
            data = source.read(SPOOL_CHUNK)
        except OSError as e:
            raise CaptureError(f"cannot read: {e.strerror or e}", path) from None


@contextlib.contextmanager
def regular_files(
    paths: list[str], max_spool_bytes: int = 1 << 62, notes: list[str] | None = None
) -> Iterator[list[str]]:
    """The captures as files that can be read twice: standard input (``-``) and
    pipes, FIFOs or devices (``<(tcpdump -w - ...)``, ``/dev/stdin``) are copied
    once into a temporary file under $TMPDIR, deleted afterwards; regular files
    are read where they are.  A pipe's first bytes are checked before it is
    copied (``/dev/zero`` or ``yes |`` is refused at once, not copied whole),
    and at most ``spool_bound(max_spool_bytes)`` bytes are copied: where it
    stops, a line in ``notes``."""
    spooled: list[str] = []
    notes = [] if notes is None else notes
    try:
        out = []
        for path in paths:
            if not _needs_spooling(path):
                out.append(path)
                continue
            try:
                fd, name = tempfile.mkstemp(prefix="nfstrace-input-", suffix=".capture")
            except OSError as e:
                raise CaptureError(
                    f"cannot create a temporary file in {tempfile.gettempdir()} for the "
                    f"input: {e.strerror or e}",
                    path,
                ) from None
            spooled.append(name)
            where = os.path.dirname(name)
            bound = spool_bound(max_spool_bytes, where)
            with os.fdopen(fd, "wb") as copy:
                if path == STDIN:
                    _spool(path, sys.stdin.buffer, copy, where, bound, notes)
                else:
                    try:
                        source = open(path, "rb")  # noqa: SIM115 - closed below
                    except OSError as e:
                        raise CaptureError(f"cannot open: {e.strerror or e}", path) from None
                    with source:
                        _spool(path, source, copy, where, bound, notes)
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


def unusable(path: str) -> str:
    """Why this file cannot be read as a capture ('' if it can): its header and
    first frame read as the parse will read them."""
    frames = read_frames(path, 0, CaptureInfo(path=path), chunk=MIN_CHUNK)
    try:
        next(frames, None)
    except CaptureError as e:
        return e.message
    except OSError as e:
        return f"cannot read: {e.strerror or e}"
    finally:
        frames.close()
    return ""


def expand_directories(paths: list[str], notes: list[str] | None = None) -> list[str]:
    """The captures named, a directory standing for the capture files directly
    in it (rotated ``tcpdump -C/-G`` output): its regular, not hidden files
    that begin as a pcap, pcapng or compressed file, by name (the frames are
    merged in time order whatever the order).  An entry that cannot be read as
    a capture (a symlink loop, no permission, a file cut inside its header) is
    skipped, with a line in ``notes``: one odd file does not stop the others.
    A directory without a capture file is an error naming it."""
    out: list[str] = []
    notes = [] if notes is None else notes
    for path in paths:
        if path == STDIN or not os.path.isdir(path):
            out.append(path)
            continue
        found = []
        with os.scandir(path) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                if entry.name.startswith("."):
                    continue
                try:
                    if not entry.is_file():
                        continue
                    with open(entry.path, "rb") as f:
                        head = f.read(6)
                except OSError as e:
                    notes.append(f"{entry.path}: skipped: {e.strerror or e}")
                    continue
                if not head.startswith(CAPTURE_STARTS):
                    continue
                why = unusable(entry.path)
                if why:
                    notes.append(f"{entry.path}: skipped: {why}")
                    continue
                found.append(entry.path)
        if not found:
            raise CaptureError(
                "a directory without capture files (pcap, pcapng, .gz/.bz2/.xz)", path
            )
        out.extend(found)
    return out


COMPRESSED_MAGIC = {b"\x1f\x8b": "gzip", b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz"}
UNPACK = {"gzip": "zcat", "bzip2": "bzcat", "xz": "xzcat"}  # (said to a stream's user)


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
    for start, kind in COMPRESSED_MAGIC.items():
        if magic.startswith(start):
            return _Unpacked(raw, kind), kind  # type: ignore[return-value]
    return raw, ""


PACKED_PIECE = 16 * 1024  # packed bytes handed to a decompressor at a time
# ... and after a gzip step failed on corrupt data: the piece again, this many
# bytes at a time from where it began, so that what precedes the corruption is
# kept (a failing step returns nothing)
SALVAGE_PIECE = 256


class _Unpacked:
    """A gzip, bzip2 or xz file unpacked, one code for the three: the packed
    bytes its decompressor consumed are counted exactly (``taken``, at most
    one PACKED_PIECE ahead for bzip2 and xz, whose decompressors keep what they
    have not used), so the bomb rule (MAX_DECOMPRESSION_RATIO) is the same
    for every format (through gzip.GzipFile's read-ahead a gzip bomb never
    reached it); and a step never unpacks more than it was asked for
    (``max_length``), so memory stays bounded whatever the ratio.  Streams
    concatenated in one file are read one after the other; for gzip, zero
    padding after a member is skipped and anything else is an error, as
    GzipFile has it, while bzip2 and xz ignore trailing data, as BZ2File and
    LZMAFile do.  A file cut off raises EOFError, corrupt data the
    decompressor's error (read_up_to keeps what came before)."""

    def __init__(self, raw: BinaryIO, kind: str) -> None:
        self.raw = raw
        self.kind = kind
        self.name = getattr(raw, "name", "")
        self.counted = self  # (file_bytes_read and _bomb read counted.taken)
        self.taken = 0  # packed bytes consumed
        self.out = 0  # unpacked bytes handed out
        self._d: Any = self._new()
        self._pending = b""  # packed bytes read from the file, not yet consumed
        self._raw_end = False
        self._end = False
        self._small = False  # gzip: salvaging before corrupt data

    def _new(self) -> Any:
        if self.kind == "gzip":
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        if self.kind == "bzip2":
            return bz2.BZ2Decompressor()
        return lzma.LZMADecompressor(format=lzma.FORMAT_XZ)

    def _fill(self) -> None:
        if not self._pending and not self._raw_end:
            self._pending = self.raw.read(PACKED_PIECE)
            self._raw_end = not self._pending

    def _packed(self) -> bytes:
        self._fill()
        size = SALVAGE_PIECE if self._small else len(self._pending)
        data, self._pending = self._pending[:size], self._pending[size:]
        return data

    def _next_stream(self) -> bool:
        """After a stream's end: the next one in the file (False: none)."""
        self._pending = self._d.unused_data + self._pending
        while True:
            if self.kind == "gzip":  # zero padding between members, as GzipFile skips it
                self._pending = self._pending.lstrip(b"\0")
            if self._pending or self._raw_end:
                break
            self._fill()
        if not self._pending:
            return False
        self._d = self._new()
        return True

    def read1(self, n: int = -1) -> bytes:
        """Up to n unpacked bytes (b'' at the end), one decompression step."""
        n = CHUNK if n is None or n < 0 else n
        while not self._end:
            if self._d.eof:
                if not self._next_stream():
                    self._end = True
                    break
                if self.kind != "gzip":  # trailing data that is no stream: ignored
                    try:
                        return self._step(n)
                    except (OSError, lzma.LZMAError, ValueError):
                        self._end = True
                        break
                continue
            out = self._step(n)
            if out:
                return out
            self._fill()
            if self._raw_end and not self._pending and not self._d.eof and self._drained():
                raise EOFError("Compressed file ended before the end-of-stream marker was reached")
        return b""

    def _drained(self) -> bool:
        """The decompressor holds no input it has not used."""
        return self.kind == "gzip" or bool(self._d.needs_input)

    def _step(self, n: int) -> bytes:
        d = self._d
        if self.kind == "gzip":
            data = self._packed()
            backup = d.copy()
            try:
                out = d.decompress(data, n)
            except zlib.error:
                if self._small or len(data) <= SALVAGE_PIECE:
                    raise
                self._d, self._pending, self._small = backup, data + self._pending, True
                return b""
            tail = d.unconsumed_tail
            self._pending = tail + self._pending
            self.taken += len(data) - len(tail) - len(d.unused_data)
        else:
            data = self._packed() if d.needs_input else b""
            out = d.decompress(data, n)
            self.taken += len(data) - len(d.unused_data)
        self.out += len(out)
        return bytes(out)

    def read(self, n: int = -1) -> bytes:
        parts: list[bytes] = []
        want = (1 << 62) if n is None or n < 0 else n
        got = 0
        while got < want:
            piece = self.read1(min(CHUNK, want - got))
            if not piece:
                break
            parts.append(piece)
            got += len(piece)
        return b"".join(parts)

    def tell(self) -> int:
        return self.out

    def close(self) -> None:
        self.raw.close()

    def __enter__(self) -> _Unpacked:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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


def take_facts(info: CaptureInfo, facts: dict[str, Any]) -> None:
    """Put into ``info`` what the Rust reader learned about its file: a dict of
    ``nfstrace._native`` (``parse``'s files, ``Frames.info()``)."""
    info.format = facts["format"]
    info.linktypes.update(facts["linktypes"])
    info.snaplen = facts["snaplen"]
    info.frames = facts["frames"]
    info.bytes = facts["bytes"]
    info.truncated_frames = facts["truncated_frames"]
    info.cut_len = facts["cut_len"]
    info.cut_headers = facts["cut_headers"]
    info.interface_drops = facts["interface_drops"]
    info.damage = {
        kind: Damage(count=count, offset=offset, skipped=skipped, detail=detail, what=what)
        for kind, count, offset, skipped, detail, what in facts["damage"]
    }


class _Source:
    """A capture's bytes as the Rust reader asks for them, ``read(n)``: ``head``
    (bytes already read from the stream) first, then what ``read_up_to`` gives
    (at corrupt or cut-off compressed data, or a read that fails, what came
    before it; then ``error`` is set and the data ends)."""

    def __init__(self, stream: BinaryIO, compressed: bool, head: bytes = b"") -> None:
        self.stream = stream
        self.compressed = compressed
        self.head = head
        self.error = ""

    def read(self, n: int) -> bytes:
        if self.head:
            data, self.head = self.head[:n], self.head[n:]
            return data
        if self.error:
            return b""
        data, self.error = read_up_to(self.stream, n, self.compressed)
        return data

    def taken(self) -> int:
        """Bytes taken from the file on disk so far (packed)."""
        return file_bytes_read(self.stream, 0)


def read_frames(
    path: str, index: int, info: CaptureInfo, max_frame: int = MAX_CAPLEN, chunk: int = CHUNK
) -> Generator[Frame, None, None]:
    """Frames of one file, in file order; frames above max_frame bytes are damage;
    read ``chunk`` bytes at a time."""
    stream, info.compression = open_stream(path)
    with stream:
        if info.compression:
            source = _Source(stream, compressed=True)
            yield from _frames(source.read, source, index, info, max_frame, chunk, live=False)
            return
        fd = os.dup(stream.fileno())  # the Rust reader's own (it closes it), from the start
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        native = _native_extension()
    except BaseException:
        os.close(fd)
        raise
    yield from _frames(fd, None, index, info, max_frame, chunk, live=False, native=native)


def bytes_frames(data: bytes, info: CaptureInfo) -> Generator[Frame, None, None]:
    """Frames of a capture held in memory (a file's header and its last bytes:
    spans.py), read as ``read_frames`` reads a file."""
    source = _Source(io.BytesIO(data), compressed=False)
    yield from _frames(source.read, source, 0, info, MAX_CAPLEN, CHUNK, live=False)


# Bytes asked of a live stream at a time (``stream_frames``): a read returns
# what has arrived, up to this.
STREAM_CHUNK = 64 * 1024


def stream_frames(
    stream: BinaryIO, info: CaptureInfo, max_frame: int = MAX_CAPLEN
) -> Generator[Frame, None, None]:
    """Frames of a live stream (``nfstrace watch``: standard input, a FIFO) as
    they arrive: ``stream`` is unbuffered (``open(fd, "rb", buffering=0)``), so
    a frame is handed out once its record is whole, not when a chunk is full.
    The same reader (and damage handling) as ``read_frames``; not decompressed."""
    source = _Source(stream, compressed=False)
    head = b""
    while len(head) < len(max(COMPRESSED_MAGIC, key=len)):
        piece = source.read(STREAM_CHUNK)
        if not piece:
            break
        head += piece
    for magic, kind in COMPRESSED_MAGIC.items():
        if head.startswith(magic):
            raise CaptureError(
                f"{kind}-compressed: a stream is read as plain pcap or pcapng "
                f"(decompress it into the pipe: {UNPACK[kind]} FILE | nfstrace watch -)",
                info.path,
            )
    source.head = head
    yield from _frames(source.read, source, 0, info, max_frame, STREAM_CHUNK, live=True)


def _frames(
    read: int | Callable[[int], bytes],
    source: _Source | None,
    index: int,
    info: CaptureInfo,
    max_frame: int,
    chunk: int,
    live: bool,
    native: Any = None,
) -> Generator[Frame, None, None]:
    """The frames of the capture file(s) that ``read`` (a file descriptor, or
    ``source.read``) gives, read by the Rust reader: its header checked, then
    each section read by its format (files concatenated: one after another);
    ``info`` filled in as it goes, and whole at the end."""
    native = native or _native_extension()
    taken = source.taken if source is not None and source.compressed else None
    try:
        frames = native.Frames(
            read, index, info, max_frame, MAX_INTERFACE_DROPS, chunk, live, taken
        )
    except ValueError as e:  # not a capture (the reader's words)
        why = str(e)
        if source is not None and source.error and why in _TOO_SHORT:
            why = f"cannot read {info.compression} data: {source.error}"
        raise CaptureError(why, info.path) from None
    ended = False
    try:
        yield from frames
        ended = True
    finally:
        frames.close()
        take_facts(info, frames.info())
        if ended:
            if source is not None and source.error:
                info.note("decompression", info.bytes, detail=source.error)
            info.finish()


def _native_extension() -> Any:
    """The Rust extension (its reader); UsageError when it is not built."""
    try:
        return backends.native_extension()
    except ImportError as e:
        raise UsageError(str(e)) from None


# What the reader says of data that ends before a capture file's first four
# bytes (said instead: why reading stopped, when it failed)
_TOO_SHORT = ("empty file", "too short to be a capture file")
