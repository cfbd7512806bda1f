"""Which capture files are one capture: several files given together (a
directory, a glob) are merged in time order, which is right for the pieces of
one capture (``tcpdump -C``/``-G`` rotation, ``editcap -c``) and wrong for
captures of different traffic (a directory of separate runs, a client's and a
server's capture of the same run), whose merge reads as one run with gaps.

``spans(paths)`` reads, of each file, its first and last frame's time and the
host pairs (the two IP addresses of a frame, either way) of its first frames
and its last ones, cheaply: the first ``HEAD_FRAMES`` frames, and the frames
of its last ``TAIL_BYTES`` (a pcap or pcapng reader started there finds its
first whole record as it does past damage).  A compressed file is
unpacked to its end for that (no frame is dissected); a file whose end cannot
be read that way is read whole.

``captures(spans)`` groups the files: in the order of their first frame, a
file continues the capture before it when it starts where that one ended --
not earlier by more than ``OVERLAP_NS`` (pieces of one capture do not
overlap; the same traffic captured twice, at the client and at the server,
does), not later by more than ``gap_ns`` (a second, or a tenth of the capture
so far) -- and shares a host pair with it.  Anything else starts another
capture.  The command line refuses to merge more than one unless told to
(``--merge``).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from nfstrace.errors import CaptureError
from nfstrace.parsers import backends, capture
from nfstrace.protocol.capture_format import PCAPNG_SHB

HEAD_FRAMES = 2_000  # frames read from a file's start
TAIL_BYTES = 1 << 20  # bytes read at a file's end (uncompressed)
HEAD_BYTES = 1 << 20  # bytes searched for a pcapng file's section and interface blocks
OVERLAP_NS = 10_000_000  # a piece of a capture starts at most this much before the last ended
GAP_NS = 1_000_000_000  # ... and at most this much after it (or GAP_SHARE of the capture)
GAP_SHARE = 0.1

Pair = tuple[bytes, bytes]  # two IP addresses, the lower first


@dataclass(frozen=True)
class FileSpan:
    """What a capture file spans: its first and last frame's time (ns; -1: no
    frame) and the host pairs of its first and last frames."""

    path: str
    first_ns: int
    last_ns: int
    pairs: frozenset[Pair]


def _pair(linktype: int, data: capture.Bytes) -> Pair | None:
    pair: Pair | None = backends.native_extension().frame_host_pair(linktype, bytes(data))
    return pair


def _head(path: str) -> tuple[list[tuple[int, Pair | None]], bool, str]:
    """(time, host pair) of the first HEAD_FRAMES frames, whether that was the
    whole file, and its format."""
    info = capture.CaptureInfo(path)
    out: list[tuple[int, Pair | None]] = []
    frames = capture.read_frames(path, 0, info)
    for ts, linktype, data, _, _ in frames:
        out.append((ts, _pair(linktype, data)))
        if len(out) >= HEAD_FRAMES:
            frames.close()
            return out, False, info.format
    return out, True, info.format


def _last_bytes(path: str) -> tuple[bytes, bytes]:
    """(the file's first HEAD_BYTES, its last TAIL_BYTES), uncompressed."""
    stream, compression = capture.open_stream(path)
    with stream:
        head = stream.read(HEAD_BYTES)
        if not compression:  # (the head may hold some or all of the tail)
            size = os.fstat(stream.fileno()).st_size
            stream.seek(max(len(head), size - TAIL_BYTES))
            return head, (head + stream.read())[-TAIL_BYTES:]
        tail = head[-TAIL_BYTES:]
        while chunk := stream.read(capture.CHUNK):
            tail = (tail + chunk)[-TAIL_BYTES:]
        return head, tail


def _pcapng_header(head: bytes) -> bytes:
    """The section header and interface blocks a pcapng file starts with, up to
    its first other block."""
    if len(head) < 12:
        return b""
    e = ">" if head[8:12] == b"\x1a\x2b\x3c\x4d" else "<"
    pos = 0
    while pos + 12 <= len(head):
        btype, blen = struct.unpack_from(e + "II", head, pos)
        if btype not in (PCAPNG_SHB, 1) or blen < 12 or pos + blen > len(head):
            break
        pos += blen
    return head[:pos]


def _tail(path: str, fmt: str) -> list[tuple[int, Pair | None]]:
    """(time, host pair) of the frames in the file's last TAIL_BYTES, read as
    the readers read past damage; empty when none could be read there."""
    head, tail = _last_bytes(path)
    header = head[:24] if fmt == "pcap" else _pcapng_header(head)
    if not header:
        return []
    info = capture.CaptureInfo(path)
    out = []
    try:
        for ts, linktype, data, _, _ in capture.bytes_frames(header + tail, info):
            out.append((ts, _pair(linktype, data)))
    except CaptureError:
        return []
    return out


def _whole(path: str) -> list[tuple[int, Pair | None]]:
    info = capture.CaptureInfo(path)
    return [(ts, _pair(lt, data)) for ts, lt, data, _, _ in capture.read_frames(path, 0, info)]


def span(path: str) -> FileSpan:
    """The file's FileSpan (its head, its tail; the whole file when its tail
    cannot be read alone).  A CaptureError when it is no capture."""
    frames, whole, fmt = _head(path)
    if not whole:
        tail = _tail(path, fmt)
        frames = frames + tail if tail else _whole(path)
    times = [ts for ts, _ in frames]
    return FileSpan(
        path,
        min(times, default=-1),
        max(times, default=-1),
        frozenset(p for _, p in frames if p is not None),
    )


def spans(paths: Sequence[str]) -> list[FileSpan]:
    return [span(p) for p in paths]


def captures(files: Sequence[FileSpan]) -> list[list[FileSpan]]:
    """The files grouped into captures (module docstring), each in time order;
    files without a frame join the first."""
    timed = sorted((f for f in files if f.first_ns >= 0), key=lambda f: (f.first_ns, f.path))
    groups: list[list[FileSpan]] = []
    start = end = 0
    pairs: set[Pair] = set()
    for f in timed:
        gap = max(GAP_NS, GAP_SHARE * (end - start))
        if groups and end - OVERLAP_NS <= f.first_ns <= end + gap and pairs & f.pairs:
            groups[-1].append(f)
            end, pairs = max(end, f.last_ns), pairs | f.pairs
        else:
            groups.append([f])
            start, end, pairs = f.first_ns, f.last_ns, set(f.pairs)
    empty = [f for f in files if f.first_ns < 0]
    if not groups:
        return [list(empty)] if empty else []
    groups[0] = empty + groups[0]
    return groups


def described(group: Sequence[FileSpan]) -> str:
    """'a.pcap (0.019 s)' or 'a.pcap ... c.pcap (3 files, 12.3 s)'."""
    names = [os.path.basename(f.path) for f in group]
    timed = [f for f in group if f.first_ns >= 0]
    seconds = (
        (max(f.last_ns for f in timed) - min(f.first_ns for f in timed)) / 1e9 if timed else 0.0
    )
    if len(names) == 1:
        return f"{names[0]} ({seconds:.3f} s)"
    return f"{names[0]} ... {names[-1]} ({len(names)} files, {seconds:.3f} s)"
