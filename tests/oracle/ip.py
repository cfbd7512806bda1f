"""IPv4 (RFC 791) and IPv6 (RFC 8200) headers, extension headers and fragment
reassembly for both.

A packet becomes a *datagram*: addresses, upper protocol, and its payload as
captured (which may be shorter than on the wire: snaplen).  Fragments are held
until their datagram is whole; only the fragments' captured bytes are kept,
so a `-s 256` capture of fragmented UDP still reassembles (with a short
captured payload) and the loss of any fragment shows as an incomplete datagram.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from nfstrace.parsers.capture import Bytes
from nfstrace.parsers.link import partition_of as partition_of
from nfstrace.parsers.stats import (
    F_CSUM_BAD,
    F_CSUM_CHECKED,
    F_FRAGMENTS,
    F_INCOMPLETE,
    F_IP_BYTES,
    F_MAX_IP_LEN,
    F_PACKETS,
    F_REASSEMBLED,
    F_TTL_MAX,
    F_TTL_MIN,
    NO_TTL,
)
from nfstrace.parsers.tables import addr_text as addr_text

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

# Per-direction facts: lists at the F_* positions of nfstrace.parsers.stats
# TCP and UDP checksums are verified on the first this many packets of each
# direction that are whole (unfragmented, not cut by the snaplen): enough to
# tell a host whose outgoing checksums are all left to the NIC (transmit
# offload, captured on that host) from one whose packets carry them, at a
# bounded cost.  UDP checksum 0 (not computed) is not counted.
CHECKSUM_SAMPLE = 64


class Facts(dict[tuple[bytes, bytes], list[int]]):
    """Facts lists by (src, dst), at most ``limit`` of them: the packets of
    address pairs past it are counted together in ``overflow``."""

    def __init__(self, limit: int = 1 << 62) -> None:
        super().__init__()
        self.limit = limit
        self.overflow = [0, 0, 0, NO_TTL, -1, 0, 0, 0, 0, 0]


def direction_facts(facts: Facts, src: bytes, dst: bytes) -> list[int]:
    """The facts list of one direction, created empty on first use."""
    d = facts.get((src, dst))
    if d is None:
        if len(facts) >= facts.limit:
            return facts.overflow
        d = facts[(src, dst)] = [0, 0, 0, NO_TTL, -1, 0, 0, 0, 0, 0]
    return d


def count_packet(d: list[int], ip_len: int, ttl: int) -> None:
    """Account one IP packet (or fragment) in a direction's facts."""
    d[F_PACKETS] += 1
    d[F_IP_BYTES] += ip_len
    if ip_len > d[F_MAX_IP_LEN]:
        d[F_MAX_IP_LEN] = ip_len
    if ttl < d[F_TTL_MIN]:
        d[F_TTL_MIN] = ttl
    if ttl > d[F_TTL_MAX]:
        d[F_TTL_MAX] = ttl


def checksum_ok(src: bytes, dst: bytes, proto: int, seg: Bytes) -> bool:
    """Does the TCP or UDP segment seg (all of it, header first) carry a right
    checksum (RFC 9293 / RFC 768 / RFC 8200 pseudo-header)?  The one's
    complement sum of 16-bit words is the number they spell modulo 0xFFFF
    (2**16 = 1 mod 0xFFFF), so one big-integer conversion sums them all; the
    sum with the checksum in it is 0 (mod 0xFFFF) when it is right."""
    n = len(seg)
    total = int.from_bytes(seg, "big")
    if n & 1:
        total <<= 8  # a last odd byte is padded with a zero
    total += int.from_bytes(src, "big") + int.from_bytes(dst, "big") + proto + n
    return total % 0xFFFF == 0


def sample_checksum(f: list[int], src: bytes, dst: bytes, proto: int, seg: Bytes) -> int:
    """Verify a whole segment's checksum into its direction's facts (the
    caller checked the sample is not full); 1 right, 0 bad, -1 not computed
    (UDP checksum 0: not counted)."""
    if proto == PROTO_UDP and seg[6] == 0 and seg[7] == 0:
        return -1
    ok = checksum_ok(src, dst, proto, seg)
    f[F_CSUM_CHECKED] += 1
    if not ok:
        f[F_CSUM_BAD] += 1
    return int(ok)


class Datagram:
    """One IP datagram (reassembled if it was fragmented)."""

    __slots__ = (
        "dst",
        "frags",
        "frame_first",
        "ip_len",
        "payload",
        "proto",
        "src",
        "ts_first",
        "ttl",
        "wire_len",
    )

    def __init__(
        self,
        src: bytes,
        dst: bytes,
        proto: int,
        payload: Bytes,
        wire_len: int,
        frags: int,
        ts_first: int,
        frame_first: int,
        ttl: int = -1,
        ip_len: int = 0,
    ) -> None:
        self.src = src
        self.dst = dst
        self.proto = proto
        self.payload = payload  # captured bytes of the upper-layer payload
        self.wire_len = wire_len  # its length on the wire
        self.frags = frags  # IP fragments it was made of (1 if none)
        self.ts_first = ts_first  # time of its first fragment
        self.frame_first = frame_first
        # TTL / hop limit and IP packet length of an unfragmented packet, for the
        # per-direction facts; -1 for a reassembled datagram (its fragments were
        # counted one by one by the Reassembler).
        self.ttl = ttl
        self.ip_len = ip_len


@dataclass
class FragmentStats:
    fragments: int = 0  # fragments seen
    reassembled: int = 0  # datagrams made whole
    incomplete: int = 0  # datagrams that never got all their fragments
    overlaps: int = 0  # fragments repeating bytes already held
    repeats: int = 0  # exact repeats of a fragment held (same offset and length): dropped
    given_up: int = 0  # datagrams given up to bound memory (too many fragments or bytes)
    # packets whose IP length claims more than the frame carried on the wire:
    # taken as long as the frame (the rest of the header is trusted)
    length_exceeds_frame: int = 0


class _Pending:
    __slots__ = (
        "count",
        "frame_first",
        "frame_last",
        "header",
        "got",
        "held",
        "pieces",
        "seen",
        "total",
        "ts_first",
        "ts_last",
    )

    def __init__(self, ts: int, frame: int) -> None:
        self.pieces: list[tuple[int, int, bytes]] = []  # (offset, wire length, captured)
        self.seen: set[tuple[int, int]] = set()  # (offset, wire length) of the pieces
        self.total = -1  # payload length once the last fragment was seen
        self.got = 0  # bytes received (overlaps counted twice)
        self.held = 0  # captured bytes held
        self.ts_first = ts
        self.ts_last = ts
        self.frame_first = frame
        self.frame_last = frame
        self.count = 0
        self.header = 0  # IPv6: next header of the fragmentable part


class Reassembler:
    """Holds incomplete datagrams; bounded in count and in age.

    They are kept in the order they last received a fragment (capture order),
    so the one that waited longest is the first: giving it up (past a bound, or
    when it timed out) costs no search of them all.

    Keys start with (ip version, src, dst, ...): fragment counts are also kept
    per direction in ``facts`` (shared with the caller's per-direction facts).
    """

    def __init__(
        self,
        timeout_ns: int,
        max_pending: int,
        facts: Facts | None = None,
        max_bytes: int = 1 << 62,
        max_fragments: int = 1 << 62,
        max_lost: int = 1 << 62,
    ) -> None:
        self.timeout_ns = timeout_ns
        self.max_pending = max_pending
        self.max_bytes = max_bytes  # captured bytes held, all datagrams together
        self.max_fragments = max_fragments  # fragments of one datagram
        self.max_lost = max_lost  # datagrams given up that are listed in `lost`
        self.pending: OrderedDict[tuple, _Pending] = OrderedDict()
        self.held = 0  # captured bytes held
        self.stats = FragmentStats()
        self.facts: Facts = Facts() if facts is None else facts
        # Datagrams given up as incomplete (the first max_lost of them):
        # (first ts, first frame, src, dst, ip id, fragments held, bytes held).
        self.lost: list[tuple[int, int, bytes, bytes, int, int, int]] = []
        # Datagrams given up whose first fragment (offset 0) was captured, until
        # the caller takes them: (first ts, last ts, first frame, last frame,
        # src, dst, ip version, upper protocol (IPv6: the next header of the
        # fragmentable part), fragments held, contiguous captured bytes from 0).
        self.partial: list[tuple[int, int, int, int, bytes, bytes, int, int, int, bytes]] = []
        self._last_sweep = 0

    def _lost(self, key: tuple, p: _Pending) -> None:
        self.stats.incomplete += 1
        self.held -= p.held
        direction_facts(self.facts, key[1], key[2])[F_INCOMPLETE] += 1
        if len(self.lost) < self.max_lost:
            self.lost.append((p.ts_first, p.frame_first, key[1], key[2], key[3], p.count, p.got))
        if any(off == 0 for off, _, _ in p.pieces):
            proto = key[4] if key[0] == 4 else p.header
            first = _contiguous(sorted(p.pieces, key=lambda x: x[0]))
            self.partial.append(
                (p.ts_first, p.ts_last, p.frame_first, p.frame_last)
                + (key[1], key[2], key[0], proto, p.count, first)
            )

    def take_first(self, src: bytes, dst: bytes, test: Callable[[int, int, bytes], bool]) -> bool:
        """Give up now the first held datagram from src to dst whose first
        fragment passes ``test(ip version, upper protocol, its captured bytes)``
        (into ``lost`` and ``partial``); False if none does."""
        for key, p in self.pending.items():
            if key[1] != src or key[2] != dst:
                continue
            for off, _, data in p.pieces:
                if off == 0 and test(key[0], key[4] if key[0] == 4 else p.header, data):
                    del self.pending[key]
                    self._lost(key, p)
                    return True
        return False

    def add(
        self,
        key: tuple,
        offset: int,
        wire_len: int,
        captured: Bytes,
        more: bool,
        ts: int,
        frame: int,
        header: int = 0,
        ttl: int = 0,
        ip_len: int = 0,
    ) -> tuple[bytes, int, int, int, int, int] | None:
        """Add one fragment (an IP packet of ip_len bytes, with this TTL / hop
        limit); when its datagram is whole return
        (captured payload, wire length, fragments, first ts, first frame, header)."""
        self.stats.fragments += 1
        d = direction_facts(self.facts, key[1], key[2])
        count_packet(d, ip_len, ttl)
        d[F_FRAGMENTS] += 1
        if ts - self._last_sweep > 1_000_000_000:
            self._sweep(ts)
        p = self.pending.get(key)
        if p is None:
            if len(self.pending) >= self.max_pending:
                self._evict_oldest()
            p = self.pending[key] = _Pending(ts, frame)
        elif (offset, wire_len) in p.seen:
            self.stats.repeats += 1  # the same fragment again: nothing new
            return None
        else:
            self.pending.move_to_end(key)
        p.ts_last = ts
        p.frame_last = frame
        p.count += 1
        if offset == 0 and header:
            p.header = header
        if not more:
            p.total = offset + wire_len
        p.pieces.append((offset, wire_len, bytes(captured)))
        p.seen.add((offset, wire_len))
        p.got += wire_len
        p.held += len(captured)
        self.held += len(captured)
        if p.count > self.max_fragments or self.held > self.max_bytes:
            self.stats.given_up += 1
            self._lost(key, self.pending.pop(key))
            while self.held > self.max_bytes and self.pending:
                self.stats.given_up += 1
                self._evict_oldest()
            return None
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
        self.held -= p.held
        self.stats.reassembled += 1
        d[F_REASSEMBLED] += 1
        return _contiguous(pieces), p.total, p.count, p.ts_first, p.frame_first, p.header

    def _sweep(self, now: int) -> None:
        """Give up the datagrams without a fragment for timeout_ns, from the
        first held (the one that waited longest) to the first that has not."""
        self._last_sweep = now
        while self.pending:
            key, p = next(iter(self.pending.items()))
            if now - p.ts_last <= self.timeout_ns:
                break
            del self.pending[key]
            self._lost(key, p)

    def _evict_oldest(self) -> None:
        """Give up the datagram that waited longest for a fragment."""
        self._lost(*self.pending.popitem(last=False))

    def finish(self) -> None:
        """End of capture: whatever is still held stays incomplete."""
        for k, p in list(self.pending.items()):
            self._lost(k, p)
        self.pending.clear()


def _contiguous(pieces: list[tuple[int, int, bytes]]) -> bytes:
    """The contiguous captured bytes from offset 0 of fragments sorted by offset."""
    out = bytearray()
    for off, length, data in pieces:
        if off > len(out):
            break
        out += data[len(out) - off :]
        if len(data) < length:
            break  # snaplen cut this fragment: the bytes after it are unknown
    return bytes(out)


def parse_ipv4(
    data: Bytes, off: int, wire_len: int, ts: int, frame: int, reasm: Reassembler
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
    elif tot_len > wire_len >= ihl:  # longer than the frame on the wire: a lie
        reasm.stats.length_exceeds_frame += 1
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
        ttl = data[off + 8]
        return Datagram(src, dst, proto, payload, tot_len - ihl, 1, ts, frame, ttl, tot_len)
    ip_id = (data[off + 4] << 8) | data[off + 5]
    got = reasm.add(
        (4, src, dst, ip_id, proto),
        (flags_frag & 0x1FFF) * 8,
        tot_len - ihl,
        payload,
        bool(flags_frag & 0x2000),
        ts,
        frame,
        0,
        data[off + 8],
        tot_len,
    )
    if got is None:
        return None
    captured, total, count, ts_first, frame_first, _ = got
    return Datagram(src, dst, proto, captured, total, count, ts_first, frame_first)


def parse_ipv6(
    data: Bytes, off: int, wire_len: int, ts: int, frame: int, reasm: Reassembler
) -> Datagram | None:
    if len(data) < off + 40 or data[off] >> 4 != 6:
        return None
    plen = (data[off + 4] << 8) | data[off + 5]
    if plen == 0:  # jumbogram or TSO: trust the frame length
        plen = wire_len - 40
    elif plen > wire_len - 40 >= 0:  # longer than the frame on the wire: a lie
        reasm.stats.length_exceeds_frame += 1
        plen = wire_len - 40
    nh = data[off + 6]
    src = bytes(data[off + 8 : off + 24])
    dst = bytes(data[off + 24 : off + 40])
    end = off + 40 + plen
    pos = off + 40
    nh, pos, frag = walk_extensions(data, nh, pos, end)
    if nh < 0:
        return None
    hop_limit = data[off + 7]
    if frag is None:
        return Datagram(src, dst, nh, data[pos:end], end - pos, 1, ts, frame, hop_limit, 40 + plen)
    frag_off, more, ident = frag
    got = reasm.add(
        (6, src, dst, ident),
        frag_off,
        end - pos,
        data[pos:end],
        more,
        ts,
        frame,
        nh,
        hop_limit,
        40 + plen,
    )
    if got is None:
        return None
    captured, total, count, ts_first, frame_first, header = got
    # Headers after the fragment header travel in the first fragment's payload.
    mv = memoryview(captured)
    nh, pos, _ = walk_extensions(mv, header, 0, total)
    if nh < 0:
        return None
    return Datagram(src, dst, nh, mv[pos:], total - pos, count, ts_first, frame_first)


def walk_extensions(
    data: Bytes, nh: int, pos: int, end: int
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
