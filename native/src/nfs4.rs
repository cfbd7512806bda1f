//! NFSv4.x COMPOUND decoding (mirrors `parsers/nfs4.py`): the named steps
//! (hand-written primitives, line by line as in Python) and the COMPOUND walks.
//! The step programs over each operation's arguments and results are generated
//! from nfs4.py's tables into nfs4_steps.rs, and the protocol's numbers from
//! `protocol/nfs4.py` into tables.rs (native/generate_tables.py).

use crate::decoders::{Fields, Kind};
use crate::nfs3::outcome;
use crate::tables::*;
use crate::xdr::{Xdr, NO_LIMIT};

#[path = "nfs4_steps.rs"]
mod steps;
use steps::{any_status_results, args_step, error_results_step, results_step};

// ---- NFSv4.x COMPOUND (RFC 7530/7531, 8881/5662, 7862/7863, 8276) ----------------

type St<'a> = Fields<'a>;

// ---- Combinators (the generated step programs call them) ----------------------------

/// A counted array of variable items (nfs4._array_of); true when an item
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

/// A counted array of fixed-size items (nfs4._array).
fn array(x: &mut Xdr, size: u64) {
    let n = x.u32() as u64;
    x.skip(n * size);
}

/// A union switched on a bool: TRUE -> an item of size bytes (nfs4._optional).
fn optional(x: &mut Xdr, size: u64) {
    if x.boolean() {
        x.skip(size);
    }
}

// ---- Named steps: nfs4.py's `_name` is `name` here, all of one signature -----------
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
    x.skip_opaque(OPAQUE_LIMIT);
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
    let session = x.fixed(SESSIONID4);
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
        0 => false,
        1 => {
            x.skip(STATEID4 + WORD);
            nfsace(x, st);
            false
        }
        2 => {
            x.skip(STATEID4 + WORD);
            let limit = x.u32();
            if limit != 1 && limit != 2 {
                return true;
            }
            x.skip(HYPER);
            nfsace(x, st);
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
    if how == 1 {
        bitmap(x, st);
        bitmap(x, st);
    }
    !(how == 0 || how == 1)
}

fn netloc<'a>(x: &mut Xdr<'a>, _st: &mut St<'a>) -> bool {
    match x.u32() {
        1 | 2 => {
            x.skip_opaque(NO_LIMIT);
            false
        }
        3 => {
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
    x.skip(HYPER + WORD + VERIFIER4);
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
    let kind = x.u32();
    if kind == 5 {
        x.skip_opaque(NO_LIMIT);
    } else if kind == 3 || kind == 4 {
        x.skip(2 * WORD);
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
    x.skip(3 * WORD);
    owner(x, st);
    if x.u32() == 1 {
        match x.u32() {
            0 | 1 => {
                fattr(x, st);
            }
            2 => x.skip(VERIFIER4),
            3 => {
                x.skip(VERIFIER4);
                fattr(x, st);
            }
            _ => return true,
        }
    }
    let claim = x.u32();
    match claim {
        0 | 3 => {
            name(x, st);
        }
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

fn layoutreturn<'a>(x: &mut Xdr<'a>, _st: &mut St<'a>) -> bool {
    if x.u32() == 1 {
        x.skip(HYPER + HYPER + STATEID4);
        x.skip_opaque(NO_LIMIT);
    }
    false
}

fn deleg_claim<'a>(x: &mut Xdr<'a>, _st: &mut St<'a>) -> bool {
    let claim = x.u32();
    if claim == 1 {
        x.skip(WORD);
    }
    !(claim == 1 || claim == 4 || claim == 6)
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
    let v = x.fixed(VERIFIER4);
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
    if status == 0 {
        x.skip(VERIFIER4 + STATEID4);
        bitmap(x, st);
        bitmap(x, st);
        bitmap(x, st);
    } else if status == 1 {
        x.skip(WORD);
    }
    !(status == 0 || status == 1)
}

// ---- COMPOUND walks -------------------------------------------------------------------

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
        if status == NFS4_OK || any_status_results(op) {
            results_step(op, x, st)
        } else if has_step(op) {
            error_results_step(op, status, x, st)
        } else {
            true // no step known for op
        }
    });
    st
}

/// Walk a COMPOUND's argarray<> or (`results`) resarray<> (nfs4._walk_args /
/// nfs4._walk_results): each operation's opcode into `st.ops` and, in a
/// reply, the nfsstat4 every result union starts with into `st.statuses`;
/// `step(op, status, x, st)` steps over its body, true when it cannot (no step
/// known for op is one such case: the cursor is still good then, so the
/// outcome is DECODE_PARTIAL, as Python's for an op not in its table).
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
