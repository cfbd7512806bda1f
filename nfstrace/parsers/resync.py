"""Capture headers and the search for records past damage, shared by the pcap
and pcapng readers (pcap.py, pcapng.py) and ``capture.read_frames``: the magic
numbers that start a capture file, whether one starts at a position, the note
of a file cut off, and the vectorised resync search for the next plausible
record or block."""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from nfstrace.parsers.capture import Buffer, CaptureInfo

# The largest frame libpcap and wiretap accept (WTAP_MAX_PACKET_SIZE_STANDARD);
# the default of ParseLimits.max_frame_bytes.
MAX_CAPLEN = 262144
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
# the pcapng Section Header Block type, and as the file's first four bytes
PCAPNG_SHB = 0x0A0D0D0A
PCAPNG_SHB_BYTES = b"\x0a\x0d\x0d\x0a"
# A pcap magic number where a record or block was expected, read in either byte order
PCAP_MAGIC_INTS = frozenset((PCAP_MAGIC_US, PCAP_MAGIC_NS, 0xD4C3B2A1, 0x4D3CB2A1))
HEADER_INTS = PCAP_MAGIC_INTS | {PCAPNG_SHB}


def format_at(buf: Buffer, at: int = 0) -> str:
    """'pcap' / 'pcapng' when a capture file header starts at buf.pos + at, else ''."""
    buf.fill(at + 4)  # from buf.pos: nothing before it is let go
    p = buf.pos + at
    magic = bytes(buf.buf[p : p + 4])
    if magic in PCAP_MAGIC_BYTES:
        return "pcap"
    if magic == PCAPNG_SHB_BYTES:
        return "pcapng"
    return ""


def header_follows(buf: Buffer, at: int = 0) -> str:
    """Like format_at, for a header met where a record was expected: checked
    further (pcap version 2.x, pcapng byte-order magic), so that frame bytes
    that happen to look like a magic number are not taken for one."""
    fmt = format_at(buf, at)
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


def note_cut(buf: Buffer, info: CaptureInfo, what: str) -> None:
    """The data ends inside a record: count the bytes left over."""
    left = buf.available()
    info.note("cut", buf.at(), skipped=left, what=what)
    buf.pos += left


def u32_at_every_byte(window: np.ndarray, e: str) -> np.ndarray:
    """u32 values starting at every byte offset of window (len - 3 of them)."""
    a = window.astype(np.uint32)
    if e == "<":
        return a[:-3] | a[1:-2] << 8 | a[2:-1] << 16 | a[3:] << 24
    return a[:-3] << 24 | a[1:-2] << 16 | a[2:-1] << 8 | a[3:]


def resync(buf: Buffer, candidates, accept) -> int:
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
