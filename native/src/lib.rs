//! nfstrace's native hot path: capture files -> ONC-RPC messages, as columns.
//!
//! A line-by-line port of the pure-Python parser (`nfstrace/parsers/fast.py`
//! and the modules it drives), which stays the readable reference: the two
//! must give identical tables (tests/test_native.py).  Python builds the
//! DataFrames, names procedures and decodes the rare messages this crate
//! hands back undecoded (`nfs::Kind::Defer`).

pub mod capture;
pub mod dissector;
pub mod ip;
pub mod link;
pub mod maps;
pub mod nfs;
pub mod portmap;
pub mod rpc;
pub mod tables;
pub mod tcp;
pub mod xdr;

use std::io::Read;

pub use dissector::{Dissector, Settings};

/// Parse already-opened captures.  Err((file index, message)) when one of
/// them is not a capture at all.
pub fn parse_sources(
    sources: Vec<Box<dyn Read + Send>>,
    settings: Settings,
    progress: &mut dyn FnMut(i64),
) -> Result<(Dissector, Vec<capture::FileInfo>), (usize, String)> {
    let mut readers = Vec::with_capacity(sources.len());
    for (i, s) in sources.into_iter().enumerate() {
        readers.push(
            capture::Reader::open(s, settings.max_frame_bytes, settings.max_interface_drops)
                .map_err(|e| (i, e))?,
        );
    }
    let mut merge = capture::Merge::new(readers);
    let mut d = Dissector::new(settings);
    d.run(&mut merge, progress);
    d.finish();
    let infos = merge.readers.into_iter().map(|r| r.info).collect();
    Ok((d, infos))
}

/// Default settings (ParseLimits' defaults), for tests and the fuzz target.
pub fn default_settings() -> Settings {
    Settings {
        tcp: tcp::Limits {
            head_bytes: 8192,
            max_record_bytes: 64 * 1024 * 1024,
            max_pending_segments: 4096,
            max_pending_bytes: 32 * 1024 * 1024,
            max_pending_bytes_total: 256 * 1024 * 1024,
            max_hole_age_ns: 5_000_000_000,
            max_unsynced_bytes: 1024 * 1024,
            max_ack_waiting: 4096,
        },
        max_frame_bytes: 262_144,
        max_interface_drops: 1 << 48,
        max_messages: i64::MAX,
        check_every_frames: 4096,
        ip_reassembly_timeout_ns: 30_000_000_000,
        max_ip_reassemblies: 65536,
        max_ip_reassembly_bytes: 64 * 1024 * 1024,
        max_fragments_per_datagram: 1024,
        max_pending_calls: 1_000_000,
        max_connections: 262_144,
        max_directions: 262_144,
        max_events_per_kind: 500_000,
        duplicate_window_ns: 1_000_000,
        send_gap_ns: 100_000,
        nfs3_procs: 22,
    }
}

#[cfg(feature = "python")]
mod python;
