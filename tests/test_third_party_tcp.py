"""Third-party TCP captures (issue 16): a damaged SYN inside an established
connection, frames captured 3-4 times with others in between, and the
per-direction checksum facts (tests/crafted/make_tcp_damage.py), read by the
Rust parser."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

import nfstrace
from nfstrace.analysis.repeats import analyze_repeats
from nfstrace.config import CHECKSUM_SAMPLE
from nfstrace.parsers import native
from nfstrace.parsers.stats import ANOMALIES, ParseStats

try:
    from crafted import make_tcp_damage as mtd
except ImportError:  # pragma: no cover - run from the repository root
    from tests.crafted import make_tcp_damage as mtd

SAMPLES = Path(__file__).resolve().parent.parent / "sample-pcaps"


@pytest.fixture(scope="module")
def caps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return mtd.build_all(tmp_path_factory.mktemp("tcp_damage"))


def load(path: Path) -> nfstrace.Trace:
    return nfstrace.load(path)


def answered(t: nfstrace.Trace) -> dict[int, bool]:
    tx = t.transactions
    return {int(x): bool(r) for x, r in zip(tx["xid"], tx["t_reply_ns"].notna(), strict=True)}


# ---- a SYN inside an established connection ---------------------------------------------


def test_corrupted_syn_copy_does_not_restart_the_connection(caps) -> None:
    """The corrupted copy of reply 2 (SYN set, ACK cleared, bad checksum,
    trailing bytes) used to start a new connection one byte off: reply 2 was
    dropped and its call reported unanswered."""
    t = load(caps["syn_corrupt"])
    assert answered(t) == dict.fromkeys(mtd.SYN_XIDS, True)
    assert t.overview.duplicate_replies == 0
    assert t.stats.tcp_connections == 1
    assert t.stats.anomalies == {"tcp_bad_checksum": 1}
    assert t.stats.messages == 6
    # the skipped frame still counts among the server's packets, its checksum bad
    server = next(d for d in t.stats.directions if d.src == mtd.mc.SERVER)
    assert server.packets == 6 and (server.checksums_checked, server.checksums_bad) == (6, 1)
    assert any("bad checksum" in w for w in t.stats.warnings)


def test_clean_syn_inside_the_window_is_dropped(caps) -> None:
    """A well-formed SYN at the next expected byte, no FIN or RST before: not
    a new connection (the receiver answers with an ACK and drops it)."""
    t = load(caps["syn_in_window"])
    assert answered(t) == dict.fromkeys(mtd.SYN_XIDS, True)
    assert t.stats.tcp_connections == 1
    assert t.stats.anomalies == {"tcp_syn_in_window": 1}


@pytest.mark.parametrize("name", ["syn_after_fin", "syn_out_of_window"])
def test_real_port_reuse_is_a_new_connection(caps, name: str) -> None:
    """After FIN (even with the new ISN inside the old window), or with an ISN
    far outside it: a new connection, as before."""
    t = load(caps[name])
    assert answered(t) == dict.fromkeys(mtd.SYN_XIDS[:2], True)
    assert t.stats.tcp_connections == 2
    assert t.stats.anomalies == {}
    assert sorted(t.messages["conn"].unique()) == [1, 2]


def test_anomaly_texts() -> None:
    for name in ("tcp_bad_checksum", "tcp_syn_in_window"):
        warn, text = ANOMALIES[name]
        assert warn and ParseStats(anomalies={name: 2}).warnings == [text.format(n=2)]


# ---- frames captured 3-4 times ---------------------------------------------------------


def test_every_copy_within_the_window_is_skipped(caps) -> None:
    """Copies 90-220 µs after their original, up to three originals in
    between: the last-two-frames check let the later copies through as TCP
    retransmissions and a repeated UDP reply."""
    t = load(caps["mirror_many"])
    copies = sum(len(mtd.MIRROR_COPIES_US[n % 6]) for n in range(7))
    assert t.stats.frames == 7 + copies
    assert t.stats.duplicate_frames == copies
    assert t.stats.tcp["retransmitted"] == 0 and t.stats.tcp["overlapping"] == 0
    assert len(t.messages) == 4 and t.overview.duplicate_replies == 0
    assert (t.events["kind"] == "frame_duplicate").sum() == copies


def test_copies_are_reported_without_a_cause(caps) -> None:
    t = load(caps["mirror_many"])
    r = analyze_repeats(t.transactions, t.events, t.stats)
    (f,) = [f for f in r.findings() if f.kind == "mirror_duplicates"]
    assert "identical frames captured more than once" in f.title
    assert "mirror" not in f.title


# ---- checksum facts ---------------------------------------------------------------------


def test_checksums_checked_as_scapy_computes_them(tmp_path: Path) -> None:
    """TCP and UDP over IPv4 and IPv6, payloads of odd and even lengths: the
    packets scapy wrote with their checksums are counted checked and good, the
    same with one bit flipped checked and bad.  A direction (address pair) per
    kind of packet and per good/bad, fewer packets each than CHECKSUM_SAMPLE."""
    rng = random.Random(16)
    cap = mtd.mc.Capture()
    expected: dict[tuple[str, str], tuple[int, int]] = {}
    lengths = (0, 1, 2, 3, 7, 100, 1447, 1448)
    for v6 in (False, True):
        for proto in ("tcp", "udp"):
            for bad in (False, True):
                k = len(expected) + 1
                src, dst = (f"fd00::{k}", f"fd00::2:{k}") if v6 else (f"10.1.2.{k}", f"10.4.5.{k}")
                expected[(src, dst)] = (len(lengths), len(lengths) if bad else 0)
                for n in lengths:
                    body = Raw(bytes(rng.randrange(256) for _ in range(n)))
                    ip = IPv6(src=src, dst=dst) if v6 else IP(src=src, dst=dst)
                    l4 = TCP(sport=800, dport=2049, seq=n, flags="A") if proto == "tcp" else UDP()
                    ether = Ether(src=mtd.mc.MAC_C, dst=mtd.mc.MAC_S)  # no ARP lookup
                    frame = bytearray(bytes(ether / ip / l4 / body))
                    if bad:
                        frame[-1 if n else (14 + (40 if v6 else 20))] ^= 0x40
                    cap.add(bytes(frame))
    stats = native.parse([str(cap.write(tmp_path / "checksums.pcap"))])[2]
    got = {(d.src, d.dst): (d.checksums_checked, d.checksums_bad) for d in stats.directions}
    assert got == expected
    assert len(lengths) < CHECKSUM_SAMPLE


def test_checksum_facts_per_direction(caps) -> None:
    t = load(caps["offload_client"])
    d = {(x.src, x.dst): (x.checksums_checked, x.checksums_bad) for x in t.stats.directions}
    assert d == {(mtd.mc.CLIENT, mtd.mc.SERVER): (5, 5), (mtd.mc.SERVER, mtd.mc.CLIENT): (5, 0)}
    assert t.stats.anomalies == {}  # bad checksums alone do not drop frames


def test_checksum_sample_is_bounded() -> None:
    path = SAMPLES / "v3-tcp-nfscp-w64k-d2-l0.pcap"  # in the repository
    t = load(path)
    for d in t.stats.directions:
        assert 0 < d.checksums_checked <= CHECKSUM_SAMPLE
        assert 0 <= d.checksums_bad <= d.checksums_checked
