//! The frame loop and transport layer (mirrors `parsers/frame_loop.py` and `dissector.py`): mirror
//! duplicates, link -> IP (fragment reassembly) -> UDP datagram or TCP segment
//! (connections, handshake, windows, reassembly) -> record marking -> RPC
//! header -> NFS fields, collected as columns.

use crate::capture::{Frame, Merge};
use crate::ip::{self, Addr, Datagram, Facts, Reassembler};
use crate::link::locate_ip;
use crate::maps::{HashMap, HashSet, IndexMap};
use crate::nfs;
use crate::portmap;
use crate::rpc;
use crate::tcp::{
    Assembled, Ev, HalfStream, Limits, Sink, TcpReassembler, EVENT_KIND_NAMES, IGNORE,
    RTT_MAX_SEGMENT,
};

use std::collections::VecDeque;
use std::hash::Hash;

use crate::tables::{
    is_rpc_well_known_port as well_known, Anomaly, DEFAULT_MSS, MAX_FLOWS, MAX_LEARNT_PORTS,
    MAX_PORTMAP_ASKS, MAX_RECENT_FRAMES, MAX_WSCALE, MSGTYPE_CALL, MSGTYPE_REPLY,
    NFSPROC4_COMPOUND, NFS_PROGRAM, SEQ_HALF, SEQ_MASK, SYN_WINDOW, TCPOPT_EOL, TCPOPT_MSS,
    TCPOPT_NOP, TCPOPT_WSCALE, TH_ACK, TH_FIN, TH_RST, TH_SYN, TRANSPORT_TCP, TRANSPORT_UDP,
};

/// Where the UDP header starts in an IP datagram's first fragment (IPv6: after
/// the extension headers); -1 if not UDP (dissector._udp_offset).
fn udp_offset(version: u8, proto: i32, data: &[u8]) -> i64 {
    if version == 4 {
        return if proto == ip::PROTO_UDP { 0 } else { -1 };
    }
    let (nh, pos, _) = ip::walk_extensions(data, proto, 0, data.len() as i64);
    if nh == ip::PROTO_UDP {
        pos
    } else {
        -1
    }
}

/// Limits and settings from ParseLimits (and one fact from procnames.py).
pub struct Settings {
    pub tcp: Limits,
    pub max_frame_bytes: usize,
    /// capture.MAX_INTERFACE_DROPS
    pub max_interface_drops: u64,
    /// ParseLimits.max_messages, checked every config.CHECK_EVERY_FRAMES frames
    pub max_messages: i64,
    pub check_every_frames: i64,
    pub ip_reassembly_timeout_ns: i64,
    pub max_ip_reassemblies: usize,
    pub max_ip_reassembly_bytes: i64,
    pub max_fragments_per_datagram: i64,
    pub max_pending_calls: usize,
    pub max_connections: usize,
    pub max_directions: usize,
    pub max_events_per_kind: usize,
    pub duplicate_window_ns: i64,
    pub send_gap_ns: i64,
    /// ParseLimits.partitions / partition: read only the frames of this
    /// partition of the host pairs (ip::partition_of)
    pub partitions: usize,
    pub partition: usize,
}

/// Distinct values of a column, numbered from 0 (0 = the empty value).
pub struct Interner<K: Hash + Eq + Clone> {
    map: HashMap<K, u32>,
    pub values: Vec<K>,
}

impl<K: Hash + Eq + Clone> Interner<K> {
    pub fn new(empty: K) -> Self {
        let mut map = HashMap::default();
        map.insert(empty.clone(), 0);
        Interner {
            map,
            values: vec![empty],
        }
    }
    #[inline]
    pub fn id(&mut self, k: &K) -> u32 {
        if let Some(&i) = self.map.get(k) {
            return i;
        }
        let i = self.values.len() as u32;
        self.values.push(k.clone());
        self.map.insert(k.clone(), i);
        i
    }
}

impl Interner<Vec<u8>> {
    #[inline]
    pub fn bytes(&mut self, k: Option<&[u8]>) -> u32 {
        match k {
            None | Some([]) => 0,
            Some(b) => {
                if let Some(&i) = self.map.get(b) {
                    return i;
                }
                self.id(&b.to_vec())
            }
        }
    }
}

/// A growing column kept in fixed-size chunks: no reallocation copies and no
/// doubled capacity on large captures; made one array when handed to Python.
pub struct Col<T> {
    pub chunks: Vec<Vec<T>>,
    len: usize,
}

const COL_CHUNK: usize = 1 << 16;

impl<T> Default for Col<T> {
    fn default() -> Self {
        Col {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T> Col<T> {
    #[inline]
    pub fn push(&mut self, v: T) {
        match self.chunks.last_mut() {
            Some(c) if c.len() < COL_CHUNK => c.push(v),
            _ => {
                let mut c = Vec::with_capacity(COL_CHUNK);
                c.push(v);
                self.chunks.push(c);
            }
        }
        self.len += 1;
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The messages table as columns (schema.MESSAGE_COLUMNS); strings as ids
/// into the interners.
#[derive(Default)]
pub struct Columns {
    pub ts_first: Col<i64>,
    pub ts_last: Col<i64>,
    pub frame_first: Col<i64>,
    pub frame_last: Col<i64>,
    pub src: Col<u32>,
    pub sport: Col<i32>,
    pub dst: Col<u32>,
    pub dport: Col<i32>,
    pub transport: Col<u8>,
    pub conn: Col<i64>,
    pub xid: Col<i64>,
    pub msgtype: Col<u8>,
    pub prog: Col<i64>,
    pub vers: Col<i64>,
    pub proc_: Col<i64>,
    pub auth: Col<i64>,
    pub auth_uid: Col<i64>,
    pub auth_gid: Col<i64>,
    pub auth_machine: Col<u32>,
    pub gss_proc: Col<i32>,
    pub gss_service: Col<i64>,
    pub reply_stat: Col<u8>,
    pub accept_stat: Col<i32>,
    pub reject_stat: Col<i32>,
    pub body_offset: Col<i32>,
    pub rpc_len: Col<i64>,
    pub captured_len: Col<i64>,
    pub record_frags: Col<i32>,
    pub frames: Col<i32>,
    pub ip_frags: Col<i32>,
    pub truncated: Col<u8>,
    pub nfs_kind: Col<u8>,
    pub ops: Col<u32>,
    pub op_status: Col<u32>,
    pub nfs_status: Col<i64>,
    pub fh: Col<u32>,
    pub name: Col<u32>,
    pub offset: Col<i64>,
    pub count: Col<i64>,
    pub stable: Col<i32>,
    pub committed: Col<i32>,
    pub verifier: Col<u32>,
    pub eof: Col<i32>,
    pub session: Col<u32>,
    pub slot: Col<i64>,
    pub seqid: Col<i64>,
    pub minor: Col<i32>,
    pub nfs_decode: Col<u8>,
}

/// A message whose NFS fields Python decodes (nfs::Kind::Defer).
pub struct Deferred {
    pub row: u64,
    pub head: Vec<u8>,
    pub is_call: bool,
    pub prog: i64,
    pub vers: i64,
    pub proc_: i64,
    pub body_offset: i64,
    pub gss_service: i64,
    pub gss_proc: i64,
}

#[derive(Default)]
pub struct Events {
    pub ts: Vec<i64>,
    pub frame: Vec<i64>,
    pub conn: Vec<i64>,
    pub src: Vec<u32>,
    pub sport: Vec<i32>,
    pub dst: Vec<u32>,
    pub dport: Vec<i32>,
    pub kind: Vec<u8>,
    pub seq: Vec<i64>,
    pub length: Vec<i64>,
    pub duration: Vec<i64>,
}

#[derive(Default)]
pub struct MsgStats {
    pub messages: i64,
    pub calls: i64,
    pub replies: i64,
    pub truncated_messages: i64,
    pub incomplete_messages: i64,
    pub headerless_messages: i64,
    pub not_rpc_records: i64,
    pub replies_without_call_info: i64,
}

type CallKey = (Addr, Addr, u32);
/// (client, client port, server, server port) of a call
type FlowKey = (Addr, i32, Addr, i32);
/// (prog, vers, proc, gss_service, gss_proc) of the last call
type CallInfo = (i64, i64, i64, i64, i64);

/// Calls remembered to name replies, oldest forgotten first past a bound
/// (a Python dict re-inserted on use); each with whether a reply came.
struct Calls {
    map: HashMap<CallKey, (CallInfo, u64, bool)>,
    order: VecDeque<(CallKey, u64)>,
    stamp: u64,
    max: usize,
    /// calls forgotten before any reply came (collector.Collector.calls_forgotten)
    forgotten: i64,
}

impl Calls {
    fn insert(&mut self, key: CallKey, info: CallInfo) {
        if !self.map.contains_key(&key) && self.map.len() >= self.max {
            while let Some((k, s)) = self.order.pop_front() {
                if matches!(self.map.get(&k), Some((_, t, _)) if *t == s) {
                    if let Some((_, _, answered)) = self.map.remove(&k) {
                        self.forgotten += i64::from(!answered);
                    }
                    break;
                }
            }
        }
        self.stamp += 1;
        self.map.insert(key, (info, self.stamp, false));
        self.order.push_back((key, self.stamp));
        if self.order.len() > 2 * self.map.len() + 1024 {
            let map = &self.map;
            self.order
                .retain(|(k, s)| matches!(map.get(k), Some((_, t, _)) if t == s));
        }
    }
    /// The call a reply answers, marked answered.
    fn answer(&mut self, key: &CallKey) -> Option<CallInfo> {
        self.map.get_mut(key).map(|(i, _, answered)| {
            *answered = true;
            *i
        })
    }
}

/// Assembled messages -> rows; remembers calls to name replies (collector.Collector).
pub struct Collector {
    pub cols: Columns,
    /// rows whose last byte the receiver acknowledged, and when (messages.acked_ns)
    pub acked_rows: Vec<u64>,
    pub acked_ts: Vec<i64>,
    pub deferred: Vec<Deferred>,
    pub events: Events,
    event_counts: [usize; EVENT_KIND_NAMES.len()],
    max_events: usize,
    pub events_dropped: i64,
    pub auth_too_long: i64,
    calls: Calls,
    /// the last call of each flow: names replies whose call was not seen
    flows: HashMap<FlowKey, CallInfo>,
    /// UDP (address, port) a portmap/rpcbind reply announced; portmap calls
    /// asking for a UDP address (true) or another (false), until their reply
    pub rpc_ports: HashSet<(Addr, i32)>,
    portmap_asks: HashMap<CallKey, bool>,
    pub stats: MsgStats,
    pub addrs: Interner<Addr>,
    pub machines: Interner<Vec<u8>>,
    pub fhs: Interner<Vec<u8>>,
    pub names: Interner<Vec<u8>>,
    pub verifiers: Interner<Vec<u8>>,
    pub sessions: Interner<Vec<u8>>,
    pub op_lists: Interner<Vec<u32>>,
    pub status_lists: Interner<Vec<u32>>,
}

impl Collector {
    fn new(max_calls: usize, max_events: usize) -> Self {
        Collector {
            cols: Columns::default(),
            acked_rows: Vec::new(),
            acked_ts: Vec::new(),
            deferred: Vec::new(),
            events: Events::default(),
            event_counts: [0; EVENT_KIND_NAMES.len()],
            max_events,
            events_dropped: 0,
            auth_too_long: 0,
            calls: Calls {
                map: HashMap::default(),
                order: VecDeque::new(),
                stamp: 0,
                max: max_calls.max(1),
                forgotten: 0,
            },
            flows: HashMap::default(),
            rpc_ports: HashSet::default(),
            portmap_asks: HashMap::default(),
            stats: MsgStats::default(),
            addrs: Interner::new(Addr::default()),
            machines: Interner::new(Vec::new()),
            fhs: Interner::new(Vec::new()),
            names: Interner::new(Vec::new()),
            verifiers: Interner::new(Vec::new()),
            sessions: Interner::new(Vec::new()),
            op_lists: Interner::new(Vec::new()),
            status_lists: Interner::new(Vec::new()),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn push_event(
        &mut self,
        ts: i64,
        frame: i64,
        conn: i64,
        src: Addr,
        sport: i32,
        dst: Addr,
        dport: i32,
        kind: Ev,
        seq: i64,
        length: i64,
        duration: i64,
    ) {
        // past max_events of its kind an event is counted, not recorded
        let n = &mut self.event_counts[kind as usize];
        if *n >= self.max_events {
            self.events_dropped += 1;
            return;
        }
        *n += 1;
        let s = self.addrs.id(&src);
        let d = self.addrs.id(&dst);
        let e = &mut self.events;
        e.ts.push(ts);
        e.frame.push(frame);
        e.conn.push(conn);
        e.src.push(s);
        e.sport.push(sport);
        e.dst.push(d);
        e.dport.push(dport);
        e.kind.push(kind as u8);
        e.seq.push(seq);
        e.length.push(length);
        e.duration.push(duration);
    }

    /// One assembled message (collector.Collector.message).
    #[allow(clippy::too_many_arguments)]
    fn message(
        &mut self,
        src: Addr,
        sport: i32,
        dst: Addr,
        dport: i32,
        is_tcp: bool,
        conn: i64,
        head: &[u8],
        m: &Assembled,
    ) -> Option<u64> {
        let st = &mut self.stats;
        let mut hdr = match rpc::decode_header(head) {
            Some(h) => h,
            None => {
                if head.len() < 8 {
                    st.headerless_messages += 1;
                } else {
                    st.not_rpc_records += 1;
                }
                return None;
            }
        };
        let xid = hdr.xid;
        if hdr.body_offset < 0 && head.len() >= 40 && auth_too_long(head, hdr.is_call) {
            self.auth_too_long += 1;
        }
        let fields = if hdr.is_call {
            st.calls += 1;
            let info = (hdr.prog, hdr.vers, hdr.proc_, hdr.gss_service, hdr.gss_proc);
            self.calls.insert((src, dst, xid), info);
            let flow = (src, sport, dst, dport);
            if self.flows.len() >= MAX_FLOWS && !self.flows.contains_key(&flow) {
                self.flows.clear();
            }
            self.flows.insert(flow, info);
            if hdr.prog == portmap::PORTMAP_PROGRAM {
                if let Some(asks) = portmap::asks_udp(hdr.vers, hdr.proc_, head, hdr.body_offset) {
                    if self.portmap_asks.len() >= MAX_PORTMAP_ASKS {
                        self.portmap_asks.clear();
                    }
                    self.portmap_asks.insert((src, dst, xid), asks);
                }
            }
            nfs::decode(
                true,
                hdr.prog,
                hdr.vers,
                hdr.proc_,
                head,
                hdr.body_offset,
                hdr.gss_service,
                hdr.gss_proc,
            )
        } else {
            st.replies += 1;
            match self.calls.answer(&(dst, src, xid)) {
                Some((prog, vers, proc_, gss_service, gss_proc)) => {
                    hdr.prog = prog;
                    hdr.vers = vers;
                    hdr.proc_ = proc_;
                    if prog == portmap::PORTMAP_PROGRAM {
                        // the ports it announces become RPC ports (collector.Collector._portmap_reply)
                        let asked = self.portmap_asks.remove(&(dst, src, xid)).unwrap_or(false);
                        if hdr.accept_stat == 0 {
                            for port in
                                portmap::learnt_ports(vers, proc_, head, hdr.body_offset, asked)
                            {
                                if self.rpc_ports.len() < MAX_LEARNT_PORTS {
                                    self.rpc_ports.insert((src, port as i32));
                                }
                            }
                        }
                    }
                    let f = nfs::decode(
                        false,
                        prog,
                        vers,
                        proc_,
                        head,
                        hdr.body_offset,
                        gss_service,
                        gss_proc,
                    );
                    if f.kind == nfs::Kind::Defer as u8 {
                        self.deferred.push(Deferred {
                            row: self.cols.ts_first.len() as u64,
                            head: head.to_vec(),
                            is_call: false,
                            prog,
                            vers,
                            proc_,
                            body_offset: hdr.body_offset,
                            gss_service,
                            gss_proc,
                        });
                    }
                    f
                }
                None => {
                    st.replies_without_call_info += 1;
                    let last = self.flows.get(&(dst, dport, src, sport)).copied();
                    if let Some(f) = nfs::reply_without_call(last, head, hdr.body_offset) {
                        hdr.prog = NFS_PROGRAM;
                        hdr.vers = 4;
                        hdr.proc_ = NFSPROC4_COMPOUND;
                        f
                    } else {
                        nfs::decode(false, -1, -1, -1, head, hdr.body_offset, -1, -1)
                    }
                }
            }
        };
        if hdr.is_call && fields.kind == nfs::Kind::Defer as u8 {
            self.deferred.push(Deferred {
                row: self.cols.ts_first.len() as u64,
                head: head.to_vec(),
                is_call: true,
                prog: hdr.prog,
                vers: hdr.vers,
                proc_: hdr.proc_,
                body_offset: hdr.body_offset,
                gss_service: hdr.gss_service,
                gss_proc: hdr.gss_proc,
            });
        }
        let st = &mut self.stats;
        let truncated = m.captured < m.rpc_len || !m.complete;
        if truncated {
            st.truncated_messages += 1;
        }
        if !m.complete {
            st.incomplete_messages += 1;
        }
        st.messages += 1;
        let s_id = self.addrs.id(&src);
        let d_id = self.addrs.id(&dst);
        let machine = self.machines.bytes(hdr.machine);
        let ops = if fields.ops.is_empty() {
            0
        } else {
            self.op_lists.id(&fields.ops)
        };
        let statuses = if fields.statuses.is_empty() {
            0
        } else {
            self.status_lists.id(&fields.statuses)
        };
        let fh = self.fhs.bytes(fields.fh);
        let name = self.names.bytes(fields.name);
        let verifier = self.verifiers.bytes(fields.verifier);
        let session = self.sessions.bytes(fields.session);
        let c = &mut self.cols;
        let row = c.ts_first.len() as u64;
        c.ts_first.push(m.ts_first);
        c.ts_last.push(m.ts_last);
        c.frame_first.push(m.frame_first);
        c.frame_last.push(m.frame_last);
        c.src.push(s_id);
        c.sport.push(sport);
        c.dst.push(d_id);
        c.dport.push(dport);
        c.transport
            .push(if is_tcp { TRANSPORT_TCP } else { TRANSPORT_UDP });
        c.conn.push(conn);
        c.xid.push(xid as i64);
        c.msgtype.push(if hdr.is_call {
            MSGTYPE_CALL
        } else {
            MSGTYPE_REPLY
        });
        c.prog.push(hdr.prog);
        c.vers.push(hdr.vers);
        c.proc_.push(hdr.proc_);
        c.auth.push(hdr.auth);
        c.auth_uid.push(hdr.uid);
        c.auth_gid.push(hdr.gid);
        c.auth_machine.push(machine);
        c.gss_proc.push(hdr.gss_proc as i32);
        c.gss_service.push(hdr.gss_service);
        c.reply_stat.push(hdr.reply_stat);
        c.accept_stat.push(hdr.accept_stat as i32);
        c.reject_stat.push(hdr.reject_stat as i32);
        c.body_offset.push(hdr.body_offset as i32);
        c.rpc_len.push(m.rpc_len);
        c.captured_len.push(m.captured);
        c.record_frags.push(m.record_frags as i32);
        c.frames.push(m.frames as i32);
        c.ip_frags.push(m.ip_frags as i32);
        c.truncated.push(truncated as u8);
        c.nfs_kind.push(fields.kind);
        c.ops.push(ops);
        c.op_status.push(statuses);
        c.nfs_status
            .push(fields.nfs_status.map_or(-1, |v| v as i64));
        c.fh.push(fh);
        c.name.push(name);
        c.offset.push(fields.offset.map_or(-1, offset64));
        c.count.push(fields.count.map_or(-1, |v| v as i64));
        c.stable.push(fields.stable.map_or(-1, |v| v as i32));
        c.committed.push(fields.committed.map_or(-1, |v| v as i32));
        c.verifier.push(verifier);
        c.eof.push(fields.eof.map_or(-1, |v| v as i32));
        c.session.push(session);
        c.slot.push(fields.slot.map_or(-1, |v| v as i64));
        c.seqid.push(fields.seqid.map_or(-1, |v| v as i64));
        c.minor.push(fields.minor.map_or(-1, |v| v as i32));
        c.nfs_decode.push(fields.decode);
        Some(row)
    }
}

/// An XDR unsigned hyper file offset for the int64 column: one past 2**63 - 1
/// is no file offset (a damaged message): -1, unknown (nfs_fields.offset64).
fn offset64(v: u64) -> i64 {
    if v > i64::MAX as u64 {
        -1
    } else {
        v as i64
    }
}

/// A message whose procedure data could not be located: is it because its
/// credential or verifier claims more than RFC 5531's 400 bytes?  (head: at
/// least 40 bytes)
fn auth_too_long(head: &[u8], is_call: bool) -> bool {
    if is_call {
        let clen = rpc::be32(head, 28);
        if clen > rpc::MAX_AUTH_BYTES {
            return true;
        }
        let vpos = 32 + ((clen as usize + 3) & !3) + 4;
        return head.len() >= vpos + 4 && rpc::be32(head, vpos) > rpc::MAX_AUTH_BYTES;
    }
    rpc::be32(head, 8) == 0 && rpc::be32(head, 16) > rpc::MAX_AUTH_BYTES
}

impl Sink for Collector {
    fn emit(&mut self, hs: &HalfStream, m: Assembled) -> Option<u64> {
        let head = m.head;
        self.message(hs.src, hs.sport, hs.dst, hs.dport, true, hs.conn, head, &m)
    }
    fn event(
        &mut self,
        hs: &HalfStream,
        kind: Ev,
        ts: i64,
        frame: i64,
        seq: i64,
        length: i64,
        dur: i64,
    ) {
        self.push_event(
            ts, frame, hs.conn, hs.src, hs.sport, hs.dst, hs.dport, kind, seq, length, dur,
        );
    }
    fn is_pending_call(&self, hs: &HalfStream, xid: u32) -> bool {
        self.calls.map.contains_key(&(hs.dst, hs.src, xid))
    }
}

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

type StreamKey = (Addr, i32, Addr, i32);

/// The transport layer (dissector.Dissector).
pub struct Dissector {
    settings_dup_window: i64,
    send_gap_ns: i64,
    pub col: Collector,
    pub facts: Facts,
    pub reasm: Reassembler,
    pub tcp: TcpReassembler,
    arena: Vec<HalfStream>,
    streams: IndexMap<StreamKey, usize>,
    conns: IndexMap<StreamKey, i64>,
    /// UDP flows: frame number of their last RPC message
    udp_seen: HashMap<StreamKey, i64>,
    tracked_conns: HashSet<i64>,
    max_connections: usize,
    pub n_forgotten: i64,
    pub n_cut: i64,
    /// SYN segments dropped: a bad checksum / inside an established window
    bad_checksum: i64,
    syn_in_window: i64,
    lost_listed: i64,
    n_conns: i64,
    /// the frame that began each connection id (from 1): ParseStats.connection_frames
    pub conn_frames: Vec<i64>,
    pub n_tcp_conns: i64,
    pub n_dup: i64,
    pub n_frames: i64,
    max_messages: i64,
    partitions: usize,
    partition: usize,
    check_every_frames: i64,
    /// the frame not read: max_messages reached (0: read to the end)
    pub stopped_at: i64,
    ts: i64,
    pub counts: FrameCounts,
    // frames of the last duplicate window by fingerprint (time, bytes), in two
    // generations (dissector.Dissector.frames), and when the current one began
    recent: HashMap<u64, (i64, Vec<u8>)>,
    older: HashMap<u64, (i64, Vec<u8>)>,
    since: Option<i64>,
}

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

fn end_zero_window(col: &mut Collector, hs: &mut HalfStream, ts: i64) {
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

fn end_window_full(col: &mut Collector, hs: &mut HalfStream, ts: i64) {
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

fn close_stretches(col: &mut Collector, hs: &mut HalfStream, ts: i64) {
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
fn ack_rtt_sample(hs: &mut HalfStream, ts: i64) {
    hs.rtt_end = -1;
    let sample = ts - hs.rtt_start[0];
    if sample >= 0 && (hs.rtt_best[0] < 0 || sample < hs.rtt_best[0]) {
        let [t, frame, seq, len] = hs.rtt_start;
        hs.rtt_best = [sample, t, frame, seq, len];
    }
}

/// hs sends data at ts after a gap of at least ParseLimits.send_gap_ns that it
/// began part-way through an RPC message or ends by re-sending bytes: a gap
/// ended by re-sent bytes (tcp_resend_gap), else the part with bytes
/// unacknowledged (tcp_send_gap) and the part with none (tcp_send_idle).
fn send_gap(col: &mut Collector, hs: &HalfStream, ts: i64, seq: i64, resent: bool) {
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
fn retire(col: &mut Collector, facts: &mut Facts, hs: &mut HalfStream, ts: i64) {
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

fn ip_extremes(facts: &mut Facts, hs: &mut HalfStream, ip_len: i64, ttl: i64) {
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

fn watch(
    col: &mut Collector,
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

fn window_reached(hs: &mut HalfStream, seq: i64, end: i64, ts: i64, frame: i64) {
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
fn on_syn(
    col: &mut Collector,
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

impl Dissector {
    pub fn new(s: Settings) -> Self {
        Dissector {
            settings_dup_window: s.duplicate_window_ns,
            send_gap_ns: s.send_gap_ns,
            col: Collector::new(s.max_pending_calls, s.max_events_per_kind),
            facts: Facts::new(s.max_directions),
            reasm: Reassembler::new(
                s.ip_reassembly_timeout_ns,
                s.max_ip_reassemblies.max(1),
                s.max_ip_reassembly_bytes,
                s.max_fragments_per_datagram,
                s.max_events_per_kind,
            ),
            tcp: TcpReassembler::new(s.tcp),
            arena: Vec::new(),
            streams: IndexMap::default(),
            conns: IndexMap::default(),
            udp_seen: HashMap::default(),
            tracked_conns: Default::default(),
            max_connections: s.max_connections.max(1),
            n_forgotten: 0,
            n_cut: 0,
            bad_checksum: 0,
            syn_in_window: 0,
            lost_listed: 0,
            n_conns: 0,
            conn_frames: Vec::new(),
            n_tcp_conns: 0,
            n_dup: 0,
            n_frames: 0,
            max_messages: s.max_messages,
            partitions: s.partitions.max(1),
            partition: s.partition,
            check_every_frames: s.check_every_frames.max(1),
            stopped_at: 0,
            ts: 0,
            counts: FrameCounts::default(),
            recent: HashMap::default(),
            older: HashMap::default(),
            since: None,
        }
    }

    /// Read every frame of the merged captures (until max_messages is reached).
    pub fn run(&mut self, merge: &mut Merge, progress: &mut dyn FnMut(i64)) {
        let mut last: Option<usize> = None;
        while let Some((i, f)) = merge.next_frame(last) {
            let next = self.n_frames + 1;
            if next % self.check_every_frames == 0 && self.col.stats.messages >= self.max_messages {
                self.stopped_at = next;
                break;
            }
            last = Some(i);
            let data = merge.readers[i].data(&f);
            self.frame(&f, data, progress);
        }
    }

    /// One frame: skip mirror copies, then the layers.
    pub fn frame(&mut self, f: &Frame, data: &[u8], progress: &mut dyn FnMut(i64)) {
        self.n_frames += 1;
        let frame_no = self.n_frames;
        let ts = f.ts;
        self.ts = ts;
        if frame_no & 0x3FFF == 0 {
            progress(frame_no);
        }
        // dissector.Dissector.frames: length, last two bytes, bytes 19, 25, 51
        let n = data.len();
        let fp = if n >= 52 {
            n as u64
                | (data[n - 1] as u64) << 20
                | (data[n - 2] as u64) << 28
                | (data[19] as u64) << 36
                | (data[25] as u64) << 44
                | (data[51] as u64) << 52
        } else {
            n as u64
        };
        let window = self.settings_dup_window;
        let same = |e: Option<&(i64, Vec<u8>)>| match e {
            Some((t, d)) => ts - *t <= window && data == d.as_slice(),
            None => false,
        };
        // one partition of the host pairs (ParseLimits.partitions): every
        // frame is looked at for copies, only the partition's are read
        let mine = self.partitions == 1 || {
            let (ver, off) = locate_ip(f.linktype, data);
            ip::partition_of(ver, data, off, self.partitions) == self.partition
        };
        if same(self.recent.get(&fp)) || same(self.older.get(&fp)) {
            if mine {
                self.n_dup += 1;
                self.duplicate_event(f, data, frame_no);
            }
            return;
        }
        if self.since.is_none_or(|t| ts - t > window) || self.recent.len() >= MAX_RECENT_FRAMES {
            std::mem::swap(&mut self.recent, &mut self.older);
            self.recent.clear();
            self.since = Some(ts);
        }
        match self.recent.get_mut(&fp) {
            Some(e) => {
                e.0 = ts;
                e.1.clear();
                e.1.extend_from_slice(data);
            }
            None => {
                self.recent.insert(fp, (ts, data.to_vec()));
            }
        }
        if mine {
            self.layers(f, data, frame_no);
        }
    }

    fn layers(&mut self, f: &Frame, data: &[u8], frame_no: i64) {
        let ts = f.ts;
        let (ver, off) = locate_ip(f.linktype, data);
        // the frame's length on the wire (a record claiming less than it
        // captured is damaged: the captured length holds)
        let wire = if f.origlen >= data.len() as i64 {
            f.origlen - off as i64
        } else {
            data.len() as i64 - off as i64
        };
        let dg = if ver == 4 {
            self.counts.ipv4 += 1;
            ip::parse_ipv4(
                data,
                off,
                wire,
                ts,
                frame_no,
                &mut self.reasm,
                &mut self.facts,
            )
        } else if ver == 6 {
            self.counts.ipv6 += 1;
            ip::parse_ipv6(
                data,
                off,
                wire,
                ts,
                frame_no,
                &mut self.reasm,
                &mut self.facts,
            )
        } else {
            self.counts.non_ip += 1;
            return;
        };
        let dg = match dg {
            Some(d) => d,
            None => {
                if !self.reasm.partial.is_empty() {
                    self.partial_datagrams();
                }
                return;
            }
        };
        let p: &[u8] = &dg.payload;
        if dg.proto == ip::PROTO_TCP {
            self.counts.tcp += 1;
            if p.len() < 20 {
                self.counts.short += 1;
                self.count_packet(&dg);
                return;
            }
            let sport = u16::from_be_bytes([p[0], p[1]]) as i32;
            let dport = u16::from_be_bytes([p[2], p[3]]) as i32;
            let seq = rpc::be32(p, 4) as i64;
            let ack = rpc::be32(p, 8) as i64;
            let hl = ((p[12] >> 4) as usize) * 4;
            if hl < 20 || hl as i64 > dg.wire_len {
                // a header length that lies
                self.counts.bad_tcp_header += 1;
                self.count_packet(&dg);
                return;
            }
            let flags = p[13];
            let window = u16::from_be_bytes([p[14], p[15]]) as i64;
            self.tcp_segment(&dg, ts, frame_no, sport, dport, seq, ack, flags, window, hl);
        } else if dg.proto == ip::PROTO_UDP {
            self.counts.udp += 1;
            let slot = self.count_packet(&dg);
            if p.len() < 8 {
                self.counts.short += 1;
                return;
            }
            if let Some(s) = slot {
                if self.facts.rows[s][ip::F_CSUM_CHECKED] < ip::CHECKSUM_SAMPLE
                    && p.len() as i64 == dg.wire_len
                {
                    self.facts
                        .sample_checksum(s, dg.src, dg.dst, ip::PROTO_UDP, p);
                }
            }
            let sport = u16::from_be_bytes([p[0], p[1]]) as i32;
            let dport = u16::from_be_bytes([p[2], p[3]]) as i32;
            self.udp_datagram(&dg, ts, frame_no, sport, dport, &p[8..], true);
        } else {
            self.counts.other += 1;
            self.count_packet(&dg);
        }
    }

    /// Into its direction's facts: the slot (None: reassembled from fragments,
    /// which were counted one by one).
    fn count_packet(&mut self, dg: &Datagram) -> Option<usize> {
        if dg.ttl >= 0 {
            let s = self.facts.slot(dg.src, dg.dst);
            self.facts.count_packet(s, dg.ip_len, dg.ttl);
            return Some(s);
        }
        None
    }

    #[allow(clippy::too_many_arguments)]
    fn tcp_segment(
        &mut self,
        dg: &Datagram,
        ts: i64,
        frame: i64,
        sport: i32,
        dport: i32,
        seq: i64,
        ack: i64,
        flags: u8,
        window: i64,
        hl: usize,
    ) {
        let seg: &[u8] = &dg.payload;
        let key = (dg.src, sport, dg.dst, dport);
        let mut h = match self.streams.get(&key).copied() {
            Some(h) => h,
            None => self.new_stream(None, dg, sport, dport, ts, frame),
        };
        let slot = self.arena[h].facts;
        // this segment's checksum: 1 right, 0 bad, -1 not verified
        let mut csum = -1;
        if self.facts.rows[slot][ip::F_CSUM_CHECKED] < ip::CHECKSUM_SAMPLE
            && dg.ttl >= 0
            && seg.len() as i64 == dg.wire_len
        {
            csum = self
                .facts
                .sample_checksum(slot, dg.src, dg.dst, ip::PROTO_TCP, seg);
        }
        if flags & TH_SYN != 0 && self.arena[h].synced {
            if self.syn_dropped(h, dg, seq, csum) {
                return;
            }
            if flags & TH_ACK == 0 {
                h = self.new_stream(Some(h), dg, sport, dport, ts, frame);
            }
        }
        let ip_len = dg.ip_len;
        {
            let hs = &mut self.arena[h];
            hs.seen = frame;
            hs.packets += 1;
            hs.ip_bytes += ip_len;
            if ip_len > hs.max_ip_len || dg.ttl != hs.ttl {
                ip_extremes(&mut self.facts, hs, ip_len, dg.ttl);
            }
        }
        let rev_i = self.arena[h].rev;
        if flags & TH_SYN != 0 {
            {
                let hs = &mut self.arena[h];
                self.tcp.start(hs, seq, &mut self.col);
            }
            let tracked = on_syn(
                &mut self.col,
                &mut self.arena,
                h,
                rev_i,
                seg,
                hl,
                flags,
                seq,
                ack,
                window,
                ts,
                frame,
            );
            if tracked {
                self.tracked_conns.insert(self.arena[h].conn);
            }
        } else if self.arena[h].watch || window == 0 {
            watch(
                &mut self.col,
                &mut self.arena[h],
                flags,
                window,
                seq,
                ts,
                frame,
            );
        }
        if flags & TH_ACK != 0 {
            if let Some(r) = rev_i {
                let wshift = self.arena[h].wshift;
                let rev = &mut self.arena[r];
                if rev.rtt_end >= 0 && ((ack - rev.rtt_end) & SEQ_MASK) < SEQ_HALF {
                    ack_rtt_sample(rev, ts);
                }
                if rev.ack_hi < 0 || ((ack - rev.ack_hi) & SEQ_MASK) < SEQ_HALF {
                    rev.ack_hi = ack;
                    while let Some(&(end, row)) = rev.ack_due.front() {
                        if ((ack - end) & SEQ_MASK) >= SEQ_HALF {
                            break;
                        }
                        rev.ack_due.pop_front();
                        self.col.acked_rows.push(row);
                        self.col.acked_ts.push(ts);
                    }
                    if rev.gap_acked < 0
                        && rev.gap_t >= 0
                        && ((ack - rev.rtt_hi) & SEQ_MASK) < SEQ_HALF
                    {
                        rev.gap_acked = ts; // everything the peer sent is acknowledged
                    }
                }
                if !rev.pending.is_empty() {
                    self.tcp.acked(rev, ack, ts, frame, &mut self.col);
                }
                if rev.wtrack && (ack != rev.wack || window != rev.wwin) && flags & TH_SYN == 0 {
                    // The peer (rev) fills our window when its data reaches wlimit.
                    rev.wack = ack;
                    rev.wwin = window;
                    let wnd = window << wshift.max(0);
                    rev.peer_wnd = wnd;
                    let limit = (ack + wnd - rev.mss) & SEQ_MASK;
                    rev.wlimit = limit;
                    if rev.wfull_since >= 0 && ((rev.seq_hi - limit) & SEQ_MASK) >= SEQ_HALF {
                        end_window_full(&mut self.col, rev, ts);
                    }
                }
            }
        }
        let wire = dg.wire_len - hl as i64;
        if wire > 0 {
            let hs = &mut self.arena[h];
            if wire > hs.max_seg {
                hs.max_seg = wire;
            }
            let end = (seq + wire) & SEQ_MASK;
            if hs.gap_t >= 0 && ts - hs.gap_t >= self.send_gap_ns {
                let before = (hs.rtt_hi - seq) & SEQ_MASK;
                let resent = hs.rtt_hi >= 0 && before > 0 && before < SEQ_HALF;
                if hs.gap_mid || resent {
                    send_gap(&mut self.col, hs, ts, seq, resent);
                }
            }
            if hs.rtt_end >= 0 {
                let before = (hs.rtt_end - seq) & SEQ_MASK;
                if before > 0 && before < SEQ_HALF {
                    // bytes re-sent: no sample (Karn: which copy the ACK answers is unknown)
                    hs.rtt_end = -1;
                }
            } else if wire <= RTT_MAX_SEGMENT
                && hs.rtt_hi >= 0
                && ((seq - hs.rtt_hi) & SEQ_MASK) < SEQ_HALF
            {
                hs.rtt_end = end; // all new bytes: time this segment
                hs.rtt_start = [ts, frame, seq, wire];
            }
            if hs.rtt_hi < 0 || ((end - hs.rtt_hi) & SEQ_MASK) < SEQ_HALF {
                hs.rtt_hi = end;
            }
            if hs.wtrack && ((seq + wire - hs.wlimit) & SEQ_MASK) < SEQ_HALF {
                window_reached(hs, seq, (seq + wire) & SEQ_MASK, ts, frame);
            }
            let payload = if hl < seg.len() {
                &seg[hl..]
            } else {
                &seg[seg.len()..]
            };
            self.tcp.segment(
                hs,
                seq,
                payload,
                wire,
                dg.ts_first,
                frame,
                dg.frags,
                &mut self.col,
            );
            hs.gap_t = ts;
            hs.gap_frame = frame;
            hs.gap_mid = hs.in_msg;
            hs.gap_acked = -1;
            hs.gap_flight = if hs.ack_hi >= 0 {
                (hs.rtt_hi - hs.ack_hi) & SEQ_MASK
            } else {
                -1
            };
        }
        if flags & (TH_FIN | TH_RST) != 0 {
            self.end_of_stream(h, flags, ts, frame);
        }
    }

    /// A segment with SYN set on a direction that has carried RPC records:
    /// true when the receiver would have dropped it (dissector.Dissector._syn_dropped).
    fn syn_dropped(&mut self, h: usize, dg: &Datagram, seq: i64, mut csum: i32) -> bool {
        let seg: &[u8] = &dg.payload;
        let f = &self.facts.rows[self.arena[h].facts];
        let good = f[ip::F_CSUM_CHECKED] - f[ip::F_CSUM_BAD];
        let mut bad = f[ip::F_CSUM_BAD];
        if csum == 0 {
            bad -= 1; // counted in the sample
        } else if csum < 0 && dg.ttl >= 0 && seg.len() as i64 == dg.wire_len {
            csum = ip::checksum_ok(dg.src, dg.dst, ip::PROTO_TCP, seg) as i32;
        }
        if csum == 0 && good > 4 * bad {
            self.bad_checksum += 1;
            self.count_packet(dg);
            return true;
        }
        let hs = &self.arena[h];
        let rev_ended = hs.rev.is_some_and(|r| self.arena[r].ended);
        if hs.ended || rev_ended || hs.next_seq < 0 {
            return false;
        }
        let wnd = hs.peer_wnd.max(SYN_WINDOW);
        let d = (seq + 1 - hs.next_seq) & SEQ_MASK;
        if d <= wnd || SEQ_MASK + 1 - d <= wnd {
            self.syn_in_window += 1;
            self.count_packet(dg);
            return true;
        }
        false
    }

    /// A FIN (this direction is done) or RST (both are).
    fn end_of_stream(&mut self, h: usize, flags: u8, ts: i64, frame: i64) {
        self.tcp.flush(&mut self.arena[h], ts, frame, &mut self.col);
        self.arena[h].ended = true;
        if flags & TH_RST != 0 {
            close_stretches(&mut self.col, &mut self.arena[h], ts);
            if let Some(r) = self.arena[h].rev {
                self.arena[r].ended = true;
                self.tcp.flush(&mut self.arena[r], ts, frame, &mut self.col);
                close_stretches(&mut self.col, &mut self.arena[r], ts);
            }
        }
    }

    /// A direction not seen before, or a new SYN on ports in use.
    fn new_stream(
        &mut self,
        old: Option<usize>,
        dg: &Datagram,
        sport: i32,
        dport: i32,
        ts: i64,
        frame: i64,
    ) -> usize {
        let key = (dg.src, sport, dg.dst, dport);
        let rkey = (dg.dst, dport, dg.src, sport);
        let ckey = if key < rkey { key } else { rkey };
        let mut conn = self.conns.get(&ckey).copied().unwrap_or(0);
        if old.is_some() || conn == 0 {
            if conn == 0 && self.conns.len() >= self.max_connections {
                self.forget_idlest(ts, frame);
            }
            self.n_conns += 1;
            self.n_tcp_conns += 1;
            conn = self.n_conns;
            self.conn_frames.push(frame);
            self.conns.insert(ckey, conn);
            let rev = self.streams.get(&rkey).copied();
            if let Some(o) = old {
                self.tcp.flush(&mut self.arena[o], ts, frame, &mut self.col);
                retire(&mut self.col, &mut self.facts, &mut self.arena[o], ts);
                if let Some(r) = rev {
                    self.tcp.flush(&mut self.arena[r], ts, frame, &mut self.col);
                    retire(&mut self.col, &mut self.facts, &mut self.arena[r], ts);
                    let (rs, rsp, rd, rdp, rf) = {
                        let x = &self.arena[r];
                        (x.src, x.sport, x.dst, x.dport, x.facts)
                    };
                    let fresh = self.arena.len();
                    self.arena.push(HalfStream::new(rs, rsp, rd, rdp, conn, rf));
                    self.streams.insert(rkey, fresh);
                }
            }
        }
        let facts = match old {
            Some(o) => self.arena[o].facts,
            None => self.facts.slot(dg.src, dg.dst),
        };
        let h = self.arena.len();
        self.arena
            .push(HalfStream::new(dg.src, sport, dg.dst, dport, conn, facts));
        self.streams.insert(key, h);
        if let Some(&r) = self.streams.get(&rkey) {
            self.arena[h].rev = Some(r);
            self.arena[r].rev = Some(h);
        }
        h
    }

    /// The connection table is full: forget its least recently active eighth
    /// (TCP streams flushed, a message in progress emitted cut short).
    fn forget_idlest(&mut self, ts: i64, frame: i64) {
        let reverse = |k: &StreamKey| (k.2, k.3, k.0, k.1);
        let mut seen: Vec<(i64, StreamKey)> = self
            .conns
            .keys()
            .map(|ckey| {
                let a = self.streams.get(ckey).map_or(-1, |&h| self.arena[h].seen);
                let b = self
                    .streams
                    .get(&reverse(ckey))
                    .map_or(-1, |&h| self.arena[h].seen);
                let u = self.udp_seen.get(ckey).copied().unwrap_or(-1);
                (a.max(b).max(u), *ckey)
            })
            .collect();
        seen.sort_by_key(|x| x.0); // stable: ties in table order
        let n = (seen.len() / 8).max(1);
        let mut gone_conns: HashSet<StreamKey> = HashSet::default();
        let mut gone_streams: HashSet<StreamKey> = HashSet::default();
        for (_, ckey) in seen.into_iter().take(n) {
            let conn = self.conns[&ckey];
            gone_conns.insert(ckey);
            self.udp_seen.remove(&ckey);
            self.tracked_conns.remove(&conn);
            self.n_forgotten += 1;
            for key in [ckey, reverse(&ckey)] {
                if gone_streams.contains(&key) {
                    continue;
                }
                let Some(&h) = self.streams.get(&key) else {
                    continue;
                };
                gone_streams.insert(key);
                if self.arena[h].in_msg {
                    self.n_cut += 1;
                }
                self.tcp.flush(&mut self.arena[h], ts, frame, &mut self.col);
                retire(&mut self.col, &mut self.facts, &mut self.arena[h], ts);
                self.arena[h].rev = None;
            }
        }
        self.conns.retain(|k, _| !gone_conns.contains(k));
        self.streams.retain(|k, _| !gone_streams.contains(k));
    }

    /// One UDP datagram's payload: an RPC message if it looks like one
    /// (`complete` false: a datagram given up with fragments missing).
    #[allow(clippy::too_many_arguments)]
    fn udp_datagram(
        &mut self,
        dg: &Datagram,
        ts: i64,
        frame: i64,
        sport: i32,
        dport: i32,
        body: &[u8],
        complete: bool,
    ) {
        if body.len() < 12 {
            return;
        }
        let (src, dst) = (dg.src, dg.dst);
        if body[7] as u32 == rpc::CALL {
            let rpc_port = well_known(sport)
                || well_known(dport)
                || self.col.rpc_ports.contains(&(dst, dport));
            if !rpc::udp_call(body, dg.wire_len - 8, rpc_port) {
                return;
            }
        } else if body[7] as u32 == rpc::REPLY {
            let xid = rpc::be32(body, 0);
            if !rpc::plausible_reply(body, 0) {
                return;
            }
            if !self.reasm.pending_is_empty() && !self.col.calls.map.contains_key(&(dst, src, xid))
            {
                self.call_in_fragments(src, dst, sport, dport, xid);
            }
            if !self.col.calls.map.contains_key(&(dst, src, xid))
                && !well_known(sport)
                && !self.col.rpc_ports.contains(&(src, sport))
            {
                return;
            }
        } else {
            return;
        }
        let ckey = (src, sport, dst, dport);
        let rkey = (dst, dport, src, sport);
        let conn = match self.conns.get(&ckey).or_else(|| self.conns.get(&rkey)) {
            Some(&c) if c != 0 => c,
            _ => {
                if self.conns.len() >= self.max_connections {
                    self.forget_idlest(ts, frame);
                }
                self.n_conns += 1;
                let c = self.n_conns;
                self.conn_frames.push(frame);
                self.conns.insert(ckey.min(rkey), c);
                c
            }
        };
        self.udp_seen.insert(ckey.min(rkey), frame);
        let head_bytes = self.tcp.limits.head_bytes;
        let head = &body[..body.len().min(head_bytes)];
        let m = Assembled {
            head,
            rpc_len: dg.wire_len - 8,
            captured: body.len() as i64,
            ts_first: dg.ts_first,
            ts_last: ts,
            frame_first: dg.frame_first,
            frame_last: frame,
            frames: dg.frags,
            ip_frags: dg.frags,
            record_frags: 1,
            complete,
        };
        self.col
            .message(src, sport, dst, dport, false, conn, head, &m);
    }

    /// A reply whose call is not known: give up the incomplete datagram that
    /// holds the call in its first fragment, if one is held (dissector.Dissector._call_in_fragments).
    fn call_in_fragments(&mut self, src: Addr, dst: Addr, sport: i32, dport: i32, xid: u32) {
        let test = |version: u8, proto: i32, data: &[u8]| -> bool {
            let at = udp_offset(version, proto, data);
            if at < 0 {
                return false;
            }
            let at = at as usize;
            data.len() >= at + 16
                && u16::from_be_bytes([data[at], data[at + 1]]) as i32 == dport
                && u16::from_be_bytes([data[at + 2], data[at + 3]]) as i32 == sport
                && rpc::be32(data, at + 8) == xid
                && rpc::be32(data, at + 12) == rpc::CALL
        };
        if self.reasm.take_first(&mut self.facts, dst, src, test) {
            self.partial_datagrams();
        }
    }

    /// The UDP datagrams given up whose first fragment was captured: each an
    /// RPC message cut short if it holds one (dissector.Dissector.partial_datagrams).
    fn partial_datagrams(&mut self) {
        let partial = std::mem::take(&mut self.reasm.partial);
        for pd in partial {
            let at = udp_offset(pd.version, pd.proto, &pd.data);
            if at < 0 || pd.data.len() < at as usize + 8 {
                continue;
            }
            let udp = &pd.data[at as usize..];
            let sport = u16::from_be_bytes([udp[0], udp[1]]) as i32;
            let dport = u16::from_be_bytes([udp[2], udp[3]]) as i32;
            let ulen = u16::from_be_bytes([udp[4], udp[5]]) as i64;
            let dg = Datagram {
                src: pd.src,
                dst: pd.dst,
                proto: ip::PROTO_UDP,
                payload: std::borrow::Cow::Borrowed(udp),
                wire_len: ulen.max(udp.len() as i64),
                frags: pd.count,
                ts_first: pd.ts_first,
                frame_first: pd.frame_first,
                ttl: -1,
                ip_len: 0,
            };
            self.udp_datagram(
                &dg,
                pd.ts_last,
                pd.frame_last,
                sport,
                dport,
                &udp[8..],
                false,
            );
        }
    }

    /// The frame_duplicate event of a skipped frame: its endpoints as far as
    /// the headers allow.
    fn duplicate_event(&mut self, f: &Frame, data: &[u8], frame: i64) {
        let mut src = Addr::default();
        let mut dst = Addr::default();
        let (mut sport, mut dport, mut conn) = (0i32, 0i32, 0i64);
        let mut seq = -1i64;
        let (ver, off) = locate_ip(f.linktype, data);
        let (mut proto, mut l4) = (-1i32, 0usize);
        if ver == 4 && data.len() >= off + 20 {
            proto = data[off + 9] as i32;
            l4 = off + ((data[off] & 0x0F) as usize) * 4;
            src = Addr::new(&data[off + 12..off + 16]);
            dst = Addr::new(&data[off + 16..off + 20]);
            if u16::from_be_bytes([data[off + 6], data[off + 7]]) & 0x1FFF != 0 {
                proto = -1; // a later fragment: no transport header
            }
        } else if ver == 6 && data.len() >= off + 40 {
            proto = data[off + 6] as i32;
            l4 = off + 40;
            src = Addr::new(&data[off + 8..off + 24]);
            dst = Addr::new(&data[off + 24..off + 40]);
        }
        if (proto == ip::PROTO_TCP || proto == ip::PROTO_UDP) && data.len() >= l4 + 4 {
            sport = u16::from_be_bytes([data[l4], data[l4 + 1]]) as i32;
            dport = u16::from_be_bytes([data[l4 + 2], data[l4 + 3]]) as i32;
            if proto == ip::PROTO_TCP && data.len() >= l4 + 8 {
                seq = rpc::be32(data, l4 + 4) as i64;
            }
            let key = (src, sport, dst, dport);
            let rkey = (dst, dport, src, sport);
            conn = self.conns.get(&key.min(rkey)).copied().unwrap_or(0);
        }
        self.col.push_event(
            f.ts,
            frame,
            conn,
            src,
            sport,
            dst,
            dport,
            Ev::FrameDuplicate,
            seq,
            f.origlen,
            0,
        );
    }

    /// End of the capture: flush every stream, give up incomplete datagrams.
    pub fn finish(&mut self) {
        let order: Vec<usize> = self.streams.values().copied().collect();
        for h in order {
            let hs = &mut self.arena[h];
            let (t, fr) = (hs.ts_last, hs.frame_last);
            self.tcp.flush(hs, t, fr, &mut self.col);
            retire(&mut self.col, &mut self.facts, hs, self.ts);
        }
        self.reasm.finish(&mut self.facts);
        self.partial_datagrams();
        let lost = std::mem::take(&mut self.reasm.lost);
        self.lost_listed = lost.len() as i64;
        for (ts, frame, src, dst, ip_id, _frags, got) in lost {
            self.col.push_event(
                ts,
                frame,
                0,
                src,
                0,
                dst,
                0,
                Ev::IpDatagramIncomplete,
                ip_id as i64,
                got,
                0,
            );
        }
    }

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
