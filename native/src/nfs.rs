//! NFS procedure decoding for the hot programs (mirrors `parsers/decoders.py`,
//! `nfs3.py` and the COMPOUND walk of `nfs4.py`).  Names are not made here:
//! Python names procedures and operations from its one table (procnames.py,
//! nfs4.OPERATIONS).  What this module does not decode (NFSv2, NFSv4 NULL and
//! callbacks) is marked `Kind::Defer`: Python decodes those messages' head
//! bytes with its own decoders, so every row is decoded by one truth.

use crate::xdr::{Xdr, NO_LIMIT};

/// How Python completes a message's NFS fields.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// op = procedure_name(prog, vers, proc); the other fields as decoded here.
    Name = 0,
    /// op/ops from the NFSv4 operation list (nfs4 names, main_op).
    Compound = 1,
    /// Python decodes the head bytes itself.
    Defer = 2,
}

// nfs_decode column codes: '', ok, partial, truncated, encrypted
pub const DECODE_NONE: u8 = 0;
pub const DECODE_OK: u8 = 1;
pub const DECODE_PARTIAL: u8 = 2;
pub const DECODE_TRUNCATED: u8 = 3;
pub const DECODE_ENCRYPTED: u8 = 4;

/// The decoded NFS fields of one message (nfs_fields.NFS_FIELDS); None /
/// empty = the field's default.
#[derive(Default, Clone, Debug)]
pub struct Fields<'a> {
    pub kind: u8,
    pub ops: Vec<u32>,
    pub statuses: Vec<u32>,
    pub nfs_status: Option<u32>,
    pub fh: Option<&'a [u8]>,
    pub name: Option<&'a [u8]>,
    pub offset: Option<u64>,
    pub count: Option<u64>,
    pub stable: Option<u32>,
    pub committed: Option<u32>,
    pub verifier: Option<&'a [u8]>,
    pub eof: Option<u32>,
    pub session: Option<&'a [u8]>,
    pub slot: Option<u32>,
    pub seqid: Option<u32>,
    pub minor: Option<u32>,
    pub decode: u8,
}

impl<'a> Fields<'a> {
    fn named(decode: u8) -> Fields<'a> {
        Fields {
            kind: Kind::Name as u8,
            decode,
            ..Default::default()
        }
    }
}

const NFS_PROGRAM: i64 = 100003;
const GSS_DATA: i64 = 0;

/// decoders.decode: the NFS fields of one message.  `nfs3_procs` is the number
/// of NFSv3 procedures Python names (procnames.py).
#[allow(clippy::too_many_arguments)]
pub fn decode<'a>(
    is_call: bool,
    prog: i64,
    vers: i64,
    proc_: i64,
    buf: &'a [u8],
    body_offset: i64,
    gss_service: i64,
    gss_proc: i64,
    nfs3_procs: i64,
) -> Fields<'a> {
    let has_decoder = (prog == NFS_PROGRAM && (2..=4).contains(&vers))
        || (crate::rpc::CALLBACK_FIRST as i64..=crate::rpc::CALLBACK_LAST as i64).contains(&prog);
    if !has_decoder || proc_ < 0 {
        return Fields::named(DECODE_NONE);
    }
    if gss_proc != -1 && (gss_proc != GSS_DATA || gss_service == 2 || gss_service == 3) {
        // Context set-up messages carry GSS tokens, DATA messages a wrapped body.
        return Fields::named(DECODE_ENCRYPTED);
    }
    if body_offset < 0 {
        return Fields::named(DECODE_TRUNCATED);
    }
    let off = body_offset as usize;
    if prog == NFS_PROGRAM && vers == 3 {
        return if is_call {
            nfs3_call(buf, off, proc_, nfs3_procs)
        } else {
            nfs3_reply(buf, off, proc_, nfs3_procs)
        };
    }
    if prog == NFS_PROGRAM && vers == 4 && proc_ == 1 {
        return if is_call {
            compound_call(buf, off)
        } else {
            compound_reply(buf, off)
        };
    }
    Fields {
        kind: Kind::Defer as u8,
        ..Default::default()
    }
}

/// decoders.decode_reply_without_call: a reply whose call was not seen, decoded
/// as an NFSv4 COMPOUND reply when the last call on its flow, `last` (prog,
/// vers, proc, gss_service, gss_proc), was NFSv4 with a plain body and its
/// results read as one (a result read, the first one's opcode known).
pub fn reply_without_call(
    last: Option<(i64, i64, i64, i64, i64)>,
    buf: &[u8],
    body_offset: i64,
) -> Option<Fields<'_>> {
    let (prog, vers, _, gss_service, gss_proc) = last?;
    if body_offset < 0 || prog != NFS_PROGRAM || vers != 4 {
        return None;
    }
    if gss_proc != -1 && (gss_proc != GSS_DATA || gss_service == 2 || gss_service == 3) {
        return None;
    }
    let f = compound_reply(buf, body_offset as usize);
    if f.ops.first().is_some_and(|&op| has_step(op)) {
        Some(f)
    } else {
        None
    }
}

// ---- NFSv3 (RFC 1813) ---------------------------------------------------------

const NFS3_NULL: i64 = 0;
const NFS3_READ: i64 = 6;
const NFS3_WRITE: i64 = 7;
const NFS3_LINK: i64 = 15;
const NFS3_COMMIT: i64 = 21;
const FHSIZE3: u64 = 64;
const FATTR3_BYTES: u64 = 84;
const WCC_ATTR_BYTES: u64 = 24;
const VERIFIER_BYTES: u64 = 8;
const MAX_NAME: u64 = 1024;

fn is_dirop(proc_: i64) -> bool {
    matches!(proc_, 3 | 8 | 9 | 10 | 11 | 12 | 13 | 14)
}

const NFS3_LOOKUP: i64 = 3;

/// CREATE, MKDIR, SYMLINK, MKNOD: their reply's post_op_fh3 (nfs3.NEW_OBJECT_PROCS).
fn makes_object(proc_: i64) -> bool {
    matches!(proc_, 8..=11)
}

fn outcome(x: &Xdr) -> u8 {
    if x.ok {
        DECODE_OK
    } else {
        DECODE_TRUNCATED
    }
}

fn nfs3_call(buf: &[u8], off: usize, proc_: i64, nprocs: i64) -> Fields<'_> {
    if proc_ == NFS3_NULL || proc_ >= nprocs {
        return Fields::named(DECODE_OK);
    }
    let mut x = Xdr::new(buf, off);
    let fh = x.opaque(FHSIZE3);
    if !x.ok {
        return Fields::named(DECODE_TRUNCATED);
    }
    let mut f = Fields::named(DECODE_OK);
    f.fh = Some(fh);
    if proc_ == NFS3_WRITE {
        // Field by field: a snaplen may cut anywhere; keep what arrived.
        let offset = x.u64();
        if !x.ok {
            f.decode = DECODE_TRUNCATED;
            return f;
        }
        f.offset = Some(offset);
        let count = x.u32();
        if !x.ok {
            f.decode = DECODE_TRUNCATED;
            return f;
        }
        f.count = Some(count as u64);
        let stable = x.u32();
        if !x.ok {
            f.decode = DECODE_TRUNCATED;
            return f;
        }
        f.stable = Some(stable);
        return f;
    }
    if proc_ == NFS3_READ || proc_ == NFS3_COMMIT {
        let offset = x.u64();
        let count = x.u32();
        if !x.ok {
            f.decode = DECODE_TRUNCATED;
            return f;
        }
        f.offset = Some(offset);
        f.count = Some(count as u64);
        return f;
    }
    if is_dirop(proc_) {
        let name = x.opaque(MAX_NAME);
        if x.ok {
            f.name = Some(name);
        }
        f.decode = outcome(&x);
        return f;
    }
    if proc_ == NFS3_LINK {
        x.opaque(FHSIZE3);
        let name = x.opaque(MAX_NAME);
        if x.ok {
            f.name = Some(name);
        }
        f.decode = outcome(&x);
        return f;
    }
    f
}

fn skip_post_op_attr(x: &mut Xdr) {
    if x.boolean() {
        x.skip(FATTR3_BYTES);
    }
}

fn skip_wcc_data(x: &mut Xdr) {
    if x.boolean() {
        x.skip(WCC_ATTR_BYTES);
    }
    skip_post_op_attr(x);
}

fn nfs3_reply(buf: &[u8], off: usize, proc_: i64, nprocs: i64) -> Fields<'_> {
    if proc_ == NFS3_NULL || proc_ >= nprocs {
        return Fields::named(DECODE_OK);
    }
    let mut x = Xdr::new(buf, off);
    let status = x.u32();
    if !x.ok {
        return Fields::named(DECODE_TRUNCATED);
    }
    let mut f = Fields::named(DECODE_OK);
    f.nfs_status = Some(status);
    if status == 0 && (proc_ == NFS3_LOOKUP || makes_object(proc_)) {
        // the handle of the object looked up or made (post_op_fh3: if it follows)
        let follows = proc_ == NFS3_LOOKUP || x.boolean();
        if follows && x.ok {
            let v = x.opaque(FHSIZE3);
            if x.ok {
                f.fh = Some(v);
            }
        }
        f.decode = outcome(&x);
        return f;
    }
    if status != 0 || !(proc_ == NFS3_WRITE || proc_ == NFS3_READ || proc_ == NFS3_COMMIT) {
        return f;
    }
    if proc_ == NFS3_WRITE {
        skip_wcc_data(&mut x);
        let count = x.u32();
        let committed = x.u32();
        let verf = x.fixed(VERIFIER_BYTES);
        if !x.ok {
            f.decode = DECODE_TRUNCATED;
            return f;
        }
        f.count = Some(count as u64);
        f.committed = Some(committed);
        f.verifier = Some(verf);
        return f;
    }
    if proc_ == NFS3_READ {
        skip_post_op_attr(&mut x);
        let count = x.u32();
        let eof = x.u32();
        if !x.ok {
            f.decode = DECODE_TRUNCATED;
            return f;
        }
        f.count = Some(count as u64);
        f.eof = Some(eof);
        return f;
    }
    skip_wcc_data(&mut x); // COMMIT
    let verf = x.fixed(VERIFIER_BYTES);
    if !x.ok {
        f.decode = DECODE_TRUNCATED;
        return f;
    }
    f.verifier = Some(verf);
    f
}

// ---- NFSv4.x COMPOUND (RFC 7530/7531, 8881/5662, 7862/7863, 8276) ----------------

const WORD: u64 = 4;
const HYPER: u64 = 8;
const STATEID4: u64 = 16;
const CHANGE_INFO4: u64 = 20;
const NFSTIME4: u64 = 12;
const VERIFIER4: u64 = 8;
const SESSIONID4: u64 = 16;
const DEVICEID4: u64 = 16;
const NFS4_FHSIZE: u64 = 128;
const OPAQUE_LIMIT: u64 = 1024;
const STATEID_RANGE: u64 = STATEID4 + HYPER + HYPER;

const AUTH_NONE: u32 = 0;
const AUTH_SYS: u32 = 1;
const RPCSEC_GSS: u32 = 6;

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
        3 => {
            x.skip(WORD);
            false
        }
        4 => {
            x.skip(WORD + STATEID4);
            false
        }
        5 => {
            offset_count(x, st);
            false
        }
        6 => {
            create_args(x, st);
            false
        }
        7 => {
            x.skip(HYPER);
            false
        }
        8 => {
            x.skip(STATEID4);
            false
        }
        9 => {
            bitmap(x);
            false
        }
        10 | 16 | 23 | 24 | 27 | 31 | 32 | 10044 => false,
        11 | 15 | 28 => {
            name(x, st);
            false
        }
        12 => {
            lock_args(x);
            false
        }
        13 => {
            x.skip(WORD + HYPER + HYPER);
            owner(x);
            false
        }
        14 => {
            x.skip(WORD + WORD + STATEID4 + HYPER + HYPER);
            false
        }
        17 | 37 => {
            fattr(x);
            false
        }
        18 => open_args(x, st),
        19 => {
            x.skip(WORD);
            false
        }
        20 => {
            x.skip(STATEID4 + WORD);
            false
        }
        21 => {
            x.skip(STATEID4 + 3 * WORD);
            false
        }
        22 => {
            fh(x, st);
            false
        }
        25 | 68 => {
            x.skip(STATEID4);
            offset_count(x, st);
            false
        }
        26 => {
            x.skip(HYPER + VERIFIER4 + 2 * WORD);
            bitmap(x);
            false
        }
        29 => {
            name(x, st);
            opaque(x);
            false
        }
        30 | 57 => {
            x.skip(HYPER);
            false
        }
        33 | 72 | 75 => {
            opaque(x);
            false
        }
        34 => {
            x.skip(STATEID4);
            fattr(x);
            false
        }
        35 => {
            x.skip(VERIFIER4);
            opaque(x);
            x.skip(WORD);
            opaque(x);
            opaque(x);
            x.skip(WORD);
            false
        }
        36 => {
            x.skip(HYPER + VERIFIER4);
            false
        }
        38 => {
            write_args(x, st);
            false
        }
        39 => {
            owner(x);
            false
        }
        40 => {
            x.skip(WORD);
            array_of(x, cb_sec_parms)
        }
        41 => {
            x.skip(SESSIONID4 + 2 * WORD);
            false
        }
        42 => {
            x.skip(VERIFIER4);
            opaque(x);
            x.skip(WORD);
            state_protect(x) || impl_ids(x)
        }
        43 => {
            x.skip(HYPER + 2 * WORD);
            channel_attrs(x);
            channel_attrs(x);
            x.skip(WORD);
            array_of(x, cb_sec_parms)
        }
        44 => {
            x.skip(SESSIONID4);
            false
        }
        45 | 66 | 67 => {
            x.skip(STATEID4);
            false
        }
        46 => {
            x.skip(WORD);
            bitmap(x);
            x.skip(2 * NFSTIME4);
            bitmap(x);
            bitmap(x);
            false
        }
        47 => {
            x.skip(DEVICEID4 + 2 * WORD);
            bitmap(x);
            false
        }
        48 => {
            x.skip(2 * WORD + HYPER + VERIFIER4);
            false
        }
        49 => {
            x.skip(HYPER + HYPER + WORD + STATEID4);
            optional(x, HYPER);
            optional(x, NFSTIME4);
            x.skip(WORD);
            opaque(x);
            false
        }
        50 => {
            x.skip(3 * WORD + 3 * HYPER + STATEID4 + WORD);
            false
        }
        51 => {
            x.skip(3 * WORD);
            layoutreturn(x);
            false
        }
        52 | 58 => {
            x.skip(WORD);
            false
        }
        53 => {
            session_slot(x, st);
            x.skip(2 * WORD);
            false
        }
        54 => {
            opaque(x);
            opaque(x);
            false
        }
        55 => {
            array(x, STATEID4);
            false
        }
        56 => {
            x.skip(WORD);
            deleg_claim(x)
        }
        59 | 62 => {
            x.skip(STATEID_RANGE);
            false
        }
        60 => {
            x.skip(2 * STATEID4 + 3 * HYPER + 2 * WORD);
            array_of(x, netloc)
        }
        61 => {
            x.skip(STATEID4);
            netloc(x)
        }
        63 => {
            x.skip(STATEID_RANGE);
            bitmap(x);
            false
        }
        64 => {
            x.skip(STATEID_RANGE);
            array(x, DEVICEID4 + 2 * WORD);
            false
        }
        65 => {
            x.skip(STATEID_RANGE + 4 * HYPER + DEVICEID4 + WORD);
            opaque(x);
            false
        }
        69 => {
            x.skip(STATEID4 + HYPER + WORD);
            false
        }
        70 => {
            x.skip(STATEID4 + WORD + 4 * HYPER + WORD + HYPER);
            opaque(x);
            false
        }
        71 => {
            x.skip(2 * STATEID4 + 3 * HYPER);
            false
        }
        73 => {
            x.skip(WORD);
            opaque(x);
            opaque(x);
            false
        }
        74 => {
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
        3 => {
            x.skip(2 * WORD);
            false
        }
        4 | 12 | 14 | 20 | 21 => {
            x.skip(STATEID4);
            false
        }
        5 => {
            verifier(x, st);
            false
        }
        6 => {
            x.skip(CHANGE_INFO4);
            bitmap(x);
            false
        }
        7 | 8 | 13 | 15 | 16 | 17 | 19 | 22 | 23 | 24 | 30 | 31 | 32 | 36 | 37 | 39 | 40 | 44
        | 45 | 57 | 58 | 59 | 62 | 64 | 65 | 66 | 71 | 10044 => false,
        9 => {
            fattr(x);
            false
        }
        10 => {
            fh(x, st);
            false
        }
        11 | 28 | 73 | 75 => {
            x.skip(CHANGE_INFO4);
            false
        }
        18 => {
            x.skip(STATEID4 + CHANGE_INFO4 + WORD);
            bitmap(x);
            open_delegation(x)
        }
        25 => {
            read_res(x, st);
            false
        }
        26 => {
            x.skip(VERIFIER4);
            dirlist(x);
            false
        }
        27 | 54 | 72 => {
            opaque(x);
            false
        }
        29 => {
            x.skip(2 * CHANGE_INFO4);
            false
        }
        33 | 52 => array_of(x, secinfo),
        34 | 63 => {
            bitmap(x);
            false
        }
        35 => {
            x.skip(HYPER + VERIFIER4);
            false
        }
        38 => {
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
        41 => {
            x.skip(SESSIONID4 + 2 * WORD);
            false
        }
        42 => {
            x.skip(HYPER + 2 * WORD);
            if state_protect(x) {
                return Some(true);
            }
            x.skip(HYPER);
            opaque(x);
            opaque(x);
            impl_ids(x)
        }
        43 => {
            x.skip(SESSIONID4 + 2 * WORD);
            channel_attrs(x);
            channel_attrs(x);
            false
        }
        46 => gdd_non_fatal(x),
        47 => {
            x.skip(WORD);
            opaque(x);
            bitmap(x);
            false
        }
        48 => {
            x.skip(HYPER + VERIFIER4);
            array(x, DEVICEID4);
            x.skip(WORD);
            false
        }
        49 => {
            optional(x, HYPER);
            false
        }
        50 => {
            x.skip(WORD + STATEID4);
            array_of(x, |x| {
                x.skip(2 * HYPER + 2 * WORD);
                opaque(x);
                false
            })
        }
        51 => {
            optional(x, STATEID4);
            false
        }
        53 => {
            session_slot(x, st);
            x.skip(3 * WORD);
            false
        }
        55 => {
            array(x, WORD);
            false
        }
        56 => open_delegation(x),
        60 => {
            write_response(x);
            x.skip(2 * WORD);
            false
        }
        61 => {
            x.skip(NFSTIME4 + STATEID4);
            array_of(x, netloc)
        }
        67 => {
            x.skip(HYPER);
            array(x, WORD);
            false
        }
        68 => {
            read_plus_res(x, st);
            false
        }
        69 => {
            x.skip(WORD + HYPER);
            false
        }
        70 => {
            write_response(x);
            false
        }
        74 => {
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
        (12, 10010) | (13, 10010) => lock4denied(x),
        (35, 10017) => {
            opaque(x);
            opaque(x);
            false
        }
        (47, 10005) | (50, 10058) => {
            x.skip(WORD);
            false
        }
        (60, 10094) => {
            x.skip(2 * WORD);
            false
        }
        _ => false,
    }
}

/// Operations with argument and result steps (nfs4.ARGS / RESULTS keys).
fn has_step(op: u32) -> bool {
    matches!(op, 3..=75 | 10044)
}

fn compound_call(buf: &[u8], off: usize) -> Fields<'_> {
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
    let n = x.u32();
    let mut decode = DECODE_NONE;
    for _ in 0..n {
        let op = x.u32();
        if !x.ok {
            break;
        }
        st.ops.push(op);
        match args_step(op, &mut x, &mut st) {
            None => {
                decode = DECODE_PARTIAL;
                break;
            }
            Some(true) => {
                decode = if x.ok {
                    DECODE_PARTIAL
                } else {
                    DECODE_TRUNCATED
                };
                break;
            }
            Some(false) => {}
        }
        if !x.ok {
            break;
        }
    }
    st.decode = if decode != DECODE_NONE {
        decode
    } else {
        outcome(&x)
    };
    st
}

fn compound_reply(buf: &[u8], off: usize) -> Fields<'_> {
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
    let n = x.u32();
    let mut decode = DECODE_NONE;
    for _ in 0..n {
        let op = x.u32();
        if !x.ok {
            break;
        }
        st.ops.push(op);
        let status = x.u32(); // every result union starts with its nfsstat4
        if !x.ok {
            break;
        }
        st.statuses.push(status);
        let stuck = if !has_step(op) {
            None
        } else if status != 0 && op != 34 {
            // (SETATTR's body follows its status whatever it is)
            Some(error_step(op, status, &mut x))
        } else {
            results_step(op, &mut x, &mut st)
        };
        match stuck {
            None => {
                decode = DECODE_PARTIAL;
                break;
            }
            Some(true) => {
                decode = if x.ok {
                    DECODE_PARTIAL
                } else {
                    DECODE_TRUNCATED
                };
                break;
            }
            Some(false) => {}
        }
        if !x.ok {
            break;
        }
    }
    st.decode = if decode != DECODE_NONE {
        decode
    } else {
        outcome(&x)
    };
    st
}
