"""Damaged captures for the robustness tests (tests/test_robustness.py): a
healthy exchange, then the damage done to it at a known place, so each test
can name what must still be found.

    python tests/crafted/make_damaged.py OUTDIR

Every builder returns bytes (a whole capture file); ``exchange()`` gives the
healthy frames they start from: a TCP connection (frames 1-3 the handshake)
carrying N GETATTR calls, each answered at once: call i in frame 4 + 2i, its
reply in frame 5 + 2i (xid XID0 + i).
"""

from __future__ import annotations

import gzip
import struct
import sys
from pathlib import Path

from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

try:
    from crafted import make_crafted as mc
except ImportError:  # tests/ not on sys.path: import as a package
    from tests.crafted import make_crafted as mc

XID0 = 0x5000
N = 12  # exchanges in the healthy capture
CPORT = 42000
NFS4_PROG = 100003


def call_frame(i: int) -> int:
    return 4 + 2 * i


def reply_frame(i: int) -> int:
    return 5 + 2 * i


def exchange(n: int = N, xid0: int = XID0, cport: int = CPORT) -> mc.Capture:
    cap = mc.Capture()
    conn = mc.TcpConn(cap, cport=cport)
    conn.handshake()
    for i in range(n):
        conn.client_send(mc.record(mc.getattr_call(xid0 + i)))
        conn.server_send(mc.record(mc.getattr_reply(xid0 + i)))
    return cap


def pcap_bytes(cap: mc.Capture, endianness: str = "<") -> bytes:
    """The capture as a microsecond pcap file, written by hand (record offsets known)."""
    e = endianness
    out = [struct.pack(e + "IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, cap.snaplen, cap.linktype)]
    for t, data, wire in cap.frames:
        sec, ns = divmod(t, 1_000_000_000)
        out.append(struct.pack(e + "IIII", sec, ns // 1000, len(data), wire) + data)
    return b"".join(out)


def record_offsets(blob: bytes, endianness: str = "<") -> list[int]:
    """File offsets of the record headers of a pcap (frame n at index n - 1)."""
    pos, offs = 24, []
    while pos + 16 <= len(blob):
        offs.append(pos)
        pos += 16 + struct.unpack_from(endianness + "I", blob, pos + 8)[0]
    return offs


def pcapng_bytes(cap: mc.Capture) -> bytes:
    """The capture as pcapng: one section, one Ethernet interface (µs), EPBs."""
    blocks = [mc.pcapng_shb(), mc.pcapng_idb(cap.linktype, cap.snaplen)]
    blocks += [mc.pcapng_epb(0, t // 1000, data) for t, data, _wire in cap.frames]
    return b"".join(blocks)


def block_offsets(blob: bytes) -> list[int]:
    """File offsets of the pcapng blocks (SHB, IDB, then EPB of frame n at n + 1)."""
    pos, offs = 0, []
    while pos + 12 <= len(blob):
        offs.append(pos)
        pos += struct.unpack_from("<I", blob, pos + 4)[0]
    return offs


def set_u32(blob: bytes, offset: int, value: int, e: str = "<") -> bytes:
    b = bytearray(blob)
    struct.pack_into(e + "I", b, offset, value)
    return bytes(b)


# ---- packets with lengths that lie ---------------------------------------------------


def frame_with(cap: mc.Capture, n: int, data: bytes) -> None:
    """Replace frame n's bytes (wire length follows)."""
    t, _old, _wire = cap.frames[n - 1]
    cap.frames[n - 1] = (t, data, len(data))


def ip_len_lie(n: int = N, frame: int = call_frame(3)) -> mc.Capture:
    """Frame `frame` (call 3) claims an IP total length of 65,000 bytes."""
    cap = exchange(n)
    b = bytearray(cap.frames[frame - 1][1])
    struct.pack_into(">H", b, 14 + 2, 65000)
    frame_with(cap, frame, bytes(b))  # checksum left wrong: nobody checks it
    return cap


def tcp_hl_lie(n: int = N, frames: tuple[int, int] = (call_frame(3), call_frame(6))) -> mc.Capture:
    """Call 3's segment has a data offset of 2 words (8 bytes, below the 20 of a
    header); call 6's a data offset of 15 words (60 bytes) on a 20-byte header
    with a payload of 4 bytes... the rest of the segment taken for options."""
    cap = exchange(n)
    low, high = frames
    b = bytearray(cap.frames[low - 1][1])
    b[14 + 20 + 12] = (2 << 4) | (b[14 + 20 + 12] & 0x0F)
    frame_with(cap, low, bytes(b))
    # a header length past the whole packet: data offset 15 on a packet cut to 50 bytes of TCP
    b = bytearray(cap.frames[high - 1][1])
    b[14 + 20 + 12] = (15 << 4) | (b[14 + 20 + 12] & 0x0F)
    b = b[: 14 + 20 + 50]
    struct.pack_into(">H", b, 14 + 2, 20 + 50)
    frame_with(cap, high, bytes(b))
    return cap


# ---- RPC with absurd counts -------------------------------------------------------------


def rpc_stream(middle: bytes, n_before: int = 3, n_after: int = 3) -> mc.Capture:
    """GETATTR calls XID0.. (n_before, answered), then `middle` sent by the
    client (its own segment), then n_after more answered GETATTRs."""
    cap = mc.Capture()
    conn = mc.TcpConn(cap, cport=CPORT + 1)
    conn.handshake()
    for i in range(n_before):
        conn.client_send(mc.record(mc.getattr_call(XID0 + i)))
        conn.server_send(mc.record(mc.getattr_reply(XID0 + i)))
    conn.client_send(middle)
    for i in range(n_before, n_before + n_after):
        conn.client_send(mc.record(mc.getattr_call(XID0 + 100 + i)))
        conn.server_send(mc.record(mc.getattr_reply(XID0 + 100 + i)))
    return cap


def huge_record_mark() -> mc.Capture:
    """A record mark of 2 GB (last fragment, length 0x7ffffff0) followed by 200
    bytes that are no RPC, between healthy calls."""
    return rpc_stream(mc.u32(0xFFFFFFF0) + bytes(range(200)))


def opaque_past_end() -> mc.Capture:
    """A LOOKUP whose file name claims 0xfffffff0 bytes (the record is 120 bytes)."""
    call = mc.rpc_call(XID0 + 50, mc.LOOKUP, mc.fhandle(1) + mc.u32(0xFFFFFFF0) + b"name")
    return rpc_stream(mc.record(call))


def many_credentials() -> mc.Capture:
    """An AUTH_SYS credential with 10,000 gids (40,028 bytes: RFC 5531 allows 400),
    then a call whose machine name claims 0xffffff00 bytes."""
    gids = mc.u32(10_000) + b"".join(mc.u32(g) for g in range(10_000))
    cred = mc.u32(0x5EED) + mc.opaque(b"client") + mc.u32(1000, 100) + gids
    header = mc.u32(XID0 + 60, 0, 2, mc.NFS_PROG, 3, mc.GETATTR, 1, len(cred))
    big = header + cred + mc.u32(0, 0) + mc.fhandle(2)
    machine = mc.u32(0x5EED) + mc.u32(0xFFFFFF00) + b"host" + mc.u32(1000, 100, 0)
    header = mc.u32(XID0 + 61, 0, 2, mc.NFS_PROG, 3, mc.GETATTR, 1, len(machine))
    lying = header + machine + mc.u32(0, 0) + mc.fhandle(3)
    return rpc_stream(mc.record(big) + mc.record(lying))


def huge_op_count() -> mc.Capture:
    """An NFSv4.1 COMPOUND claiming 0xffffffff operations, carrying two (PUTROOTFH,
    GETFH): a decoder must stop at the end of the bytes."""
    args = mc.opaque(b"tag") + mc.u32(1, 0xFFFFFFFF) + mc.u32(24) + mc.u32(10)
    call = mc.rpc_call(XID0 + 70, 1, args, vers=4)
    return rpc_stream(mc.record(call))


# ---- TCP sequence jumps ------------------------------------------------------------------


def seq_jumps() -> mc.Capture:
    """Calls 0-2 in order; the client's sequence numbers then jump 2**31 ahead
    (calls 3-5 sent from there), then 2**30 + 12345 back from that (calls 6-8);
    each call answered."""
    cap = mc.Capture()
    conn = mc.TcpConn(cap, cport=CPORT + 2)
    conn.handshake()
    for i in range(9):
        if i == 3:
            conn.cnext += 1 << 31
        elif i == 6:
            conn.cnext -= (1 << 30) + 12345
        conn.client_send(mc.record(mc.getattr_call(XID0 + i)))
        conn.server_send(mc.record(mc.getattr_reply(XID0 + i)))
    return cap


def one_wild_segment() -> mc.Capture:
    """Calls 0-7 in order, but call 3's segment carries a sequence number with
    bit 29 flipped (2**29 ahead): that call is lost, the others are not."""
    cap = exchange(8)
    frame = call_frame(3)
    b = bytearray(cap.frames[frame - 1][1])
    seq = struct.unpack_from(">I", b, 14 + 20 + 4)[0]
    struct.pack_into(">I", b, 14 + 20 + 4, seq ^ (1 << 29))
    frame_with(cap, frame, bytes(b))
    return cap


# ---- many flows ---------------------------------------------------------------------------


def many_flows(n: int) -> mc.Capture:
    """n TCP connections from n client addresses, each: handshake, one GETATTR
    call, its reply, and an early segment held for a hole that never fills."""
    cap = mc.Capture()
    for i in range(n):
        client = f"10.{1 + i // 65536}.{(i // 256) % 256}.{i % 256}"
        conn = mc.TcpConn(cap, cport=1000 + i % 50000, client=client)
        conn.handshake()
        conn.client_send(mc.record(mc.getattr_call(XID0 + i)))
        conn.server_send(mc.record(mc.getattr_reply(XID0 + i)))
        conn.client_send(b"\x01" * 300, seq=conn.cnext + 1000)  # early: a hole before it
    return cap


def many_fragments(n: int) -> mc.Capture:
    """n UDP datagrams of which only the first fragment was captured (never whole)."""
    cap = mc.Capture()
    for i in range(n):
        frags = mc.ipv4_fragments(
            mc.CLIENT, mc.SERVER, 800, mc.NFS_PORT, mc.write_call(XID0 + i, 3000), i
        )
        cap.add(mc.eth(frags[0]))
    return cap


def repeated_fragment(n: int) -> mc.Capture:
    """The same first fragment of one datagram captured n times (2 ms apart)."""
    cap = mc.Capture()
    frag = mc.ipv4_fragments(mc.CLIENT, mc.SERVER, 800, mc.NFS_PORT, mc.write_call(XID0, 3000), 7)
    for _ in range(n):
        cap.add(mc.eth(frag[0]))
    return cap


T_CLOCK = 1_700_000_000_000_000_000  # ns


def reply_before_call(transport: str = "udp", back_ns: int = 1_000) -> mc.Capture:
    """A WRITE call, then its reply stamped ``back_ns`` before it (a clock step)."""
    cap = mc.Capture()
    call, reply = mc.write_call(XID0, 4096), mc.write_reply(XID0, 4096)
    if transport == "udp":
        port = mc.NFS_PORT
        cap.add(mc.eth(mc.udp_pkt(mc.CLIENT, mc.SERVER, 800, port, call)), T_CLOCK)
        cap.add(mc.eth(mc.udp_pkt(mc.SERVER, mc.CLIENT, port, 800, reply)), T_CLOCK - back_ns)
        return cap
    conn = mc.TcpConn(cap, cport=CPORT)
    conn.handshake()
    conn.client_send(mc.record(call))
    conn.server_send(mc.record(reply))
    # restamp: the reply (the last frame) before the call (the one before it)
    t_call = cap.frames[-2][0]
    cap.frames[-1] = (t_call - back_ns, *cap.frames[-1][1:])
    return cap


def clock_running_backwards(n: int = 50, step_ns: int = 1_000_000) -> mc.Capture:
    """n WRITEs over UDP, each frame stamped ``step_ns`` before the previous one."""
    cap = mc.Capture()
    for i in range(n):
        call, reply = mc.write_call(XID0 + i, 4096), mc.write_reply(XID0 + i, 4096)
        t = T_CLOCK - 2 * i * step_ns
        cap.add(mc.eth(mc.udp_pkt(mc.CLIENT, mc.SERVER, 800, mc.NFS_PORT, call)), t)
        cap.add(mc.eth(mc.udp_pkt(mc.SERVER, mc.CLIENT, mc.NFS_PORT, 800, reply)), t - step_ns)
    return cap


def zero_windows(n: int) -> mc.Capture:
    """n TCP connections between one client and one server, one after another:
    the server acknowledges a GETATTR call closing its window for good (a zero
    window that never reopens: each says so again at the end of the capture),
    then answers it."""
    cap = mc.Capture()
    conns = []
    for i in range(n):
        conn = mc.TcpConn(cap, cport=1000 + i % 60000)
        conn.handshake()
        conn.client_send(mc.record(mc.getattr_call(XID0 + i)))
        closed = conn.pkt(False, "A", conn.snext, conn.cnext)
        closed[TCP].window = 0
        cap.add(closed)
        reply = mc.record(mc.getattr_reply(XID0 + i))
        answer = conn.pkt(False, "PA", conn.snext, conn.cnext, reply)
        answer[TCP].window = 0  # the window stays closed
        cap.add(answer)
        conn.snext += len(reply)
        conns.append(conn)
    for conn in conns:  # still closed at the end
        closed = conn.pkt(False, "A", conn.snext, conn.cnext)
        closed[TCP].window = 0
        cap.add(closed)
    return cap


def outstanding_calls(n: int, answered: int) -> mc.Capture:
    """n WRITE calls over UDP, none answered, then the replies to the first
    ``answered`` of them."""
    cap = mc.Capture()
    port = mc.NFS_PORT
    for i in range(n):
        call = mc.write_call(XID0 + i, 512)
        cap.add(mc.eth(mc.udp_pkt(mc.CLIENT, mc.SERVER, 800, port, call)))
    for i in range(answered):
        reply = mc.write_reply(XID0 + i, 512)
        cap.add(mc.eth(mc.udp_pkt(mc.SERVER, mc.CLIENT, port, 800, reply)))
    return cap


def raw_tcp(src: str, dst: str, sport: int, dport: int, seq: int, payload: bytes) -> bytes:
    return bytes(
        Ether(src=mc.MAC_C, dst=mc.MAC_S)
        / IP(src=src, dst=dst)
        / TCP(sport=sport, dport=dport, seq=seq, flags="PA")
        / Raw(payload)
    )


def gz(blob: bytes) -> bytes:
    return gzip.compress(blob, mtime=0)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/crafted/make_damaged.py OUTDIR")
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name in ("huge_record_mark", "opaque_past_end", "many_credentials", "huge_op_count"):
        path = out / f"{name}.pcap"
        globals()[name]().write(path)
        print(path)
