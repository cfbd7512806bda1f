"""How to step over each NFSv4 operation's arguments and results, as data: the
step programs the Rust parser runs (native/src/nfs4_steps.rs, written from
these tables by native/generate_tables.py).

An NFSv4 COMPOUND's operations carry no length (RFC 7530 §16.2, RFC 8881
§18.2): to reach an operation the parser steps over every one before it.  Each
operation's arguments (ARGS), results after the status NFS4_OK (RESULTS),
results on a failing status that still have a body (ERROR_RESULTS) and the
callback program's (CB_ARGS, CB_RESULTS) are declared here as a *step*:

* an ``int``: that many bytes;
* ``Seq(items)``: the items in turn (byte counts and steps; ``seq(...)``
  merges adjacent byte counts);
* ``Array(size)``: a counted array of items of ``size`` bytes;
* ``ArrayOf(step)``: a counted array of variable items;
* ``Optional(size)``: a union switched on a bool, TRUE -> ``size`` bytes;
* ``Named(name)``: a hand-written primitive, the Rust function ``name`` of
  native/src/nfs4.rs (one signature: ``fn name<'a>(x: &mut Xdr<'a>, st: &mut
  St<'a>) -> bool``, true when it cannot step over its item): the items that
  switch on a union discriminant, loop, or record a decoded field.  The
  generator stops, naming it, when a named step has no Rust primitive.

An operation without a step (an unknown opcode) or a union arm a step does not
know ends the walk (the message's nfs_decode is ``partial``): no guessing
beyond it.  The numbers are protocol/nfs4.py's: operation codes, statuses and
the fixed sizes of XDR items; UNION_DISCRIMINANTS lists the ones the named
steps switch on, which the generator writes into tables.rs by name.
"""

from __future__ import annotations

from dataclasses import dataclass

from nfstrace.protocol.nfs4 import (
    CB_OPERATIONS,
    CHANGE_INFO4,
    HYPER,
    NFS4_DEVICEID4_SIZE,
    NFS4_SESSIONID_SIZE,
    NFS4_VERIFIER_SIZE,
    NFS4ERR_CLID_INUSE,
    NFS4ERR_DENIED,
    NFS4ERR_LAYOUTTRYLATER,
    NFS4ERR_OFFLOAD_NO_REQS,
    NFS4ERR_TOOSMALL,
    NFSTIME4,
    OP_ACCESS,
    OP_ALLOCATE,
    OP_BACKCHANNEL_CTL,
    OP_BIND_CONN_TO_SESSION,
    OP_CB_GETATTR,
    OP_CB_ILLEGAL,
    OP_CB_LAYOUTRECALL,
    OP_CB_NOTIFY,
    OP_CB_NOTIFY_DEVICEID,
    OP_CB_NOTIFY_LOCK,
    OP_CB_OFFLOAD,
    OP_CB_PUSH_DELEG,
    OP_CB_RECALL,
    OP_CB_RECALL_ANY,
    OP_CB_RECALL_SLOT,
    OP_CB_RECALLABLE_OBJ_AVAIL,
    OP_CB_SEQUENCE,
    OP_CB_WANTS_CANCELLED,
    OP_CLONE,
    OP_CLOSE,
    OP_COMMIT,
    OP_COPY,
    OP_COPY_NOTIFY,
    OP_CREATE,
    OP_CREATE_SESSION,
    OP_DEALLOCATE,
    OP_DELEGPURGE,
    OP_DELEGRETURN,
    OP_DESTROY_CLIENTID,
    OP_DESTROY_SESSION,
    OP_EXCHANGE_ID,
    OP_FREE_STATEID,
    OP_GET_DIR_DELEGATION,
    OP_GETATTR,
    OP_GETDEVICEINFO,
    OP_GETDEVICELIST,
    OP_GETFH,
    OP_GETXATTR,
    OP_ILLEGAL,
    OP_IO_ADVISE,
    OP_LAYOUTCOMMIT,
    OP_LAYOUTERROR,
    OP_LAYOUTGET,
    OP_LAYOUTRETURN,
    OP_LAYOUTSTATS,
    OP_LINK,
    OP_LISTXATTRS,
    OP_LOCK,
    OP_LOCKT,
    OP_LOCKU,
    OP_LOOKUP,
    OP_LOOKUPP,
    OP_NVERIFY,
    OP_OFFLOAD_CANCEL,
    OP_OFFLOAD_STATUS,
    OP_OPEN,
    OP_OPEN_CONFIRM,
    OP_OPEN_DOWNGRADE,
    OP_OPENATTR,
    OP_PUTFH,
    OP_PUTPUBFH,
    OP_PUTROOTFH,
    OP_READ,
    OP_READ_PLUS,
    OP_READDIR,
    OP_READLINK,
    OP_RECLAIM_COMPLETE,
    OP_RELEASE_LOCKOWNER,
    OP_REMOVE,
    OP_REMOVEXATTR,
    OP_RENAME,
    OP_RENEW,
    OP_RESTOREFH,
    OP_SAVEFH,
    OP_SECINFO,
    OP_SECINFO_NO_NAME,
    OP_SEEK,
    OP_SEQUENCE,
    OP_SET_SSV,
    OP_SETATTR,
    OP_SETCLIENTID,
    OP_SETCLIENTID_CONFIRM,
    OP_SETXATTR,
    OP_TEST_STATEID,
    OP_VERIFY,
    OP_WANT_DELEGATION,
    OP_WRITE,
    OP_WRITE_SAME,
    STATEID4,
    WORD,
)


@dataclass(frozen=True)
class Named:
    """A hand-written step: the primitive ``name`` of native/src/nfs4.rs."""

    name: str


@dataclass(frozen=True)
class Seq:
    """The items in turn: byte counts (never two adjacent) and steps."""

    items: tuple[int | Step, ...]


@dataclass(frozen=True)
class Array:
    """A counted array of fixed-size items (uint32 count, then count * size bytes)."""

    size: int


@dataclass(frozen=True)
class ArrayOf:
    """A counted array of variable items, each stepped over by ``item``."""

    item: Step


@dataclass(frozen=True)
class Optional:
    """A union switched on a bool: TRUE -> an item of ``size`` bytes, FALSE -> void."""

    size: int


Step = Named | Seq | Array | ArrayOf | Optional


def seq(*parts: int | Step) -> Seq:
    """A Seq of parts, adjacent byte counts merged into one."""
    items: list[int | Step] = []
    for p in parts:
        if isinstance(p, int) and items and isinstance(items[-1], int):
            items[-1] += p
        else:
            items.append(p)
    return Seq(tuple(items))


# --- named steps: items shared by several operations ---
VOID = Named("void")
OPAQUE = Named("opaque")  # opaque<>
BITMAP = Named("bitmap")  # bitmap4
FATTR = Named("fattr")  # fattr4: bitmap4 attrmask, attrlist4 attr_vals
OWNER = Named("owner")  # state_owner4: clientid4, opaque owner<> (records nothing)
FH = Named("fh")  # nfs_fh4: records fh
NAME = Named("name")  # component4: records name
OPEN_DELEGATION = Named("open_delegation")  # open_delegation4 (all four arms)
CB_SEC_PARMS = Named("cb_sec_parms")  # callback_sec_parms4 (AUTH_NONE, AUTH_SYS, RPCSEC_GSS)
CHANNEL_ATTRS = Named("channel_attrs")  # channel_attrs4: six count4, ca_rdma_ird<1>
STATE_PROTECT = Named("state_protect")  # state_protect4_a / _r: SP4_SSV not stepped over
NETLOC = Named("netloc")  # netloc4: NL4_NAME, NL4_URL, NL4_NETADDR
WRITE_RESPONSE = Named("write_response")  # write_response4: callback_id<1>, count, ...
# --- named steps of operation arguments ---
SEQUENCE_ARGS = Named("sequence_args")  # records session, seqid, slot
READ_ARGS = Named("read_args")  # READ, READ_PLUS: stateid, then OFFSET_COUNT
OFFSET_COUNT = Named("offset_count")  # records offset, count
WRITE_ARGS = Named("write_args")  # records offset, stable, count (summed); the data uncaptured
CREATE_ARGS = Named("create_args")  # createtype4, then NAME, FATTR
LOCK_ARGS = Named("lock_args")  # locker4: open_to_lock_owner4 or exist_lock_owner4
OPEN_ARGS = Named("open_args")  # openflag4 (createhow4), open_claim4 (records name)
LAYOUTRETURN = Named("layoutreturn")  # layoutreturn4: FILE's body; FSID / ALL void
DELEG_CLAIM = Named("deleg_claim")  # deleg_claim4: CLAIM_FH, CLAIM_DELEG_PREV_FH, CLAIM_PREVIOUS
# --- named steps of operation results ---
SEQUENCE_RES = Named("sequence_res")  # records session, seqid, slot
WRITE_RES = Named("write_res")  # records count, committed, verifier
VERIFIER = Named("verifier")  # verifier4: records verifier
READ_RES = Named("read_res")  # records eof, count; the data need not be captured
READ_PLUS_RES = Named("read_plus_res")  # read_plus_content<>: records eof, count of data
DIRLIST = Named("dirlist")  # dirlist4: entry4 list, eof
SECINFO = Named("secinfo")  # secinfo4 (RPCSEC_GSS carries rpcsec_gss_info)
GDD_NON_FATAL = Named("gdd_non_fatal")  # GET_DIR_DELEGATION's non-fatal result
# --- named steps of callback operations ---
CB_SEQUENCE_ARGS = Named("cb_sequence_args")  # records session, seqid, slot
CB_SEQUENCE_RES = Named("cb_sequence_res")  # records session, seqid, slot
CB_LAYOUTRECALL = Named("cb_layoutrecall")  # layoutrecall4: FILE (records fh), FSID, ALL
CB_OFFLOAD = Named("cb_offload")  # records fh; offload_info4

# The protocol/nfs4.py numbers the named steps switch on (union discriminants):
# tables.rs has each as a constant of its name, and nfs4.rs compares with no
# bare number.
UNION_DISCRIMINANTS = (
    "CLAIM_NULL",
    "CLAIM_PREVIOUS",
    "CLAIM_DELEGATE_CUR",
    "CLAIM_DELEGATE_PREV",
    "CLAIM_FH",
    "CLAIM_DELEG_CUR_FH",
    "CLAIM_DELEG_PREV_FH",
    "UNCHECKED4",
    "GUARDED4",
    "EXCLUSIVE4",
    "EXCLUSIVE4_1",
    "GDD4_OK",
    "GDD4_UNAVAIL",
    "LAYOUT4_RET_REC_FILE",
    "LAYOUT4_RET_REC_FSID",
    "LAYOUT4_RET_REC_ALL",
    "NF4BLK",
    "NF4CHR",
    "NF4LNK",
    "NFS4_CONTENT_DATA",
    "NFS4_CONTENT_HOLE",
    "NFS_LIMIT_SIZE",
    "NFS_LIMIT_BLOCKS",
    "NL4_NAME",
    "NL4_URL",
    "NL4_NETADDR",
    "OPEN4_CREATE",
    "OPEN_DELEGATE_NONE",
    "OPEN_DELEGATE_READ",
    "OPEN_DELEGATE_WRITE",
    "OPEN_DELEGATE_NONE_EXT",
    "SP4_NONE",
    "SP4_MACH_CRED",
    "WND4_CONTENTION",
    "WND4_RESOURCE",
)

# --- composite items ---
IMPL_IDS = ArrayOf(seq(OPAQUE, OPAQUE, NFSTIME4))  # nfs_impl_id4 <1>: domain, name, date
NOTIFY4 = seq(BITMAP, OPAQUE)  # notify4: notify_mask, notifylist4
STATEID_RANGE = STATEID4 + HYPER + HYPER  # stateid, offset, length

# --- operation arguments ---
ARGS: dict[int, Step] = {
    OP_ACCESS: seq(WORD),
    OP_CLOSE: seq(WORD + STATEID4),
    OP_COMMIT: OFFSET_COUNT,
    OP_CREATE: CREATE_ARGS,
    OP_DELEGPURGE: seq(HYPER),
    OP_DELEGRETURN: seq(STATEID4),
    OP_GETATTR: BITMAP,
    OP_GETFH: VOID,
    OP_LINK: NAME,
    OP_LOCK: LOCK_ARGS,
    OP_LOCKT: seq(WORD + HYPER + HYPER, OWNER),
    OP_LOCKU: seq(WORD + WORD + STATEID4 + HYPER + HYPER),
    OP_LOOKUP: NAME,
    OP_LOOKUPP: VOID,
    OP_NVERIFY: FATTR,
    OP_OPEN: OPEN_ARGS,
    OP_OPENATTR: seq(WORD),
    OP_OPEN_CONFIRM: seq(STATEID4 + WORD),
    OP_OPEN_DOWNGRADE: seq(STATEID4 + 3 * WORD),
    OP_PUTFH: FH,
    OP_PUTPUBFH: VOID,
    OP_PUTROOTFH: VOID,
    OP_READ: READ_ARGS,
    OP_READDIR: seq(HYPER + NFS4_VERIFIER_SIZE + 2 * WORD, BITMAP),
    OP_READLINK: VOID,
    OP_REMOVE: NAME,
    OP_RENAME: seq(NAME, OPAQUE),
    OP_RENEW: seq(HYPER),
    OP_RESTOREFH: VOID,
    OP_SAVEFH: VOID,
    OP_SECINFO: OPAQUE,
    OP_SETATTR: seq(STATEID4, FATTR),
    # client (verifier, id), callback (program, netid, uaddr), callback_ident
    OP_SETCLIENTID: seq(NFS4_VERIFIER_SIZE, OPAQUE, WORD, OPAQUE, OPAQUE, WORD),
    OP_SETCLIENTID_CONFIRM: seq(HYPER + NFS4_VERIFIER_SIZE),
    OP_VERIFY: FATTR,
    OP_WRITE: WRITE_ARGS,
    OP_RELEASE_LOCKOWNER: OWNER,
    OP_BACKCHANNEL_CTL: seq(WORD, ArrayOf(CB_SEC_PARMS)),
    OP_BIND_CONN_TO_SESSION: seq(NFS4_SESSIONID_SIZE + 2 * WORD),
    # client_owner4 (verifier, ownerid), flags, state_protect4_a, client_impl_id<1>
    OP_EXCHANGE_ID: seq(NFS4_VERIFIER_SIZE, OPAQUE, WORD, STATE_PROTECT, IMPL_IDS),
    # clientid, sequence, flags, fore/back channel attrs, cb_program, sec_parms<>
    OP_CREATE_SESSION: seq(
        HYPER + 2 * WORD, CHANNEL_ATTRS, CHANNEL_ATTRS, WORD, ArrayOf(CB_SEC_PARMS)
    ),
    OP_DESTROY_SESSION: seq(NFS4_SESSIONID_SIZE),
    OP_FREE_STATEID: seq(STATEID4),
    OP_GET_DIR_DELEGATION: seq(WORD, BITMAP, 2 * NFSTIME4, BITMAP, BITMAP),
    OP_GETDEVICEINFO: seq(NFS4_DEVICEID4_SIZE + 2 * WORD, BITMAP),
    OP_GETDEVICELIST: seq(2 * WORD + HYPER + NFS4_VERIFIER_SIZE),
    # offset, length, reclaim, stateid, last_write_offset, time_modify, layoutupdate4
    OP_LAYOUTCOMMIT: seq(
        HYPER + HYPER + WORD + STATEID4, Optional(HYPER), Optional(NFSTIME4), WORD, OPAQUE
    ),
    # signal, type, iomode, offset, length, minlength, stateid, maxcount
    OP_LAYOUTGET: seq(3 * WORD + 3 * HYPER + STATEID4 + WORD),
    OP_LAYOUTRETURN: seq(3 * WORD, LAYOUTRETURN),
    OP_SECINFO_NO_NAME: seq(WORD),
    OP_SEQUENCE: SEQUENCE_ARGS,
    OP_SET_SSV: seq(OPAQUE, OPAQUE),
    OP_TEST_STATEID: Array(STATEID4),
    OP_WANT_DELEGATION: seq(WORD, DELEG_CLAIM),
    OP_DESTROY_CLIENTID: seq(HYPER),
    OP_RECLAIM_COMPLETE: seq(WORD),
    OP_ALLOCATE: seq(STATEID_RANGE),
    # src/dst stateids, src/dst offsets, count, consecutive, synchronous, source_server<>
    OP_COPY: seq(2 * STATEID4 + 3 * HYPER + 2 * WORD, ArrayOf(NETLOC)),
    OP_COPY_NOTIFY: seq(STATEID4, NETLOC),
    OP_DEALLOCATE: seq(STATEID_RANGE),
    OP_IO_ADVISE: seq(STATEID_RANGE, BITMAP),
    OP_LAYOUTERROR: seq(STATEID_RANGE, Array(NFS4_DEVICEID4_SIZE + 2 * WORD)),
    # offset, length, stateid, read/write io_info4, deviceid, layoutupdate4
    OP_LAYOUTSTATS: seq(STATEID_RANGE + 4 * HYPER + NFS4_DEVICEID4_SIZE + WORD, OPAQUE),
    OP_OFFLOAD_CANCEL: seq(STATEID4),
    OP_OFFLOAD_STATUS: seq(STATEID4),
    OP_READ_PLUS: READ_ARGS,
    OP_SEEK: seq(STATEID4 + HYPER + WORD),
    # stateid, stable, app_data_block4 (offset, block size/count, reloff, num, reloff, pattern)
    OP_WRITE_SAME: seq(STATEID4 + WORD + 4 * HYPER + WORD + HYPER, OPAQUE),
    OP_CLONE: seq(2 * STATEID4 + 3 * HYPER),
    OP_GETXATTR: OPAQUE,
    OP_SETXATTR: seq(WORD, OPAQUE, OPAQUE),
    OP_LISTXATTRS: seq(HYPER + WORD),
    OP_REMOVEXATTR: OPAQUE,
    OP_ILLEGAL: VOID,
}

# --- operation results (the body after the status) ---
LOCK4DENIED = seq(HYPER + HYPER + WORD, OWNER)  # offset, length, locktype, owner
SECINFO4RES = ArrayOf(SECINFO)
CHANGE_INFO = seq(CHANGE_INFO4)
RESULTS: dict[int, Step] = {
    OP_ACCESS: seq(2 * WORD),
    OP_CLOSE: seq(STATEID4),
    OP_COMMIT: VERIFIER,
    OP_CREATE: seq(CHANGE_INFO4, BITMAP),
    OP_DELEGPURGE: VOID,
    OP_DELEGRETURN: VOID,
    OP_GETATTR: FATTR,
    OP_GETFH: FH,
    OP_LINK: CHANGE_INFO,
    OP_LOCK: seq(STATEID4),
    OP_LOCKT: VOID,
    OP_LOCKU: seq(STATEID4),
    OP_LOOKUP: VOID,
    OP_LOOKUPP: VOID,
    OP_NVERIFY: VOID,
    # stateid, cinfo, rflags, attrset, delegation
    OP_OPEN: seq(STATEID4 + CHANGE_INFO4 + WORD, BITMAP, OPEN_DELEGATION),
    OP_OPENATTR: VOID,
    OP_OPEN_CONFIRM: seq(STATEID4),
    OP_OPEN_DOWNGRADE: seq(STATEID4),
    OP_PUTFH: VOID,
    OP_PUTPUBFH: VOID,
    OP_PUTROOTFH: VOID,
    OP_READ: READ_RES,
    OP_READDIR: seq(NFS4_VERIFIER_SIZE, DIRLIST),
    OP_READLINK: OPAQUE,
    OP_REMOVE: CHANGE_INFO,
    OP_RENAME: seq(2 * CHANGE_INFO4),
    OP_RENEW: VOID,
    OP_RESTOREFH: VOID,
    OP_SAVEFH: VOID,
    OP_SECINFO: SECINFO4RES,
    OP_SETATTR: BITMAP,
    OP_SETCLIENTID: seq(HYPER + NFS4_VERIFIER_SIZE),
    OP_SETCLIENTID_CONFIRM: VOID,
    OP_VERIFY: VOID,
    OP_WRITE: WRITE_RES,
    OP_RELEASE_LOCKOWNER: VOID,
    OP_BACKCHANNEL_CTL: VOID,
    OP_BIND_CONN_TO_SESSION: seq(NFS4_SESSIONID_SIZE + 2 * WORD),
    # clientid, sequenceid, flags, state_protect4_r, server_owner4, server_scope, impl_id<1>
    OP_EXCHANGE_ID: seq(HYPER + 2 * WORD, STATE_PROTECT, HYPER, OPAQUE, OPAQUE, IMPL_IDS),
    OP_CREATE_SESSION: seq(NFS4_SESSIONID_SIZE + 2 * WORD, CHANNEL_ATTRS, CHANNEL_ATTRS),
    OP_DESTROY_SESSION: VOID,
    OP_FREE_STATEID: VOID,
    OP_GET_DIR_DELEGATION: GDD_NON_FATAL,
    OP_GETDEVICEINFO: seq(WORD, OPAQUE, BITMAP),  # device_addr4, notification
    OP_GETDEVICELIST: seq(HYPER + NFS4_VERIFIER_SIZE, Array(NFS4_DEVICEID4_SIZE), WORD),
    OP_LAYOUTCOMMIT: Optional(HYPER),  # newsize4
    # return_on_close, stateid, layout4<> (offset, length, iomode, type, body)
    OP_LAYOUTGET: seq(WORD + STATEID4, ArrayOf(seq(2 * HYPER + 2 * WORD, OPAQUE))),
    OP_LAYOUTRETURN: Optional(STATEID4),
    OP_SECINFO_NO_NAME: SECINFO4RES,
    OP_SEQUENCE: SEQUENCE_RES,
    OP_SET_SSV: OPAQUE,
    OP_TEST_STATEID: Array(WORD),
    OP_WANT_DELEGATION: OPEN_DELEGATION,
    OP_DESTROY_CLIENTID: VOID,
    OP_RECLAIM_COMPLETE: VOID,
    OP_ALLOCATE: VOID,
    OP_COPY: seq(WRITE_RESPONSE, 2 * WORD),  # + copy_requirements4
    OP_COPY_NOTIFY: seq(NFSTIME4 + STATEID4, ArrayOf(NETLOC)),
    OP_DEALLOCATE: VOID,
    OP_IO_ADVISE: BITMAP,
    OP_LAYOUTERROR: VOID,
    OP_LAYOUTSTATS: VOID,
    OP_OFFLOAD_CANCEL: VOID,
    OP_OFFLOAD_STATUS: seq(HYPER, Array(WORD)),
    OP_READ_PLUS: READ_PLUS_RES,
    OP_SEEK: seq(WORD + HYPER),
    OP_WRITE_SAME: WRITE_RESPONSE,
    OP_CLONE: VOID,
    OP_GETXATTR: OPAQUE,
    OP_SETXATTR: CHANGE_INFO,
    OP_LISTXATTRS: seq(HYPER, ArrayOf(OPAQUE), WORD),
    OP_REMOVEXATTR: CHANGE_INFO,
    OP_ILLEGAL: VOID,
}
# Results with a body on a failing status: (op, status) -> step (others: void)
ERROR_RESULTS: dict[tuple[int, int], Step] = {
    (OP_LOCK, NFS4ERR_DENIED): LOCK4DENIED,
    (OP_LOCKT, NFS4ERR_DENIED): LOCK4DENIED,
    (OP_SETCLIENTID, NFS4ERR_CLID_INUSE): seq(OPAQUE, OPAQUE),  # clientaddr4
    (OP_GETDEVICEINFO, NFS4ERR_TOOSMALL): seq(WORD),
    (OP_LAYOUTGET, NFS4ERR_LAYOUTTRYLATER): seq(WORD),
    (OP_COPY, NFS4ERR_OFFLOAD_NO_REQS): seq(2 * WORD),
}
# Results whose body follows the status whatever it is
ANY_STATUS_RESULTS = frozenset((OP_SETATTR,))

# --- callback operations ---
CB_ARGS: dict[int, Step] = {
    OP_CB_GETATTR: seq(FH, BITMAP),
    OP_CB_RECALL: seq(STATEID4 + WORD, FH),
    OP_CB_LAYOUTRECALL: CB_LAYOUTRECALL,
    OP_CB_NOTIFY: seq(STATEID4, FH, ArrayOf(NOTIFY4)),
    OP_CB_PUSH_DELEG: seq(FH, OPEN_DELEGATION),
    OP_CB_RECALL_ANY: seq(WORD, BITMAP),
    OP_CB_RECALLABLE_OBJ_AVAIL: seq(WORD, BITMAP),
    OP_CB_RECALL_SLOT: seq(WORD),
    OP_CB_SEQUENCE: CB_SEQUENCE_ARGS,
    OP_CB_WANTS_CANCELLED: seq(2 * WORD),
    OP_CB_NOTIFY_LOCK: seq(FH, OWNER),
    OP_CB_NOTIFY_DEVICEID: ArrayOf(NOTIFY4),
    OP_CB_OFFLOAD: CB_OFFLOAD,
    OP_CB_ILLEGAL: VOID,
}
CB_RESULTS: dict[int, Step] = dict.fromkeys(CB_OPERATIONS, VOID)
CB_RESULTS[OP_CB_GETATTR] = FATTR
CB_RESULTS[OP_CB_SEQUENCE] = CB_SEQUENCE_RES
