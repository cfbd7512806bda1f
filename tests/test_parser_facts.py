"""Frame-level facts of the parser: mirror duplicates, handshake events,
per-direction IP facts, window stretches, TCP repeats; on crafted captures
(tests/crafted/make_frames.py) with exact expectations and on the lab's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tshark_ref
from conftest import FULL_CAPTURES, SAMPLES, load_sample

import nfstrace
from nfstrace.config import ParseLimits
from nfstrace.schema import EVENT_COLUMNS, EVENT_KINDS
from nfstrace.trace import AnalysisConfig

try:
    from crafted import make_frames as mf
except ImportError:  # tests/ not on sys.path: import as a package
    from tests.crafted import make_frames as mf

at = mf.at
LOSSY = SAMPLES / "v3-tcp-nfscp-w64k-d2-l0.5.pcap"


@pytest.fixture(scope="module")
def frames(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return mf.build_all(tmp_path_factory.mktemp("frames"))


def kinds(t: nfstrace.Trace, kind: str):
    return t.events[t.events.kind == kind]


# ---- mirror/SPAN duplicates ------------------------------------------------------------

TX_KEY = ["client", "server", "xid", "op", "n_calls", "n_replies", "t_call_ns", "t_reply_ns"]


def test_mirror_duplicates_are_skipped(frames) -> None:
    plain, mirror = load_sample(frames["plain"]), load_sample(frames["mirror"])
    n = plain.stats.frames
    assert plain.stats.duplicate_frames == 0 and len(kinds(plain, "frame_duplicate")) == 0
    assert mirror.stats.frames == 2 * n
    assert mirror.stats.duplicate_frames == n
    dups = kinds(mirror, "frame_duplicate")
    assert len(dups) == n
    # the copies, also the A B A' B' pair at the end (compared with two frames back)
    assert dups.frame.tolist() == [*range(2, 2 * n - 2, 2), 2 * n - 1, 2 * n]
    assert set(dups.conn) == {1, 2} and (dups[dups.conn == 2].seq == -1).all()
    # same transactions, nothing repeated at TCP or RPC level
    pt = plain.transactions[TX_KEY].astype(object).values.tolist()
    assert mirror.transactions[TX_KEY].astype(object).values.tolist() == pt
    assert mirror.stats.tcp["retransmitted"] == 0 and len(kinds(mirror, "tcp_retransmission")) == 0
    assert mirror.stats.udp_packets == plain.stats.udp_packets


def test_duplicate_window_zero_turns_the_check_off(frames) -> None:
    t = nfstrace.load(frames["mirror"], AnalysisConfig(limits=ParseLimits(duplicate_window_ns=0)))
    assert t.stats.duplicate_frames == 0
    assert t.stats.tcp["retransmitted"] > 0  # the copies now look like TCP repeats
    assert (t.transactions.n_calls > 1).any()  # and the UDP call like a re-send


# ---- handshake ---------------------------------------------------------------------------


def test_handshake_events(frames) -> None:
    t = load_sample(frames["plain"])
    hs = t.events[t.events.kind.isin(["tcp_syn", "tcp_syn_ack", "tcp_handshake_ack"])]
    got = list(zip(hs.kind, hs.ts_ns, hs.frame, hs.sport, hs.seq, strict=True))
    assert got == [
        ("tcp_syn", at(0), 1, 800, 1000),
        ("tcp_syn_ack", at(100), 2, 2049, 500_000),
        ("tcp_handshake_ack", at(200), 3, 800, 1001),
    ]
    assert (hs.duration_ns == 0).all()


def test_handshakes_on_the_lab_capture_match_tshark() -> None:
    t = load_sample(LOSSY)
    rows = tshark_ref.fields(str(LOSSY), ["frame.number", "tcp.flags"], "tcp.flags.syn==1")
    syn = [int(f) for f, flags in rows if int(flags, 16) & 0x12 == 0x02]
    syn_ack = [int(f) for f, flags in rows if int(flags, 16) & 0x12 == 0x12]
    assert kinds(t, "tcp_syn").frame.tolist() == syn and len(syn) == 4
    assert kinds(t, "tcp_syn_ack").frame.tolist() == syn_ack
    acks = kinds(t, "tcp_handshake_ack")
    assert len(acks) == 4 and (acks.frame.to_numpy() > kinds(t, "tcp_syn_ack").frame).all()


# ---- per-direction IP facts ---------------------------------------------------------------


def test_direction_facts_against_tshark() -> None:
    path = SAMPLES / "v3-udp-py-w32k-mtu1000-d2-l0.5.pcap"
    t = load_sample(path)
    rows = tshark_ref.fields(str(path), ["ip.src", "ip.len", "ip.ttl"], "ip")
    for d in t.stats.directions:
        mine = [(int(n), int(ttl)) for s, n, ttl in rows if s == d.src]
        assert d.packets == len(mine)
        assert d.ip_bytes == sum(n for n, _ in mine)
        assert d.max_ip_len == max(n for n, _ in mine)
        assert (d.ttl_min, d.ttl_max) == (64, 64)
    up = next(d for d in t.stats.directions if d.src == "169.254.77.1")
    assert up.max_ip_len <= 1000 and up.ip_fragments == t.stats.ip_fragments


def test_direction_ttl(frames) -> None:
    t = load_sample(frames["point_server"])
    ttl = {(d.src, d.dst): (d.ttl_min, d.ttl_max) for d in t.stats.directions}
    assert ttl == {(mf.CLIENT, mf.SERVER): (63, 63), (mf.SERVER, mf.CLIENT): (64, 64)}


# ---- windows -------------------------------------------------------------------------------


def test_zero_window_is_one_stretch(frames) -> None:
    t = load_sample(frames["zero_window"])
    zw = kinds(t, "tcp_zero_window")
    start, end = mf.ZERO_WINDOW_US
    assert zw[["ts_ns", "duration_ns", "src"]].values.tolist() == [
        [at(start), at(end) - at(start), mf.SERVER]
    ]


def test_window_full_stretches(frames) -> None:
    t = load_sample(frames["window_full"])
    wf = kinds(t, "tcp_window_full")
    assert [(s, s + d) for s, d in zip(wf.ts_ns, wf.duration_ns, strict=True)] == [
        (at(a), at(b)) for a, b in mf.FULL_STRETCHES_US
    ]
    assert (wf.length == mf.FULL_WINDOW).all() and (wf.src == mf.CLIENT).all()
    assert t.stats.tcp_window_scale_unknown == 0


def test_window_full_needs_the_handshake(frames) -> None:
    t = load_sample(frames["window_unknown"])
    assert len(kinds(t, "tcp_window_full")) == 0
    assert (t.stats.tcp_connections, t.stats.tcp_window_scale_unknown) == (1, 1)


def test_lab_capture_without_stretches() -> None:
    t = load_sample(SAMPLES / "v3-udp-py-w32k-d0-l0.pcap")
    assert len(t.events) == 0


# ---- TCP repeats ------------------------------------------------------------------------------


def test_tcp_retransmission_event(frames) -> None:
    t = load_sample(frames["tcp_retransmission"])
    rt = kinds(t, "tcp_retransmission")
    assert rt[["frame", "ts_ns", "length"]].values.tolist() == [[7, at(200_500), mf.MSS]]
    assert t.transactions.n_calls.tolist() == [1]


def test_lossy_capture_tcp_retransmissions_are_the_dropped_segments() -> None:
    t = load_sample(LOSSY)
    drops = [json.loads(x) for x in LOSSY.with_suffix(".drops.jsonl").read_text().splitlines()]
    dropped = sorted(d["seq"] for d in drops if d["dir"] == "c2s" and d["payload"])
    rt = kinds(t, "tcp_retransmission")
    assert sorted(rt.seq) == dropped and len(dropped) == 4
    assert t.stats.duplicate_frames == 0


# ---- the table itself ---------------------------------------------------------------------------


@pytest.mark.parametrize("capture", FULL_CAPTURES, ids=lambda p: p.name)
def test_events_table_shape(capture: Path) -> None:
    ev = load_sample(capture).events
    assert list(ev.columns) == list(EVENT_COLUMNS)
    assert set(ev.kind) <= set(EVENT_KINDS)
    assert ev.ts_ns.is_monotonic_increasing
    assert (ev.duration_ns >= 0).all()
