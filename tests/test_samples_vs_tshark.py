"""The messages table against tshark and the lab's ground truth, on every
real sample capture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tshark_ref
from conftest import FULL_CAPTURES, S256_CAPTURES, ground_truth, load_sample

KEY = ["xid", "msgtype", "prog", "vers", "proc"]


def _ours(path: Path) -> set[tuple]:
    m = load_sample(path).messages
    return set(zip(m.frame_last, *(m[c].astype(object) for c in KEY), strict=True))


def test_samples_present() -> None:
    assert len(FULL_CAPTURES) >= 4 and len(S256_CAPTURES) >= 2


@pytest.mark.parametrize("capture", FULL_CAPTURES, ids=lambda p: p.name)
def test_every_rpc_message_matches_tshark(capture: Path) -> None:
    """Same messages, each in the frame where tshark completes its reassembly,
    with the same xid, type and program/version/procedure (replies named from
    their calls, as tshark's two-pass mode does).

    Deliberate difference: the call of a UDP datagram that lost a fragment
    after its first is ours only (kept cut short from its first fragment;
    tshark cannot reassemble the datagram)."""
    theirs = set(tshark_ref.rpc_messages(str(capture)).itertuples(index=False, name=None))
    ours = _ours(capture)
    assert theirs, "tshark found no RPC: the comparison would be empty"
    m = load_sample(capture).messages
    cut = m[(m.transport == "udp") & (m.msgtype == "call") & m.truncated]
    partial = set(zip(cut.frame_last, *(cut[c].astype(object) for c in KEY), strict=True))
    assert len(partial) <= load_sample(capture).stats.ip_datagrams_incomplete
    assert ours - partial == theirs


@pytest.mark.parametrize("capture", FULL_CAPTURES, ids=lambda p: p.name)
def test_frames_match_ground_truth(capture: Path) -> None:
    gt = ground_truth(capture)
    (cap,) = [c for c in gt["captures"] if c["file"] == capture.name]
    t = load_sample(capture)
    assert t.stats.frames == cap["packets_captured"]
    # nothing cut but the calls of UDP datagrams that lost a later fragment
    cut = t.messages[t.messages.truncated]
    assert t.stats.truncated_messages == t.stats.incomplete_messages == len(cut)
    assert len(cut) <= t.stats.ip_datagrams_incomplete
    assert ((cut.transport == "udp") & (cut.msgtype == "call") & (cut.ip_frags > 1)).all()


@pytest.mark.parametrize("capture", S256_CAPTURES, ids=lambda p: p.name)
def test_snaplen_256_keeps_every_message(capture: Path) -> None:
    """With -s 256 every message of the full capture is still found, spanning
    the same frames with the same length: record lengths and TCP sequence
    numbers step over the bytes that were not captured.

    Deliberate difference from tshark: tshark cannot reassemble the cut
    WRITE calls and reports each in its first frame; we report the frame
    where the message really ends (as in the full capture)."""
    full = load_sample(str(capture).replace(".s256", "")).messages
    cut = load_sample(capture).messages
    cols = ["frame_first", "frame_last", *KEY, "rpc_len"]
    assert len(cut) == len(full)
    assert cut[cols].astype(object).values.tolist() == full[cols].astype(object).values.tolist()
    writes = cut[(cut.prog == 100003) & (cut.msgtype == "call") & (cut.rpc_len > 200)]
    assert len(writes) >= 1 and writes.truncated.all()
    assert (writes.body_offset > 0).all()  # the RPC header was decoded
    assert (cut.captured_len <= cut.rpc_len).all()
    # tshark on the same file attributes those cut calls to their first frame
    theirs = tshark_ref.rpc_messages(str(capture))
    moved = theirs[theirs.msgtype == "call"].merge(writes[["xid", "frame_first"]], on="xid")
    assert (moved.frame == moved.frame_first).all()


def test_s256_finds_every_write_call_of_the_ground_truth() -> None:
    for capture in S256_CAPTURES:
        gt = ground_truth(capture)
        m = load_sample(capture).messages
        calls = m[(m.prog == 100003) & (m.msgtype == "call")]
        if gt["nfs_version"] == "3":
            assert (calls.proc == 7).sum() == gt["client"]["expected_write_rpcs"]
        else:  # v4.x: COMPOUNDs; the WRITE count needs NFSv4 op decoding
            assert (calls.proc == 1).sum() >= gt["client"]["expected_write_rpcs"]


def test_udp_calls_match_client_log(samples: Path) -> None:
    """Every RPC the UDP client logged (with each re-send) is a call message,
    and every call got its reply."""
    for log in samples.glob("*.client-rpclog.jsonl"):
        capture = samples / log.name.replace(".client-rpclog.jsonl", ".pcap")
        sent = [json.loads(line) for line in log.read_text().splitlines()]
        m = load_sample(capture).messages
        calls = m[m.msgtype == "call"].groupby("xid").size()
        expected = {r["xid"]: len(r["sends"]) for r in sent}
        assert calls.to_dict() == expected
        replies = set(m[m.msgtype == "reply"].xid)
        assert replies == {r["xid"] for r in sent if r.get("reply_t")}
        assert (m.transport == "udp").all()


def test_udp_fragments_counted(samples: Path) -> None:
    t = load_sample(samples / "v3-udp-py-w32k-d0-l0.pcap")
    writes = t.messages[(t.messages.proc == 7) & (t.messages.msgtype == "call")]
    # a 32 KiB WRITE at MTU 1500 travels in 23 fragments
    assert (writes.ip_frags == 23).all()
    assert t.stats.ip_datagrams_reassembled == len(writes)
    assert t.stats.ip_fragments == 23 * len(writes)
    assert t.stats.ip_datagrams_incomplete == 0


def test_lossy_tcp_server_side_reorders(samples: Path) -> None:
    """The server-side capture of a lossy run has holes filled by later
    retransmissions: out-of-order segments are held, nothing is lost."""
    t = load_sample(samples / "v3-tcp-nfscp-w64k-d2-l0.5.server-side.pcap")
    gt = ground_truth(samples / "v3-tcp-nfscp-w64k-d2-l0.5.pcap")
    assert t.stats.tcp["out_of_order"] > 0
    assert t.stats.tcp["holes"] == 0
    assert t.stats.truncated_messages == 0
    writes = t.messages[(t.messages.proc == 7) & (t.messages.msgtype == "call")]
    assert len(writes) == gt["client"]["expected_write_rpcs"]
