"""Crafted captures of RPC over UDP off the well-known ports (issue 16) and of
UDP datagrams that lost fragments:

* ``sadmind``: portmap GETPORT calls (one for sadmind, program 100232 v10,
  over UDP: port 32786), mount and NFS calls, then sadmind calls to the
  announced port, three of five answered: 18 calls, 16 replies;
* ``rpc_ports_dump``: PMAPPROC_DUMP announcing UDP and TCP ports, then
  replies whose calls were not captured from a UDP port it announced (kept)
  and from a port announced for TCP only (not RPC over UDP: dropped), and a
  call with 17 AUTH_SYS groups (too odd for a port nobody announced) to the
  announced port and to another;
* ``rpc_ports_getaddr``: rpcbind v3 GETADDR (udp) over IPv4, v4 GETADDR (udp6)
  and v4 DUMP over IPv6, a v3 GETADDR asking for tcp; each followed by a
  reply from the port it names whose call was not captured;
* ``not_rpc_udp``: DNS, NTP, syslog and random-payload UDP traffic on many
  ports (well-known RPC ones and the usual RPC ranges): no RPC message;
* ``udp_write_fragment_missed``, ``udp_write_fragment_resent``,
  ``udp_write_first_fragment``: a 32 KiB UDP WRITE whose last fragment was
  not captured but which the server answered (also over IPv6:
  ``udp_write_fragment_missed_v6``); one whose last fragment was lost and
  which the client sent again; the first fragment alone.

    python tests/crafted/make_rpc_ports.py OUTDIR
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

from scapy.layers.dns import DNS, DNSQR, DNSRR
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.layers.ntp import NTP
from scapy.packet import Raw

try:
    from crafted import make_crafted as mc
except ImportError:  # run as a script (python tests/crafted/THIS.py OUTDIR) or as a package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from crafted import make_crafted as mc

u32, opaque = mc.u32, mc.opaque

PORTMAP, PORTMAP_PORT = 100000, 111
SADMIND, SADMIND_VERS, SADMIND_PORT = 100232, 10, 32786
MOUNT, MOUNT_PORT = 100005, 20048
IPPROTO_TCP, IPPROTO_UDP = 6, 17
CPORT = 905  # the client's port for portmap, mount and NFS
SADMIND_CPORT = 906
SADMIND_XIDS = (0x3001, 0x3002, 0x3003, 0x3004, 0x3005)
SADMIND_ANSWERED = (0x3001, 0x3003, 0x3005)
SADMIND_CALLS, SADMIND_REPLIES = 18, 16


def _pair(cap: mc.Capture, call: bytes, reply: bytes | None, cport: int, sport: int) -> None:
    cap.add(mc.eth(mc.udp_pkt(mc.CLIENT, mc.SERVER, cport, sport, call)))
    if reply is not None:
        cap.add(mc.eth(mc.udp_pkt(mc.SERVER, mc.CLIENT, sport, cport, reply)))


def getport_call(xid: int, prog: int, vers: int, prot: int) -> bytes:
    return mc.rpc_call(xid, 3, u32(prog, vers, prot, 0), prog=PORTMAP, vers=2)


def sadmind_call(xid: int) -> bytes:
    # sadmind arguments: opaque bytes here (only the header matters)
    return mc.rpc_call(xid, 1, opaque(b"sadmind request %d" % xid), SADMIND, SADMIND_VERS)


def build_sadmind(out: Path) -> dict[str, Path]:
    cap = mc.Capture()
    _pair(cap, mc.rpc_call(0x1001, 0, prog=PORTMAP, vers=2), mc.rpc_reply(0x1001), CPORT, 111)
    call = getport_call(0x1002, SADMIND, SADMIND_VERS, IPPROTO_UDP)
    _pair(cap, call, mc.rpc_reply(0x1002, u32(SADMIND_PORT)), CPORT, PORTMAP_PORT)
    call = getport_call(0x1003, MOUNT, 3, IPPROTO_UDP)
    _pair(cap, call, mc.rpc_reply(0x1003, u32(MOUNT_PORT)), CPORT, PORTMAP_PORT)
    for xid in (0x1004, 0x1005):  # MOUNTPROC3_NULL
        _pair(cap, mc.rpc_call(xid, 0, prog=MOUNT, vers=3), mc.rpc_reply(xid), CPORT, MOUNT_PORT)
    for xid in range(0x1006, 0x100E):
        _pair(cap, mc.getattr_call(xid), mc.getattr_reply(xid), CPORT, mc.NFS_PORT)
    for xid in SADMIND_XIDS:
        reply = mc.rpc_reply(xid, u32(0)) if xid in SADMIND_ANSWERED else None
        _pair(cap, sadmind_call(xid), reply, SADMIND_CPORT, SADMIND_PORT)
    return {"sadmind": cap.write(out / "sadmind.pcap")}


# rpc_ports_dump: what PMAPPROC_DUMP announces
DUMP_MAPPINGS = (
    (SADMIND, SADMIND_VERS, IPPROTO_UDP, SADMIND_PORT),
    (MOUNT, 3, IPPROTO_TCP, MOUNT_PORT),  # TCP only
    (100024, 1, IPPROTO_UDP, 40001),
)
DUMP_KEPT_REPLIES = (0x4101, 0x4103)  # from 32786 and 40001, calls not captured
DUMP_DROPPED_REPLY = 0x4102  # from 20048 (announced for TCP), call not captured
GIDS_CALL_LEARNT, GIDS_CALL_OTHER = 0x4104, 0x4105
OTHER_PORT = 32790


def many_gids_call(xid: int) -> bytes:
    """A sadmind call whose AUTH_SYS credential lists 17 groups (RFC 5531 allows 16)."""
    cred = u32(0x5EED) + opaque(b"client") + u32(1000, 100) + u32(17, *range(17))
    return u32(xid, 0, 2, SADMIND, SADMIND_VERS, 1, 1, len(cred)) + cred + u32(0, 0) + u32(7)


def build_rpc_ports_dump(out: Path) -> dict[str, Path]:
    cap = mc.Capture()
    body = b"".join(u32(1, *m) for m in DUMP_MAPPINGS) + u32(0)
    call = mc.rpc_call(0x4001, 4, prog=PORTMAP, vers=2)
    _pair(cap, call, mc.rpc_reply(0x4001, body), CPORT, PORTMAP_PORT)
    for xid, port in zip(DUMP_KEPT_REPLIES, (SADMIND_PORT, 40001), strict=True):
        cap.add(mc.eth(mc.udp_pkt(mc.SERVER, mc.CLIENT, port, SADMIND_CPORT, mc.rpc_reply(xid))))
    reply = mc.rpc_reply(DUMP_DROPPED_REPLY)
    cap.add(mc.eth(mc.udp_pkt(mc.SERVER, mc.CLIENT, MOUNT_PORT, SADMIND_CPORT, reply)))
    _pair(cap, many_gids_call(GIDS_CALL_LEARNT), None, SADMIND_CPORT, SADMIND_PORT)
    _pair(cap, many_gids_call(GIDS_CALL_OTHER), None, SADMIND_CPORT, OTHER_PORT)
    return {"rpc_ports_dump": cap.write(out / "rpc_ports_dump.pcap")}


# rpc_ports_getaddr: (rpcbind version, proc, netid asked, universal address answered)
RPCB_V3_UDP = (3, 3, b"udp", b"10.0.0.2.128.18")  # 32786
RPCB_V3_TCP = (3, 3, b"tcp", b"10.0.0.2.128.20")  # 32788: asked for TCP, not learnt
RPCB_V4_UDP6 = (4, 3, b"udp6", b"fd00::5.128.19")  # 32787
RPCB_V4_DUMP = (  # (netid, uaddr): 40002 learnt, 40003 not (tcp6)
    (b"udp6", b"::.156.66"),
    (b"tcp6", b"::.156.67"),
)
GETADDR_KEPT = {0x5101: 32786, 0x5103: 32787, 0x5104: 40002}  # reply xid: port
GETADDR_DROPPED = {0x5102: 32788, 0x5105: 40003}


def rpcb(prog: int, vers: int, netid: bytes, uaddr: bytes, owner: bytes = b"") -> bytes:
    return u32(prog, vers) + opaque(netid) + opaque(uaddr) + opaque(owner)


def _v6_pair(cap: mc.Capture, call: bytes, reply: bytes | None, cport: int, sport: int) -> None:
    c = IPv6(src=mc.CLIENT6, dst=mc.SERVER6) / UDP(sport=cport, dport=sport) / Raw(call)
    cap.add(Ether(src=mc.MAC_C, dst=mc.MAC_S) / c)
    if reply is not None:
        r = IPv6(src=mc.SERVER6, dst=mc.CLIENT6) / UDP(sport=sport, dport=cport) / Raw(reply)
        cap.add(Ether(src=mc.MAC_S, dst=mc.MAC_C) / r)


def build_rpc_ports_getaddr(out: Path) -> dict[str, Path]:
    cap = mc.Capture()
    for xid, (vers, proc, netid, uaddr) in ((0x5001, RPCB_V3_UDP), (0x5002, RPCB_V3_TCP)):
        call = mc.rpc_call(xid, proc, rpcb(SADMIND, SADMIND_VERS, netid, b""), PORTMAP, vers)
        _pair(cap, call, mc.rpc_reply(xid, opaque(uaddr)), CPORT, PORTMAP_PORT)
    vers, proc, netid, uaddr = RPCB_V4_UDP6
    call = mc.rpc_call(0x5003, proc, rpcb(SADMIND, SADMIND_VERS, netid, b""), PORTMAP, vers)
    _v6_pair(cap, call, mc.rpc_reply(0x5003, opaque(uaddr)), CPORT, PORTMAP_PORT)
    entries = b"".join(
        u32(1) + rpcb(100024, 1, netid, uaddr, b"superuser") for netid, uaddr in RPCB_V4_DUMP
    )
    call = mc.rpc_call(0x5004, 4, prog=PORTMAP, vers=4)
    _v6_pair(cap, call, mc.rpc_reply(0x5004, entries + u32(0)), CPORT, PORTMAP_PORT)
    for xid, port in sorted({**GETADDR_KEPT, **GETADDR_DROPPED}.items()):
        if xid in (0x5101, 0x5102):
            reply = mc.udp_pkt(mc.SERVER, mc.CLIENT, port, SADMIND_CPORT, mc.rpc_reply(xid))
            cap.add(mc.eth(reply))
        else:
            r = IPv6(src=mc.SERVER6, dst=mc.CLIENT6) / UDP(sport=port, dport=SADMIND_CPORT)
            cap.add(Ether(src=mc.MAC_S, dst=mc.MAC_C) / r / Raw(mc.rpc_reply(xid)))
    return {"rpc_ports_getaddr": cap.write(out / "rpc_ports_getaddr.pcap")}


# not_rpc_udp: ports tried (the RPC ones, the privileged range rpcbind hands
# out, NFS helpers, the ephemeral ranges)
NOT_RPC_PORTS = (111, 2049, 600, 665, 700, 875, 1023, 4045, 20048, 32768, 32786, 40000, 60999)
RANDOM_DATAGRAMS = 400


def build_not_rpc_udp(out: Path) -> dict[str, Path]:
    cap = mc.Capture()
    rng = random.Random(16)

    def add(sport: int, dport: int, payload: bytes, reply: bool = False) -> None:
        a, b = (mc.SERVER, mc.CLIENT) if reply else (mc.CLIENT, mc.SERVER)
        cap.add(mc.eth(IP(src=a, dst=b) / UDP(sport=sport, dport=dport) / Raw(payload)))

    for i, port in enumerate((53, *NOT_RPC_PORTS)):
        query = DNS(id=0x100 + i, rd=1, qd=DNSQR(qname=f"host{i}.example.org"))
        answer = DNS(
            id=0x100 + i,
            qr=1,
            rd=1,
            ra=1,
            qd=DNSQR(qname=f"host{i}.example.org"),
            an=DNSRR(rrname=f"host{i}.example.org", rdata="10.0.0.9"),
        )
        add(33000 + i, port, bytes(query))
        add(port, 33000 + i, bytes(answer), reply=True)
    for port in (123, *NOT_RPC_PORTS):
        add(123, port, bytes(NTP(mode=3, sent=3_909_000_000)))  # client request: mostly zeros
        add(port, 123, bytes(NTP(mode=4, stratum=2, id="10.0.0.1", sent=3_909_000_001)), reply=True)
        # zeros but the first byte and a root dispersion of 2: the first 40 bytes
        # read as a call (rpcvers 2) of program 0 with empty credential and verifier
        add(123, port, bytes([0x1C, 1, 0, 0]) + u32(0, 2) + bytes(36))
    for i, port in enumerate((514, *NOT_RPC_PORTS)):
        line = f"<34>Nov 24 06:51:55 host{i} sshd[{4000 + i}]: Accepted publickey for user"
        add(514 + i, port, line.encode())
    for _ in range(RANDOM_DATAGRAMS):
        port = rng.choice(NOT_RPC_PORTS[2:])  # off 111 and 2049: any reply there is taken
        n = rng.choice((12, 16, 40, 64, 100, 200, 1000))
        payload = bytes(rng.randrange(256) for _ in range(n))
        # a third with a call-like or reply-like prefix: xid, then 0 or 1, then RPC version 2
        kind = rng.randrange(3)
        if kind == 1 and n >= 12:
            payload = payload[:4] + u32(0, 2) + payload[12:]
        elif kind == 2:
            payload = payload[:4] + u32(1) + payload[8:]
        add(rng.randrange(1024, 65536), port, payload, reply=bool(rng.randrange(2)))
    return {"not_rpc_udp": cap.write(out / "not_rpc_udp.pcap")}


# Datagrams that lost fragments: a 32 KiB UDP WRITE at MTU 1500 (23 fragments)
FRAG_WRITE_COUNT = 32 * 1024
FRAG_WRITE_LEN = mc.CALL_HDR_LEN + 56 + FRAG_WRITE_COUNT  # RPC bytes: 32892
FRAG_CHUNK = 1480
FRAG_CPORT = 907
MISSED_XID, RESENT_XID, CUT_XID = 0x6001, 0x6002, 0x6003
RESEND_AFTER_NS = 1_100_000_000  # the client's UDP timeout (timeo=11)


def _write_fragments(xid: int, ip_id: int) -> list:
    call = mc.write_call(xid, FRAG_WRITE_COUNT)
    return mc.ipv4_fragments(mc.CLIENT, mc.SERVER, FRAG_CPORT, mc.NFS_PORT, call, ip_id)


def _getattr_pair(cap: mc.Capture, xid: int) -> None:
    _pair(cap, mc.getattr_call(xid), mc.getattr_reply(xid), FRAG_CPORT, mc.NFS_PORT)


def build_fragments_missed(out: Path) -> dict[str, Path]:
    """GETATTR, then the WRITE with its last fragment not captured and its
    reply (the server got it all: the capture missed the fragment), GETATTR."""
    cap = mc.Capture()
    _getattr_pair(cap, 0x6101)
    for f in _write_fragments(MISSED_XID, 0x7001)[:-1]:
        cap.add(mc.eth(f))
    reply = mc.write_reply(MISSED_XID, FRAG_WRITE_COUNT)
    cap.add(mc.eth(mc.udp_pkt(mc.SERVER, mc.CLIENT, mc.NFS_PORT, FRAG_CPORT, reply)))
    _getattr_pair(cap, 0x6102)
    return {"udp_write_fragment_missed": cap.write(out / "udp_write_fragment_missed.pcap")}


MISSED_V6_XID = 0x6004


def build_fragments_missed_v6(out: Path) -> dict[str, Path]:
    """The same over IPv6, a Hop-by-Hop Options header before the Fragment
    header (the UDP header after it in the first fragment): last fragment not
    captured, the reply captured."""
    cap = mc.Capture()
    call = mc.write_call(MISSED_V6_XID, FRAG_WRITE_COUNT)
    frags = mc.ipv6_fragments(
        mc.CLIENT6, mc.SERVER6, FRAG_CPORT, mc.NFS_PORT, call, 0x7005, hop_by_hop=True
    )
    for f in frags[:-1]:
        cap.add(Ether(src=mc.MAC_C, dst=mc.MAC_S) / f)
    reply = mc.write_reply(MISSED_V6_XID, FRAG_WRITE_COUNT)
    r = IPv6(src=mc.SERVER6, dst=mc.CLIENT6) / UDP(sport=mc.NFS_PORT, dport=FRAG_CPORT)
    cap.add(Ether(src=mc.MAC_S, dst=mc.MAC_C) / r / Raw(reply))
    return {"udp_write_fragment_missed_v6": cap.write(out / "udp_write_fragment_missed_v6.pcap")}


def build_fragments_resent(out: Path) -> dict[str, Path]:
    """The WRITE with its last fragment lost, no reply; 1.1 s later the client
    sends it again (another IP id), whole, and the server answers."""
    cap = mc.Capture()
    frags = _write_fragments(RESENT_XID, 0x7002)
    t = mc.BASE_NS
    for i, f in enumerate(frags[:-1]):
        cap.add(mc.eth(f), t + i * 20_000)
    t += RESEND_AFTER_NS
    for i, f in enumerate(_write_fragments(RESENT_XID, 0x7003)):
        cap.add(mc.eth(f), t + i * 20_000)
    reply = mc.write_reply(RESENT_XID, FRAG_WRITE_COUNT)
    pkt = mc.udp_pkt(mc.SERVER, mc.CLIENT, mc.NFS_PORT, FRAG_CPORT, reply)
    cap.add(mc.eth(pkt), t + 2_000_000)
    return {"udp_write_fragment_resent": cap.write(out / "udp_write_fragment_resent.pcap")}


def build_first_fragment_only(out: Path) -> dict[str, Path]:
    """The whole capture: the first fragment of a WRITE (cut by the capture's end)."""
    cap = mc.Capture()
    cap.add(mc.eth(_write_fragments(CUT_XID, 0x7004)[0]))
    return {"udp_write_first_fragment": cap.write(out / "udp_write_first_fragment.pcap")}


BUILDERS = (
    build_sadmind,
    build_rpc_ports_dump,
    build_rpc_ports_getaddr,
    build_not_rpc_udp,
    build_fragments_missed,
    build_fragments_missed_v6,
    build_fragments_resent,
    build_first_fragment_only,
)


def build_all(outdir: str | os.PathLike[str]) -> dict[str, Path]:
    """Write every capture into outdir; returns {name: path}."""
    return mc.run_builders(BUILDERS, outdir)


if __name__ == "__main__":
    mc.script(build_all, __file__)
