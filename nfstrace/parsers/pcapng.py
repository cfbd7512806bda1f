"""pcapng files -> frames: blocks (several sections, both byte orders),
interfaces with their link type and timestamp resolution and offset, options,
interface statistics with drop counts, and the plausibility test by which the
resync search (resync.py) finds a block again past damage."""

from __future__ import annotations

import struct
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from nfstrace.parsers.resync import (
    PCAP_MAGIC_INTS,
    PCAPNG_SHB,
    header_follows,
    note_cut,
    resync,
    u32_at_every_byte,
)

if TYPE_CHECKING:
    from nfstrace.parsers.capture import Buffer, CaptureInfo, Frame

# A pcapng block longer than this is damage (bounds what one block may pin in
# memory; packet blocks are bounded by the frame limit as well).
MAX_BLOCK = 32 * 1024 * 1024
# Interfaces one pcapng section may describe (interface ids in packet blocks
# are 16 or 32 bits: a flood of interface blocks is damage).
MAX_INTERFACES = 65536
# Timestamps are kept within what a pcap can express (u32 seconds).
MAX_TS_NS = (1 << 32) * 1_000_000_000
# A pcapng interface-statistics drop count above this is no count (some writers
# fill an unknown one with all ones): left out (noted as damage), never summed.
MAX_INTERFACE_DROPS = 1 << 48

# pcapng block types
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
# pcapng options
OPT_ENDOFOPT = 0
IF_TSRESOL = 9
IF_TSOFFSET = 14
ISB_IFDROP = 5
ISB_OSDROP = 7


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

    def accept(self, buf: Buffer) -> bool:
        if not buf.fill(12):
            return False
        if header_follows(buf):
            return True
        btype, blen = struct.unpack_from(self.e + "II", buf.buf, buf.pos)
        if btype not in PCAPNG_BLOCKS or blen < 12 or blen % 4 or blen > MAX_BLOCK:
            return False
        if not buf.fill(blen):
            return False
        return struct.unpack_from(self.e + "I", buf.buf, buf.pos + blen - 4)[0] == blen

    def candidates(self, window: np.ndarray) -> np.ndarray:
        w = u32_at_every_byte(window, self.e)
        n = len(window) - 15
        btype, blen = w[:n], w[4 : n + 4]
        ok = np.isin(btype, list(PCAPNG_BLOCKS)) & (blen >= 12) & (blen % 4 == 0)
        ok &= blen <= MAX_BLOCK
        return np.flatnonzero(ok | np.isin(btype, list(PCAP_MAGIC_INTS)))


def _timestamp(ts: int, buf: Buffer, info: CaptureInfo) -> int:
    if 0 <= ts <= MAX_TS_NS:
        return ts
    info.note("bad_timestamp", buf.at())
    return 0 if ts < 0 else MAX_TS_NS


def read_pcapng(
    buf: Buffer, index: int, info: CaptureInfo, max_frame: int
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
                note_cut(buf, info, "block header")
            return ""
        btype, blen = struct.unpack_from(e + "II", buf.buf, buf.pos)
        if btype in PCAP_MAGIC_INTS and header_follows(buf):
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
            skipped = resync(buf, blocks.candidates, blocks.accept)
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
                if caplen > info.cut_len:
                    info.cut_len = caplen
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
