"""NFS version 2 arguments and results (RFC 1094): file handles, WRITE and READ,
and the status of every reply.  NFSv2 writes are always synchronous.  The
protocol's numbers and sizes: ``nfstrace.protocol.nfs2``.
"""

from __future__ import annotations

from nfstrace.nfs_fields import DECODE_OK, DECODE_TRUNCATED, fields
from nfstrace.protocol.nfs2 import (
    DIROP_PROCS,
    FATTR_BYTES,
    FHSIZE,
    LINK,
    NFS_OK,
    NO_ARGS,
    PROC_NAMES,
    READ,
    WRITE,
)
from nfstrace.protocol.nfs3 import FILE_SYNC  # NFSv2 writes are stable at the reply (§2.2.10)
from nfstrace.protocol.procedures import procedure_name
from nfstrace.protocol.rpc import NFS_PROGRAM
from oracle.xdr import Xdr

MAX_NAME = 1024  # a longer name is taken for damage


def proc_name(proc: int) -> str:
    return procedure_name(NFS_PROGRAM, 2, proc)


def decode_call(buf: bytes, off: int, proc: int) -> tuple:
    name = proc_name(proc)
    if proc in NO_ARGS or proc >= len(PROC_NAMES):
        return fields(op=name, nfs_decode=DECODE_OK)
    x = Xdr(buf, off)
    fh = x.fixed(FHSIZE).hex()
    if not x.ok:
        return fields(op=name, nfs_decode=DECODE_TRUNCATED)
    if proc == WRITE:
        _begin, offset, _total = x.u32(), x.u32(), x.u32()
        count = x.u32()  # length of the data opaque
        if not x.ok:
            return fields(op=name, fh=fh, nfs_decode=DECODE_TRUNCATED)
        return fields(
            op=name, fh=fh, offset=offset, count=count, stable=FILE_SYNC, nfs_decode=DECODE_OK
        )
    if proc == READ:
        offset, count = x.u32(), x.u32()
        if not x.ok:
            return fields(op=name, fh=fh, nfs_decode=DECODE_TRUNCATED)
        return fields(op=name, fh=fh, offset=offset, count=count, nfs_decode=DECODE_OK)
    if proc in DIROP_PROCS or proc == LINK:
        if proc == LINK:
            x.fixed(FHSIZE)
        fname = x.string(MAX_NAME)
        ok = x.ok
        return fields(
            op=name,
            fh=fh,
            name=fname if ok else "",
            nfs_decode=DECODE_OK if ok else DECODE_TRUNCATED,
        )
    return fields(op=name, fh=fh, nfs_decode=DECODE_OK)


def decode_reply(buf: bytes, off: int, proc: int) -> tuple:
    name = proc_name(proc)
    if proc in NO_ARGS or proc >= len(PROC_NAMES):
        return fields(op=name, nfs_decode=DECODE_OK)
    x = Xdr(buf, off)
    status = x.u32()
    if not x.ok:
        return fields(op=name, nfs_decode=DECODE_TRUNCATED)
    if proc == READ and status == NFS_OK:
        x.skip(FATTR_BYTES)
        count = x.u32()
        if not x.ok:
            return fields(op=name, nfs_status=status, nfs_decode=DECODE_TRUNCATED)
        return fields(op=name, nfs_status=status, count=count, nfs_decode=DECODE_OK)
    if proc == WRITE and status == NFS_OK:
        return fields(op=name, nfs_status=status, committed=FILE_SYNC, nfs_decode=DECODE_OK)
    return fields(op=name, nfs_status=status, nfs_decode=DECODE_OK)
