"""NFSv2 (RFC 1094) decoding by the Rust parser on hand-built bytes (no lab
client speaks v2), each call and reply in a crafted capture (tests/nfs_decode.py)."""

from __future__ import annotations

import struct

from nfs_decode import parse

from nfstrace.nfs_fields import DECODE_OK, DECODE_TRUNCATED
from nfstrace.protocol.nfs2 import FATTR_BYTES, PROC_NAMES, READ, WRITE
from nfstrace.protocol.nfs3 import FILE_SYNC

FH = bytes(range(32))  # fhandle: fixed 32 bytes
LOOKUP = PROC_NAMES.index("LOOKUP")


def test_write_call() -> None:
    args = FH + struct.pack(">IIII", 0, 8192, 0, 4096) + b"x" * 16  # begin, offset, total, len
    r = parse(args, proc=WRITE, vers=2)[0]
    assert r == {
        "op": "WRITE",
        "fh": FH.hex(),
        "offset": 8192,
        "count": 4096,
        "stable": FILE_SYNC,  # NFSv2 writes are stable at the reply (§2.2.10)
        "nfs_decode": DECODE_OK,
    }


def test_write_call_cut_before_count_is_truncated() -> None:
    args = FH + struct.pack(">IIII", 0, 8192, 0, 4096) + b"x" * 16
    r = parse(args, proc=WRITE, vers=2, body_captured=len(FH) + 8)[0]
    assert r["nfs_decode"] == DECODE_TRUNCATED and "count" not in r


def test_lookup_call_name() -> None:
    name = b"file.txt"
    r = parse(FH + struct.pack(">I", len(name)) + name, proc=LOOKUP, vers=2)[0]
    assert (r["op"], r["name"], r["fh"]) == ("LOOKUP", "file.txt", FH.hex())


def test_read_reply_count_and_error_status() -> None:
    call = FH + struct.pack(">III", 0, 1000, 0)  # offset, count, totalcount
    ok = struct.pack(">I", 0) + bytes(FATTR_BYTES) + struct.pack(">I", 1000) + b"d" * 1000
    r = parse(call, ok, proc=READ, vers=2)[1]
    assert r is not None
    assert (r["op"], r["nfs_status"], r["count"]) == ("READ", 0, 1000)
    err = parse(call, struct.pack(">I", 70), proc=READ, vers=2)[1]  # NFSERR_STALE
    assert err is not None
    assert (err["nfs_status"], "count" in err) == (70, False)
