"""The tables passed between pipeline stages: one place that lists their columns.

capture -> frames -> **messages** -> transactions -> findings -> report

Every stage documents here what it hands on; code builds its DataFrames from
these lists so a column is named once.  Times are integer nanoseconds since
the Unix epoch (int64); floats appear only in presentation.
"""

from __future__ import annotations

from nfstrace.nfs_fields import NFS_FIELDS

# messages: one row per ONC-RPC message (call or reply) found in the capture.
MESSAGE_COLUMNS: dict[str, str] = {
    "ts_first_ns": "int64: capture time of the first packet carrying the message",
    "ts_last_ns": "int64: capture time of the last packet carrying the message "
    "(where reassembly completes; tshark's rpc.time starts here)",
    "frame_first": "int64: 1-based frame number (merged order) of the first packet",
    "frame_last": "int64: frame number of the packet that completed the message",
    "src": "str: source IP address",
    "sport": "int: source port",
    "dst": "str: destination IP address",
    "dport": "int: destination port",
    "transport": "str: 'tcp' or 'udp'",
    "conn": "int: connection id (one per TCP connection / UDP address pair)",
    "xid": "int64: RPC transaction id",
    "msgtype": "str: 'call' or 'reply'",
    "prog": "int: RPC program (for replies: from the matched call; -1 if unknown, also for a "
    "call cut inside its header, of which only the xid was captured)",
    "vers": "int: program version (replies: from the matched call, -1 if unknown)",
    "proc": "int: procedure (replies: from the matched call, -1 if unknown)",
    "auth": "str: credential flavour of a call (none/sys/short/dh/gss/tls/<n>); "
    "for replies the verifier flavour",
    "auth_uid": "int: AUTH_SYS uid (-1 otherwise)",
    "auth_gid": "int: AUTH_SYS gid (-1 otherwise)",
    "auth_machine": "str: AUTH_SYS machine name ('' otherwise)",
    "gss_proc": "int: RPCSEC_GSS procedure (DATA=0, INIT=1, ...; -1 if not GSS)",
    "gss_service": "str: RPCSEC_GSS service: none/integrity/privacy ('' if not GSS)",
    "reply_stat": "str: replies: 'accepted' or 'denied' ('' for calls)",
    "accept_stat": "int: accepted replies: accept_stat (0 = SUCCESS; -1 otherwise)",
    "reject_stat": "int: denied replies: reject_stat (0 RPC_MISMATCH, 1 AUTH_ERROR; -1 otherwise)",
    "rpc_len": "int64: message length in bytes (sum of record fragments; UDP payload)",
    "captured_len": "int64: bytes of the message actually present in the capture",
    "body_offset": "int: offset in the message of the procedure arguments/results "
    "(-1 when the RPC header itself was not captured)",
    "record_frags": "int: RPC record-marking fragments (TCP; 1 for UDP)",
    "frames": "int: packets carrying bytes of the message",
    "ip_frags": "int: IP fragments carrying the message (1 per unfragmented packet)",
    "truncated": "bool: some bytes of the message were not captured "
    "(snaplen, missing segments or lost fragments)",
    "acked_ns": "int64: TCP: capture time of the first ACK from the receiver covering the "
    "message up to its last segment (a receiver may hold the ACK of a short last segment: "
    "tcp_state.ack_point) (-1: UDP, no such ACK captured, or the message was cut short)",
}

# Columns as (name, pandas dtype), in table order.  Text columns are categories
# (each distinct address, name or handle stored once, a small code per row: a
# capture repeats them on every message); none holds missing values ('' instead).
MESSAGE_DTYPES: dict[str, str] = {
    "ts_first_ns": "int64",
    "ts_last_ns": "int64",
    "frame_first": "int64",
    "frame_last": "int64",
    "src": "category",
    "sport": "int32",
    "dst": "category",
    "dport": "int32",
    "transport": "category",
    "conn": "int64",
    "xid": "int64",
    "msgtype": "category",
    "prog": "int64",
    "vers": "int32",
    "proc": "int32",
    "auth": "category",
    "auth_uid": "int64",
    "auth_gid": "int64",
    "auth_machine": "category",
    "gss_proc": "int32",
    "gss_service": "category",
    "reply_stat": "category",
    "accept_stat": "int32",
    "reject_stat": "int32",
    "rpc_len": "int64",
    "captured_len": "int64",
    "body_offset": "int32",
    "record_frags": "int32",
    "frames": "int32",
    "ip_frags": "int32",
    "truncated": "bool",
    "acked_ns": "int64",
}

# Decoded procedure fields (nfstrace/nfs_fields.py) follow the RPC ones.
MESSAGE_COLUMNS.update(
    {name: f"{dtype}: {meaning}" for name, (dtype, _, meaning) in NFS_FIELDS.items()}
)
MESSAGE_DTYPES.update({name: dtype for name, (dtype, _, _) in NFS_FIELDS.items()})

assert MESSAGE_DTYPES.keys() == MESSAGE_COLUMNS.keys()

# The message columns the stages after match read (capture quality, fragments,
# the model's packet dispersion, the overview): a Trace loaded with
# AnalysisConfig.keep_messages=False (the command line) keeps only these, a
# quarter of the table's bytes.  tests/test_trace.py checks that the analysis
# of these alone is the analysis of the whole table.
MESSAGE_FACTS: tuple[str, ...] = (
    "ts_first_ns",
    "ts_last_ns",
    "frame_first",
    "src",
    "dst",
    "transport",
    "xid",
    "msgtype",
    "op",
    "rpc_len",
    "frames",
    "ip_frags",
)
assert set(MESSAGE_FACTS) <= MESSAGE_DTYPES.keys()

# transactions: one row per logical call (re-sent calls grouped), plus one row
# per reply whose call is not in the capture.  Built by nfstrace/match.py, then
# nfstrace/inference.py fills what a snaplen hid from what it left (a call's
# times from its unread record, a row for an unread call record whose reply
# was not read either, ...): every value so inferred is marked in ``inferred``
# (INFERENCES).  <NA> marks what the capture did not show (no reply, no call).
TRANSACTION_COLUMNS: dict[str, tuple[str, str]] = {
    "client": ("category", "client address (source of the call)"),
    "client_port": ("Int32", "client port of the first call"),
    "server": ("category", "server address"),
    "server_port": ("Int32", "server port"),
    "transport": ("category", "tcp / udp (of the first call)"),
    "conn": ("Int64", "connection id of the first call"),
    "call_conns": ("Int32", "connections the call was sent on (>1: re-sent after reconnect)"),
    "xid": ("int64", "RPC transaction id"),
    "prog": ("int64", "RPC program"),
    "program": ("category", "program name (nfs, mount, nlm, portmap, ...)"),
    "vers": ("int32", "program version"),
    "proc": ("int32", "procedure"),
    "op": ("category", "procedure name; NFSv4: the main operation of the COMPOUND"),
    "ops": ("category", "NFSv4: all operations of the COMPOUND"),
    "auth": ("category", "credential flavour"),
    "gss_service": ("category", "RPCSEC_GSS service (none/integrity/privacy)"),
    "t_call_ns": ("Int64", "first packet of the first call"),
    "t_call_end_ns": ("Int64", "last packet of the first call"),
    "t_call_last_ns": ("Int64", "first packet of the last send of the call"),
    "t_call_last_end_ns": ("Int64", "last packet of the last send of the call"),
    "t_call_acked_ns": ("Int64", "TCP: the receiver's first ACK of the last send's last byte"),
    "t_reply_first_ns": ("Int64", "first packet of the first reply"),
    "t_reply_ns": ("Int64", "last packet of the first reply"),
    "latency_ns": ("Int64", "t_reply - t_call: what the client waited (headline)"),
    "latency_last_ns": ("Int64", "t_reply - t_call_last_end: from the last re-send"),
    "srt_ns": ("Int64", "t_reply - t_call_end: tshark's rpc.time (from the call's last packet)"),
    "n_calls": (
        "int32",
        "sends of the call: 1 + RPC retransmissions (0: reply without call; 1 for a call "
        "seen as an unread record: inferred call_record)",
    ),
    "call_times_ns": ("object", "first-packet time of every send, when re-sent (else <NA>)"),
    "n_replies": ("int32", "replies seen: 0 = no reply, >1 = duplicate replies"),
    "reply_stat": ("category", "accepted / denied"),
    "accept_stat": ("Int32", "RPC accept_stat (0 = SUCCESS)"),
    "status": ("Int64", "NFS status of the first reply (0 = OK)"),
    "op_status": ("category", "NFSv4: per-operation status codes"),
    "fh": ("category", "file handle (hex)"),
    "name": ("category", "file name argument"),
    "reply_fh": (
        "category",
        "file handle (hex) the reply hands back: NFSv3 LOOKUP, CREATE, MKDIR, SYMLINK, "
        "MKNOD; NFSv4 GETFH (the last) -- with name, what the file is called",
    ),
    "offset": ("Int64", "READ/WRITE/COMMIT offset"),
    "count": ("Int64", "READ/WRITE/COMMIT count asked for"),
    "stable": ("Int32", "WRITE stable_how asked for"),
    "reply_count": ("Int64", "bytes the reply says were written/read"),
    "committed": ("Int32", "WRITE reply: committed level"),
    "verifier": ("category", "WRITE/COMMIT reply: write verifier (hex)"),
    "eof": ("Int32", "READ reply: end of file"),
    "write_bytes": ("int64", "bytes acknowledged by a successful WRITE reply"),
    "read_bytes": ("int64", "bytes returned by a successful READ reply"),
    "session": ("category", "NFSv4.1 session id"),
    "slot": ("Int64", "NFSv4.1 slot id"),
    "seqid": ("Int64", "NFSv4.1 sequence id"),
    "minor": ("Int32", "NFSv4 minor version"),
    "call_bytes": ("Int64", "RPC length of the call"),
    "reply_bytes": ("Int64", "RPC length of the first reply"),
    "call_frame_first": ("Int64", "first frame of the first call"),
    "call_frame": ("Int64", "frame completing the first call"),
    "reply_frame": ("Int64", "frame completing the first reply"),
    "call_truncated": ("boolean", "the call was not wholly captured"),
    "call_decode": ("category", "NFS decoding outcome of the call"),
    "reply_decode": ("category", "NFS decoding outcome of the reply"),
    "inferred": (
        "category",
        "what of this row was inferred, not read (the capture cut it short): "
        "space-separated INFERENCES codes; '' when every value was decoded",
    ),
}
# transactions.inferred: the codes (space-separated) of what the row's values
# were inferred from where the capture (a snaplen) did not show them; '' for a
# row wholly decoded.  Made by nfstrace/inference.py (its docstring: the
# evidence and the rules).
INFERENCES: dict[str, str] = {
    "op_reply": "op, ops: NFSv4, the call's operation list was cut; the operations its whole "
    "reply names",
    "op_length": "op WRITE (prog, vers, proc): the call's operations were not captured but it "
    "carried WRITE_MIN_CALL_BYTES or more (NFSv4), or a reply without its call is as long "
    "as the replies to the connection's WRITEs, or a call of which only the xid was captured "
    "(or its unread record) as long as its WRITE calls; "
    "op COMMIT: an NFSv4 COMPOUND cut before its operations whose reply is "
    "NFS4_COMMIT_SHORTER bytes shorter than the connection's WRITE replies",
    "status_length": "status 0: the reply's results were not captured; its length is that of "
    "a successful WRITE reply (NFSv3: WRITE3resok's, which no failed WRITE has; NFSv4: the "
    "connection's successful, else most common, WRITE reply length)",
    "bytes_count": "write_bytes: the reply's count was not captured; the count the call asked",
    "bytes_length": "write_bytes: neither count was captured; the call's record length less "
    "the header of the client's WRITEs (as far as captured, else WRITE_HEADER)",
    "bytes_stretch": "write_bytes, call_bytes: the call's header was not captured; its share of "
    "the unread bytes (rpc_unframed) between the calls read before and after it, or the "
    "unread record its xid falls on when the capture missed some of the record's bytes "
    "(rpc_unframed_record without times)",
    "call_record": "t_call_ns, t_call_end_ns (and the last send's), call_bytes, "
    "call_frame_first, n_calls 1, and t_call_acked_ns where the receiver's ACK of the record "
    "was seen (rpc_unframed_acked): the call's header was not captured; the unread record "
    "(rpc_unframed_record) its xid falls on (its last byte not captured either: t_call_end_ns "
    "is its first segment's time)",
    "xid_sequence": "the whole row: an unread call record (rpc_unframed_record) whose reply "
    "was not read either, its xid from the client's numbering between the calls read around "
    "it, its operation that of the call read before it (as long as it)",
    "reply_record": "t_reply_ns, t_reply_first_ns, reply_bytes, n_replies 1: the reply's "
    "header was not captured; the next unread record of the connection's replies "
    "(rpc_unframed_record) as long as the replies to that operation there",
}

TRANSACTION_DTYPES: dict[str, str] = {k: v[0] for k, v in TRANSACTION_COLUMNS.items()}

# events: one row per transport-level event or stretch the parser saw, in time
# order.  Built by nfstrace/parsers/dissector.py.  Stretches (a zero or full window)
# are one row each: ts_ns is their start, duration_ns their length; every
# other event is instantaneous (duration_ns 0).
EVENT_COLUMNS: dict[str, tuple[str, str]] = {
    "ts_ns": ("int64", "capture time of the event (a stretch: its start)"),
    "frame": ("int64", "frame number of that packet"),
    "conn": ("int64", "connection id, as in messages.conn (0: none / not known)"),
    "src": ("category", "source address of the packet (the stream's sender)"),
    "sport": ("int32", "source port (0 if none)"),
    "dst": ("category", "destination address"),
    "dport": ("int32", "destination port (0 if none)"),
    "kind": ("category", "what happened: one of EVENT_KINDS"),
    "seq": ("int64", "TCP sequence number (see EVENT_KINDS; -1 if none)"),
    "length": ("int64", "bytes concerned (see EVENT_KINDS)"),
    "duration_ns": (
        "int64",
        "stretches: until the window opened or the stretch ended; tcp_ack_rtt: the round "
        "trip; else 0",
    ),
}
EVENT_DTYPES: dict[str, str] = {k: v[0] for k, v in EVENT_COLUMNS.items()}

# events.kind values.  "seq/length" say what those columns hold.
EVENT_KINDS: dict[str, str] = {
    "tcp_retransmission": "a TCP segment repeating bytes already seen on its stream "
    "(a TCP repeat, not an RPC retransmission); seq/length: the segment",
    "tcp_hole": "bytes of a stream never seen, stepped over when the receiver acknowledged "
    "them (the capture missed them, not the network: counted in ParseStats.tcp "
    "holes_acked / hole_bytes_acked), the stream ended, or the wait limits "
    "(ParseLimits.max_pending_*, max_hole_age_ns) were reached; seq/length: the missing range",
    "seq_jump": "a sequence number far from the stream's (corruption or a new connection "
    "on the same ports): reassembly restarted; seq: the new one, length: the jump",
    "rpc_resync": "RPC record framing lost and found again; seq: where, length: bytes skipped",
    "rpc_unframed": "stretch: bytes of a stream that hold whole RPC records whose record "
    "marks were not captured (a mark cut off by the snaplen at a record boundary; the "
    "records after it stepped over until one was found again): seq: that boundary, length: "
    "the bytes from it to the next record found or to where the stream's bytes ended (a "
    "FIN/RST, a sequence jump, the capture's end: there possibly part-way through a record); "
    "ts/frame: the segment at the boundary, duration_ns: until the last segment carrying "
    "bytes of the stretch",
    "rpc_unframed_record": "one record of an rpc_unframed stretch as long as the last "
    "record framed before it on its stream (mark included; a client's WRITEs of one size): "
    "every record of a stretch whose length is a whole number of them, else those that fit "
    "one after the other from its start (predicted: inference takes them as far as the "
    "replies confirm): seq: where it begins, "
    "length: its bytes, ts/frame: the segment carrying its first byte, duration_ns: until "
    "the segment carrying its last (-1: its last byte lies in bytes the capture missed, "
    "tcp_hole, and its end time is unknown; -2: its first byte does, ts/frame are where the "
    "hole was stepped over and its times are unknown)",
    "tcp_syn": "a SYN (connection request; repeated SYNs each give one); seq: its ISN, length 0",
    "tcp_syn_ack": "a SYN-ACK (the server's answer); seq: its ISN, length 0",
    "tcp_handshake_ack": "the client's first ACK after the SYN-ACK (the handshake's third "
    "packet); seq: its sequence number, length 0",
    "tcp_zero_window": "stretch: the sender of these packets advertised a zero receive window "
    "(its peer may send nothing) until it opened again; seq: at the start, length 0",
    "tcp_window_full": "stretch: the sender's bytes in flight reached the receiver's "
    "advertised window (within one MSS) until an ACK opened room for a full segment; "
    "only on connections whose window scale is known (handshake captured); "
    "seq: the segment that filled it, length: the window (bytes)",
    "tcp_ack_rtt": "the smallest data->ACK round trip of a stream: from a segment of new "
    "data (one timed at a time; none whose bytes were re-sent) to the first ACK from the "
    "peer covering it; one per stream (recorded when it ends); ts/frame/seq/length: that "
    "segment, duration_ns: the round trip as seen at the capture point",
    "tcp_send_gap": "stretch: the sender, part-way through an RPC message, sent no data for "
    "at least ParseLimits.send_gap_ns while bytes it had sent were unacknowledged (it "
    "waited for ACKs): from its last data segment (ts/frame) until the peer acknowledged all "
    "of them or it sent new data; seq: the sequence number it sent next, length: bytes "
    "unacknowledged at the start (-1: no ACK seen yet)",
    "tcp_resend_gap": "stretch: the sender sent no data for at least "
    "ParseLimits.send_gap_ns and then re-sent bytes (a retransmission timeout; downstream "
    "of the loss, the segment that fills the hole): from its last data segment (ts/frame) "
    "to the re-sent one; seq: the re-sent segment's sequence number, length: bytes "
    "unacknowledged at the start (-1: no ACK seen yet)",
    "tcp_send_idle": "stretch: the sender, part-way through an RPC message, had every byte "
    "acknowledged and sent nothing (the application paused), from the last ACK (or its "
    "last data segment) until its next data segment; part of a gap of at least "
    "ParseLimits.send_gap_ns; frame: its last data segment, seq: the one it sent next, length 0",
    "frame_duplicate": "a frame byte-identical to one captured at most "
    "ParseLimits.duplicate_window_ns before it (the same frame captured more than once): "
    "skipped, not processed further; "
    "endpoints as far as its headers show; seq: TCP sequence or -1, length: frame length",
    "ip_datagram_incomplete": "an IP datagram some of whose fragments never came (given up at "
    "the end of the capture or after ParseLimits.ip_reassembly_timeout_ns); ts/frame: its "
    "first fragment; seq: its IP id (IPv6: fragment identification), length: bytes received",
    "tcp_hole_filled": "stretch: a segment that fills a hole in its stream after later "
    "bytes were seen (downstream of a loss, the re-sent bytes the capture never saw the "
    "first copy of: a retransmission seen where the loss happened upstream; or reordering): "
    "ts/frame/seq/length: that segment, duration_ns: since the hole was first seen (the "
    "first later segment held)",
    "rpc_unframed_acked": "the receiver's ACK of an rpc_unframed_record (as a whole message's "
    "ACK: all of it but its last segment, tcp_state.ack_point), whether or not the stretch "
    "turned out to be whole records; ts/frame: the ACK, seq/length: the record",
}
