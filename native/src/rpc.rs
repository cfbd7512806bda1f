//! ONC RPC version 2 message header (RFC 5531 §9-§10) and record marking
//! (§11); numbers from tables.rs (protocol/rpc.py).  Knows no NFS.

// Protocol numbers and limits, and the reply_stat column codes: generated.
use crate::tables::{
    is_known_flavor as known_flavor, is_named_program, AUTH_NONE, AUTH_SYS, AUTH_SYS_MAX_GIDS,
    AUTH_TLS, MIN_CALL_LEN, MIN_CUT_CALL_LEN, MSG_ACCEPTED, MSG_DENIED, PROG_MISMATCH, RPCSEC_GSS,
    STRICT_MAX_PROG, STRICT_MAX_VERS,
};
pub use crate::tables::{
    CALL, CALLBACK_FIRST, CALLBACK_LAST, FRAG_LEN_MASK, LAST_FRAG, MAX_AUTH_BYTES, MIN_REPLY_LEN,
    REPLY, REPLY_STAT_ACCEPTED, REPLY_STAT_DENIED, REPLY_STAT_NONE, RPC_VERSION, STRICT_MIN_PROG,
};

#[inline]
pub fn be32(b: &[u8], at: usize) -> u32 {
    // (one bounds check and one load, not four)
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap_or([0; 4]))
}

/// rpc.is_known_program
fn known_program(prog: u32) -> bool {
    is_named_program(prog) || (CALLBACK_FIRST..=CALLBACK_LAST).contains(&prog)
}

/// Could a call header start at buf[pos]? (resync and UDP detection)
pub fn plausible_call(buf: &[u8], pos: usize, known_only: bool, cut: bool) -> bool {
    if buf.len() < pos + 32 {
        // cut by the snaplen after its procedure number: judged on what came
        if !cut || buf.len() < pos + MIN_CUT_CALL_LEN {
            return false;
        }
        let (mtype, rpcvers) = (be32(buf, pos + 4), be32(buf, pos + 8));
        let (prog, vers) = (be32(buf, pos + 12), be32(buf, pos + 16));
        return mtype == CALL && rpcvers == RPC_VERSION && vers <= 0xFFFF && known_program(prog);
    }
    let mtype = be32(buf, pos + 4);
    let rpcvers = be32(buf, pos + 8);
    let prog = be32(buf, pos + 12);
    let vers = be32(buf, pos + 16);
    let flavor = be32(buf, pos + 24);
    let clen = be32(buf, pos + 28);
    if mtype != CALL || rpcvers != RPC_VERSION || clen > MAX_AUTH_BYTES || vers > 0xFFFF {
        return false;
    }
    if !known_flavor(flavor) {
        return false;
    }
    known_program(prog) || (!known_only && prog < 0x8000_0000)
}

// strict_call's program numbers (assigned from 100000, the portmapper;
// reserved from 0x60000000), highest version and most AUTH_SYS groups:
// STRICT_MIN_PROG, STRICT_MAX_PROG, STRICT_MAX_VERS, AUTH_SYS_MAX_GIDS (generated).

#[inline]
fn pad4(n: u32) -> usize {
    ((n as usize) + 3) & !3
}

/// Is buf (a UDP payload of wire_len bytes on the wire) a call header of any
/// program? (the strict call test)
pub fn strict_call(buf: &[u8], wire_len: i64) -> bool {
    let n = buf.len();
    if n < MIN_CALL_LEN {
        return false;
    }
    let mtype = be32(buf, 4);
    let rpcvers = be32(buf, 8);
    let prog = be32(buf, 12);
    let vers = be32(buf, 16);
    let flavor = be32(buf, 24);
    let clen = be32(buf, 28);
    if mtype != CALL
        || rpcvers != RPC_VERSION
        || !(STRICT_MIN_PROG..=STRICT_MAX_PROG).contains(&prog)
    {
        return false;
    }
    if vers > STRICT_MAX_VERS || clen > MAX_AUTH_BYTES || clen & 3 != 0 {
        return false;
    }
    let v = 32 + clen as usize; // the verifier
    if v + 8 > n {
        return false;
    }
    if flavor == AUTH_NONE || flavor == AUTH_TLS {
        if clen != 0 {
            return false;
        }
    } else if flavor == AUTH_SYS {
        if clen < 20 {
            return false;
        }
        let mlen = be32(buf, 36);
        if mlen > 255 {
            return false;
        }
        let g = 40 + pad4(mlen) + 8; // the gids count
        if g + 4 > v {
            return false;
        }
        let ngids = be32(buf, g);
        if ngids > AUTH_SYS_MAX_GIDS || g + 4 + 4 * ngids as usize != v {
            return false;
        }
    } else if flavor == RPCSEC_GSS {
        if clen < 20 {
            return false;
        }
        let (gvers, gproc, service, hlen) =
            (be32(buf, 32), be32(buf, 36), be32(buf, 44), be32(buf, 48));
        if gvers != 1 || gproc > 3 || !(1..=3).contains(&service) {
            return false;
        }
        if 52 + pad4(hlen) != v {
            return false;
        }
    } else if !known_flavor(flavor) || clen == 0 {
        return false;
    }
    let vflavor = be32(buf, v);
    let vlen = be32(buf, v + 4);
    if !known_flavor(vflavor) || vlen > MAX_AUTH_BYTES || (vflavor == AUTH_NONE && vlen != 0) {
        return false;
    }
    ((v + 8 + pad4(vlen)) as i64) <= wire_len
}

/// Is a UDP payload an RPC call?
pub fn udp_call(buf: &[u8], wire_len: i64, rpc_port: bool) -> bool {
    if plausible_call(buf, 0, true, (buf.len() as i64) < wire_len) {
        return true;
    }
    if rpc_port {
        return plausible_call(buf, 0, false, false) && be32(buf, 12) >= STRICT_MIN_PROG;
    }
    strict_call(buf, wire_len)
}

/// Could an accepted or denied reply header start at buf[pos]?
pub fn plausible_reply(buf: &[u8], pos: usize) -> bool {
    if buf.len() < pos + 12 {
        return false;
    }
    let mtype = be32(buf, pos + 4);
    let stat = be32(buf, pos + 8);
    if mtype != REPLY {
        return false;
    }
    if stat == MSG_ACCEPTED {
        if buf.len() < pos + 20 {
            return true;
        }
        let flavor = be32(buf, pos + 12);
        let vlen = be32(buf, pos + 16);
        if !known_flavor(flavor) || vlen > MAX_AUTH_BYTES {
            return false;
        }
        let p = pos + 20 + ((vlen as usize + 3) & !3);
        return buf.len() < p + 4 || be32(buf, p) <= 5;
    }
    if stat == MSG_DENIED {
        return buf.len() < pos + 16 || be32(buf, pos + 12) <= 1;
    }
    false
}

/// A decoded header; -1 / None where absent.
/// `auth` is the flavour number (-1: '' in the table); `machine` the raw
/// AUTH_SYS machine name bytes; `gss_service` the service number (-1: '').
#[derive(Clone, Debug)]
pub struct Header<'a> {
    pub xid: u32,
    pub is_call: bool,
    pub prog: i64,
    pub vers: i64,
    pub proc_: i64,
    pub auth: i64,
    pub uid: i64,
    pub gid: i64,
    pub machine: Option<&'a [u8]>,
    pub gss_proc: i64,
    pub gss_service: i64,
    pub reply_stat: u8,
    pub accept_stat: i64,
    pub reject_stat: i64,
    pub body_offset: i64,
}

impl<'a> Header<'a> {
    /// rpc.xid_header: a header of which only the xid is known (a call's
    /// program unknown: -1).
    pub fn xid_only(xid: u32, is_call: bool) -> Header<'a> {
        Header::empty(xid, is_call)
    }

    fn empty(xid: u32, is_call: bool) -> Header<'a> {
        Header {
            xid,
            is_call,
            prog: -1,
            vers: -1,
            proc_: -1,
            auth: -1,
            uid: -1,
            gid: -1,
            machine: None,
            gss_proc: -1,
            gss_service: -1,
            reply_stat: REPLY_STAT_NONE,
            accept_stat: -1,
            reject_stat: -1,
            body_offset: -1,
        }
    }
}

/// Decode the RPC header at buf[0..]; None if buf does not hold one.  A header
/// cut short still yields what was read, with body_offset -1.
pub fn decode_header(buf: &[u8]) -> Option<Header<'_>> {
    let n = buf.len();
    if n < 8 {
        return None;
    }
    let xid = be32(buf, 0);
    match be32(buf, 4) {
        CALL => decode_call(buf, n, xid),
        REPLY => decode_reply(buf, n, xid),
        _ => None,
    }
}

fn decode_call(buf: &[u8], n: usize, xid: u32) -> Option<Header<'_>> {
    let mut h = Header::empty(xid, true);
    if n < 32 {
        if n >= 24 {
            h.prog = be32(buf, 12) as i64;
            h.vers = be32(buf, 16) as i64;
            h.proc_ = be32(buf, 20) as i64;
            return Some(h);
        }
        if n >= 12 && be32(buf, 8) != RPC_VERSION {
            return None;
        }
        return Some(h); // cut before its program: the xid alone
    }
    h.prog = be32(buf, 12) as i64;
    h.vers = be32(buf, 16) as i64;
    h.proc_ = be32(buf, 20) as i64;
    let flavor = be32(buf, 24);
    let clen = be32(buf, 28);
    h.auth = flavor as i64;
    if clen > MAX_AUTH_BYTES {
        return Some(h);
    }
    let pos = 32usize;
    let body_end = pos + ((clen as usize + 3) & !3);
    if flavor == AUTH_SYS && n >= pos + 8 {
        let mlen = be32(buf, pos + 4) as usize;
        let mpos = pos + 8;
        if mlen <= 255 && n >= mpos + ((mlen + 3) & !3) + 8 {
            h.machine = Some(&buf[mpos..mpos + mlen]);
            let at = mpos + ((mlen + 3) & !3);
            h.uid = be32(buf, at) as i64;
            h.gid = be32(buf, at + 4) as i64;
        }
    } else if flavor == RPCSEC_GSS && n >= pos + 16 {
        h.gss_proc = be32(buf, pos + 4) as i64;
        h.gss_service = be32(buf, pos + 12) as i64;
    }
    let pos = body_end;
    if n >= pos + 8 {
        let vlen = be32(buf, pos + 4);
        if vlen <= MAX_AUTH_BYTES && n >= pos + 8 + ((vlen as usize + 3) & !3) {
            h.body_offset = (pos + 8 + ((vlen as usize + 3) & !3)) as i64;
        }
    }
    Some(h)
}

fn decode_reply(buf: &[u8], n: usize, xid: u32) -> Option<Header<'_>> {
    let mut h = Header::empty(xid, false);
    if n < 12 {
        return Some(h);
    }
    let stat = be32(buf, 8);
    if stat == MSG_DENIED {
        h.reply_stat = REPLY_STAT_DENIED;
        if n >= 16 {
            h.reject_stat = be32(buf, 12) as i64;
        }
        return Some(h);
    }
    if stat != MSG_ACCEPTED {
        return None;
    }
    h.reply_stat = REPLY_STAT_ACCEPTED;
    if n < 20 {
        return Some(h);
    }
    let flavor = be32(buf, 12);
    let vlen = be32(buf, 16);
    h.auth = flavor as i64;
    let pos = 20 + ((vlen as usize + 3) & !3);
    if vlen <= MAX_AUTH_BYTES && n >= pos + 4 {
        let accept = be32(buf, pos);
        h.accept_stat = accept as i64;
        h.body_offset = (pos + 4) as i64;
        if accept == PROG_MISMATCH {
            h.body_offset = if n >= pos + 12 { (pos + 12) as i64 } else { -1 };
        }
    }
    Some(h)
}
