"""Crafted captures of the NFS programs other than NFSv3 and the NFSv4 COMPOUND:
NFSv2, the other NFSv4 procedures, and the NFSv4 callback program.

* ``nfs2_procedures``: over UDP, a call and a reply of every NFSv2 procedure
  (RFC 1094 §2.2) and of two procedure numbers past the last, each with whole
  arguments and results, then the same cut after every word of the
  arguments (and of the READ result): file handles, names (one not UTF-8,
  one longer than a name may be), WRITE and READ offsets and counts, statuses;
* ``nfs4_callbacks``: over UDP, NFSv4 NULL and procedure 2, the callback
  program's CB_NULL and procedure 5, and a CB_COMPOUND call and reply per
  callback operation (protocol nfs4.CB_OPERATIONS), several times each, the
  operation's body made of small random words (0-3: counts and switches that
  take each arm of its shape), then a CB_SEQUENCE whose finding depends on
  every item of the first operation's shape; failing statuses, an unknown
  operation, a cut tag; then over TCP an NFSv4.1 connection whose server sends
  a CB_COMPOUND (CB_SEQUENCE, CB_RECALL) back on it (the backchannel) between
  the client's COMPOUNDs.

    python tests/crafted/make_nfs2_callbacks.py OUTDIR
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

try:
    from crafted import make_crafted as mc
except ImportError:  # run as a script (python tests/crafted/THIS.py OUTDIR) or as a package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from crafted import make_crafted as mc

from nfstrace.protocol import nfs2, nfs4

CB_PROGRAM = 0x40000000  # the first number of the callback range (RFC 7530 §16.33)
CB_PORT = 40404  # the client's callback port (NFSv4.0: the server calls it)
NFS4_PORT = 905


def _pairs(
    cap: mc.Capture, ends: tuple[str, str, int, int], pairs: list[tuple[bytes, bytes]]
) -> None:
    """Each (call, reply) over UDP: the call from the caller (ends: its address,
    the callee's, their ports), the reply back; each datagram its own IP id."""
    caller, callee, cport, sport = ends
    for call, reply in pairs:
        for src, dst, sp, dp, payload in (
            (caller, callee, cport, sport, call),
            (callee, caller, sport, cport, reply),
        ):
            pkt = mc.udp_pkt(src, dst, sp, dp, payload)
            pkt.id = len(cap.frames) + 1
            cap.add(mc.eth(pkt))


def _fh2(seed: int) -> bytes:  # fhandle: 32 bytes, fixed
    return bytes((seed * 5 + i) % 250 + 3 for i in range(nfs2.FHSIZE))


def _nfs2_args(proc: int, seed: int) -> bytes:
    fh = _fh2(seed)
    if proc == nfs2.WRITE:  # file, beginoffset, offset, totalcount, data
        return fh + mc.u32(0, 8192 * seed, 0) + mc.opaque(b"\x5a" * 10)
    if proc == nfs2.READ:  # file, offset, count, totalcount
        return fh + mc.u32(4096 * seed, 4096, 0)
    if proc == nfs2.LINK:  # from, to (dir, name)
        return fh + _fh2(seed + 1) + mc.opaque(b"link-%d" % seed)
    if proc in nfs2.DIROP_PROCS:  # dir, name (+ attributes: not read)
        name = {9: "caf\u00e9.txt".encode(), 10: b"bad-\xff\xfe-utf8"}.get(proc, b"n%d" % seed)
        return fh + mc.opaque(name) + mc.u32(0o644, 1, 2, 3)
    if proc in nfs2.NO_ARGS:
        return b""
    return fh + mc.u32(1, 2)  # GETATTR, SETATTR, READLINK, READDIR, STATFS: a handle first


def _nfs2_result(proc: int, status: int) -> bytes:
    if status or proc in nfs2.NO_ARGS:
        return mc.u32(status) if proc not in nfs2.NO_ARGS else b""
    if proc == nfs2.READ:  # status, fattr, data
        return mc.u32(0) + b"\1" * nfs2.FATTR_BYTES + mc.opaque(b"\x33" * 12)
    if proc == nfs2.WRITE:  # status, fattr
        return mc.u32(0) + b"\1" * nfs2.FATTR_BYTES
    return mc.u32(0) + mc.u32(7, 7)


def build_nfs2_procedures(out: Path) -> dict[str, Path]:
    cap = mc.Capture()
    xid = 0x2000
    pairs: list[tuple[bytes, bytes]] = []
    procs = [*range(len(nfs2.PROC_NAMES)), len(nfs2.PROC_NAMES), 40]
    for proc in procs:
        for status in (0, 2):  # NFS_OK, NFSERR_NOENT
            xid += 1
            args = _nfs2_args(proc, xid & 0xFF)
            result = _nfs2_result(proc, status)
            pairs.append((mc.rpc_call(xid, proc, args, vers=2), mc.rpc_reply(xid, result)))
        full, result = _nfs2_args(proc, proc), _nfs2_result(proc, 0)
        for cut in range(0, max(len(full), len(result)), 4):  # a word at a time
            xid += 1
            pairs.append(
                (
                    mc.rpc_call(xid, proc, full[:cut], vers=2),
                    mc.rpc_reply(xid, result[:cut]),
                )
            )
    # a name past the longest one read (parsers/nfs2.MAX_NAME): damage
    xid += 1
    long_name = _fh2(1) + mc.opaque(b"x" * 1100)
    pairs.append((mc.rpc_call(xid, 4, long_name, vers=2), mc.rpc_reply(xid, mc.u32(2))))
    _pairs(cap, (mc.CLIENT, mc.SERVER, 906, mc.NFS_PORT), pairs)
    return {"nfs2_procedures": cap.write(out / "nfs2_procedures.pcap")}


def _cb_compound(xid: int, tag: bytes, body: bytes, count: int) -> bytes:
    """A CB_COMPOUND call: tag, minorversion 1, callback_ident, count ops."""
    args = mc.opaque(tag) + mc.u32(1, 7, count) + body
    return mc.rpc_call(xid, nfs4.CB_COMPOUND, args, prog=CB_PROGRAM, vers=1)


def _cb_sequence_args(slot: int) -> bytes:
    # sessionid, sequenceid, slotid, highest_slotid, cachethis, referring_call_lists<>
    session = bytes(range(0x40, 0x40 + nfs4.NFS4_SESSIONID_SIZE))
    return mc.u32(nfs4.OP_CB_SEQUENCE) + session + mc.u32(9, slot, 0, 0, 0)


def build_nfs4_callbacks(out: Path) -> dict[str, Path]:
    rng = random.Random(32)
    cap = mc.Capture()
    xid = 0x3200

    def words() -> bytes:
        return mc.u32(*(rng.choice((0, 0, 1, 1, 2, 3)) for _ in range(rng.randrange(0, 16))))

    nfs4_others = []  # NFSv4 NULL and a procedure past COMPOUND
    for proc in (nfs4.NFSPROC4_NULL, 2):
        xid += 1
        nfs4_others.append((mc.rpc_call(xid, proc, b"", vers=4), mc.rpc_reply(xid)))
    _pairs(cap, (mc.CLIENT, mc.SERVER, 907, mc.NFS_PORT), nfs4_others)
    pairs: list[tuple[bytes, bytes]] = []  # the server calls the client's callback port
    for proc in (nfs4.CB_NULL, 5):
        xid += 1
        call = mc.rpc_call(xid, proc, b"", prog=CB_PROGRAM, vers=1)
        pairs.append((call, mc.rpc_reply(xid)))
    seq_result = mc.u32(nfs4.OP_CB_SEQUENCE, 0) + bytes(16) + mc.u32(9, 3, 0, 0)
    for op in sorted(nfs4.CB_OPERATIONS):
        for status in (0, 0, 0, 0, 0, 0, 10010):  # NFS4_OK, NFS4ERR_DENIED
            xid += 1
            body = mc.u32(op) + words() + _cb_sequence_args(op)
            res = mc.u32(op, status) + words() + seq_result
            reply = mc.rpc_reply(xid, mc.u32(status) + mc.opaque(b"") + mc.u32(2) + res)
            pairs.append((_cb_compound(xid, b"", body, 2), reply))
    # an unknown operation (partial), a cut tag (truncated), an empty CB_COMPOUND
    for body, count in ((mc.u32(99, 1, 2), 1), (b"", 0)):
        xid += 1
        reply = mc.rpc_reply(xid, mc.u32(0) + mc.opaque(b"t") + mc.u32(count) + body)
        pairs.append((_cb_compound(xid, b"t", body, count), reply))
    xid += 1
    cut = mc.rpc_call(xid, nfs4.CB_COMPOUND, mc.u32(40), prog=CB_PROGRAM, vers=1)
    pairs.append((cut, mc.rpc_reply(xid, mc.u32(0))))
    _pairs(cap, (mc.SERVER, mc.CLIENT, 41000, CB_PORT), pairs)

    # NFSv4.1 over TCP, a callback on the backchannel between the client's calls
    conn = mc.TcpConn(cap, NFS4_PORT)
    conn.handshake()
    putfh = mc.u32(nfs4.OP_PUTFH) + mc.fhandle(5) + mc.u32(nfs4.OP_GETATTR, 1, 0x18)
    compound = mc.opaque(b"") + mc.u32(1, 2) + putfh
    getattr_res = mc.u32(nfs4.OP_PUTFH, 0, nfs4.OP_GETATTR, 0, 1, 0x18) + mc.opaque(b"\1" * 16)
    for i in range(2):
        xid += 1
        conn.client_send(mc.record(mc.rpc_call(xid, nfs4.NFSPROC4_COMPOUND, compound, vers=4)))
        reply = mc.u32(0) + mc.opaque(b"") + mc.u32(2) + getattr_res
        conn.server_send(mc.record(mc.rpc_reply(xid, reply)))
        if i == 0:
            recall = mc.u32(nfs4.OP_CB_RECALL) + bytes(16) + mc.u32(0) + mc.fhandle(6)
            body = _cb_sequence_args(0) + recall
            conn.server_send(mc.record(_cb_compound(0x7700, b"cb", body, 2)))
            res = mc.u32(nfs4.OP_CB_SEQUENCE, 0) + bytes(16) + mc.u32(9, 0, 0, 0)
            res += mc.u32(nfs4.OP_CB_RECALL, 0)
            reply = mc.u32(0) + mc.opaque(b"cb") + mc.u32(2) + res
            conn.client_send(mc.record(mc.rpc_reply(0x7700, reply)))
    conn.close()
    return {"nfs4_callbacks": cap.write(out / "nfs4_callbacks.pcap")}


BUILDERS = (build_nfs2_procedures, build_nfs4_callbacks)


def build_all(outdir: str | os.PathLike[str]) -> dict[str, Path]:
    """Write every capture into outdir; returns {name: path}."""
    return mc.run_builders(BUILDERS, outdir)


if __name__ == "__main__":
    mc.script(build_all, __file__)
