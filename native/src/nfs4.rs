//! NFSv4.x COMPOUND and CB_COMPOUND decoding (RFC 7530/7531, 8881/5662,
//! 7862/7863, 8276): the combinators and named steps (hand-written primitives)
//! and the COMPOUND walks.
//! The step programs over each operation's arguments and results are generated
//! from nfstrace/protocol/nfs4_steps.py's tables into nfs4_steps.rs, calling the
//! named steps here by name (`Named("open_args")` is `open_args`), and the
//! protocol's numbers from `protocol/nfs4.py` into tables.rs
//! (native/generate_tables.py).

use crate::decoders::{Fields, Kind, Spare};
use crate::nfs3::outcome;
use crate::tables::*;
use crate::xdr::{Xdr, NO_LIMIT};

#[path = "nfs4_steps.rs"]
mod steps;
use steps::{
    any_status_results, args_step, cb_args_step, cb_results_step, error_results_step, results_step,
};

// ---- NFSv4.x COMPOUND (RFC 7530/7531, 8881/5662, 7862/7863, 8276) ----------------

type St<'a> = Fields<'a>;

// ---- Combinators (the generated step programs call them) ----------------------------

/// A counted array of variable items (nfs4_steps.ArrayOf); true when an item
/// cannot be stepped over.
fn array_of<'a>(
    x: &mut Xdr<'a>,
    st: &mut St<'a>,
    mut item: impl FnMut(&mut Xdr<'a>, &mut St<'a>) -> bool,
) -> bool {
    let n = x.u32();
    for _ in 0..n {
        if !x.ok {
            return false;
        }
        if item(x, st) {
            return true;
        }
    }
    false
}

/// A counted array of fixed-size items (nfs4_steps.Array).
fn array(x: &mut Xdr, size: u64) {
    let n = x.u32() as u64;
    x.skip(n * size);
}

/// A union switched on a bool: TRUE -> an item of size bytes (nfs4_steps.Optional).
fn optional(x: &mut Xdr, size: u64) {
    if x.boolean() {
        x.skip(size);
    }
}

// ---- Named steps: nfs4_steps.py's `Named("name")`, all of one signature ------------
// (`fn name<'a>(x: &mut Xdr<'a>, st: &mut St<'a>) -> bool`, true = cannot step
// over it), which the generator checks before it calls one.

fn void<'a>(_x: &mut Xdr<'a>, _st: &mut St<'a>) -> bool {
    false
}

fn opaque<'a>(x: &mut Xdr<'a>, _st: &mut St<'a>) -> bool {
    x.skip_opaque(NO_LIMIT);
    false
}

fn bitmap<'a>(x: &mut Xdr<'a>, _st: &mut St<'a>) -> bool {
    let n = x.u32() as u64;
    x.skip(n * WORD);
    false
}

fn fattr<'a>(x: &mut Xdr<'a>, _st: &mut St<'a>) -> bool {
    let n = x.u32() as u64;
    x.skip(n * WORD);
    x.skip_opaque(NO_LIMIT);
    false
}

fn owner<'a>(x: &mut Xdr<'a>, _st: &mut St<'a>) -> bool {
    x.skip(HYPER);
    x.skip_opaque(NFS4_OPAQUE_LIMIT);
    false
}

fn fh<'a>(x: &mut Xdr<'a>, st: &mut St<'a>) -> bool {
    let v = x.opaque(NFS4_FHSIZE);
    if x.ok {
        st.fh = Some(v);
    }
    false
}

fn name<'a>(x: &mut Xdr<'a>, st: &mut St<'a>) -> bool {
    let v = x.opaque(NO_LIMIT);
    if x.ok {
        st.name = Some(v);
    }
    false
}

/// Step over WRITE / READ data; if it was not captured, stop at the capture's end.
fn skip_payload(x: &mut Xdr, n: u64) {
    if x.ok {
        x.pos = ((x.pos as u64 + ((n + 3) & !3)).min(x.end as u64)) as usize;
    }
}

fn session_slot<'a>(x: &mut Xdr<'a>, st: &mut St<'a>) -> bool {
    let session = x.fixed(NFS4_SESSIONID_SIZE);
    if !x.ok {
        return false;
    }
    st.session = Some(session);
    let seqid = x.u32();
    if !x.ok {
        return false;
    }
    st.seqid = Some(seqid);
    let slot = x.u32();
    if x.ok {
        st.slot = Some(slot);
    }
    false
}

fn nfsace<'a>(x: &mut Xdr<'a>, _st: &mut St<'a>) -> bool {
    x.skip(3 * WORD);
    x.skip_opaque(NO_LIMIT);
    false
}

/// open_delegation4.
fn open_delegation<'a>(x: &mut Xdr<'a>, st: &mut St<'a>) -> bool {
    match x.u32() {
        OPEN_DELEGATE_NONE => false,
        OPEN_DELEGATE_READ => {
            // stateid, recall, permissions
            x.skip(STATEID4 + WORD);
            nfsace(x, st);
            false
        }
        OPEN_DELEGATE_WRITE => {
            // stateid, recall, space_limit, permissions
            x.skip(STATEID4 + WORD);
            if !matches!(x.u32(), NFS_LIMIT_SIZE | NFS_LIMIT_BLOCKS) {
                return true; // (both arms are 8 bytes)
            }
            x.skip(HYPER);
            nfsace(x, st);
            false
        }
        OPEN_DELEGATE_NONE_EXT => {
            // open_none_delegation4
            if matches!(x.u32(), WND4_CONTENTION | WND4_RESOURCE) {
                x.skip(WORD);
            }
            false
        }
        _ => true,
    }
}

fn cb_sec_parms<'a>(x: &mut Xdr<'a>, _st: &mut St<'a>) -> bool {
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

fn channel_attrs<'a>(x: &mut Xdr<'a>, _st: &mut St<'a>) -> bool {
    x.skip(6 * WORD);
    let n = x.u32() as u64;
    x.skip(n * WORD);
    false
}

/// state_protect4_a / state_protect4_r: SP4_SSV is not stepped over.
fn state_protect<'a>(x: &mut Xdr<'a>, st: &mut St<'a>) -> bool {
    let how = x.u32();
    if how == SP4_MACH_CRED {
        // state_protect_ops4: two bitmaps
        bitmap(x, st);
        bitmap(x, st);
    }
    !matches!(how, SP4_NONE | SP4_MACH_CRED)
}

fn netloc<'a>(x: &mut Xdr<'a>, _st: &mut St<'a>) -> bool {
    match x.u32() {
        NL4_NAME | NL4_URL => {
            x.skip_opaque(NO_LIMIT);
            false
        }
        NL4_NETADDR => {
            // netaddr4: netid, uaddr
            x.skip_opaque(NO_LIMIT);
            x.skip_opaque(NO_LIMIT);
            false
        }
        _ => true,
    }
}

fn write_response<'a>(x: &mut Xdr<'a>, _st: &mut St<'a>) -> bool {
    let n = x.u32() as u64;
    x.skip(n * STATEID4);
    x.skip(HYPER + WORD + NFS4_VERIFIER_SIZE);
    false
}

// ---- Named steps of operation arguments ---------------------------------------------

fn sequence_args<'a>(x: &mut Xdr<'a>, st: &mut St<'a>) -> bool {
    session_slot(x, st);
    x.skip(2 * WORD); // highest_slotid, cachethis
    false
}

/// READ, READ_PLUS: stateid, offset, count.
fn read_args<'a>(x: &mut Xdr<'a>, st: &mut St<'a>) -> bool {
    x.skip(STATEID4);
    offset_count(x, st);
    false
}

fn offset_count<'a>(x: &mut Xdr<'a>, st: &mut St<'a>) -> bool {
    let offset = x.u64();
    if !x.ok {
        return false;
    }
    st.offset = Some(offset);
    let count = x.u32();
    if x.ok {
        st.count = Some(count as u64);
    }
    false
}

fn write_args<'a>(x: &mut Xdr<'a>, st: &mut St<'a>) -> bool {
    x.skip(STATEID4);
    let offset = x.u64();
    if !x.ok {
        return false;
    }
    if st.offset.is_none() {
        st.offset = Some(offset);
    }
    let stable = x.u32();
    if !x.ok {
        return false;
    }
    st.stable = Some(stable);
    let n = x.u32();
    if !x.ok {
        return false;
    }
    st.count = Some(st.count.unwrap_or(0) + n as u64); // summed over the WRITEs
    skip_payload(x, n as u64);
    false
}

fn create_args<'a>(x: &mut Xdr<'a>, st: &mut St<'a>) -> bool {
    let kind = x.u32(); // createtype4
    if kind == NF4LNK {
        x.skip_opaque(NO_LIMIT);
    } else if kind == NF4BLK || kind == NF4CHR {
        x.skip(2 * WORD); // specdata4
    }
    name(x, st);
    fattr(x, st);
    false
}

fn lock_args<'a>(x: &mut Xdr<'a>, st: &mut St<'a>) -> bool {
    x.skip(WORD + WORD + HYPER + HYPER);
    if x.boolean() {
        x.skip(WORD + STATEID4 + WORD);
        owner(x, st);
    } else {
        x.skip(STATEID4 + WORD);
    }
    false
}

fn open_args<'a>(x: &mut Xdr<'a>, st: &mut St<'a>) -> bool {
    x.skip(3 * WORD); // seqid, share_access, share_deny
    owner(x, st);
    if x.u32() == OPEN4_CREATE {
        match x.u32() {
            UNCHECKED4 | GUARDED4 => {
                fattr(x, st);
            }
            EXCLUSIVE4 => x.skip(NFS4_VERIFIER_SIZE),
            EXCLUSIVE4_1 => {
                x.skip(NFS4_VERIFIER_SIZE);
                fattr(x, st);
            }
            _ => return true,
        }
    }
    let claim = x.u32();
    match claim {
        CLAIM_NULL | CLAIM_DELEGATE_PREV => {
            name(x, st);
        }
        CLAIM_DELEGATE_CUR => {
            x.skip(STATEID4);
            name(x, st);
        }
        CLAIM_PREVIOUS => x.skip(WORD),
        CLAIM_DELEG_CUR_FH => x.skip(STATEID4),
        _ => {}
    }
    claim > CLAIM_DELEG_PREV_FH
}

fn layoutreturn<'a>(x: &mut Xdr<'a>, _st: &mut St<'a>) -> bool {
    if x.u32() == LAYOUT4_RET_REC_FILE {
        // offset, length, stateid, body; FSID/ALL: void
        x.skip(HYPER + HYPER + STATEID4);
        x.skip_opaque(NO_LIMIT);
    }
    false
}

fn deleg_claim<'a>(x: &mut Xdr<'a>, _st: &mut St<'a>) -> bool {
    let claim = x.u32();
    if claim == CLAIM_PREVIOUS {
        x.skip(WORD);
    }
    !matches!(claim, CLAIM_PREVIOUS | CLAIM_FH | CLAIM_DELEG_PREV_FH)
}

// ---- Named steps of operation results -----------------------------------------------

fn sequence_res<'a>(x: &mut Xdr<'a>, st: &mut St<'a>) -> bool {
    session_slot(x, st);
    x.skip(3 * WORD); // highest_slotid, target_highest_slotid, status_flags
    false
}

fn write_res<'a>(x: &mut Xdr<'a>, st: &mut St<'a>) -> bool {
    let count = x.u32();
    if !x.ok {
        return false;
    }
    st.count = Some(count as u64);
    let committed = x.u32();
    if !x.ok {
        return false;
    }
    st.committed = Some(committed);
    verifier(x, st)
}

fn verifier<'a>(x: &mut Xdr<'a>, st: &mut St<'a>) -> bool {
    let v = x.fixed(NFS4_VERIFIER_SIZE);
    if x.ok {
        st.verifier = Some(v);
    }
    false
}

fn read_res<'a>(x: &mut Xdr<'a>, st: &mut St<'a>) -> bool {
    let eof = x.u32();
    if !x.ok {
        return false;
    }
    st.eof = Some(eof);
    let n = x.u32();
    if x.ok {
        st.count = Some(n as u64);
        skip_payload(x, n as u64);
    }
    false
}

fn read_plus_res<'a>(x: &mut Xdr<'a>, st: &mut St<'a>) -> bool {
    let eof = x.u32();
    if !x.ok {
        return false;
    }
    st.eof = Some(eof);
    let mut total = 0u64;
    let n = x.u32();
    for _ in 0..n {
        let kind = x.u32();
        if !x.ok {
            return false;
        }
        if kind == NFS4_CONTENT_DATA {
            // data4: offset, data<>
            x.skip(HYPER);
            let k = x.u32() as u64;
            total += k;
            skip_payload(x, k);
        } else if kind == NFS4_CONTENT_HOLE {
            // data_info4: offset, length
            x.skip(2 * HYPER);
        }
    }
    if x.ok {
        st.count = Some(total);
    }
    false
}

fn dirlist<'a>(x: &mut Xdr<'a>, st: &mut St<'a>) -> bool {
    while x.boolean() {
        x.skip(HYPER);
        x.skip_opaque(NO_LIMIT);
        fattr(x, st);
    }
    x.skip(WORD);
    false
}

fn secinfo<'a>(x: &mut Xdr<'a>, _st: &mut St<'a>) -> bool {
    if x.u32() == RPCSEC_GSS {
        x.skip_opaque(NO_LIMIT);
        x.skip(2 * WORD);
    }
    false
}

fn gdd_non_fatal<'a>(x: &mut Xdr<'a>, st: &mut St<'a>) -> bool {
    let status = x.u32();
    if status == GDD4_OK {
        // cookieverf, stateid, notification, child/dir attributes
        x.skip(NFS4_VERIFIER_SIZE + STATEID4);
        bitmap(x, st);
        bitmap(x, st);
        bitmap(x, st);
    } else if status == GDD4_UNAVAIL {
        x.skip(WORD);
    }
    !matches!(status, GDD4_OK | GDD4_UNAVAIL)
}

// ---- Named steps of callback operations ----------------------------------------------

fn cb_sequence_args<'a>(x: &mut Xdr<'a>, st: &mut St<'a>) -> bool {
    session_slot(x, st);
    x.skip(2 * WORD); // highest_slotid, cachethis
                      // referring_call_list4<>: sessionid, referring_call4<> (sequenceid, slotid)
    array_of(x, st, |x, _| {
        x.skip(NFS4_SESSIONID_SIZE);
        array(x, 2 * WORD);
        false
    })
}

fn cb_sequence_res<'a>(x: &mut Xdr<'a>, st: &mut St<'a>) -> bool {
    session_slot(x, st);
    x.skip(2 * WORD); // highest_slotid, target_highest_slotid
    false
}

fn cb_layoutrecall<'a>(x: &mut Xdr<'a>, st: &mut St<'a>) -> bool {
    x.skip(3 * WORD); // type, iomode, changed
    let kind = x.u32();
    if kind == LAYOUT4_RET_REC_FILE {
        // fh, offset, length, stateid
        fh(x, st);
        x.skip(2 * HYPER + STATEID4);
    } else if kind == LAYOUT4_RET_REC_FSID {
        x.skip(2 * HYPER);
    }
    !matches!(
        kind,
        LAYOUT4_RET_REC_FILE | LAYOUT4_RET_REC_FSID | LAYOUT4_RET_REC_ALL
    )
}

fn cb_offload<'a>(x: &mut Xdr<'a>, st: &mut St<'a>) -> bool {
    fh(x, st);
    x.skip(STATEID4);
    if x.u32() == NFS4_OK {
        write_response(x, st); // offload_info4
    } else {
        x.skip(HYPER); // bytes copied
    }
    false
}

// ---- COMPOUND walks -------------------------------------------------------------------

/// A COMPOUND (`CB` false) or CB_COMPOUND (`CB` true) call's arguments.
pub(crate) fn compound_call<'a, const CB: bool>(
    buf: &'a [u8],
    off: usize,
    spare: &mut Spare,
) -> Fields<'a> {
    let mut st = Fields {
        kind: if CB { Kind::CbCompound } else { Kind::Compound },
        ops: std::mem::take(&mut spare.ops),
        statuses: std::mem::take(&mut spare.statuses),
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
    if CB {
        x.skip(WORD); // callback_ident
        st.decode = walk(&mut x, &mut st, false, |op, _, x, st| {
            cb_args_step(op, x, st)
        });
    } else {
        st.decode = walk(&mut x, &mut st, false, |op, _, x, st| args_step(op, x, st));
    }
    st
}

/// A COMPOUND (`CB` false) or CB_COMPOUND (`CB` true) reply's results.
pub(crate) fn compound_reply<'a, const CB: bool>(
    buf: &'a [u8],
    off: usize,
    spare: &mut Spare,
) -> Fields<'a> {
    let mut st = Fields {
        kind: if CB { Kind::CbCompound } else { Kind::Compound },
        ops: std::mem::take(&mut spare.ops),
        statuses: std::mem::take(&mut spare.statuses),
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
    st.decode = if CB {
        walk(&mut x, &mut st, true, |op, status, x, st| {
            if status == NFS4_OK || any_status_results(op) {
                cb_results_step(op, x, st)
            } else {
                !has_cb_step(op) // no error results: void, or no step known for op
            }
        })
    } else {
        walk(&mut x, &mut st, true, |op, status, x, st| {
            if status == NFS4_OK || any_status_results(op) {
                results_step(op, x, st)
            } else if has_step(op) {
                error_results_step(op, status, x, st)
            } else {
                true // no step known for op
            }
        })
    };
    st
}

/// Walk a COMPOUND's argarray<> or (`results`) resarray<>: each operation's
/// opcode into `st.ops` and, in a
/// reply, the nfsstat4 every result union starts with into `st.statuses`;
/// `step(op, status, x, st)` steps over its body, true when it cannot (no step
/// known for op is one such case: the cursor is still good then, so the
/// outcome is DECODE_PARTIAL).
/// Returns the nfs_decode outcome.
fn walk<'a>(
    x: &mut Xdr<'a>,
    st: &mut Fields<'a>,
    results: bool,
    mut step: impl FnMut(u32, u32, &mut Xdr<'a>, &mut Fields<'a>) -> bool,
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
        if step(op, status, x, st) {
            return if x.ok {
                DECODE_PARTIAL
            } else {
                DECODE_TRUNCATED
            };
        }
        if !x.ok {
            break;
        }
    }
    outcome(x)
}
