//! NFS procedure decoding (the dispatch by program and version; the procedures' own
//! decoding is in nfs2.rs, nfs3.rs and nfs4.rs).  Names are not made here:
//! Python names procedures and operations from its one table
//! (protocol/procedures.py, protocol/nfs4.py OPERATIONS and CB_OPERATIONS),
//! told by `Kind` which table a row's op comes from.

use crate::nfs2::{nfs2_call, nfs2_reply};
use crate::nfs3::{nfs3_call, nfs3_reply, write_reply_without_call};
use crate::nfs4::{compound_call, compound_reply};
use crate::tables::*;

/// How Python names a message's op (codes: native.py's KIND_*).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[repr(u8)]
pub enum Kind {
    /// op = procedure_name(prog, vers, proc).
    #[default]
    Name = KIND_NAME,
    /// op/ops from the NFSv4 operation list (nfs4.compound_names).
    Compound = KIND_COMPOUND,
    /// op/ops from the callback operation list (nfs4.cb_compound_names).
    CbCompound = KIND_CB_COMPOUND,
}

// nfs_decode column codes: '', ok, partial, truncated, encrypted (generated)
pub use crate::tables::{
    DECODE_ENCRYPTED, DECODE_NONE, DECODE_OK, DECODE_PARTIAL, DECODE_TRUNCATED,
};

/// The decoded NFS fields of one message (nfs_fields.NFS_FIELDS); None /
/// empty = the field's default.
#[derive(Default, Clone, Debug)]
pub struct Fields<'a> {
    pub kind: Kind,
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

/// Emptied op and status lists a message's Fields left (their capacity
/// kept), for the next COMPOUND's: two allocations and frees a message less.
#[derive(Default)]
pub struct Spare {
    pub ops: Vec<u32>,
    pub statuses: Vec<u32>,
}

impl Spare {
    /// Keep the lists of `f` (done with) for the next message.
    #[inline]
    pub fn keep(&mut self, f: Fields) {
        let (mut ops, mut statuses) = (f.ops, f.statuses);
        if ops.capacity() > self.ops.capacity() {
            ops.clear();
            self.ops = ops;
        }
        if statuses.capacity() > self.statuses.capacity() {
            statuses.clear();
            self.statuses = statuses;
        }
    }
}

impl<'a> Fields<'a> {
    pub(crate) fn named(decode: u8) -> Fields<'a> {
        Fields {
            kind: Kind::Name,
            decode,
            ..Default::default()
        }
    }
}

/// decoders.decode: the NFS fields of one message.
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
    spare: &mut Spare,
) -> Fields<'a> {
    let callback =
        (crate::rpc::CALLBACK_FIRST as i64..=crate::rpc::CALLBACK_LAST as i64).contains(&prog);
    let has_decoder = (prog == NFS_PROGRAM && (2..=4).contains(&vers)) || callback;
    if !has_decoder || proc_ < 0 {
        return Fields::named(DECODE_NONE);
    }
    if gss_proc != -1 && (gss_proc != GSS_DATA || is_wrapped_gss_service(gss_service)) {
        // Context set-up messages carry GSS tokens, DATA messages a wrapped body.
        return Fields::named(DECODE_ENCRYPTED);
    }
    if body_offset < 0 {
        return Fields::named(DECODE_TRUNCATED);
    }
    let off = body_offset as usize;
    if prog == NFS_PROGRAM && vers == 3 {
        return if is_call {
            nfs3_call(buf, off, proc_)
        } else {
            nfs3_reply(buf, off, proc_)
        };
    }
    if prog == NFS_PROGRAM && vers == 2 {
        return if is_call {
            nfs2_call(buf, off, proc_)
        } else {
            nfs2_reply(buf, off, proc_)
        };
    }
    // NFSv4 and its callback program: COMPOUND decoded, the other procedures
    // (NULL, unknown ones) only named
    let compound = if callback {
        CB_COMPOUND
    } else {
        NFSPROC4_COMPOUND
    };
    if proc_ != compound {
        return Fields::named(DECODE_OK);
    }
    match (callback, is_call) {
        (false, true) => compound_call::<false>(buf, off, spare),
        (false, false) => compound_reply::<false>(buf, off, spare),
        (true, true) => compound_call::<true>(buf, off, spare),
        (true, false) => compound_reply::<true>(buf, off, spare),
    }
}

/// decoders.decode_reply_without_call: a reply of `rpc_len` bytes whose call
/// was not seen, decoded when the last call on its flow, `last` (prog, vers,
/// proc, gss_service, gss_proc), was NFS with a plain body: NFSv3 as a WRITE
/// reply when it has exactly that shape, NFSv4 as a COMPOUND reply when its
/// results read as one (a result read, the first one's opcode known).  The
/// (vers, proc) it was decoded as, with its fields.
pub fn reply_without_call<'a>(
    last: Option<(i64, i64, i64, i64, i64)>,
    buf: &'a [u8],
    body_offset: i64,
    rpc_len: i64,
    spare: &mut Spare,
) -> Option<(i64, i64, Fields<'a>)> {
    let (prog, vers, _, gss_service, gss_proc) = last?;
    if body_offset < 0 || prog != NFS_PROGRAM {
        return None;
    }
    if gss_proc != -1 && (gss_proc != GSS_DATA || is_wrapped_gss_service(gss_service)) {
        return None;
    }
    if vers == 3 {
        return write_reply_without_call(buf, body_offset as usize, rpc_len)
            .map(|f| (3, NFS3_WRITE, f));
    }
    if vers != 4 {
        return None;
    }
    let f = compound_reply::<false>(buf, body_offset as usize, spare);
    if f.ops.first().is_some_and(|&op| has_step(op)) {
        Some((4, NFSPROC4_COMPOUND, f))
    } else {
        spare.keep(f);
        None
    }
}
