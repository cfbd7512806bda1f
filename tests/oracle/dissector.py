"""The transport layer every Python-side parser shares (``Dissector``):
mirror copies, TCP connections and streams (handshake, windows, reassembly
through tcp.py and tcp_state.py), UDP datagrams, per-direction facts; the
messages and events go to its ``Collector`` (collector.py).  A driver decodes
link and IP layers its own way and feeds it (frame_loop.py, dpkt_backend.py).

Its size (just over 600 lines): one class, the per-frame dispatch, which
native/src/dissector.rs mirrors method for method.
"""

import struct
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd

from nfstrace.config import CHECK_EVERY_FRAMES, ParseLimits
from nfstrace.parsers.capture import Bytes, Frame, Progress
from nfstrace.parsers.link import locate_ip
from nfstrace.parsers.stats import DirectionFacts, ParseStats
from nfstrace.parsers.tables import Event, addr_text, events_frame, messages_frame
from nfstrace.protocol.rpc import CALL, REPLY, RPC_WELL_KNOWN_PORTS
from oracle import rpc
from oracle.collector import Collector
from oracle.ip import (
    CHECKSUM_SAMPLE,
    F_CSUM_BAD,
    F_CSUM_CHECKED,
    F_PACKETS,
    PROTO_TCP,
    PROTO_UDP,
    Datagram,
    Facts,
    Reassembler,
    checksum_ok,
    count_packet,
    direction_facts,
    partition_of,
    sample_checksum,
    walk_extensions,
)
from oracle.tcp import RTT_MAX_SEGMENT, HalfStream, TcpReassembler, part_sent
from oracle.tcp_state import (
    SEQ_HALF,
    SEQ_MASK,
    SYN_WINDOW,
    TH_ACK,
    TH_FIN,
    TH_RST,
    TH_SYN,
    ack_point,
    ack_rtt_sample,
    close_stretches,
    end_window_full,
    ip_extremes,
    on_syn,
    retire,
    send_gap,
    watch,
    window_reached,
)

# RPC_WELL_KNOWN_PORTS: where an RPC reply is accepted even without its call.
# TCP and UDP headers as far as the loop reads them (frame_loop.py, dpkt_backend.py)
TCP_HEADER = struct.Struct(">HHIIBBH").unpack_from
UDP_HEADER = struct.Struct(">HHH").unpack_from

# Frames remembered for the mirror-duplicate check (Dissector.frames): past it
# the older generation is dropped early (only above ~4M frames a second).
MAX_RECENT_FRAMES = 4096


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


def direction_rows(facts: Facts) -> list[DirectionFacts]:
    """The per-direction facts lists as rows, sorted by (source, destination) bytes."""
    cache: dict[bytes, str] = {}
    return [
        DirectionFacts.of(addr_text(src, cache), addr_text(dst, cache), f)
        for (src, dst), f in sorted(facts.items())
    ]


class Dissector:
    """The transport layer both parsers share: duplicate frames, TCP connections
    and streams (handshake, windows, reassembly), UDP datagrams, per-direction
    facts.  A driver decodes link and IP layers its own way and feeds it;
    ``finish`` gives the parse result."""

    def __init__(self, limits: ParseLimits, stats: ParseStats) -> None:
        self.limits = limits
        self.send_gap_ns = limits.send_gap_ns
        self.stats = stats
        self.col = col = Collector(limits, stats)
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
            msg = hs.msg
            if row >= 0 and msg.end >= 0:  # whole: wait for the ACK of its data
                acks = hs.acks
                due = acks.due
                if due is None:
                    due = acks.due = deque()
                elif len(due) >= max_waiting:
                    due.popleft()
                due.append((ack_point(msg.start, msg.end, acks.max_seg), row))

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
        buckets = self.limits.buckets
        for ts, linktype, data, origlen, file_index in frames:
            frame_no += 1
            if len(data) < origlen:  # cut by the snaplen: where its transport payload began
                info = files[file_index]
                h = transport_end(linktype, data)
                if h > info.cut_headers:
                    info.cut_headers = h
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
            mine = partitions == 1 or partition == partition_of(
                *_ip_at(linktype, data), partitions, buckets
            )
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
        ipf = hs.ip
        f = ipf.facts
        csum = -1  # this segment's checksum: 1 right, 0 bad, -1 not verified
        if f[F_CSUM_CHECKED] < CHECKSUM_SAMPLE and dg.ttl >= 0 and len(seg) == dg.wire_len:
            csum = sample_checksum(f, dg.src, dg.dst, PROTO_TCP, seg)
        if flags & TH_SYN and hs.framing.synced:
            if self._syn_dropped(hs, dg, seq, seg, csum):
                return
            if not flags & TH_ACK:
                hs = self._new_stream(hs, dg, sport, dport, ts, frame)
                ipf = hs.ip
        ip_len = dg.ip_len
        hs.seen = frame
        ipf.packets += 1
        ipf.ip_bytes += ip_len
        if ip_len > ipf.max_ip_len or dg.ttl != ipf.ttl:  # rare: a new largest or TTL
            ip_extremes(ipf, ip_len, dg.ttl)
        tcp = self.tcp
        win = hs.win
        if flags & TH_SYN:
            tcp.start(hs, seq)
            if on_syn(self.col, hs, hs.rev, seg, hl, flags, seq, ack, window, ts, frame):
                self.tracked_conns.add(hs.conn)
        elif win.watch or not window:
            watch(self.col, hs, flags, window, seq, ts, frame)
        if flags & TH_ACK:
            rev = hs.rev
            if rev is not None:
                rtt = rev.rtt
                if rtt.end >= 0 and (ack - rtt.end) & SEQ_MASK < SEQ_HALF:
                    ack_rtt_sample(rtt, ts)
                acks = rev.acks
                if acks.hi < 0 or (ack - acks.hi) & SEQ_MASK < SEQ_HALF:
                    acks.hi = ack
                    due = acks.due
                    while due and (ack - due[0][0]) & SEQ_MASK < SEQ_HALF:
                        self.col.acked.append((due.popleft()[1], ts))
                    waiting = acks.records
                    while waiting and (ack - waiting[0][0]) & SEQ_MASK < SEQ_HALF:
                        _, rseq, rlen = waiting.popleft()
                        self.col.event(rev, "rpc_unframed_acked", ts, frame, rseq, rlen)
                    gaps = rev.gaps
                    if gaps.acked < 0 <= gaps.last_ts and (ack - rtt.hi) & SEQ_MASK < SEQ_HALF:
                        gaps.acked = ts  # everything the peer sent is acknowledged
                if rev.order.pending:
                    tcp.acked(rev, ack, ts, frame)
                rw = rev.win
                if rw.wtrack and (ack != rw.wack or window != rw.wwin) and not flags & TH_SYN:
                    # The peer (rev) fills our window when its data reaches wlimit.
                    rw.wack, rw.wwin = ack, window
                    wnd = rw.peer_wnd = window << win.wshift
                    limit = rw.wlimit = (ack + wnd - rw.mss) & SEQ_MASK
                    if rw.wfull_since >= 0 and (rw.seq_hi - limit) & SEQ_MASK >= SEQ_HALF:
                        end_window_full(self.col, rev, ts)  # room for a full segment again
        wire = dg.wire_len - hl
        if wire > 0:
            acks = hs.acks
            if wire > acks.max_seg:
                acks.max_seg = wire
            end = (seq + wire) & SEQ_MASK
            gaps, rtt = hs.gaps, hs.rtt
            if gaps.last_ts >= 0 and ts - gaps.last_ts >= self.send_gap_ns:
                resent = rtt.hi >= 0 and 0 < (rtt.hi - seq) & SEQ_MASK < SEQ_HALF
                if gaps.mid or resent:
                    send_gap(self.col, hs, ts, seq, resent)
            if rtt.end >= 0:
                if 0 < (rtt.end - seq) & SEQ_MASK < SEQ_HALF:  # bytes re-sent: no sample
                    rtt.end = -1  # (Karn: which copy the ACK answers is unknown)
            elif (
                wire <= RTT_MAX_SEGMENT
                and rtt.hi >= 0
                and (seq - rtt.hi) & SEQ_MASK < SEQ_HALF  # all new bytes
            ):
                rtt.end, rtt.start = end, (ts, frame, seq, wire)
            if rtt.hi < 0 or (end - rtt.hi) & SEQ_MASK < SEQ_HALF:
                rtt.hi = end
            if win.wtrack and (seq + wire - win.wlimit) & SEQ_MASK < SEQ_HALF:
                window_reached(win, seq, (seq + wire) & SEQ_MASK, ts, frame)
            tcp.segment(hs, seq, seg[hl:], wire, dg.ts_first, frame, dg.frags)
            gaps.last_ts, gaps.last_frame, gaps.mid, gaps.acked = ts, frame, part_sent(hs), -1
            gaps.flight = (rtt.hi - acks.hi) & SEQ_MASK if acks.hi >= 0 else -1
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
        f = hs.ip.facts
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
        next_seq = hs.order.next_seq
        if hs.ended or (rev is not None and rev.ended) or next_seq < 0:
            return False
        wnd = max(hs.win.peer_wnd, SYN_WINDOW)
        d = (seq + 1 - next_seq) & SEQ_MASK
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
            close_stretches(self.col, hs, ts)
            rev = hs.rev
            if rev is not None:
                rev.ended = True
                tcp.flush(rev, ts, frame)
                close_stretches(self.col, rev, ts)

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
                retire(col, hs, ts)
                if rev is not None:
                    tcp.flush(rev, ts, frame)
                    retire(col, rev, ts)
                    streams[rkey] = HalfStream(
                        rev.src, rev.sport, rev.dst, rev.dport, conn, rev.ip.facts
                    )
        facts = hs.ip.facts if hs is not None else direction_facts(self.facts, dg.src, dg.dst)
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
                if hs.msg.assembling:
                    self.n_cut += 1
                self.tcp.flush(hs, ts, frame)
                retire(self.col, hs, ts)
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
        if body[7] == CALL:
            rpc_port = (
                sport in RPC_WELL_KNOWN_PORTS
                or dport in RPC_WELL_KNOWN_PORTS
                or (dst, dport) in learnt
            )
            if not rpc.udp_call(body, dg.wire_len - 8, rpc_port):
                return
        elif body[7] == REPLY:
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
        want = struct.pack(">HHxxxxII", dport, sport, xid, CALL)

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
            sport, dport, ulen = UDP_HEADER(data, at)
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
            tcp.flush(hs, hs.msg.ts_last, hs.msg.frame_last)
            retire(col, hs, self.ts)  # a stretch still open ends with the capture
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
        stats.directions = direction_rows(self.facts)
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
        messages = messages_frame(col.rows, col.chunks, col.acked)
        return messages, events_frame(col.events), stats


def transport_end(linktype: int, data: Bytes) -> int:
    """Where a frame's TCP or UDP payload begins: its link, IP and transport
    headers' length (-1: not TCP/UDP, a later IP fragment, or headers past
    the captured bytes)."""
    version, off = locate_ip(linktype, data)
    n = len(data)
    if version == 4 and n >= off + 20:
        if ((data[off + 6] << 8) | data[off + 7]) & 0x1FFF:
            return -1  # a later fragment: no transport header
        proto, l4 = data[off + 9], off + (data[off] & 0x0F) * 4
    elif version == 6 and n >= off + 40:
        proto, l4, frag = walk_extensions(data, data[off + 6], off + 40, n)
        if frag is not None and frag[0]:
            return -1
    else:
        return -1
    if proto == PROTO_TCP and n >= l4 + 13:
        return l4 + (data[l4 + 12] >> 4) * 4
    if proto == PROTO_UDP and n >= l4 + 8:
        return l4 + 8
    return -1


def _ip_at(linktype: int, data: Bytes) -> tuple[int, Bytes, int]:
    """(IP version, the frame, offset of its IP header): ``partition_of``'s first
    arguments."""
    version, off = locate_ip(linktype, data)
    return version, data, off


def _duplicate_event(
    linktype: int, data: Bytes, origlen: int, ts: int, frame: int, conns: dict[tuple, int]
) -> Event:
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
    return Event(ts, frame, conn, src, sport, dst, dport, "frame_duplicate", seq, origlen)


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
) -> Event:
    """An IP datagram given up with fragments missing: seq is its IP id, length
    the bytes of it that arrived."""
    return Event(ts, frame, 0, src, 0, dst, 0, "ip_datagram_incomplete", ip_id, got)
