"""An independent reading of a capture's link and IP layers, by dpkt (and
scapy's pcapng reader, which says each packet's interface link type): what the
Rust parser's ParseStats must count below the transport layer.

Frames are read by dpkt (pcap) or scapy (pcapng), decompressed by Python's own
modules; link headers (Ethernet with 802.1Q/QinQ tags, Linux cooked v1/v2, BSD
loopback, raw IP), IPv4 and IPv6 (with extension headers) are decoded by dpkt.
A frame byte-identical to one captured at most ParseLimits.duplicate_window_ns
before it is a mirror copy, not counted (the parser's documented rule).  Per
direction (source -> destination): packets, IP bytes, the largest packet, TTL
range, fragments; a fragmented datagram is reassembled when its fragments
cover it from offset 0 to the last one's end.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
from dataclasses import dataclass, field
from pathlib import Path

import dpkt
from dpkt import ethernet, ip6, loopback, sll, sll2
from scapy.utils import RawPcapNgReader

from nfstrace.config import ParseLimits
from nfstrace.protocol import link

_LINK_CLASSES: dict[int, type[dpkt.Packet]] = {
    link.LINKTYPE_ETHERNET: ethernet.Ethernet,
    link.LINKTYPE_LINUX_SLL: sll.SLL,
    link.LINKTYPE_LINUX_SLL2: sll2.SLL2,
    link.LINKTYPE_NULL: loopback.Loopback,
    link.LINKTYPE_LOOP: loopback.Loopback,
}
_RAW = frozenset(
    (link.LINKTYPE_RAW, link.LINKTYPE_RAW_BSD, link.LINKTYPE_RAW_OPENBSD, link.LINKTYPE_IPV4)
    + (link.LINKTYPE_IPV6,)
)
_OPEN = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}


def frames(path: Path) -> list[tuple[int, int, bytes]]:
    """(timestamp ns, link type, captured bytes) of each frame of a capture file."""
    opener = _OPEN.get(path.suffix, open)
    with opener(path, "rb") as f:
        magic = f.read(4)
    out: list[tuple[int, int, bytes]] = []
    with opener(path, "rb") as f:
        if magic == b"\x0a\x0d\x0d\x0a":  # pcapng
            reader = RawPcapNgReader(f)
            for data, meta in reader:
                ts = ((meta.tshigh << 32) | meta.tslow) * 10**9 // meta.tsresol
                out.append((ts, meta.linktype, bytes(data)))
        else:
            pcap = dpkt.pcap.Reader(f)  # float seconds: to ~0.2 µs, enough here
            out += [(round(ts * 10**9), pcap.datalink(), bytes(data)) for ts, data in pcap]
    return out


def network_layer(linktype: int, frame: bytes) -> dpkt.Packet | None:
    """dpkt's IP or IP6 object inside a frame (None: not IP)."""
    try:
        if linktype in _RAW:
            version = frame[0] >> 4 if frame else 0
            return dpkt.ip.IP(frame) if version == 4 else ip6.IP6(frame) if version == 6 else None
        cls = _LINK_CLASSES.get(linktype)
        l3 = cls(frame).data if cls else None
    except (dpkt.UnpackError, IndexError):
        return None
    return l3 if isinstance(l3, dpkt.ip.IP | ip6.IP6) else None


@dataclass
class Direction:
    packets: int = 0
    ip_bytes: int = 0
    max_ip_len: int = 0
    ttl_min: int = -1
    ttl_max: int = -1
    ip_fragments: int = 0
    datagrams_reassembled: int = 0
    datagrams_incomplete: int = 0


@dataclass
class Facts:
    frames: int = 0
    duplicate_frames: int = 0
    non_ip_frames: int = 0
    ipv4_packets: int = 0
    ipv6_packets: int = 0
    tcp_packets: int = 0
    udp_packets: int = 0
    ip_fragments: int = 0
    ip_datagrams_reassembled: int = 0
    ip_datagrams_incomplete: int = 0
    directions: dict[tuple[str, str], Direction] = field(default_factory=dict)


def _addr(raw: bytes) -> str:
    import ipaddress

    return str(ipaddress.ip_address(raw))


def facts(paths: list[Path], limits: ParseLimits | None = None) -> Facts:
    """The link/IP facts of capture files read together (in time order)."""
    window = (limits or ParseLimits()).duplicate_window_ns
    every = sorted(
        (
            (ts, i, n, lt, data)
            for i, p in enumerate(paths)
            for n, (ts, lt, data) in enumerate(frames(p))
        ),
        key=lambda f: (f[0], f[1], f[2]),
    )
    out = Facts()
    seen: dict[bytes, int] = {}
    groups: dict[tuple, list[tuple[int, int, bool, int]]] = {}  # key -> (offset, len, more, proto)
    for ts, _i, _n, linktype, data in every:
        out.frames += 1
        last = seen.get(data)
        seen[data] = ts
        if window and last is not None and ts - last <= window:
            out.duplicate_frames += 1
            continue
        l3 = network_layer(linktype, data)
        if l3 is None:
            out.non_ip_frames += 1
            continue
        if isinstance(l3, dpkt.ip.IP):
            out.ipv4_packets += 1
            total, ttl, proto = l3.len, l3.ttl, l3.p
            frag = (l3.offset * 8, total - l3.hl * 4, bool(l3.mf)) if l3.mf or l3.offset else None
            key = (4, l3.src, l3.dst, l3.id, l3.p)
        else:
            out.ipv6_packets += 1
            total, ttl, proto = 40 + l3.plen, l3.hlim, l3.p
            exts = l3.all_extension_headers
            fh = next((x for x in exts if isinstance(x, ip6.IP6FragmentHeader)), None)
            frag = None
            if fh is not None and (fh.frag_off or fh.m_flag):
                at = exts.index(fh)
                before = sum(x.length for x in exts[: at + 1])
                frag = (fh.frag_off * 8, l3.plen - before, bool(fh.m_flag))
                proto = fh.nxt
            key = (6, l3.src, l3.dst, fh.id if fh else 0)
        d = out.directions.setdefault((_addr(l3.src), _addr(l3.dst)), Direction())
        d.packets += 1
        d.ip_bytes += total
        d.max_ip_len = max(d.max_ip_len, total)
        d.ttl_min = ttl if d.ttl_min < 0 else min(d.ttl_min, ttl)
        d.ttl_max = max(d.ttl_max, ttl)
        if frag is None:
            out.tcp_packets += proto == dpkt.ip.IP_PROTO_TCP
            out.udp_packets += proto == dpkt.ip.IP_PROTO_UDP
            continue
        d.ip_fragments += 1
        out.ip_fragments += 1
        groups.setdefault(key, []).append((*frag, proto))
    for key, parts in groups.items():
        d = out.directions[(_addr(key[1]), _addr(key[2]))]
        end = 0
        whole = False
        for offset, length, more, _proto in sorted(set(parts)):
            if offset > end:
                break
            end = max(end, offset + length)
            if not more:
                whole = True
                break
        if whole:
            d.datagrams_reassembled += 1
            out.ip_datagrams_reassembled += 1
            proto = next(p for o, _, _, p in parts if o == 0)
            out.tcp_packets += proto == dpkt.ip.IP_PROTO_TCP
            out.udp_packets += proto == dpkt.ip.IP_PROTO_UDP
        else:
            d.datagrams_incomplete += 1
            out.ip_datagrams_incomplete += 1
    return out
