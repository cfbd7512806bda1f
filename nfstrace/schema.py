"""The tables passed between pipeline stages: one place that lists their columns.

capture -> frames -> **messages** -> transactions -> findings -> report

Every stage documents here what it hands on; code builds its DataFrames from
these lists so a column is named once.  Times are integer nanoseconds since
the Unix epoch (int64); floats appear only in presentation.
"""

from __future__ import annotations

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
    "prog": "int: RPC program (for replies: from the matched call, -1 if unknown)",
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
}

# Columns as (name, pandas dtype), in table order.
MESSAGE_DTYPES: dict[str, str] = {
    "ts_first_ns": "int64",
    "ts_last_ns": "int64",
    "frame_first": "int64",
    "frame_last": "int64",
    "src": "string",
    "sport": "int32",
    "dst": "string",
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
    "auth_machine": "string",
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
}

assert MESSAGE_DTYPES.keys() == MESSAGE_COLUMNS.keys()
