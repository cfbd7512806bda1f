//! nfstrace's parser: capture files -> ONC-RPC messages, as columns.
//!
//! The only dissector of the package: the packet path (capture files, link
//! layer, IP, TCP, RPC, NFS) is written here once.  It was ported from a Python
//! dissector, now removed; the tests hold it to tshark, dpkt, crafted captures
//! of known contents and golden records of its tables (tests/test_native.py).
//! The facts it shares with Python (protocol numbers and names, ParseLimits'
//! defaults and the parser's fixed bounds, event kinds, anomalies, column
//! codes, the NFSv4 step programs) are generated from nfstrace/ into tables.rs
//! and nfs4_steps.rs by native/generate_tables.py.  Every message's NFS fields
//! are decoded here (NFSv2, v3, v4 and the v4 callbacks); Python builds the
//! DataFrames and names procedures and operations (python.rs: the other side
//! of nfstrace/parsers/native.py).

pub mod capture;
pub mod collector;
pub mod column;
pub mod decoders;
pub mod dissector;
pub mod frame_loop;
pub mod ip;
pub mod link;
pub mod maps;
pub mod nfs2;
pub mod nfs3;
pub mod nfs4;
pub mod portmap;
pub mod rpc;
pub mod stats;
pub mod tables;
pub mod tcp;
pub mod tcp_state;
pub mod xdr;

pub use dissector::{Dissector, Settings};
pub use frame_loop::parse_sources;

/// Default settings (ParseLimits' defaults, from the generated `tables`), for
/// tests and the fuzz target.
pub fn default_settings() -> Settings {
    use tables::*;
    let n = |v: i64| v as usize;
    Settings {
        tcp: tcp::Limits {
            head_bytes: n(DEFAULT_HEAD_BYTES),
            max_record_bytes: DEFAULT_MAX_RECORD_BYTES,
            max_pending_segments: n(DEFAULT_MAX_PENDING_SEGMENTS),
            max_pending_bytes: DEFAULT_MAX_PENDING_BYTES,
            max_pending_bytes_total: DEFAULT_MAX_PENDING_BYTES_TOTAL,
            max_hole_age_ns: DEFAULT_MAX_HOLE_AGE_NS,
            max_unsynced_bytes: DEFAULT_MAX_UNSYNCED_BYTES,
            max_ack_waiting: n(DEFAULT_MAX_ACK_WAITING),
            max_unframed_records: n(DEFAULT_MAX_UNFRAMED_RECORDS),
        },
        max_frame_bytes: n(DEFAULT_MAX_FRAME_BYTES),
        max_interface_drops: MAX_INTERFACE_DROPS,
        max_messages: i64::MAX, // Python's default is a share of the memory available
        check_every_frames: CHECK_EVERY_FRAMES,
        ip_reassembly_timeout_ns: DEFAULT_IP_REASSEMBLY_TIMEOUT_NS,
        max_ip_reassemblies: n(DEFAULT_MAX_IP_REASSEMBLIES),
        max_ip_reassembly_bytes: DEFAULT_MAX_IP_REASSEMBLY_BYTES,
        max_fragments_per_datagram: DEFAULT_MAX_FRAGMENTS_PER_DATAGRAM,
        max_pending_calls: n(DEFAULT_MAX_PENDING_CALLS),
        max_connections: n(DEFAULT_MAX_CONNECTIONS),
        max_directions: n(DEFAULT_MAX_DIRECTIONS),
        max_events_per_kind: n(DEFAULT_MAX_EVENTS_PER_KIND),
        duplicate_window_ns: DEFAULT_DUPLICATE_WINDOW_NS,
        send_gap_ns: DEFAULT_SEND_GAP_NS,
        partitions: n(DEFAULT_PARTITIONS),
        partition: n(DEFAULT_PARTITION),
        buckets: Vec::new(),
    }
}

#[cfg(feature = "python")]
mod frames;
#[cfg(feature = "python")]
mod python;
