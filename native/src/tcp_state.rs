//! TCP state beyond reassembly, for the transport events (mirrors
//! `parsers/tcp_state.py`): the handshake (MSS and window scale options, RFC
//! 9293 / RFC 7323), advertised windows (zero and full windows), data->ACK
//! round trips, send gaps, and what a stream leaves in its direction's facts
//! when it ends.  Functions of a `HalfStream` (tcp.rs) and the `Sink` events go
//! to (the collector), called from the dissector's slow paths.

use crate::ip::{self, Facts};
use crate::tables::{
    DEFAULT_MSS, MAX_WSCALE, SEQ_HALF, SEQ_MASK, SEQ_MOD, TCPOPT_EOL, TCPOPT_MSS, TCPOPT_NOP,
    TCPOPT_WSCALE, TH_ACK, TH_RST,
};
use crate::tcp::{Ev, HalfStream, Sink, IGNORE};

fn tcp_options(p: &[u8], hl: usize) -> (i64, i64) {
    let (mut mss, mut wscale) = (-1i64, -1i64);
    let end = hl.min(p.len());
    let mut i = 20usize;
    while i < end {
        let kind = p[i];
        if kind == TCPOPT_EOL {
            break;
        }
        if kind == TCPOPT_NOP {
            i += 1;
            continue;
        }
        if i + 1 >= end || p[i + 1] < 2 {
            break;
        }
        let size = p[i + 1] as usize;
        if kind == TCPOPT_MSS && size == 4 && i + 4 <= end {
            mss = u16::from_be_bytes([p[i + 2], p[i + 3]]) as i64;
        } else if kind == TCPOPT_WSCALE && size == 3 && i + 3 <= end {
            wscale = (p[i + 2] as i64).min(MAX_WSCALE);
        }
        i += size;
    }
    (mss, wscale)
}

pub(crate) fn end_zero_window(col: &mut impl Sink, hs: &mut HalfStream, ts: i64) {
    col.event(
        hs,
        Ev::TcpZeroWindow,
        hs.zw_since,
        hs.zw_frame,
        hs.zw_seq,
        0,
        ts - hs.zw_since,
    );
    hs.zw_since = -1;
}

pub(crate) fn end_window_full(col: &mut impl Sink, hs: &mut HalfStream, ts: i64) {
    col.event(
        hs,
        Ev::TcpWindowFull,
        hs.wfull_since,
        hs.wfull_frame,
        hs.wfull_seq,
        hs.wfull_wnd,
        ts - hs.wfull_since,
    );
    hs.wfull_since = -1;
}

pub(crate) fn close_stretches(col: &mut impl Sink, hs: &mut HalfStream, ts: i64) {
    if hs.zw_since >= 0 {
        let t = ts.max(hs.zw_since);
        end_zero_window(col, hs, t);
        hs.watch = hs.handshake_ack_due;
    }
    if hs.wfull_since >= 0 {
        let t = ts.max(hs.wfull_since);
        end_window_full(col, hs, t);
    }
}

/// The peer acknowledged the segment of hs being timed: a round-trip sample.
pub(crate) fn ack_rtt_sample(hs: &mut HalfStream, ts: i64) {
    hs.rtt_end = -1;
    let sample = ts - hs.rtt_start[0];
    if sample >= 0 && (hs.rtt_best[0] < 0 || sample < hs.rtt_best[0]) {
        let [t, frame, seq, len] = hs.rtt_start;
        hs.rtt_best = [sample, t, frame, seq, len];
    }
}

/// The sequence number the receiver's ACK must reach for a message at [start,
/// end) to count as received: all of it but its last segment (tcp_state.ack_point).
pub fn ack_point(start: i64, end: i64, max_seg: i64) -> i64 {
    let length = (end - start).rem_euclid(SEQ_MOD);
    let back = if length > max_seg {
        max_seg
    } else {
        length - 1
    };
    (end - back).rem_euclid(SEQ_MOD)
}

/// hs sends data at ts after a gap of at least ParseLimits.send_gap_ns that it
/// began part-way through an RPC message or ends by re-sending bytes: a gap
/// ended by re-sent bytes (tcp_resend_gap), else the part with bytes
/// unacknowledged (tcp_send_gap) and the part with none (tcp_send_idle).
pub(crate) fn send_gap(col: &mut impl Sink, hs: &HalfStream, ts: i64, seq: i64, resent: bool) {
    let (start, acked, flight) = (hs.gap_t, hs.gap_acked, hs.gap_flight);
    if resent {
        col.event(
            hs,
            Ev::TcpResendGap,
            start,
            hs.gap_frame,
            seq,
            flight,
            ts - start,
        );
        return;
    }
    if flight < 0 || (flight > 0 && acked != start) {
        // unknown ack state counts as waiting
        let end = if acked >= 0 { acked } else { ts };
        col.event(
            hs,
            Ev::TcpSendGap,
            start,
            hs.gap_frame,
            seq,
            flight,
            end - start,
        );
    }
    if acked >= 0 && hs.gap_mid && ts > acked {
        col.event(hs, Ev::TcpSendIdle, acked, hs.gap_frame, seq, 0, ts - acked);
    }
}

/// A stream replaced or at the end: close its stretches, record its smallest
/// data->ACK round trip, fold its counts into its direction's facts.
pub(crate) fn retire(col: &mut impl Sink, facts: &mut Facts, hs: &mut HalfStream, ts: i64) {
    close_stretches(col, hs, ts);
    if hs.rtt_best[0] >= 0 {
        let [rtt, start, frame, seq, len] = hs.rtt_best;
        col.event(hs, Ev::TcpAckRtt, start, frame, seq, len, rtt);
        hs.rtt_best[0] = -1;
    }
    let f = &mut facts.rows[hs.facts];
    f[ip::F_PACKETS] += hs.packets;
    f[ip::F_IP_BYTES] += hs.ip_bytes;
    hs.packets = 0;
    hs.ip_bytes = 0;
}

pub(crate) fn ip_extremes(facts: &mut Facts, hs: &mut HalfStream, ip_len: i64, ttl: i64) {
    if ttl < 0 {
        // reassembled from fragments, which were counted one by one
        hs.packets -= 1;
        hs.ip_bytes -= ip_len;
        return;
    }
    let f = &mut facts.rows[hs.facts];
    hs.ttl = ttl;
    if ttl < f[ip::F_TTL_MIN] {
        f[ip::F_TTL_MIN] = ttl;
    }
    if ttl > f[ip::F_TTL_MAX] {
        f[ip::F_TTL_MAX] = ttl;
    }
    if ip_len > hs.max_ip_len {
        hs.max_ip_len = ip_len;
        if ip_len > f[ip::F_MAX_IP_LEN] {
            f[ip::F_MAX_IP_LEN] = ip_len;
        }
    }
}

pub(crate) fn watch(
    col: &mut impl Sink,
    hs: &mut HalfStream,
    flags: u8,
    window: i64,
    seq: i64,
    ts: i64,
    frame: i64,
) {
    if hs.handshake_ack_due && flags & TH_ACK != 0 {
        hs.handshake_ack_due = false;
        col.event(hs, Ev::TcpHandshakeAck, ts, frame, seq, 0, 0);
    }
    if window == 0 && flags & TH_RST == 0 {
        if hs.zw_since < 0 && hs.mode != IGNORE {
            hs.zw_since = ts;
            hs.zw_frame = frame;
            hs.zw_seq = seq;
        }
    } else if hs.zw_since >= 0 {
        end_zero_window(col, hs, ts);
    }
    hs.watch = hs.handshake_ack_due || hs.zw_since >= 0;
}

pub(crate) fn window_reached(hs: &mut HalfStream, seq: i64, end: i64, ts: i64, frame: i64) {
    if ((end - hs.seq_hi) & SEQ_MASK) < SEQ_HALF {
        hs.seq_hi = end;
    }
    if hs.wfull_since < 0 && hs.peer_wnd > 0 {
        hs.wfull_since = ts;
        hs.wfull_frame = frame;
        hs.wfull_seq = seq;
        hs.wfull_wnd = hs.peer_wnd;
    }
}

/// A SYN or SYN-ACK: handshake event, MSS and window scale (tcp_state.on_syn).
/// True when both directions' shifts are known (window tracking on).  `h` and
/// its reverse `r` are arena indices; they are the same stream when a host
/// talks to itself on one port (each field is then read and written in the
/// reference's order).
#[allow(clippy::too_many_arguments)]
pub(crate) fn on_syn(
    col: &mut impl Sink,
    a: &mut [HalfStream],
    h: usize,
    r: Option<usize>,
    p: &[u8],
    hl: usize,
    flags: u8,
    seq: i64,
    ack: i64,
    window: i64,
    ts: i64,
    frame: i64,
) -> bool {
    let (mss, wscale) = tcp_options(p, hl);
    a[h].syn_mss = mss;
    a[h].syn_window = window;
    a[h].seq_hi = (seq + 1) & SEQ_MASK;
    if flags & TH_ACK == 0 {
        a[h].syn_wscale = wscale;
        col.event(&a[h], Ev::TcpSyn, ts, frame, seq, 0, 0);
        return false;
    }
    col.event(&a[h], Ev::TcpSynAck, ts, frame, seq, 0, 0);
    let r = match r {
        None => {
            a[h].wshift = if wscale >= 0 { wscale } else { 0 };
            return false;
        }
        Some(r) => r,
    };
    if wscale < 0 || a[r].syn_wscale == -1 {
        a[h].wshift = 0;
        a[r].wshift = 0;
    } else {
        a[h].wshift = wscale;
        a[r].wshift = a[r].syn_wscale;
        if a[r].wshift < 0 {
            a[r].wshift = -1;
        }
    }
    if a[r].syn_wscale == -2 {
        a[r].seq_hi = ack;
    }
    a[r].handshake_ack_due = true;
    a[r].watch = true;
    a[r].mss = if mss > 0 { mss } else { DEFAULT_MSS };
    a[h].mss = if a[r].syn_mss > 0 {
        a[r].syn_mss
    } else {
        DEFAULT_MSS
    };
    a[r].peer_wnd = window;
    a[r].wlimit = (a[r].seq_hi + window - a[r].mss) & SEQ_MASK;
    a[h].wack = -1;
    a[h].wwin = -1;
    a[r].wack = -1;
    a[r].wwin = -1;
    a[h].peer_wnd = if a[r].syn_wscale != -2 {
        a[r].syn_window
    } else {
        0
    };
    a[h].wlimit = if a[h].peer_wnd != 0 {
        (a[h].seq_hi + a[h].peer_wnd - a[h].mss) & SEQ_MASK
    } else {
        (a[h].seq_hi + SEQ_HALF - 1) & SEQ_MASK
    };
    a[r].wtrack = a[h].wshift >= 0;
    a[h].wtrack = a[r].wshift >= 0;
    a[r].wtrack && a[h].wtrack
}
