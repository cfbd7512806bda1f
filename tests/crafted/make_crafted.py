"""Write tiny crafted captures of the pathological cases the parser must survive.

    python tests/crafted/make_crafted.py OUTDIR

or ``build_all(outdir) -> {name: path}`` from the tests.  Packets are built with
scapy and written with scapy's pcap writer; pcapng (two interfaces of different
link types, interface statistics) is written by hand with struct.  RPC bytes
are built by hand.  Everything is deterministic: frame n of a capture is
stamped ``ts(n)`` (a fixed base time plus n-1 microseconds) unless a builder
says otherwise, so tests can compute every expected timestamp.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import struct
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrFragment, IPv6ExtHdrHopByHop
from scapy.layers.l2 import ARP, CookedLinux, CookedLinuxV2, Dot1AD, Dot1Q, Ether
from scapy.packet import Packet, Raw
from scapy.utils import RawPcapWriter

# ---- time -------------------------------------------------------------------

BASE_NS = 1_700_000_000 * 1_000_000_000  # 2023-11-14T22:13:20Z
STEP_NS = 2_000_000  # 2 ms between frames: identical frames closer than 1 ms are mirror copies


def ts(frame: int) -> int:
    """Default timestamp of 1-based frame number `frame` of a capture."""
    return BASE_NS + (frame - 1) * STEP_NS


# ---- ONC-RPC / NFSv3 bytes ----------------------------------------------------

NFS_PROG, NFS_VERS, NFS_PORT = 100003, 3, 2049
GETATTR, LOOKUP, ACCESS, WRITE = 1, 3, 4, 7
UID, GID, MACHINE = 1000, 100, "client"
LAST_FRAG = 0x80000000
CALL_HDR_LEN = 68  # 24 fixed + AUTH_SYS cred (8 + 28) + AUTH_NONE verf (8)
REPLY_HDR_LEN = 24  # xid, type, MSG_ACCEPTED, verf (8), accept_stat


def u32(*values: int) -> bytes:
    return struct.pack(f">{len(values)}I", *values)


def opaque(data: bytes) -> bytes:
    return u32(len(data)) + data + b"\0" * (-len(data) % 4)


def fhandle(seed: int) -> bytes:
    """A 32-byte file handle (as nfs_fh3 opaque); no zero bytes, so it never
    looks like an RPC header to a resynchronising parser."""
    return opaque(bytes((seed * 7 + i) % 250 + 3 for i in range(32)))


def rpc_call(
    xid: int, proc: int, args: bytes = b"", prog: int = NFS_PROG, vers: int = NFS_VERS
) -> bytes:
    """Call header (AUTH_SYS credential, AUTH_NONE verifier) followed by args."""
    cred = u32(0x5EED) + opaque(MACHINE.encode()) + u32(UID, GID) + u32(0)  # no aux gids
    return u32(xid, 0, 2, prog, vers, proc, 1, len(cred)) + cred + u32(0, 0) + args


def rpc_reply(xid: int, body: bytes = b"") -> bytes:
    """Accepted, SUCCESS reply with an AUTH_NONE verifier, followed by body."""
    return u32(xid, 1, 0, 0, 0, 0) + body


def getattr_call(xid: int) -> bytes:  # 68 + 36 = 104 bytes
    return rpc_call(xid, GETATTR, fhandle(xid))


def access_call(xid: int) -> bytes:  # 68 + 36 + 4 = 108 bytes
    return rpc_call(xid, ACCESS, fhandle(xid) + u32(0x1F))


def lookup_call(xid: int) -> bytes:  # 68 + 36 + 12 = 116 bytes
    return rpc_call(xid, LOOKUP, fhandle(xid) + opaque(b"file.txt"))


def write_call(xid: int, count: int) -> bytes:  # 68 + 56 + count (padded to 4)
    args = fhandle(xid) + struct.pack(">Q", 0) + u32(count, 2) + opaque(b"\x5a" * count)
    return rpc_call(xid, WRITE, args)


def _fattr3(seed: int) -> bytes:  # 84 bytes: a regular file, mode 0644
    return (
        u32(1, 0o644, 1, UID, GID)
        + struct.pack(">QQ", 4096, 4096)  # size, used
        + u32(0, 0)  # rdev
        + struct.pack(">QQ", 0x1122334455667788, 0x0102030400000000 + seed)  # fsid, fileid
        + u32(1_700_000_000, 5, 1_700_000_000, 6, 1_700_000_000, 7)  # atime, mtime, ctime
    )


def getattr_reply(xid: int) -> bytes:  # 24 + 4 + 84 = 112 bytes
    return rpc_reply(xid, u32(0) + _fattr3(xid))


def access_reply(xid: int) -> bytes:  # 24 + status, no post_op_attr, access = 36 bytes
    return rpc_reply(xid, u32(0, 0, 0x1F))


def lookup_reply(xid: int) -> bytes:  # 24 + status + fh (36) + 2 empty post_op_attr = 72
    return rpc_reply(xid, u32(0) + fhandle(xid + 1) + u32(0, 0))


def write_reply(xid: int, count: int) -> bytes:  # 24 + status, empty wcc, count, stable, verf = 52
    return rpc_reply(xid, u32(0, 0, 0, count, 2) + b"verf0001")


def record(msg: bytes, sizes: list[int] | None = None) -> bytes:
    """Record-marked message; `sizes` splits it into several fragments."""
    sizes = sizes or [len(msg)]
    assert sum(sizes) == len(msg)
    out, pos = b"", 0
    for i, n in enumerate(sizes):
        out += u32((LAST_FRAG if i == len(sizes) - 1 else 0) | n) + msg[pos : pos + n]
        pos += n
    return out


# Lengths the tests rely on (checked at import time).
assert len(getattr_call(0)) == 104 and len(access_call(0)) == 108
assert len(lookup_call(0)) == 116 and len(getattr_reply(0)) == 112
assert len(access_reply(0)) == 36 and len(lookup_reply(0)) == 72 and len(write_reply(0, 1)) == 52
assert len(write_call(0, 8)) == CALL_HDR_LEN + 56 + 8

# ---- link layers and packets ------------------------------------------------------

LINKTYPE_NULL, LINKTYPE_ETHERNET, LINKTYPE_RAW = 0, 1, 101
LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2 = 113, 276
MAC_C, MAC_S = "02:00:00:00:00:0c", "02:00:00:00:00:05"
CLIENT, SERVER = "10.0.0.1", "10.0.0.2"
CLIENT6, SERVER6 = "fd00::c", "fd00::5"

Link = Callable[[Packet], Packet | bytes]


def eth(ip: Packet) -> Packet:
    return Ether(src=MAC_C, dst=MAC_S) / ip


def eth_vlan(ip: Packet) -> Packet:
    return Ether(src=MAC_C, dst=MAC_S) / Dot1Q(vlan=10) / ip


def eth_qinq(ip: Packet) -> Packet:
    return Ether(src=MAC_C, dst=MAC_S, type=0x88A8) / Dot1AD(vlan=100) / Dot1Q(vlan=10) / ip


def sll(ip: Packet) -> Packet:
    return CookedLinux(pkttype=4, lladdrtype=1, lladdrlen=6, src=b"\x02\0\0\0\0\x0c") / ip


def sll2(ip: Packet) -> Packet:
    return (
        CookedLinuxV2(ifindex=2, lladdrtype=1, pkttype=4, lladdrlen=6, src=b"\x02\0\0\0\0\x0c") / ip
    )


def raw_ip(ip: Packet) -> bytes:
    return bytes(ip)


def bsd_null(ip: Packet) -> bytes:
    return struct.pack("<I", 2) + bytes(ip)  # AF_INET in (little-endian) host order


class Capture:
    """Frames of one capture file: (timestamp ns, captured bytes, wire length)."""

    def __init__(self, linktype: int = LINKTYPE_ETHERNET, snaplen: int = 65535) -> None:
        self.linktype = linktype
        self.snaplen = snaplen
        self.frames: list[tuple[int, bytes, int]] = []

    def add(self, pkt: Packet | bytes, ts_ns: int | None = None) -> int:
        """Append a frame (cut at the snaplen); returns its 1-based frame number."""
        data = bytes(pkt)
        n = len(self.frames) + 1
        self.frames.append((ts(n) if ts_ns is None else ts_ns, data[: self.snaplen], len(data)))
        return n

    def write(self, path: Path, endianness: str = "<", nano: bool = False) -> Path:
        w = RawPcapWriter(str(path), endianness=endianness, nano=nano, snaplen=self.snaplen)
        w.linktype = self.linktype  # set here: the constructor ignores a falsy 0 (NULL)
        w.write_header(None)
        for t, data, wire in self.frames:
            sec, frac = divmod(t, 1_000_000_000)
            if not nano:
                assert frac % 1000 == 0, "a microsecond pcap cannot hold this timestamp"
                frac //= 1000
            w.write_packet(data, sec=sec, usec=frac, caplen=len(data), wirelen=wire)
        w.close()
        return path


class TcpConn:
    """Both directions of one TCP connection; tracks sequence numbers."""

    def __init__(
        self,
        cap: Capture,
        cport: int,
        *,
        client: str = CLIENT,
        server: str = SERVER,
        sport: int = NFS_PORT,
        cisn: int = 1_000,
        sisn: int = 500_000,
        link: Link = eth,
    ) -> None:
        self.cap, self.cport, self.client, self.server, self.sport = (
            cap,
            cport,
            client,
            server,
            sport,
        )
        self.cisn, self.sisn, self.link = cisn, sisn, link
        self.c0, self.s0 = cisn + 1, sisn + 1  # first data byte in each direction
        self.cnext, self.snext = self.c0, self.s0

    def pkt(
        self, from_client: bool, flags: str, seq: int, ack: int, payload: bytes = b""
    ) -> Packet:
        if from_client:
            src, dst, sp, dp = self.client, self.server, self.cport, self.sport
        else:
            src, dst, sp, dp = self.server, self.client, self.sport, self.cport
        seg = TCP(sport=sp, dport=dp, seq=seq % 2**32, ack=ack % 2**32, flags=flags, window=65535)
        ip = IP(src=src, dst=dst) / seg
        return self.link(ip / Raw(payload) if payload else ip)

    def handshake(self, ack: bool = True) -> None:
        self.cap.add(self.pkt(True, "S", self.cisn, 0))
        self.cap.add(self.pkt(False, "SA", self.sisn, self.cisn + 1))
        if ack:
            self.cap.add(self.pkt(True, "A", self.cnext, self.snext))

    def send(
        self, from_client: bool, payload: bytes, seq: int | None = None, lost: bool = False
    ) -> int | None:
        """A data segment at `seq` (default: next in order); lost=True leaves it
        out of the capture.  Returns its frame number."""
        if seq is None:
            seq = self.cnext if from_client else self.snext
        end = seq + len(payload)
        if from_client:
            self.cnext = max(self.cnext, end)
        else:
            self.snext = max(self.snext, end)
        if lost:
            return None
        ack = self.snext if from_client else self.cnext
        return self.cap.add(self.pkt(from_client, "PA", seq, ack, payload))

    def client_send(self, payload: bytes, **kw) -> int | None:
        return self.send(True, payload, **kw)

    def server_send(self, payload: bytes, **kw) -> int | None:
        return self.send(False, payload, **kw)

    def close(self, flags: str = "FA") -> int:
        return self.cap.add(self.pkt(True, flags, self.cnext, self.snext))


def udp_pkt(src: str, dst: str, sport: int, dport: int, payload: bytes) -> Packet:
    return IP(src=src, dst=dst) / UDP(sport=sport, dport=dport) / Raw(payload)


def ipv4_fragments(
    src: str, dst: str, sport: int, dport: int, payload: bytes, ip_id: int, chunk: int = 1480
) -> list[Packet]:
    """A UDP datagram cut into IPv4 fragments of `chunk` payload bytes."""
    l4 = bytes(IP(src=src, dst=dst, id=ip_id) / UDP(sport=sport, dport=dport) / Raw(payload))[20:]
    out = []
    for off in range(0, len(l4), chunk):
        more = off + chunk < len(l4)
        hdr = IP(src=src, dst=dst, id=ip_id, proto=17, flags="MF" if more else 0, frag=off // 8)
        out.append(hdr / Raw(l4[off : off + chunk]))
    return out


def ipv6_fragments(
    src: str,
    dst: str,
    sport: int,
    dport: int,
    payload: bytes,
    ident: int,
    chunk: int = 1448,
    hop_by_hop: bool = False,
) -> list[Packet]:
    """A UDP datagram cut into IPv6 fragments (Fragment extension header),
    optionally with a Hop-by-Hop Options header before the Fragment header."""
    l4 = bytes(IPv6(src=src, dst=dst) / UDP(sport=sport, dport=dport) / Raw(payload))[40:]
    out = []
    for off in range(0, len(l4), chunk):
        more = off + chunk < len(l4)
        hdr = IPv6(src=src, dst=dst)
        if hop_by_hop:
            hdr = hdr / IPv6ExtHdrHopByHop()
        frag = IPv6ExtHdrFragment(nh=17, offset=off // 8, m=int(more), id=ident)
        out.append(hdr / frag / Raw(l4[off : off + chunk]))
    return out


# ---- pcapng by hand -----------------------------------------------------------


OPT_COMMENT, IF_NAME, IF_TSRESOL, ISB_IFRECV, ISB_IFDROP = 1, 2, 9, 4, 5


def _pad4(b: bytes) -> bytes:
    return b + b"\0" * (-len(b) % 4)


def _options(*opts: tuple[int, bytes]) -> bytes:
    if not opts:
        return b""
    body = b"".join(struct.pack("<HH", code, len(v)) + _pad4(v) for code, v in opts)
    return body + struct.pack("<HH", 0, 0)  # opt_endofopt


def _block(btype: int, body: bytes) -> bytes:
    total = 12 + len(body)
    return struct.pack("<II", btype, total) + body + struct.pack("<I", total)


def pcapng_shb() -> bytes:
    return _block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))


def pcapng_idb(linktype: int, snaplen: int, *opts: tuple[int, bytes]) -> bytes:
    return _block(1, struct.pack("<HHI", linktype, 0, snaplen) + _options(*opts))


def pcapng_epb(iface: int, ticks: int, data: bytes, *opts: tuple[int, bytes]) -> bytes:
    hdr = struct.pack("<IIIII", iface, ticks >> 32, ticks & 0xFFFFFFFF, len(data), len(data))
    return _block(6, hdr + _pad4(data) + _options(*opts))


def pcapng_isb(iface: int, ticks: int, *opts: tuple[int, bytes]) -> bytes:
    return _block(5, struct.pack("<III", iface, ticks >> 32, ticks & 0xFFFFFFFF) + _options(*opts))


# ---- the captures ----------------------------------------------------------------
# Each builder writes its file(s) into outdir and returns {name: path}.

SPLIT_XID0 = 0x10000
SPLIT_RECORD_LEN = 4 + 104


def build_split_every_byte(out: Path) -> dict[str, Path]:
    # A GETATTR record split across two TCP segments at every byte position
    # 1..107, one connection per split point: frames per connection are SYN,
    # SYN-ACK, segment 1 (record[:k]), segment 2 (record[k:]).
    cap = Capture()
    for k in range(1, SPLIT_RECORD_LEN):
        c = TcpConn(cap, cport=20000 + k, cisn=1_000 * k)
        c.handshake(ack=False)
        rec = record(getattr_call(SPLIT_XID0 + k))
        assert len(rec) == SPLIT_RECORD_LEN
        c.client_send(rec[:k])
        c.client_send(rec[k:])
    return {"split_every_byte": cap.write(out / "split_every_byte.pcap")}


def build_three_in_one(out: Path) -> dict[str, Path]:
    # Three call records in one TCP segment (frame 4) and their three replies
    # in one segment the other way (frame 5).
    cap = Capture()
    c = TcpConn(cap, cport=40100)
    c.handshake()
    c.client_send(
        record(getattr_call(0x301)) + record(access_call(0x302)) + record(lookup_call(0x303))
    )
    c.server_send(
        record(getattr_reply(0x301)) + record(access_reply(0x302)) + record(lookup_reply(0x303))
    )
    return {"three_in_one": cap.write(out / "three_in_one.pcap")}


def build_multi_fragment(out: Path) -> dict[str, Path]:
    # A WRITE call sent as one record of three fragments (last-fragment bit
    # clear on the first two; the first only 20 bytes, so the RPC header itself
    # spans fragments): all in one segment on connection 1 (frame 4, then a
    # GETATTR in frame 5), one fragment per segment on connection 2 (frames 9-11).
    cap = Capture()
    c1 = TcpConn(cap, cport=40201)
    c1.handshake()
    c1.client_send(record(write_call(0x401, 200), [20, 150, 154]))
    c1.client_send(record(getattr_call(0x402)))
    c2 = TcpConn(cap, cport=40202)
    c2.handshake()
    rec = record(write_call(0x403, 200), [100, 100, 124])
    c2.client_send(rec[:104])
    c2.client_send(rec[104:208])
    c2.client_send(rec[208:])
    return {"multi_fragment": cap.write(out / "multi_fragment.pcap")}


def _abc_stream(xid0: int) -> tuple[bytes, list[int]]:
    """GETATTR (108) + WRITE of 300 bytes (428) + GETATTR (108): one 644-byte stream."""
    recs = [
        record(getattr_call(xid0)),
        record(write_call(xid0 + 1, 300)),
        record(getattr_call(xid0 + 2)),
    ]
    return b"".join(recs), [len(r) for r in recs]


def build_out_of_order(out: Path) -> dict[str, Path]:
    # Segment 2 (bytes 200..644: end of the WRITE + a GETATTR) captured before
    # segment 1 (bytes 0..200: a GETATTR + start of the WRITE).
    cap = Capture()
    c = TcpConn(cap, cport=40300)
    c.handshake()
    stream, _ = _abc_stream(0x501)
    c.client_send(stream[200:], seq=c.c0 + 200)  # frame 4
    c.client_send(stream[:200], seq=c.c0)  # frame 5
    return {"out_of_order": cap.write(out / "out_of_order.pcap")}


def build_overlap(out: Path) -> dict[str, Path]:
    # Retransmissions: an exact duplicate of a segment (frame 6) and a segment
    # partly overlapping bytes already seen (frame 7: bytes 300..550, 100 old).
    cap = Capture()
    c = TcpConn(cap, cport=40400)
    c.handshake()
    stream, _ = _abc_stream(0x601)
    c.client_send(stream[0:150], seq=c.c0)  # frame 4
    c.client_send(stream[150:400], seq=c.c0 + 150)  # frame 5
    c.client_send(stream[150:400], seq=c.c0 + 150)  # frame 6: exact duplicate
    c.client_send(stream[300:550], seq=c.c0 + 300)  # frame 7: partial overlap
    c.client_send(stream[550:], seq=c.c0 + 550)  # frame 8
    return {"overlap": cap.write(out / "overlap.pcap")}


LOST_WRITE_COUNT = 8192
LOST_WRITE_LEN = CALL_HDR_LEN + 56 + LOST_WRITE_COUNT  # 8316 (record: 8320)
MSS = 1448


def _lost_write_conn(cap: Capture, cport: int, xid: int, fin: bool) -> None:
    c = TcpConn(cap, cport=cport)
    c.handshake()
    rec = record(write_call(xid, LOST_WRITE_COUNT))
    for i, off in enumerate(range(0, len(rec), MSS)):
        c.client_send(rec[off : off + MSS], lost=(i == 2))
    c.client_send(record(getattr_call(xid + 1)))
    c.server_send(record(write_reply(xid, LOST_WRITE_COUNT)))
    c.server_send(record(getattr_reply(xid + 1)))
    if fin:
        c.close()


def build_lost_write_segment(out: Path) -> dict[str, Path]:
    # A segment lost (not captured) inside the body of a large WRITE.  Each
    # connection: handshake, WRITE segments W1..W6 with W3 missing, a GETATTR,
    # then the server's two replies, whose ACKs cover the lost bytes (the
    # capture, not the network, lost them).
    # Connection 1 (frames 1-12): W 4,5,-,6,7,8; GETATTR 9; replies 10, 11;
    # client FIN 12.  Connection 2 (frames 13-23): W 16,17,-,18,19,20;
    # GETATTR 21; replies 22, 23; the capture ends with its hole still open.
    cap = Capture()
    _lost_write_conn(cap, 40500, 0x701, fin=True)
    _lost_write_conn(cap, 40501, 0x711, fin=False)
    return {"lost_write_segment": cap.write(out / "lost_write_segment.pcap")}


def build_lost_record_mark(out: Path) -> dict[str, Path]:
    # A lost segment holding the record mark (and header) of a WRITE: GETATTR A
    # (frame 4), [WRITE B bytes 0..200 lost], rest of B + GETATTR C (frame 5),
    # GETATTR D (frame 6), client FIN (frame 7).  Framing is lost at the hole
    # and regained by resynchronising on C.
    cap = Capture()
    c = TcpConn(cap, cport=40600)
    c.handshake()
    b = record(write_call(0x802, 300))
    c.client_send(record(getattr_call(0x801)))
    c.client_send(b[:200], lost=True)
    c.client_send(b[200:] + record(getattr_call(0x803)))
    c.client_send(record(getattr_call(0x804)))
    c.close()
    return {"lost_record_mark": cap.write(out / "lost_record_mark.pcap")}


MIDSTREAM_CLIENT_SKIP = 37
MIDSTREAM_SERVER_SKIP = 29


def build_midstream(out: Path) -> dict[str, Path]:
    # Capture starts mid-connection (no SYN): the first client segment begins
    # with the last 37 bytes of an earlier record, then GETATTR Y (frame 1);
    # GETATTR Z (frame 2); the first server segment begins with 29 bytes of an
    # earlier reply, then reply Y (frame 3); reply Z (frame 4).
    cap = Capture()
    c = TcpConn(cap, cport=40700, cisn=7_000_000, sisn=9_000_000)
    c.client_send(b"\xab" * MIDSTREAM_CLIENT_SKIP + record(getattr_call(0x901)))
    c.client_send(record(getattr_call(0x902)))
    c.server_send(b"\xcd" * MIDSTREAM_SERVER_SKIP + record(getattr_reply(0x901)))
    c.server_send(record(getattr_reply(0x902)))
    return {"midstream": cap.write(out / "midstream.pcap")}


SNAP_WRITE_COUNT = 32 * 1024
SNAP_WRITE_LEN = CALL_HDR_LEN + 56 + SNAP_WRITE_COUNT  # 32892 (record: 32896)
SNAPLEN = 200


def build_snaplen(out: Path) -> dict[str, Path]:
    # Every frame cut at 200 bytes (-s 200): a 32 KiB WRITE in 23 segments of
    # at most 1448 bytes (frames 4..26, 146 payload bytes captured of each),
    # then a GETATTR (frame 27, short enough to be captured whole).
    cap = Capture(snaplen=SNAPLEN)
    c = TcpConn(cap, cport=40800)
    c.handshake()
    rec = record(write_call(0xA01, SNAP_WRITE_COUNT))
    for off in range(0, len(rec), MSS):
        c.client_send(rec[off : off + MSS])
    c.client_send(record(getattr_call(0xA02)))
    return {"snaplen": cap.write(out / "snaplen.pcap")}


# -s 96 (and -s 128) over WRITEs sent back to back: 42 (74) payload bytes of
# each 1448-byte segment captured, so the record marks of the WRITEs after the
# first of each burst fall in the cut part of a segment.
CUT_SNAPLENS = (96, 128)
CUT_WRITE = 8192  # record 4 + 68 + 56 + 8192 = 8320 bytes
CUT_WRITE_SHORT = 4096  # record 4224 bytes


def build_snaplen_unframed(out: Path) -> dict[str, Path]:
    """Record marks cut off by the snaplen (tcp.py's unframed stretches).

    Burst 1: WRITEs 0xB01..0xB04 of 8 KiB back to back (only the first one's
    mark captured: records 2-4 an rpc_unframed stretch of 3 records as long
    as the first), closed by GETATTR 0xB05 at a segment start.  The replies:
    0xB01 alone, 0xB02 and 0xB03 in one segment (0xB03's mark cut: a stretch
    of one reply record), 0xB04 alone, then 0xB05's.  Burst 2: WRITE 0xB06
    (8 KiB, framed) then 0xB07 (4 KiB: a stretch not a whole number of 8 KiB
    records), closed by GETATTR 0xB08; each reply alone."""
    paths = {}
    for snaplen in CUT_SNAPLENS:
        cap = Capture(snaplen=snaplen)
        c = TcpConn(cap, cport=40900)
        c.handshake()

        def burst(*msgs: bytes, c: TcpConn = c) -> None:
            data = b"".join(record(m) for m in msgs)
            for off in range(0, len(data), MSS):
                c.client_send(data[off : off + MSS])

        burst(*(write_call(x, CUT_WRITE) for x in range(0xB01, 0xB05)))
        burst(getattr_call(0xB05))
        c.server_send(record(write_reply(0xB01, CUT_WRITE)))
        c.server_send(record(write_reply(0xB02, CUT_WRITE)) + record(write_reply(0xB03, CUT_WRITE)))
        c.server_send(record(write_reply(0xB04, CUT_WRITE)))
        c.server_send(record(getattr_reply(0xB05)))
        burst(write_call(0xB06, CUT_WRITE), write_call(0xB07, CUT_WRITE_SHORT))
        burst(getattr_call(0xB08))
        c.server_send(record(write_reply(0xB06, CUT_WRITE)))
        c.server_send(record(write_reply(0xB07, CUT_WRITE_SHORT)))
        c.server_send(record(getattr_reply(0xB08)))
        c.close()
        paths[f"snaplen_unframed_{snaplen}"] = cap.write(out / f"snaplen_unframed_{snaplen}.pcap")
    return paths


UDP_WRITE_COUNT = 3000
UDP_WRITE_LEN = CALL_HDR_LEN + 56 + UDP_WRITE_COUNT  # 3124


def build_udp_fragments(out: Path) -> dict[str, Path]:
    caps = {}
    # IPv4 UDP WRITE call in 3 IP fragments (frames 1-3), then its reply (frame 4).
    cap = Capture()
    for f in ipv4_fragments(
        CLIENT, SERVER, 801, NFS_PORT, write_call(0xB01, UDP_WRITE_COUNT), 0x1234
    ):
        cap.add(eth(f))
    cap.add(eth(udp_pkt(SERVER, CLIENT, NFS_PORT, 801, write_reply(0xB01, UDP_WRITE_COUNT))))
    caps["udp_frag_v4"] = cap.write(out / "udp_frag_v4.pcap")
    # The same call with its middle fragment missing: never reassembled, no message.
    cap = Capture()
    frags = ipv4_fragments(
        CLIENT, SERVER, 801, NFS_PORT, write_call(0xB02, UDP_WRITE_COUNT), 0x1235
    )
    cap.add(eth(frags[0]))
    cap.add(eth(frags[2]))
    caps["udp_frag_v4_missing"] = cap.write(out / "udp_frag_v4_missing.pcap")
    # IPv6 UDP WRITE call in 3 fragments (Fragment header), captured last
    # fragment first (frames 1-3: offsets 2896, 1448, 0), then its reply.
    cap = Capture()
    frags = ipv6_fragments(
        CLIENT6, SERVER6, 802, NFS_PORT, write_call(0xB03, UDP_WRITE_COUNT), 0xCAFE
    )
    for f in reversed(frags):
        cap.add(Ether(src=MAC_C, dst=MAC_S) / f)
    reply = (
        IPv6(src=SERVER6, dst=CLIENT6)
        / UDP(sport=NFS_PORT, dport=802)
        / Raw(write_reply(0xB03, UDP_WRITE_COUNT))
    )
    cap.add(Ether(src=MAC_S, dst=MAC_C) / reply)
    caps["udp_frag_v6"] = cap.write(out / "udp_frag_v6.pcap")
    # IPv6 fragments carrying a Hop-by-Hop Options header before the Fragment
    # header (frames 1-3, in order).
    cap = Capture()
    frags = ipv6_fragments(
        CLIENT6, SERVER6, 803, NFS_PORT, write_call(0xB04, UDP_WRITE_COUNT), 0xBEEF, hop_by_hop=True
    )
    for f in frags:
        cap.add(Ether(src=MAC_C, dst=MAC_S) / f)
    caps["udp_frag_v6_hbh"] = cap.write(out / "udp_frag_v6_hbh.pcap")
    return caps


LINK_CASES: dict[str, tuple[int, Link]] = {
    "link_vlan": (LINKTYPE_ETHERNET, eth_vlan),  # Ethernet + 802.1Q tag
    "link_qinq": (LINKTYPE_ETHERNET, eth_qinq),  # Ethernet + 802.1ad 0x88a8 + 802.1Q 0x8100
    "link_sll": (LINKTYPE_LINUX_SLL, sll),  # Linux cooked capture v1 (113)
    "link_sll2": (LINKTYPE_LINUX_SLL2, sll2),  # Linux cooked capture v2 (276)
    "link_raw": (LINKTYPE_RAW, raw_ip),  # raw IPv4 (101)
    "link_null": (LINKTYPE_NULL, bsd_null),  # BSD loopback, AF_INET host order (0)
}


def build_links(out: Path) -> dict[str, Path]:
    # For each link type: a UDP GETATTR call (frame 1) and its reply (frame 2);
    # Ethernet captures also carry an ARP frame (frame 3, not IP).
    caps = {}
    for i, (name, (linktype, link)) in enumerate(LINK_CASES.items()):
        cap = Capture(linktype=linktype)
        xid = 0xC01 + i
        cap.add(link(udp_pkt(CLIENT, SERVER, 700 + i, NFS_PORT, getattr_call(xid))))
        cap.add(link(udp_pkt(SERVER, CLIENT, NFS_PORT, 700 + i, getattr_reply(xid))))
        if linktype == LINKTYPE_ETHERNET:
            cap.add(Ether(src=MAC_C, dst="ff:ff:ff:ff:ff:ff") / ARP(psrc=CLIENT, pdst=SERVER))
        caps[name] = cap.write(out / f"{name}.pcap")
    return caps


NANO_OFFSET_NS = 123_456_789
NANO_STEP_NS = 1_001


def _simple_tcp(cap: Capture, ts_of: Callable[[int], int] | None = None) -> Capture:
    """Handshake, GETATTR call (frame 4), reply (frame 5)."""
    c = TcpConn(cap, cport=40900)
    c.handshake()
    c.client_send(record(getattr_call(0xD01)))
    c.server_send(record(getattr_reply(0xD01)))
    if ts_of is not None:
        cap.frames = [(ts_of(i + 1), d, w) for i, (_t, d, w) in enumerate(cap.frames)]
    return cap


def build_pcap_variants(out: Path) -> dict[str, Path]:
    caps = {}
    # The reference: little-endian, microsecond pcap.
    base = _simple_tcp(Capture())
    caps["pcap_le"] = base.write(out / "pcap_le.pcap")
    # The same frames in a big-endian pcap.
    caps["pcap_be"] = base.write(out / "pcap_be.pcap", endianness=">")
    # Nanosecond pcap (magic a1b23c4d) with timestamps that are not whole µs.
    nano = _simple_tcp(Capture(), lambda n: BASE_NS + NANO_OFFSET_NS + (n - 1) * NANO_STEP_NS)
    caps["pcap_nano"] = nano.write(out / "pcap_nano.pcap", nano=True)
    # The reference compressed with gzip, bzip2 and xz.
    data = caps["pcap_le"].read_bytes()
    for name, packed in (
        ("pcap_gz", gzip.compress(data, mtime=0)),
        ("pcap_bz2", bz2.compress(data)),
        ("pcap_xz", lzma.compress(data)),
    ):
        path = out / f"{name}.pcap.{name[5:]}"
        path.write_bytes(packed)
        caps[name] = path
    return caps


PCAPNG_TS = (
    BASE_NS,  # EPB 1, interface 0 (Ethernet, µs): call 0xE01
    BASE_NS + 1_234,  # EPB 2, interface 1 (raw IPv4, ns): call 0xE02
    BASE_NS + 3_000,  # EPB 3, interface 0: reply 0xE01
    BASE_NS + 4_567,  # EPB 4, interface 1: reply 0xE02
)
PCAPNG_CLIENT2, PCAPNG_SERVER2 = "10.0.1.1", "10.0.1.2"


def build_pcapng(out: Path) -> dict[str, Path]:
    # pcapng with two interfaces of different link types: 0 Ethernet (default
    # µs resolution), 1 raw IPv4 with if_tsresol=9 (ns); an EPB with an option;
    # interface statistics blocks: isb_ifdrop 2 then 7 (cumulative) for
    # interface 0, 0 for interface 1 -> 7 drops in all.
    us = [t // 1000 for t in PCAPNG_TS]
    call1 = bytes(eth(udp_pkt(CLIENT, SERVER, 901, NFS_PORT, getattr_call(0xE01))))
    reply1 = bytes(eth(udp_pkt(SERVER, CLIENT, NFS_PORT, 901, getattr_reply(0xE01))))
    call2 = bytes(udp_pkt(PCAPNG_CLIENT2, PCAPNG_SERVER2, 902, NFS_PORT, access_call(0xE02)))
    reply2 = bytes(udp_pkt(PCAPNG_SERVER2, PCAPNG_CLIENT2, NFS_PORT, 902, access_reply(0xE02)))
    blob = b"".join(
        [
            pcapng_shb(),
            pcapng_idb(LINKTYPE_ETHERNET, 262144, (IF_NAME, b"eth0")),
            pcapng_idb(LINKTYPE_RAW, 65535, (IF_NAME, b"raw0"), (IF_TSRESOL, bytes([9]))),
            pcapng_epb(0, us[0], call1, (OPT_COMMENT, b"first packet")),
            pcapng_isb(0, us[0], (ISB_IFDROP, struct.pack("<Q", 2))),
            pcapng_epb(1, PCAPNG_TS[1], call2),
            pcapng_epb(0, us[2], reply1),
            pcapng_epb(1, PCAPNG_TS[3], reply2),
            pcapng_isb(
                0, us[3], (ISB_IFRECV, struct.pack("<Q", 40)), (ISB_IFDROP, struct.pack("<Q", 7))
            ),
            pcapng_isb(1, PCAPNG_TS[3], (ISB_IFDROP, struct.pack("<Q", 0))),
        ]
    )
    path = out / "two_ifaces.pcapng"
    path.write_bytes(blob)
    return {"pcapng": path}


MERGE_A_US = (0, 20, 40)  # calls, file A
MERGE_B_US = (10, 30, 50)  # replies, file B


def build_merge(out: Path) -> dict[str, Path]:
    # Two files whose packets interleave in time: A holds three UDP calls
    # (t = 0, 20, 40 µs), B their replies (t = 10, 30, 50 µs).
    a, b = Capture(), Capture()
    for i, (ta, tb) in enumerate(zip(MERGE_A_US, MERGE_B_US, strict=True)):
        xid = 0xF01 + i
        call, reply = (
            (getattr_call, getattr_reply),
            (access_call, access_reply),
            (lookup_call, lookup_reply),
        )[i]
        a.add(eth(udp_pkt(CLIENT, SERVER, 950, NFS_PORT, call(xid))), BASE_NS + ta * 1000)
        b.add(eth(udp_pkt(SERVER, CLIENT, NFS_PORT, 950, reply(xid))), BASE_NS + tb * 1000)
    return {"merge_a": a.write(out / "merge_a.pcap"), "merge_b": b.write(out / "merge_b.pcap")}


def build_retrans_new_conn(out: Path) -> dict[str, Path]:
    # A call (frame 4) whose connection is reset (frame 5), retransmitted with
    # the same xid on a new connection from a new client port (frame 9), and
    # answered there (frame 10).
    cap = Capture()
    c1 = TcpConn(cap, cport=41001)
    c1.handshake()
    c1.client_send(record(lookup_call(0x1101)))
    c1.close("RA")
    c2 = TcpConn(cap, cport=41002, cisn=3_000, sisn=800_000)
    c2.handshake()
    c2.client_send(record(lookup_call(0x1101)))
    c2.server_send(record(lookup_reply(0x1101)))
    return {"retrans_new_conn": cap.write(out / "retrans_new_conn.pcap")}


def build_dup_reply(out: Path) -> dict[str, Path]:
    # UDP: GETATTR xid X (frame 1), its reply (2), the same reply again (3);
    # then xid X reused for an ACCESS call (4) and its reply (5).
    cap = Capture()
    x = 0x1201
    cap.add(eth(udp_pkt(CLIENT, SERVER, 960, NFS_PORT, getattr_call(x))))
    for _ in range(2):
        cap.add(eth(udp_pkt(SERVER, CLIENT, NFS_PORT, 960, getattr_reply(x))))
    cap.add(eth(udp_pkt(CLIENT, SERVER, 960, NFS_PORT, access_call(x))))
    cap.add(eth(udp_pkt(SERVER, CLIENT, NFS_PORT, 960, access_reply(x))))
    return {"dup_reply": cap.write(out / "dup_reply.pcap")}


def build_reply_call_info(out: Path) -> dict[str, Path]:
    # A LOOKUP call and reply on a connection seen from its SYN (frames 4, 5);
    # a reply on another connection seen mid-stream, its call never captured
    # (frame 6, starting at a record boundary).
    cap = Capture()
    c1 = TcpConn(cap, cport=41201)
    c1.handshake()
    c1.client_send(record(lookup_call(0x1301)))
    c1.server_send(record(lookup_reply(0x1301)))
    c2 = TcpConn(cap, cport=41202, cisn=5_000_000, sisn=6_000_000)
    c2.server_send(record(getattr_reply(0x1302)))
    return {"reply_call_info": cap.write(out / "reply_call_info.pcap")}


def build_seq_wrap(out: Path) -> dict[str, Path]:
    # A record split across the 2**32 sequence-number wrap (frames 3, 4), then
    # a GETATTR entirely past it (frame 5).
    cap = Capture()
    c = TcpConn(cap, cport=41300, cisn=2**32 - 51)  # first data byte at 2**32 - 50
    c.handshake(ack=False)
    rec = record(getattr_call(0x1401))
    c.client_send(rec[:50])
    c.client_send(rec[50:])
    c.client_send(record(getattr_call(0x1402)))
    return {"seq_wrap": cap.write(out / "seq_wrap.pcap")}


BUILDERS = (
    build_split_every_byte,
    build_three_in_one,
    build_multi_fragment,
    build_out_of_order,
    build_overlap,
    build_lost_write_segment,
    build_lost_record_mark,
    build_midstream,
    build_snaplen,
    build_snaplen_unframed,
    build_udp_fragments,
    build_links,
    build_pcap_variants,
    build_pcapng,
    build_merge,
    build_retrans_new_conn,
    build_dup_reply,
    build_reply_call_info,
    build_seq_wrap,
)


def run_builders(
    builders: Iterable[Callable[[Path], dict[str, Path]]], outdir: str | os.PathLike[str]
) -> dict[str, Path]:
    """Run each builder into outdir (made if needed); returns {name: path}, every
    name once.  (Every make_*.py script's build_all.)"""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for build in builders:
        made = build(out)
        assert not made.keys() & paths.keys()
        paths.update(made)
    return paths


def script(build_all: Callable[[str], dict[str, Path]], script_path: str) -> None:
    """A make_*.py script run as a program: ``python SCRIPT OUTDIR``."""
    if len(sys.argv) != 2:
        sys.exit(f"usage: python tests/crafted/{Path(script_path).name} OUTDIR")
    for name, path in build_all(sys.argv[1]).items():
        print(f"{name}\t{path}")


def build_all(outdir: str | os.PathLike[str]) -> dict[str, Path]:
    """Write every crafted capture into outdir; returns {name: path}."""
    return run_builders(BUILDERS, outdir)


if __name__ == "__main__":
    script(build_all, __file__)
