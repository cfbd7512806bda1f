"""The dpkt backend (``--parser dpkt``): capture files -> the messages table,
with dpkt dissecting what it knows and our code doing the rest.

dpkt does: the capture formats' records (pcap file and packet headers in both
byte orders, micro- and nanosecond; pcapng section, interface, enhanced and
obsolete packet blocks, options), the link layers (Ethernet with 802.1Q/QinQ
tags, Linux cooked v1/v2, BSD loopback), IPv4, IPv6 with its extension
headers, TCP and UDP headers.

Ours, where dpkt has no equivalent: decompression and opening
(``capture.open_stream``), the merge of several files in time order, IP
fragment reassembly (``ip.Reassembler``), TCP stream reassembly and RPC
record marking (``tcp.TcpReassembler``), the RPC header and NFS decoding
(``collector.Collector`` -> ``rpc`` / ``decoders``): the whole transport layer
is ``dissector.Dissector``, fed with dpkt's decoded headers.  dpkt's ``rpc``
module is not used: it cannot decode a header cut short by the snaplen and exposes neither
the AUTH_SYS fields nor the procedure arguments' offset.

dpkt's own ``pcap.Reader``/``pcapng.Reader`` are not used as iterators: they
return float timestamps (nanoseconds lost), hide the frame's wire length, and
``pcapng.Reader`` knows only the first interface of a file.  This module
walks the files record by record with dpkt's record classes instead.
"""

from __future__ import annotations

import heapq
import lzma
import struct
import zlib
from collections.abc import Iterator
from typing import BinaryIO

import dpkt
import pandas as pd
from dpkt import ethernet, ip6, loopback, pcap, pcapng, sll, sll2

from nfstrace.config import ParseLimits
from nfstrace.errors import CaptureError
from nfstrace.parsers.capture import (
    MAX_FRAME,
    Bytes,
    CaptureInfo,
    Frame,
    Progress,
    file_bytes_read,
    open_stream,
)
from nfstrace.parsers.dissector import Dissector
from nfstrace.parsers.ip import PROTO_TCP, PROTO_UDP, Datagram, Reassembler
from nfstrace.parsers.stats import FrameCounts, ParseStats
from nfstrace.protocol import link

# ---- capture files, record by record with dpkt's record classes ---------------------


class _StatisticsBlock(pcapng._PcapngBlock):
    """pcapng Interface Statistics Block (dpkt has none): header and options."""

    __hdr__ = (
        ("type", "I", 5),
        ("len", "I", 24),
        ("iface_id", "I", 0),
        ("ts_high", "I", 0),
        ("ts_low", "I", 0),
        ("_len", "I", 24),
    )


class _StatisticsBlockLE(_StatisticsBlock):
    __byte_order__ = "<"


PCAPNG_BT_ISB = 5
ISB_IFDROP, ISB_OSDROP = 5, 7
_PCAP_NANO_MAGICS = frozenset((pcap.TCPDUMP_MAGIC_NANO, pcap.PMUDPCT_MAGIC_NANO))


def read_frames(path: str, index: int, info: CaptureInfo) -> Iterator[Frame]:
    """Frames of one file in file order: (ts_ns, linktype, data, orig_len, index)."""
    stream, info.compression = open_stream(path)
    with stream:
        try:
            head = stream.read(4)
        except (OSError, EOFError, lzma.LZMAError, zlib.error) as e:
            raise CaptureError(f"not a readable compressed file: {e}", path) from None
        if len(head) < 4:
            raise CaptureError("empty file" if not head else "too short to be a capture file", path)
        (magic,) = struct.unpack("<I", head)
        if magic == pcapng.PCAPNG_BT_SHB:
            info.format = "pcapng"
            yield from _pcapng(stream, head, index, info)
        elif struct.unpack(">I", head)[0] in pcap.MAGIC_TO_PKT_HDR:
            info.format = "pcap"
            yield from _pcap(stream, head, index, info)
        else:
            raise CaptureError("not a pcap or pcapng capture file", path)


def _read(stream: BinaryIO, n: int, info: CaptureInfo) -> bytes:
    try:
        data = stream.read(n)
        info.read_bytes = file_bytes_read(stream, stream.tell())
        return data
    except (OSError, EOFError, lzma.LZMAError, zlib.error) as e:  # corrupt or cut-off data
        info.warnings.append(f"decompression stopped: {e}")
        return b""


def _pcap(stream: BinaryIO, head: bytes, index: int, info: CaptureInfo) -> Iterator[Frame]:
    buf = head + _read(stream, pcap.FileHdr.__hdr_len__ - 4, info)
    if len(buf) < pcap.FileHdr.__hdr_len__:
        raise CaptureError("pcap file header cut short", info.path)
    # dpkt reads the file header big-endian; its magic table maps the value
    # seen that way to the record-header class of the file's byte order.
    fh = pcap.FileHdr(buf)
    hdr_cls = pcap.MAGIC_TO_PKT_HDR[fh.magic]
    if hdr_cls.__hdr_fmt__[0] == "<":
        fh = pcap.LEFileHdr(buf)
    sub_ns = 1 if fh.magic in _PCAP_NANO_MAGICS else 1000
    linktype = fh.linktype & 0x0FFFFFFF  # upper bits may carry FCS flags
    info.snaplen = fh.snaplen
    info.linktypes.add(linktype)
    hdr_len = hdr_cls.__hdr_len__
    consumed = len(buf)
    while True:
        raw = _read(stream, hdr_len, info)
        if len(raw) < hdr_len:
            if raw:
                info.warnings.append("file ends inside a frame header (capture cut off)")
            break
        ph = hdr_cls(raw)
        if ph.caplen > MAX_FRAME:
            info.warnings.append(
                f"frame {info.frames + 1}: impossible captured length {ph.caplen}; "
                "rest of file skipped"
            )
            break
        data = _read(stream, ph.caplen, info)
        if len(data) < ph.caplen:
            info.warnings.append(f"file ends inside frame {info.frames + 1} (capture cut off)")
            break
        consumed += hdr_len + ph.caplen
        info.frames += 1
        info.bytes = consumed
        if ph.caplen < ph.len:
            info.truncated_frames += 1
        yield ph.tv_sec * 1_000_000_000 + ph.tv_usec * sub_ns, linktype, data, ph.len, index


def _interface_clock(idb: pcapng.InterfaceDescriptionBlock, e: str) -> tuple[int, int, int]:
    """(ns multiplier, divisor, offset ns) of an interface's timestamps."""
    mul, div, offset = 1000, 1, 0
    for opt in idb.opts:
        if opt.code == pcapng.PCAPNG_OPT_IF_TSRESOL and opt.data:
            v = opt.data[0]
            if v & 0x80:  # negative power of two
                mul, div = 1_000_000_000, 1 << (v & 0x7F)
            elif v <= 9:
                mul, div = 10 ** (9 - v), 1
            else:
                mul, div = 1, 10 ** (v - 9)
        elif opt.code == pcapng.PCAPNG_OPT_IF_TSOFFSET and len(opt.data) >= 8:
            offset = struct.unpack(e + "q", opt.data[:8])[0] * 1_000_000_000
    return mul, div, offset


def _pcapng(stream: BinaryIO, head: bytes, index: int, info: CaptureInfo) -> Iterator[Frame]:
    e = "<"
    le = True
    ifaces: list[tuple[int, int, int, int, int]] = []  # linktype, snaplen, mul, div, offset
    drops: dict[tuple[int, int], int] = {}
    pending = head
    while True:
        raw = pending + _read(stream, 12 - len(pending), info)
        pending = b""
        if len(raw) < 12:
            if raw:
                info.warnings.append("file ends inside a block header (capture cut off)")
            break
        btype, blen = struct.unpack(e + "II", raw[:8])
        if btype == pcapng.PCAPNG_BT_SHB:
            (bom,) = struct.unpack("<I", raw[8:12])
            if bom == pcapng.BYTE_ORDER_MAGIC:
                e, le = "<", True
            elif bom == pcapng.BYTE_ORDER_MAGIC_LE:
                e, le = ">", False
            else:
                info.warnings.append("pcapng section header with bad byte-order magic; stopped")
                break
            (blen,) = struct.unpack(e + "I", raw[4:8])
            ifaces = []  # interface ids are per section
        if blen < 12 or blen % 4 or blen > MAX_FRAME:
            info.warnings.append(
                f"pcapng block with impossible length {blen}; rest of file skipped"
            )
            break
        block = raw + _read(stream, blen - 12, info)
        if len(block) < blen:
            info.warnings.append("file ends inside a block (capture cut off)")
            break
        info.bytes += blen
        try:
            if btype == pcapng.PCAPNG_BT_EPB or btype == pcapng.PCAPNG_BT_PB:
                if btype == pcapng.PCAPNG_BT_EPB:
                    pb = (pcapng.EnhancedPacketBlockLE if le else pcapng.EnhancedPacketBlock)(block)
                else:
                    pb = (pcapng.PacketBlockLE if le else pcapng.PacketBlock)(block)
                if pb.iface_id >= len(ifaces):
                    info.warnings.append(
                        f"pcapng packet block {info.frames + 1} is inconsistent; skipped"
                    )
                    continue
                linktype, _snap, mul, div, offset = ifaces[pb.iface_id]
                ts = ((pb.ts_high << 32) | pb.ts_low) * mul // div + offset
                info.frames += 1
                if pb.caplen < pb.pkt_len:
                    info.truncated_frames += 1
                yield ts, linktype, pb.pkt_data, pb.pkt_len, index
            elif btype == pcapng.PCAPNG_BT_SPB:
                # dpkt has no Simple Packet Block: no timestamp, interface 0.
                if not ifaces:
                    continue
                (origlen,) = struct.unpack(e + "I", block[8:12])
                caplen = min(origlen, blen - 16, ifaces[0][1] or origlen)
                info.frames += 1
                yield 0, ifaces[0][0], block[12 : 12 + caplen], origlen, index
            elif btype == pcapng.PCAPNG_BT_IDB:
                idb = (
                    pcapng.InterfaceDescriptionBlockLE if le else pcapng.InterfaceDescriptionBlock
                )(block)
                ifaces.append((idb.linktype, idb.snaplen, *_interface_clock(idb, e)))
                info.linktypes.add(idb.linktype)
                info.snaplen = max(info.snaplen, idb.snaplen)
            elif btype == PCAPNG_BT_ISB:
                isb = (_StatisticsBlockLE if le else _StatisticsBlock)(block)
                for opt in isb.opts:
                    if opt.code in (ISB_IFDROP, ISB_OSDROP) and len(opt.data) >= 8:
                        # cumulative counters: keep the latest per interface
                        drops[(isb.iface_id, opt.code)] = struct.unpack(e + "Q", opt.data[:8])[0]
                info.interface_drops = sum(drops.values())
            # other blocks (SHB body, name resolution, secrets, custom) carry no frames
        except (dpkt.UnpackError, struct.error, UnicodeDecodeError):  # dpkt decodes text options
            info.warnings.append(f"pcapng block of type {btype} is malformed; skipped")


def read_many(paths: list[str], infos: list[CaptureInfo]) -> Iterator[Frame]:
    """Frames of several files merged in time order (each file trusted to be in order)."""
    streams = [
        read_frames(p, i, info) for i, (p, info) in enumerate(zip(paths, infos, strict=True))
    ]
    if len(streams) == 1:
        return streams[0]
    return heapq.merge(*streams, key=lambda f: f[0])


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
    frames = read_many(paths, stats.files)
    for frame_no, ts, linktype, data, origlen in d.frames(frames, progress):
        l3, off = network_layer(linktype, data)
        if isinstance(l3, dpkt.ip.IP):
            counts.ipv4 += 1
            got = ipv4_datagram(l3, origlen - off, ts, frame_no, d.reasm)
        elif isinstance(l3, ip6.IP6):
            counts.ipv6 += 1
            got = ipv6_datagram(l3, origlen - off, ts, frame_no, d.reasm)
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
