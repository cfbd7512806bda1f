"""Crafted captures of third-party damage to TCP (issue 16):

* ``syn_corrupt``: GETATTR calls and replies over an established connection;
  before the second reply, a corrupted copy of it at the sequence number of
  the server's frame before (its ACK of the call), with SYN set and ACK
  cleared, a bad TCP checksum where the server's other frames are good, and
  trailing bytes after the IP packet;
* ``syn_in_window``: the same with a clean SYN (good checksum, no trailing
  bytes) inside the established connection's window;
* ``syn_after_fin``: a connection closed by FIN both ways, then a SYN on the
  same ports whose sequence number falls inside the old window (a real port
  reuse: a new connection);
* ``syn_out_of_window``: an established connection, then a SYN on the same
  ports far outside its window with no FIN or RST (the client lost the old
  connection: a new connection);
* ``mirror_many``: every frame of a TCP and a UDP exchange captured 2 to 4
  times, the copies 90-220 µs after the original, interleaved with the next
  originals (60 µs apart: up to three originals between a frame and its copy);
* ``offload_client``: a client-side capture (no handshake) whose client
  frames all carry a bad TCP checksum (transmit checksum offload) while the
  server's are good; the pace of calls says "server" (short call->reply, long
  reply->next call);
* ``coarse_clock``: a TCP exchange stamped in 10 ms steps (SYN and SYN-ACK on
  one tick, the ACK on the next; each call and its reply on one tick).

    python tests/crafted/make_tcp_damage.py OUTDIR
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from scapy.layers.inet import TCP
from scapy.layers.l2 import Ether

try:
    from crafted import make_crafted as mc
except ImportError:  # run as a script (python tests/crafted/THIS.py OUTDIR) or as a package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from crafted import make_crafted as mc

SYN_XIDS = (0x3101, 0x3102, 0x3103)
SYN_CORRUPT_PORT, SYN_WINDOW_PORT, SYN_FIN_PORT, SYN_FAR_PORT = 41500, 41501, 41502, 41503
TRAILER = b"\xde\xad\xbe\xef\x00\x11"
MIRROR_MANY_PORT, MIRROR_MANY_UDP_PORT = 41510, 972
MIRROR_SPACING_NS = 60_000
# copies of original n (0-based) at these delays (µs) after it: 1 to 3 copies
MIRROR_COPIES_US = ((90,), (90, 160), (110, 170, 220), (220,), (95, 140, 210), (130, 200))
MIRROR_MANY_XIDS = (0x3201, 0x3202)
OFFLOAD_PORT, OFFLOAD_XIDS = 41520, tuple(range(0x3301, 0x3306))
COARSE_PORT, COARSE_XIDS = 41530, tuple(range(0x3401, 0x3409))
TICK_NS = 10_000_000


def _bad_checksum(pkt) -> None:
    """Give pkt's TCP header a checksum that is certainly wrong."""
    tcp = pkt[TCP]
    tcp.chksum = None
    right = Ether(bytes(pkt))[TCP].chksum  # scapy fills it in when built
    tcp.chksum = right ^ 0x5A5A


def _calls(c: mc.TcpConn, xids: tuple[int, ...]) -> None:
    for xid in xids:
        c.client_send(mc.record(mc.getattr_call(xid)))
        c.server_send(mc.record(mc.getattr_reply(xid)))


def _syn_capture(port: int, corrupt: bool) -> mc.Capture:
    # handshake (1-3), call 1 (4), reply 1 (5), call 2 (6), the server's ACK
    # of it (7), a SYN at the ACK's sequence number (8: corrupt, a copy of
    # reply 2 with SYN set and ACK cleared, a bad checksum and trailing bytes;
    # else a bare SYN), reply 2 (9), call 3 (10), reply 3 (11)
    cap = mc.Capture()
    c = mc.TcpConn(cap, cport=port)
    c.handshake()
    x1, x2, x3 = SYN_XIDS
    _calls(c, (x1,))
    c.client_send(mc.record(mc.getattr_call(x2)))
    cap.add(c.pkt(False, "A", c.snext, c.cnext))
    reply = mc.record(mc.getattr_reply(x2))
    if corrupt:
        pkt = c.pkt(False, "SP", c.snext, c.cnext, reply)
        _bad_checksum(pkt)
        cap.add(bytes(pkt) + TRAILER)
    else:
        cap.add(c.pkt(False, "S", c.snext, 0))
    c.server_send(reply)
    _calls(c, (x3,))
    return cap


def build_syn_corrupt(out: Path) -> dict[str, Path]:
    return {"syn_corrupt": _syn_capture(SYN_CORRUPT_PORT, True).write(out / "syn_corrupt.pcap")}


def build_syn_in_window(out: Path) -> dict[str, Path]:
    cap = _syn_capture(SYN_WINDOW_PORT, False)
    return {"syn_in_window": cap.write(out / "syn_in_window.pcap")}


def build_syn_after_fin(out: Path) -> dict[str, Path]:
    # connection 1: handshake (1-3), call 1 (4), reply 1 (5), FIN both ways (6, 7);
    # connection 2 on the same ports, its ISN 10 bytes past the old one's next
    # byte: handshake (8-10), call 2 (11), reply 2 (12)
    cap = mc.Capture()
    c = mc.TcpConn(cap, cport=SYN_FIN_PORT)
    c.handshake()
    _calls(c, SYN_XIDS[:1])
    c.close()
    cap.add(c.pkt(False, "FA", c.snext, c.cnext + 1))
    c2 = mc.TcpConn(cap, cport=SYN_FIN_PORT, cisn=c.cnext + 10, sisn=c.snext + 10)
    c2.handshake()
    _calls(c2, SYN_XIDS[1:2])
    return {"syn_after_fin": cap.write(out / "syn_after_fin.pcap")}


def build_syn_out_of_window(out: Path) -> dict[str, Path]:
    # connection 1: handshake (1-3), call 1 (4), reply 1 (5); connection 2 on
    # the same ports, ISN far away, no FIN or RST before: handshake (6-8),
    # call 2 (9), reply 2 (10)
    cap = mc.Capture()
    c = mc.TcpConn(cap, cport=SYN_FAR_PORT)
    c.handshake()
    _calls(c, SYN_XIDS[:1])
    c2 = mc.TcpConn(cap, cport=SYN_FAR_PORT, cisn=2_000_000_000, sisn=3_000_000_000)
    c2.handshake()
    _calls(c2, SYN_XIDS[1:2])
    return {"syn_out_of_window": cap.write(out / "syn_out_of_window.pcap")}


def build_mirror_many(out: Path) -> dict[str, Path]:
    # originals: TCP handshake (3), GETATTR call and reply, UDP GETATTR call
    # and reply, 60 µs apart; original n copied at MIRROR_COPIES_US[n % 6]
    orig = mc.Capture()
    c = mc.TcpConn(orig, cport=MIRROR_MANY_PORT)
    c.handshake()
    _calls(c, MIRROR_MANY_XIDS[:1])
    udp = (mc.CLIENT, mc.SERVER, MIRROR_MANY_UDP_PORT, mc.NFS_PORT)
    back = (mc.SERVER, mc.CLIENT, mc.NFS_PORT, MIRROR_MANY_UDP_PORT)
    orig.add(mc.eth(mc.udp_pkt(*udp, mc.getattr_call(MIRROR_MANY_XIDS[1]))))
    orig.add(mc.eth(mc.udp_pkt(*back, mc.getattr_reply(MIRROR_MANY_XIDS[1]))))
    frames = []
    for n, (_t, data, wire) in enumerate(orig.frames):
        t = mc.BASE_NS + n * MIRROR_SPACING_NS
        frames.append((t, 0, data, wire))
        for k, us in enumerate(MIRROR_COPIES_US[n % len(MIRROR_COPIES_US)], start=1):
            frames.append((t + us * 1000, k, data, wire))
    frames.sort(key=lambda f: (f[0], f[1]))
    cap = mc.Capture()
    cap.frames = [(t, data, wire) for t, _k, data, wire in frames]
    return {"mirror_many": cap.write(out / "mirror_many.pcap")}


def build_offload_client(out: Path) -> dict[str, Path]:
    # mid-stream (no handshake): five calls, each answered 300 µs later and the
    # next call 2 ms after the reply (the pace says "server"); the client's
    # frames all with a bad TCP checksum
    cap = mc.Capture()
    c = mc.TcpConn(cap, cport=OFFLOAD_PORT)
    t = mc.BASE_NS
    for xid in OFFLOAD_XIDS:
        n = c.client_send(mc.record(mc.getattr_call(xid)))
        c.server_send(mc.record(mc.getattr_reply(xid)))
        _t, data, wire = cap.frames[n - 1]
        pkt = Ether(data)
        _bad_checksum(pkt)
        cap.frames[n - 1] = (t, bytes(pkt), wire)
        cap.frames[n] = (t + 300_000, *cap.frames[n][1:])
        t += 2_300_000
    return {"offload_client": cap.write(out / "offload_client.pcap")}


def build_coarse_clock(out: Path) -> dict[str, Path]:
    # SYN and SYN-ACK on tick 0, ACK on tick 1; call n and its reply on tick
    # 2 + n (a 0 µs call->reply, a 10 ms reply->next call)
    cap = mc.Capture()
    c = mc.TcpConn(cap, cport=COARSE_PORT)
    c.handshake()
    _calls(c, COARSE_XIDS)
    ticks = [0, 0, 1] + [2 + i // 2 for i in range(2 * len(COARSE_XIDS))]
    cap.frames = [
        (mc.BASE_NS + k * TICK_NS, data, wire)
        for k, (_t, data, wire) in zip(ticks, cap.frames, strict=True)
    ]
    return {"coarse_clock": cap.write(out / "coarse_clock.pcap")}


BUILDERS = (
    build_syn_corrupt,
    build_syn_in_window,
    build_syn_after_fin,
    build_syn_out_of_window,
    build_mirror_many,
    build_offload_client,
    build_coarse_clock,
)


def build_all(outdir: str | os.PathLike[str]) -> dict[str, Path]:
    """Write every capture into outdir; returns {name: path}."""
    return mc.run_builders(BUILDERS, outdir)


if __name__ == "__main__":
    mc.script(build_all, __file__)
