"""The one table that plugs procedure decoders into RPC, keyed by
(program, version): RPC knows no NFS, NFS knows no RPC framing (Zeek's habit).

Every message gets the NFS_FIELDS tuple: decoded for NFS, and at least the
procedure name (``op``) for every other program.
"""

from __future__ import annotations

from collections.abc import Callable

from nfstrace.nfs_fields import DECODE_ENCRYPTED, DECODE_TRUNCATED, fields
from nfstrace.protocol.nfs4 import NFSPROC4_COMPOUND
from nfstrace.protocol.procedures import procedure_name
from nfstrace.protocol.rpc import CALLBACK_RANGE, GSS_DATA, NFS_PROGRAM
from oracle import nfs2, nfs3, nfs4

Decoder = Callable[[bytes, int, int], tuple]

# (prog, vers) -> (decode_call, decode_reply)
DECODERS: dict[tuple[int, int], tuple[Decoder, Decoder]] = {
    (NFS_PROGRAM, 2): (nfs2.decode_call, nfs2.decode_reply),
    (NFS_PROGRAM, 3): (nfs3.decode_call, nfs3.decode_reply),
    (NFS_PROGRAM, 4): (nfs4.decode_call, nfs4.decode_reply),
}
CALLBACK_DECODERS: tuple[Decoder, Decoder] = (nfs4.decode_cb_call, nfs4.decode_cb_reply)

# RPCSEC_GSS services whose procedure data is wrapped (RFC 2203 §5.3.2)
WRAPPED_SERVICES = frozenset(("integrity", "privacy"))

_name_cache: dict[tuple[int, int, int], tuple] = {}
NAME_CACHE_SIZE = 4096


def decode(
    is_call: bool,
    prog: int,
    vers: int,
    proc: int,
    buf: bytes,
    body_offset: int,
    gss_service: str,
    gss_proc: int,
) -> tuple:
    """Decoded NFS fields of one message (NFS_FIELDS order)."""
    pair = DECODERS.get((prog, vers))
    if pair is None and CALLBACK_RANGE[0] <= prog <= CALLBACK_RANGE[1]:
        pair = CALLBACK_DECODERS
    if pair is None or proc < 0:
        key = (prog, vers, proc)
        out = _name_cache.get(key)
        if out is None:
            if len(_name_cache) >= NAME_CACHE_SIZE:  # garbage headers: many made-up procedures
                _name_cache.clear()
            out = _name_cache[key] = fields(op=procedure_name(prog, vers, proc))
        return out
    if gss_proc != -1 and (gss_proc != GSS_DATA or gss_service in WRAPPED_SERVICES):
        # Context set-up messages carry GSS tokens, DATA messages a wrapped body.
        return fields(op=procedure_name(prog, vers, proc), nfs_decode=DECODE_ENCRYPTED)
    if body_offset < 0:
        return fields(op=procedure_name(prog, vers, proc), nfs_decode=DECODE_TRUNCATED)
    return pair[0 if is_call else 1](buf, body_offset, proc)


# A reply whose call was not captured is decoded when the last call seen on its
# flow (same addresses and ports, the other way) was NFS with a plain body: as
# an NFSv4 COMPOUND reply (its results name their operations), or, NFSv3, as a
# WRITE reply when it has exactly that shape (nfs3.write_reply_without_call: a
# ``-s 256`` capture keeps the replies of WRITEs whose call header it cut).
# tshark decodes none of them.  The flows remembered are bounded (all
# forgotten past it).
NFS3_PROGRAM_VERSION = (NFS_PROGRAM, 3)
NFS4_PROGRAM_VERSION = (NFS_PROGRAM, 4)
MAX_FLOWS = 65536


def decode_reply_without_call(
    last_call: tuple | None, buf: bytes, body_offset: int, rpc_len: int
) -> tuple | None:
    """(prog, vers, proc, NFS fields) of a reply of ``rpc_len`` bytes whose call
    was not seen, given the last call on its flow ((prog, vers, proc,
    gss_service, gss_proc) or None); None when it is not decoded."""
    if last_call is None or body_offset < 0:
        return None
    gss_service, gss_proc = last_call[3], last_call[4]
    if gss_proc != -1 and (gss_proc != GSS_DATA or gss_service in WRAPPED_SERVICES):
        return None
    if last_call[:2] == NFS3_PROGRAM_VERSION:
        out = nfs3.write_reply_without_call(buf, body_offset, rpc_len)
        return None if out is None else (*NFS3_PROGRAM_VERSION, nfs3.WRITE, out)
    if last_call[:2] != NFS4_PROGRAM_VERSION:
        return None
    out = nfs4.decode_reply_without_call(buf, body_offset)
    return None if out is None else (*NFS4_PROGRAM_VERSION, NFSPROC4_COMPOUND, out)
