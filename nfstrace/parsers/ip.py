"""IPv4 (RFC 791) and IPv6 (RFC 8200) headers, extension headers and fragment
reassembly for both.

A packet becomes a *datagram*: addresses, upper protocol, and its payload as
captured (which may be shorter than on the wire: snaplen).  Fragments are held
until their datagram is whole; only the fragments' captured bytes are kept,
so a `-s 256` capture of fragmented UDP still reassembles (with a short
captured payload) and the loss of any fragment shows as an incomplete datagram.
"""

from __future__ import annotations

from dataclasses import dataclass

# IP protocol numbers
PROTO_ICMP = 1
PROTO_TCP = 6
PROTO_UDP = 17
PROTO_ICMPV6 = 58
# IPv6 extension headers (next-header values)
IPV6_HOPOPTS = 0
IPV6_ROUTING = 43
IPV6_FRAGMENT = 44
IPV6_AH = 51
IPV6_NONE = 59
IPV6_DSTOPTS = 60
IPV6_MOBILITY = 135
IPV6_EXT_SIMPLE = frozenset((IPV6_HOPOPTS, IPV6_ROUTING, IPV6_DSTOPTS, IPV6_MOBILITY))


class Datagram:
    """One IP datagram (reassembled if it was fragmented)."""

    __slots__ = ("dst", "frags", "frame_first", "payload", "proto", "src", "ts_first", "wire_len")

    def __init__(
        self,
        src: bytes,
        dst: bytes,
        proto: int,
        payload: memoryview | bytes,
        wire_len: int,
        frags: int,
        ts_first: int,
        frame_first: int,
    ) -> None:
        self.src = src
        self.dst = dst
        self.proto = proto
        self.payload = payload  # captured bytes of the upper-layer payload
        self.wire_len = wire_len  # its length on the wire
        self.frags = frags  # IP fragments it was made of (1 if none)
        self.ts_first = ts_first  # time of its first fragment
        self.frame_first = frame_first


@dataclass
class FragmentStats:
    fragments: int = 0  # fragments seen
    reassembled: int = 0  # datagrams made whole
    incomplete: int = 0  # datagrams that never got all their fragments
    overlaps: int = 0  # fragments repeating bytes already held


class _Pending:
    __slots__ = ("count", "frame_first", "header", "got", "pieces", "total", "ts_first", "ts_last")

    def __init__(self, ts: int, frame: int) -> None:
        self.pieces: list[tuple[int, int, bytes]] = []  # (offset, wire length, captured)
        self.total = -1  # payload length once the last fragment was seen
        self.got = 0  # bytes received (overlaps counted twice)
        self.ts_first = ts
        self.ts_last = ts
        self.frame_first = frame
        self.count = 0
        self.header = 0  # IPv6: next header of the fragmentable part


class Reassembler:
    """Holds incomplete datagrams; bounded in count and in age."""

    def __init__(self, timeout_ns: int, max_pending: int) -> None:
        self.timeout_ns = timeout_ns
        self.max_pending = max_pending
        self.pending: dict[tuple, _Pending] = {}
        self.stats = FragmentStats()
        self._last_sweep = 0

    def add(
        self,
        key: tuple,
        offset: int,
        wire_len: int,
        captured: memoryview,
        more: bool,
        ts: int,
        frame: int,
        header: int = 0,
    ) -> tuple[bytes, int, int, int, int, int] | None:
        """Add one fragment; when its datagram is whole return
        (captured payload, wire length, fragments, first ts, first frame, header)."""
        self.stats.fragments += 1
        if ts - self._last_sweep > 1_000_000_000:
            self._sweep(ts)
        p = self.pending.get(key)
        if p is None:
            if len(self.pending) >= self.max_pending:
                self._evict_oldest()
            p = self.pending[key] = _Pending(ts, frame)
        p.ts_last = ts
        p.count += 1
        if offset == 0 and header:
            p.header = header
        if not more:
            p.total = offset + wire_len
        p.pieces.append((offset, wire_len, bytes(captured)))
        p.got += wire_len
        if p.total < 0 or p.got < p.total:
            return None  # cannot be whole yet: skip the coverage walk
        pieces = sorted(p.pieces, key=lambda x: x[0])
        covered = 0
        for off, length, _ in pieces:
            if off > covered:
                return None  # a hole remains
            if off < covered:
                self.stats.overlaps += 1
            covered = max(covered, off + length)
        if covered < p.total:
            return None
        del self.pending[key]
        self.stats.reassembled += 1
        # Captured payload: contiguous captured bytes from offset 0.
        out = bytearray()
        for off, length, data in pieces:
            if off > len(out):
                break
            out += data[len(out) - off :]
            if len(data) < length:
                break  # snaplen cut this fragment: the bytes after it are unknown
        return bytes(out), p.total, p.count, p.ts_first, p.frame_first, p.header

    def _sweep(self, now: int) -> None:
        self._last_sweep = now
        old = [k for k, p in self.pending.items() if now - p.ts_last > self.timeout_ns]
        for k in old:
            del self.pending[k]
        self.stats.incomplete += len(old)

    def _evict_oldest(self) -> None:
        oldest = min(self.pending, key=lambda k: self.pending[k].ts_last)
        del self.pending[oldest]
        self.stats.incomplete += 1

    def finish(self) -> None:
        """End of capture: whatever is still held stays incomplete."""
        self.stats.incomplete += len(self.pending)
        self.pending.clear()


def parse_ipv4(
    data: memoryview, off: int, wire_len: int, ts: int, frame: int, reasm: Reassembler
) -> Datagram | None:
    """IPv4 header at data[off:]; wire_len = bytes of the frame from off on the wire."""
    if len(data) < off + 20:
        return None
    vihl = data[off]
    ihl = (vihl & 0x0F) * 4
    if vihl >> 4 != 4 or ihl < 20 or len(data) < off + ihl:
        return None
    tot_len = (data[off + 2] << 8) | data[off + 3]
    if tot_len == 0:  # TSO-sized packets captured before segmentation
        tot_len = wire_len
    if tot_len < ihl:
        return None
    flags_frag = (data[off + 6] << 8) | data[off + 7]
    proto = data[off + 9]
    src = bytes(data[off + 12 : off + 16])
    dst = bytes(data[off + 16 : off + 20])
    start = off + ihl
    end = off + tot_len
    payload = data[start:end]  # Ethernet padding cut off; may be short (snaplen)
    if flags_frag & 0x3FFF == 0:  # not a fragment (MF clear, offset 0)
        return Datagram(src, dst, proto, payload, tot_len - ihl, 1, ts, frame)
    ip_id = (data[off + 4] << 8) | data[off + 5]
    got = reasm.add(
        (4, src, dst, ip_id, proto),
        (flags_frag & 0x1FFF) * 8,
        tot_len - ihl,
        payload,
        bool(flags_frag & 0x2000),
        ts,
        frame,
    )
    if got is None:
        return None
    captured, total, count, ts_first, frame_first, _ = got
    return Datagram(src, dst, proto, captured, total, count, ts_first, frame_first)


def parse_ipv6(
    data: memoryview, off: int, wire_len: int, ts: int, frame: int, reasm: Reassembler
) -> Datagram | None:
    if len(data) < off + 40 or data[off] >> 4 != 6:
        return None
    plen = (data[off + 4] << 8) | data[off + 5]
    if plen == 0:  # jumbogram or TSO: trust the frame length
        plen = wire_len - 40
    nh = data[off + 6]
    src = bytes(data[off + 8 : off + 24])
    dst = bytes(data[off + 24 : off + 40])
    end = off + 40 + plen
    pos = off + 40
    nh, pos, frag = _walk_extensions(data, nh, pos, end)
    if nh < 0:
        return None
    if frag is None:
        return Datagram(src, dst, nh, data[pos:end], end - pos, 1, ts, frame)
    frag_off, more, ident = frag
    got = reasm.add(
        (6, src, dst, ident), frag_off, end - pos, data[pos:end], more, ts, frame, header=nh
    )
    if got is None:
        return None
    captured, total, count, ts_first, frame_first, header = got
    # Headers after the fragment header travel in the first fragment's payload.
    mv = memoryview(captured)
    nh, pos, _ = _walk_extensions(mv, header, 0, total)
    if nh < 0:
        return None
    return Datagram(src, dst, nh, mv[pos:], total - pos, count, ts_first, frame_first)


def _walk_extensions(
    data: memoryview, nh: int, pos: int, end: int
) -> tuple[int, int, tuple[int, bool, int] | None]:
    """Step over IPv6 extension headers: (upper protocol, its offset, fragment info).

    Protocol -1 means the headers run past the captured bytes.
    """
    frag = None
    while True:
        if nh in IPV6_EXT_SIMPLE:
            if len(data) < pos + 2:
                return -1, pos, frag
            nh, pos = data[pos], pos + (data[pos + 1] + 1) * 8
        elif nh == IPV6_FRAGMENT:
            if len(data) < pos + 8:
                return -1, pos, frag
            offm = (data[pos + 2] << 8) | data[pos + 3]
            ident = int.from_bytes(data[pos + 4 : pos + 8], "big")
            # An "atomic fragment" (offset 0, M clear) is a whole datagram.
            if offm & 0xFFF9:
                frag = (offm & 0xFFF8, bool(offm & 1), ident)
            nh, pos = data[pos], pos + 8
            if frag is not None:
                return nh, pos, frag
        elif nh == IPV6_AH:
            if len(data) < pos + 2:
                return -1, pos, frag
            nh, pos = data[pos], pos + (data[pos + 1] + 2) * 4
        else:
            return (nh, pos, frag) if pos <= end else (-1, pos, frag)
