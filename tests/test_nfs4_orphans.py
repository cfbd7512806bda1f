"""NFSv4 replies whose call was not captured (issue 16, item 6): a COMPOUND
reply names its operations, so on a flow whose calls are NFSv4 it is decoded
without its call; its WRITE bytes are counted and the analysis says so.
Captures: tests/crafted/make_nfs4_orphans.py."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pandas as pd
import pytest
import tshark_ref

import nfstrace
from nfstrace.analysis.writes import analyze_writes
from nfstrace.jsonable import jsonable
from nfstrace.parsers import native
from nfstrace.protocol import nfs4 as nfs4_protocol

try:
    from crafted import make_causes as mcs
    from crafted import make_nfs4_orphans as mo
except ImportError:  # tests/ not on sys.path: import as a package
    from tests.crafted import make_causes as mcs
    from tests.crafted import make_nfs4_orphans as mo

V40_ORPHANS = {mo.XID40 + i for i in mo.MISSED}
V41_ORPHANS = {mo.XID41 + i for i in mo.MISSED41}


@pytest.fixture(scope="module")
def captures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("nfs4_orphans")
    paths = mo.build_all(out)
    paths["nfs40_twin"] = mo.nfs40_capture(missed=()).write(out / "nfs40_twin.pcap")
    paths["nfs41_twin"] = mo.nfs41_capture(missed=()).write(out / "nfs41_twin.pcap")
    return paths


@cache
def _messages(path: Path) -> pd.DataFrame:
    return native.parse([str(path)])[0]


def _replies(path: Path) -> pd.DataFrame:
    m = _messages(path)
    return m[m["msgtype"].eq("reply")].set_index("xid")


def test_v40_write_replies_decoded_without_their_call(captures: dict[str, Path]) -> None:
    m = _messages(captures["nfs40_orphans_s256"])
    assert set(V40_ORPHANS).isdisjoint(m.loc[m["msgtype"].eq("call"), "xid"])
    r = _replies(captures["nfs40_orphans_s256"])
    assert len(r) == mo.WRITES + 1
    for xid in sorted(V40_ORPHANS):
        row = r.loc[xid]
        granted = mo.FILE_SYNC if xid - mo.XID40 == mo.FILE_SYNC_WRITE else mo.UNSTABLE
        assert (row["prog"], row["vers"], row["proc"]) == (100003, 4, 1), hex(xid)
        assert (row["op"], row["ops"], row["op_status"]) == (
            "WRITE",
            "PUTFH WRITE GETATTR",
            "0 0 0",
        ), hex(xid)
        assert (row["nfs_status"], row["count"], row["committed"]) == (0, mo.COUNT, granted)
        assert row["verifier"] == mo.VERF.hex()
        assert row["nfs_decode"] == "ok"
    assert (r["committed"] == mo.FILE_SYNC).sum() == 1  # the orphan FILE_SYNC WRITE's


def test_v41_sequence_first_is_the_same_walk(captures: dict[str, Path]) -> None:
    r = _replies(captures["nfs41_orphans_s256"])
    for xid in sorted(V41_ORPHANS):
        row = r.loc[xid]
        seqid = xid - mo.XID41 + 1
        assert (row["vers"], row["op"], row["ops"]) == (4, "WRITE", "SEQUENCE PUTFH WRITE")
        assert (row["count"], row["committed"], row["nfs_decode"]) == (mo.COUNT, 0, "ok")
        assert (row["session"], row["seqid"], row["slot"]) == (mo.SESSION.hex(), seqid, 0)


def test_replies_that_do_not_read_as_compound_stay_undecoded(captures: dict[str, Path]) -> None:
    r = _replies(captures["nfs4_orphan_edges"])
    for xid in (mo.EDGE_FIRST, mo.EDGE_NULL, mo.EDGE_UNKNOWN, mo.EDGE_V3_OTHER):
        assert (r.loc[xid, "prog"], r.loc[xid, "op"], r.loc[xid, "ops"]) == (-1, "?", ""), xid
        assert r.loc[xid, "nfs_decode"] == ""
    # an NFSv3 reply without call of exactly WRITE3resok's shape is a WRITE's
    v3 = r.loc[mo.EDGE_V3]
    assert (v3["prog"], v3["vers"], v3["proc"], v3["op"]) == (100003, 3, 7, "WRITE")
    assert (v3["nfs_status"], v3["count"], v3["committed"], v3["nfs_decode"]) == (0, 64, 2, "ok")
    assert r.loc[mo.EDGE_CALL, "op"] == "COMMIT"  # answered: decoded with its call
    # a walk stopped early keeps what it read
    assert r.loc[mo.EDGE_PARTIAL, ["op", "ops", "nfs_decode"]].tolist() == [
        "op9999",
        "PUTFH op9999",
        "partial",
    ]
    assert r.loc[mo.EDGE_CUT, ["op", "ops", "count", "nfs_decode"]].tolist() == [
        "WRITE",
        "PUTFH WRITE",
        -1,
        "truncated",
    ]


NAMES = ["rpc.xid", "rpc.msgtyp", "nfs.opcode", "nfs.status", "nfs.count4", "nfs.stable_how4"]
NAMES += ["nfs.verifier4", "nfs.seqid", "nfs.slotid"]


@pytest.mark.parametrize("version", ["nfs40", "nfs41"])
def test_same_decode_as_tshark_on_the_twin(captures: dict[str, Path], version: str) -> None:
    """tshark does not decode a reply whose call it did not see ("Continuation"):
    it decodes the same reply bytes in the twin capture whose calls were all
    captured; our decode of the orphan replies must be its."""
    orphans = V40_ORPHANS if version == "nfs40" else V41_ORPHANS
    ours = _replies(captures[f"{version}_orphans_s256"])
    twin = str(captures[f"{version}_twin"])
    seen = set()
    for row in tshark_ref.fields(twin, NAMES, "rpc.msgtyp == 1"):
        ref = dict(zip(NAMES, row, strict=True))
        xid = int(ref["rpc.xid"], 16)
        if xid not in orphans:
            continue
        seen.add(xid)
        got = ours.loc[xid]
        opcodes = [int(v) for v in ref["nfs.opcode"].split(",")]
        statuses = [int(v) for v in ref["nfs.status"].split(",")]
        assert got["ops"] == " ".join(nfs4_protocol.OPERATIONS[n] for n in opcodes), hex(xid)
        assert [got["nfs_status"], *map(int, got["op_status"].split())] == statuses
        assert got["count"] == int(ref["nfs.count4"]), hex(xid)
        assert got["committed"] == int(ref["nfs.stable_how4"]), hex(xid)
        assert "0x" + got["verifier"] == ref["nfs.verifier4"], hex(xid)
        if version == "nfs41":
            assert got["seqid"] == int(ref["nfs.seqid"].split(",")[0], 16)
            assert got["slot"] == int(ref["nfs.slotid"].split(",")[0])
    assert seen == orphans


def test_bytes_counted_from_the_replies_and_said(captures: dict[str, Path]) -> None:
    t = nfstrace.load(captures["nfs40_orphans_s256"])
    tx = t.transactions
    writes = tx[tx["op"].eq("WRITE")]
    assert len(writes) == mo.WRITES and (writes["write_bytes"] == mo.COUNT).all()
    orphans = writes[writes["n_calls"].eq(0)]
    assert set(orphans["xid"]) == V40_ORPHANS
    assert (orphans["vers"] == 4).all() and (orphans["ops"] == "PUTFH WRITE GETATTR").all()
    w = analyze_writes(tx)
    assert w.writes == mo.WRITES - len(mo.MISSED)  # WRITE calls captured
    assert w.bytes_written == mo.WRITES * mo.COUNT
    assert (w.replies_without_call, w.bytes_without_call) == (11, 11 * mo.COUNT)
    assert w.committed_granted == {"UNSTABLE": 15, "FILE_SYNC": 1}
    assert jsonable(w)["bytes_without_call"] == 11 * mo.COUNT
    said = "11 WRITE calls not captured: 2.8 MiB written counted from their replies"
    d = t.diagnosis
    assert said in [f.title for f in d.notes + d.findings]
    assert "(11 WRITEs, 2.8 MiB written: counted from their replies)" in d.verdict.text


def test_v41_bytes_counted(captures: dict[str, Path]) -> None:
    w = analyze_writes(nfstrace.load(captures["nfs41_orphans_s256"]).transactions)
    assert w.bytes_written == mo.WRITES41 * mo.COUNT
    assert (w.replies_without_call, w.bytes_without_call) == (3, 3 * mo.COUNT)
    assert w.findings()[0].title == (
        "3 WRITE calls not captured: 768 KiB written counted from their replies"
    )


def test_nfsv3_write_replies_without_call_counted(tmp_path: Path) -> None:
    """NFSv3 results do not name their procedure, but a whole WRITE3resok has a
    shape no other result has: the -s 256 NFSv3 capture's replies without call
    (on a flow of NFSv3 calls) are its WRITEs, decoded and counted."""
    path = mcs.build_missed_calls_s256(tmp_path)["missed_calls_s256"]
    tx = nfstrace.load(path).transactions
    orphans = tx[tx["n_calls"].eq(0)]
    assert len(orphans) == len(mcs.MISSED)
    assert (orphans["op"] == "WRITE").all() and (orphans["write_bytes"] == mcs.MISSED_COUNT).all()
    assert (orphans["inferred"] == "").all()  # decoded, not inferred
    w = analyze_writes(tx)
    assert (w.replies_without_call, w.bytes_without_call) == (11, 11 * mcs.MISSED_COUNT)
    assert w.bytes_written == mcs.MISSED_WRITES * mcs.MISSED_COUNT
