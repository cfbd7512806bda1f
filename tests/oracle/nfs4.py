"""NFS version 4 COMPOUND and CB_COMPOUND decoding: NFSv4.0 (RFC 7530, XDR in
RFC 7531), NFSv4.1 (RFC 8881, XDR in RFC 5662), NFSv4.2 (RFC 7862, XDR in
RFC 7863) and the extended-attribute operations (RFC 8276).

An operation's arguments (results) carry no length: to reach an operation the
decoder steps over every one before it.  Each operation has a step function in
ARGS / RESULTS / CB_ARGS / CB_RESULTS; an operation without one (unknown
opcode) or a union arm the decoder does not know ends the walk with
DECODE_PARTIAL: no guessing beyond it.  Bytes running out end it with
DECODE_TRUNCATED, keeping what was decoded before the cut.  The payload of a
WRITE call or READ / READ_PLUS reply need not be captured: its length is what
counts, and the walk ends at the end of the capture (OK if that operation was
the last one).

A step is ``step(x, st) -> bool``: it advances the cursor over one item,
records decoded fields in the dict ``st`` and returns True when it cannot step
over it.  A step is either named (a hand-written function) or built by a
combinator (_seq, _array, _array_of, _optional), which records how it built it
(``shape``): native/generate_tables.py writes the Rust parser's step programs
(native/src/nfs4_steps.rs) from these tables through it, calling a Rust
primitive of the same name (native/src/nfs4.rs) for each named step.

The protocol's numbers (operation codes and names, status codes, item sizes,
union discriminants) are in protocol/nfs4.py; this module holds the steps and
the walks over a COMPOUND.  Its length is one step per operation's arguments
and results (about 60 operations of v4.0-4.2): the specification the Rust port
follows (its step programs generated from the tables, its named steps mirrored
line by line in native/src/nfs4.rs), kept in one file for that.
"""

from __future__ import annotations

from collections.abc import Callable

from nfstrace.nfs_fields import (
    DECODE_OK,
    DECODE_PARTIAL,
    DECODE_TRUNCATED,
    fields,
    offset64,
)
from nfstrace.protocol.nfs4 import (
    CB_COMPOUND,
    CB_COMPOUND_PROG,
    CB_NULL,
    CB_OPERATIONS,
    CHANGE_INFO4,
    CLAIM_DELEG_CUR_FH,
    CLAIM_DELEG_PREV_FH,
    CLAIM_DELEGATE_CUR,
    CLAIM_DELEGATE_PREV,
    CLAIM_FH,
    CLAIM_NULL,
    CLAIM_PREVIOUS,
    COMPOUND_PROG,
    EXCLUSIVE4,
    EXCLUSIVE4_1,
    GDD4_OK,
    GDD4_UNAVAIL,
    GUARDED4,
    HYPER,
    LAYOUT4_RET_REC_ALL,
    LAYOUT4_RET_REC_FILE,
    LAYOUT4_RET_REC_FSID,
    NF4BLK,
    NF4CHR,
    NF4LNK,
    NFS4_CONTENT_DATA,
    NFS4_CONTENT_HOLE,
    NFS4_DEVICEID4_SIZE,
    NFS4_FHSIZE,
    NFS4_OK,
    NFS4_OPAQUE_LIMIT,
    NFS4_SESSIONID_SIZE,
    NFS4_VERIFIER_SIZE,
    NFS4ERR_CLID_INUSE,
    NFS4ERR_DENIED,
    NFS4ERR_LAYOUTTRYLATER,
    NFS4ERR_OFFLOAD_NO_REQS,
    NFS4ERR_TOOSMALL,
    NFS_LIMIT_BLOCKS,
    NFS_LIMIT_SIZE,
    NFSPROC4_COMPOUND,
    NFSPROC4_NULL,
    NFSTIME4,
    NL4_NAME,
    NL4_NETADDR,
    NL4_URL,
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
    OPEN4_CREATE,
    OPEN_DELEGATE_NONE,
    OPEN_DELEGATE_NONE_EXT,
    OPEN_DELEGATE_READ,
    OPEN_DELEGATE_WRITE,
    SP4_MACH_CRED,
    SP4_NONE,
    STATEID4,
    UNCHECKED4,
    WND4_CONTENTION,
    WND4_RESOURCE,
    WORD,
    compound_names,
)
from nfstrace.protocol.nfs4 import SUPPORT_OPS as SUPPORT_OPS
from nfstrace.protocol.nfs4 import cb_compound_names as cb_compound_names
from nfstrace.protocol.nfs4 import main_op as main_op
from nfstrace.protocol.rpc import AUTH_NONE, AUTH_SYS, RPCSEC_GSS
from oracle.xdr import Xdr

Step = Callable[[Xdr, dict], object]
# How a combinator built a step: ("seq", items: tuple[int | Step, ...]),
# ("array", item size), ("array_of", item step) or ("optional", item size)
Shape = tuple[str, object]
_SHAPES: dict[Step, Shape] = {}


def shape(step: Step) -> Shape | None:
    """How a combinator built step; None for a named (hand-written) step.  Kept
    beside the step, not on it, so that the steps stay plain closures (as fast
    to call as before) and the Rust step programs can be generated from them."""
    return _SHAPES.get(step)


def _shaped(step: Step, how: Shape) -> Step:
    _SHAPES[step] = how
    return step


# --- items shared by several operations (step signature; truthy = cannot step over) ---


def _void(x: Xdr, st: dict) -> None:
    return None


def _seq(*parts: int | Step) -> Step:
    """A step over a fixed sequence of items: byte counts and steps."""
    items: list[int | Step] = []
    for p in parts:  # merge adjacent byte counts
        if isinstance(p, int) and items and isinstance(items[-1], int):
            items[-1] += p
        else:
            items.append(p)
    frozen = tuple(items)
    if len(items) == 1 and isinstance(items[0], int):
        n = items[0]
        return _shaped(lambda x, st: x.skip(n), ("seq", frozen))

    def step(x: Xdr, st: dict) -> bool:
        for p in frozen:
            if isinstance(p, int):
                x.skip(p)
            elif p(x, st):
                return True
        return False

    return _shaped(step, ("seq", frozen))


def _array(size: int) -> Step:
    """Step over a counted array of fixed-size items."""
    return _shaped(lambda x, st: x.skip(x.u32() * size), ("array", size))


def _array_of(item: Step) -> Step:
    """Step over a counted array of variable items."""

    def step(x: Xdr, st: dict) -> bool:
        for _ in range(x.u32()):
            if not x.ok:
                return False
            if item(x, st):
                return True
        return False

    return _shaped(step, ("array_of", item))


def _optional(size: int) -> Step:
    """A union switched on a bool: TRUE -> an item of size bytes, FALSE -> void."""

    def step(x: Xdr, st: dict) -> None:
        if x.boolean():
            x.skip(size)

    return _shaped(step, ("optional", size))


def _opaque(x: Xdr, st: dict) -> None:
    x.skip_opaque()


def _bitmap(x: Xdr, st: dict) -> None:
    x.skip(x.u32() * WORD)


def _fattr(x: Xdr, st: dict) -> None:  # fattr4: bitmap4 attrmask, attrlist4 attr_vals
    x.skip(x.u32() * WORD)
    x.skip_opaque()


def _owner(x: Xdr, st: dict) -> None:  # state_owner4: clientid4, opaque owner<>
    x.skip(HYPER)
    x.skip_opaque(NFS4_OPAQUE_LIMIT)


def _fh(x: Xdr, st: dict) -> None:
    fh = x.opaque(NFS4_FHSIZE)
    if x.ok:
        st["fh"] = fh.hex()


def _name(x: Xdr, st: dict) -> None:
    name = x.string()
    if x.ok:
        st["name"] = name


def _skip_payload(x: Xdr, n: int) -> None:
    """Step over WRITE / READ data; if it was not captured, stop at the capture's end."""
    if x.ok:
        x.pos = min(x.pos + ((n + 3) & ~3), x.end)


def _session_slot(x: Xdr, st: dict) -> None:
    """The prefix of [CB_]SEQUENCE args and results: sessionid, sequenceid, slotid."""
    session = x.fixed(NFS4_SESSIONID_SIZE)
    if not x.ok:
        return
    st["session"] = session.hex()
    seqid = x.u32()
    if not x.ok:
        return
    st["seqid"] = seqid
    slot = x.u32()
    if x.ok:
        st["slot"] = slot


def _nfsace(x: Xdr, st: dict) -> None:  # type, flag, access_mask, who
    x.skip(3 * WORD)
    x.skip_opaque()


def _open_delegation(x: Xdr, st: dict) -> bool:
    kind = x.u32()
    if kind == OPEN_DELEGATE_NONE:
        return False
    if kind == OPEN_DELEGATE_READ:  # stateid, recall, permissions
        x.skip(STATEID4 + WORD)
        _nfsace(x, st)
        return False
    if kind == OPEN_DELEGATE_WRITE:  # stateid, recall, space_limit, permissions
        x.skip(STATEID4 + WORD)
        if x.u32() not in (NFS_LIMIT_SIZE, NFS_LIMIT_BLOCKS):  # both arms are 8 bytes
            return True
        x.skip(HYPER)
        _nfsace(x, st)
        return False
    if kind == OPEN_DELEGATE_NONE_EXT:  # open_none_delegation4
        if x.u32() in (WND4_CONTENTION, WND4_RESOURCE):
            x.skip(WORD)
        return False
    return True


def _cb_sec_parms(x: Xdr, st: dict) -> bool:  # callback_sec_parms4
    flavor = x.u32()
    if flavor == AUTH_SYS:  # authsys_parms: stamp, machinename<255>, uid, gid, gids<16>
        x.skip(WORD)
        x.skip_opaque(255)
        x.skip(2 * WORD)
        x.skip(x.u32() * WORD)
    elif flavor == RPCSEC_GSS:  # gss_cb_handles4: service, handle from server, from client
        x.skip(WORD)
        x.skip_opaque()
        x.skip_opaque()
    return flavor not in (AUTH_NONE, AUTH_SYS, RPCSEC_GSS)


def _channel_attrs(x: Xdr, st: dict) -> None:  # six count4, then ca_rdma_ird<1>
    x.skip(6 * WORD)
    x.skip(x.u32() * WORD)


def _state_protect(x: Xdr, st: dict) -> bool:
    """state_protect4_a / state_protect4_r: SP4_SSV is not stepped over."""
    how = x.u32()
    if how == SP4_MACH_CRED:  # state_protect_ops4: two bitmaps
        _bitmap(x, st)
        _bitmap(x, st)
    return how not in (SP4_NONE, SP4_MACH_CRED)


_impl_ids = _array_of(_seq(_opaque, _opaque, NFSTIME4))  # nfs_impl_id4 <1>


def _netloc(x: Xdr, st: dict) -> bool:
    kind = x.u32()
    if kind in (NL4_NAME, NL4_URL):
        x.skip_opaque()
    elif kind == NL4_NETADDR:  # netaddr4: netid, uaddr
        x.skip_opaque()
        x.skip_opaque()
    else:
        return True
    return False


def _write_response(x: Xdr, st: dict) -> None:  # callback_id<1>, count, committed, verifier
    x.skip(x.u32() * STATEID4)
    x.skip(HYPER + WORD + NFS4_VERIFIER_SIZE)


_notify4 = _seq(_bitmap, _opaque)  # notify_mask, notifylist4

# --- operation arguments ---


def _sequence_args(x: Xdr, st: dict) -> None:
    _session_slot(x, st)
    x.skip(2 * WORD)  # highest_slotid, cachethis


def _read_args(x: Xdr, st: dict) -> None:  # READ, READ_PLUS: stateid, offset, count
    x.skip(STATEID4)
    _offset_count(x, st)


def _offset_count(x: Xdr, st: dict) -> None:
    offset = offset64(x.u64())
    if not x.ok:
        return
    st["offset"] = offset
    count = x.u32()
    if x.ok:
        st["count"] = count


def _write_args(x: Xdr, st: dict) -> None:
    x.skip(STATEID4)
    offset = offset64(x.u64())
    if not x.ok:
        return
    st.setdefault("offset", offset)
    stable = x.u32()
    if not x.ok:
        return
    st["stable"] = stable
    n = x.u32()
    if not x.ok:
        return
    st["count"] = st.get("count", 0) + n  # data<> length, summed over the WRITEs
    _skip_payload(x, n)


def _create_args(x: Xdr, st: dict) -> None:
    kind = x.u32()  # createtype4
    if kind == NF4LNK:
        x.skip_opaque()
    elif kind in (NF4BLK, NF4CHR):
        x.skip(2 * WORD)  # specdata4
    _name(x, st)
    _fattr(x, st)


def _lock_args(x: Xdr, st: dict) -> None:
    x.skip(WORD + WORD + HYPER + HYPER)  # locktype, reclaim, offset, length
    if x.boolean():  # open_to_lock_owner4: open_seqid, open_stateid, lock_seqid, lock_owner
        x.skip(WORD + STATEID4 + WORD)
        _owner(x, st)
    else:  # exist_lock_owner4: lock_stateid, lock_seqid
        x.skip(STATEID4 + WORD)


def _open_args(x: Xdr, st: dict) -> bool:
    x.skip(3 * WORD)  # seqid, share_access, share_deny
    _owner(x, st)
    if x.u32() == OPEN4_CREATE:
        mode = x.u32()
        if mode in (UNCHECKED4, GUARDED4):
            _fattr(x, st)
        elif mode == EXCLUSIVE4:
            x.skip(NFS4_VERIFIER_SIZE)
        elif mode == EXCLUSIVE4_1:
            x.skip(NFS4_VERIFIER_SIZE)
            _fattr(x, st)
        else:
            return True
    claim = x.u32()
    if claim in (CLAIM_NULL, CLAIM_DELEGATE_PREV):
        _name(x, st)
    elif claim == CLAIM_DELEGATE_CUR:
        x.skip(STATEID4)
        _name(x, st)
    elif claim == CLAIM_PREVIOUS:
        x.skip(WORD)
    elif claim == CLAIM_DELEG_CUR_FH:
        x.skip(STATEID4)
    return claim > CLAIM_DELEG_PREV_FH


def _layoutreturn(x: Xdr, st: dict) -> None:
    if x.u32() == LAYOUT4_RET_REC_FILE:  # offset, length, stateid, body; FSID/ALL: void
        x.skip(HYPER + HYPER + STATEID4)
        x.skip_opaque()


def _deleg_claim(x: Xdr, st: dict) -> bool:
    claim = x.u32()
    if claim == CLAIM_PREVIOUS:
        x.skip(WORD)
    return claim not in (CLAIM_PREVIOUS, CLAIM_FH, CLAIM_DELEG_PREV_FH)


_STATEID_RANGE = STATEID4 + HYPER + HYPER
ARGS: dict[int, Step] = {
    OP_ACCESS: _seq(WORD),
    OP_CLOSE: _seq(WORD + STATEID4),
    OP_COMMIT: _offset_count,
    OP_CREATE: _create_args,
    OP_DELEGPURGE: _seq(HYPER),
    OP_DELEGRETURN: _seq(STATEID4),
    OP_GETATTR: _bitmap,
    OP_GETFH: _void,
    OP_LINK: _name,
    OP_LOCK: _lock_args,
    OP_LOCKT: _seq(WORD + HYPER + HYPER, _owner),
    OP_LOCKU: _seq(WORD + WORD + STATEID4 + HYPER + HYPER),
    OP_LOOKUP: _name,
    OP_LOOKUPP: _void,
    OP_NVERIFY: _fattr,
    OP_OPEN: _open_args,
    OP_OPENATTR: _seq(WORD),
    OP_OPEN_CONFIRM: _seq(STATEID4 + WORD),
    OP_OPEN_DOWNGRADE: _seq(STATEID4 + 3 * WORD),
    OP_PUTFH: _fh,
    OP_PUTPUBFH: _void,
    OP_PUTROOTFH: _void,
    OP_READ: _read_args,
    OP_READDIR: _seq(HYPER + NFS4_VERIFIER_SIZE + 2 * WORD, _bitmap),
    OP_READLINK: _void,
    OP_REMOVE: _name,
    OP_RENAME: _seq(_name, _opaque),
    OP_RENEW: _seq(HYPER),
    OP_RESTOREFH: _void,
    OP_SAVEFH: _void,
    OP_SECINFO: _opaque,
    OP_SETATTR: _seq(STATEID4, _fattr),
    # client (verifier, id), callback (program, netid, uaddr), callback_ident
    OP_SETCLIENTID: _seq(NFS4_VERIFIER_SIZE, _opaque, WORD, _opaque, _opaque, WORD),
    OP_SETCLIENTID_CONFIRM: _seq(HYPER + NFS4_VERIFIER_SIZE),
    OP_VERIFY: _fattr,
    OP_WRITE: _write_args,
    OP_RELEASE_LOCKOWNER: _owner,
    OP_BACKCHANNEL_CTL: _seq(WORD, _array_of(_cb_sec_parms)),
    OP_BIND_CONN_TO_SESSION: _seq(NFS4_SESSIONID_SIZE + 2 * WORD),
    # client_owner4 (verifier, ownerid), flags, state_protect4_a, client_impl_id<1>
    OP_EXCHANGE_ID: _seq(NFS4_VERIFIER_SIZE, _opaque, WORD, _state_protect, _impl_ids),
    # clientid, sequence, flags, fore/back channel attrs, cb_program, sec_parms<>
    OP_CREATE_SESSION: _seq(
        HYPER + 2 * WORD, _channel_attrs, _channel_attrs, WORD, _array_of(_cb_sec_parms)
    ),
    OP_DESTROY_SESSION: _seq(NFS4_SESSIONID_SIZE),
    OP_FREE_STATEID: _seq(STATEID4),
    OP_GET_DIR_DELEGATION: _seq(WORD, _bitmap, 2 * NFSTIME4, _bitmap, _bitmap),
    OP_GETDEVICEINFO: _seq(NFS4_DEVICEID4_SIZE + 2 * WORD, _bitmap),
    OP_GETDEVICELIST: _seq(2 * WORD + HYPER + NFS4_VERIFIER_SIZE),
    # offset, length, reclaim, stateid, last_write_offset, time_modify, layoutupdate4
    OP_LAYOUTCOMMIT: _seq(
        HYPER + HYPER + WORD + STATEID4, _optional(HYPER), _optional(NFSTIME4), WORD, _opaque
    ),
    # signal, type, iomode, offset, length, minlength, stateid, maxcount
    OP_LAYOUTGET: _seq(3 * WORD + 3 * HYPER + STATEID4 + WORD),
    OP_LAYOUTRETURN: _seq(3 * WORD, _layoutreturn),
    OP_SECINFO_NO_NAME: _seq(WORD),
    OP_SEQUENCE: _sequence_args,
    OP_SET_SSV: _seq(_opaque, _opaque),
    OP_TEST_STATEID: _array(STATEID4),
    OP_WANT_DELEGATION: _seq(WORD, _deleg_claim),
    OP_DESTROY_CLIENTID: _seq(HYPER),
    OP_RECLAIM_COMPLETE: _seq(WORD),
    OP_ALLOCATE: _seq(_STATEID_RANGE),
    # src/dst stateids, src/dst offsets, count, consecutive, synchronous, source_server<>
    OP_COPY: _seq(2 * STATEID4 + 3 * HYPER + 2 * WORD, _array_of(_netloc)),
    OP_COPY_NOTIFY: _seq(STATEID4, _netloc),
    OP_DEALLOCATE: _seq(_STATEID_RANGE),
    OP_IO_ADVISE: _seq(_STATEID_RANGE, _bitmap),
    OP_LAYOUTERROR: _seq(_STATEID_RANGE, _array(NFS4_DEVICEID4_SIZE + 2 * WORD)),
    # offset, length, stateid, read/write io_info4, deviceid, layoutupdate4
    OP_LAYOUTSTATS: _seq(_STATEID_RANGE + 4 * HYPER + NFS4_DEVICEID4_SIZE + WORD, _opaque),
    OP_OFFLOAD_CANCEL: _seq(STATEID4),
    OP_OFFLOAD_STATUS: _seq(STATEID4),
    OP_READ_PLUS: _read_args,
    OP_SEEK: _seq(STATEID4 + HYPER + WORD),
    # stateid, stable, app_data_block4 (offset, block size/count, reloff, num, reloff, pattern)
    OP_WRITE_SAME: _seq(STATEID4 + WORD + 4 * HYPER + WORD + HYPER, _opaque),
    OP_CLONE: _seq(2 * STATEID4 + 3 * HYPER),
    OP_GETXATTR: _opaque,
    OP_SETXATTR: _seq(WORD, _opaque, _opaque),
    OP_LISTXATTRS: _seq(HYPER + WORD),
    OP_REMOVEXATTR: _opaque,
    OP_ILLEGAL: _void,
}

# --- operation results (the body after the status) ---


def _sequence_res(x: Xdr, st: dict) -> None:
    _session_slot(x, st)
    x.skip(3 * WORD)  # highest_slotid, target_highest_slotid, status_flags


def _write_res(x: Xdr, st: dict) -> None:
    count = x.u32()
    if not x.ok:
        return
    st["count"] = count
    committed = x.u32()
    if not x.ok:
        return
    st["committed"] = committed
    _verifier(x, st)


def _verifier(x: Xdr, st: dict) -> None:
    verf = x.fixed(NFS4_VERIFIER_SIZE)
    if x.ok:
        st["verifier"] = verf.hex()


def _read_res(x: Xdr, st: dict) -> None:
    eof = x.u32()
    if not x.ok:
        return
    st["eof"] = eof
    n = x.u32()
    if x.ok:
        st["count"] = n
        _skip_payload(x, n)


def _read_plus_res(x: Xdr, st: dict) -> None:
    eof = x.u32()
    if not x.ok:
        return
    st["eof"] = eof
    total = 0
    for _ in range(x.u32()):  # read_plus_content<>
        kind = x.u32()
        if not x.ok:
            return
        if kind == NFS4_CONTENT_DATA:  # data4: offset, data<>
            x.skip(HYPER)
            n = x.u32()
            total += n
            _skip_payload(x, n)
        elif kind == NFS4_CONTENT_HOLE:  # data_info4: offset, length
            x.skip(2 * HYPER)
    if x.ok:
        st["count"] = total  # data bytes (holes not counted)


def _dirlist(x: Xdr, st: dict) -> None:
    while x.boolean():  # entry4 *entries / *nextentry: cookie, name, attrs
        x.skip(HYPER)
        x.skip_opaque()
        _fattr(x, st)
    x.skip(WORD)  # eof


def _secinfo(x: Xdr, st: dict) -> None:
    if x.u32() == RPCSEC_GSS:  # rpcsec_gss_info: oid, qop, service
        x.skip_opaque()
        x.skip(2 * WORD)


def _gdd_non_fatal(x: Xdr, st: dict) -> bool:
    status = x.u32()
    if status == GDD4_OK:  # cookieverf, stateid, notification, child/dir attributes
        x.skip(NFS4_VERIFIER_SIZE + STATEID4)
        _bitmap(x, st)
        _bitmap(x, st)
        _bitmap(x, st)
    elif status == GDD4_UNAVAIL:
        x.skip(WORD)
    return status not in (GDD4_OK, GDD4_UNAVAIL)


_LOCK4DENIED = _seq(HYPER + HYPER + WORD, _owner)  # offset, length, locktype, owner
_SECINFO4RES = _array_of(_secinfo)
_CHANGE_INFO = _seq(CHANGE_INFO4)
RESULTS: dict[int, Step] = {
    OP_ACCESS: _seq(2 * WORD),
    OP_CLOSE: _seq(STATEID4),
    OP_COMMIT: _verifier,
    OP_CREATE: _seq(CHANGE_INFO4, _bitmap),
    OP_DELEGPURGE: _void,
    OP_DELEGRETURN: _void,
    OP_GETATTR: _fattr,
    OP_GETFH: _fh,
    OP_LINK: _CHANGE_INFO,
    OP_LOCK: _seq(STATEID4),
    OP_LOCKT: _void,
    OP_LOCKU: _seq(STATEID4),
    OP_LOOKUP: _void,
    OP_LOOKUPP: _void,
    OP_NVERIFY: _void,
    # stateid, cinfo, rflags, attrset, delegation
    OP_OPEN: _seq(STATEID4 + CHANGE_INFO4 + WORD, _bitmap, _open_delegation),
    OP_OPENATTR: _void,
    OP_OPEN_CONFIRM: _seq(STATEID4),
    OP_OPEN_DOWNGRADE: _seq(STATEID4),
    OP_PUTFH: _void,
    OP_PUTPUBFH: _void,
    OP_PUTROOTFH: _void,
    OP_READ: _read_res,
    OP_READDIR: _seq(NFS4_VERIFIER_SIZE, _dirlist),
    OP_READLINK: _opaque,
    OP_REMOVE: _CHANGE_INFO,
    OP_RENAME: _seq(2 * CHANGE_INFO4),
    OP_RENEW: _void,
    OP_RESTOREFH: _void,
    OP_SAVEFH: _void,
    OP_SECINFO: _SECINFO4RES,
    OP_SETATTR: _bitmap,
    OP_SETCLIENTID: _seq(HYPER + NFS4_VERIFIER_SIZE),
    OP_SETCLIENTID_CONFIRM: _void,
    OP_VERIFY: _void,
    OP_WRITE: _write_res,
    OP_RELEASE_LOCKOWNER: _void,
    OP_BACKCHANNEL_CTL: _void,
    OP_BIND_CONN_TO_SESSION: _seq(NFS4_SESSIONID_SIZE + 2 * WORD),
    # clientid, sequenceid, flags, state_protect4_r, server_owner4, server_scope, impl_id<1>
    OP_EXCHANGE_ID: _seq(HYPER + 2 * WORD, _state_protect, HYPER, _opaque, _opaque, _impl_ids),
    OP_CREATE_SESSION: _seq(NFS4_SESSIONID_SIZE + 2 * WORD, _channel_attrs, _channel_attrs),
    OP_DESTROY_SESSION: _void,
    OP_FREE_STATEID: _void,
    OP_GET_DIR_DELEGATION: _gdd_non_fatal,
    OP_GETDEVICEINFO: _seq(WORD, _opaque, _bitmap),  # device_addr4, notification
    OP_GETDEVICELIST: _seq(HYPER + NFS4_VERIFIER_SIZE, _array(NFS4_DEVICEID4_SIZE), WORD),
    OP_LAYOUTCOMMIT: _optional(HYPER),  # newsize4
    # return_on_close, stateid, layout4<> (offset, length, iomode, type, body)
    OP_LAYOUTGET: _seq(WORD + STATEID4, _array_of(_seq(2 * HYPER + 2 * WORD, _opaque))),
    OP_LAYOUTRETURN: _optional(STATEID4),
    OP_SECINFO_NO_NAME: _SECINFO4RES,
    OP_SEQUENCE: _sequence_res,
    OP_SET_SSV: _opaque,
    OP_TEST_STATEID: _array(WORD),
    OP_WANT_DELEGATION: _open_delegation,
    OP_DESTROY_CLIENTID: _void,
    OP_RECLAIM_COMPLETE: _void,
    OP_ALLOCATE: _void,
    OP_COPY: _seq(_write_response, 2 * WORD),  # + copy_requirements4
    OP_COPY_NOTIFY: _seq(NFSTIME4 + STATEID4, _array_of(_netloc)),
    OP_DEALLOCATE: _void,
    OP_IO_ADVISE: _bitmap,
    OP_LAYOUTERROR: _void,
    OP_LAYOUTSTATS: _void,
    OP_OFFLOAD_CANCEL: _void,
    OP_OFFLOAD_STATUS: _seq(HYPER, _array(WORD)),
    OP_READ_PLUS: _read_plus_res,
    OP_SEEK: _seq(WORD + HYPER),
    OP_WRITE_SAME: _write_response,
    OP_CLONE: _void,
    OP_GETXATTR: _opaque,
    OP_SETXATTR: _CHANGE_INFO,
    OP_LISTXATTRS: _seq(HYPER, _array_of(_opaque), WORD),
    OP_REMOVEXATTR: _CHANGE_INFO,
    OP_ILLEGAL: _void,
}
# Results with a body on a failing status: (op, status) -> step
ERROR_RESULTS: dict[tuple[int, int], Step] = {
    (OP_LOCK, NFS4ERR_DENIED): _LOCK4DENIED,
    (OP_LOCKT, NFS4ERR_DENIED): _LOCK4DENIED,
    (OP_SETCLIENTID, NFS4ERR_CLID_INUSE): _seq(_opaque, _opaque),  # clientaddr4
    (OP_GETDEVICEINFO, NFS4ERR_TOOSMALL): _seq(WORD),
    (OP_LAYOUTGET, NFS4ERR_LAYOUTTRYLATER): _seq(WORD),
    (OP_COPY, NFS4ERR_OFFLOAD_NO_REQS): _seq(2 * WORD),
}
# Results whose body follows the status whatever it is
ANY_STATUS_RESULTS = frozenset((OP_SETATTR,))

# --- callback operations ---


def _cb_sequence_args(x: Xdr, st: dict) -> bool:
    _session_slot(x, st)
    x.skip(2 * WORD)  # highest_slotid, cachethis
    # referring_call_list4<>: sessionid, referring_call4<> (sequenceid, slotid)
    return bool(_REFERRING_CALL_LISTS(x, st))


_REFERRING_CALL_LISTS = _array_of(_seq(NFS4_SESSIONID_SIZE, _array(2 * WORD)))


def _cb_sequence_res(x: Xdr, st: dict) -> None:
    _session_slot(x, st)
    x.skip(2 * WORD)  # highest_slotid, target_highest_slotid


def _cb_layoutrecall(x: Xdr, st: dict) -> bool:
    x.skip(3 * WORD)  # type, iomode, changed
    kind = x.u32()
    if kind == LAYOUT4_RET_REC_FILE:  # fh, offset, length, stateid
        _fh(x, st)
        x.skip(2 * HYPER + STATEID4)
    elif kind == LAYOUT4_RET_REC_FSID:
        x.skip(2 * HYPER)
    return kind not in (LAYOUT4_RET_REC_FILE, LAYOUT4_RET_REC_FSID, LAYOUT4_RET_REC_ALL)


def _cb_offload(x: Xdr, st: dict) -> None:
    _fh(x, st)
    x.skip(STATEID4)
    if x.u32() == NFS4_OK:  # offload_info4
        _write_response(x, st)
    else:
        x.skip(HYPER)  # bytes copied


CB_ARGS: dict[int, Step] = {
    OP_CB_GETATTR: _seq(_fh, _bitmap),
    OP_CB_RECALL: _seq(STATEID4 + WORD, _fh),
    OP_CB_LAYOUTRECALL: _cb_layoutrecall,
    OP_CB_NOTIFY: _seq(STATEID4, _fh, _array_of(_notify4)),
    OP_CB_PUSH_DELEG: _seq(_fh, _open_delegation),
    OP_CB_RECALL_ANY: _seq(WORD, _bitmap),
    OP_CB_RECALLABLE_OBJ_AVAIL: _seq(WORD, _bitmap),
    OP_CB_RECALL_SLOT: _seq(WORD),
    OP_CB_SEQUENCE: _cb_sequence_args,
    OP_CB_WANTS_CANCELLED: _seq(2 * WORD),
    OP_CB_NOTIFY_LOCK: _seq(_fh, _owner),
    OP_CB_NOTIFY_DEVICEID: _array_of(_notify4),
    OP_CB_OFFLOAD: _cb_offload,
    OP_CB_ILLEGAL: _void,
}
CB_RESULTS: dict[int, Step] = dict.fromkeys(CB_OPERATIONS, _void)
CB_RESULTS[OP_CB_GETATTR] = _fattr
CB_RESULTS[OP_CB_SEQUENCE] = _cb_sequence_res

# --- COMPOUND walking ---

_NFS, _CB = COMPOUND_PROG, CB_COMPOUND_PROG


def _walk_args(x: Xdr, table: dict[int, Step], st: dict) -> tuple[list[int], str]:
    """Walk argarray<>; returns the opcodes read and the outcome."""
    ops: list[int] = []
    for _ in range(x.u32()):
        opnum = x.u32()
        if not x.ok:
            break
        ops.append(opnum)
        step = table.get(opnum)
        if step is None:
            return ops, DECODE_PARTIAL
        if step(x, st):
            return ops, DECODE_PARTIAL if x.ok else DECODE_TRUNCATED
        if not x.ok:
            break
    return ops, DECODE_OK if x.ok else DECODE_TRUNCATED


def _walk_results(
    x: Xdr, table: dict[int, Step], errors: dict[tuple[int, int], Step], st: dict
) -> tuple[list[int], list[int], str]:
    """Walk resarray<>; returns the opcodes, their statuses and the outcome."""
    ops: list[int] = []
    statuses: list[int] = []
    for _ in range(x.u32()):
        opnum = x.u32()
        if not x.ok:
            break
        ops.append(opnum)
        status = x.u32()  # every result union starts with its nfsstat4
        if not x.ok:
            break
        statuses.append(status)
        step = table.get(opnum)
        if step is None:
            return ops, statuses, DECODE_PARTIAL
        if status != NFS4_OK and opnum not in ANY_STATUS_RESULTS:
            step = errors.get((opnum, status), _void)
        if step(x, st):
            return ops, statuses, DECODE_PARTIAL if x.ok else DECODE_TRUNCATED
        if not x.ok:
            break
    return ops, statuses, DECODE_OK if x.ok else DECODE_TRUNCATED


def _finish(st: dict, ops: list[int], outcome: str, prog: tuple) -> tuple:
    op, names = compound_names(ops, prog)
    st["op"] = op
    if names:
        st["ops"] = names
    st["nfs_decode"] = outcome
    return fields(**st)


def _call(buf: bytes, off: int, table: dict[int, Step], prog: tuple) -> tuple:
    x = Xdr(buf, off)
    x.skip_opaque()  # tag
    minor = x.u32()
    if not x.ok:
        return fields(op=prog[3], nfs_decode=DECODE_TRUNCATED)
    st: dict = {"minor": minor}
    if prog is _CB:
        x.skip(WORD)  # callback_ident
    ops, outcome = _walk_args(x, table, st)
    return _finish(st, ops, outcome, prog)


def _reply(buf: bytes, off: int, table: dict, errors: dict, prog: tuple) -> tuple:
    return _reply_ops(buf, off, table, errors, prog)[0]


def _reply_ops(
    buf: bytes, off: int, table: dict, errors: dict, prog: tuple
) -> tuple[tuple, list[int]]:
    """The reply's fields and the opcodes of its results."""
    x = Xdr(buf, off)
    status = x.u32()
    if not x.ok:
        return fields(op=prog[3], nfs_decode=DECODE_TRUNCATED), []
    st: dict = {"nfs_status": status}
    x.skip_opaque()  # tag
    ops, statuses, outcome = _walk_results(x, table, errors, st)
    if statuses:
        st["op_status"] = " ".join(map(str, statuses))
    return _finish(st, ops, outcome, prog), ops


_NULL = fields(op="NULL", nfs_decode=DECODE_OK)
_CB_NULL = fields(op="CB_NULL", nfs_decode=DECODE_OK)


def decode_call(buf: bytes, off: int, proc: int) -> tuple:
    """NFSv4 call arguments at buf[off:] (NFS_FIELDS order)."""
    if proc == NFSPROC4_COMPOUND:
        return _call(buf, off, ARGS, _NFS)
    return _NULL if proc == NFSPROC4_NULL else fields(op=f"proc{proc}", nfs_decode=DECODE_OK)


def decode_reply(buf: bytes, off: int, proc: int) -> tuple:
    """NFSv4 reply results at buf[off:] (NFS_FIELDS order)."""
    if proc == NFSPROC4_COMPOUND:
        return _reply(buf, off, RESULTS, ERROR_RESULTS, _NFS)
    return _NULL if proc == NFSPROC4_NULL else fields(op=f"proc{proc}", nfs_decode=DECODE_OK)


def decode_reply_without_call(buf: bytes, off: int) -> tuple | None:
    """A reply whose call was not captured, on a flow whose calls are NFSv4: its
    results read as a COMPOUND reply (COMPOUND4res is self-describing: status,
    tag, then each result starts with its opcode and status; a walk stopped
    early keeps what it read).  None when it does not read as one: no result
    read, or the first one's opcode unknown (a NULL reply, or not NFSv4)."""
    out, ops = _reply_ops(buf, off, RESULTS, ERROR_RESULTS, _NFS)
    return out if ops and ops[0] in RESULTS else None


def decode_cb_call(buf: bytes, off: int, proc: int) -> tuple:
    """NFSv4 callback program call arguments at buf[off:]."""
    if proc == CB_COMPOUND:
        return _call(buf, off, CB_ARGS, _CB)
    return _CB_NULL if proc == CB_NULL else fields(op=f"proc{proc}", nfs_decode=DECODE_OK)


def decode_cb_reply(buf: bytes, off: int, proc: int) -> tuple:
    """NFSv4 callback program reply results at buf[off:]."""
    if proc == CB_COMPOUND:
        return _reply(buf, off, CB_RESULTS, {}, _CB)
    return _CB_NULL if proc == CB_NULL else fields(op=f"proc{proc}", nfs_decode=DECODE_OK)
