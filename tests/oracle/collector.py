"""The collector of a parse: assembled RPC messages -> rows of the messages
table (``tables.ROW_COLUMNS``), with the calls remembered to name their
replies (and the last call of each flow, for replies without theirs), the
transport events recorded per kind up to their bound, and the UDP ports
portmap/rpcbind replies announce.  The ``Dissector`` hands it every message
and event."""

from __future__ import annotations

import struct
from collections import OrderedDict

import pandas as pd

from nfstrace.config import ParseLimits
from nfstrace.parsers.stats import ParseStats
from nfstrace.parsers.tables import Event, rows_frame
from nfstrace.protocol.rpc import MAX_AUTH_BYTES, MIN_CALL_LEN, MSG_ACCEPTED, PORTMAP_PROGRAM
from oracle import portmap, rpc
from oracle.decoders import MAX_FLOWS, decode_reply_without_call
from oracle.decoders import decode as decode_procedure
from oracle.tcp import HalfStream

# UDP (address, port) pairs learnt from portmap/rpcbind replies (parsers/portmap.py)
# that are remembered, and portmap/rpcbind calls whose question is remembered
# until their reply (all forgotten at once past the bound).
MAX_LEARNT_PORTS = 65536
MAX_PORTMAP_ASKS = 4096

# Message rows held as tuples before they are made a typed DataFrame chunk
# (bounds the parser's memory: ~1 GB instead of ~1.9 GB for 1M messages).
CHUNK_ROWS = 65536


class Collector:
    """Turns assembled messages into rows; remembers calls to name replies."""

    def __init__(self, limits: ParseLimits, stats: ParseStats) -> None:
        self.rows: list[tuple] = []
        self.n_rows = 0  # rows made so far (in chunks and rows)
        self.acked: list[tuple[int, int]] = []  # (row, time of the ACK covering its last byte)
        # rows already made typed DataFrames, CHUNK_ROWS at a time: a tuple of
        # Python objects per row costs several times the typed columns
        self.chunks: list[pd.DataFrame] = []
        self.events: list[Event] = []
        self.event_counts: dict[str, int] = {}  # recorded events by kind
        self.max_events = limits.max_events_per_kind
        self.events_dropped = 0
        # (client, server, xid) -> (prog, vers, proc, gss_service, gss_proc, answered)
        # of the last call
        # (an OrderedDict: forgetting the oldest of a dict, next(iter(d)), walks
        # the slots its earlier deletions left: quadratic over many forgotten)
        self.calls: OrderedDict[tuple[bytes, bytes, int], tuple[int, int, int, str, int, bool]]
        self.calls = OrderedDict()
        self.max_calls = limits.pending_calls  # (count and memory)
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
            Event(
                ts, frame, hs.conn, hs.src, hs.sport, hs.dst, hs.dport, kind, seq, length, duration
            )
        )

    def add_event(self, event: Event) -> None:
        """Record an event; past max_events of its kind, count it."""
        kind = event.kind
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
        if hdr is None and 4 <= len(head) < 8:
            # Cut inside its header (a snaplen, long TCP options): a reply if its
            # xid is that of a call outstanding the other way on these hosts,
            # else a call (its program unknown) on a flow that carried calls,
            # a reply on the flow the other way.
            xid = int.from_bytes(head[:4], "big")
            if (dst, src, xid) in self.calls:
                hdr = rpc.xid_header(xid, "reply")
            elif (src, sport, dst, dport) in self.flows:
                hdr = rpc.xid_header(xid, "call")
            elif (dst, dport, src, sport) in self.flows:
                hdr = rpc.xid_header(xid, "reply")
        if hdr is not None and hdr.prog < 0 and hdr.msgtype == "call" and rpc_len < MIN_CALL_LEN:
            hdr = None  # a call cut before its program, too short to be one
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
                calls.move_to_end(key)  # keep the dict ordered by last use
            elif len(calls) >= self.max_calls:
                _, oldest = calls.popitem(last=False)
                self.calls_forgotten += not oldest[5]
            what = (hdr.prog, hdr.vers, hdr.proc, hdr.gss_service, hdr.gss_proc)
            calls[key] = (*what, False)
            flow = (src, sport, dst, dport)
            if len(self.flows) >= MAX_FLOWS and flow not in self.flows:
                self.flows.clear()
            if hdr.prog >= 0:  # (a call whose program was not captured names nothing)
                self.flows[flow] = what
            nfs = decode_procedure(True, *what[:3], head, hdr.body_offset, *what[3:])
            if hdr.prog == PORTMAP_PROGRAM:
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
                if prog == PORTMAP_PROGRAM:
                    self._portmap_reply(src, dst, xid, hdr, head)
            else:
                st.replies_without_call_info += 1
                last = self.flows.get((dst, dport, src, sport))
                guess = decode_reply_without_call(last, head, hdr.body_offset, rpc_len)
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
            self.chunks.append(rows_frame(self.rows))
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


def _auth_too_long(head: bytes, is_call: bool) -> bool:
    """A message whose procedure data could not be located: is it because its
    credential or verifier claims more than RFC 5531's 400 bytes?"""
    if is_call:
        (clen,) = struct.unpack_from(">I", head, 28)
        if clen > MAX_AUTH_BYTES:
            return True
        vpos = 32 + ((clen + 3) & ~3) + 4
        return len(head) >= vpos + 4 and struct.unpack_from(">I", head, vpos)[0] > MAX_AUTH_BYTES
    accepted = struct.unpack_from(">I", head, 8)[0] == MSG_ACCEPTED
    return accepted and struct.unpack_from(">I", head, 16)[0] > MAX_AUTH_BYTES
