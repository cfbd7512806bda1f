"""analysis.repeats: RPC retransmissions (with back-off), duplicate replies,
TCP repeats and mirror duplicates, told apart; against the UDP client's own
log of every send and the lab's drop log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tshark_ref
from conftest import SAMPLES, ground_truth, load_sample

from nfstrace.analysis.repeats import RETRANSMISSION_COLUMNS, analyze_repeats
from nfstrace.jsonable import jsonable

try:
    from crafted import make_frames as mf
except ImportError:  # tests/ not on sys.path: import as a package
    from tests.crafted import make_frames as mf

MS = 1_000_000
LOSSY_TCP = SAMPLES / "v3-tcp-nfscp-w64k-d2-l0.5.pcap"
LOSSY_UDP = SAMPLES / "v3-udp-py-w32k-mtu1000-d2-l0.5.pcap"


@pytest.fixture(scope="module")
def frames(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return mf.build_all(tmp_path_factory.mktemp("frames"))


def repeats(path: Path):
    t = load_sample(path)
    return analyze_repeats(t.transactions, t.events, t.stats)


def kinds(result) -> set[str]:
    return {f.kind for f in result.findings()}


def test_backoff_and_time_lost(frames) -> None:
    r = repeats(frames["udp_backoff"])
    assert list(r.retransmissions.columns) == list(RETRANSMISSION_COLUMNS)
    stuck = r.retransmissions.set_index("xid").loc[mf.BACKOFF_XID]
    assert stuck["intervals_ms"] == (370.0, 379.0, 1780.0)
    assert stuck["backoff"] == (round(379 / 370, 3), round(1780 / 379, 3))
    assert stuck["latency_ns"] == mf.BACKOFF_REPLY_US * 1000
    assert stuck["latency_last_ns"] == (mf.BACKOFF_REPLY_US - mf.BACKOFF_SENDS_US[-1]) * 1000
    assert stuck["reply_after_resend"]
    assert stuck["expected_latency_ns"] == mf.OK_WRITE_LATENCY_US * 1000
    assert stuck["time_lost_ns"] == (mf.BACKOFF_REPLY_US - mf.OK_WRITE_LATENCY_US) * 1000
    assert (r.retransmitted_calls, r.resends) == (2, 4)
    assert (r.duplicate_replies, r.calls_with_duplicate_replies) == (1, 1)
    lost = next(f for f in r.findings() if f.kind == "rpc_retransmission")
    assert lost.time_lost_ns == r.time_lost_ns == int(r.retransmissions.time_lost_ns.sum())
    assert "370 ms, 379 ms, 1780 ms" in lost.title
    assert {"rpc_retransmission", "duplicate_reply"} <= kinds(r)
    assert jsonable(r)["resends"] == 4


def test_resent_on_a_new_connection(frames) -> None:
    r = repeats(frames["new_connection"])
    (row,) = r.retransmissions.itertuples()
    assert (row.xid, row.call_conns, row.n_calls) == (mf.NEW_CONN_XID, 2, 2)
    assert row.intervals_ms == (1500.0,)
    assert r.resent_on_new_connection == 1 and r.tcp_retransmitted_segments == 0


def test_tcp_repeat_is_not_an_rpc_retransmission(frames) -> None:
    r = repeats(frames["tcp_retransmission"])
    assert r.retransmitted_calls == 0 and r.retransmissions.empty
    assert (r.tcp_retransmitted_segments, r.tcp_retransmitted_bytes) == (1, mf.MSS)
    assert kinds(r) == {"tcp_retransmission"}


def test_mirror_duplicates_are_not_repeats(frames) -> None:
    r = repeats(frames["mirror"])
    plain = repeats(frames["plain"])
    assert r.mirror_duplicates == load_sample(frames["plain"]).stats.frames
    assert (r.retransmitted_calls, r.tcp_retransmitted_segments, r.duplicate_replies) == (0, 0, 0)
    assert kinds(r) == {"mirror_duplicates"} and kinds(plain) == set()


def test_lossy_tcp_dropped_segments_resent_by_tcp_not_rpc() -> None:
    r = repeats(LOSSY_TCP)
    drops = [json.loads(x) for x in LOSSY_TCP.with_suffix(".drops.jsonl").read_text().splitlines()]
    data_drops = [d for d in drops if d["dir"] == "c2s" and d["payload"]]
    assert r.retransmitted_calls == 0  # the client's TCP re-sent the bytes
    assert r.tcp_retransmitted_segments == len(data_drops) == 4
    assert r.tcp_retransmitted_bytes == sum(d["payload"] for d in data_drops)


def _client_log(capture: Path) -> list[dict]:
    log = capture.with_name(capture.name.replace(".pcap", ".client-rpclog.jsonl"))
    return [json.loads(x) for x in log.read_text().splitlines()]


UDP_CLIENT_SIDE = sorted(p for p in SAMPLES.glob("v3-udp-*.pcap") if ".server-side" not in p.name)


@pytest.mark.parametrize("capture", UDP_CLIENT_SIDE, ids=lambda p: p.name)
def test_udp_retransmissions_equal_the_client_log(capture: Path) -> None:
    """Client side: every re-send the client logged, and no other."""
    r = repeats(capture)
    sent = _client_log(capture)
    expected = {s["xid"]: len(s["sends"]) for s in sent if len(s["sends"]) > 1}
    found = dict(zip(r.retransmissions.xid, r.retransmissions.n_calls, strict=True))
    assert found == expected
    assert r.resends == sum(s["retransmissions"] for s in sent)
    gt = json.loads(capture.with_name(capture.name.replace(".pcap", ".json")).read_text())
    assert r.resends == gt["client"].get("retransmissions", 0)


def _loss_free(capture: Path) -> bool:
    truth = ground_truth(capture)
    return truth["clean"] and not truth["impairment"]["loss_percent_each_direction"]


LOSS_FREE = [p for p in SAMPLES.glob("*.pcap") if _loss_free(p)]


@pytest.mark.parametrize("capture", sorted(LOSS_FREE), ids=lambda p: p.name)
def test_loss_free_captures_have_no_rpc_retransmission(capture: Path) -> None:
    r = repeats(capture)
    assert r.retransmitted_calls == 0 and r.resends == 0 and r.retransmissions.empty
    assert r.tcp_retransmitted_segments == 0 and r.duplicate_replies == 0
    assert not {"rpc_retransmission", "tcp_retransmission", "duplicate_reply"} & kinds(r)


def test_loss_free_samples_are_many() -> None:
    # every transport, version and delay of the lab's loss-free runs, client and server side
    assert len(LOSS_FREE) >= 10


def test_every_call_whose_fragment_was_dropped_is_a_retransmission() -> None:
    """The server-side capture of the lossy UDP run: the calls whose fragments
    the bridge dropped (named from the client-side capture by IP id) were all
    re-sent, and the client side sees each of them as a retransmission."""
    drops = [json.loads(x) for x in LOSSY_UDP.with_suffix(".drops.jsonl").read_text().splitlines()]
    dropped_ids = {d["ip_id"] for d in drops if d["dir"] == "c2s"}
    id_to_xid = {
        int(ip_id, 16): int(xid, 16)
        for ip_id, xid in tshark_ref.fields(str(LOSSY_UDP), ["ip.id", "rpc.xid"], "rpc.msgtyp==0")
    }
    dropped_xids = {id_to_xid[i] for i in dropped_ids}
    assert len(dropped_xids) == len(dropped_ids) >= 1
    client = repeats(LOSSY_UDP).retransmissions
    assert dropped_xids <= set(client.xid)
    # on the server side a lost first send shows only if its first fragment (with
    # the RPC header) arrived: the call is kept cut short, and then it is re-sent
    # there too; a first send whose first fragment was dropped is not seen there
    server_side = LOSSY_UDP.with_name(LOSSY_UDP.name.replace(".pcap", ".server-side.pcap"))
    t = load_sample(server_side)
    cut = t.messages[(t.messages.msgtype == "call") & t.messages.truncated]
    assert set(cut.xid) <= dropped_xids
    assert set(repeats(server_side).retransmissions.xid) == set(cut.xid)


def test_a_call_re_sent_100_000_times_is_one_line() -> None:
    """One xid re-sent 100,000 times (issue 20, item 7): the finding names the
    first intervals and how many more, its details keep a bounded list; the
    table keeps them all."""
    import pandas as pd

    try:
        from crafted import make_writes as mw
    except ImportError:  # tests/ not on sys.path: import as a package
        from tests.crafted import make_writes as mw
    from nfstrace.analysis.findings import MAX_DETAIL_ITEMS, MAX_LISTED, listed
    from nfstrace.parsers.stats import ParseStats

    sends = tuple(range(0, 100_001 * 1_000_000, 1_000_000))
    tx = mw.transactions_table(
        [{"op": "GETATTR", "t_call_ns": 0, "t_reply_ns": sends[-1] + 500_000,
          "n_calls": len(sends), "call_times_ns": sends}]
    )  # fmt: skip
    r = analyze_repeats(tx, pd.DataFrame(columns=["kind"]), ParseStats())
    assert len(r.retransmissions["intervals_ms"].iloc[0]) == 100_000
    (f,) = [f for f in r.findings() if f.kind == "rpc_retransmission"]
    assert len(f.title) < 500 and "... and 99,990 more" in f.title
    assert len(f.details["worst_intervals_ms"]) == MAX_DETAIL_ITEMS
    assert f.details["worst_resends"] == 100_000
    assert listed(["a"] * MAX_LISTED) == ", ".join(["a"] * MAX_LISTED)
