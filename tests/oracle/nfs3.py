"""NFS version 3 arguments and results (RFC 1813), as far as the analysis needs:
every procedure's file handle (and name for directory operations), WRITE /
READ / COMMIT in full, and the status of every reply.  The protocol's numbers
and sizes: ``nfstrace.protocol.nfs3``.
"""

from __future__ import annotations

from nfstrace.nfs_fields import DECODE_OK, DECODE_TRUNCATED, fields, offset64
from nfstrace.protocol.nfs3 import (
    COMMIT,
    DIROP_PROCS,
    FATTR3_BYTES,
    FHSIZE3,
    FILE_SYNC,
    LINK,
    LOOKUP,
    NEW_OBJECT_PROCS,
    NFS3_OK,
    NULL,
    PROC_NAMES,
    READ,
    VERIFIER_BYTES,
    WCC_ATTR_BYTES,
    WRITE,
)
from nfstrace.protocol.procedures import procedure_name
from nfstrace.protocol.rpc import NFS_PROGRAM
from oracle.xdr import Xdr

MAX_NAME = 1024  # a longer name is taken for damage


def proc_name(proc: int) -> str:
    return procedure_name(NFS_PROGRAM, 3, proc)


def _outcome(x: Xdr) -> str:
    return DECODE_OK if x.ok else DECODE_TRUNCATED


def decode_call(buf: bytes, off: int, proc: int) -> tuple:
    name = proc_name(proc)
    if proc == NULL or proc >= len(PROC_NAMES):
        return fields(op=name, nfs_decode=DECODE_OK)
    x = Xdr(buf, off)
    fh = x.opaque(FHSIZE3).hex()
    if not x.ok:
        return fields(op=name, nfs_decode=DECODE_TRUNCATED)
    if proc == WRITE:
        # Read field by field: a snaplen may cut anywhere; keep what arrived.
        offset = offset64(x.u64())
        if not x.ok:
            return fields(op=name, fh=fh, nfs_decode=DECODE_TRUNCATED)
        count = x.u32()
        if not x.ok:
            return fields(op=name, fh=fh, offset=offset, nfs_decode=DECODE_TRUNCATED)
        stable = x.u32()
        if not x.ok:
            return fields(op=name, fh=fh, offset=offset, count=count, nfs_decode=DECODE_TRUNCATED)
        return fields(
            op=name, fh=fh, offset=offset, count=count, stable=stable, nfs_decode=DECODE_OK
        )
    if proc in (READ, COMMIT):
        offset = offset64(x.u64())
        count = x.u32()
        if not x.ok:
            return fields(op=name, fh=fh, nfs_decode=DECODE_TRUNCATED)
        return fields(op=name, fh=fh, offset=offset, count=count, nfs_decode=DECODE_OK)
    if proc in DIROP_PROCS:
        fname = x.string(MAX_NAME)
        return fields(op=name, fh=fh, name=fname if x.ok else "", nfs_decode=_outcome(x))
    if proc == LINK:  # file handle, then the link's diropargs3
        x.opaque(FHSIZE3)
        fname = x.string(MAX_NAME)
        return fields(op=name, fh=fh, name=fname if x.ok else "", nfs_decode=_outcome(x))
    return fields(op=name, fh=fh, nfs_decode=DECODE_OK)


def _skip_post_op_attr(x: Xdr) -> None:
    if x.boolean():
        x.skip(FATTR3_BYTES)


def _skip_wcc_data(x: Xdr) -> None:
    if x.boolean():
        x.skip(WCC_ATTR_BYTES)
    _skip_post_op_attr(x)


def decode_reply(buf: bytes, off: int, proc: int) -> tuple:
    name = proc_name(proc)
    if proc == NULL or proc >= len(PROC_NAMES):
        return fields(op=name, nfs_decode=DECODE_OK)
    x = Xdr(buf, off)
    status = x.u32()
    if not x.ok:
        return fields(op=name, nfs_decode=DECODE_TRUNCATED)
    if status == NFS3_OK and (proc == LOOKUP or proc in NEW_OBJECT_PROCS):
        follows = proc == LOOKUP or x.boolean()  # post_op_fh3: handle_follows
        fh = x.opaque(FHSIZE3).hex() if follows and x.ok else ""
        return fields(op=name, nfs_status=status, fh=fh if x.ok else "", nfs_decode=_outcome(x))
    if status != NFS3_OK or proc not in (WRITE, READ, COMMIT):
        return fields(op=name, nfs_status=status, nfs_decode=DECODE_OK)
    if proc == WRITE:
        _skip_wcc_data(x)
        count = x.u32()
        committed = x.u32()
        verf = x.fixed(VERIFIER_BYTES)
        if not x.ok:
            return fields(op=name, nfs_status=status, nfs_decode=DECODE_TRUNCATED)
        return fields(
            op=name,
            nfs_status=status,
            count=count,
            committed=committed,
            verifier=verf.hex(),
            nfs_decode=DECODE_OK,
        )
    if proc == READ:
        _skip_post_op_attr(x)
        count = x.u32()
        eof = x.u32()
        if not x.ok:
            return fields(op=name, nfs_status=status, nfs_decode=DECODE_TRUNCATED)
        return fields(op=name, nfs_status=status, count=count, eof=eof, nfs_decode=DECODE_OK)
    # COMMIT
    _skip_wcc_data(x)
    verf = x.fixed(VERIFIER_BYTES)
    if not x.ok:
        return fields(op=name, nfs_status=status, nfs_decode=DECODE_TRUNCATED)
    return fields(op=name, nfs_status=status, verifier=verf.hex(), nfs_decode=DECODE_OK)


def write_reply_without_call(buf: bytes, off: int, rpc_len: int) -> tuple | None:
    """A whole reply (``rpc_len`` bytes, all in buf) whose call was not
    captured, on a flow whose calls are NFSv3: its results decoded as a
    successful WRITE's when they have exactly WRITE3resok's shape (status OK,
    wcc_data whose two flags are 0 or 1, count, a committed level, the
    verifier, and nothing after it), else None.  No other NFSv3 result has
    that shape and length: COMMIT's lacks count and committed, SETATTR's and
    a failed WRITE's stop after wcc_data; tshark leaves such a reply
    undecoded."""
    if len(buf) < rpc_len:
        return None
    x = Xdr(buf, off, rpc_len)
    if x.u32() != NFS3_OK:
        return None
    for skip in (WCC_ATTR_BYTES, FATTR3_BYTES):
        flag = x.u32()
        if flag > 1:
            return None
        if flag:
            x.skip(skip)
    count = x.u32()
    committed = x.u32()
    verf = x.fixed(VERIFIER_BYTES)
    if not x.ok or x.pos != rpc_len or committed > FILE_SYNC:
        return None
    return fields(
        op=proc_name(WRITE),
        nfs_status=NFS3_OK,
        count=count,
        committed=committed,
        verifier=verf.hex(),
        nfs_decode=DECODE_OK,
    )
