"""The decoded NFS fields every procedure decoder returns, in one fixed order:
the messages table's NFS columns (schema.py lists them after the RPC ones), so
it sits with the schema, below the parsers that fill it.

A decoder is ``decode(buf, off, proc) -> tuple`` (one value per NFS_FIELDS
entry, ``NFS_DEFAULTS`` where a field does not apply), where ``buf`` is the
start of the RPC message as captured (at most ``ParseLimits.head_bytes``) and
``off`` the offset of the procedure's arguments (calls) or results (replies).
"""

from __future__ import annotations

# Decoding outcome (column nfs_decode)
DECODE_OK = "ok"  # every field of interest decoded
DECODE_PARTIAL = "partial"  # NFSv4: stopped at an operation it cannot step over
DECODE_TRUNCATED = "truncated"  # the captured bytes ran out (snaplen, head limit)
DECODE_ENCRYPTED = "encrypted"  # RPCSEC_GSS integrity/privacy: body not decodable
DECODE_NONE = ""  # not an NFS message (other programs) or no body

NFS_FIELDS: dict[str, tuple[str, object, str]] = {
    # name: (pandas dtype, default, meaning)
    "op": ("category", "", "procedure name; NFSv4: the main operation of the COMPOUND"),
    "ops": ("category", "", "NFSv4: the operations of the COMPOUND, space-separated"),
    "op_status": ("category", "", "NFSv4 replies: per-operation status codes, space-separated"),
    "nfs_status": ("int64", -1, "reply status (nfsstat3/nfsstat4; -1 for calls/unknown)"),
    "fh": ("category", "", "file handle (hex) the procedure acts on; v4: the last PUTFH"),
    "name": ("category", "", "file name argument (LOOKUP, CREATE, REMOVE, RENAME from, ...)"),
    "offset": ("int64", -1, "READ/WRITE/COMMIT offset"),
    "count": ("int64", -1, "calls: READ/WRITE/COMMIT count; replies: bytes written/read"),
    "stable": ("int32", -1, "WRITE calls: stable_how (0 UNSTABLE, 1 DATA_SYNC, 2 FILE_SYNC)"),
    "committed": ("int32", -1, "WRITE replies: committed level (same values as stable)"),
    "verifier": ("category", "", "WRITE/COMMIT replies: write verifier (hex)"),
    "eof": ("int32", -1, "READ replies: end of file (0/1)"),
    "session": ("category", "", "NFSv4.1 SEQUENCE: session id (hex)"),
    "slot": ("int64", -1, "NFSv4.1 SEQUENCE: slot id"),
    "seqid": ("int64", -1, "NFSv4.1 SEQUENCE: sequence id"),
    "minor": ("int32", -1, "NFSv4 calls: minor version"),
    "nfs_decode": ("category", "", "ok / partial / truncated / encrypted / '' (see nfs_fields.py)"),
}
FIELD_NAMES = tuple(NFS_FIELDS)
INT64_MAX = (1 << 63) - 1
NFS_DEFAULTS: tuple = tuple(v[1] for v in NFS_FIELDS.values())
FIELD_INDEX = {name: i for i, name in enumerate(FIELD_NAMES)}


def fields(**values: object) -> tuple:
    """A decoder result: the defaults with the given fields set."""
    out = list(NFS_DEFAULTS)
    for k, v in values.items():
        out[FIELD_INDEX[k]] = v
    return tuple(out)


def offset64(value: int) -> int:
    """An XDR unsigned hyper file offset (offset3, offset4) for the int64 column:
    one past 2**63 - 1 is no file offset (a damaged message) and does not fit:
    -1, unknown."""
    return value if value <= INT64_MAX else -1
