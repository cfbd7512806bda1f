"""NFSv4 COMPOUND decoding by the Rust parser (native/src/nfs4.rs, its step
programs generated from nfstrace/protocol/nfs4_steps.py): hand-built messages
in crafted captures (tests/nfs_decode.py), then a differential test against
tshark on the sample v4.1 capture and its -s 256 twin."""

from __future__ import annotations

from functools import cache

import pytest
import tshark_ref
from conftest import SAMPLES
from nfs_decode import CB_PROG, parse, row_fields

from nfstrace.nfs_fields import DECODE_OK, DECODE_PARTIAL, DECODE_TRUNCATED
from nfstrace.parsers import native
from nfstrace.protocol import nfs4 as nfs4_protocol
from nfstrace.protocol import nfs4_steps


def h(*parts: str) -> bytes:
    """Bytes from hex chunks (whitespace ignored)."""
    return bytes.fromhex("".join(parts).replace(" ", ""))


SESSION = "0200000020f1026b0100000000000000"
FH = "4300000112444b9eab9b57e293f501bc6633003aa7bf3a"  # 23 bytes

# --- NFSv4.1 SEQUENCE + PUTFH + WRITE (COMPOUND4args) ---
WRITE41_HEAD = h(
    "00000005 77726974 65000000",  # tag: "write" (length 5, 3 fill bytes)
    "00000001",  # minorversion 1
    "00000003",  # argarray: 3 operations
    "00000035",  # SEQUENCE (53)
    SESSION,  # sa_sessionid
    "00000007",  # sa_sequenceid 7
    "00000008",  # sa_slotid 8
    "0000003f",  # sa_highest_slotid 63
    "00000001",  # sa_cachethis TRUE
    "00000016",  # PUTFH (22)
    "00000017",  # nfs_fh4 length 23
    FH + "00",  # handle + 1 fill byte
    "00000026",  # WRITE (38)
    "00000001 0200000020f1026b01000000",  # stateid4: seqid 1, other[12]
    "00000000 00100000",  # offset 1048576
)
WRITE41_CALL = WRITE41_HEAD + h(
    "00000002",  # stable FILE_SYNC4
    "00000005",  # data<> length 5
    "68656c6c 6f000000",  # "hello" + 3 fill bytes
)

# --- its COMPOUND4res ---
WRITE41_REPLY = h(
    "00000000",  # status NFS4_OK
    "00000005 77726974 65000000",  # tag "write"
    "00000003",  # resarray: 3 results
    "00000035 00000000",  # SEQUENCE, NFS4_OK
    SESSION,  # sr_sessionid
    "00000007",  # sr_sequenceid 7
    "00000008",  # sr_slotid 8
    "0000003f",  # sr_highest_slotid 63
    "0000003f",  # sr_target_highest_slotid 63
    "00000000",  # sr_status_flags
    "00000016 00000000",  # PUTFH, NFS4_OK
    "00000026 00000000",  # WRITE, NFS4_OK
    "00000005",  # count 5
    "00000002",  # committed FILE_SYNC4
    "20f1026b00000000",  # writeverf
)

# --- NFSv4.0 PUTFH + OPEN (OPEN4_CREATE UNCHECKED4, CLAIM_NULL) + GETFH ---
OPEN40_CALL = h(
    "00000000",  # tag: empty
    "00000000",  # minorversion 0
    "00000003",  # argarray: 3 operations
    "00000016",  # PUTFH (22)
    "00000008 0102030405060708",  # nfs_fh4: 8 bytes
    "00000012",  # OPEN (18)
    "00000001",  # seqid 1
    "00000002",  # share_access WRITE
    "00000000",  # share_deny NONE
    "0000000000000001",  # open_owner4.clientid
    "00000004 6f776e31",  # open_owner4.owner "own1"
    "00000001",  # openflag4: OPEN4_CREATE
    "00000000",  # createhow4: UNCHECKED4
    "00000002 00000010 00000002",  # createattrs.attrmask: 2 words (mode is attr 33)
    "00000004 000001a4",  # createattrs.attr_vals: mode 0644
    "00000000",  # open_claim4: CLAIM_NULL
    "00000007 6e657766 696c6500",  # file "newfile" + 1 fill byte
    "0000000a",  # GETFH (10)
)

# --- PUTFH OK, then OPEN NFS4ERR_NOENT: the resarray ends at the failing op ---
OPEN_NOENT_REPLY = h(
    "00000002",  # status NFS4ERR_NOENT
    "00000000",  # tag: empty
    "00000002",  # resarray: 2 results
    "00000016 00000000",  # PUTFH, NFS4_OK
    "00000012 00000002",  # OPEN, NFS4ERR_NOENT (no body)
)


def test_v41_write_call() -> None:
    assert parse(WRITE41_CALL)[0] == {
        "op": "WRITE",
        "ops": "SEQUENCE PUTFH WRITE",
        "fh": FH,
        "offset": 1048576,
        "count": 5,
        "stable": 2,
        "session": SESSION,
        "slot": 8,
        "seqid": 7,
        "minor": 1,
        "nfs_decode": DECODE_OK,
    }


def test_v41_write_reply() -> None:
    assert parse(WRITE41_CALL, WRITE41_REPLY)[1] == {
        "op": "WRITE",
        "ops": "SEQUENCE PUTFH WRITE",
        "op_status": "0 0 0",
        "nfs_status": 0,
        "count": 5,
        "committed": 2,
        "verifier": "20f1026b00000000",
        "session": SESSION,
        "slot": 8,
        "seqid": 7,
        "nfs_decode": DECODE_OK,
    }


def test_v40_open_create_call() -> None:
    assert parse(OPEN40_CALL)[0] == {
        "op": "OPEN",
        "ops": "PUTFH OPEN GETFH",
        "fh": "0102030405060708",
        "name": "newfile",
        "minor": 0,
        "nfs_decode": DECODE_OK,
    }


def test_reply_stops_at_failing_op() -> None:
    assert parse(OPEN40_CALL, OPEN_NOENT_REPLY)[1] == {
        "op": "OPEN",
        "ops": "PUTFH OPEN",
        "op_status": "0 2",
        "nfs_status": 2,
        "nfs_decode": DECODE_OK,
    }


def test_unknown_opcode_is_partial() -> None:
    call = h(
        "00000000 00000002",  # tag empty, minorversion 2
        "00000003",  # 3 operations
        "00000016 00000004 0a0b0c0d",  # PUTFH, 4-byte handle
        "00000063",  # opcode 99: unknown, its arguments cannot be stepped over
        "00000009 00000001 00000001",  # GETATTR (never reached)
    )
    reply = h("00000000 00000000 00000002", "00000016 00000000", "00000063 00000000")
    ours, out = parse(call, reply)
    assert ours == {
        "op": "op99",
        "ops": "PUTFH op99",
        "fh": "0a0b0c0d",
        "minor": 2,
        "nfs_decode": DECODE_PARTIAL,
    }
    assert out is not None
    assert (out["ops"], out["op_status"], out["nfs_decode"]) == ("PUTFH op99", "0 0", "partial")


def test_write_cut_after_offset_is_truncated() -> None:
    # the snaplen ends after the offset
    out = parse(WRITE41_CALL, body_captured=len(WRITE41_HEAD))[0]
    assert out == {
        "op": "WRITE",
        "ops": "SEQUENCE PUTFH WRITE",
        "fh": FH,
        "offset": 1048576,
        "session": SESSION,
        "slot": 8,
        "seqid": 7,
        "minor": 1,
        "nfs_decode": DECODE_TRUNCATED,
    }
    assert "stable" not in out and "count" not in out


def test_write_data_need_not_be_captured() -> None:
    head = len(WRITE41_CALL) - len("hello...")  # up to the data length; data not captured
    assert parse(WRITE41_CALL, body_captured=head)[0] == parse(WRITE41_CALL)[0]
    # ... but an operation after the missing data is lost: the decode is truncated
    four_ops = bytearray(WRITE41_CALL + h("00000009 00000001 00000010"))  # + GETATTR
    four_ops[19] = 4  # argarray count 3 -> 4 (SEQUENCE PUTFH WRITE GETATTR)
    out = parse(bytes(four_ops), body_captured=head)[0]
    assert out["count"] == 5 and out["nfs_decode"] == DECODE_TRUNCATED
    assert parse(bytes(four_ops))[0]["ops"] == "SEQUENCE PUTFH WRITE GETATTR"


def test_read_reply_and_open_delegation() -> None:
    reply = h(
        "00000000 00000000 00000004",  # NFS4_OK, empty tag, 4 results
        "00000016 00000000",  # PUTFH OK
        "00000012 00000000",  # OPEN OK
        "00000001 0200000020f1026b01000000",  # stateid
        "00000001 0000000000000001 0000000000000002",  # change_info4
        "00000004",  # rflags LOCKTYPE_POSIX
        "00000000",  # attrset: empty bitmap
        "00000003 00000001 00000001",  # OPEN_DELEGATE_NONE_EXT, WND4_CONTENTION, push TRUE
        "0000000a 00000000 00000002 abcd0000",  # GETFH OK, 2-byte handle
        "00000019 00000000",  # READ OK
        "00000001",  # eof TRUE
        "00001000",  # data<> length 4096 (not captured)
    )
    assert parse(OPEN40_CALL, reply)[1] == {
        "op": "OPEN",
        "ops": "PUTFH OPEN GETFH READ",
        "op_status": "0 0 0 0",
        "nfs_status": 0,
        "fh": "abcd",
        "count": 4096,
        "eof": 1,
        "nfs_decode": DECODE_OK,
    }


def test_lock_denied_and_setattr_bodies() -> None:
    reply = h(
        "0000271a 00000000 00000002",  # NFS4ERR_DENIED, empty tag, 2 results
        "00000022 00000000 00000000",  # SETATTR OK, attrsset: empty bitmap
        "0000000c 0000271a",  # LOCK NFS4ERR_DENIED: LOCK4denied follows
        "0000000000000000 ffffffffffffffff 00000002",  # offset, length, WRITE_LT
        "0000000000000001 00000002 6f770000",  # owner: clientid, "ow"
    )
    out = parse(OPEN40_CALL, reply)[1]
    assert out is not None
    assert (out["ops"], out["op_status"], out["nfs_decode"]) == ("SETATTR LOCK", "0 10010", "ok")


def test_exchange_id_ssv_is_partial() -> None:
    call = h(
        "00000000 00000001 00000001",  # empty tag, minorversion 1, 1 operation
        "0000002a",  # EXCHANGE_ID (42)
        "0102030405060708 00000002 6964 0000",  # client_owner4: verifier, ownerid "id"
        "00000001",  # flags
        "00000002",  # state_protect4_a: SP4_SSV (not stepped over)
    )
    out = parse(call)[0]
    assert (out["ops"], out["nfs_decode"]) == ("EXCHANGE_ID", DECODE_PARTIAL)


def test_callback_compound() -> None:
    call = h(
        "00000000",  # tag: empty
        "00000001",  # minorversion 1
        "00000001",  # callback_ident
        "00000002",  # argarray: 2 operations
        "0000000b",  # CB_SEQUENCE (11)
        SESSION,  # csa_sessionid
        "00000003 00000000 00000000",  # sequenceid 3, slotid 0, highest_slotid 0
        "00000000",  # cachethis FALSE
        "00000001",  # referring_call_lists: 1 list
        SESSION + "00000001 00000005 00000002",  # sessionid; 1 call: sequenceid 5, slot 2
        "00000004",  # CB_RECALL (4)
        "00000001 0200000020f1026b01000000",  # stateid
        "00000000",  # truncate FALSE
        "00000002 abcd0000",  # fh
    )
    reply = h(
        "00000000 00000000 00000002",  # NFS4_OK, empty tag, 2 results
        "0000000b 00000000",  # CB_SEQUENCE OK
        SESSION + "00000003 00000000 00000000 00000000",  # seqid, slot, highest, target
        "00000004 00000000",  # CB_RECALL OK
    )
    ours, out = parse(call, reply, prog=CB_PROG, vers=1)
    assert ours == {
        "op": "CB_RECALL",
        "ops": "CB_SEQUENCE CB_RECALL",
        "fh": "abcd",
        "session": SESSION,
        "slot": 0,
        "seqid": 3,
        "minor": 1,
        "nfs_decode": DECODE_OK,
    }
    assert out is not None
    assert (out["ops"], out["op_status"], out["slot"], out["seqid"]) == (
        "CB_SEQUENCE CB_RECALL",
        "0 0",
        0,
        3,
    )
    cb_null = {"op": "CB_NULL", "nfs_decode": DECODE_OK}
    assert parse(b"", b"", proc=0, prog=CB_PROG, vers=1) == (cb_null, cb_null)


def test_null_and_short_messages() -> None:
    null = {"op": "NULL", "nfs_decode": DECODE_OK}
    assert parse(b"", b"", proc=0) == (null, null)
    assert parse(b"\0\0")[0] == {
        "op": "COMPOUND",
        "nfs_decode": DECODE_TRUNCATED,
    }
    empty = h("00000000 00000000 00000000")  # empty tag, minorversion 0, no operations
    assert parse(empty)[0] == {
        "op": "COMPOUND",
        "minor": 0,
        "nfs_decode": DECODE_OK,
    }


def test_tables() -> None:
    assert nfs4_protocol.OPERATIONS[38] == "WRITE" and nfs4_protocol.OPERATIONS[53] == "SEQUENCE"
    assert (
        nfs4_protocol.OPERATIONS[75] == "REMOVEXATTR"
        and nfs4_protocol.OPERATIONS[10044] == "ILLEGAL"
    )
    assert set(nfs4_protocol.OPERATIONS) == {*range(3, 76), 10044}
    assert set(nfs4_protocol.CB_OPERATIONS) == {*range(3, 16), 10044}
    assert nfs4_protocol.CB_OPERATIONS[11] == "CB_SEQUENCE"
    assert (
        nfs4_protocol.STATUS_NAMES[10008] == "NFS4ERR_DELAY"
        and nfs4_protocol.STATUS_NAMES[0] == "NFS4_OK"
    )
    # every operation can be stepped over in both directions
    assert set(nfs4_steps.ARGS) == set(nfs4_protocol.OPERATIONS) == set(nfs4_steps.RESULTS)
    assert set(nfs4_steps.CB_ARGS) == set(nfs4_protocol.CB_OPERATIONS) == set(nfs4_steps.CB_RESULTS)


def test_main_op() -> None:
    seq, putfh, getattr_, write = 53, 22, 9, 38
    assert nfs4_protocol.main_op([seq, putfh, write, getattr_]) == write
    assert nfs4_protocol.main_op([seq, putfh, getattr_]) == getattr_
    assert nfs4_protocol.main_op([seq]) == seq
    assert nfs4_protocol.main_op([]) is None


# --- differential against tshark ---

V41 = SAMPLES / "v41-tcp-nfsrs-w1m-d0-l0.pcap"
V41_S256 = SAMPLES / "v41-tcp-nfsrs-w1m-d0-l0.s256.pcap"
NAMES = [
    "frame.number",
    "rpc.xid",
    "rpc.msgtyp",
    "rpc.procedure",
    "nfs.opcode",
    "nfs.status",
    "nfs.main_opcode",
    "nfs.minorversion",
    "nfs.write.data_length",
    "nfs.count4",
    "nfs.stable_how4",
    "nfs.verifier4",
    "nfs.session_id4",
    "nfs.slotid",
    "nfs.seqid",
    "nfs.fhandle",
]


@cache
def _messages(path: str) -> dict[tuple[int, str], tuple[dict, dict]]:
    """(xid, msgtype) -> (the Rust parser's decode, tshark's fields) for each
    RPC message."""
    rows = native.parse([path])[0]
    ours = {(int(r.xid), str(r.msgtype)): row_fields(r) for _, r in rows.iterrows()}
    assert len(ours) == len(rows), "one message per xid and direction in these captures"
    out = {}
    for row in tshark_ref.fields(path, NAMES, "rpc.xid"):
        ref = dict(zip(NAMES, row, strict=True))
        assert "," not in ref["rpc.xid"], "one RPC message per frame in these captures"
        key = (int(ref["rpc.xid"], 16), "call" if ref["rpc.msgtyp"] == "0" else "reply")
        out[key] = (ours[key], ref)
    assert out.keys() == ours.keys()
    return out


def _ints(text: str, base: int = 10) -> list[int]:
    return [int(v, base) for v in text.split(",")] if text else []


def test_matches_tshark() -> None:
    messages = _messages(str(V41))
    assert len(messages) == 40
    seen_ops = set()
    for (xid, kind), (ours, ref) in messages.items():
        where = f"frame {ref['frame.number']} xid {xid:#x} {kind}"
        opcodes = _ints(ref["nfs.opcode"])
        assert ours["ops"] == " ".join(nfs4_protocol.OPERATIONS[n] for n in opcodes), where
        assert ours["op"] == nfs4_protocol.OPERATIONS[int(ref["nfs.main_opcode"])], where
        assert ours["nfs_decode"] == DECODE_OK, where
        seen_ops.update(ours["ops"].split())
        first_sequence = opcodes[0] == nfs4_protocol.OP_SEQUENCE
        if first_sequence:
            assert ours["slot"] == _ints(ref["nfs.slotid"])[0], where
            assert ours["seqid"] == _ints(ref["nfs.seqid"], 16)[0], where
            assert ours["session"] == ref["nfs.session_id4"].split(",")[0], where
        if kind == "call":
            assert ours["minor"] == int(ref["nfs.minorversion"]), where
            if nfs4_protocol.OP_PUTFH in opcodes:
                assert ours["fh"] == ref["nfs.fhandle"].split(",")[-1], where
            if nfs4_protocol.OP_WRITE in opcodes:
                assert ours["count"] == sum(_ints(ref["nfs.write.data_length"])), where
                assert ours["stable"] == int(ref["nfs.stable_how4"]), where
        else:
            statuses = _ints(ref["nfs.status"])  # the COMPOUND status, then one per op
            assert ours["nfs_status"] == statuses[0], where
            assert ours["op_status"] == " ".join(map(str, statuses[1:])), where
            if nfs4_protocol.OP_GETFH in opcodes:
                assert ours["fh"] in ref["nfs.fhandle"].split(","), where
            if nfs4_protocol.OP_WRITE in opcodes:
                assert ours["count"] == _ints(ref["nfs.count4"])[0], where
                assert ours["committed"] == int(ref["nfs.stable_how4"]), where
                call = messages[(xid, "call")][0]
                assert ours["count"] == call["count"], where  # all bytes sent were written
            if {nfs4_protocol.OP_WRITE, nfs4_protocol.OP_COMMIT} & set(opcodes):
                assert "0x" + ours["verifier"] == ref["nfs.verifier4"], where
    # the capture exercises the session, open/create and write paths
    assert {"EXCHANGE_ID", "CREATE_SESSION", "SEQUENCE", "OPEN", "WRITE", "COMMIT"} <= seen_ops


def test_snaplen_twin_is_a_prefix_of_the_full_decode() -> None:
    """With -s 256 every message decodes to what the full capture gives, or is
    marked truncated with the fields it did decode equal to the full ones."""
    full = _messages(str(V41))
    cut = _messages(str(V41_S256))
    assert cut.keys() == full.keys()
    outcomes = set()
    for key, (ours, _ref) in cut.items():
        whole = full[key][0]
        outcomes.add(ours["nfs_decode"])
        if ours["nfs_decode"] == DECODE_OK:
            assert ours == whole, key
            continue
        assert ours["nfs_decode"] == DECODE_TRUNCATED, key
        assert whole["ops"].startswith(ours.get("ops", "")), key
        for name, value in ours.items():
            if name not in ("nfs_decode", "op", "ops", "op_status"):
                assert whole[name] == value, (key, name)
    assert outcomes == {DECODE_OK, DECODE_TRUNCATED}
    # the 1 MB WRITE call: 256 bytes reach its offset, not its stable_how
    write_call = cut[(0x037E1299, "call")][0]
    assert (write_call["ops"], write_call["offset"]) == ("SEQUENCE PUTFH WRITE", 0)
    assert "stable" not in write_call and write_call["nfs_decode"] == DECODE_TRUNCATED


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "-q"])
