//! NFSv3 procedure decoding (RFC 1813): file handles, names, offsets, counts,
//! stable_how and the reply's committed level and verifier; numbers and sizes
//! from tables.rs (protocol/nfs3.py).

use crate::decoders::Fields;
use crate::tables::*;
use crate::xdr::Xdr;

// ---- NFSv3 (RFC 1813) ---------------------------------------------------------

// Procedure numbers, sizes, is_dirop and makes_object: generated (tables.rs).

pub(crate) fn outcome(x: &Xdr) -> u8 {
    if x.ok {
        DECODE_OK
    } else {
        DECODE_TRUNCATED
    }
}

pub(crate) fn nfs3_call(buf: &[u8], off: usize, proc_: i64) -> Fields<'_> {
    if proc_ == NFS3_NULL || proc_ >= NFS3_PROCS {
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

pub(crate) fn nfs3_reply(buf: &[u8], off: usize, proc_: i64) -> Fields<'_> {
    if proc_ == NFS3_NULL || proc_ >= NFS3_PROCS {
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

/// nfs3.write_reply_without_call: a whole reply (`rpc_len` bytes, all in buf)
/// whose call was not captured, decoded as a successful WRITE's when its
/// results have exactly WRITE3resok's shape (status OK, wcc_data whose two
/// flags are 0 or 1, count, a committed level, the verifier, nothing after).
pub(crate) fn write_reply_without_call(buf: &[u8], off: usize, rpc_len: i64) -> Option<Fields<'_>> {
    if rpc_len < 0 || (buf.len() as i64) < rpc_len {
        return None;
    }
    let mut x = Xdr::new(&buf[..rpc_len as usize], off);
    if x.u32() != NFS3_OK {
        return None;
    }
    for skip in [WCC_ATTR_BYTES, FATTR3_BYTES] {
        let flag = x.u32();
        if flag > 1 {
            return None;
        }
        if flag == 1 {
            x.skip(skip);
        }
    }
    let count = x.u32();
    let committed = x.u32();
    let verf = x.fixed(VERIFIER_BYTES);
    if !x.ok || x.pos as i64 != rpc_len || committed > FILE_SYNC {
        return None;
    }
    let mut f = Fields::named(DECODE_OK);
    f.nfs_status = Some(NFS3_OK);
    f.count = Some(count as u64);
    f.committed = Some(committed);
    f.verifier = Some(verf);
    Some(f)
}
