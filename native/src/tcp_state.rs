//! TCP state beyond reassembly, for the transport events (numbers from
//! protocol/tcp.py): the handshake (MSS and window scale options, RFC
//! 9293 / RFC 7323), advertised windows (zero and full windows), data->ACK
//! round trips, send gaps, and what a stream leaves in its direction's facts
//! when it ends, called from the dissector's slow paths.  A function that only
//! updates state takes the part of a `HalfStream` (tcp.rs) it changes; one that
//! records events takes the stream (the events' subject) and the `Sink` they go
//! to (the collector).

use crate::ip::{self, Facts};
use crate::tables::{
    DEFAULT_MSS, MAX_WSCALE, SEQ_HALF, SEQ_MASK, SEQ_MOD, TCPOPT_EOL, TCPOPT_MSS, TCPOPT_NOP,
    TCPOPT_WSCALE, TH_ACK, TH_RST,
};
use crate::tcp::{Ev, HalfStream, IpFacts, Mode, RttWatch, Sink, WindowWatch};

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

/// The zero-window stretch open on hs's `win` ends at ts.
pub(crate) fn end_zero_window(col: &mut impl Sink, hs: &mut HalfStream, ts: i64) {
    let w = &hs.win;
    col.event(
        hs,
        Ev::TcpZeroWindow,
        w.zw_since,
        w.zw_frame,
        w.zw_seq,
        0,
        ts - w.zw_since,
    );
    hs.win.zw_since = -1;
}

/// The window-full stretch open on hs's `win` ends at ts.
pub(crate) fn end_window_full(col: &mut impl Sink, hs: &mut HalfStream, ts: i64) {
    let w = &hs.win;
    col.event(
        hs,
        Ev::TcpWindowFull,
        w.wfull_since,
        w.wfull_frame,
        w.wfull_seq,
        w.wfull_wnd,
        ts - w.wfull_since,
    );
    hs.win.wfull_since = -1;
}

/// End the stretches still open on a direction's `win`.
pub(crate) fn close_stretches(col: &mut impl Sink, hs: &mut HalfStream, ts: i64) {
    if hs.win.zw_since >= 0 {
        let t = ts.max(hs.win.zw_since);
        end_zero_window(col, hs, t);
        hs.win.watch = hs.win.handshake_ack_due;
    }
    if hs.win.wfull_since >= 0 {
        let t = ts.max(hs.win.wfull_since);
        end_window_full(col, hs, t);
    }
}

/// The peer acknowledged the segment being timed: a round-trip sample.
pub(crate) fn ack_rtt_sample(rtt: &mut RttWatch, ts: i64) {
    rtt.end = -1;
    let sample = ts - rtt.start[0];
    if sample >= 0 && (rtt.best[0] < 0 || sample < rtt.best[0]) {
        let [t, frame, seq, len] = rtt.start;
        rtt.best = [sample, t, frame, seq, len];
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
/// Reads hs's `gaps`.
pub(crate) fn send_gap(col: &mut impl Sink, hs: &HalfStream, ts: i64, seq: i64, resent: bool) {
    let g = &hs.gaps;
    let (start, acked, flight) = (g.last_ts, g.acked, g.flight);
    if resent {
        col.event(
            hs,
            Ev::TcpResendGap,
            start,
            g.last_frame,
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
            g.last_frame,
            seq,
            flight,
            end - start,
        );
    }
    if acked >= 0 && g.mid && ts > acked {
        col.event(hs, Ev::TcpSendIdle, acked, g.last_frame, seq, 0, ts - acked);
    }
}

/// A stream replaced or at the end: close its stretches (`win`), record its
/// smallest data->ACK round trip (`rtt`), fold its counts into its direction's
/// facts (`ip`).
pub(crate) fn retire(col: &mut impl Sink, facts: &mut Facts, hs: &mut HalfStream, ts: i64) {
    close_stretches(col, hs, ts);
    if hs.rtt.best[0] >= 0 {
        let [rtt, start, frame, seq, len] = hs.rtt.best;
        col.event(hs, Ev::TcpAckRtt, start, frame, seq, len, rtt);
        hs.rtt.best[0] = -1;
    }
    let ip = &mut hs.ip;
    let f = &mut facts.rows[ip.facts];
    f[ip::F_PACKETS] += ip.packets;
    f[ip::F_IP_BYTES] += ip.ip_bytes;
    ip.packets = 0;
    ip.ip_bytes = 0;
}

/// A packet with a new largest length or another TTL than the last one.
pub(crate) fn ip_extremes(facts: &mut Facts, ipf: &mut IpFacts, ip_len: i64, ttl: i64) {
    if ttl < 0 {
        // reassembled from fragments, which were counted one by one
        ipf.packets -= 1;
        ipf.ip_bytes -= ip_len;
        return;
    }
    let f = &mut facts.rows[ipf.facts];
    ipf.ttl = ttl;
    if ttl < f[ip::F_TTL_MIN] {
        f[ip::F_TTL_MIN] = ttl;
    }
    if ttl > f[ip::F_TTL_MAX] {
        f[ip::F_TTL_MAX] = ttl;
    }
    if ip_len > ipf.max_ip_len {
        ipf.max_ip_len = ip_len;
        if ip_len > f[ip::F_MAX_IP_LEN] {
            f[ip::F_MAX_IP_LEN] = ip_len;
        }
    }
}

/// A packet of a direction under watch, or one advertising a zero window
/// (hs's `win`; its `framing` read: a stream given up opens no stretch).
pub(crate) fn watch(
    col: &mut impl Sink,
    hs: &mut HalfStream,
    flags: u8,
    window: i64,
    seq: i64,
    ts: i64,
    frame: i64,
) {
    if hs.win.handshake_ack_due && flags & TH_ACK != 0 {
        hs.win.handshake_ack_due = false;
        col.event(hs, Ev::TcpHandshakeAck, ts, frame, seq, 0, 0);
    }
    if window == 0 && flags & TH_RST == 0 {
        if hs.win.zw_since < 0 && hs.framing.mode != Mode::Ignore {
            let w = &mut hs.win;
            w.zw_since = ts;
            w.zw_frame = frame;
            w.zw_seq = seq;
        }
    } else if hs.win.zw_since >= 0 {
        end_zero_window(col, hs, ts);
    }
    hs.win.watch = hs.win.handshake_ack_due || hs.win.zw_since >= 0;
}

/// A data segment reaching (within one MSS) the window the peer advertised.
pub(crate) fn window_reached(win: &mut WindowWatch, seq: i64, end: i64, ts: i64, frame: i64) {
    if ((end - win.seq_hi) & SEQ_MASK) < SEQ_HALF {
        win.seq_hi = end;
    }
    if win.wfull_since < 0 && win.peer_wnd > 0 {
        win.wfull_since = ts;
        win.wfull_frame = frame;
        win.wfull_seq = seq;
        win.wfull_wnd = win.peer_wnd;
    }
}

/// A SYN or SYN-ACK: handshake event, MSS and window scale in the `win` parts
/// of `h` and its reverse `r`.  True when both directions'
/// shifts are known (window tracking on).  `h` and `r` are arena indices; they
/// are the same stream when a host talks to itself on one port (each field is
/// then read and written in this order).
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
    a[h].win.syn_mss = mss;
    a[h].win.syn_window = window;
    a[h].win.seq_hi = (seq + 1) & SEQ_MASK;
    if flags & TH_ACK == 0 {
        a[h].win.syn_wscale = wscale;
        col.event(&a[h], Ev::TcpSyn, ts, frame, seq, 0, 0);
        return false;
    }
    col.event(&a[h], Ev::TcpSynAck, ts, frame, seq, 0, 0);
    let r = match r {
        None => {
            a[h].win.wshift = if wscale >= 0 { wscale } else { 0 };
            return false;
        }
        Some(r) => r,
    };
    if wscale < 0 || a[r].win.syn_wscale == -1 {
        a[h].win.wshift = 0;
        a[r].win.wshift = 0;
    } else {
        a[h].win.wshift = wscale;
        a[r].win.wshift = a[r].win.syn_wscale;
        if a[r].win.wshift < 0 {
            a[r].win.wshift = -1;
        }
    }
    if a[r].win.syn_wscale == -2 {
        a[r].win.seq_hi = ack;
    }
    a[r].win.handshake_ack_due = true;
    a[r].win.watch = true;
    a[r].win.mss = if mss > 0 { mss } else { DEFAULT_MSS };
    a[h].win.mss = if a[r].win.syn_mss > 0 {
        a[r].win.syn_mss
    } else {
        DEFAULT_MSS
    };
    a[r].win.peer_wnd = window;
    a[r].win.wlimit = (a[r].win.seq_hi + window - a[r].win.mss) & SEQ_MASK;
    a[h].win.wack = -1;
    a[h].win.wwin = -1;
    a[r].win.wack = -1;
    a[r].win.wwin = -1;
    a[h].win.peer_wnd = if a[r].win.syn_wscale != -2 {
        a[r].win.syn_window
    } else {
        0
    };
    a[h].win.wlimit = if a[h].win.peer_wnd != 0 {
        (a[h].win.seq_hi + a[h].win.peer_wnd - a[h].win.mss) & SEQ_MASK
    } else {
        (a[h].win.seq_hi + SEQ_HALF - 1) & SEQ_MASK
    };
    a[r].win.wtrack = a[h].win.wshift >= 0;
    a[h].win.wtrack = a[r].win.wshift >= 0;
    a[r].win.wtrack && a[h].win.wtrack
}
