"""NFSv2 (RFC 1094) decoding on hand-built bytes: no lab client speaks v2."""

from __future__ import annotations

import struct

from oracle import nfs2

from nfstrace.nfs_fields import DECODE_OK, DECODE_TRUNCATED, FIELD_INDEX
from nfstrace.protocol.nfs2 import FATTR_BYTES, READ, WRITE
from nfstrace.protocol.nfs3 import FILE_SYNC

FH = bytes(range(32))  # fhandle: fixed 32 bytes


def _get(result: tuple, name: str) -> object:
    return result[FIELD_INDEX[name]]


def test_write_call() -> None:
    args = FH + struct.pack(">IIII", 0, 8192, 0, 4096) + b"x" * 16  # begin, offset, total, len
    r = nfs2.decode_call(b"HDR!" + args, 4, WRITE)
    assert _get(r, "op") == "WRITE"
    assert _get(r, "fh") == FH.hex()
    assert (_get(r, "offset"), _get(r, "count"), _get(r, "stable")) == (8192, 4096, FILE_SYNC)
    assert _get(r, "nfs_decode") == DECODE_OK


def test_write_call_cut_before_count_is_truncated() -> None:
    r = nfs2.decode_call(FH + struct.pack(">II", 0, 8192), 0, WRITE)
    assert _get(r, "nfs_decode") == DECODE_TRUNCATED and _get(r, "count") == -1


def test_lookup_call_name() -> None:
    name = b"file.txt"
    r = nfs2.decode_call(FH + struct.pack(">I", len(name)) + name, 0, 4)
    assert (_get(r, "op"), _get(r, "name")) == ("LOOKUP", "file.txt")


def test_read_reply_count_and_error_status() -> None:
    ok = struct.pack(">I", 0) + bytes(FATTR_BYTES) + struct.pack(">I", 1000)
    r = nfs2.decode_reply(ok, 0, READ)
    assert (_get(r, "nfs_status"), _get(r, "count")) == (0, 1000)
    err = nfs2.decode_reply(struct.pack(">I", 70), 0, READ)  # NFSERR_STALE
    assert (_get(err, "nfs_status"), _get(err, "count")) == (70, -1)
