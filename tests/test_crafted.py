"""The parser on tiny crafted captures of pathological cases (built by
tests/crafted/make_crafted.py at session start): exact expected results.

Frame n of a capture is stamped ts(n) unless its builder says otherwise; each
builder's comment gives the frame layout the numbers below refer to.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import nfstrace

try:
    from crafted import make_crafted as mc
except ImportError:  # tests/ not on sys.path: import as a package
    from tests.crafted import make_crafted as mc

ts = mc.ts
NFS, V3 = mc.NFS_PROG, mc.NFS_VERS
GETATTR, LOOKUP, ACCESS, WRITE = mc.GETATTR, mc.LOOKUP, mc.ACCESS, mc.WRITE

ALL_CAPTURES = (
    "split_every_byte",
    "three_in_one",
    "multi_fragment",
    "out_of_order",
    "overlap",
    "lost_write_segment",
    "lost_record_mark",
    "midstream",
    "snaplen",
    *(f"snaplen_unframed_{s}" for s in mc.CUT_SNAPLENS),
    "udp_frag_v4",
    "udp_frag_v4_missing",
    "udp_frag_v6",
    "udp_frag_v6_hbh",
    *mc.LINK_CASES,
    "pcap_le",
    "pcap_be",
    "pcap_nano",
    "pcap_gz",
    "pcap_bz2",
    "pcap_xz",
    "pcapng",
    "merge_a",
    "merge_b",
    "retrans_new_conn",
    "dup_reply",
    "reply_call_info",
    "seq_wrap",
)

# ---- fixtures and helpers ------------------------------------------------------


@pytest.fixture(scope="session")
def crafted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return mc.build_all(tmp_path_factory.mktemp("crafted"))


@pytest.fixture(scope="session")
def load(crafted: dict[str, Path]):
    """load(name, ...) -> the Trace of those captures (parsed once per session)."""
    cache: dict[tuple[str, ...], nfstrace.Trace] = {}

    def _load(*names: str) -> nfstrace.Trace:
        if names not in cache:
            cache[names] = nfstrace.load([crafted[n] for n in names])
        return cache[names]

    return _load


def _py(v):
    return v.item() if hasattr(v, "item") else v


def one(m: pd.DataFrame, **where) -> pd.Series:
    """The single message matching all column == value conditions."""
    sel = m
    for col, value in where.items():
        sel = sel[sel[col] == value]
    assert len(sel) == 1, f"{len(sel)} messages match {where}"
    return sel.iloc[0]


def check(row: pd.Series, **expected) -> None:
    got = {k: _py(row[k]) for k in expected}
    assert got == expected


def check_call(row: pd.Series, **expected) -> None:
    """A call from make_crafted.rpc_call: AUTH_SYS uid 1000 gid 100 'client'."""
    common = dict(msgtype="call", prog=NFS, vers=V3, auth="sys", auth_uid=mc.UID)
    common |= dict(auth_gid=mc.GID, auth_machine=mc.MACHINE, reply_stat="", body_offset=68)
    check(row, **(common | expected))


def check_reply(row: pd.Series, **expected) -> None:
    """An accepted SUCCESS reply with an AUTH_NONE verifier."""
    common = dict(msgtype="reply", auth="none", reply_stat="accepted", accept_stat=0)
    check(row, **(common | {"body_offset": 24} | expected))


def at(frame: int) -> dict[str, int]:
    """Message fields of one carried wholly by frame `frame`."""
    return dict(frame_first=frame, frame_last=frame, ts_first_ns=ts(frame), ts_last_ns=ts(frame))


def span(first: int, last: int) -> dict[str, int]:
    return dict(frame_first=first, frame_last=last, ts_first_ns=ts(first), ts_last_ns=ts(last))


def tcp_stats(t: nfstrace.Trace, *names: str) -> dict[str, int]:
    return {n: t.stats.tcp[n] for n in names}


def event_rows(t: nfstrace.Trace, kind: str) -> list[dict]:
    ev = t.events
    if not len(ev):
        return []
    cols = ["frame", "sport", "seq", "length"]
    return [{c: _py(r[c]) for c in cols} for _, r in ev[ev.kind == kind].iterrows()]


# ---- the generator itself -------------------------------------------------------------


def test_build_all_writes_every_capture(crafted: dict[str, Path]) -> None:
    assert sorted(crafted) == sorted(ALL_CAPTURES)
    assert all(p.is_file() and p.stat().st_size > 24 for p in crafted.values())


def test_build_is_deterministic(crafted: dict[str, Path], tmp_path: Path) -> None:
    again = mc.build_all(tmp_path)
    for name, path in crafted.items():
        assert again[name].read_bytes() == path.read_bytes(), name


@pytest.mark.parametrize("name", ALL_CAPTURES)
def test_message_invariants(load, name: str) -> None:
    """Whatever the case: a message ends no earlier than it starts and never
    holds more captured bytes than its length."""
    m = load(name).messages
    assert (m.ts_first_ns <= m.ts_last_ns).all()
    assert (m.frame_first <= m.frame_last).all()
    assert (m.frames >= 1).all() and (m.record_frags >= 1).all()
    assert (m.captured_len <= m.rpc_len).all()
    assert (m.truncated == (m.captured_len < m.rpc_len)).all()


# ---- TCP record marking ------------------------------------------------------------


@pytest.mark.parametrize("k", range(1, mc.SPLIT_RECORD_LEN))
def test_record_split_across_two_segments(load, k: int) -> None:
    """Split after byte k: 1-3 inside the record mark, 4 just after it, 5-27
    inside the RPC call header, 28+ in the credential or the arguments."""
    m = load("split_every_byte").messages
    seg1, seg2 = 4 * (k - 1) + 3, 4 * (k - 1) + 4  # frames: SYN, SYN-ACK, seg1, seg2
    check_call(
        one(m, sport=20000 + k),
        xid=mc.SPLIT_XID0 + k,
        proc=GETATTR,
        rpc_len=104,
        captured_len=104,
        record_frags=1,
        frames=2,
        ip_frags=2,
        truncated=False,
        **span(seg1, seg2),
    )


def test_record_split_totals(load) -> None:
    t = load("split_every_byte")
    assert len(t.messages) == mc.SPLIT_RECORD_LEN - 1
    assert t.messages.conn.nunique() == mc.SPLIT_RECORD_LEN - 1
    assert tcp_stats(t, "segments", "resyncs", "bad_marks", "holes") == dict(
        segments=2 * (mc.SPLIT_RECORD_LEN - 1), resyncs=0, bad_marks=0, holes=0
    )
    assert (t.stats.incomplete_messages, t.stats.truncated_messages) == (0, 0)


def test_three_records_in_one_segment_each_way(load) -> None:
    t = load("three_in_one")
    m = t.messages
    assert len(m) == 6 and m.conn.nunique() == 1
    calls = ((0x301, GETATTR, 104, 112), (0x302, ACCESS, 108, 36), (0x303, LOOKUP, 116, 72))
    for xid, proc, call_len, reply_len in calls:
        common = dict(record_frags=1, frames=1, truncated=False)
        check_call(
            one(m, xid=xid, msgtype="call"),
            proc=proc,
            rpc_len=call_len,
            captured_len=call_len,
            sport=40100,
            dport=2049,
            **common,
            **at(4),
        )
        check_reply(
            one(m, xid=xid, msgtype="reply"),
            prog=NFS,
            vers=V3,
            proc=proc,
            rpc_len=reply_len,
            captured_len=reply_len,
            sport=2049,
            dport=40100,
            **common,
            **at(5),
        )
    assert list(m.xid[m.msgtype == "call"]) == [0x301, 0x302, 0x303]  # stream order kept
    assert (t.stats.calls, t.stats.replies, t.stats.replies_without_call_info) == (3, 3, 0)
    assert tcp_stats(t, "segments", "resyncs") == dict(segments=2, resyncs=0)


def test_multi_fragment_record(load) -> None:
    """One WRITE of 324 bytes as fragments 20+150+154 (the RPC header itself
    spans fragments): one message, record_frags 3, rpc_len the sum."""
    t = load("multi_fragment")
    m = t.messages
    assert len(m) == 3
    write = dict(proc=WRITE, rpc_len=324, captured_len=324, record_frags=3, truncated=False)
    check_call(one(m, xid=0x401), frames=1, **write, **at(4))
    check_call(one(m, xid=0x402), proc=GETATTR, rpc_len=104, record_frags=1, **at(5))
    check_call(one(m, xid=0x403), frames=3, ip_frags=3, **write, **span(9, 11))
    assert (t.stats.incomplete_messages, t.stats.tcp["bad_marks"]) == (0, 0)


def test_tcp_sequence_wrap(load) -> None:
    t = load("seq_wrap")
    m = t.messages
    assert len(m) == 2
    check_call(one(m, xid=0x1401), proc=GETATTR, rpc_len=104, frames=2, **span(3, 4))
    check_call(one(m, xid=0x1402), proc=GETATTR, rpc_len=104, frames=1, **at(5))
    assert tcp_stats(t, "out_of_order", "retransmitted", "holes", "resyncs") == dict(
        out_of_order=0, retransmitted=0, holes=0, resyncs=0
    )


# ---- TCP ordering ----------------------------------------------------------------


def test_out_of_order_segments(load) -> None:
    """Stream A(0-108) B(108-536) C(536-644); frame 4 holds bytes 200-644,
    frame 5 bytes 0-200.  Each message ends at the capture time of its own
    last packet."""
    t = load("out_of_order")
    m = t.messages
    assert list(m.xid) == [0x503, 0x501, 0x502]  # ordered by first packet
    check_call(one(m, xid=0x501), proc=GETATTR, rpc_len=104, frames=1, **at(5))
    check_call(one(m, xid=0x502), proc=WRITE, rpc_len=424, captured_len=424, frames=2, **span(5, 5))
    check_call(one(m, xid=0x503), proc=GETATTR, rpc_len=104, frames=1, **at(4))
    assert not m.truncated.any()
    assert tcp_stats(
        t, "segments", "out_of_order", "retransmitted", "overlapping", "holes"
    ) == dict(segments=2, out_of_order=1, retransmitted=0, overlapping=0, holes=0)


def test_overlapping_and_duplicate_segments(load) -> None:
    """Frames 4 [0,150) 5 [150,400) 6 [150,400) again 7 [300,550) 8 [550,644)."""
    t = load("overlap")
    m = t.messages
    assert len(m) == 3
    check_call(one(m, xid=0x601), proc=GETATTR, rpc_len=104, frames=1, **at(4))
    check_call(one(m, xid=0x602), proc=WRITE, rpc_len=424, captured_len=424, frames=3, **span(4, 7))
    check_call(
        one(m, xid=0x603), proc=GETATTR, rpc_len=104, captured_len=104, frames=2, **span(7, 8)
    )
    assert not m.truncated.any()
    assert tcp_stats(
        t, "segments", "out_of_order", "retransmitted", "overlapping", "holes"
    ) == dict(segments=5, out_of_order=0, retransmitted=1, overlapping=1, holes=0)
    assert event_rows(t, "tcp_retransmission") == [
        dict(frame=6, sport=40400, seq=1001 + 150, length=250)
    ]


# ---- lost segments and resynchronisation ----------------------------------------------

# (client port, WRITE xid, first WRITE frame, last WRITE frame, GETATTR frame)
LOST_WRITE_CONNS = ((40500, 0x701, 4, 8, 9), (40501, 0x711, 16, 20, 21))


def test_lost_segment_in_write_body_keeps_framing(load) -> None:
    t = load("lost_write_segment")
    m = t.messages
    assert len(m) == 8
    for port, xid, first, _last, getattr_frame in LOST_WRITE_CONNS:
        check_call(
            one(m, xid=xid, msgtype="call"),
            sport=port,
            proc=WRITE,
            rpc_len=mc.LOST_WRITE_LEN,
            captured_len=mc.LOST_WRITE_LEN - mc.MSS,
            record_frags=1,
            truncated=True,
            frame_first=first,
            ts_first_ns=ts(first),
        )
        check_call(
            one(m, xid=xid + 1, msgtype="call"),
            sport=port,
            proc=GETATTR,
            rpc_len=104,
            captured_len=104,
            frames=1,
            truncated=False,
            **at(getattr_frame),
        )
    s = t.stats
    assert (s.truncated_messages, s.incomplete_messages, s.calls, s.replies) == (2, 0, 4, 4)
    assert tcp_stats(t, "holes", "hole_bytes", "resyncs", "bad_marks") == dict(
        holes=2, hole_bytes=2 * mc.MSS, resyncs=0, bad_marks=0
    )
    holes = event_rows(t, "tcp_hole")
    assert [(e["sport"], e["seq"], e["length"]) for e in holes] == [
        (40500, 1001 + 2 * mc.MSS, mc.MSS),
        (40501, 1001 + 2 * mc.MSS, mc.MSS),
    ]


def test_lost_segment_in_write_body_frame_count(load) -> None:
    """frames counts captured packets carrying the message: 5, not the hole."""
    m = load("lost_write_segment").messages
    for _port, xid, *_ in LOST_WRITE_CONNS:
        check(one(m, xid=xid, msgtype="call"), frames=5, ip_frags=5)


def test_lost_segment_in_write_body_last_packet(load) -> None:
    """The WRITE ends at its own last captured segment, whether the hole is
    stepped over at a later FIN (connection 1) or at the end of the capture
    (connection 2)."""
    m = load("lost_write_segment").messages
    for _port, xid, _first, last, _g in LOST_WRITE_CONNS:
        check(one(m, xid=xid, msgtype="call"), frame_last=last, ts_last_ns=ts(last))


def test_lost_segment_replies_named_from_their_calls(load) -> None:
    """The server's replies ACK past the hole (a capture loss): their calls are
    in the capture, so each reply carries the call's prog/vers/proc."""
    t = load("lost_write_segment")
    m = t.messages
    for port, xid, _first, last, getattr_frame in LOST_WRITE_CONNS:
        reply = dict(prog=NFS, vers=V3, dport=port)
        check_reply(
            one(m, xid=xid, msgtype="reply"), proc=WRITE, rpc_len=52, **reply, **at(last + 2)
        )
        check_reply(
            one(m, xid=xid + 1, msgtype="reply"), proc=GETATTR, **reply, **at(getattr_frame + 2)
        )
    assert t.stats.replies_without_call_info == 0


def test_lost_segment_with_record_mark_resyncs(load) -> None:
    """Bytes 0-200 of WRITE B (its mark and header) lost: A is found, framing
    is regained on C (after skipping B's last 228 bytes), then D."""
    t = load("lost_record_mark")
    m = t.messages
    assert list(m.xid) == [0x801, 0x803, 0x804]
    check_call(one(m, xid=0x801), proc=GETATTR, rpc_len=104, frames=1, truncated=False, **at(4))
    check_call(one(m, xid=0x803), proc=GETATTR, rpc_len=104, frames=1, truncated=False, **at(5))
    check_call(one(m, xid=0x804), proc=GETATTR, rpc_len=104, frames=1, truncated=False, **at(6))
    s = t.stats
    assert (s.truncated_messages, s.incomplete_messages, s.headerless_messages) == (0, 0, 0)
    assert tcp_stats(t, "holes", "hole_bytes", "resyncs", "resync_skipped_bytes") == dict(
        holes=1, hole_bytes=200, resyncs=1, resync_skipped_bytes=200 + 228
    )
    assert [(e["seq"], e["length"]) for e in event_rows(t, "tcp_hole")] == [(1001 + 108, 200)]
    assert [e["length"] for e in event_rows(t, "rpc_resync")] == [228]


def test_capture_starting_mid_stream(load) -> None:
    """No SYN; each direction's first segment starts inside an earlier record
    (37 client bytes, 29 server bytes), so both resynchronise."""
    t = load("midstream")
    m = t.messages
    assert len(m) == 4 and m.conn.nunique() == 1
    check_call(one(m, xid=0x901, msgtype="call"), proc=GETATTR, rpc_len=104, frames=1, **at(1))
    check_call(one(m, xid=0x902, msgtype="call"), proc=GETATTR, rpc_len=104, frames=1, **at(2))
    for xid, frame in ((0x901, 3), (0x902, 4)):
        check_reply(
            one(m, xid=xid, msgtype="reply"),
            prog=NFS,
            vers=V3,
            proc=GETATTR,
            rpc_len=112,
            **at(frame),
        )
    assert tcp_stats(t, "resyncs", "resync_skipped_bytes", "bad_marks") == dict(
        resyncs=2,
        resync_skipped_bytes=mc.MIDSTREAM_CLIENT_SKIP + mc.MIDSTREAM_SERVER_SKIP,
        bad_marks=0,
    )
    resyncs = event_rows(t, "rpc_resync")
    assert [(e["frame"], e["length"]) for e in resyncs] == [
        (1, mc.MIDSTREAM_CLIENT_SKIP),
        (3, mc.MIDSTREAM_SERVER_SKIP),
    ]
    assert t.stats.replies_without_call_info == 0


# ---- snaplen ------------------------------------------------------------------------


def test_snaplen_cut_write(load) -> None:
    """-s 200: 54 bytes of headers leave 146 payload bytes per frame; the
    WRITE record spans 23 segments (frames 4-26)."""
    t = load("snaplen")
    m = t.messages
    assert len(m) == 2
    check_call(
        one(m, xid=0xA01),
        proc=WRITE,
        rpc_len=mc.SNAP_WRITE_LEN,
        captured_len=(146 - 4) + 22 * 146,
        truncated=True,
        record_frags=1,
        frames=23,
        **span(4, 26),
    )
    check_call(
        one(m, xid=0xA02), proc=GETATTR, rpc_len=104, captured_len=104, truncated=False, **at(27)
    )
    s = t.stats
    assert (s.truncated_messages, s.incomplete_messages, s.truncated_frames) == (1, 0, 23)
    assert s.files[0].snaplen == mc.SNAPLEN
    assert tcp_stats(t, "holes", "resyncs", "bad_marks") == dict(holes=0, resyncs=0, bad_marks=0)


# ---- IP fragments ---------------------------------------------------------------------


def _udp_write(**expected) -> dict:
    return dict(
        proc=WRITE,
        transport="udp",
        rpc_len=mc.UDP_WRITE_LEN,
        captured_len=mc.UDP_WRITE_LEN,
        record_frags=1,
        frames=3,
        ip_frags=3,
        truncated=False,
        **expected,
    )


def test_ipv4_udp_call_in_three_fragments(load) -> None:
    t = load("udp_frag_v4")
    m = t.messages
    assert len(m) == 2
    check_call(
        one(m, msgtype="call"), xid=0xB01, src=mc.CLIENT, sport=801, **_udp_write(), **span(1, 3)
    )
    check_reply(one(m, msgtype="reply"), xid=0xB01, proc=WRITE, rpc_len=52, ip_frags=1, **at(4))
    s = t.stats
    assert (s.ip_fragments, s.ip_datagrams_reassembled, s.ip_datagrams_incomplete) == (3, 1, 0)


def test_ipv4_udp_call_missing_a_fragment(load) -> None:
    """Never reassembled; its first fragment holds the call: kept cut short."""
    t = load("udp_frag_v4_missing")
    s = t.stats
    assert (s.ip_fragments, s.ip_datagrams_reassembled, s.ip_datagrams_incomplete) == (2, 0, 1)
    assert (s.udp_packets, s.messages, s.incomplete_messages) == (0, 1, 1)
    c = t.messages.iloc[0]
    assert (c.msgtype, c.xid, c.truncated, c.frame_first, c.frame_last) == (
        "call",
        0xB02,
        True,
        1,
        2,
    )
    assert (c.rpc_len, c.captured_len, c.ip_frags) == (mc.UDP_WRITE_LEN, 1472, 2)


def test_ipv6_udp_call_in_three_fragments(load) -> None:
    """Captured last fragment first: the message starts at frame 1 (the first
    fragment captured) and completes at frame 3 (offset 0)."""
    t = load("udp_frag_v6")
    m = t.messages
    assert len(m) == 2
    check_call(
        one(m, msgtype="call"),
        xid=0xB03,
        src=mc.CLIENT6,
        dst=mc.SERVER6,
        **_udp_write(),
        **span(1, 3),
    )
    check_reply(one(m, msgtype="reply"), xid=0xB03, proc=WRITE, src=mc.SERVER6, **at(4))
    s = t.stats
    assert (s.ipv6_packets, s.ip_fragments, s.ip_datagrams_reassembled) == (4, 3, 1)
    assert s.ip_datagrams_incomplete == 0


def test_ipv6_fragments_after_hop_by_hop_header(load) -> None:
    t = load("udp_frag_v6_hbh")
    m = t.messages
    assert len(m) == 1
    check_call(one(m, xid=0xB04), sport=803, **_udp_write(), **span(1, 3))
    s = t.stats
    assert (s.ip_fragments, s.ip_datagrams_reassembled, s.ip_datagrams_incomplete) == (3, 1, 0)


# ---- link layers ----------------------------------------------------------------------


@pytest.mark.parametrize("name", list(mc.LINK_CASES))
def test_link_layer(load, name: str) -> None:
    linktype, _ = mc.LINK_CASES[name]
    i = list(mc.LINK_CASES).index(name)
    t = load(name)
    m = t.messages
    assert len(m) == 2
    xid, port = 0xC01 + i, 700 + i
    check_call(
        one(m, msgtype="call"),
        xid=xid,
        proc=GETATTR,
        src=mc.CLIENT,
        sport=port,
        dst=mc.SERVER,
        dport=2049,
        transport="udp",
        rpc_len=104,
        **at(1),
    )
    check_reply(one(m, msgtype="reply"), xid=xid, proc=GETATTR, src=mc.SERVER, dport=port, **at(2))
    s = t.stats
    assert s.files[0].linktypes == {linktype}
    ethernet = linktype == mc.LINKTYPE_ETHERNET
    assert (s.frames, s.non_ip_frames, s.ipv4_packets) == (3 if ethernet else 2, int(ethernet), 2)


# ---- capture file formats ---------------------------------------------------------------


def test_pcap_reference(load) -> None:
    t = load("pcap_le")
    m = t.messages
    assert len(m) == 2
    check_call(one(m, msgtype="call"), xid=0xD01, proc=GETATTR, **at(4))
    check_reply(one(m, msgtype="reply"), xid=0xD01, proc=GETATTR, **at(5))
    f = t.stats.files[0]
    assert (f.format, f.compression, f.frames, f.linktypes) == ("pcap", "", 5, {1})


@pytest.mark.parametrize(
    ("name", "compression"),
    [("pcap_be", ""), ("pcap_gz", "gzip"), ("pcap_bz2", "bzip2"), ("pcap_xz", "xz")],
)
def test_pcap_variant_same_messages(load, name: str, compression: str) -> None:
    ref, t = load("pcap_le").messages, load(name).messages
    assert len(t) == 2
    pd.testing.assert_frame_equal(t, ref)
    f = load(name).stats.files[0]
    assert (f.format, f.compression, f.frames, f.warnings) == ("pcap", compression, 5, [])


def test_pcap_nanosecond(load) -> None:
    t = load("pcap_nano")
    m = t.messages

    def nts(n: int) -> int:
        return mc.BASE_NS + mc.NANO_OFFSET_NS + (n - 1) * mc.NANO_STEP_NS

    check_call(one(m, msgtype="call"), xid=0xD01, frame_first=4, ts_first_ns=nts(4))
    check(one(m, msgtype="call"), ts_last_ns=nts(4))
    check_reply(one(m, msgtype="reply"), frame_first=5, ts_first_ns=nts(5), ts_last_ns=nts(5))
    assert nts(4) % 1000 and nts(5) % 1000  # not representable in a microsecond pcap


def test_pcapng_two_interfaces(load) -> None:
    """Interface 0: Ethernet, µs; interface 1: raw IPv4, if_tsresol 9 (ns)."""
    t = load("pcapng")
    m = t.messages
    assert len(m) == 4
    ts0, ts1, ts2, ts3 = mc.PCAPNG_TS
    exact = [
        (0xE01, "call", 1, ts0, mc.CLIENT, GETATTR),
        (0xE02, "call", 2, ts1, mc.PCAPNG_CLIENT2, ACCESS),
        (0xE01, "reply", 3, ts2, mc.SERVER, GETATTR),
        (0xE02, "reply", 4, ts3, mc.PCAPNG_SERVER2, ACCESS),
    ]
    for xid, kind, frame, t_ns, src, proc in exact:
        row = one(m, xid=xid, msgtype=kind)
        check(row, frame_first=frame, frame_last=frame, ts_first_ns=t_ns, ts_last_ns=t_ns)
        check(row, src=src, proc=proc, prog=NFS, transport="udp")
    assert one(m, xid=0xE01, msgtype="call").conn != one(m, xid=0xE02, msgtype="call").conn
    s = t.stats
    assert s.interface_drops == 7
    f = s.files[0]
    assert (f.format, f.linktypes, f.frames, f.warnings) == ("pcapng", {1, 101}, 4, [])


def test_two_files_merged_in_time_order(load) -> None:
    """merge_b (replies at 10, 30, 50 µs) given before merge_a (calls at 0,
    20, 40 µs): frames are numbered in merged time order and each reply is
    named from its call."""
    t = load("merge_b", "merge_a")
    m = t.messages
    assert list(m.frame_first) == [1, 2, 3, 4, 5, 6]
    assert list(m.msgtype) == ["call", "reply"] * 3
    for i, proc in enumerate((GETATTR, ACCESS, LOOKUP)):
        xid = 0xF01 + i
        t_call = mc.BASE_NS + mc.MERGE_A_US[i] * 1000
        t_reply = mc.BASE_NS + mc.MERGE_B_US[i] * 1000
        check_call(one(m, xid=xid, msgtype="call"), proc=proc, frame_first=2 * i + 1)
        check(one(m, xid=xid, msgtype="call"), ts_first_ns=t_call, ts_last_ns=t_call)
        check_reply(one(m, xid=xid, msgtype="reply"), proc=proc, frame_last=2 * i + 2)
        check(one(m, xid=xid, msgtype="reply"), ts_first_ns=t_reply, ts_last_ns=t_reply)
    s = t.stats
    assert (s.frames, [f.frames for f in s.files], s.replies_without_call_info) == (6, [3, 3], 0)


# ---- RPC matching -----------------------------------------------------------------------


def test_call_retransmitted_on_new_connection(load) -> None:
    m = load("retrans_new_conn").messages
    assert len(m) == 3
    first = one(m, msgtype="call", sport=41001)
    second = one(m, msgtype="call", sport=41002)
    check_call(first, xid=0x1101, proc=LOOKUP, rpc_len=116, **at(4))
    check_call(second, xid=0x1101, proc=LOOKUP, rpc_len=116, **at(9))
    assert first.conn != second.conn
    reply = one(m, msgtype="reply")
    check_reply(reply, xid=0x1101, proc=LOOKUP, dport=41002, rpc_len=72, **at(10))
    assert reply.conn == second.conn


def test_duplicate_reply_and_xid_reuse(load) -> None:
    """GETATTR x (1), reply (2), same reply again (3), ACCESS reusing x (4),
    its reply (5): both GETATTR replies named GETATTR, the last ACCESS."""
    t = load("dup_reply")
    m = t.messages
    assert list(m.frame_first) == [1, 2, 3, 4, 5]
    assert list(m.xid) == [0x1201] * 5
    check_call(one(m, frame_first=1), proc=GETATTR)
    check_reply(one(m, frame_first=2), proc=GETATTR, rpc_len=112)
    check_reply(one(m, frame_first=3), proc=GETATTR, rpc_len=112)
    check_call(one(m, frame_first=4), proc=ACCESS)
    check_reply(one(m, frame_first=5), proc=ACCESS, rpc_len=36)
    assert m.conn.nunique() == 1
    assert (t.stats.calls, t.stats.replies, t.stats.replies_without_call_info) == (2, 3, 0)


def test_reply_named_from_call_or_unknown(load) -> None:
    t = load("reply_call_info")
    m = t.messages
    assert len(m) == 3
    check_call(one(m, msgtype="call"), xid=0x1301, proc=LOOKUP, **at(4))
    check_reply(one(m, xid=0x1301, msgtype="reply"), prog=NFS, vers=V3, proc=LOOKUP, **at(5))
    orphan = one(m, xid=0x1302)
    check_reply(orphan, prog=-1, vers=-1, proc=-1, rpc_len=112, dport=41202, **at(6))
    assert orphan.conn != one(m, msgtype="call").conn
    assert t.stats.replies_without_call_info == 1
