"""analysis.fragments on the lab's small-MTU UDP run (client and server side)
against tshark's fragment count and the lab's drop log."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import tshark_ref
from conftest import SAMPLES, load_sample

from nfstrace.analysis.fragments import DIRECTION_COLUMNS, _by_rpc, analyze_fragments
from nfstrace.jsonable import jsonable

MTU1000 = SAMPLES / "v3-udp-py-w32k-mtu1000-d2-l0.5.pcap"
MTU1000_SERVER = SAMPLES / "v3-udp-py-w32k-mtu1000-d2-l0.5.server-side.pcap"
FRAGMENT_FILTER = "ip.flags.mf==1 or ip.frag_offset>0"


def fragments(path: Path):
    t = load_sample(path)
    return analyze_fragments(t.messages, t.stats, t.events)


def kinds(result) -> set[str]:
    return {f.kind for f in result.findings()}


@pytest.mark.parametrize("capture", [MTU1000, MTU1000_SERVER], ids=lambda p: p.name)
def test_fragment_count_equals_tshark(capture: Path) -> None:
    r = fragments(capture)
    theirs = tshark_ref.fields(str(capture), ["frame.number"], FRAGMENT_FILTER)
    assert r.fragments == len(theirs) > 0
    assert r.directions["ip_fragments"].sum() == r.fragments
    assert list(r.directions.columns) == list(DIRECTION_COLUMNS)
    # a 32 KiB WRITE at MTU 1000: 34 fragments, every one; the MTU in use shows
    assert r.max_frags_per_message == 34
    assert r.mtu <= 1000
    gt = json.loads(SAMPLES.joinpath("v3-udp-py-w32k-mtu1000-d2-l0.5.json").read_text())
    writes = r.by_rpc[(r.by_rpc.msgtype == "call") & (r.by_rpc.op == "WRITE")].iloc[0]
    assert writes.fragmented == writes.messages >= gt["client"]["expected_write_rpcs"]
    # the calls of datagrams that lost a later fragment are kept, in fewer fragments
    partial = int((r.incomplete.xid >= 0).sum()) if len(r.incomplete) else 0
    assert jsonable(r)["distribution"][34]["calls"] == writes.fragmented - partial


def test_incomplete_datagrams_are_the_dropped_ones() -> None:
    """Server side: each datagram the bridge dropped a fragment of is incomplete,
    and no other; the client side (before the drop point) has every fragment."""
    drops = [json.loads(x) for x in MTU1000.with_suffix(".drops.jsonl").read_text().splitlines()]
    dropped = sorted(d["ip_id"] for d in drops if d["dir"] == "c2s" and d["proto"] == 17)
    server = fragments(MTU1000_SERVER)
    assert sorted(server.incomplete.ip_id) == dropped and len(dropped) >= 1
    assert server.datagrams_incomplete == len(dropped)
    assert "ip_fragments_lost" in kinds(server)
    # the network lost them: none was answered (the server never had it whole)
    assert "answered" not in set(server.incomplete.fate)
    assert server.datagrams_lost == len(dropped) and server.datagrams_not_captured == 0
    assert "ip_fragments_not_captured" not in kinds(server)
    client = fragments(MTU1000)
    assert client.datagrams_incomplete == 0 and client.incomplete.empty
    assert "ip_fragments_lost" not in kinds(client) and "ip_fragmentation" in kinds(client)


def test_unfragmented_capture() -> None:
    r = fragments(SAMPLES / "v3-tcp-nfscp-w1m-d0-l0.pcap")
    assert (r.fragments, r.fragmented_messages, r.datagrams_incomplete) == (0, 0, 0)
    assert r.mtu == 1500 and r.findings() == []
    assert not r.by_rpc.fragmented.any()


def test_by_rpc_groups_in_key_order() -> None:
    messages = pd.DataFrame(
        {
            "transport": pd.Categorical(["udp", "tcp", "udp", "udp", None, "udp"]),
            "msgtype": pd.Categorical(["reply", "call", "call", "call", "call", "call"]),
            "op": pd.array(["READ", "WRITE", "WRITE", None, "WRITE", "WRITE"], dtype="string"),
            "ip_frags": [3, 5, 1, 2, 9, 4],
        }
    )
    t = _by_rpc(messages)  # the message without transport is left out, as groupby does
    assert t.fillna({"frags_mean": -1.0}).values.tolist() == [
        ["tcp", "call", "WRITE", 1, 0, -1.0, 0],  # TCP packets are not fragments
        ["udp", "call", "", 1, 1, 2.0, 2],
        ["udp", "call", "WRITE", 2, 1, 4.0, 4],
        ["udp", "reply", "READ", 1, 1, 3.0, 3],
    ]
