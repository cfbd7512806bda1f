"""RPC over UDP the way third-party captures show it (issue 16): programs not
in the built-in list on ports a portmapper announced, non-RPC UDP that must
stay out, and datagrams that lost fragments but whose first fragment carries
the RPC header.  Captures: tests/crafted/make_rpc_ports.py; the native parser
agrees on each (tests/test_native.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import tshark_ref

from nfstrace.parsers import fast, portmap, rpc

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
    return fast.parse([str(path)])[0]


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
    m, _events, stats = fast.parse([str(caps["not_rpc_udp"])])
    assert stats.udp_packets > 450
    assert m.empty


@pytest.mark.parametrize(
    ("uaddr", "port"),
    [
        (b"10.0.0.2.128.18", 32786),
        (b"fd00::5.3.255", 1023),
        (b"::.0.111", 111),
        (b"0.0.0.0.8.1", 2049),
        (b"10.0.0.2.256.1", -1),
        (b"10.0.0.2.1", 2 * 256 + 1),  # "10.0.0" is the host part: still a port
        (b".1", -1),
        (b"host.x.1", -1),
        (b"", -1),
    ],
)
def test_uaddr_port(uaddr: bytes, port: int) -> None:
    assert portmap.uaddr_port(uaddr) == port


def test_strict_call_needs_a_whole_sane_header() -> None:
    call = mc.rpc_call(1, 1, b"args", prog=100232, vers=10)
    assert rpc.strict_call(call, len(call))
    assert not rpc.strict_call(call[:60], 60)  # the verifier is not in the datagram
    assert not rpc.strict_call(call, 60)
    bad_sys = call[:36] + mc.u32(300) + call[40:]  # machine name over 255 bytes
    assert not rpc.strict_call(bad_sys, len(call))
    zero_prog = call[:12] + mc.u32(0) + call[16:]
    assert not rpc.strict_call(zero_prog, len(call))
    none_cred = mc.u32(7, 0, 2, 100232, 10, 1, 0, 0, 0, 0)
    assert rpc.strict_call(none_cred, 40)
    assert not rpc.strict_call(mc.u32(7, 0, 2, 100232, 10, 1, 0, 4, 0, 0, 0), 44)
    assert not rpc.strict_call(mc.u32(7, 0, 2, 100232, 10, 1, 0, 0, 0, 8, 0, 0), 48)
    gss = mc.u32(7, 0, 2, 100232, 10, 1, 6, 24, 1, 0, 5, 1) + mc.opaque(b"hand")
    assert rpc.strict_call(gss + mc.u32(6, 4) + b"mic!", len(gss) + 12)
    assert not rpc.strict_call(gss[:44] + mc.u32(4) + gss[48:] + mc.u32(6, 4) + b"mic!", 64)
