"""Crafted ``-s 256`` NFSv4 captures whose WRITE calls were partly not captured
while their COMPOUND replies were (issue 16, item 6):

    python tests/crafted/make_nfs4_orphans.py OUTDIR

or ``build_all(outdir) -> {name: path}`` from the tests.  Times are explicit
(``make_causes.at``), data goes in large (TSO) segments cut to 256 bytes.

- ``nfs40_orphans_s256``: NFSv4.0 over TCP, 16 WRITEs (PUTFH WRITE GETATTR) of
  ``COUNT`` bytes; of the calls ``MISSED`` were not captured: those in
  ``HEADLESS`` lost only their first segment (the one with the RPC header, the
  rest of the call captured and cut), the others every frame (the server's
  ACK shows the bytes went by).  Every reply was captured.  WRITE ``FILE_SYNC``
  was asked, and granted, FILE_SYNC, the others UNSTABLE; a COMMIT ends it.
- ``nfs41_orphans_s256``: the same over NFSv4.1 (SEQUENCE PUTFH WRITE), with
  ``WRITES41`` WRITEs of which ``MISSED41`` calls were not captured.
- ``nfs4_orphan_edges``: replies without call that are not, or only partly,
  decoded (see ``build_nfs4_orphan_edges``).

tshark decodes none of the replies whose call it did not see ("Continuation"):
``nfs40_capture(missed=())`` and ``nfs41_capture(missed=())`` make the twins
whose every call was captured, for tshark to decode the same reply bytes.
"""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

try:
    from crafted import make_causes as mcs
    from crafted import make_crafted as mc
except ImportError:  # run as a script or imported as a package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from crafted import make_causes as mcs
    from crafted import make_crafted as mc

NFS4_VERS, COMPOUND = 4, 1
OP_COMMIT, OP_GETATTR, OP_PUTFH, OP_SEQUENCE, OP_WRITE = 5, 9, 22, 53, 38
UNSTABLE, FILE_SYNC = 0, 2
COUNT = 256 * 1024
VERF = b"verf4444"
SESSION = bytes(range(16))
STATEID = struct.pack(">I", 1) + b"stateid-0001"

WRITES, WRITES41 = 16, 6
MISSED = (1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14)  # 11 of 16 calls not captured
HEADLESS = (5, 9)  # of which: only the first segment (RPC header) lost
FILE_SYNC_WRITE = 14  # asked and granted FILE_SYNC
MISSED41 = (1, 2, 4)
XID40, XID41 = 0x4000, 0x4100
PORT40, PORT41, PORT_EDGES, PORT_V3 = 880, 881, 882, 883
EDGE_FIRST, EDGE_CALL, EDGE_NULL, EDGE_UNKNOWN, EDGE_PARTIAL, EDGE_CUT = range(0x4200, 0x4206)
EDGE_V3, EDGE_V3_OTHER = 0x4211, 0x4212
SEGMENT_US, REPLY_US = 20, 800


def _compound_call(xid: int, minor: int, ops: bytes, n: int) -> bytes:
    args = mc.opaque(b"") + mc.u32(minor, n) + ops
    return mc.rpc_call(xid, COMPOUND, args, vers=NFS4_VERS)


def _sequence_args(seqid: int) -> bytes:
    return mc.u32(OP_SEQUENCE) + SESSION + mc.u32(seqid, 0, 63, 0)


def _sequence_res(seqid: int) -> bytes:
    return mc.u32(OP_SEQUENCE, 0) + SESSION + mc.u32(seqid, 0, 63, 63, 0)


def _putfh() -> bytes:
    return mc.u32(OP_PUTFH) + mc.fhandle(4)


def _write_args(offset: int, stable: int, count: int) -> bytes:
    data = mc.opaque(b"\x5a" * count)
    return mc.u32(OP_WRITE) + STATEID + struct.pack(">Q", offset) + mc.u32(stable) + data


def write40_call(xid: int, offset: int, stable: int) -> bytes:
    """PUTFH WRITE GETATTR (a Linux NFSv4.0 client's WRITE)."""
    ops = _putfh() + _write_args(offset, stable, COUNT) + mc.u32(OP_GETATTR, 1, 0x18)
    return _compound_call(xid, 0, ops, 3)


def write40_reply(xid: int, committed: int) -> bytes:
    attrs = mc.u32(2, 0x18, 0) + mc.opaque(struct.pack(">QQ", xid, COUNT))  # change, size
    body = mc.u32(0) + mc.opaque(b"") + mc.u32(3)
    body += mc.u32(OP_PUTFH, 0) + mc.u32(OP_WRITE, 0, COUNT, committed) + VERF
    body += mc.u32(OP_GETATTR, 0) + attrs
    return mc.rpc_reply(xid, body)


def write41_call(xid: int, seqid: int, offset: int) -> bytes:
    """SEQUENCE PUTFH WRITE (a Linux NFSv4.1 client's WRITE)."""
    ops = _sequence_args(seqid) + _putfh() + _write_args(offset, UNSTABLE, COUNT)
    return _compound_call(xid, 1, ops, 3)


def write41_reply(xid: int, seqid: int) -> bytes:
    body = mc.u32(0) + mc.opaque(b"") + mc.u32(3) + _sequence_res(seqid)
    body += mc.u32(OP_PUTFH, 0) + mc.u32(OP_WRITE, 0, COUNT, UNSTABLE) + VERF
    return mc.rpc_reply(xid, body)


def commit_call(xid: int, minor: int, seqid: int) -> bytes:
    ops = _sequence_args(seqid) if minor else b""
    ops += _putfh() + mc.u32(OP_COMMIT) + struct.pack(">Q", 0) + mc.u32(0)
    return _compound_call(xid, minor, ops, 3 if minor else 2)


def commit_reply(xid: int, minor: int, seqid: int) -> bytes:
    res = _sequence_res(seqid) if minor else b""
    res += mc.u32(OP_PUTFH, 0) + mc.u32(OP_COMMIT, 0) + VERF
    return mc.rpc_reply(xid, mc.u32(0) + mc.opaque(b"") + mc.u32(3 if minor else 2) + res)


def _send_call(f: mcs.Flow, msg: bytes, us: float, missed: bool, headless: bool) -> float:
    """The call in SEGMENT pieces from `us`: all captured, none (missed) or all
    but the first (headless); the server ACKs what it got.  Its last piece's time."""
    payload = mc.record(msg)
    t = us
    for i in range(0, len(payload), mcs.SEGMENT):
        piece = payload[i : i + mcs.SEGMENT]
        if missed and (not headless or i == 0):
            f.skip(True, len(piece))
        else:
            f._frame(True, "PA", f.cnext, f.snext, piece, t)
            f.cnext += len(piece)
        t += SEGMENT_US
    if missed:
        f.ack(False, t + 10)
    return t - SEGMENT_US


def nfs40_capture(
    missed: tuple[int, ...] = MISSED, headless: tuple[int, ...] = HEADLESS
) -> mc.Capture:
    """``nfs40_orphans_s256``; with missed=() its twin whose every call was captured."""
    cap = mc.Capture(snaplen=mcs.SNAPLEN)
    f = mcs.Flow(cap, mc.CLIENT, mc.SERVER, PORT40, 0)
    us = 200.0
    for i in range(WRITES):
        stable = FILE_SYNC if i == FILE_SYNC_WRITE else UNSTABLE
        msg = write40_call(XID40 + i, i * COUNT, stable)
        last = _send_call(f, msg, us, i in missed, i in headless)
        f.send(False, write40_reply(XID40 + i, stable), last + REPLY_US)
        us = last + REPLY_US + 100
    f.send(True, commit_call(XID40 + WRITES, 0, 0), us)
    f.send(False, commit_reply(XID40 + WRITES, 0, 0), us + 2_000)
    return cap


def nfs41_capture(missed: tuple[int, ...] = MISSED41) -> mc.Capture:
    """``nfs41_orphans_s256``; with missed=() its twin whose every call was captured."""
    cap = mc.Capture(snaplen=mcs.SNAPLEN)
    f = mcs.Flow(cap, mc.CLIENT, mc.SERVER, PORT41, 0)
    us = 200.0
    for i in range(WRITES41):
        msg = write41_call(XID41 + i, i + 1, i * COUNT)
        last = _send_call(f, msg, us, i in missed, False)
        f.send(False, write41_reply(XID41 + i, i + 1), last + REPLY_US)
        us = last + REPLY_US + 100
    f.send(True, commit_call(XID41 + WRITES41, 1, WRITES41 + 1), us)
    f.send(False, commit_reply(XID41 + WRITES41, 1, WRITES41 + 1), us + 2_000)
    return cap


def build_nfs40_orphans_s256(out: Path) -> dict[str, Path]:
    return {"nfs40_orphans_s256": nfs40_capture().write(out / "nfs40_orphans_s256.pcap")}


def build_nfs41_orphans_s256(out: Path) -> dict[str, Path]:
    return {"nfs41_orphans_s256": nfs41_capture().write(out / "nfs41_orphans_s256.pcap")}


def build_nfs4_orphan_edges(out: Path) -> dict[str, Path]:
    # One NFSv4.0 connection (port PORT_EDGES): a reply before any call (EDGE_FIRST,
    # not decoded: nothing says what the flow carries), a PUTFH WRITE GETATTR call
    # and reply (EDGE_CALL), then replies whose call was not captured: a NULL
    # reply (EDGE_NULL, empty body: not decoded), one whose first result has an
    # unknown opcode (EDGE_UNKNOWN: not decoded), one PUTFH then an unknown
    # opcode (EDGE_PARTIAL: decoded, partial, PUTFH kept) and a WRITE reply cut
    # after the WRITE's status (EDGE_CUT: decoded, truncated).  Then an NFSv3
    # connection (port PORT_V3): a WRITE call and reply, then a WRITE reply
    # whose call was not captured (EDGE_V3: decoded, a WRITE3resok's exact
    # shape) and a GETATTR reply whose call was not captured (EDGE_V3_OTHER:
    # not decoded, NFSv3 results do not name their procedure).
    cap = mc.Capture()
    c = mc.TcpConn(cap, cport=PORT_EDGES)
    c.handshake()
    c.server_send(mc.record(write40_reply(EDGE_FIRST, UNSTABLE)))
    c.client_send(mc.record(commit_call(EDGE_CALL, 0, 0)))
    c.server_send(mc.record(commit_reply(EDGE_CALL, 0, 0)))
    c.server_send(mc.record(mc.rpc_reply(EDGE_NULL)))
    unknown = mc.u32(0) + mc.opaque(b"") + mc.u32(1, 9999, 0)
    c.server_send(mc.record(mc.rpc_reply(EDGE_UNKNOWN, unknown)))
    partial = mc.u32(0) + mc.opaque(b"") + mc.u32(2, OP_PUTFH, 0, 9999, 0)
    c.server_send(mc.record(mc.rpc_reply(EDGE_PARTIAL, partial)))
    cut = mc.u32(0) + mc.opaque(b"") + mc.u32(3, OP_PUTFH, 0, OP_WRITE, 0)
    c.server_send(mc.record(mc.rpc_reply(EDGE_CUT, cut)))
    v3 = mc.TcpConn(cap, cport=PORT_V3)
    v3.handshake()
    v3.client_send(mc.record(mc.write_call(EDGE_V3 - 1, 64)))
    v3.server_send(mc.record(mc.write_reply(EDGE_V3 - 1, 64)))
    v3.server_send(mc.record(mc.write_reply(EDGE_V3, 64)))
    v3.server_send(mc.record(mc.getattr_reply(EDGE_V3_OTHER)))
    return {"nfs4_orphan_edges": cap.write(out / "nfs4_orphan_edges.pcap")}


BUILDERS = (build_nfs40_orphans_s256, build_nfs41_orphans_s256, build_nfs4_orphan_edges)


def build_all(outdir: str | os.PathLike[str]) -> dict[str, Path]:
    """Write every scenario into outdir; returns {name: path}."""
    return mc.run_builders(BUILDERS, outdir)


if __name__ == "__main__":
    mc.script(build_all, __file__)
