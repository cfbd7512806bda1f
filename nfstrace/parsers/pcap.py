"""pcap files -> frames: the records after a file header, both byte orders,
micro- and nanosecond timestamps, and the plausibility test by which the resync
search (resync.py) finds a record again past damage."""

from __future__ import annotations

import struct
from collections.abc import Generator
from typing import TYPE_CHECKING

import numpy as np

from nfstrace.errors import CaptureError
from nfstrace.parsers.resync import (
    HEADER_INTS,
    PCAP_MAGIC_BYTES,
    header_follows,
    note_cut,
    resync,
    u32_at_every_byte,
)

if TYPE_CHECKING:
    from nfstrace.parsers.capture import Buffer, CaptureInfo, Frame

# A frame's wire length above this is taken as damage when searching for a record.
MAX_WIRE = 256 * 1024 * 1024
# A candidate record header found by the resync search must be stamped within
# this long of the last good frame.
RESYNC_TS_WINDOW_S = 30 * 86400


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

    def next_ok(self, buf: Buffer, at: int, sec: int) -> bool:
        """Is there a plausible record (or a capture header, or the end of the
        data) at buf.pos + at?"""
        if not buf.fill(at + 16):
            return buf.eof and buf.available() == at  # the record ends the file
        if header_follows(buf, at):
            return True
        ts_sec, ts_sub, caplen, origlen = self.rec(buf.buf, buf.pos + at)
        return self.plausible(ts_sec, ts_sub, caplen, origlen, near=sec)

    def accept(self, buf: Buffer) -> bool:
        """A resync candidate at buf.pos: it and the record after it plausible."""
        if header_follows(buf):
            return True
        if not buf.fill(16):
            return False
        sec, sub, caplen, origlen = self.rec(buf.buf, buf.pos)
        if not self.plausible(sec, sub, caplen, origlen, self.last_sec):
            return False
        return self.next_ok(buf, 16 + caplen, sec)

    def candidates(self, window: np.ndarray) -> np.ndarray:
        w = u32_at_every_byte(window, self.e)
        n = len(window) - 15
        sec, sub, caplen, origlen = w[:n], w[4 : n + 4], w[8 : n + 8], w[12 : n + 12]
        ok = (caplen <= self.max_frame) & (caplen <= origlen) & (sub < self.frac_limit)
        if self.last_sec >= 0:
            ok &= np.abs(sec.astype(np.int64) - self.last_sec) <= RESYNC_TS_WINDOW_S
        return np.flatnonzero(ok | np.isin(sec, list(HEADER_INTS)))


def read_pcap(
    buf: Buffer, index: int, info: CaptureInfo, max_frame: int, first: bool
) -> Generator[Frame, None, str]:
    """Frames of one pcap section (a file header and its records); returns the
    format of a capture header met where a record was expected ('' at the end)."""
    if not buf.fill(24):
        if first:
            raise CaptureError("pcap file header cut short", info.path)
        note_cut(buf, info, "file header")
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
                note_cut(buf, info, "frame header")
            return ""
        sec, sub, caplen, origlen = rec(buf.buf, buf.pos)
        if sec in HEADER_INTS:
            fmt = header_follows(buf)
            if fmt:  # another capture file begins here (files concatenated)
                return fmt
        if caplen > max_frame or (
            (caplen > snaplen > 0 or origlen < caplen)
            and not records.next_ok(buf, 16 + caplen, sec)
        ):
            # Impossible, or odd and not followed by a record: damage.  (An odd
            # record followed by a plausible one is taken as a frame.)
            at = buf.at()
            skipped = resync(buf, records.candidates, records.accept)
            info.note("bad_record" if buf.available() else "lost_tail", at, skipped=skipped)
            continue
        if not buf.fill(16 + caplen):
            # The file ends inside this frame, or its length is wrong: a record
            # further on tells them apart.
            at, left = buf.at(), buf.available()
            skipped = resync(buf, records.candidates, records.accept)
            if buf.available():
                info.note("bad_record", at, skipped=skipped)
                continue
            info.note("cut", at, skipped=left, what="frame")
            return ""
        if caplen > snaplen > 0:
            info.note("over_snaplen", buf.at())
        if sub >= frac_limit:
            # A fraction of a second of a second or more (ts_usec 0xFFFFFFFF):
            # the frame is read, its time clamped to its second's last tick
            # (carried, it would jump 71 minutes ahead and age out every
            # reassembly); tshark reads it too.  Not damage to search past.
            info.note("bad_timestamp", buf.at())
            sub = frac_limit - 1
        start = buf.pos + 16
        buf.pos = start + caplen
        records.last_sec = sec
        frames += 1
        if caplen < origlen:
            truncated += 1
            if caplen > info.cut_len:
                info.cut_len = caplen
        info.frames = frames
        info.truncated_frames = truncated
        yield (
            sec * 1_000_000_000 + sub * frac,
            linktype,
            memoryview(buf.buf)[start : start + caplen],
            origlen,
            index,
        )
