"""analysis.quality: capture point inferred on every lab capture (against the
lab's own record of where it captured) and on crafted client/server-side
twins; truncation, bytes the capture missed."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FULL_CAPTURES, S256_CAPTURES, SAMPLES, ground_truth

import nfstrace
from nfstrace.analysis.quality import assess_capture

try:
    from crafted import make_crafted as mc
    from crafted import make_frames as mf
except ImportError:  # tests/ not on sys.path: import as a package
    from tests.crafted import make_crafted as mc
    from tests.crafted import make_frames as mf


@pytest.fixture(scope="module")
def frames(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return mf.build_all(tmp_path_factory.mktemp("frames"))


def quality(path: Path):
    t = nfstrace.load(path)
    return assess_capture(t.messages, t.transactions, t.events, t.stats)


def findings(q) -> dict:
    return {f.kind: f for f in q.findings()}


def _undecidable(capture: Path) -> bool:
    """No TCP handshake, one L2 segment (TTLs initial) and no added delay: nothing in
    the capture tells client side from server side (call->reply vs reply->next call
    compares the server's time with the client's, not a round trip)."""
    truth = ground_truth(capture)
    return truth["transport"] == "udp" and not truth["impairment"]["added_rtt_ms"]


@pytest.mark.parametrize("capture", FULL_CAPTURES + S256_CAPTURES, ids=lambda p: p.name)
def test_capture_point_of_every_sample(capture: Path) -> None:
    (cap,) = [c for c in ground_truth(capture)["captures"] if c["file"] == capture.name]
    expected = cap["capture_point"].split(" side")[0]  # "client side: ..." / "server side: ..."
    if _undecidable(capture):
        expected = "unknown"  # better than a coin toss: say it cannot tell
    q = quality(capture)
    assert q.capture_point == expected
    f = findings(q)["capture_point"]
    assert f.details["capture_point"] == expected
    if expected == "unknown":
        assert "inconclusive: " in f.title and "pace: " in f.title


@pytest.mark.parametrize("side", ["client", "server"])
def test_capture_point_crafted(frames, side: str) -> None:
    q = quality(frames[f"point_{side}"])
    assert q.capture_point == side
    votes = dict(zip(q.evidence.method, q.evidence.vote, strict=True))
    assert votes == {"handshake": side, "ttl": side, "pace": side}


def test_no_evidence_means_unknown(frames) -> None:
    # the window_unknown capture: no handshake, TTLs both initial, one call
    q = quality(frames["window_unknown"])
    assert q.capture_point == "unknown"


def test_snaplen_hides_the_v41_stable_field() -> None:
    samples = SAMPLES
    cut = quality(samples / "v41-tcp-nfsrs-w1m-d0-l0.s256.pcap")
    assert cut.truncated_frames > 0 and cut.snaplens == [256]
    assert cut.writes_stable_unknown == cut.truncated_writes > 0
    f = findings(cut)["snaplen_truncation"]
    assert f.limits_conclusions and "stable_how" in f.title
    # NFSv3 keeps stable_how within 256 bytes: truncation, nothing hidden
    v3 = quality(samples / "v3-tcp-nfscp-w1m-d0-l0.s256.pcap")
    assert v3.truncated_writes > 0 and v3.writes_stable_unknown == 0
    assert not findings(v3)["snaplen_truncation"].limits_conclusions
    full = quality(samples / "v41-tcp-nfsrs-w1m-d0-l0.pcap")
    assert full.truncated_frames == 0 and "snaplen_truncation" not in findings(full)


def test_bytes_the_capture_missed(tmp_path: Path) -> None:
    # make_crafted's lost_write_segment: one MSS missing in each of two
    # connections, acknowledged by the server's replies
    path = mc.build_lost_write_segment(tmp_path)["lost_write_segment"]
    q = quality(path)
    assert (q.capture_missed_bytes, q.capture_missed_ranges) == (2 * mc.MSS, 2)
    assert findings(q)["capture_missed_bytes"].limits_conclusions
    clean = quality(
        Path(__file__).resolve().parent.parent / "sample-pcaps" / "v3-udp-py-w32k-d0-l0.pcap"
    )
    assert clean.capture_missed_bytes == 0 and clean.interface_drops == 0
    assert not any(f.limits_conclusions for f in clean.findings())
