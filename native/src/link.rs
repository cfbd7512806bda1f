//! Link layer: find the IP header inside a frame (the link-type numbers,
//! EtherTypes and address families: `nfstrace/protocol/link.py`, generated).

// Link types, EtherTypes, VLAN tags and address families: generated.
use crate::tables::{is_af_inet6, is_vlan, AF_INET, ETHERTYPE_IPV4, ETHERTYPE_IPV6};
pub use crate::tables::{
    LINKTYPE_ETHERNET, LINKTYPE_IPV4, LINKTYPE_IPV6, LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2,
    LINKTYPE_LOOP, LINKTYPE_NULL, LINKTYPE_RAW, LINKTYPE_RAW_BSD, LINKTYPE_RAW_OPENBSD,
};

fn by_version(data: &[u8], off: usize) -> (u8, usize) {
    if data.len() <= off {
        return (0, off);
    }
    let v = data[off] >> 4;
    if v == 4 || v == 6 {
        (v, off)
    } else {
        (0, off)
    }
}

fn by_ethertype(data: &[u8], mut etype: u16, mut off: usize) -> (u8, usize) {
    while is_vlan(etype) && data.len() >= off + 4 {
        etype = u16::from_be_bytes([data[off + 2], data[off + 3]]);
        off += 4;
    }
    match etype {
        ETHERTYPE_IPV4 => (4, off),
        ETHERTYPE_IPV6 => (6, off),
        _ => (0, off),
    }
}

/// (ip version, offset of the IP header); version 0 = not IP.
pub fn locate_ip(linktype: u32, data: &[u8]) -> (u8, usize) {
    match linktype {
        LINKTYPE_ETHERNET => {
            if data.len() < 14 {
                return (0, 0);
            }
            by_ethertype(data, u16::from_be_bytes([data[12], data[13]]), 14)
        }
        LINKTYPE_LINUX_SLL => {
            if data.len() < 16 {
                return (0, 0);
            }
            by_ethertype(data, u16::from_be_bytes([data[14], data[15]]), 16)
        }
        LINKTYPE_LINUX_SLL2 => {
            if data.len() < 20 {
                return (0, 0);
            }
            by_ethertype(data, u16::from_be_bytes([data[0], data[1]]), 20)
        }
        LINKTYPE_RAW | LINKTYPE_RAW_BSD | LINKTYPE_RAW_OPENBSD => by_version(data, 0),
        LINKTYPE_IPV4 => {
            if data.is_empty() {
                (0, 0)
            } else {
                (4, 0)
            }
        }
        LINKTYPE_IPV6 => {
            if data.is_empty() {
                (0, 0)
            } else {
                (6, 0)
            }
        }
        LINKTYPE_NULL | LINKTYPE_LOOP => {
            if data.len() < 4 {
                return (0, 0);
            }
            // NULL is in the capturing host's byte order, LOOP in network order.
            let mut af = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
            if af > 0xFFFF {
                af = u32::from_be_bytes([data[0], data[1], data[2], data[3]]);
            }
            if af == AF_INET {
                (4, 4)
            } else if is_af_inet6(af) {
                (6, 4)
            } else {
                (0, 0)
            }
        }
        _ => (0, 0),
    }
}
