"""RPC over UDP the way third-party captures show it (issue 16): programs not
in the built-in list on ports a portmapper announced, non-RPC UDP that must
stay out, and datagrams that lost fragments but whose first fragment carries
the RPC header.  Captures: tests/crafted/make_rpc_ports.py, read by the Rust
parser (its tables on each: tests/golden/parser/crafted/)."""

from __future__ import annotations

from pathlib import Path

import pytest
import tshark_ref

import nfstrace
from nfstrace.analysis.fragments import analyze_fragments
from nfstrace.parsers import native

try:
    from crafted import make_crafted as mc
    from crafted import make_rpc_ports as mp
except ImportError:  # tests/ not on sys.path: import as a package
    from tests.crafted import make_crafted as mc
    from tests.crafted import make_rpc_ports as mp


@pytest.fixture(scope="module")
def caps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return mp.build_all(tmp_path_factory.mktemp("rpc_ports"))


def messages(path: Path):
    return native.parse([str(path)])[0]


def test_sadmind_on_the_port_portmap_announced(caps: dict[str, Path]) -> None:
    """All 18 calls and 16 replies, the 5 sadmind calls (program 100232 v10, port
    32786) and their 3 replies among them, as tshark sees them."""
    m = messages(caps["sadmind"])
    assert (m.msgtype == "call").sum() == mp.SADMIND_CALLS
    assert (m.msgtype == "reply").sum() == mp.SADMIND_REPLIES
    sad = m[(m.sport == mp.SADMIND_PORT) | (m.dport == mp.SADMIND_PORT)]
    calls, replies = sad[sad.msgtype == "call"], sad[sad.msgtype == "reply"]
    assert sorted(calls.xid) == list(mp.SADMIND_XIDS)
    assert sorted(replies.xid) == list(mp.SADMIND_ANSWERED)
    assert set(sad.prog) == {mp.SADMIND} and set(sad.vers) == {mp.SADMIND_VERS}
    # tshark, told the port carries RPC: the same messages
    out = tshark_ref.subprocess.run(
        [tshark_ref.tshark(), "-n", "-r", str(caps["sadmind"]), "-d", "udp.port==32786,rpc"]
        + ["-T", "fields", "-e", "frame.number", "-e", "rpc.xid", "-e", "rpc.msgtyp"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    theirs = sorted(
        (int(frame), int(xid, 16), "call" if typ == "0" else "reply")
        for frame, xid, typ in (line.split("\t") for line in out.splitlines())
        if xid
    )
    ours = sorted(zip(m.frame_first, m.xid, m.msgtype.astype(str), strict=True))
    assert ours == theirs


def test_any_program_found_by_content_without_portmap(tmp_path: Path) -> None:
    """No portmap answer in the capture: the calls of an unknown program to an
    unknown port are found by the strict header test, and their replies kept."""
    cap = mc.Capture()
    for xid in mp.SADMIND_XIDS:
        mp._pair(cap, mp.sadmind_call(xid), mc.rpc_reply(xid, mc.u32(0)), 906, mp.OTHER_PORT)
    m = messages(cap.write(tmp_path / "no_portmap.pcap"))
    assert list(m.msgtype) == ["call", "reply"] * len(mp.SADMIND_XIDS)
    assert set(m.prog) == {mp.SADMIND} and sorted(set(m.xid)) == list(mp.SADMIND_XIDS)


def test_portmap_dump_teaches_udp_ports(caps: dict[str, Path]) -> None:
    """Replies whose calls were not captured are kept from the UDP ports a
    PMAPPROC_DUMP announced, not from a port it announced for TCP only; an odd
    call (17 groups) is taken on the announced port, not on another."""
    m = messages(caps["rpc_ports_dump"])
    replies = m[(m.msgtype == "reply") & (m.sport != mp.PORTMAP_PORT)]
    assert sorted(replies.xid) == list(mp.DUMP_KEPT_REPLIES)
    assert mp.DUMP_DROPPED_REPLY not in set(m.xid)
    calls = m[(m.msgtype == "call") & (m.prog == mp.SADMIND)]
    assert list(calls.xid) == [mp.GIDS_CALL_LEARNT]


def test_rpcbind_getaddr_and_dump_teach_udp_ports(caps: dict[str, Path]) -> None:
    """rpcbind v3 GETADDR (udp, IPv4), v4 GETADDR (udp6) and v4 DUMP: replies from
    the ports they name are kept; from ports named for tcp/tcp6 they are not."""
    m = messages(caps["rpc_ports_getaddr"])
    replies = m[(m.msgtype == "reply") & (m.sport != mp.PORTMAP_PORT)]
    assert dict(zip(replies.xid, replies.sport, strict=True)) == mp.GETADDR_KEPT
    assert not set(mp.GETADDR_DROPPED) & set(m.xid)


def test_no_rpc_in_dns_ntp_syslog_and_noise(caps: dict[str, Path]) -> None:
    m, _events, stats = native.parse([str(caps["not_rpc_udp"])])
    assert stats.udp_packets > 450
    assert m.empty


@pytest.mark.parametrize(
    ("uaddr", "port"),
    [
        (b"10.0.0.2.128.18", 32786),
        (b"fd00::5.3.255", 1023),
        (b"::.128.19", 32787),
        (b"0.0.0.0.8.1", 2049),
        (b"10.0.0.2.256.1", -1),
        (b"10.0.0.2.1", 2 * 256 + 1),  # "10.0.0" is the host part: still a port
        (b".1", -1),
        (b"host.x.1", -1),
        (b"", -1),
    ],
)
def test_uaddr_port(uaddr: bytes, port: int, tmp_path: Path) -> None:
    """An rpcbind GETADDR answer's universal address (RFC 5665 §5.2.3.3: the
    host, then the port's two bytes in decimal) names the port whose replies
    are then kept without their call; a malformed one names none (a reply
    from port 1, what the last number alone would give, is not kept)."""
    cap = mc.Capture()
    ask = mp.rpcb(mp.SADMIND, mp.SADMIND_VERS, b"udp", b"")
    call = mc.rpc_call(0x5001, 3, ask, mp.PORTMAP, 3)  # RPCBPROC_GETADDR, v3
    mp._pair(cap, call, mc.rpc_reply(0x5001, mc.opaque(uaddr)), mp.CPORT, mp.PORTMAP_PORT)
    from_port = port if port > 0 else 1
    reply = mc.udp_pkt(mc.SERVER, mc.CLIENT, from_port, mp.SADMIND_CPORT, mc.rpc_reply(0x5101))
    cap.add(mc.eth(reply))
    m = messages(cap.write(tmp_path / "getaddr.pcap"))
    assert (0x5101 in set(m.xid)) == (port > 0)
    assert list(m.xid[:2]) == [0x5001, 0x5001]  # the GETADDR call and its answer


def _strict(body: bytes, tmp_path: Path) -> bool:
    """Is a datagram to an unknown port, not announced by a portmapper, taken
    as an RPC call of an unknown program (the strict header test alone)?"""
    cap = mc.Capture()
    cap.add(mc.eth(mc.udp_pkt(mc.CLIENT, mc.SERVER, 906, mp.OTHER_PORT, body)))
    m = messages(cap.write(tmp_path / "strict.pcap"))
    return list(m.xid) == [int.from_bytes(body[:4], "big")]


def test_strict_call_needs_a_whole_sane_header(tmp_path: Path) -> None:
    call = mc.rpc_call(1, 1, b"args", prog=100232, vers=10)
    assert _strict(call, tmp_path)
    assert not _strict(call[:60], tmp_path)  # the verifier is not in the datagram
    bad_sys = call[:36] + mc.u32(300) + call[40:]  # machine name over 255 bytes
    assert not _strict(bad_sys, tmp_path)
    zero_prog = call[:12] + mc.u32(0) + call[16:]
    assert not _strict(zero_prog, tmp_path)
    none_cred = mc.u32(7, 0, 2, 100232, 10, 1, 0, 0, 0, 0)
    assert _strict(none_cred, tmp_path)
    assert not _strict(mc.u32(7, 0, 2, 100232, 10, 1, 0, 4, 0, 0, 0), tmp_path)
    assert not _strict(mc.u32(7, 0, 2, 100232, 10, 1, 0, 0, 0, 8, 0, 0), tmp_path)
    gss = mc.u32(7, 0, 2, 100232, 10, 1, 6, 24, 1, 0, 5, 1) + mc.opaque(b"hand")
    assert _strict(gss + mc.u32(6, 4) + b"mic!", tmp_path)
    assert not _strict(gss[:44] + mc.u32(4) + gss[48:] + mc.u32(6, 4) + b"mic!", tmp_path)


# ---- datagrams given up with fragments missing ------------------------------------


def fragments_of(path: Path):
    t = nfstrace.load(path)
    return t, analyze_fragments(t.messages, t.stats, t.events)


def test_call_kept_when_the_last_fragment_was_not_captured(caps: dict[str, Path]) -> None:
    """The WRITE whose last fragment the capture missed is kept, cut short, with
    its offset and count; its reply is matched to it; the finding says the capture,
    not the network, lost the fragment."""
    t, r = fragments_of(caps["udp_write_fragment_missed"])
    m = t.messages
    call = m[(m.xid == mp.MISSED_XID) & (m.msgtype == "call")]
    assert len(call) == 1
    c = call.iloc[0]
    assert (c.proc, c.offset, c["count"]) == (7, 0, mp.FRAG_WRITE_COUNT)
    assert c.truncated and c.rpc_len == mp.FRAG_WRITE_LEN
    assert c.captured_len == 22 * mp.FRAG_CHUNK - 8 and c.ip_frags == 22
    assert t.stats.replies_without_call_info == 0
    tx = t.transactions
    write = tx[tx.xid == mp.MISSED_XID]
    assert len(write) == 1 and write.iloc[0].op == "WRITE" and write.iloc[0].latency_ns > 0
    assert r.datagrams_incomplete == r.datagrams_not_captured == 1
    assert list(r.incomplete.fate) == ["answered"]
    assert list(r.incomplete.xid) == [mp.MISSED_XID]
    kinds = {f.kind for f in r.findings()}
    assert "ip_fragments_not_captured" in kinds and "ip_fragments_lost" not in kinds
    # nor does the time budget count a wait for a re-send
    assert "loss_recovery" not in set(t.diagnosis.budget.intervals.cause)


def test_call_kept_over_ipv6_with_extension_headers(caps: dict[str, Path]) -> None:
    t = nfstrace.load(caps["udp_write_fragment_missed_v6"])
    m = t.messages
    assert list(m.msgtype) == ["call", "reply"] and set(m.xid) == {mp.MISSED_V6_XID}
    assert list(m.proc) == [7, 7] and m.truncated.tolist() == [True, False]
    assert m.iloc[0]["count"] == mp.FRAG_WRITE_COUNT
    assert t.stats.replies_without_call_info == 0


def test_lost_fragment_and_resent_call(caps: dict[str, Path]) -> None:
    """The first send lost its last fragment in the network: its call is kept cut
    short, unanswered; the re-send (another IP id) is answered."""
    t, r = fragments_of(caps["udp_write_fragment_resent"])
    m = t.messages
    calls = m[(m.xid == mp.RESENT_XID) & (m.msgtype == "call")]
    assert list(calls.truncated) == [True, False]
    assert r.datagrams_lost == r.datagrams_resent == 1 and r.datagrams_not_captured == 0
    assert list(r.incomplete.fate) == ["re-sent"]
    lost = [f for f in r.findings() if f.kind == "ip_fragments_lost"]
    assert len(lost) == 1 and "re-sent by the client" in lost[0].title
    assert "loss_recovery" in set(t.diagnosis.budget.intervals.cause)
    assert "ip_fragments_not_captured" not in {f.kind for f in r.findings()}


def test_first_fragment_alone_is_rpc(caps: dict[str, Path]) -> None:
    """One first fragment is the whole capture: a WRITE call cut short (not "no
    ONC-RPC traffic"); cut by the end of the capture, neither lost nor missed."""
    t, r = fragments_of(caps["udp_write_first_fragment"])
    m = t.messages
    assert len(m) == 1
    c = m.iloc[0]
    assert (c.msgtype, c.xid, c.proc, c["count"]) == ("call", mp.CUT_XID, 7, mp.FRAG_WRITE_COUNT)
    assert c.truncated and c.captured_len == mp.FRAG_CHUNK - 8
    assert list(r.incomplete.fate) == ["capture end"]
    assert r.datagrams_cut_by_end == 1 and r.datagrams_lost == r.datagrams_not_captured == 0
    kinds = {f.kind for f in r.findings()}
    assert not kinds & {"ip_fragments_lost", "ip_fragments_not_captured"}


def test_first_fragment_alone_on_the_command_line(caps: dict[str, Path]) -> None:
    from typer.testing import CliRunner

    from nfstrace.cli import app

    path = str(caps["udp_write_first_fragment"])
    r = CliRunner().invoke(app, ["analyze", path, "-q", "--no-report"])
    assert r.exit_code == 0, r.output
    assert "no ONC-RPC traffic" not in r.output
