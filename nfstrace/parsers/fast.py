"""The built-in ("fast") parser: capture files -> the messages table.

The per-frame loop lives here and is kept tight: link -> IP (with fragment
reassembly) -> UDP datagram or TCP segment -> record marking -> RPC header.
Nothing is held per packet; per message only its decoded header fields.
"""

from __future__ import annotations

import socket
import struct
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from nfstrace.config import CHECK_EVERY_FRAMES, ParseLimits
from nfstrace.parsers import portmap, rpc
from nfstrace.parsers.capture import Bytes, CaptureInfo, Frame, Progress, read_many
from nfstrace.parsers.decoders import MAX_FLOWS, decode_reply_without_call
from nfstrace.parsers.decoders import decode as decode_procedure
from nfstrace.parsers.ip import (
    CHECKSUM_SAMPLE,
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
    PROTO_TCP,
    PROTO_UDP,
    Datagram,
    Facts,
    Reassembler,
    checksum_ok,
    count_packet,
    direction_facts,
    parse_ipv4,
    parse_ipv6,
    partition_of,
    sample_checksum,
    walk_extensions,
)
from nfstrace.parsers.link import locate_ip
from nfstrace.parsers.nfs_fields import FIELD_NAMES as NFS_FIELD_NAMES
from nfstrace.parsers.tcp import IGNORE, RTT_MAX_SEGMENT, HalfStream, TcpReassembler
from nfstrace.schema import EVENT_DTYPES, MESSAGE_DTYPES

# TCP flags
TH_FIN = 0x01
TH_SYN = 0x02
TH_RST = 0x04
TH_ACK = 0x10
# TCP options (RFC 9293, RFC 7323)
TCPOPT_EOL, TCPOPT_NOP, TCPOPT_MSS, TCPOPT_WSCALE = 0, 1, 2, 3
MAX_WSCALE = 14
# RFC 9293: the MSS a sender assumes when the peer's SYN carried none.
DEFAULT_MSS = 536

# Ports where an RPC reply is accepted even without its call in the capture.
RPC_WELL_KNOWN_PORTS = frozenset((2049, 111))
# UDP (address, port) pairs learnt from portmap/rpcbind replies (parsers/portmap.py)
# that are remembered, and portmap/rpcbind calls whose question is remembered
# until their reply (all forgotten at once past the bound).
MAX_LEARNT_PORTS = 65536
MAX_PORTMAP_ASKS = 4096

_TCP_HDR = struct.Struct(">HHIIBBH").unpack_from
_UDP_HDR = struct.Struct(">HHH").unpack_from

# Message rows held as tuples before they are made a typed DataFrame chunk
# (bounds the parser's memory: ~1 GB instead of ~1.9 GB for 1M messages).
CHUNK_ROWS = 65536

SEQ_MASK = (1 << 32) - 1
SEQ_HALF = 1 << 31
# A SYN whose sequence number is within this many bytes (or the peer's last
# window, if larger) of the next byte its direction of an established
# connection expects is not a new connection (see Dissector._syn_dropped).
SYN_WINDOW = 65535
# Frames remembered for the mirror-duplicate check (Dissector.frames): past it
# the older generation is dropped early (only above ~4M frames a second).
MAX_RECENT_FRAMES = 4096


@dataclass(frozen=True)
class DirectionFacts:
    """IP-level facts of one direction (source address -> destination address)."""

    src: str
    dst: str
    packets: int  # IP packets, fragments counted one by one (mirror duplicates not)
    ip_bytes: int  # their IP lengths summed
    max_ip_len: int  # the largest IP packet: shows the path MTU (or TSO/GRO when above it)
    ttl_min: int  # IPv4 TTL / IPv6 hop limit (-1: no packet)
    ttl_max: int
    ip_fragments: int
    datagrams_reassembled: int
    datagrams_incomplete: int  # datagrams some of whose fragments never came
    # TCP/UDP checksums verified on a sample (ip.CHECKSUM_SAMPLE whole packets)
    # and those found bad: all bad on one host's outgoing packets is transmit
    # checksum offload, captured on that host
    checksums_checked: int = 0
    checksums_bad: int = 0


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
    # identical to a frame captured just before (ParseLimits.duplicate_window_ns): skipped
    duplicate_frames: int = 0
    directions: list[DirectionFacts] = field(default_factory=list)
    tcp_connections: int = 0
    # TCP connections whose window scale is unknown in at least one direction
    # (SYN or SYN-ACK not captured): no window-full detection that way.
    tcp_window_scale_unknown: int = 0
    # Damage met in the packets and what was done about it, by name (ANOMALIES)
    anomalies: dict[str, int] = field(default_factory=dict)
    # The frame number at which each connection id (1, 2, ...: messages.conn)
    # began: how the partitions of a parallel parse number them as one parse.
    connection_frames: list[int] = field(default_factory=list, repr=False)

    @property
    def interface_drops(self) -> int:
        return sum(f.interface_drops for f in self.files)

    @property
    def truncated_frames(self) -> int:
        return sum(f.truncated_frames for f in self.files)

    @property
    def warnings(self) -> list[str]:
        """The capture files' damage, then the packets' (ANOMALIES marked as
        warnings): one line each, with its count."""
        out = [f"{f.path}: {w}" for f in self.files for w in f.warnings]
        for name, (warn, text) in ANOMALIES.items():
            n = self.anomalies.get(name, 0)
            if n and warn:
                out.append(text.format(n=n))
        return out


# Named anomalies (ParseStats.anomalies): (a warning?, what it means).  Those
# that are not warnings also happen on healthy captures of lossy networks and
# are reported with the capture facts.
ANOMALIES: dict[str, tuple[bool, str]] = {
    "tcp_header_length": (
        True,
        "{n:,} TCP segments with an impossible header length (below 20 bytes or past "
        "the packet): skipped",
    ),
    "ip_length_exceeds_frame": (
        True,
        "{n:,} IP packets claiming more bytes than their frame had on the wire: "
        "taken as long as the frame",
    ),
    "record_mark_too_long": (
        False,
        "{n:,} RPC record marks longer than the record limit: the stream was "
        "resynchronised at the next RPC header",
    ),
    "rpc_auth_too_long": (
        False,
        "{n:,} RPC calls or replies with a credential or verifier longer than 400 bytes: "
        "kept without their procedure's arguments/results",
    ),
    "messages_limit": (
        True,
        "stopped reading at frame {n:,}: the RPC messages read reached "
        "ParseLimits.max_messages (half the memory available at start): the rest of "
        "the capture is not analysed",
    ),
    "calls_forgotten": (
        True,
        "{n:,} calls still waiting for their reply were forgotten to bound memory "
        "(ParseLimits.max_pending_calls): a reply to one of them is not decoded",
    ),
    "connections_forgotten": (
        False,
        "{n:,} idle connections forgotten to bound memory (ParseLimits.max_connections)",
    ),
    "messages_cut_by_limits": (
        True,
        "{n:,} RPC messages cut short because their connection was forgotten to bound "
        "memory (ParseLimits.max_connections)",
    ),
    "tcp_holes_by_memory": (
        True,
        "{n:,} TCP holes declared lost early to bound the bytes held for reassembly "
        "(ParseLimits.max_pending_bytes_total)",
    ),
    "ip_datagrams_given_up": (
        True,
        "{n:,} IP datagrams given up to bound fragment reassembly memory "
        "(ParseLimits.max_ip_reassembly_bytes / max_fragments_per_datagram)",
    ),
    "directions_untracked": (
        True,
        "{n:,} packets of address pairs past ParseLimits.max_directions: counted together, "
        "not per pair",
    ),
    "events_not_recorded": (
        True,
        "{n:,} transport events counted but not recorded (ParseLimits.max_events_per_kind)",
    ),
    "tcp_bad_checksum": (
        True,
        "{n:,} TCP segments with SYN set on an established connection and a bad checksum, "
        "from a host whose other segments have good ones (damaged copies the receiver "
        "dropped): skipped",
    ),
    "tcp_syn_in_window": (
        True,
        "{n:,} TCP segments with SYN set inside an established connection's window, before "
        "any FIN or RST (not a new connection: the receiver drops them): skipped",
    ),
}


class _Collector:
    """Turns assembled messages into rows; remembers calls to name replies."""

    def __init__(self, limits: ParseLimits, stats: ParseStats) -> None:
        self.rows: list[tuple] = []
        self.n_rows = 0  # rows made so far (in chunks and rows)
        self.acked: list[tuple[int, int]] = []  # (row, time of the ACK covering its last byte)
        # rows already made typed DataFrames, CHUNK_ROWS at a time: a tuple of
        # Python objects per row costs several times the typed columns
        self.chunks: list[pd.DataFrame] = []
        self.events: list[tuple] = []
        self.event_counts: dict[str, int] = {}  # recorded events by kind
        self.max_events = limits.max_events_per_kind
        self.events_dropped = 0
        # (client, server, xid) -> (prog, vers, proc, gss_service, gss_proc, answered)
        # of the last call
        self.calls: dict[tuple[bytes, bytes, int], tuple[int, int, int, str, int, bool]] = {}
        self.max_calls = limits.max_pending_calls
        self.calls_forgotten = 0  # unanswered calls forgotten past max_calls
        # (client, client port, server, server port) -> the last call's
        # (prog, vers, proc, gss_service, gss_proc): names replies whose call was not seen
        self.flows: dict[tuple[bytes, int, bytes, int], tuple[int, int, int, str, int]] = {}
        # UDP (address, port) where a portmap/rpcbind reply said an RPC program
        # listens; (client, server, xid) -> asked for UDP? of portmap calls
        self.rpc_ports: set[tuple[bytes, int]] = set()
        self.portmap_asks: dict[tuple[bytes, bytes, int], bool] = {}
        self.stats = stats

    def is_pending_call(self, hs: HalfStream, xid: int) -> bool:
        return (hs.dst, hs.src, xid) in self.calls

    def event(
        self,
        hs: HalfStream,
        kind: str,
        ts: int,
        frame: int,
        seq: int,
        length: int,
        duration: int = 0,
    ) -> None:
        self.add_event(
            (ts, frame, hs.conn, hs.src, hs.sport, hs.dst, hs.dport, kind, seq, length, duration)
        )

    def add_event(self, event: tuple) -> None:
        """Record an event (EVENT_COLUMNS order); past max_events of its kind, count it."""
        kind = event[7]
        n = self.event_counts.get(kind, 0)
        if n < self.max_events:
            self.event_counts[kind] = n + 1
            self.events.append(event)
        else:
            self.events_dropped += 1

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
    ) -> int:
        """Make the message's row; its number (-1: not an RPC message, no row)."""
        st = self.stats
        hdr = rpc.decode_header(head)
        if hdr is None:
            if len(head) < 8:
                st.headerless_messages += 1
            else:
                st.not_rpc_records += 1
            return -1
        xid = hdr.xid
        if hdr.body_offset < 0 and len(head) >= 40 and _auth_too_long(head, hdr.msgtype == "call"):
            st.anomalies["rpc_auth_too_long"] = st.anomalies.get("rpc_auth_too_long", 0) + 1
        if hdr.msgtype == "call":
            st.calls += 1
            calls = self.calls
            key = (src, dst, xid)
            if key in calls:
                del calls[key]  # re-insert: keep the dict ordered by last use
            elif len(calls) >= self.max_calls:
                oldest = next(iter(calls))
                self.calls_forgotten += not calls[oldest][5]
                del calls[oldest]
            what = (hdr.prog, hdr.vers, hdr.proc, hdr.gss_service, hdr.gss_proc)
            calls[key] = (*what, False)
            flow = (src, sport, dst, dport)
            if len(self.flows) >= MAX_FLOWS and flow not in self.flows:
                self.flows.clear()
            self.flows[flow] = what
            nfs = decode_procedure(True, *what[:3], head, hdr.body_offset, *what[3:])
            if hdr.prog == portmap.PORTMAP_PROGRAM:
                self._portmap_call(key, hdr, head)
        else:
            st.replies += 1
            info = self.calls.get((dst, src, xid))
            if info is not None:
                prog, vers, proc, gss_service, gss_proc, answered = info
                if not answered:  # in place: the order stays that of the calls
                    self.calls[(dst, src, xid)] = (*info[:5], True)
                hdr = hdr._replace(prog=prog, vers=vers, proc=proc)
                nfs = decode_procedure(
                    False, prog, vers, proc, head, hdr.body_offset, gss_service, gss_proc
                )
                if prog == portmap.PORTMAP_PROGRAM:
                    self._portmap_reply(src, dst, xid, hdr, head)
            else:
                st.replies_without_call_info += 1
                last = self.flows.get((dst, dport, src, sport))
                guess = decode_reply_without_call(last, head, hdr.body_offset)
                if guess is None:
                    nfs = decode_procedure(False, -1, -1, -1, head, hdr.body_offset, "", -1)
                else:
                    hdr = hdr._replace(prog=guess[0], vers=guess[1], proc=guess[2])
                    nfs = guess[3]
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
        if len(self.rows) >= CHUNK_ROWS:
            self.chunks.append(_rows_frame(self.rows))
            self.rows = []
        self.n_rows += 1
        return self.n_rows - 1

    def _portmap_call(self, key: tuple[bytes, bytes, int], hdr: rpc.RpcHeader, head: bytes) -> None:
        """A portmap/rpcbind call: remember whether it asks for a UDP address."""
        asks = portmap.asks_udp(hdr.vers, hdr.proc, head, hdr.body_offset)
        if asks is not None:
            if len(self.portmap_asks) >= MAX_PORTMAP_ASKS:
                self.portmap_asks.clear()
            self.portmap_asks[key] = asks

    def _portmap_reply(
        self, src: bytes, dst: bytes, xid: int, hdr: rpc.RpcHeader, head: bytes
    ) -> None:
        """A portmap/rpcbind reply (from src): the UDP ports it announces become RPC ports."""
        asked = self.portmap_asks.pop((dst, src, xid), False)
        if hdr.accept_stat != 0:  # not SUCCESS: no results
            return
        ports = self.rpc_ports
        for port in portmap.learnt_ports(hdr.vers, hdr.proc, head, hdr.body_offset, asked):
            if len(ports) < MAX_LEARNT_PORTS:
                ports.add((src, port))


_ROW_COLUMNS = (
    ("ts_first_ns", "ts_last_ns", "frame_first", "frame_last", "src", "sport", "dst", "dport")
    + ("transport", "conn")
    + rpc.HEADER_FIELDS
    + ("rpc_len", "captured_len", "record_frags", "frames", "ip_frags", "truncated")
    + NFS_FIELD_NAMES
)
# Columns filled once the message is made (its ACK comes later); -1 until then.
LATE_COLUMNS = ("acked_ns",)
assert set(_ROW_COLUMNS) | set(LATE_COLUMNS) == set(MESSAGE_DTYPES)


def _addr_text(raw: bytes, cache: dict[bytes, str]) -> str:
    s = cache.get(raw)
    if s is None:
        s = cache[raw] = socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, raw)
    return s


class Dissector:
    """The transport layer both parsers share: duplicate frames, TCP connections
    and streams (handshake, windows, reassembly), UDP datagrams, per-direction
    facts.  A driver decodes link and IP layers its own way and feeds it;
    ``finish`` gives the parse result."""

    def __init__(self, limits: ParseLimits, stats: ParseStats) -> None:
        self.limits = limits
        self.send_gap_ns = limits.send_gap_ns
        self.stats = stats
        self.col = col = _Collector(limits, stats)
        self.facts = Facts(limits.max_directions)
        self.reasm = Reassembler(
            limits.ip_reassembly_timeout_ns,
            limits.max_ip_reassemblies,
            self.facts,
            limits.max_ip_reassembly_bytes,
            limits.max_fragments_per_datagram,
            limits.max_events_per_kind,
        )

        max_waiting = limits.max_ack_waiting

        def emit_tcp(hs: HalfStream, head: bytes, rpc_len: int, captured: int, *rest: Any) -> None:
            row = col.message(
                hs.src, hs.sport, hs.dst, hs.dport, "tcp", hs.conn, head, rpc_len, captured, *rest
            )
            if row >= 0 and hs.msg_end >= 0:  # whole: wait for the ACK of its data
                due = hs.ack_due
                if due is None:
                    due = hs.ack_due = deque()
                elif len(due) >= max_waiting:
                    due.popleft()
                due.append((ack_point(hs.msg_start, hs.msg_end, hs.max_seg), row))

        self.tcp = TcpReassembler(limits, emit_tcp, col.event, col.is_pending_call)
        self.streams: dict[tuple, HalfStream] = {}
        self.conns: dict[tuple, int] = {}
        # UDP flows: frame number of their last RPC message (for forgetting the idlest)
        self.udp_seen: dict[tuple, int] = {}
        self.tracked_conns: set[int] = set()  # TCP connections with both window scales known
        self.n_forgotten = self.n_cut = 0
        self.n_conns = self.n_tcp_conns = self.n_dup = self.n_frames = 0
        self.conn_frames: list[int] = []  # the frame that began each connection id (from 1)
        self.stopped_at = 0  # the frame not read: max_messages reached
        self.ts = 0

    def frames(
        self,
        frames: Iterable[Frame],
        progress: Progress | None = None,
    ) -> Iterator[tuple[int, int, int, Bytes, int]]:
        """The capture's frames numbered from 1, as (frame number, ts, link type,
        data, wire length), without the copies of a frame captured again within
        ParseLimits.duplicate_window_ns (counted and recorded as events).
        ``progress(frames, file bytes read)`` every 16,384 frames (bytes: of the
        files' ``read_bytes``; -1 when the reader does not count them).

        Copies are looked up among the frames kept in the last window, not just
        the last few: a mirror port may deliver a frame 3 or 4 times, 90-220 µs
        apart, with other frames in between.  The frames are held by a
        fingerprint (length, last two bytes, bytes 19, 25 and 51: on
        Ethernet/IPv4 the IP id's and IP checksum's low bytes and the TCP
        checksum's) in two generations: the current one, begun less than a
        window ago, and the one before it; a generation is dropped when the one
        after it is a window old, so every frame of the last window is held and
        nothing much older (or when it holds MAX_RECENT_FRAMES).  A frame
        replaces an earlier one with its fingerprint."""
        files = self.stats.files
        window_ns = self.limits.duplicate_window_ns
        add_event = self.col.add_event
        conns = self.conns
        frame_no = n_dup = ts = 0
        stats, max_messages = self.stats, self.limits.max_messages
        recent: dict[int, tuple[int, Bytes]] = {}
        older: dict[int, tuple[int, Bytes]] = {}
        since = None  # when the current generation began
        partition, partitions = self.limits.partition, self.limits.partitions
        for ts, linktype, data, origlen, _file_index in frames:
            frame_no += 1
            if not frame_no % CHECK_EVERY_FRAMES and stats.messages >= max_messages:
                self.stopped_at = frame_no
                frame_no -= 1
                break
            if progress is not None and not frame_no & 0x3FFF:
                progress(frame_no, sum(f.read_bytes for f in files) if files else -1)
            try:
                fp = (
                    len(data)
                    | data[-1] << 20
                    | data[-2] << 28
                    | data[19] << 36
                    | data[25] << 44
                    | data[51] << 52
                )
            except IndexError:  # a frame shorter than 52 bytes
                fp = len(data)
            # one partition of the host pairs (ParseLimits.partitions): every
            # frame is looked at for copies, only the partition's are read
            mine = partitions == 1 or partition == partition_of(*_ip_at(linktype, data), partitions)
            e = recent.get(fp)
            if e is None or ts - e[0] > window_ns or bytes(data) != bytes(e[1]):
                e = older.get(fp)
            if e is not None and ts - e[0] <= window_ns and bytes(data) == bytes(e[1]):
                if mine:
                    n_dup += 1
                    self.n_dup = n_dup
                    add_event(_duplicate_event(linktype, data, origlen, ts, frame_no, conns))
                continue
            if since is None or ts - since > window_ns or len(recent) >= MAX_RECENT_FRAMES:
                older, recent, since = recent, {}, ts
            recent[fp] = (ts, data)
            if mine:
                yield frame_no, ts, linktype, data, origlen
        self.n_frames = frame_no
        self.ts = ts  # the capture's end (stretches still open end there)

    def tcp_segment(
        self,
        dg: Datagram,
        ts: int,
        frame: int,
        sport: int,
        dport: int,
        seq: int,
        ack: int,
        flags: int,
        window: int,
        hl: int,
        seg: Bytes,
    ) -> None:
        """One TCP segment: its decoded header fields, header length hl and the
        segment's captured bytes (options at seg[20:hl], payload after)."""
        hs = self.streams.get((dg.src, sport, dg.dst, dport))
        if hs is None:
            hs = self._new_stream(hs, dg, sport, dport, ts, frame)
        f = hs.facts
        csum = -1  # this segment's checksum: 1 right, 0 bad, -1 not verified
        if f[F_CSUM_CHECKED] < CHECKSUM_SAMPLE and dg.ttl >= 0 and len(seg) == dg.wire_len:
            csum = sample_checksum(f, dg.src, dg.dst, PROTO_TCP, seg)
        if flags & TH_SYN and hs.synced:
            if self._syn_dropped(hs, dg, seq, seg, csum):
                return
            if not flags & TH_ACK:
                hs = self._new_stream(hs, dg, sport, dport, ts, frame)
        ip_len = dg.ip_len
        hs.seen = frame
        hs.packets += 1
        hs.ip_bytes += ip_len
        if ip_len > hs.max_ip_len or dg.ttl != hs.ttl:  # rare: a new largest or TTL
            _ip_extremes(hs, ip_len, dg.ttl)
        tcp = self.tcp
        if flags & TH_SYN:
            tcp.start(hs, seq)
            if _on_syn(self.col, hs, hs.rev, seg, hl, flags, seq, ack, window, ts, frame):
                self.tracked_conns.add(hs.conn)
        elif hs.watch or not window:
            _watch(self.col, hs, flags, window, seq, ts, frame)
        if flags & TH_ACK:
            rev = hs.rev
            if rev is not None:
                if rev.rtt_end >= 0 and (ack - rev.rtt_end) & SEQ_MASK < SEQ_HALF:
                    _ack_rtt_sample(rev, ts)
                if rev.ack_hi < 0 or (ack - rev.ack_hi) & SEQ_MASK < SEQ_HALF:
                    rev.ack_hi = ack
                    due = rev.ack_due
                    while due and (ack - due[0][0]) & SEQ_MASK < SEQ_HALF:
                        self.col.acked.append((due.popleft()[1], ts))
                    if rev.gap_acked < 0 <= rev.gap_t and (ack - rev.rtt_hi) & SEQ_MASK < SEQ_HALF:
                        rev.gap_acked = ts  # everything the peer sent is acknowledged
                if rev.pending:
                    tcp.acked(rev, ack, ts, frame)
                if rev.wtrack and (ack != rev.wack or window != rev.wwin) and not flags & TH_SYN:
                    # The peer (rev) fills our window when its data reaches wlimit.
                    rev.wack, rev.wwin = ack, window
                    wnd = rev.peer_wnd = window << hs.wshift
                    limit = rev.wlimit = (ack + wnd - rev.mss) & SEQ_MASK
                    if rev.wfull_since >= 0 and (rev.seq_hi - limit) & SEQ_MASK >= SEQ_HALF:
                        _end_window_full(self.col, rev, ts)  # room for a full segment again
        wire = dg.wire_len - hl
        if wire > 0:
            if wire > hs.max_seg:
                hs.max_seg = wire
            end = (seq + wire) & SEQ_MASK
            if hs.gap_t >= 0 and ts - hs.gap_t >= self.send_gap_ns:
                resent = hs.rtt_hi >= 0 and 0 < (hs.rtt_hi - seq) & SEQ_MASK < SEQ_HALF
                if hs.gap_mid or resent:
                    _send_gap(self.col, hs, ts, seq, resent)
            if hs.rtt_end >= 0:
                if 0 < (hs.rtt_end - seq) & SEQ_MASK < SEQ_HALF:  # bytes re-sent: no sample
                    hs.rtt_end = -1  # (Karn: which copy the ACK answers is unknown)
            elif (
                wire <= RTT_MAX_SEGMENT
                and hs.rtt_hi >= 0
                and (seq - hs.rtt_hi) & SEQ_MASK < SEQ_HALF  # all new bytes
            ):
                hs.rtt_end, hs.rtt_start = end, (ts, frame, seq, wire)
            if hs.rtt_hi < 0 or (end - hs.rtt_hi) & SEQ_MASK < SEQ_HALF:
                hs.rtt_hi = end
            if hs.wtrack and (seq + wire - hs.wlimit) & SEQ_MASK < SEQ_HALF:
                _window_reached(hs, seq, (seq + wire) & SEQ_MASK, ts, frame)
            tcp.segment(hs, seq, seg[hl:], wire, dg.ts_first, frame, dg.frags)
            hs.gap_t, hs.gap_frame, hs.gap_mid, hs.gap_acked = ts, frame, hs.in_msg, -1
            hs.gap_flight = (hs.rtt_hi - hs.ack_hi) & SEQ_MASK if hs.ack_hi >= 0 else -1
        if flags & (TH_FIN | TH_RST):
            self._end_of_stream(hs, flags, ts, frame)

    def _syn_dropped(self, hs: HalfStream, dg: Datagram, seq: int, seg: Bytes, csum: int) -> bool:
        """A segment with SYN set on a direction that has carried RPC records:
        True when the receiver would have dropped it (counted, skipped).

        Such a SYN is a new connection on the same ports (port reuse, or a
        client that lost the old connection) only if the old one ended (a FIN
        or RST seen) or its sequence number is outside the old window: a new
        connection's initial sequence number is unrelated to the old one's
        (RFC 6528), so it lands within SYN_WINDOW (or the peer's last window,
        if larger) of the next expected byte once in ~30,000.  Inside the
        window, before FIN or RST, it is a damaged or stray frame: RFC 9293
        (and RFC 5961) has the receiver of a SYN on a synchronised connection
        answer with an ACK and drop it.  A long idle time alone is not taken
        as the end: the window test already tells an unrelated SYN.

        Its checksum is verified (unless the sample did): bad, from a host
        whose sampled checksums are nearly all right (not transmit offload),
        it is a damaged frame wherever its sequence number lies."""
        a = self.stats.anomalies
        f = hs.facts
        good, bad = f[F_CSUM_CHECKED] - f[F_CSUM_BAD], f[F_CSUM_BAD]  # (the others')
        if csum == 0:  # counted in the sample
            bad -= 1
        elif csum < 0 and dg.ttl >= 0 and len(seg) == dg.wire_len:
            csum = int(checksum_ok(dg.src, dg.dst, PROTO_TCP, seg))
        if csum == 0 and good > 4 * bad:
            a["tcp_bad_checksum"] = a.get("tcp_bad_checksum", 0) + 1
            self.count_packet(dg)
            return True
        rev = hs.rev
        if hs.ended or (rev is not None and rev.ended) or hs.next_seq < 0:
            return False
        wnd = max(hs.peer_wnd, SYN_WINDOW)
        d = (seq + 1 - hs.next_seq) & SEQ_MASK
        if d <= wnd or SEQ_MASK + 1 - d <= wnd:
            a["tcp_syn_in_window"] = a.get("tcp_syn_in_window", 0) + 1
            self.count_packet(dg)
            return True
        return False

    def _end_of_stream(self, hs: HalfStream, flags: int, ts: int, frame: int) -> None:
        """A FIN (this direction is done) or RST (both are)."""
        tcp = self.tcp
        tcp.flush(hs, ts, frame)
        hs.ended = True
        if flags & TH_RST:
            _close_stretches(self.col, hs, ts)
            rev = hs.rev
            if rev is not None:
                rev.ended = True
                tcp.flush(rev, ts, frame)
                _close_stretches(self.col, rev, ts)

    def _new_stream(
        self,
        hs: HalfStream | None,
        dg: Datagram,
        sport: int,
        dport: int,
        ts: int,
        frame: int,
    ) -> HalfStream:
        """A direction not seen before, or a new SYN on ports in use."""
        streams, conns, tcp, col = self.streams, self.conns, self.tcp, self.col
        key = (dg.src, sport, dg.dst, dport)
        rkey = (dg.dst, dport, dg.src, sport)
        ckey = key if key < rkey else rkey
        conn = conns.get(ckey, 0)
        if hs is not None or not conn:  # a new connection (maybe reusing the ports)
            if not conn and len(conns) >= self.limits.max_connections:
                self._forget_idlest(ts, frame)
            self.n_conns += 1
            self.n_tcp_conns += 1
            conn = conns[ckey] = self.n_conns
            self.conn_frames.append(frame)
            rev = streams.get(rkey)
            if hs is not None:
                tcp.flush(hs, ts, frame)
                _retire(col, hs, ts)
                if rev is not None:
                    tcp.flush(rev, ts, frame)
                    _retire(col, rev, ts)
                    streams[rkey] = HalfStream(
                        rev.src, rev.sport, rev.dst, rev.dport, conn, rev.facts
                    )
        facts = hs.facts if hs is not None else direction_facts(self.facts, dg.src, dg.dst)
        hs = streams[key] = HalfStream(dg.src, sport, dg.dst, dport, conn, facts)
        rev = streams.get(rkey)
        if rev is not None:
            hs.rev, rev.rev = rev, hs
        return hs

    def _forget_idlest(self, ts: int, frame: int) -> None:
        """The connection table is full: forget its least recently active
        eighth (TCP streams flushed, a message in progress emitted cut short)."""
        streams, conns, udp_seen = self.streams, self.conns, self.udp_seen
        seen: list[tuple[int, tuple]] = []
        for ckey in conns:
            a = streams.get(ckey)
            b = streams.get((ckey[2], ckey[3], ckey[0], ckey[1]))
            last = max(
                a.seen if a is not None else -1,
                b.seen if b is not None else -1,
                udp_seen.get(ckey, -1),
            )
            seen.append((last, ckey))
        seen.sort(key=lambda x: x[0])
        for _last, ckey in seen[: max(1, len(seen) // 8)]:
            conn = conns.pop(ckey)
            udp_seen.pop(ckey, None)
            self.tracked_conns.discard(conn)
            self.n_forgotten += 1
            for key in (ckey, (ckey[2], ckey[3], ckey[0], ckey[1])):
                hs = streams.pop(key, None)
                if hs is None:
                    continue
                if hs.in_msg:
                    self.n_cut += 1
                self.tcp.flush(hs, ts, frame)
                _retire(self.col, hs, ts)
                hs.rev = None

    def udp_datagram(
        self,
        dg: Datagram,
        ts: int,
        frame: int,
        sport: int,
        dport: int,
        body: Bytes,
        complete: bool = True,
    ) -> None:
        """One UDP datagram's payload: an RPC message if it looks like one
        (``complete`` False: a datagram given up with fragments missing)."""
        if len(body) < 12:
            return
        src, dst = dg.src, dg.dst
        learnt = self.col.rpc_ports
        if body[7] == rpc.CALL:
            rpc_port = (
                sport in RPC_WELL_KNOWN_PORTS
                or dport in RPC_WELL_KNOWN_PORTS
                or (dst, dport) in learnt
            )
            if not rpc.udp_call(body, dg.wire_len - 8, rpc_port):
                return
        elif body[7] == rpc.REPLY:
            xid = int.from_bytes(body[0:4], "big")
            if not rpc.plausible_reply(body, 0):
                return
            if self.reasm.pending and (dst, src, xid) not in self.col.calls:
                self._call_in_fragments(src, dst, sport, dport, xid)
            if (
                (dst, src, xid) not in self.col.calls
                and sport not in RPC_WELL_KNOWN_PORTS
                and not (learnt and (src, sport) in learnt)
            ):
                return
        else:
            return
        conns = self.conns
        ckey = (src, sport, dst, dport)
        rkey = (dst, dport, src, sport)
        conn = conns.get(ckey) or conns.get(rkey)
        if conn is None:
            if len(conns) >= self.limits.max_connections:
                self._forget_idlest(ts, frame)
            self.n_conns += 1
            conn = conns[min(ckey, rkey)] = self.n_conns
            self.conn_frames.append(frame)
        self.udp_seen[min(ckey, rkey)] = frame
        self.col.message(
            src,
            sport,
            dst,
            dport,
            "udp",
            conn,
            bytes(body[: self.limits.head_bytes]),
            dg.wire_len - 8,
            len(body),
            dg.ts_first,
            ts,
            dg.frame_first,
            frame,
            dg.frags,
            dg.frags,
            1,
            complete,
        )

    def _call_in_fragments(self, src: bytes, dst: bytes, sport: int, dport: int, xid: int) -> None:
        """A reply whose call is not known: is the call held in an incomplete
        datagram (its first fragment captured, another not)?  The server
        answered, so the client sent every fragment: the missing ones will not
        come.  Give that datagram up now, its call emitted cut short."""
        want = struct.pack(">HHxxxxII", dport, sport, xid, rpc.CALL)

        def test(version: int, proto: int, data: bytes) -> bool:
            at = _udp_offset(version, proto, data)
            return at >= 0 and data[at : at + 4] == want[:4] and data[at + 8 : at + 16] == want[8:]

        if self.reasm.take_first(dst, src, test):
            self.partial_datagrams()

    def partial_datagrams(self) -> None:
        """The UDP datagrams the reassembler gave up whose first fragment was
        captured: each an RPC message cut short if it holds one (its length
        from the UDP header)."""
        partial, self.reasm.partial = self.reasm.partial, []
        for ts_first, ts_last, frame_first, frame_last, src, dst, ver, proto, n, data in partial:
            at = _udp_offset(ver, proto, data)
            if at < 0 or len(data) < at + 8:
                continue
            sport, dport, ulen = _UDP_HDR(data, at)
            udp = memoryview(data)[at:]
            dg = Datagram(src, dst, PROTO_UDP, udp, max(ulen, len(udp)), n, ts_first, frame_first)
            self.udp_datagram(dg, ts_last, frame_last, sport, dport, udp[8:], False)

    def count_packet(self, dg: Datagram) -> list[int] | None:
        """An IP packet not given to tcp_segment (UDP, other protocols, TCP
        too short): into its direction's facts (returned; None when it was
        reassembled from fragments, which were counted one by one)."""
        if dg.ttl >= 0:
            f = direction_facts(self.facts, dg.src, dg.dst)
            count_packet(f, dg.ip_len, dg.ttl)
            return f
        return None

    def sample_udp(self, f: list[int], dg: Datagram, seg: Bytes) -> None:
        """A UDP datagram (header first) of a direction (facts f, from
        count_packet): its checksum verified if the sample is not full and
        all of it was captured."""
        if f[F_CSUM_CHECKED] < CHECKSUM_SAMPLE and len(seg) == dg.wire_len:
            sample_checksum(f, dg.src, dg.dst, PROTO_UDP, seg)

    def finish(self, counts: FrameCounts) -> tuple[pd.DataFrame, pd.DataFrame, ParseStats]:
        """End of the capture: (messages, events, stats)."""
        col, tcp, stats, reasm = self.col, self.tcp, self.stats, self.reasm
        for hs in self.streams.values():
            tcp.flush(hs, hs.ts_last, hs.frame_last)
            _retire(col, hs, self.ts)  # a stretch still open ends with the capture
        reasm.finish()
        self.partial_datagrams()
        for lost in reasm.lost:
            col.add_event(_incomplete_datagram_event(*lost))
        stats.frames = self.n_frames
        stats.duplicate_frames = self.n_dup
        stats.ipv4_packets, stats.ipv6_packets = counts.ipv4, counts.ipv6
        stats.tcp_packets, stats.udp_packets = counts.tcp, counts.udp
        stats.other_ip_packets, stats.non_ip_frames = counts.other, counts.non_ip
        stats.short_transport_headers = counts.short
        fs = reasm.stats
        stats.ip_fragments = fs.fragments
        stats.ip_datagrams_reassembled = fs.reassembled
        stats.ip_datagrams_incomplete = fs.incomplete
        stats.tcp = tcp.stats.as_dict()
        stats.tcp_connections = self.n_tcp_conns
        stats.connection_frames = self.conn_frames
        stats.tcp_window_scale_unknown = self.n_tcp_conns - len(self.tracked_conns)
        stats.directions = _direction_rows(self.facts)
        a = stats.anomalies
        for name, n in (
            ("tcp_header_length", counts.bad_tcp_header),
            ("ip_length_exceeds_frame", fs.length_exceeds_frame),
            ("record_mark_too_long", tcp.stats.marks_too_long),
            ("connections_forgotten", self.n_forgotten),
            ("messages_cut_by_limits", self.n_cut),
            ("tcp_holes_by_memory", tcp.stats.holes_by_memory),
            ("ip_datagrams_given_up", fs.given_up),
            ("directions_untracked", self.facts.overflow[F_PACKETS]),
            ("events_not_recorded", col.events_dropped + fs.incomplete - len(reasm.lost)),
            ("calls_forgotten", col.calls_forgotten),
            ("messages_limit", self.stopped_at),
        ):
            if n:
                a[name] = a.get(name, 0) + n
        messages = _messages_frame(col.rows, col.chunks, col.acked)
        return messages, _events_frame(col.events), stats


@dataclass
class FrameCounts:
    """Frames and packets by layer, counted by a parser's driver loop."""

    ipv4: int = 0
    ipv6: int = 0
    non_ip: int = 0
    tcp: int = 0
    udp: int = 0
    other: int = 0
    short: int = 0  # TCP/UDP packets too short for their header
    bad_tcp_header: int = 0  # TCP data offset below 20 bytes or past the packet: skipped


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
            sport, dport, seq, ack, hl, flags, window = _TCP_HDR(p, 0)
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
            sport, dport, _ulen = _UDP_HDR(p, 0)
            udp_datagram(dg, ts, frame_no, sport, dport, p[8:])
        else:
            n_other += 1
            d.count_packet(dg)
    return d.finish(FrameCounts(n_v4, n_v6, n_nonip, n_tcp, n_udp, n_other, n_short, n_bad_tcp))


# ---- slow paths of the loop, kept out of line ------------------------------------


def _ip_at(linktype: int, data: Bytes) -> tuple[int, Bytes, int]:
    """(IP version, the frame, offset of its IP header): ``partition_of``'s first
    arguments."""
    version, off = locate_ip(linktype, data)
    return version, data, off


def _auth_too_long(head: bytes, is_call: bool) -> bool:
    """A message whose procedure data could not be located: is it because its
    credential or verifier claims more than RFC 5531's 400 bytes?"""
    if is_call:
        (clen,) = struct.unpack_from(">I", head, 28)
        if clen > rpc.MAX_AUTH_BYTES:
            return True
        vpos = 32 + ((clen + 3) & ~3) + 4
        return (
            len(head) >= vpos + 4 and struct.unpack_from(">I", head, vpos)[0] > rpc.MAX_AUTH_BYTES
        )
    accepted = struct.unpack_from(">I", head, 8)[0] == rpc.MSG_ACCEPTED
    return accepted and struct.unpack_from(">I", head, 16)[0] > rpc.MAX_AUTH_BYTES


def _tcp_options(p: Bytes, hl: int) -> tuple[int, int]:
    """(MSS, window scale) options of a SYN or SYN-ACK; -1 where absent."""
    mss = wscale = -1
    end = min(hl, len(p))
    i = 20
    while i < end:
        kind = p[i]
        if kind == TCPOPT_EOL:
            break
        if kind == TCPOPT_NOP:
            i += 1
            continue
        if i + 1 >= end or p[i + 1] < 2:
            break
        size = p[i + 1]
        if kind == TCPOPT_MSS and size == 4 and i + 4 <= end:
            mss = (p[i + 2] << 8) | p[i + 3]
        elif kind == TCPOPT_WSCALE and size == 3 and i + 3 <= end:
            wscale = min(p[i + 2], MAX_WSCALE)  # RFC 7323: larger values mean 14
        i += size
    return mss, wscale


def _on_syn(
    col: _Collector,
    hs: HalfStream,
    rev: HalfStream | None,
    p: Bytes,
    hl: int,
    flags: int,
    seq: int,
    ack: int,
    window: int,
    ts: int,
    frame: int,
) -> bool:
    """A SYN or SYN-ACK: handshake event, MSS and window scale.

    Window scaling is in effect only when both the SYN and the SYN-ACK carry
    the option (RFC 7323).  A SYN-ACK without it settles both directions at
    shift 0 even when the SYN was not captured; one with it gives the
    server's shift, and the client's is known only from its SYN.  Returns
    True when both directions' shifts are known (window tracking on)."""
    mss, wscale = _tcp_options(p, hl)
    hs.syn_mss = mss
    hs.syn_window = window
    hs.seq_hi = (seq + 1) & SEQ_MASK
    if not flags & TH_ACK:
        hs.syn_wscale = wscale
        col.event(hs, "tcp_syn", ts, frame, seq, 0)
        return False
    col.event(hs, "tcp_syn_ack", ts, frame, seq, 0)
    if rev is None:
        hs.wshift = wscale if wscale >= 0 else 0
        return False
    if wscale < 0 or rev.syn_wscale == -1:  # scaling off both ways
        hs.wshift = rev.wshift = 0
    else:
        hs.wshift = wscale
        rev.wshift = rev.syn_wscale  # -2 (SYN not seen) -> unknown
        if rev.wshift < 0:
            rev.wshift = -1
    if rev.syn_wscale == -2:  # the SYN was not captured: the client's next byte is our ack
        rev.seq_hi = ack
    rev.handshake_ack_due = rev.watch = True
    rev.mss = mss if mss > 0 else DEFAULT_MSS  # the client's segments fit our MSS
    hs.mss = rev.syn_mss if rev.syn_mss > 0 else DEFAULT_MSS
    # The windows of the SYN and SYN-ACK (never scaled) hold until the first ACKs.
    rev.peer_wnd = window
    rev.wlimit = (rev.seq_hi + window - rev.mss) & SEQ_MASK
    hs.wack = hs.wwin = rev.wack = rev.wwin = -1  # the next ACKs set the limits anew
    hs.peer_wnd = rev.syn_window if rev.syn_wscale != -2 else 0
    if hs.peer_wnd:
        hs.wlimit = (hs.seq_hi + hs.peer_wnd - hs.mss) & SEQ_MASK
    else:  # no window known yet: no check before the client's first ACK
        hs.wlimit = (hs.seq_hi + SEQ_HALF - 1) & SEQ_MASK
    rev.wtrack = hs.wshift >= 0
    hs.wtrack = rev.wshift >= 0
    return rev.wtrack and hs.wtrack


def _watch(
    col: _Collector, hs: HalfStream, flags: int, window: int, seq: int, ts: int, frame: int
) -> None:
    """A packet of a direction under watch, or one advertising a zero window."""
    if hs.handshake_ack_due and flags & TH_ACK:
        hs.handshake_ack_due = False
        col.event(hs, "tcp_handshake_ack", ts, frame, seq, 0)
    if not window and not flags & TH_RST:
        if hs.zw_since < 0 and hs.mode != IGNORE:
            hs.zw_since, hs.zw_frame, hs.zw_seq = ts, frame, seq
    elif hs.zw_since >= 0:
        _end_zero_window(col, hs, ts)
    hs.watch = hs.handshake_ack_due or hs.zw_since >= 0


def _window_reached(hs: HalfStream, seq: int, end: int, ts: int, frame: int) -> None:
    """A data segment reaching (within one MSS) the window the peer advertised."""
    if (end - hs.seq_hi) & SEQ_MASK < SEQ_HALF:
        hs.seq_hi = end
    if hs.wfull_since < 0 and hs.peer_wnd > 0:  # a zero window is a stretch of its own
        hs.wfull_since, hs.wfull_frame = ts, frame
        hs.wfull_seq, hs.wfull_wnd = seq, hs.peer_wnd


def _end_zero_window(col: _Collector, hs: HalfStream, ts: int) -> None:
    col.event(hs, "tcp_zero_window", hs.zw_since, hs.zw_frame, hs.zw_seq, 0, ts - hs.zw_since)
    hs.zw_since = -1


def _end_window_full(col: _Collector, hs: HalfStream, ts: int) -> None:
    col.event(
        hs,
        "tcp_window_full",
        hs.wfull_since,
        hs.wfull_frame,
        hs.wfull_seq,
        hs.wfull_wnd,
        ts - hs.wfull_since,
    )
    hs.wfull_since = -1


def _close_stretches(col: _Collector, hs: HalfStream, ts: int) -> None:
    """End the stretches still open on a direction (connection reset or
    replaced, or the end of the capture)."""
    if hs.zw_since >= 0:
        _end_zero_window(col, hs, max(ts, hs.zw_since))
        hs.watch = hs.handshake_ack_due
    if hs.wfull_since >= 0:
        _end_window_full(col, hs, max(ts, hs.wfull_since))


def _ip_extremes(hs: HalfStream, ip_len: int, ttl: int) -> None:
    """A packet with a new largest length or another TTL than the last one."""
    if ttl < 0:  # reassembled from fragments, which were counted one by one
        hs.packets -= 1
        hs.ip_bytes -= ip_len
        return
    f = hs.facts
    hs.ttl = ttl
    if ttl < f[F_TTL_MIN]:
        f[F_TTL_MIN] = ttl
    if ttl > f[F_TTL_MAX]:
        f[F_TTL_MAX] = ttl
    if ip_len > hs.max_ip_len:
        hs.max_ip_len = ip_len
        if ip_len > f[F_MAX_IP_LEN]:
            f[F_MAX_IP_LEN] = ip_len


def _ack_rtt_sample(hs: HalfStream, ts: int) -> None:
    """The peer acknowledged the segment of hs being timed: a round-trip sample."""
    hs.rtt_end = -1
    sample = ts - hs.rtt_start[0]
    if sample >= 0 and (hs.rtt_best is None or sample < hs.rtt_best[0]):
        hs.rtt_best = (sample, *hs.rtt_start)


def ack_point(start: int, end: int, max_seg: int) -> int:
    """The sequence number the receiver's ACK must reach for a message at
    [start, end) to count as received: all of it but its last segment (at most
    max_seg bytes).  A receiver may hold the ACK of a short last segment (Linux's
    delayed ACK, up to 40 ms, or until its reply) after the bytes arrived; a
    one-segment message: any of its bytes."""
    length = (end - start) & SEQ_MASK
    back = max_seg if length > max_seg else length - 1
    return (end - back) & SEQ_MASK


def _send_gap(col: _Collector, hs: HalfStream, ts: int, seq: int, resent: bool) -> None:
    """hs sends data at ts after a gap of at least ParseLimits.send_gap_ns that it
    began part-way through an RPC message or ends by re-sending bytes: a gap
    ended by re-sent bytes (tcp_resend_gap), else the part with bytes
    unacknowledged (tcp_send_gap) and the part with none (tcp_send_idle)."""
    start, acked, flight = hs.gap_t, hs.gap_acked, hs.gap_flight
    if resent:
        col.event(hs, "tcp_resend_gap", start, hs.gap_frame, seq, flight, ts - start)
        return
    if flight < 0 or (flight > 0 and acked != start):  # unknown ack state counts as waiting
        end = acked if acked >= 0 else ts
        col.event(hs, "tcp_send_gap", start, hs.gap_frame, seq, flight, end - start)
    if acked >= 0 and hs.gap_mid and ts > acked:
        col.event(hs, "tcp_send_idle", acked, hs.gap_frame, seq, 0, ts - acked)


def _retire(col: _Collector, hs: HalfStream, ts: int) -> None:
    """A stream replaced or at the end: close its stretches, record its
    smallest data->ACK round trip, fold its counts into its direction's facts."""
    _close_stretches(col, hs, ts)
    if hs.rtt_best is not None:
        rtt, start, frame, seq, length = hs.rtt_best
        col.event(hs, "tcp_ack_rtt", start, frame, seq, length, rtt)
        hs.rtt_best = None
    f = hs.facts
    f[F_PACKETS] += hs.packets
    f[F_IP_BYTES] += hs.ip_bytes
    hs.packets = hs.ip_bytes = 0


def _duplicate_event(
    linktype: int, data: Bytes, origlen: int, ts: int, frame: int, conns: dict[tuple, int]
) -> tuple:
    """The frame_duplicate event of a skipped frame: its endpoints read as far
    as the headers allow (the frame is not processed further)."""
    src = dst = b""
    sport = dport = conn = 0
    seq = -1
    ver, off = locate_ip(linktype, data)
    proto = l4 = -1
    if ver == 4 and len(data) >= off + 20:
        proto, l4 = data[off + 9], off + (data[off] & 0x0F) * 4
        src, dst = bytes(data[off + 12 : off + 16]), bytes(data[off + 16 : off + 20])
        if ((data[off + 6] << 8) | data[off + 7]) & 0x1FFF:
            proto = -1  # a later fragment: no transport header
    elif ver == 6 and len(data) >= off + 40:
        proto, l4 = data[off + 6], off + 40  # extension headers not walked
        src, dst = bytes(data[off + 8 : off + 24]), bytes(data[off + 24 : off + 40])
    if proto in (PROTO_TCP, PROTO_UDP) and len(data) >= l4 + 4:
        sport, dport = (data[l4] << 8) | data[l4 + 1], (data[l4 + 2] << 8) | data[l4 + 3]
        if proto == PROTO_TCP and len(data) >= l4 + 8:
            seq = int.from_bytes(data[l4 + 4 : l4 + 8], "big")
        key, rkey = (src, sport, dst, dport), (dst, dport, src, sport)
        conn = conns.get(min(key, rkey), 0)
    return (ts, frame, conn, src, sport, dst, dport, "frame_duplicate", seq, origlen, 0)


def _udp_offset(version: int, proto: int, data: bytes) -> int:
    """Where the UDP header starts in the first fragment's payload of an IP
    datagram (IPv6: after the extension headers that follow the Fragment
    header); -1 if it is not UDP or the headers run past the captured bytes."""
    if version == 4:
        return 0 if proto == PROTO_UDP else -1
    nh, pos, _ = walk_extensions(memoryview(data), proto, 0, len(data))
    return pos if nh == PROTO_UDP else -1


def _incomplete_datagram_event(
    ts: int, frame: int, src: bytes, dst: bytes, ip_id: int, fragments: int, got: int
) -> tuple:
    """An IP datagram given up with fragments missing: seq is its IP id, length
    the bytes of it that arrived."""
    return (ts, frame, 0, src, 0, dst, 0, "ip_datagram_incomplete", ip_id, got, 0)


def _direction_rows(facts: Facts) -> list[DirectionFacts]:
    cache: dict[bytes, str] = {}
    return [
        DirectionFacts(
            src=_addr_text(src, cache),
            dst=_addr_text(dst, cache),
            packets=f[F_PACKETS],
            ip_bytes=f[F_IP_BYTES],
            max_ip_len=f[F_MAX_IP_LEN],
            ttl_min=f[F_TTL_MIN] if f[F_TTL_MIN] != NO_TTL else -1,
            ttl_max=f[F_TTL_MAX],
            ip_fragments=f[F_FRAGMENTS],
            datagrams_reassembled=f[F_REASSEMBLED],
            datagrams_incomplete=f[F_INCOMPLETE],
            checksums_checked=f[F_CSUM_CHECKED],
            checksums_bad=f[F_CSUM_BAD],
        )
        for (src, dst), f in sorted(facts.items())
    ]


def _rows_frame(rows: list[tuple]) -> pd.DataFrame:
    """Message rows as a typed DataFrame (MESSAGE_DTYPES), in arrival order."""
    cache: dict[bytes, str] = {}
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(_ROW_COLUMNS)
    data: dict[str, Any] = dict(zip(_ROW_COLUMNS, columns, strict=True))
    for name in ("src", "dst"):
        data[name] = [_addr_text(a, cache) for a in data[name]]
    df = pd.DataFrame(data, columns=list(MESSAGE_DTYPES))
    for name in LATE_COLUMNS:
        df[name] = -1
    return df.astype(MESSAGE_DTYPES)


def _messages_frame(
    rows: list[tuple],
    chunks: Sequence[pd.DataFrame] = (),
    acked: Sequence[tuple[int, int]] = (),
) -> pd.DataFrame:
    """The messages table from typed chunks (``_rows_frame``) and the rows after
    them; ``acked``: (row, acked_ns) of the messages whose ACK was seen."""
    df = _rows_frame(rows)
    if chunks:  # chunks' categories differ: concat gives object columns, made categories again
        df = pd.concat([*chunks, df], ignore_index=True).astype(MESSAGE_DTYPES)
    if len(acked):
        pos, ts = np.array(acked, dtype="int64").T
        column = df["acked_ns"].to_numpy(copy=True)
        column[pos] = ts
        df["acked_ns"] = column
    return df.sort_values(["ts_first_ns", "frame_first"], kind="stable", ignore_index=True)


def _events_frame(events: list[tuple]) -> pd.DataFrame:
    """The events table (columns: ``nfstrace.schema.EVENT_COLUMNS``), in time order."""
    cache: dict[bytes, str] = {b"": ""}
    columns = list(EVENT_DTYPES)
    # Backends built on the _Collector may still hand 10-field events (no duration).
    rows = [e if len(e) == len(columns) else (*e, 0) for e in events]
    df = pd.DataFrame(rows, columns=columns)
    if len(df):
        df["src"] = [_addr_text(a, cache) for a in df["src"]]
        df["dst"] = [_addr_text(a, cache) for a in df["dst"]]
    df = df.astype(EVENT_DTYPES)
    return df.sort_values(["ts_ns", "frame"], kind="stable", ignore_index=True)
