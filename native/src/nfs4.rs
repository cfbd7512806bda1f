//! NFSv4.x COMPOUND decoding (mirrors the steps and walks of `parsers/nfs4.py`;
//! the protocol's numbers are generated from `protocol/nfs4.py` into tables.rs).

use crate::decoders::{Fields, Kind};
use crate::nfs3::outcome;
use crate::tables::*;
use crate::xdr::{Xdr, NO_LIMIT};

// ---- NFSv4.x COMPOUND (RFC 7530/7531, 8881/5662, 7862/7863, 8276) ----------------

// Operation numbers, item sizes and has_step: generated (tables.rs).
const STATEID_RANGE: u64 = STATEID4 + HYPER + HYPER;

type St<'a> = Fields<'a>;

fn bitmap(x: &mut Xdr) {
    let n = x.u32() as u64;
    x.skip(n * WORD);
}

fn fattr(x: &mut Xdr) {
    bitmap(x);
    x.skip_opaque(NO_LIMIT);
}

fn owner(x: &mut Xdr) {
    x.skip(HYPER);
    x.skip_opaque(OPAQUE_LIMIT);
}

fn fh<'a>(x: &mut Xdr<'a>, st: &mut St<'a>) {
    let v = x.opaque(NFS4_FHSIZE);
    if x.ok {
        st.fh = Some(v);
    }
}

fn name<'a>(x: &mut Xdr<'a>, st: &mut St<'a>) {
    let v = x.opaque(NO_LIMIT);
    if x.ok {
        st.name = Some(v);
    }
}

fn opaque(x: &mut Xdr) {
    x.skip_opaque(NO_LIMIT);
}

/// Step over WRITE / READ data; if it was not captured, stop at the capture's end.
fn skip_payload(x: &mut Xdr, n: u64) {
    if x.ok {
        x.pos = ((x.pos as u64 + ((n + 3) & !3)).min(x.end as u64)) as usize;
    }
}

fn session_slot<'a>(x: &mut Xdr<'a>, st: &mut St<'a>) {
    let session = x.fixed(SESSIONID4);
    if !x.ok {
        return;
    }
    st.session = Some(session);
    let seqid = x.u32();
    if !x.ok {
        return;
    }
    st.seqid = Some(seqid);
    let slot = x.u32();
    if x.ok {
        st.slot = Some(slot);
    }
}

fn nfsace(x: &mut Xdr) {
    x.skip(3 * WORD);
    x.skip_opaque(NO_LIMIT);
}

/// open_delegation4; true when it cannot be stepped over.
fn open_delegation(x: &mut Xdr) -> bool {
    match x.u32() {
        0 => false,
        1 => {
            x.skip(STATEID4 + WORD);
            nfsace(x);
            false
        }
        2 => {
            x.skip(STATEID4 + WORD);
            let limit = x.u32();
            if limit != 1 && limit != 2 {
                return true;
            }
            x.skip(HYPER);
            nfsace(x);
            false
        }
        3 => {
            let why = x.u32();
            if why == 1 || why == 2 {
                x.skip(WORD);
            }
            false
        }
        _ => true,
    }
}

fn cb_sec_parms(x: &mut Xdr) -> bool {
    let flavor = x.u32();
    if flavor == AUTH_SYS {
        x.skip(WORD);
        x.skip_opaque(255);
        x.skip(2 * WORD);
        let n = x.u32() as u64;
        x.skip(n * WORD);
    } else if flavor == RPCSEC_GSS {
        x.skip(WORD);
        x.skip_opaque(NO_LIMIT);
        x.skip_opaque(NO_LIMIT);
    }
    !(flavor == AUTH_NONE || flavor == AUTH_SYS || flavor == RPCSEC_GSS)
}

/// A counted array of variable items; true when an item cannot be stepped over.
fn array_of(x: &mut Xdr, mut item: impl FnMut(&mut Xdr) -> bool) -> bool {
    let n = x.u32();
    for _ in 0..n {
        if !x.ok {
            return false;
        }
        if item(x) {
            return true;
        }
    }
    false
}

fn array(x: &mut Xdr, size: u64) {
    let n = x.u32() as u64;
    x.skip(n * size);
}

fn optional(x: &mut Xdr, size: u64) {
    if x.boolean() {
        x.skip(size);
    }
}

fn channel_attrs(x: &mut Xdr) {
    x.skip(6 * WORD);
    let n = x.u32() as u64;
    x.skip(n * WORD);
}

fn state_protect(x: &mut Xdr) -> bool {
    let how = x.u32();
    if how == 1 {
        bitmap(x);
        bitmap(x);
    }
    !(how == 0 || how == 1)
}

fn impl_ids(x: &mut Xdr) -> bool {
    array_of(x, |x| {
        opaque(x);
        opaque(x);
        x.skip(NFSTIME4);
        false
    })
}

fn netloc(x: &mut Xdr) -> bool {
    match x.u32() {
        1 | 2 => {
            opaque(x);
            false
        }
        3 => {
            opaque(x);
            opaque(x);
            false
        }
        _ => true,
    }
}

fn write_response(x: &mut Xdr) {
    let n = x.u32() as u64;
    x.skip(n * STATEID4);
    x.skip(HYPER + WORD + VERIFIER4);
}

fn offset_count(x: &mut Xdr, st: &mut St) {
    let offset = x.u64();
    if !x.ok {
        return;
    }
    st.offset = Some(offset);
    let count = x.u32();
    if x.ok {
        st.count = Some(count as u64);
    }
}

fn write_args(x: &mut Xdr, st: &mut St) {
    x.skip(STATEID4);
    let offset = x.u64();
    if !x.ok {
        return;
    }
    if st.offset.is_none() {
        st.offset = Some(offset);
    }
    let stable = x.u32();
    if !x.ok {
        return;
    }
    st.stable = Some(stable);
    let n = x.u32();
    if !x.ok {
        return;
    }
    st.count = Some(st.count.unwrap_or(0) + n as u64); // summed over the WRITEs
    skip_payload(x, n as u64);
}

fn create_args<'a>(x: &mut Xdr<'a>, st: &mut St<'a>) {
    let kind = x.u32();
    if kind == 5 {
        opaque(x);
    } else if kind == 3 || kind == 4 {
        x.skip(2 * WORD);
    }
    name(x, st);
    fattr(x);
}

fn lock_args(x: &mut Xdr) {
    x.skip(WORD + WORD + HYPER + HYPER);
    if x.boolean() {
        x.skip(WORD + STATEID4 + WORD);
        owner(x);
    } else {
        x.skip(STATEID4 + WORD);
    }
}

fn open_args<'a>(x: &mut Xdr<'a>, st: &mut St<'a>) -> bool {
    x.skip(3 * WORD);
    owner(x);
    if x.u32() == 1 {
        match x.u32() {
            0 | 1 => fattr(x),
            2 => x.skip(VERIFIER4),
            3 => {
                x.skip(VERIFIER4);
                fattr(x);
            }
            _ => return true,
        }
    }
    let claim = x.u32();
    match claim {
        0 | 3 => name(x, st),
        2 => {
            x.skip(STATEID4);
            name(x, st);
        }
        1 => x.skip(WORD),
        5 => x.skip(STATEID4),
        _ => {}
    }
    claim > 6
}

fn layoutreturn(x: &mut Xdr) {
    if x.u32() == 1 {
        x.skip(HYPER + HYPER + STATEID4);
        opaque(x);
    }
}

fn deleg_claim(x: &mut Xdr) -> bool {
    let claim = x.u32();
    if claim == 1 {
        x.skip(WORD);
    }
    !(claim == 1 || claim == 4 || claim == 6)
}

/// Step over one operation's arguments: None = no step known (unknown op),
/// Some(true) = cannot step over it.
fn args_step<'a>(op: u32, x: &mut Xdr<'a>, st: &mut St<'a>) -> Option<bool> {
    let r = match op {
        OP_ACCESS => {
            x.skip(WORD);
            false
        }
        OP_CLOSE => {
            x.skip(WORD + STATEID4);
            false
        }
        OP_COMMIT => {
            offset_count(x, st);
            false
        }
        OP_CREATE => {
            create_args(x, st);
            false
        }
        OP_DELEGPURGE => {
            x.skip(HYPER);
            false
        }
        OP_DELEGRETURN => {
            x.skip(STATEID4);
            false
        }
        OP_GETATTR => {
            bitmap(x);
            false
        }
        OP_GETFH | OP_LOOKUPP | OP_PUTPUBFH | OP_PUTROOTFH | OP_READLINK | OP_RESTOREFH
        | OP_SAVEFH | OP_ILLEGAL => false,
        OP_LINK | OP_LOOKUP | OP_REMOVE => {
            name(x, st);
            false
        }
        OP_LOCK => {
            lock_args(x);
            false
        }
        OP_LOCKT => {
            x.skip(WORD + HYPER + HYPER);
            owner(x);
            false
        }
        OP_LOCKU => {
            x.skip(WORD + WORD + STATEID4 + HYPER + HYPER);
            false
        }
        OP_NVERIFY | OP_VERIFY => {
            fattr(x);
            false
        }
        OP_OPEN => open_args(x, st),
        OP_OPENATTR => {
            x.skip(WORD);
            false
        }
        OP_OPEN_CONFIRM => {
            x.skip(STATEID4 + WORD);
            false
        }
        OP_OPEN_DOWNGRADE => {
            x.skip(STATEID4 + 3 * WORD);
            false
        }
        OP_PUTFH => {
            fh(x, st);
            false
        }
        OP_READ | OP_READ_PLUS => {
            x.skip(STATEID4);
            offset_count(x, st);
            false
        }
        OP_READDIR => {
            x.skip(HYPER + VERIFIER4 + 2 * WORD);
            bitmap(x);
            false
        }
        OP_RENAME => {
            name(x, st);
            opaque(x);
            false
        }
        OP_RENEW | OP_DESTROY_CLIENTID => {
            x.skip(HYPER);
            false
        }
        OP_SECINFO | OP_GETXATTR | OP_REMOVEXATTR => {
            opaque(x);
            false
        }
        OP_SETATTR => {
            x.skip(STATEID4);
            fattr(x);
            false
        }
        OP_SETCLIENTID => {
            x.skip(VERIFIER4);
            opaque(x);
            x.skip(WORD);
            opaque(x);
            opaque(x);
            x.skip(WORD);
            false
        }
        OP_SETCLIENTID_CONFIRM => {
            x.skip(HYPER + VERIFIER4);
            false
        }
        OP_WRITE => {
            write_args(x, st);
            false
        }
        OP_RELEASE_LOCKOWNER => {
            owner(x);
            false
        }
        OP_BACKCHANNEL_CTL => {
            x.skip(WORD);
            array_of(x, cb_sec_parms)
        }
        OP_BIND_CONN_TO_SESSION => {
            x.skip(SESSIONID4 + 2 * WORD);
            false
        }
        OP_EXCHANGE_ID => {
            x.skip(VERIFIER4);
            opaque(x);
            x.skip(WORD);
            state_protect(x) || impl_ids(x)
        }
        OP_CREATE_SESSION => {
            x.skip(HYPER + 2 * WORD);
            channel_attrs(x);
            channel_attrs(x);
            x.skip(WORD);
            array_of(x, cb_sec_parms)
        }
        OP_DESTROY_SESSION => {
            x.skip(SESSIONID4);
            false
        }
        OP_FREE_STATEID | OP_OFFLOAD_CANCEL | OP_OFFLOAD_STATUS => {
            x.skip(STATEID4);
            false
        }
        OP_GET_DIR_DELEGATION => {
            x.skip(WORD);
            bitmap(x);
            x.skip(2 * NFSTIME4);
            bitmap(x);
            bitmap(x);
            false
        }
        OP_GETDEVICEINFO => {
            x.skip(DEVICEID4 + 2 * WORD);
            bitmap(x);
            false
        }
        OP_GETDEVICELIST => {
            x.skip(2 * WORD + HYPER + VERIFIER4);
            false
        }
        OP_LAYOUTCOMMIT => {
            x.skip(HYPER + HYPER + WORD + STATEID4);
            optional(x, HYPER);
            optional(x, NFSTIME4);
            x.skip(WORD);
            opaque(x);
            false
        }
        OP_LAYOUTGET => {
            x.skip(3 * WORD + 3 * HYPER + STATEID4 + WORD);
            false
        }
        OP_LAYOUTRETURN => {
            x.skip(3 * WORD);
            layoutreturn(x);
            false
        }
        OP_SECINFO_NO_NAME | OP_RECLAIM_COMPLETE => {
            x.skip(WORD);
            false
        }
        OP_SEQUENCE => {
            session_slot(x, st);
            x.skip(2 * WORD);
            false
        }
        OP_SET_SSV => {
            opaque(x);
            opaque(x);
            false
        }
        OP_TEST_STATEID => {
            array(x, STATEID4);
            false
        }
        OP_WANT_DELEGATION => {
            x.skip(WORD);
            deleg_claim(x)
        }
        OP_ALLOCATE | OP_DEALLOCATE => {
            x.skip(STATEID_RANGE);
            false
        }
        OP_COPY => {
            x.skip(2 * STATEID4 + 3 * HYPER + 2 * WORD);
            array_of(x, netloc)
        }
        OP_COPY_NOTIFY => {
            x.skip(STATEID4);
            netloc(x)
        }
        OP_IO_ADVISE => {
            x.skip(STATEID_RANGE);
            bitmap(x);
            false
        }
        OP_LAYOUTERROR => {
            x.skip(STATEID_RANGE);
            array(x, DEVICEID4 + 2 * WORD);
            false
        }
        OP_LAYOUTSTATS => {
            x.skip(STATEID_RANGE + 4 * HYPER + DEVICEID4 + WORD);
            opaque(x);
            false
        }
        OP_SEEK => {
            x.skip(STATEID4 + HYPER + WORD);
            false
        }
        OP_WRITE_SAME => {
            x.skip(STATEID4 + WORD + 4 * HYPER + WORD + HYPER);
            opaque(x);
            false
        }
        OP_CLONE => {
            x.skip(2 * STATEID4 + 3 * HYPER);
            false
        }
        OP_SETXATTR => {
            x.skip(WORD);
            opaque(x);
            opaque(x);
            false
        }
        OP_LISTXATTRS => {
            x.skip(HYPER + WORD);
            false
        }
        _ => return None,
    };
    Some(r)
}

fn verifier<'a>(x: &mut Xdr<'a>, st: &mut St<'a>) {
    let v = x.fixed(VERIFIER4);
    if x.ok {
        st.verifier = Some(v);
    }
}

fn read_res(x: &mut Xdr, st: &mut St) {
    let eof = x.u32();
    if !x.ok {
        return;
    }
    st.eof = Some(eof);
    let n = x.u32();
    if x.ok {
        st.count = Some(n as u64);
        skip_payload(x, n as u64);
    }
}

fn read_plus_res(x: &mut Xdr, st: &mut St) {
    let eof = x.u32();
    if !x.ok {
        return;
    }
    st.eof = Some(eof);
    let mut total = 0u64;
    let n = x.u32();
    for _ in 0..n {
        let kind = x.u32();
        if !x.ok {
            return;
        }
        if kind == 0 {
            x.skip(HYPER);
            let k = x.u32() as u64;
            total += k;
            skip_payload(x, k);
        } else if kind == 1 {
            x.skip(2 * HYPER);
        }
    }
    if x.ok {
        st.count = Some(total);
    }
}

fn dirlist(x: &mut Xdr) {
    while x.boolean() {
        x.skip(HYPER);
        opaque(x);
        fattr(x);
    }
    x.skip(WORD);
}

fn secinfo(x: &mut Xdr) -> bool {
    if x.u32() == RPCSEC_GSS {
        opaque(x);
        x.skip(2 * WORD);
    }
    false
}

fn gdd_non_fatal(x: &mut Xdr) -> bool {
    let status = x.u32();
    if status == 0 {
        x.skip(VERIFIER4 + STATEID4);
        bitmap(x);
        bitmap(x);
        bitmap(x);
    } else if status == 1 {
        x.skip(WORD);
    }
    !(status == 0 || status == 1)
}

fn lock4denied(x: &mut Xdr) -> bool {
    x.skip(HYPER + HYPER + WORD);
    owner(x);
    false
}

/// Step over one operation's result body (after its status).
fn results_step<'a>(op: u32, x: &mut Xdr<'a>, st: &mut St<'a>) -> Option<bool> {
    let r = match op {
        OP_ACCESS => {
            x.skip(2 * WORD);
            false
        }
        OP_CLOSE | OP_LOCK | OP_LOCKU | OP_OPEN_CONFIRM | OP_OPEN_DOWNGRADE => {
            x.skip(STATEID4);
            false
        }
        OP_COMMIT => {
            verifier(x, st);
            false
        }
        OP_CREATE => {
            x.skip(CHANGE_INFO4);
            bitmap(x);
            false
        }
        OP_DELEGPURGE
        | OP_DELEGRETURN
        | OP_LOCKT
        | OP_LOOKUP
        | OP_LOOKUPP
        | OP_NVERIFY
        | OP_OPENATTR
        | OP_PUTFH
        | OP_PUTPUBFH
        | OP_PUTROOTFH
        | OP_RENEW
        | OP_RESTOREFH
        | OP_SAVEFH
        | OP_SETCLIENTID_CONFIRM
        | OP_VERIFY
        | OP_RELEASE_LOCKOWNER
        | OP_BACKCHANNEL_CTL
        | OP_DESTROY_SESSION
        | OP_FREE_STATEID
        | OP_DESTROY_CLIENTID
        | OP_RECLAIM_COMPLETE
        | OP_ALLOCATE
        | OP_DEALLOCATE
        | OP_LAYOUTERROR
        | OP_LAYOUTSTATS
        | OP_OFFLOAD_CANCEL
        | OP_CLONE
        | OP_ILLEGAL => false,
        OP_GETATTR => {
            fattr(x);
            false
        }
        OP_GETFH => {
            fh(x, st);
            false
        }
        OP_LINK | OP_REMOVE | OP_SETXATTR | OP_REMOVEXATTR => {
            x.skip(CHANGE_INFO4);
            false
        }
        OP_OPEN => {
            x.skip(STATEID4 + CHANGE_INFO4 + WORD);
            bitmap(x);
            open_delegation(x)
        }
        OP_READ => {
            read_res(x, st);
            false
        }
        OP_READDIR => {
            x.skip(VERIFIER4);
            dirlist(x);
            false
        }
        OP_READLINK | OP_SET_SSV | OP_GETXATTR => {
            opaque(x);
            false
        }
        OP_RENAME => {
            x.skip(2 * CHANGE_INFO4);
            false
        }
        OP_SECINFO | OP_SECINFO_NO_NAME => array_of(x, secinfo),
        OP_SETATTR | OP_IO_ADVISE => {
            bitmap(x);
            false
        }
        OP_SETCLIENTID => {
            x.skip(HYPER + VERIFIER4);
            false
        }
        OP_WRITE => {
            let count = x.u32();
            if x.ok {
                st.count = Some(count as u64);
                let committed = x.u32();
                if x.ok {
                    st.committed = Some(committed);
                    verifier(x, st);
                }
            }
            false
        }
        OP_BIND_CONN_TO_SESSION => {
            x.skip(SESSIONID4 + 2 * WORD);
            false
        }
        OP_EXCHANGE_ID => {
            x.skip(HYPER + 2 * WORD);
            if state_protect(x) {
                return Some(true);
            }
            x.skip(HYPER);
            opaque(x);
            opaque(x);
            impl_ids(x)
        }
        OP_CREATE_SESSION => {
            x.skip(SESSIONID4 + 2 * WORD);
            channel_attrs(x);
            channel_attrs(x);
            false
        }
        OP_GET_DIR_DELEGATION => gdd_non_fatal(x),
        OP_GETDEVICEINFO => {
            x.skip(WORD);
            opaque(x);
            bitmap(x);
            false
        }
        OP_GETDEVICELIST => {
            x.skip(HYPER + VERIFIER4);
            array(x, DEVICEID4);
            x.skip(WORD);
            false
        }
        OP_LAYOUTCOMMIT => {
            optional(x, HYPER);
            false
        }
        OP_LAYOUTGET => {
            x.skip(WORD + STATEID4);
            array_of(x, |x| {
                x.skip(2 * HYPER + 2 * WORD);
                opaque(x);
                false
            })
        }
        OP_LAYOUTRETURN => {
            optional(x, STATEID4);
            false
        }
        OP_SEQUENCE => {
            session_slot(x, st);
            x.skip(3 * WORD);
            false
        }
        OP_TEST_STATEID => {
            array(x, WORD);
            false
        }
        OP_WANT_DELEGATION => open_delegation(x),
        OP_COPY => {
            write_response(x);
            x.skip(2 * WORD);
            false
        }
        OP_COPY_NOTIFY => {
            x.skip(NFSTIME4 + STATEID4);
            array_of(x, netloc)
        }
        OP_OFFLOAD_STATUS => {
            x.skip(HYPER);
            array(x, WORD);
            false
        }
        OP_READ_PLUS => {
            read_plus_res(x, st);
            false
        }
        OP_SEEK => {
            x.skip(WORD + HYPER);
            false
        }
        OP_WRITE_SAME => {
            write_response(x);
            false
        }
        OP_LISTXATTRS => {
            x.skip(HYPER);
            array_of(x, |x| {
                opaque(x);
                false
            });
            x.skip(WORD);
            false
        }
        _ => return None,
    };
    Some(r)
}

/// Result bodies on a failing status (nfs4.ERROR_RESULTS); others are void.
fn error_step(op: u32, status: u32, x: &mut Xdr) -> bool {
    match (op, status) {
        (OP_LOCK, NFS4ERR_DENIED) | (OP_LOCKT, NFS4ERR_DENIED) => lock4denied(x),
        (OP_SETCLIENTID, NFS4ERR_CLID_INUSE) => {
            opaque(x);
            opaque(x);
            false
        }
        (OP_GETDEVICEINFO, NFS4ERR_TOOSMALL) | (OP_LAYOUTGET, NFS4ERR_LAYOUTTRYLATER) => {
            x.skip(WORD);
            false
        }
        (OP_COPY, NFS4ERR_OFFLOAD_NO_REQS) => {
            x.skip(2 * WORD);
            false
        }
        _ => false,
    }
}

pub(crate) fn compound_call(buf: &[u8], off: usize) -> Fields<'_> {
    let mut st = Fields {
        kind: Kind::Compound as u8,
        ..Default::default()
    };
    let mut x = Xdr::new(buf, off);
    x.skip_opaque(NO_LIMIT); // tag
    let minor = x.u32();
    if !x.ok {
        st.decode = DECODE_TRUNCATED;
        return st;
    }
    st.minor = Some(minor);
    st.decode = walk(&mut x, &mut st, false, |op, _, x, st| args_step(op, x, st));
    st
}

pub(crate) fn compound_reply(buf: &[u8], off: usize) -> Fields<'_> {
    let mut st = Fields {
        kind: Kind::Compound as u8,
        ..Default::default()
    };
    let mut x = Xdr::new(buf, off);
    let status = x.u32();
    if !x.ok {
        st.decode = DECODE_TRUNCATED;
        return st;
    }
    st.nfs_status = Some(status);
    x.skip_opaque(NO_LIMIT); // tag
    st.decode = walk(&mut x, &mut st, true, |op, status, x, st| {
        if !has_step(op) {
            None
        } else if status != NFS4_OK && op != OP_SETATTR {
            // (SETATTR's body follows its status whatever it is)
            Some(error_step(op, status, x))
        } else {
            results_step(op, x, st)
        }
    });
    st
}

/// Walk a COMPOUND's argarray<> or (`results`) resarray<> (nfs4._walk_args /
/// nfs4._walk_results): each operation's opcode into `st.ops` and, in a
/// reply, the nfsstat4 every result union starts with into `st.statuses`;
/// `step(op, status, x, st)` steps over its body (None: no step known for
/// it, Some(true): cannot step over it).  Returns the nfs_decode outcome.
fn walk<'a>(
    x: &mut Xdr<'a>,
    st: &mut Fields<'a>,
    results: bool,
    mut step: impl FnMut(u32, u32, &mut Xdr<'a>, &mut Fields<'a>) -> Option<bool>,
) -> u8 {
    let n = x.u32();
    for _ in 0..n {
        let op = x.u32();
        if !x.ok {
            break;
        }
        st.ops.push(op);
        let mut status = NFS4_OK;
        if results {
            status = x.u32(); // every result union starts with its nfsstat4
            if !x.ok {
                break;
            }
            st.statuses.push(status);
        }
        match step(op, status, x, st) {
            None => return DECODE_PARTIAL,
            Some(true) => {
                return if x.ok {
                    DECODE_PARTIAL
                } else {
                    DECODE_TRUNCATED
                }
            }
            Some(false) => {}
        }
        if !x.ok {
            break;
        }
    }
    outcome(x)
}
