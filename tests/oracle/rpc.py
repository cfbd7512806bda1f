"""ONC RPC version 2 message header (RFC 5531 §9-§10): is it one, and decode
it (the protocol's numbers: ``nfstrace.protocol.rpc``).  Knows no NFS:
procedure decoding plugs in by (prog, vers).

A decoded header is an ``RpcHeader`` (a NamedTuple: the messages-table
columns this module owns, in ``HEADER_FIELDS`` order).
"""

from __future__ import annotations

import struct

from nfstrace.parsers.tables import HEADER_FIELDS as HEADER_FIELDS
from nfstrace.parsers.tables import RpcHeader
from nfstrace.protocol.rpc import (
    ACCEPT_STAT_NAMES,
    AUTH_ERROR,
    AUTH_NAMES,
    AUTH_NONE,
    AUTH_SYS,
    AUTH_SYS_MAX_GIDS,
    AUTH_TLS,
    CALL,
    CALLBACK_RANGE,
    GSS_SERVICE_NAMES,
    MAX_AUTH_BYTES,
    MIN_CALL_LEN,
    MIN_CUT_CALL_LEN,
    MSG_ACCEPTED,
    MSG_DENIED,
    PROG_MISMATCH,
    PROGRAMS,
    REPLY,
    RPC_MISMATCH,
    RPC_VERSION,
    RPCSEC_GSS,
)
from nfstrace.protocol.rpc import auth_name as auth_name
from nfstrace.protocol.rpc import gss_service_name as gss_service_name

_CALL_HDR = struct.Struct(">IIIIIIII").unpack_from
_CUT_CALL_HDR = struct.Struct(">IIIIII").unpack_from
_U32 = struct.Struct(">I").unpack_from
_U32X2 = struct.Struct(">II").unpack_from
_U32X4 = struct.Struct(">IIII").unpack_from


def is_known_program(prog: int) -> bool:
    return prog in PROGRAMS or CALLBACK_RANGE[0] <= prog <= CALLBACK_RANGE[1]


def plausible_call(
    buf: bytes | memoryview, pos: int, known_only: bool = True, cut: bool = False
) -> bool:
    """Could a call header start at buf[pos]? (resync and UDP detection)
    ``cut``: buf ends where the capture cut the message (the snaplen): a header
    cut after its procedure number (``MIN_CUT_CALL_LEN``) but before its
    credential is judged on what came, a known program's only."""
    if len(buf) < pos + 32:
        if not cut or len(buf) < pos + MIN_CUT_CALL_LEN:
            return False
        _xid, mtype, rpcvers, prog, vers, _proc = _CUT_CALL_HDR(buf, pos)
        return (
            mtype == CALL and rpcvers == RPC_VERSION and vers <= 0xFFFF and is_known_program(prog)
        )
    _xid, mtype, rpcvers, prog, vers, _proc, flavor, clen = _CALL_HDR(buf, pos)
    if mtype != CALL or rpcvers != RPC_VERSION or clen > MAX_AUTH_BYTES or vers > 0xFFFF:
        return False
    if flavor not in AUTH_NAMES:
        return False
    return is_known_program(prog) or (not known_only and prog < 0x80000000)


# strict_call: the program numbers it accepts (assigned ones start at 100000,
# the portmapper; 0x60000000 and above are reserved) and the highest version.
STRICT_MIN_PROG, STRICT_MAX_PROG = 100000, 0x5FFFFFFF
STRICT_MAX_VERS = 255


def strict_call(buf: bytes | memoryview, wire_len: int) -> bool:
    """Is buf (a UDP payload of wire_len bytes on the wire) a call header of
    any program?  For datagrams to ports not known to carry RPC, so stricter
    than ``plausible_call``: RPC version 2, a program number from 100000 and
    below the reserved range, a version up to 255, a known credential flavour whose length fits
    its kind (AUTH_NONE and AUTH_TLS empty, AUTH_SYS exactly its fields with at
    most 16 groups and a machine name up to 255 bytes, RPCSEC_GSS version 1
    with a known procedure and service), a known verifier flavour (AUTH_NONE:
    empty) up to 400 bytes, and the whole header within the datagram."""
    n = len(buf)
    if n < MIN_CALL_LEN:
        return False
    _xid, mtype, rpcvers, prog, vers, _proc, flavor, clen = _CALL_HDR(buf, 0)
    if mtype != CALL or rpcvers != RPC_VERSION or not STRICT_MIN_PROG <= prog <= STRICT_MAX_PROG:
        return False
    if vers > STRICT_MAX_VERS or clen > MAX_AUTH_BYTES or clen & 3:
        return False
    v = 32 + clen  # the verifier
    if v + 8 > n:
        return False
    if flavor in (AUTH_NONE, AUTH_TLS):
        if clen:
            return False
    elif flavor == AUTH_SYS:
        if clen < 20:
            return False
        (mlen,) = _U32(buf, 36)
        if mlen > 255:
            return False
        g = 40 + ((mlen + 3) & ~3) + 8  # the gids count
        if g + 4 > v:
            return False
        (ngids,) = _U32(buf, g)
        if ngids > AUTH_SYS_MAX_GIDS or g + 4 + 4 * ngids != v:
            return False
    elif flavor == RPCSEC_GSS:
        if clen < 20:
            return False
        gvers, gproc, _seq, service, hlen = struct.unpack_from(">IIIII", buf, 32)
        if gvers != 1 or gproc > 3 or service not in GSS_SERVICE_NAMES:
            return False
        if 52 + ((hlen + 3) & ~3) != v:
            return False
    elif flavor not in AUTH_NAMES or not clen:  # AUTH_SHORT, AUTH_DH: not empty
        return False
    vflavor, vlen = _U32X2(buf, v)
    if vflavor not in AUTH_NAMES or vlen > MAX_AUTH_BYTES or (vflavor == AUTH_NONE and vlen):
        return False
    return v + 8 + ((vlen + 3) & ~3) <= wire_len


def udp_call(buf: bytes | memoryview, wire_len: int, rpc_port: bool) -> bool:
    """Is a UDP payload (wire_len bytes on the wire) an RPC call?  A known
    program's if ``plausible_call`` (cut by the snaplen: as far as it came);
    another program's to a port known to carry RPC (``rpc_port``: 2049, 111,
    or one a portmapper announced) if ``plausible_call`` with a program number
    from 100000; elsewhere if ``strict_call``."""
    if plausible_call(buf, 0, True, len(buf) < wire_len):
        return True
    if rpc_port:
        return plausible_call(buf, 0, known_only=False) and _U32(buf, 12)[0] >= STRICT_MIN_PROG
    return strict_call(buf, wire_len)


def plausible_reply(buf: bytes | memoryview, pos: int) -> bool:
    """Could an accepted or denied reply header start at buf[pos]?"""
    if len(buf) < pos + 12:
        return False
    _xid, mtype, stat = struct.unpack_from(">III", buf, pos)
    if mtype != REPLY:
        return False
    if stat == MSG_ACCEPTED:
        if len(buf) < pos + 20:
            return True
        flavor, vlen = _U32X2(buf, pos + 12)
        if flavor not in AUTH_NAMES or vlen > MAX_AUTH_BYTES:
            return False
        p = pos + 20 + ((vlen + 3) & ~3)
        return len(buf) < p + 4 or _U32(buf, p)[0] in ACCEPT_STAT_NAMES
    if stat == MSG_DENIED:
        return len(buf) < pos + 16 or _U32(buf, pos + 12)[0] in (RPC_MISMATCH, AUTH_ERROR)
    return False


def decode_header(buf: bytes) -> RpcHeader | None:
    """Decode the RPC header at buf[0:]; None if buf does not hold one.

    A header cut short by the capture still yields what was read, with
    body_offset -1 (the procedure data cannot be located); a call cut before
    its program number, its xid (program, version and procedure -1).
    """
    n = len(buf)
    if n < 8:
        return None
    xid, mtype = _U32X2(buf, 0)
    if mtype == CALL:
        return _decode_call(buf, n, xid)
    if mtype == REPLY:
        return _decode_reply(buf, n, xid)
    return None


def _decode_call(buf: bytes, n: int, xid: int) -> RpcHeader | None:
    if n < 32:
        if n >= 24:
            _x, _t, _rpcvers, prog, vers, proc = struct.unpack_from(">IIIIII", buf, 0)
            return RpcHeader(xid, "call", prog, vers, proc, "", -1, -1, "", -1, "", "", -1, -1, -1)
        if n >= 12 and _U32(buf, 8)[0] != RPC_VERSION:
            return None
        return xid_header(xid, "call")  # cut before its program: the xid alone
    _x, _t, _rpcvers, prog, vers, proc, flavor, clen = _CALL_HDR(buf, 0)
    uid = gid = gss_proc = -1
    machine = gss_service = ""
    pos = 32
    if clen > MAX_AUTH_BYTES:
        return RpcHeader(
            xid, "call", prog, vers, proc, auth_name(flavor), -1, -1, "", -1, "", "", -1, -1, -1
        )
    body_end = pos + ((clen + 3) & ~3)
    if flavor == AUTH_SYS and n >= pos + 8:
        (mlen,) = _U32(buf, pos + 4)
        mpos = pos + 8
        if mlen <= 255 and n >= mpos + ((mlen + 3) & ~3) + 8:
            machine = buf[mpos : mpos + mlen].decode("utf-8", "replace")
            uid, gid = _U32X2(buf, mpos + ((mlen + 3) & ~3))
    elif flavor == RPCSEC_GSS and n >= pos + 16:
        _gvers, gss_proc, _seq, service = _U32X4(buf, pos)
        gss_service = gss_service_name(service)
    pos = body_end
    body_offset = -1
    if n >= pos + 8:
        _vflavor, vlen = _U32X2(buf, pos)
        if vlen <= MAX_AUTH_BYTES and n >= pos + 8 + ((vlen + 3) & ~3):
            body_offset = pos + 8 + ((vlen + 3) & ~3)
    return RpcHeader(
        xid, "call", prog, vers, proc, auth_name(flavor), uid, gid, machine, gss_proc,
        gss_service, "", -1, -1, body_offset,
    )  # fmt: skip


def xid_header(xid: int, msgtype: str) -> RpcHeader:
    """A header of which only the xid is known (cut short by the capture): a
    "reply" or a "call" (its program unknown: -1)."""
    return RpcHeader(xid, msgtype, -1, -1, -1, "", -1, -1, "", -1, "", "", -1, -1, -1)


def _decode_reply(buf: bytes, n: int, xid: int) -> RpcHeader | None:
    if n < 12:
        return xid_header(xid, "reply")
    (stat,) = _U32(buf, 8)
    if stat == MSG_DENIED:
        reject = _U32(buf, 12)[0] if n >= 16 else -1
        return RpcHeader(xid, "reply", -1, -1, -1, "", -1, -1, "", -1, "", "denied", -1, reject, -1)
    if stat != MSG_ACCEPTED:
        return None
    if n < 20:
        return RpcHeader(xid, "reply", -1, -1, -1, "", -1, -1, "", -1, "", "accepted", -1, -1, -1)
    flavor, vlen = _U32X2(buf, 12)
    pos = 20 + ((vlen + 3) & ~3)
    accept = -1
    body_offset = -1
    if vlen <= MAX_AUTH_BYTES and n >= pos + 4:
        (accept,) = _U32(buf, pos)
        body_offset = pos + 4
        if accept == PROG_MISMATCH:
            body_offset = pos + 12 if n >= pos + 12 else -1
    return RpcHeader(
        xid, "reply", -1, -1, -1, auth_name(flavor), -1, -1, "", -1, "", "accepted", accept, -1,
        body_offset,
    )  # fmt: skip
