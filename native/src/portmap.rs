//! UDP ports learnt from portmap / rpcbind answers (RFC 1833; numbers from
//! protocol/portmap.py): GETPORT and DUMP (v2), GETADDR, GETVERSADDR and
//! DUMP (v3, v4).

use crate::rpc::be32;

pub use crate::tables::PORTMAP_PROGRAM;
use crate::tables::{
    IPPROTO_UDP, MAX_NETID, MAX_UADDR, PMAPPROC_DUMP, PMAPPROC_GETPORT, RPCBPROC_DUMP,
    RPCBPROC_GETADDR, RPCBPROC_GETVERSADDR,
};

fn udp_netid(netid: &[u8]) -> bool {
    netid == b"udp" || netid == b"udp6"
}

fn getaddr(vers: i64, proc_: i64) -> bool {
    (vers == 3 || vers == 4)
        && (proc_ == RPCBPROC_GETADDR || (vers == 4 && proc_ == RPCBPROC_GETVERSADDR))
}

/// A portmap/rpcbind call's arguments at head[off..]: does it ask where a
/// program listens over UDP?  None: not a call that asks for an address.
pub fn asks_udp(vers: i64, proc_: i64, head: &[u8], off: i64) -> Option<bool> {
    if off < 0 {
        return None;
    }
    let off = off as usize;
    if vers == 2 && proc_ == PMAPPROC_GETPORT {
        if head.len() < off + 16 {
            return None;
        }
        return Some(be32(head, off + 8) == IPPROTO_UDP);
    }
    if getaddr(vers, proc_) {
        return string(head, off + 8, MAX_NETID).map(|(netid, _)| udp_netid(netid));
    }
    None
}

/// The UDP ports a portmap/rpcbind reply (results at head[off..]) announces.
pub fn learnt_ports(vers: i64, proc_: i64, head: &[u8], off: i64, asked_udp: bool) -> Vec<u32> {
    let mut out = Vec::new();
    if off < 0 {
        return out;
    }
    let off = off as usize;
    let n = head.len();
    if vers == 2 {
        if proc_ == PMAPPROC_GETPORT {
            if asked_udp && n >= off + 4 {
                let port = be32(head, off);
                if port > 0 && port < 65536 {
                    out.push(port);
                }
            }
        } else if proc_ == PMAPPROC_DUMP {
            let mut pos = off;
            while n >= pos + 20 && be32(head, pos) == 1 {
                let prot = be32(head, pos + 12);
                let port = be32(head, pos + 16);
                if prot == IPPROTO_UDP && port > 0 && port < 65536 {
                    out.push(port);
                }
                pos += 20;
            }
        }
    } else if vers == 3 || vers == 4 {
        if getaddr(vers, proc_) {
            if let Some((uaddr, _)) = string(head, off, MAX_UADDR) {
                if asked_udp {
                    let port = uaddr_port(uaddr);
                    if port > 0 {
                        out.push(port as u32);
                    }
                }
            }
        } else if proc_ == RPCBPROC_DUMP {
            let mut pos = off;
            while n >= pos + 4 && be32(head, pos) == 1 {
                let Some((netid, p)) = string(head, pos + 12, MAX_NETID) else {
                    break;
                };
                let Some((uaddr, p)) = string(head, p, MAX_UADDR) else {
                    break;
                };
                let owner = string(head, p, MAX_UADDR);
                if udp_netid(netid) {
                    let port = uaddr_port(uaddr);
                    if port > 0 {
                        out.push(port as u32);
                    }
                }
                match owner {
                    Some((_, p)) => pos = p,
                    None => break,
                }
            }
        }
    }
    out
}

/// The port of a universal address (host, then ".p1.p2" in decimal); -1 if
/// it is not one.
pub fn uaddr_port(uaddr: &[u8]) -> i64 {
    let mut parts = uaddr.rsplitn(3, |&b| b == b'.');
    let (Some(p2), Some(p1), Some(host)) = (parts.next(), parts.next(), parts.next()) else {
        return -1;
    };
    if host.is_empty() {
        return -1;
    }
    let num = |p: &[u8]| -> i64 {
        if p.is_empty() || p.len() > 3 || !p.iter().all(u8::is_ascii_digit) {
            return -1;
        }
        p.iter().fold(0i64, |a, &d| a * 10 + (d - b'0') as i64)
    };
    let (hi, lo) = (num(p1), num(p2));
    if !(0..=255).contains(&hi) || !(0..=255).contains(&lo) {
        return -1;
    }
    hi * 256 + lo
}

/// The XDR string at head[pos..] and the position after it; None when longer
/// than limit or not all captured.
fn string(head: &[u8], pos: usize, limit: u32) -> Option<(&[u8], usize)> {
    if head.len() < pos + 4 {
        return None;
    }
    let len = be32(head, pos);
    if len > limit {
        return None;
    }
    let end = pos + 4 + ((len as usize + 3) & !3);
    if head.len() < end {
        return None;
    }
    Some((&head[pos + 4..pos + 4 + len as usize], end))
}
