"""The pure-Python parser (``--parser fast``; the readable specification the
native one ports): capture files -> (messages, events, stats).

The per-frame loop lives here and is kept tight: link -> IP (with fragment
reassembly) -> UDP datagram or TCP segment, handed to the ``Dissector``.
Nothing is held per packet; per message only its decoded header fields.
"""

from __future__ import annotations

import pandas as pd

from nfstrace.config import ParseLimits
from nfstrace.parsers.capture import CaptureInfo, Progress
from nfstrace.parsers.link import locate_ip
from nfstrace.parsers.stats import ParseStats
from oracle.dissector import TCP_HEADER, UDP_HEADER, Dissector, FrameCounts
from oracle.ip import (
    CHECKSUM_SAMPLE,
    F_CSUM_CHECKED,
    PROTO_TCP,
    PROTO_UDP,
    parse_ipv4,
    parse_ipv6,
)
from oracle.reader import read_many


def parse(
    paths: list[str],
    limits: ParseLimits | None = None,
    progress: Progress | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, ParseStats]:
    """Read capture files; return (messages, transport events, stats)."""
    limits = limits or ParseLimits()
    stats = ParseStats(files=[CaptureInfo(path=p) for p in paths])
    d = Dissector(limits, stats)
    reasm = d.reasm
    tcp_segment = d.tcp_segment
    udp_datagram = d.udp_datagram
    n_v4 = n_v6 = n_tcp = n_udp = n_other = n_nonip = n_short = n_bad_tcp = 0
    frames = read_many(paths, stats.files, limits.max_frame_bytes)
    for frame_no, ts, linktype, data, origlen in d.frames(frames, progress):
        ver, off = locate_ip(linktype, data)
        # the frame's length on the wire (a record claiming less than it
        # captured is damaged: the captured length holds)
        wire = origlen - off if origlen >= len(data) else len(data) - off
        if ver == 4:
            n_v4 += 1
            dg = parse_ipv4(data, off, wire, ts, frame_no, reasm)
        elif ver == 6:
            n_v6 += 1
            dg = parse_ipv6(data, off, wire, ts, frame_no, reasm)
        else:
            n_nonip += 1
            continue
        if dg is None:
            if reasm.partial:
                d.partial_datagrams()
            continue
        proto = dg.proto
        p = dg.payload
        if proto == PROTO_TCP:
            n_tcp += 1
            if len(p) < 20:
                n_short += 1
                d.count_packet(dg)
                continue
            sport, dport, seq, ack, hl, flags, window = TCP_HEADER(p, 0)
            hl = (hl >> 4) * 4
            if hl < 20 or hl > dg.wire_len:  # a header length that lies
                n_bad_tcp += 1
                d.count_packet(dg)
                continue
            tcp_segment(dg, ts, frame_no, sport, dport, seq, ack, flags, window, hl, p)
        elif proto == PROTO_UDP:
            n_udp += 1
            f = d.count_packet(dg)
            if len(p) < 8:
                n_short += 1
                continue
            if f is not None and f[F_CSUM_CHECKED] < CHECKSUM_SAMPLE:
                d.sample_udp(f, dg, p)
            sport, dport, _ulen = UDP_HEADER(p, 0)
            udp_datagram(dg, ts, frame_no, sport, dport, p[8:])
        else:
            n_other += 1
            d.count_packet(dg)
    return d.finish(FrameCounts(n_v4, n_v6, n_nonip, n_tcp, n_udp, n_other, n_short, n_bad_tcp))
