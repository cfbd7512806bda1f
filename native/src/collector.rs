//! Assembled messages -> rows: the messages
//! table as columns of interned values, calls remembered to name replies,
//! events per kind (bounded), UDP ports learnt from portmap replies; the
//! `Sink` the TCP reassembler and `tcp_state` hand messages and events to.

pub use crate::column::Col;
use crate::decoders;
use crate::ip::Addr;
use crate::maps::{HashMap, HashSet};
use crate::portmap;
use crate::rpc;
use crate::tables::{
    MAX_FLOWS, MAX_LEARNT_PORTS, MAX_PORTMAP_ASKS, MIN_CALL_LEN, MSGTYPE_CALL, MSGTYPE_REPLY,
    NFS_PROGRAM, TRANSPORT_TCP, TRANSPORT_UDP,
};
use crate::tcp::{Assembled, Ev, HalfStream, Sink, EVENT_KIND_NAMES};

use std::cell::Cell;
use std::collections::VecDeque;
use std::hash::Hash;

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
    /// The id of a value already seen.
    #[inline]
    pub fn get(&self, k: &K) -> Option<u32> {
        self.map.get(k).copied()
    }
}

impl<T: Hash + Eq + Clone> Interner<Vec<T>> {
    /// The id of a list looked up by a slice: a Vec made only for a value
    /// not seen before (the empty list is id 0).
    #[inline]
    pub fn slice(&mut self, k: &[T]) -> u32 {
        if k.is_empty() {
            return 0;
        }
        if let Some(&i) = self.map.get(k) {
            return i;
        }
        self.id(&k.to_vec())
    }
}

impl Interner<Vec<u8>> {
    #[inline]
    pub fn bytes(&mut self, k: Option<&[u8]>) -> u32 {
        k.map_or(0, |b| self.slice(b))
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

/// (client, server, xid) of a call, the addresses as their ids in
/// `Collector::addrs` (12 bytes, not 40: the calls map of a million-packet
/// capture holds hundreds of thousands of them)
type CallKey = (u32, u32, u32);

/// Hashes a CallKey so that a client's consecutive xids fall in neighbouring
/// buckets: a client numbers its calls in sequence, so the calls map's inserts
/// touch a few cache lines, not one random line per call (hundreds of
/// thousands of calls outgrow the caches; the random inserts were a tenth of
/// the parse).  The rest of the key (and the xid's upper bits) is hashed with
/// ahash's per-process seed; the low xid bits also vary the 7-bit tag
/// hashbrown compares first.
#[derive(Clone, Default)]
pub(crate) struct CallHash(ahash::RandomState);

/// xids per run of neighbouring buckets
const XID_RUN_BITS: u32 = 4;

impl std::hash::BuildHasher for CallHash {
    type Hasher = CallHasher;
    fn build_hasher(&self) -> CallHasher {
        CallHasher {
            inner: self.0.build_hasher(),
            words: 0,
            low: 0,
        }
    }
}

pub(crate) struct CallHasher {
    inner: ahash::AHasher,
    words: u32,
    low: u64,
}

impl std::hash::Hasher for CallHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.inner.write(bytes);
    }
    #[inline]
    fn write_u32(&mut self, v: u32) {
        // the tuple's third u32 is the xid
        self.words += 1;
        if self.words == 3 {
            self.low = u64::from(v & ((1 << XID_RUN_BITS) - 1));
            self.inner.write_u32(v >> XID_RUN_BITS);
        } else {
            self.inner.write_u32(v);
        }
    }
    #[inline]
    fn finish(&self) -> u64 {
        let run = (1u64 << XID_RUN_BITS) - 1;
        let h = self.inner.finish();
        // bucket: the run's start plus the low xid bits; tag (top 7 bits): mixed with them
        ((h & !run) | self.low) ^ (self.low.wrapping_mul(0x9E37_79B9_7F4A_7C15) & (0x7F << 57))
    }
}
/// (client, client port, server, server port) of a call, the addresses as
/// their ids in `Collector::addrs` (16 bytes to hash and compare, not 40: a
/// flow is looked up on every call)
type FlowKey = (u32, i32, u32, i32);
/// (prog, vers, proc, gss_service, gss_proc) of the last call
type CallInfo = (i64, i64, i64, i64, i64);

/// A remembered call as the calls map holds it (12 bytes, with its key 24:
/// they were 72 with the info as five i64 and an insertion stamp, and the map
/// of a million-packet capture holds hundreds of thousands of calls, which
/// its inserts and rehashes move): its CallInfo in two words, whether a reply
/// came, and how many entries of `Calls::order` are its key's.
///
/// Each value of a CallInfo is -1 (unknown) or a 32-bit word of the header:
/// `prog` holds the program, `rest` the version and procedure (8 bits each),
/// the GSS service and procedure (4 bits each), a bit per value for -1, and
/// the answered bit.  A call whose version, procedure or GSS values do not fit
/// there (no ONC RPC protocol has them) has its CallInfo in `Calls::spill`,
/// `prog` its index, its SPILLED bit set.
#[derive(Clone, Copy)]
struct Call {
    prog: u32,
    rest: u32,
    queued: u32,
}

const UNKNOWN_SHIFT: u32 = 24;
const ANSWERED: u32 = 1 << 29;
const SPILLED: u32 = 1 << 31;

impl Call {
    /// Its info in the two words, if it fits.
    #[inline]
    fn pack(info: CallInfo) -> Option<(u32, u32)> {
        let a = [info.0, info.1, info.2, info.3, info.4];
        // the bits of each value in `rest` (the program: all of `prog`)
        const FIELDS: [(u32, u32); 4] = [(0, 8), (8, 8), (16, 4), (20, 4)];
        let mut prog = 0u32;
        let mut rest = 0u32;
        for (k, &x) in a.iter().enumerate() {
            debug_assert!(x == -1 || u32::try_from(x).is_ok());
            if x < 0 {
                rest |= 1 << (UNKNOWN_SHIFT + k as u32);
            } else if k == 0 {
                prog = x as u32;
            } else {
                let (at, bits) = FIELDS[k - 1];
                if x >= 1 << bits {
                    return None;
                }
                rest |= (x as u32) << at;
            }
        }
        Some((prog, rest))
    }
    #[inline]
    fn answered(&self) -> bool {
        self.rest & ANSWERED != 0
    }
}

/// Calls remembered to name replies, oldest forgotten first past a bound
/// (a Python dict re-inserted on use); each with whether a reply came.
///
/// `order` holds the key of every insert, oldest first; a key inserted again
/// is queued again, its earlier entries stale.  A call counts its key's
/// entries (`Call::queued`) instead of stamping each insert: an entry is its
/// call's latest insert when it is the last of them queued, so popped or
/// looked over oldest first, an entry is stale while its call counts more
/// than one.
pub(crate) struct Calls {
    map: std::collections::HashMap<CallKey, Call, CallHash>,
    order: VecDeque<CallKey>,
    spill: Spill,
    max: usize,
    /// calls forgotten before any reply came (collector.Collector.calls_forgotten)
    pub(crate) forgotten: i64,
}

/// The CallInfo of calls whose values do not fit a `Call`, and the slots of
/// forgotten ones, reused (at most one per call remembered).
#[derive(Default)]
struct Spill {
    infos: Vec<CallInfo>,
    free: Vec<u32>,
}

impl Spill {
    /// A call of this info, queued this many times.
    #[inline]
    fn make(&mut self, info: CallInfo, queued: u32) -> Call {
        if let Some((prog, rest)) = Call::pack(info) {
            return Call { prog, rest, queued };
        }
        let at = match self.free.pop() {
            Some(at) => {
                self.infos[at as usize] = info;
                at
            }
            None => {
                self.infos.push(info);
                (self.infos.len() - 1) as u32
            }
        };
        Call {
            prog: at,
            rest: SPILLED,
            queued,
        }
    }

    /// A call gone: its spilled info's slot free.
    #[inline]
    fn release(&mut self, c: &Call) {
        if c.rest & SPILLED != 0 {
            self.free.push(c.prog);
        }
    }

    fn info(&self, c: &Call) -> CallInfo {
        if c.rest & SPILLED != 0 {
            return self.infos[c.prog as usize];
        }
        let value = |k: u32, v: u32| {
            if c.rest & (1 << (UNKNOWN_SHIFT + k)) != 0 {
                -1
            } else {
                i64::from(v)
            }
        };
        let r = c.rest;
        (
            value(0, c.prog),
            value(1, r & 0xFF),
            value(2, (r >> 8) & 0xFF),
            value(3, (r >> 16) & 0xF),
            value(4, (r >> 20) & 0xF),
        )
    }
}

impl Calls {
    fn new(max: usize) -> Self {
        Calls {
            map: Default::default(),
            order: VecDeque::new(),
            spill: Spill::default(),
            max,
            forgotten: 0,
        }
    }

    fn insert(&mut self, key: CallKey, info: CallInfo) {
        use std::collections::hash_map::Entry;
        // (the bound first: the lookup only when the map is full)
        if self.map.len() >= self.max && !self.map.contains_key(&key) {
            // forget the call inserted longest ago (its latest insert the oldest)
            while let Some(k) = self.order.pop_front() {
                let Some(c) = self.map.get_mut(&k) else {
                    continue;
                };
                if c.queued > 1 {
                    c.queued -= 1; // a stale entry: the call was inserted again
                    continue;
                }
                if let Some(c) = self.map.remove(&k) {
                    self.forgotten += i64::from(!c.answered());
                    self.spill.release(&c);
                }
                break;
            }
        }
        if self.order.len() >= u32::MAX as usize {
            // (a call counts at most the entries queued: with fewer than
            // u32::MAX queued, one more fits its count)
            self.drop_stale();
        }
        match self.map.entry(key) {
            Entry::Occupied(mut e) => {
                let old = *e.get();
                self.spill.release(&old);
                *e.get_mut() = self.spill.make(info, old.queued + 1);
            }
            Entry::Vacant(e) => {
                e.insert(self.spill.make(info, 1));
            }
        }
        self.order.push_back(key);
        if self.order.len() > 2 * self.map.len() + 1024 {
            self.drop_stale();
        }
    }
    /// Drop the stale entries of `order`: each call's last one kept.
    fn drop_stale(&mut self) {
        let map = &mut self.map;
        self.order.retain(|k| match map.get_mut(k) {
            Some(c) if c.queued > 1 => {
                c.queued -= 1;
                false
            }
            Some(_) => true,
            None => false,
        });
    }
    /// The call a reply answers, marked answered.
    fn answer(&mut self, key: &CallKey) -> Option<CallInfo> {
        let c = self.map.get_mut(key)?;
        c.rest |= ANSWERED;
        Some(self.spill.info(c))
    }
    /// Is this call remembered?
    #[inline]
    fn contains(&self, key: &CallKey) -> bool {
        self.map.contains_key(key)
    }
}

/// Assembled messages -> rows; remembers calls to name replies (collector.Collector).
pub struct Collector {
    pub cols: Columns,
    /// rows whose last byte the receiver acknowledged, and when (messages.acked_ns)
    pub acked_rows: Vec<u64>,
    pub acked_ts: Vec<i64>,
    pub events: Events,
    event_counts: [usize; EVENT_KIND_NAMES.len()],
    max_events: usize,
    pub events_dropped: i64,
    pub auth_too_long: i64,
    pub(crate) calls: Calls,
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
    /// lists for the next message's COMPOUND decoding
    spare: decoders::Spare,
}

impl Collector {
    pub(crate) fn new(max_calls: usize, max_events: usize) -> Self {
        Collector {
            cols: Columns::default(),
            acked_rows: Vec::new(),
            acked_ts: Vec::new(),
            events: Events::default(),
            event_counts: [0; EVENT_KIND_NAMES.len()],
            max_events,
            events_dropped: 0,
            auth_too_long: 0,
            calls: Calls::new(max_calls.max(1)),
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
            spare: decoders::Spare::default(),
        }
    }

    /// Is a call from `client` to `server` with this xid remembered?
    #[inline]
    pub(crate) fn has_call(&self, client: Addr, server: Addr, xid: u32) -> bool {
        match (self.addrs.get(&client), self.addrs.get(&server)) {
            (Some(c), Some(s)) => self.calls.contains(&(c, s, xid)),
            _ => false, // an address never seen: no call of it either
        }
    }

    /// Did a call go from `client` to `server` on these ports (its last
    /// call remembered in `flows`)?
    fn has_flow(&self, client: Addr, cport: i32, server: Addr, sport: i32) -> bool {
        match (self.addrs.get(&client), self.addrs.get(&server)) {
            (Some(c), Some(s)) => self.flows.contains_key(&(c, cport, s, sport)),
            _ => false, // an address never seen: no flow of it either
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn push_event(
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
    pub(crate) fn message(
        &mut self,
        src: Addr,
        sport: i32,
        dst: Addr,
        dport: i32,
        is_tcp: bool,
        conn: i64,
        head: &[u8],
        m: &Assembled,
        ids: Option<&Cell<Option<(u32, u32)>>>,
    ) -> Option<u64> {
        let decoded = rpc::decode_header(head).or_else(|| {
            // Cut inside its header (a snaplen, long TCP options): a reply if its
            // xid is that of a call outstanding the other way on these hosts,
            // else a call (its program unknown) on a flow that carried calls.
            if (4..8).contains(&head.len()) {
                let xid = rpc::be32(head, 0);
                if self.has_call(dst, src, xid) {
                    return Some(rpc::Header::xid_only(xid, false));
                }
                if self.has_flow(src, sport, dst, dport) {
                    return Some(rpc::Header::xid_only(xid, true));
                }
                if self.has_flow(dst, dport, src, sport) {
                    return Some(rpc::Header::xid_only(xid, false));
                }
            }
            None
        });
        // a call cut before its program, too short to be one
        let decoded =
            decoded.filter(|h| !(h.is_call && h.prog < 0 && m.rpc_len < MIN_CALL_LEN as i64));
        let st = &mut self.stats;
        let mut hdr = match decoded {
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
        // (interned here, before the calls keyed by them: the ids are those
        // the row takes, in the same order)
        let (s_id, d_id) = match ids.and_then(Cell::get) {
            Some(known) => known,
            None => {
                let known = (self.addrs.id(&src), self.addrs.id(&dst));
                if let Some(cell) = ids {
                    cell.set(Some(known));
                }
                known
            }
        };
        if hdr.body_offset < 0 && head.len() >= 40 && auth_too_long(head, hdr.is_call) {
            self.auth_too_long += 1;
        }
        let fields = if hdr.is_call {
            st.calls += 1;
            let info = (hdr.prog, hdr.vers, hdr.proc_, hdr.gss_service, hdr.gss_proc);
            self.calls.insert((s_id, d_id, xid), info);
            let flow = (s_id, sport, d_id, dport);
            if self.flows.len() >= MAX_FLOWS && !self.flows.contains_key(&flow) {
                self.flows.clear();
            }
            if hdr.prog >= 0 {
                // (a call whose program was not captured names nothing)
                self.flows.insert(flow, info);
            }
            if hdr.prog == portmap::PORTMAP_PROGRAM {
                if let Some(asks) = portmap::asks_udp(hdr.vers, hdr.proc_, head, hdr.body_offset) {
                    if self.portmap_asks.len() >= MAX_PORTMAP_ASKS {
                        self.portmap_asks.clear();
                    }
                    self.portmap_asks.insert((s_id, d_id, xid), asks);
                }
            }
            decoders::decode(
                true,
                hdr.prog,
                hdr.vers,
                hdr.proc_,
                head,
                hdr.body_offset,
                hdr.gss_service,
                hdr.gss_proc,
                &mut self.spare,
            )
        } else {
            st.replies += 1;
            match self.calls.answer(&(d_id, s_id, xid)) {
                Some((prog, vers, proc_, gss_service, gss_proc)) => {
                    hdr.prog = prog;
                    hdr.vers = vers;
                    hdr.proc_ = proc_;
                    if prog == portmap::PORTMAP_PROGRAM {
                        // the ports it announces become RPC ports (collector.Collector._portmap_reply)
                        let asked = self
                            .portmap_asks
                            .remove(&(d_id, s_id, xid))
                            .unwrap_or(false);
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
                    decoders::decode(
                        false,
                        prog,
                        vers,
                        proc_,
                        head,
                        hdr.body_offset,
                        gss_service,
                        gss_proc,
                        &mut self.spare,
                    )
                }
                None => {
                    st.replies_without_call_info += 1;
                    let last = self.flows.get(&(d_id, dport, s_id, sport)).copied();
                    if let Some((vers, proc_, f)) = decoders::reply_without_call(
                        last,
                        head,
                        hdr.body_offset,
                        m.rpc_len,
                        &mut self.spare,
                    ) {
                        hdr.prog = NFS_PROGRAM;
                        hdr.vers = vers;
                        hdr.proc_ = proc_;
                        f
                    } else {
                        decoders::decode(
                            false,
                            -1,
                            -1,
                            -1,
                            head,
                            hdr.body_offset,
                            -1,
                            -1,
                            &mut self.spare,
                        )
                    }
                }
            }
        };
        let st = &mut self.stats;
        let truncated = m.captured < m.rpc_len || !m.complete;
        if truncated {
            st.truncated_messages += 1;
        }
        if !m.complete {
            st.incomplete_messages += 1;
        }
        st.messages += 1;
        let machine = self.machines.bytes(hdr.machine);
        let ops = self.op_lists.slice(&fields.ops);
        let statuses = self.status_lists.slice(&fields.statuses);
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
        c.nfs_kind.push(fields.kind as u8);
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
        self.spare.keep(fields);
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
        self.message(
            hs.src,
            hs.sport,
            hs.dst,
            hs.dport,
            true,
            hs.conn,
            head,
            &m,
            Some(&hs.addr_ids),
        )
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
        self.has_call(hs.dst, hs.src, xid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calls map against what it stands for (collector.Collector.calls):
    /// a dict in insertion order, a key inserted again moved to the end, the
    /// first one forgotten past the bound.
    #[test]
    fn calls_forget_the_oldest_insert_like_a_dict() {
        for max in [1usize, 2, 3, 7, 50] {
            let mut calls = Calls::new(max);
            let mut model: Vec<(CallKey, CallInfo, bool)> = Vec::new();
            let mut forgotten = 0i64;
            let mut r: u64 = 12345 + max as u64;
            let mut next = |n: u64| {
                r = r
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (r >> 33) % n
            };
            for step in 0..20_000i64 {
                // few keys, so that most are inserted again (stale entries)
                let key = (next(3) as u32, 7, next(2 * max as u64 + 2) as u32);
                if next(3) == 0 {
                    let got = calls.answer(&key);
                    let want = model.iter_mut().find(|e| e.0 == key).map(|e| {
                        e.2 = true;
                        e.1
                    });
                    assert_eq!(got, want);
                    continue;
                }
                // infos held in a Call, and spilled ones (values too wide)
                let unknown = if next(2) == 0 { -1 } else { step % 300 };
                let info = match next(4) {
                    0 => (100003, 4, 1, -1, -1),
                    1 => (100003, 3, unknown, 2, 0),
                    2 => (u32::MAX as i64, 255, 7, 15, 16),
                    _ => (-1, -1, -1, 3, u32::MAX as i64),
                };
                calls.insert(key, info);
                if let Some(i) = model.iter().position(|e| e.0 == key) {
                    model.remove(i);
                } else if model.len() >= max {
                    forgotten += i64::from(!model.remove(0).2);
                }
                model.push((key, info, false));
                assert_eq!(calls.forgotten, forgotten);
                assert_eq!(calls.map.len(), model.len());
                assert!(calls.spill.infos.len() <= max, "spilled slots reused");
                for e in &model {
                    assert!(calls.contains(&e.0));
                }
            }
        }
    }
}
