"""NFS version 3 arguments and results (RFC 1813), as far as the analysis needs:
every procedure's file handle (and name for directory operations), WRITE /
READ / COMMIT in full, and the status of every reply.
"""

from __future__ import annotations

from nfstrace.nfs_fields import DECODE_OK, DECODE_TRUNCATED, fields, offset64
from nfstrace.parsers.procnames import PROCEDURES, procedure_name
from nfstrace.parsers.rpc import NFS_PROGRAM
from nfstrace.parsers.xdr import Xdr

PROC_NAMES = PROCEDURES[(NFS_PROGRAM, 3)]

# procedure numbers
NULL = 0
READ = 6
WRITE = 7
RENAME = 14
LINK = 15
COMMIT = 21
# procedures whose arguments start with diropargs3 (dir handle, then a name)
DIROP_PROCS = frozenset((3, 8, 9, 10, 11, 12, 13, 14))
LOOKUP = 3
# Procedures whose reply hands back the file handle of a (new) object: LOOKUP's
# nfs_fh3, and the post_op_fh3 of CREATE, MKDIR, SYMLINK, MKNOD.  A reply's
# ``fh`` column holds it: with the call's name it names the file.
NEW_OBJECT_PROCS = frozenset((8, 9, 10, 11))

# stable_how
UNSTABLE = 0
DATA_SYNC = 1
FILE_SYNC = 2
STABLE_NAMES = {UNSTABLE: "UNSTABLE", DATA_SYNC: "DATA_SYNC", FILE_SYNC: "FILE_SYNC"}

# nfsstat3
NFS3_OK = 0
NFS3ERR_JUKEBOX = 10008
STATUS_NAMES = {
    0: "NFS3_OK",
    1: "NFS3ERR_PERM",
    2: "NFS3ERR_NOENT",
    5: "NFS3ERR_IO",
    6: "NFS3ERR_NXIO",
    13: "NFS3ERR_ACCES",
    17: "NFS3ERR_EXIST",
    18: "NFS3ERR_XDEV",
    19: "NFS3ERR_NODEV",
    20: "NFS3ERR_NOTDIR",
    21: "NFS3ERR_ISDIR",
    22: "NFS3ERR_INVAL",
    27: "NFS3ERR_FBIG",
    28: "NFS3ERR_NOSPC",
    30: "NFS3ERR_ROFS",
    31: "NFS3ERR_MLINK",
    63: "NFS3ERR_NAMETOOLONG",
    66: "NFS3ERR_NOTEMPTY",
    69: "NFS3ERR_DQUOT",
    70: "NFS3ERR_STALE",
    71: "NFS3ERR_REMOTE",
    10001: "NFS3ERR_BADHANDLE",
    10002: "NFS3ERR_NOT_SYNC",
    10003: "NFS3ERR_BAD_COOKIE",
    10004: "NFS3ERR_NOTSUPP",
    10005: "NFS3ERR_TOOSMALL",
    10006: "NFS3ERR_SERVERFAULT",
    10007: "NFS3ERR_BADTYPE",
    10008: "NFS3ERR_JUKEBOX",
}

FHSIZE3 = 64
FATTR3_BYTES = 84
WCC_ATTR_BYTES = 24
VERIFIER_BYTES = 8
MAX_NAME = 1024


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
