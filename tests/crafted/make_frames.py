"""Crafted captures for the frame-level facts and the diagnosis modules that
use them (repeats, transport, capture quality).

    python tests/crafted/make_frames.py OUTDIR

or ``build_all(outdir) -> {name: path}`` from the tests.  RPC bytes come from
make_crafted.py; here every packet gets its own IP id (as a real host's
would), a TTL, a TCP window and options, and an explicit timestamp, so the
timing facts (handshake, call->reply pace, window stretches) are exact.
Times are microseconds after BASE_NS (``at(us)``).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from scapy.layers.inet import IP, TCP, UDP
from scapy.packet import Raw

try:
    from crafted import make_crafted as mc
except ImportError:  # run as a script (python tests/crafted/THIS.py OUTDIR) or as a package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from crafted import make_crafted as mc

BASE_NS = mc.BASE_NS
CLIENT, SERVER, NFS_PORT = mc.CLIENT, mc.SERVER, mc.NFS_PORT
MSS = 1448


def at(us: float) -> int:
    """Capture time `us` microseconds after the base time (ns)."""
    return BASE_NS + round(us * 1000)


@dataclass
class Host:
    addr: str
    ttl: int
    ip_id: int = 100

    def next_id(self) -> int:
        self.ip_id = (self.ip_id + 1) & 0xFFFF
        return self.ip_id


@dataclass
class Flow:
    """Both directions of one TCP connection, packets stamped explicitly."""

    cap: mc.Capture
    client: Host
    server: Host
    cport: int
    cisn: int = 1_000
    sisn: int = 500_000
    cnext: int = field(init=False)
    snext: int = field(init=False)

    def __post_init__(self) -> None:
        self.cnext, self.snext = self.cisn + 1, self.sisn + 1

    def add(
        self,
        t_us: float,
        from_client: bool,
        payload: bytes = b"",
        flags: str = "PA",
        window: int = 65535,
        seq: int | None = None,
        options: list | None = None,
    ) -> int:
        """One packet at t_us; data at `seq` (default: next in order).  Returns its frame."""
        h, peer = (self.client, self.server) if from_client else (self.server, self.client)
        sp, dp = (self.cport, NFS_PORT) if from_client else (NFS_PORT, self.cport)
        nxt = self.cnext if from_client else self.snext
        seq = nxt if seq is None else seq
        ack = self.snext if from_client else self.cnext
        if payload:
            end = max(nxt, seq + len(payload))
            if from_client:
                self.cnext = end
            else:
                self.snext = end
        elif not payload and flags == "PA":
            flags = "A"
        seg = TCP(sport=sp, dport=dp, seq=seq % 2**32, ack=ack % 2**32, flags=flags, window=window)
        if options:
            seg.options = options
        ip = IP(src=h.addr, dst=peer.addr, id=h.next_id(), ttl=h.ttl) / seg
        return self.cap.add(mc.eth(ip / Raw(payload) if payload else ip), at(t_us))

    def handshake(
        self,
        t_us: float,
        synack_after_us: float,
        ack_after_us: float,
        client_opts: list | None = None,
        server_opts: list | None = None,
        server_window: int = 65535,
    ) -> None:
        c = self.client
        s = self.server
        syn = TCP(sport=self.cport, dport=NFS_PORT, seq=self.cisn, flags="S", window=64240)
        syn.options = client_opts or []
        self.cap.add(mc.eth(IP(src=c.addr, dst=s.addr, id=c.next_id(), ttl=c.ttl) / syn), at(t_us))
        sa = TCP(
            sport=NFS_PORT,
            dport=self.cport,
            seq=self.sisn,
            ack=self.cisn + 1,
            flags="SA",
            window=server_window,
        )
        sa.options = server_opts or []
        t_sa = t_us + synack_after_us
        self.cap.add(mc.eth(IP(src=s.addr, dst=c.addr, id=s.next_id(), ttl=s.ttl) / sa), at(t_sa))
        self.add(t_sa + ack_after_us, True, flags="A")

    def client_data(self, t_us: float, payload: bytes, **kw) -> int:
        return self.add(t_us, True, payload, **kw)

    def server_data(self, t_us: float, payload: bytes, **kw) -> int:
        return self.add(t_us, False, payload, **kw)


def segments(data: bytes, size: int = MSS) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def udp(t_us: float, cap: mc.Capture, src: Host, dst: Host, sport: int, dport: int, body: bytes):
    pkt = IP(src=src.addr, dst=dst.addr, id=src.next_id(), ttl=src.ttl) / UDP(
        sport=sport, dport=dport
    )
    return cap.add(mc.eth(pkt / Raw(body)), at(t_us))


def hosts(client_ttl: int = 64, server_ttl: int = 64) -> tuple[Host, Host]:
    return Host(CLIENT, client_ttl, 1000), Host(SERVER, server_ttl, 5000)


# ---- mirror duplicates ------------------------------------------------------------

WRITE_COUNT = 4000  # a WRITE over three segments


def _plain_exchange(cap: mc.Capture) -> None:
    """TCP: handshake, GETATTR, a 3-segment WRITE and their replies; UDP: a
    GETATTR and its reply.  Frames 100 us apart."""
    c, s = hosts()
    f = Flow(cap, c, s, cport=800)
    f.handshake(0, 100, 100)
    f.client_data(300, mc.record(mc.getattr_call(0x2001)))
    f.server_data(400, mc.record(mc.getattr_reply(0x2001)))
    t = 500.0
    for part in segments(mc.record(mc.write_call(0x2002, WRITE_COUNT))):
        f.client_data(t, part)
        t += 100
    f.server_data(t, mc.record(mc.write_reply(0x2002, WRITE_COUNT)))
    udp(t + 100, cap, c, s, 801, NFS_PORT, mc.getattr_call(0x2003))
    udp(t + 200, cap, s, c, NFS_PORT, 801, mc.getattr_reply(0x2003))


def build_mirror(out: Path) -> dict[str, Path]:
    # "plain": the exchange once.  "mirror": every frame of it twice, the copy
    # 3 us after the original; the last two frames in the order A B A' B'.
    plain = mc.Capture()
    _plain_exchange(plain)
    mirror = mc.Capture()
    frames = plain.frames
    for t, data, wire in frames[:-2]:
        mirror.frames.append((t, data, wire))
        mirror.frames.append((t + 3_000, data, wire))
    (ta, a, wa), (tb, b, wb) = frames[-2:]
    mirror.frames += [(ta, a, wa), (tb, b, wb), (tb + 3_000, a, wa), (tb + 6_000, b, wb)]
    return {
        "plain": plain.write(out / "plain.pcap"),
        "mirror": mirror.write(out / "mirror.pcap"),
    }


# ---- TCP retransmission of the same bytes -------------------------------------------


def build_tcp_retransmission(out: Path) -> dict[str, Path]:
    # A WRITE in 3 segments (frames 4, 5, 6) whose second segment is sent again
    # 200 ms later (frame 7: new IP id, same bytes); the reply (frame 8).
    cap = mc.Capture()
    c, s = hosts()
    f = Flow(cap, c, s, cport=810)
    f.handshake(0, 100, 100)
    parts = segments(mc.record(mc.write_call(0x2101, WRITE_COUNT)))
    f.client_data(300, parts[0])
    seq2 = f.cnext
    f.client_data(400, parts[1])
    f.client_data(500, parts[2])
    f.client_data(200_500, parts[1], seq=seq2)
    f.server_data(201_000, mc.record(mc.write_reply(0x2101, WRITE_COUNT)))
    return {"tcp_retransmission": cap.write(out / "tcp_retransmission.pcap")}


# ---- RPC retransmissions: back-off, new connection, duplicate replies --------------

# The study's stuck WRITE: re-sent after 370 ms, 379 ms, 1.78 s.
BACKOFF_SENDS_US = (0, 370_000, 749_000, 2_529_000)
BACKOFF_XID = 0x2201
BACKOFF_REPLY_US = 2_600_000
OK_WRITE_LATENCY_US = 2_000  # the WRITEs never re-sent
DUP_XID = 0x2210


def build_udp_backoff(out: Path) -> dict[str, Path]:
    # UDP: 5 WRITEs answered in 2 ms each (from 10 ms on, every 10 ms); the
    # stuck WRITE sent at BACKOFF_SENDS_US and answered at BACKOFF_REPLY_US;
    # a GETATTR sent twice (3 s, 3.5 s), each send answered (3.5005 s, 3.5006 s:
    # a duplicate reply).
    cap = mc.Capture()
    c, s = hosts()
    for i in range(5):
        t = 10_000 + 10_000 * i
        udp(t, cap, c, s, 900, NFS_PORT, mc.write_call(0x2301 + i, 8))
        udp(t + OK_WRITE_LATENCY_US, cap, s, c, NFS_PORT, 900, mc.write_reply(0x2301 + i, 8))
    for t in BACKOFF_SENDS_US:
        udp(t + 100_000, cap, c, s, 900, NFS_PORT, mc.write_call(BACKOFF_XID, 8))
    udp(BACKOFF_REPLY_US + 100_000, cap, s, c, NFS_PORT, 900, mc.write_reply(BACKOFF_XID, 8))
    udp(3_000_000, cap, c, s, 900, NFS_PORT, mc.getattr_call(DUP_XID))
    udp(3_500_000, cap, c, s, 900, NFS_PORT, mc.getattr_call(DUP_XID))
    udp(3_500_500, cap, s, c, NFS_PORT, 900, mc.getattr_reply(DUP_XID))
    udp(3_500_600, cap, s, c, NFS_PORT, 900, mc.getattr_reply(DUP_XID))
    return {"udp_backoff": cap.write(out / "udp_backoff.pcap")}


NEW_CONN_XID = 0x2401


def build_new_connection(out: Path) -> dict[str, Path]:
    # Connection 1 (port 820): handshake, a LOOKUP (frame 4) never answered,
    # RST at 1 s.  Connection 2 (port 821): handshake at 1.5 s, the same call
    # again (frame 9, 1.5003 s), its reply (frame 10, 1.5008 s).
    cap = mc.Capture()
    c, s = hosts()
    f1 = Flow(cap, c, s, cport=820)
    f1.handshake(0, 100, 100)
    f1.client_data(300, mc.record(mc.lookup_call(NEW_CONN_XID)))
    f1.add(1_000_000, True, flags="R")
    f2 = Flow(cap, c, s, cport=821, cisn=7_000, sisn=900_000)
    f2.handshake(1_500_000, 100, 100)
    f2.client_data(1_500_300, mc.record(mc.lookup_call(NEW_CONN_XID)))
    f2.server_data(1_500_800, mc.record(mc.lookup_reply(NEW_CONN_XID)))
    return {"new_connection": cap.write(out / "new_connection.pcap")}


# ---- windows --------------------------------------------------------------------------

WS = (3, b"\x02")  # window scale option: shift 2
MSS_OPT = ("MSS", 1460)
ZERO_WINDOW_US = (1_000, 51_000)  # the server's window is zero from 1 ms to 51 ms


def build_zero_window(out: Path) -> dict[str, Path]:
    # Handshake (both offer window scale 2: windows are raw << 2); a GETATTR
    # answered at 500 us; a WRITE whose first segment (700 us) is ACKed with a
    # zero window (1 ms), the window reopens at 51 ms, the rest follows and the
    # reply comes at 52 ms.
    cap = mc.Capture()
    c, s = hosts()
    f = Flow(cap, c, s, cport=830)
    f.handshake(0, 100, 100, client_opts=[("WScale", 2)], server_opts=[("WScale", 2)])
    f.client_data(300, mc.record(mc.getattr_call(0x2501)))
    f.server_data(500, mc.record(mc.getattr_reply(0x2501)))
    parts = segments(mc.record(mc.write_call(0x2502, WRITE_COUNT)))
    f.client_data(700, parts[0])
    f.add(ZERO_WINDOW_US[0], False, window=0)
    f.add(30_000, True, flags="A")  # a window probe's answer: still zero
    f.add(30_100, False, window=0)
    f.add(ZERO_WINDOW_US[1], False, window=16000)
    f.client_data(51_100, parts[1])
    f.client_data(51_200, parts[2])
    f.server_data(52_000, mc.record(mc.write_reply(0x2502, WRITE_COUNT)), window=16000)
    return {"zero_window": cap.write(out / "zero_window.pcap")}


FULL_WINDOW = 3900  # the server's receive window (scale 0)
FULL_STRETCHES_US = ((400, 5_400), (5_600, 10_600), (10_800, 15_800))


def build_window_full(out: Path) -> dict[str, Path]:
    # The client offers window scale 2, the server none: no scaling either way.
    # The server's window is 3900 bytes and its MSS 1460.  A WRITE of 6
    # segments (1448 bytes, the last 1080): each pair fills the window
    # (2896 + 1460 and 2528 + 1460 >= 3900, one segment + 1460 < 3900); the
    # server ACKs each pair 5 ms later; then the reply.  Stretches:
    # FULL_STRETCHES_US.  "window_unknown": the same without the handshake.
    cap = mc.Capture()
    c, s = hosts()
    f = Flow(cap, c, s, cport=840)
    f.handshake(
        0,
        100,
        100,
        client_opts=[("MSS", 1460), ("WScale", 2)],
        server_opts=[("MSS", 1460)],
        server_window=FULL_WINDOW,
    )
    parts = segments(mc.record(mc.write_call(0x2601, 8192)))
    assert len(parts) == 6
    for i, (start, end) in enumerate(FULL_STRETCHES_US):
        f.client_data(start - 100, parts[2 * i])
        f.client_data(start, parts[2 * i + 1])
        f.add(end, False, window=FULL_WINDOW)
    f.server_data(16_000, mc.record(mc.write_reply(0x2601, 8192)), window=FULL_WINDOW)
    unknown = mc.Capture()
    unknown.frames = cap.frames[3:]
    return {
        "window_full": cap.write(out / "window_full.pcap"),
        "window_unknown": unknown.write(out / "window_unknown.pcap"),
    }


# ---- capture point ------------------------------------------------------------------

RTT_US = 1_000  # network round trip
SERVER_US = 200  # server time per GETATTR
CLIENT_US = 30  # client time between a reply and its next call / the handshake ACK


def _point(cap: mc.Capture, client_side: bool) -> None:
    """One connection and 6 sequential GETATTRs seen from one side: the sender
    here has its initial TTL 64, the far host's packets crossed a router (63)."""
    c, s = hosts(64, 63) if client_side else hosts(63, 64)
    f = Flow(cap, c, s, cport=850)
    if client_side:  # SYN -> SYN-ACK is the round trip, SYN-ACK -> ACK the client's time
        f.handshake(0, RTT_US + 20, CLIENT_US)
        call_to_reply, reply_to_call = RTT_US + SERVER_US, CLIENT_US
    else:  # SYN -> SYN-ACK is the server's time, SYN-ACK -> ACK the round trip
        f.handshake(0, 20, RTT_US + CLIENT_US)
        call_to_reply, reply_to_call = SERVER_US, RTT_US + CLIENT_US
    t = 3_000.0
    for i in range(6):
        f.client_data(t, mc.record(mc.getattr_call(0x2701 + i)))
        t += call_to_reply
        f.server_data(t, mc.record(mc.getattr_reply(0x2701 + i)))
        t += reply_to_call


def build_capture_point(out: Path) -> dict[str, Path]:
    client, server = mc.Capture(), mc.Capture()
    _point(client, True)
    _point(server, False)
    return {
        "point_client": client.write(out / "point_client.pcap"),
        "point_server": server.write(out / "point_server.pcap"),
    }


# ---- data -> ACK round trips on a connection captured mid-stream -----------------------

ACK_RTT_CLIENT_US = (2_000, 800, 1_500)  # server's ACK of each WRITE's first segment
ACK_RTT_CLIENT_ACK_US = 30  # the client's ACK of each reply (its own stack)
ACK_RTT_RESENT_ACK_US = 100  # ACK of a re-sent segment: no sample (Karn)
ACK_RTT_BURST_ACK_US = 50  # ACK of a TSO burst (a 12,000-byte segment): not timed
ACK_RTT_BURST_BYTES = 12_000


def build_ack_rtt(out: Path) -> dict[str, Path]:
    # Client side, no handshake: a GETATTR and its reply (each direction's first
    # data: not timed), then three WRITEs of 3 segments whose first segment the
    # server ACKs after ACK_RTT_CLIENT_US; the client ACKs each reply after 30 us
    # and sends its next call 50 us after it.  Then a WRITE whose first segment is
    # re-sent 5 us later and ACKed at once, and one sent as a single 12,000-byte
    # segment, ACKed 50 us later.
    cap = mc.Capture()
    c, s = hosts()
    f = Flow(cap, c, s, cport=860, cisn=40_000, sisn=70_000)
    f.client_data(0, mc.record(mc.getattr_call(0x2801)))
    f.server_data(300, mc.record(mc.getattr_reply(0x2801)))
    f.add(330, True, flags="A")
    t = 1_000.0
    for i, rtt in enumerate(ACK_RTT_CLIENT_US):
        xid = 0x2810 + i
        for k, part in enumerate(segments(mc.record(mc.write_call(xid, WRITE_COUNT)))):
            f.client_data(t + 10 * k, part)
        f.add(t + rtt, False, flags="A")
        f.server_data(t + rtt + 50, mc.record(mc.write_reply(xid, WRITE_COUNT)))
        f.add(t + rtt + 50 + ACK_RTT_CLIENT_ACK_US, True, flags="A")
        t += rtt + 100  # the next call soon after the reply, as a client-side capture shows
    parts = segments(mc.record(mc.write_call(0x2820, WRITE_COUNT)))
    first = f.cnext
    f.client_data(t, parts[0])
    f.client_data(t + 5, parts[0], seq=first)
    f.add(t + ACK_RTT_RESENT_ACK_US, False, flags="A")
    for k, part in enumerate(parts[1:]):
        f.client_data(t + 200 + 10 * k, part)
    f.server_data(t + 2_500, mc.record(mc.write_reply(0x2820, WRITE_COUNT)))
    f.add(t + 2_500 + ACK_RTT_CLIENT_ACK_US, True, flags="A")
    t += 2_600
    f.client_data(t, mc.record(mc.write_call(0x2821, ACK_RTT_BURST_BYTES)))
    f.add(t + ACK_RTT_BURST_ACK_US, False, flags="A")
    f.server_data(t + 2_500, mc.record(mc.write_reply(0x2821, ACK_RTT_BURST_BYTES)))
    f.add(t + 2_500 + ACK_RTT_CLIENT_ACK_US, True, flags="A")
    return {"ack_rtt": cap.write(out / "ack_rtt.pcap")}


BUILDERS = (
    build_mirror,
    build_tcp_retransmission,
    build_udp_backoff,
    build_new_connection,
    build_zero_window,
    build_window_full,
    build_capture_point,
    build_ack_rtt,
)


def build_all(outdir: str | os.PathLike[str]) -> dict[str, Path]:
    """Write every capture into outdir; returns {name: path}."""
    return mc.run_builders(BUILDERS, outdir)


if __name__ == "__main__":
    mc.script(build_all, __file__)
