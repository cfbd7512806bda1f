"""ONC RPC version 2 (RFC 5531): the numbers every RPC message is read with.

* record marking over TCP (§11);
* the message header's enumerations (§9: msg_type, reply_stat, accept_stat,
  reject_stat) and the fixed part of a call and of a reply;
* authentication flavours (§8.2, §10; AUTH_SYS: appendix A; RPCSEC_GSS:
  RFC 2203 §5; AUTH_TLS: RFC 9289 §4.1);
* program numbers (§8.3: assigned below 0x20000000, transient
  0x40000000-0x5FFFFFFF) and the names reports give them, and the well-known
  ports (2049: RFC 7530 §3.1; 111, the portmapper: RFC 1833 §3).

Procedure names, per program and version, are in ``procedures.py``.
"""

from __future__ import annotations

# Record marking (§11): 4-byte mark, high bit = last fragment
LAST_FRAG = 0x80000000
FRAG_LEN_MASK = 0x7FFFFFFF

# msg_type
CALL = 0
REPLY = 1
RPC_VERSION = 2
# reply_stat
MSG_ACCEPTED = 0
MSG_DENIED = 1
# accept_stat
ACCEPT_STAT_NAMES = {
    0: "SUCCESS",
    1: "PROG_UNAVAIL",
    2: "PROG_MISMATCH",
    3: "PROC_UNAVAIL",
    4: "GARBAGE_ARGS",
    5: "SYSTEM_ERR",
}
PROG_MISMATCH = 2
# reject_stat
RPC_MISMATCH = 0
AUTH_ERROR = 1

# auth_flavor
AUTH_NONE = 0
AUTH_SYS = 1
AUTH_SHORT = 2
AUTH_DH = 3
RPCSEC_GSS = 6
AUTH_TLS = 7
AUTH_NAMES = {
    AUTH_NONE: "none",
    AUTH_SYS: "sys",
    AUTH_SHORT: "short",
    AUTH_DH: "dh",
    RPCSEC_GSS: "gss",
    AUTH_TLS: "tls",
}
# RPCSEC_GSS (RFC 2203): rpc_gss_service_t
GSS_SERVICE_NAMES = {1: "none", 2: "integrity", 3: "privacy"}
# ... the services whose procedure data is wrapped (§5.3.2), unreadable as a procedure's
WRAPPED_SERVICES = frozenset(("integrity", "privacy"))
GSS_DATA = 0

MAX_AUTH_BYTES = 400  # §8.2: opaque_auth body is at most 400 bytes
AUTH_SYS_MAX_GIDS = 16  # appendix A: authsys_parms' gids<16>
MIN_CALL_LEN = 40  # xid, type, rpcvers, prog, vers, proc, cred (8), verf (8)
# A call header cut by the snaplen through its procedure number: what names it
MIN_CUT_CALL_LEN = 24  # xid, type, rpcvers, prog, vers, proc
MIN_REPLY_LEN = 12  # xid, type, reply_stat (a denied reply's shortest prefix)

# Program numbers
PORTMAP_PROGRAM = 100000  # portmap / rpcbind (RFC 1833)
NFS_PROGRAM = 100003
# Programs named in reports; any other program is still matched and timed.
PROGRAMS = {
    PORTMAP_PROGRAM: "portmap",
    NFS_PROGRAM: "nfs",
    100005: "mount",
    100021: "nlm",
    100024: "status",
    100227: "nfsacl",
    100011: "rquota",
    100001: "rstat",
    100002: "rusers",
    100004: "ypserv",
    100007: "ypbind",
}
# NFSv4 callback programs are chosen by the client in this range (RFC 7530 §16.33)
CALLBACK_RANGE = (0x40000000, 0x5FFFFFFF)

# Well-known ports: NFS and the portmapper listen there over TCP and UDP
NFS_PORT = 2049
PORTMAP_PORT = 111
RPC_WELL_KNOWN_PORTS = frozenset((NFS_PORT, PORTMAP_PORT))


def program_name(prog: int) -> str:
    """The name reports give a program: its name, ``nfs_cb`` for an NFSv4
    callback program, else its number ('?' when unknown)."""
    if prog in PROGRAMS:
        return PROGRAMS[prog]
    if CALLBACK_RANGE[0] <= prog <= CALLBACK_RANGE[1]:
        return "nfs_cb"
    return str(prog) if prog >= 0 else "?"


def auth_name(flavor: int) -> str:
    """The auth column: a flavour's name, or its number."""
    return AUTH_NAMES.get(flavor) or str(flavor)


def gss_service_name(service: int) -> str:
    """The gss_service column: an RPCSEC_GSS service's name, or its number."""
    return GSS_SERVICE_NAMES.get(service, str(service))
