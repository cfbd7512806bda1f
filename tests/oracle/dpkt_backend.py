"""The dpkt cross-check (once ``--parser dpkt``, now tests only): capture files
-> the messages table, with dpkt decoding the link, IP, TCP and UDP headers
and the oracle's code the rest.

What it checks: dpkt's decoding of the layers below the transport against our
own (``link.locate_ip``, ``ip.parse_ipv4``/``parse_ipv6`` and the TCP/UDP
header reads of ``frame_loop``): the link layers (Ethernet with 802.1Q/QinQ
tags, Linux cooked v1/v2, BSD loopback, raw IP), IPv4, IPv6 with its
extension headers, TCP and UDP headers.  Everything else is shared with the
main parser, so that any difference the comparison finds is in those layers:

* the capture files are read by ``reader.read_many`` over the package's
  ``capture.read_frames`` (pcap and pcapng, compressed inputs, the
  damaged-file resynchronisation, ParseLimits' ``max_frame_bytes``, several
  files merged in time order);
* IP fragment reassembly (``ip.Reassembler``), TCP stream reassembly and RPC
  record marking (``tcp.TcpReassembler``), the RPC header and NFS decoding
  (``collector.Collector`` -> ``rpc`` / ``decoders``): the whole transport
  layer is ``dissector.Dissector``, fed with dpkt's decoded headers.

dpkt's ``rpc`` module is not used: it cannot decode a header cut short by the
snaplen and exposes neither the AUTH_SYS fields nor the procedure arguments'
offset.
"""

from __future__ import annotations

import dpkt
import pandas as pd
from dpkt import ethernet, ip6, loopback, sll, sll2

from nfstrace.config import ParseLimits
from nfstrace.parsers.capture import Bytes, CaptureInfo, Progress
from nfstrace.parsers.stats import ParseStats
from nfstrace.protocol import link
from oracle.dissector import Dissector, FrameCounts
from oracle.ip import PROTO_TCP, PROTO_UDP, Datagram, Reassembler
from oracle.reader import read_many

# ---- link and network layers with dpkt -----------------------------------------------

# dpkt's class for each link type whose header it decodes
_LINK_CLASSES: dict[int, type[dpkt.Packet]] = {
    link.LINKTYPE_ETHERNET: ethernet.Ethernet,
    link.LINKTYPE_LINUX_SLL: sll.SLL,
    link.LINKTYPE_LINUX_SLL2: sll2.SLL2,
    link.LINKTYPE_NULL: loopback.Loopback,
    link.LINKTYPE_LOOP: loopback.Loopback,
}
_RAW_LINKTYPES = frozenset(
    (link.LINKTYPE_RAW, link.LINKTYPE_RAW_BSD, link.LINKTYPE_RAW_OPENBSD, link.LINKTYPE_IPV4)
    + (link.LINKTYPE_IPV6,)
)


def network_layer(linktype: int, frame: Bytes) -> tuple[dpkt.Packet | None, int]:
    """dpkt's IP or IP6 object inside a frame, and the offset of its header."""
    if linktype in _RAW_LINKTYPES:
        if not frame:
            return None, 0
        version = frame[0] >> 4
        try:
            if version == 4:
                return dpkt.ip.IP(frame), 0
            if version == 6:
                return ip6.IP6(frame), 0
        except dpkt.UnpackError:
            return None, 0
        return None, 0
    cls = _LINK_CLASSES.get(linktype)
    if cls is None:
        return None, 0
    try:
        frame_obj = cls(frame)
    except dpkt.UnpackError:
        return None, 0
    l3 = frame_obj.data
    if not isinstance(l3, dpkt.ip.IP | ip6.IP6):
        return None, 0
    offset = frame_obj.__hdr_len__
    if cls is ethernet.Ethernet:
        offset += 4 * len(getattr(frame_obj, "vlan_tags", ()))
    return l3, offset


# An IP datagram (its payload field unused) and its upper layer as dpkt's
# TCP/UDP object, or raw bytes when dpkt could not decode it.
DpktDatagram = tuple[Datagram, "dpkt.Packet | bytes"]


def _upper(proto: int, payload: bytes) -> dpkt.Packet | bytes:
    """dpkt's TCP/UDP object for a reassembled payload (raw bytes if too short)."""
    cls = {PROTO_TCP: dpkt.tcp.TCP, PROTO_UDP: dpkt.udp.UDP}.get(proto)
    if cls is None:
        return payload
    try:
        return cls(payload)
    except dpkt.UnpackError:
        return payload


def _raw(obj: dpkt.Packet | bytes) -> bytes:
    # dpkt re-packs a parsed TCP/UDP header from its fields: byte-exact
    return obj if isinstance(obj, bytes) else bytes(obj)


def ipv4_datagram(
    ip: dpkt.ip.IP, wire_len: int, ts: int, frame: int, reasm: Reassembler
) -> DpktDatagram | None:
    hl = ip.hl * 4
    tot_len = ip.len or wire_len  # 0: a TSO packet captured before segmentation
    if tot_len < hl:
        return None
    if not ip.mf and not ip.offset:
        dg = Datagram(ip.src, ip.dst, ip.p, b"", tot_len - hl, 1, ts, frame, ip.ttl, tot_len)
        return dg, ip.data
    got = reasm.add(
        (4, ip.src, ip.dst, ip.id, ip.p),
        ip.offset * 8,
        tot_len - hl,
        _raw(ip.data),
        ip.mf,
        ts,
        frame,
        0,
        ip.ttl,
        tot_len,
    )
    if got is None:
        return None
    payload, total, count, ts_first, frame_first, _ = got
    dg = Datagram(ip.src, ip.dst, ip.p, b"", total, count, ts_first, frame_first)
    return dg, _upper(ip.p, payload)


def ipv6_datagram(
    ip: ip6.IP6, wire_len: int, ts: int, frame: int, reasm: Reassembler
) -> DpktDatagram | None:
    plen = ip.plen or wire_len - 40  # 0: jumbogram or TSO
    exts = ip.all_extension_headers
    frag_at = next((i for i, x in enumerate(exts) if isinstance(x, ip6.IP6FragmentHeader)), -1)
    frag = exts[frag_at] if frag_at >= 0 else None
    if frag is None or (not frag.frag_off and not frag.m_flag):  # whole (or atomic fragment)
        upper_len = plen - sum(x.length for x in exts)
        dg = Datagram(ip.src, ip.dst, ip.p, b"", upper_len, 1, ts, frame, ip.hlim, 40 + plen)
        return dg, ip.data
    before = sum(x.length for x in exts[: frag_at + 1])
    if frag.frag_off:
        fragmentable = _raw(ip.data)  # dpkt leaves a later fragment's bytes raw (or re-packs)
    else:  # the first fragment: headers after the Fragment header travel in it
        fragmentable = b"".join(bytes(x) for x in exts[frag_at + 1 :]) + _raw(ip.data)
    got = reasm.add(
        (6, ip.src, ip.dst, frag.id),
        frag.frag_off * 8,
        plen - before,
        fragmentable,
        bool(frag.m_flag),
        ts,
        frame,
        frag.nxt,
        ip.hlim,
        40 + plen,
    )
    if got is None:
        return None
    payload, total, count, ts_first, frame_first, nh = got
    pos = 0
    while nh in ip6.EXT_HDRS_CLS and nh != dpkt.ip.IP_PROTO_FRAGMENT:
        try:
            ext = ip6.EXT_HDRS_CLS[nh](payload[pos:])
        except dpkt.UnpackError:
            return None
        nh, pos = ext.nxt, pos + ext.length
    if pos > len(payload):
        return None
    dg = Datagram(ip.src, ip.dst, nh, b"", total - pos, count, ts_first, frame_first)
    return dg, _upper(nh, payload[pos:])


# ---- transport: dissector.Dissector, fed with dpkt's decoded headers ---------------------------


def parse(
    paths: list[str],
    limits: ParseLimits | None = None,
    progress: Progress | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, ParseStats]:
    """Read capture files with dpkt; return (messages, transport events, stats),
    the contract of ``nfstrace.parsers.frame_loop.parse``."""
    limits = limits or ParseLimits()
    stats = ParseStats(files=[CaptureInfo(path=p) for p in paths])
    d = Dissector(limits, stats)
    counts = FrameCounts()
    frames = read_many(paths, stats.files, limits.max_frame_bytes)
    for frame_no, ts, linktype, view, origlen in d.frames(frames, progress):
        data = bytes(view)  # dpkt decodes bytes; the reader hands out views of its buffer
        l3, off = network_layer(linktype, data)
        # the frame's length on the wire (a record claiming less than it
        # captured is damaged: the captured length holds), as frame_loop takes it
        wire = max(origlen, len(data)) - off
        if isinstance(l3, dpkt.ip.IP):
            counts.ipv4 += 1
            got = ipv4_datagram(l3, wire, ts, frame_no, d.reasm)
        elif isinstance(l3, ip6.IP6):
            counts.ipv6 += 1
            got = ipv6_datagram(l3, wire, ts, frame_no, d.reasm)
        else:
            counts.non_ip += 1
            continue
        if got is None:
            if d.reasm.partial:
                d.partial_datagrams()
            continue
        dg, l4 = got
        if dg.proto == PROTO_TCP:
            counts.tcp += 1
            if not isinstance(l4, dpkt.tcp.TCP):
                counts.short += 1
                d.count_packet(dg)
                continue
            hl = l4.off * 4
            # the segment as captured: dpkt re-packs header and options byte-exact
            seg = memoryview(bytes(l4))
            d.tcp_segment(
                dg, ts, frame_no, l4.sport, l4.dport, l4.seq, l4.ack, l4.flags, l4.win, hl, seg
            )
        elif dg.proto == PROTO_UDP:
            counts.udp += 1
            f = d.count_packet(dg)
            if not isinstance(l4, dpkt.udp.UDP):
                counts.short += 1
                continue
            if f is not None:
                d.sample_udp(f, dg, bytes(l4))
            d.udp_datagram(dg, ts, frame_no, l4.sport, l4.dport, memoryview(l4.data))
        else:
            counts.other += 1
            d.count_packet(dg)
    return d.finish(counts)
