"""The built-in ("fast") parser: capture files -> the messages table.

The per-frame loop lives here and is kept tight: link -> IP (with fragment
reassembly) -> UDP datagram or TCP segment -> record marking -> RPC header.
Nothing is held per packet; per message only its decoded header fields.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from nfstrace.config import ParseLimits
from nfstrace.parsers import rpc
from nfstrace.parsers.capture import CaptureInfo, read_many
from nfstrace.parsers.decoders import decode as decode_procedure
from nfstrace.parsers.ip import PROTO_TCP, PROTO_UDP, Reassembler, parse_ipv4, parse_ipv6
from nfstrace.parsers.link import locate_ip
from nfstrace.parsers.nfs_fields import FIELD_NAMES as NFS_FIELD_NAMES
from nfstrace.parsers.tcp import HalfStream, TcpReassembler
from nfstrace.schema import MESSAGE_DTYPES

# TCP flags
TH_FIN = 0x01
TH_SYN = 0x02
TH_RST = 0x04
TH_ACK = 0x10

# Ports where an RPC reply is accepted even without its call in the capture.
RPC_WELL_KNOWN_PORTS = frozenset((2049, 111))

_TCP_HDR = struct.Struct(">HHIIBBH").unpack_from
_UDP_HDR = struct.Struct(">HHH").unpack_from

EVENT_COLUMNS = ("ts_ns", "frame", "conn", "src", "sport", "dst", "dport", "kind", "seq", "length")


@dataclass
class ParseStats:
    """What the parser saw, for capture-quality reporting."""

    files: list[CaptureInfo] = field(default_factory=list)
    frames: int = 0
    non_ip_frames: int = 0
    ipv4_packets: int = 0
    ipv6_packets: int = 0
    tcp_packets: int = 0
    udp_packets: int = 0
    other_ip_packets: int = 0  # ICMP and others (ICMP errors quote RPC headers: not RPC)
    short_transport_headers: int = 0
    ip_fragments: int = 0
    ip_datagrams_reassembled: int = 0
    ip_datagrams_incomplete: int = 0
    tcp: dict[str, int] = field(default_factory=dict)
    messages: int = 0
    calls: int = 0
    replies: int = 0
    truncated_messages: int = 0  # some bytes of the message not captured
    incomplete_messages: int = 0  # the message's end was never seen
    headerless_messages: int = 0  # a record whose RPC header was not captured
    not_rpc_records: int = 0  # records whose first bytes were not an RPC header
    replies_without_call_info: int = 0

    @property
    def interface_drops(self) -> int:
        return sum(f.interface_drops for f in self.files)

    @property
    def truncated_frames(self) -> int:
        return sum(f.truncated_frames for f in self.files)

    @property
    def warnings(self) -> list[str]:
        return [f"{f.path}: {w}" for f in self.files for w in f.warnings]


class _Collector:
    """Turns assembled messages into rows; remembers calls to name replies."""

    def __init__(self, limits: ParseLimits, stats: ParseStats) -> None:
        self.rows: list[tuple] = []
        self.events: list[tuple] = []
        # (client, server, xid) -> (prog, vers, proc, gss_service, gss_proc) of the last call
        self.calls: dict[tuple[bytes, bytes, int], tuple[int, int, int, str, int]] = {}
        self.max_calls = limits.max_pending_calls
        self.stats = stats

    def is_pending_call(self, hs: HalfStream, xid: int) -> bool:
        return (hs.dst, hs.src, xid) in self.calls

    def event(self, hs: HalfStream, kind: str, ts: int, frame: int, seq: int, length: int) -> None:
        self.events.append(
            (ts, frame, hs.conn, hs.src, hs.sport, hs.dst, hs.dport, kind, seq, length)
        )

    def message(
        self,
        src: bytes,
        sport: int,
        dst: bytes,
        dport: int,
        transport: str,
        conn: int,
        head: bytes,
        rpc_len: int,
        captured: int,
        ts_first: int,
        ts_last: int,
        frame_first: int,
        frame_last: int,
        frames: int,
        ip_frags: int,
        record_frags: int,
        complete: bool,
    ) -> None:
        st = self.stats
        hdr = rpc.decode_header(head)
        if hdr is None:
            if len(head) < 8:
                st.headerless_messages += 1
            else:
                st.not_rpc_records += 1
            return
        xid = hdr[0]
        if hdr[1] == "call":
            st.calls += 1
            calls = self.calls
            key = (src, dst, xid)
            if key in calls:
                del calls[key]  # re-insert: keep the dict ordered by last use
            elif len(calls) >= self.max_calls:
                del calls[next(iter(calls))]
            calls[key] = (hdr[2], hdr[3], hdr[4], hdr[10], hdr[9])
            nfs = decode_procedure(True, hdr[2], hdr[3], hdr[4], head, hdr[14], hdr[10], hdr[9])
        else:
            st.replies += 1
            info = self.calls.get((dst, src, xid))
            if info is not None:
                prog, vers, proc, gss_service, gss_proc = info
                hdr = (*hdr[:2], prog, vers, proc, *hdr[5:])
                nfs = decode_procedure(
                    False, prog, vers, proc, head, hdr[14], gss_service, gss_proc
                )
            else:
                st.replies_without_call_info += 1
                nfs = decode_procedure(False, -1, -1, -1, head, hdr[14], "", -1)
        truncated = captured < rpc_len or not complete
        if truncated:
            st.truncated_messages += 1
        if not complete:
            st.incomplete_messages += 1
        st.messages += 1
        self.rows.append(
            (ts_first, ts_last, frame_first, frame_last, src, sport, dst, dport, transport, conn)
            + hdr
            + (rpc_len, captured, record_frags, frames, ip_frags, truncated)
            + nfs
        )


_ROW_COLUMNS = (
    ("ts_first_ns", "ts_last_ns", "frame_first", "frame_last", "src", "sport", "dst", "dport")
    + ("transport", "conn")
    + rpc.HEADER_FIELDS
    + ("rpc_len", "captured_len", "record_frags", "frames", "ip_frags", "truncated")
    + NFS_FIELD_NAMES
)
assert set(_ROW_COLUMNS) == set(MESSAGE_DTYPES)


def _addr_text(raw: bytes, cache: dict[bytes, str]) -> str:
    s = cache.get(raw)
    if s is None:
        s = cache[raw] = socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, raw)
    return s


def parse(
    paths: list[str],
    limits: ParseLimits | None = None,
    progress: Callable[[int], None] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, ParseStats]:
    """Read capture files; return (messages, transport events, stats)."""
    limits = limits or ParseLimits()
    stats = ParseStats(files=[CaptureInfo(path=p) for p in paths])
    col = _Collector(limits, stats)
    reasm = Reassembler(limits.ip_reassembly_timeout_ns, limits.max_ip_reassemblies)

    def emit_tcp(hs: HalfStream, head: bytes, rpc_len: int, captured: int, *rest: int) -> None:
        col.message(
            hs.src, hs.sport, hs.dst, hs.dport, "tcp", hs.conn, head, rpc_len, captured, *rest
        )

    tcp = TcpReassembler(limits, emit_tcp, col.event, col.is_pending_call)
    streams: dict[tuple, HalfStream] = {}
    conns: dict[tuple, int] = {}
    head_limit = limits.head_bytes
    message = col.message
    calls = col.calls
    frame_no = 0
    n_conns = 0
    n_v4 = n_v6 = n_tcp = n_udp = n_other = n_nonip = n_short = 0
    for ts, linktype, data, origlen, _fidx in read_many(paths, stats.files):
        frame_no += 1
        if progress is not None and not frame_no & 0x3FFF:
            progress(frame_no)
        ver, off = locate_ip(linktype, data)
        if ver == 4:
            n_v4 += 1
            dg = parse_ipv4(data, off, origlen - off, ts, frame_no, reasm)
        elif ver == 6:
            n_v6 += 1
            dg = parse_ipv6(data, off, origlen - off, ts, frame_no, reasm)
        else:
            n_nonip += 1
            continue
        if dg is None:
            continue
        proto = dg.proto
        p = dg.payload
        if proto == PROTO_TCP:
            n_tcp += 1
            if len(p) < 20:
                n_short += 1
                continue
            sport, dport, seq, ack, hl, flags, window = _TCP_HDR(p, 0)
            hl = (hl >> 4) * 4
            key = (dg.src, sport, dg.dst, dport)
            hs = streams.get(key)
            if hs is None or (flags & TH_SYN and not flags & TH_ACK and hs.synced):
                rkey = (dg.dst, dport, dg.src, sport)
                ckey = key if key < rkey else rkey
                conn = conns.get(ckey, 0)
                if hs is not None or not conn:  # a new connection (maybe reusing the ports)
                    n_conns += 1
                    conn = conns[ckey] = n_conns
                    rev = streams.get(rkey)
                    if hs is not None:
                        tcp.flush(hs, ts, frame_no)
                        if rev is not None:
                            tcp.flush(rev, ts, frame_no)
                            streams[rkey] = HalfStream(rev.src, rev.sport, rev.dst, rev.dport, conn)
                hs = streams[key] = HalfStream(dg.src, sport, dg.dst, dport, conn)
            if flags & TH_SYN:
                tcp.start(hs, seq)
            elif window == 0 and not flags & TH_RST and hs.synced:
                col.event(hs, "tcp_zero_window", ts, frame_no, seq, 0)
            if flags & TH_ACK:
                rev = streams.get((dg.dst, dport, dg.src, sport))
                if rev is not None and rev.pending:
                    tcp.acked(rev, ack, ts, frame_no)
            wire = dg.wire_len - hl
            if wire > 0:
                tcp.segment(hs, seq, p[hl:], wire, dg.ts_first, frame_no, dg.frags)
            if flags & (TH_FIN | TH_RST):
                tcp.flush(hs, ts, frame_no)
                if flags & TH_RST:
                    rev = streams.get((dg.dst, dport, dg.src, sport))
                    if rev is not None:
                        tcp.flush(rev, ts, frame_no)
        elif proto == PROTO_UDP:
            n_udp += 1
            if len(p) < 8:
                n_short += 1
                continue
            sport, dport, _ulen = _UDP_HDR(p, 0)
            body = p[8:]
            if len(body) < 12:
                continue
            if body[7] == rpc.CALL:
                if not rpc.plausible_call(
                    body,
                    0,
                    known_only=sport not in RPC_WELL_KNOWN_PORTS
                    and dport not in RPC_WELL_KNOWN_PORTS,
                ):
                    continue
            elif body[7] == rpc.REPLY:
                xid = int.from_bytes(body[0:4], "big")
                if not rpc.plausible_reply(body, 0) or (
                    (dg.dst, dg.src, xid) not in calls and sport not in RPC_WELL_KNOWN_PORTS
                ):
                    continue
            else:
                continue
            ckey = (dg.src, sport, dg.dst, dport)
            rkey = (dg.dst, dport, dg.src, sport)
            conn = conns.get(ckey) or conns.get(rkey)
            if conn is None:
                n_conns += 1
                conn = conns[min(ckey, rkey)] = n_conns
            message(
                dg.src,
                sport,
                dg.dst,
                dport,
                "udp",
                conn,
                bytes(body[:head_limit]),
                dg.wire_len - 8,
                len(body),
                dg.ts_first,
                ts,
                dg.frame_first,
                frame_no,
                dg.frags,
                dg.frags,
                1,
                True,
            )
        else:
            n_other += 1
    for hs in streams.values():
        tcp.flush(hs, hs.ts_last, hs.frame_last)
    reasm.finish()
    stats.frames = frame_no
    stats.ipv4_packets, stats.ipv6_packets = n_v4, n_v6
    stats.tcp_packets, stats.udp_packets, stats.other_ip_packets = n_tcp, n_udp, n_other
    stats.non_ip_frames, stats.short_transport_headers = n_nonip, n_short
    fs = reasm.stats
    stats.ip_fragments = fs.fragments
    stats.ip_datagrams_reassembled = fs.reassembled
    stats.ip_datagrams_incomplete = fs.incomplete
    stats.tcp = tcp.stats.as_dict()
    return _messages_frame(col.rows), _events_frame(col.events), stats


def _messages_frame(rows: list[tuple]) -> pd.DataFrame:
    cache: dict[bytes, str] = {}
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(_ROW_COLUMNS)
    data = dict(zip(_ROW_COLUMNS, columns, strict=True))
    for name in ("src", "dst"):
        data[name] = [_addr_text(a, cache) for a in data[name]]
    df = pd.DataFrame(data, columns=list(MESSAGE_DTYPES))
    df = df.astype(MESSAGE_DTYPES)
    return df.sort_values(["ts_first_ns", "frame_first"], kind="stable", ignore_index=True)


def _events_frame(events: list[tuple]) -> pd.DataFrame:
    cache: dict[bytes, str] = {}
    df = pd.DataFrame(events, columns=list(EVENT_COLUMNS))
    if len(df):
        df["src"] = [_addr_text(a, cache) for a in df["src"]]
        df["dst"] = [_addr_text(a, cache) for a in df["dst"]]
    return df
