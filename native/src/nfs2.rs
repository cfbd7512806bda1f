//! NFSv2 procedure decoding (RFC 1094; numbers from protocol/nfs2.py): file handles, WRITE
//! and READ, and the status of every reply.  NFSv2 writes are always
//! synchronous (RFC 1094 §2.2.10): FILE_SYNC.

use crate::decoders::Fields;
use crate::nfs3::outcome;
use crate::tables::*;
use crate::xdr::Xdr;

// Procedure numbers, sizes, is_nfs2_dirop and has_no_nfs2_args: generated (tables.rs).

pub(crate) fn nfs2_call(buf: &[u8], off: usize, proc_: i64) -> Fields<'_> {
    if has_no_nfs2_args(proc_) || proc_ >= NFS2_PROCS {
        return Fields::named(DECODE_OK);
    }
    let mut x = Xdr::new(buf, off);
    let fh = x.fixed(NFS2_FHSIZE);
    if !x.ok {
        return Fields::named(DECODE_TRUNCATED);
    }
    let mut f = Fields::named(DECODE_OK);
    f.fh = Some(fh);
    if proc_ == NFS2_WRITE {
        x.u32(); // beginoffset
        let offset = x.u32();
        x.u32(); // totalcount
        let count = x.u32(); // length of the data opaque
        if !x.ok {
            f.decode = DECODE_TRUNCATED;
            return f;
        }
        f.offset = Some(offset as u64);
        f.count = Some(count as u64);
        f.stable = Some(FILE_SYNC);
        return f;
    }
    if proc_ == NFS2_READ {
        let offset = x.u32();
        let count = x.u32();
        if !x.ok {
            f.decode = DECODE_TRUNCATED;
            return f;
        }
        f.offset = Some(offset as u64);
        f.count = Some(count as u64);
        return f;
    }
    if is_nfs2_dirop(proc_) || proc_ == NFS2_LINK {
        if proc_ == NFS2_LINK {
            x.fixed(NFS2_FHSIZE);
        }
        let name = x.opaque(NFS2_MAX_NAME);
        if x.ok {
            f.name = Some(name);
        }
        f.decode = outcome(&x);
    }
    f
}

pub(crate) fn nfs2_reply(buf: &[u8], off: usize, proc_: i64) -> Fields<'_> {
    if has_no_nfs2_args(proc_) || proc_ >= NFS2_PROCS {
        return Fields::named(DECODE_OK);
    }
    let mut x = Xdr::new(buf, off);
    let status = x.u32();
    if !x.ok {
        return Fields::named(DECODE_TRUNCATED);
    }
    let mut f = Fields::named(DECODE_OK);
    f.nfs_status = Some(status);
    if proc_ == NFS2_READ && status == NFS2_OK {
        x.skip(NFS2_FATTR_BYTES);
        let count = x.u32();
        if !x.ok {
            f.decode = DECODE_TRUNCATED;
            return f;
        }
        f.count = Some(count as u64);
    } else if proc_ == NFS2_WRITE && status == NFS2_OK {
        f.committed = Some(FILE_SYNC);
    }
    f
}
