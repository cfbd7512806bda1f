//! What a parse saw, for the capture-quality report (handed to
//! `parsers/stats.py`'s ParseStats): the frames and packets counted by layer
//! (`FrameCounts`) and the named anomalies (stats.ANOMALIES, the generated
//! `Anomaly`) with their counts, gathered by `Dissector::finish`.

use crate::dissector::Dissector;
use crate::ip;
use crate::tables::Anomaly;

/// Frames and packets by layer (stats.FrameCounts).
#[derive(Default)]
pub struct FrameCounts {
    pub ipv4: i64,
    pub ipv6: i64,
    pub non_ip: i64,
    pub tcp: i64,
    pub udp: i64,
    pub other: i64,
    pub short: i64,
    /// TCP data offset below 20 bytes or past the packet: skipped
    pub bad_tcp_header: i64,
}

impl Dissector {
    /// TCP connections whose window scale is unknown in a direction.
    pub fn window_scale_unknown(&self) -> i64 {
        self.n_tcp_conns - self.tracked_conns.len() as i64
    }

    /// A named anomaly's count (every one of stats.ANOMALIES: the match is
    /// exhaustive over the generated `Anomaly`).
    pub fn anomaly(&self, a: Anomaly) -> i64 {
        let fs = &self.reasm.stats;
        match a {
            Anomaly::RpcAuthTooLong => self.col.auth_too_long,
            Anomaly::TcpHeaderLength => self.counts.bad_tcp_header,
            Anomaly::IpLengthExceedsFrame => fs.length_exceeds_frame,
            Anomaly::RecordMarkTooLong => self.tcp.stats.marks_too_long,
            Anomaly::ConnectionsForgotten => self.n_forgotten,
            Anomaly::MessagesCutByLimits => self.n_cut,
            Anomaly::TcpHolesByMemory => self.tcp.stats.holes_by_memory,
            Anomaly::IpDatagramsGivenUp => fs.given_up,
            Anomaly::DirectionsUntracked => self.facts.rows[ip::OVERFLOW][ip::F_PACKETS],
            Anomaly::EventsNotRecorded => {
                self.col.events_dropped + fs.incomplete - self.lost_listed
            }
            Anomaly::CallsForgotten => self.col.calls.forgotten,
            Anomaly::MessagesLimit => self.stopped_at,
            Anomaly::TcpBadChecksum => self.bad_checksum,
            Anomaly::TcpSynInWindow => self.syn_in_window,
        }
    }

    /// Named anomalies (stats.ANOMALIES) with their counts, the non-zero ones.
    pub fn anomalies(&self) -> Vec<(&'static str, i64)> {
        Anomaly::ALL
            .into_iter()
            .map(|a| (a.name(), self.anomaly(a)))
            .filter(|(_, n)| *n != 0)
            .collect()
    }
}
