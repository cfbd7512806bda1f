"""Every kind of finding the diagnosis reports: shown on a capture that has it, and
absent from one that must not have it (chosen to be close: a duplicate reply vs a
reused xid, mirror copies vs TCP retransmissions, a short zero window vs a stall, ...).

Captures: the lab samples and the crafted ones of tests/crafted; the few findings no
capture provokes (a stall nothing explains, random offsets) come from hand-built
transaction tables through the module that reports them.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from conftest import SAMPLES, load_sample

import nfstrace
from nfstrace.analysis.findings import Finding
from nfstrace.analysis.stalls import CAUSES, UNKNOWN, find_stalls
from nfstrace.analysis.workload import analyze_workload
from nfstrace.analysis.writes import analyze_writes

try:
    from crafted import make_backends as mb
    from crafted import make_crafted as mc
    from crafted import make_damaged as md
    from crafted import make_frames as mf
    from crafted import make_nfs4_orphans as mo
    from crafted import make_rpc_ports as mp
    from crafted import make_writes as mw
except ImportError:  # tests/ not on sys.path: import as a package
    from tests.crafted import make_backends as mb
    from tests.crafted import make_crafted as mc
    from tests.crafted import make_damaged as md
    from tests.crafted import make_frames as mf
    from tests.crafted import make_nfs4_orphans as mo
    from tests.crafted import make_rpc_ports as mp
    from tests.crafted import make_writes as mw

MS = 1_000_000
BUILDERS = {
    "frames": mf,
    "writes": mw,
    "crafted": mc,
    "backends": mb,
    "nfs4": mo,
    "rpc_ports": mp,
}


@pytest.fixture(scope="module")
def captures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """'module:name' -> crafted capture, 'sample:file' -> lab capture."""
    out: dict[str, Path] = {f"sample:{p.name}": p for p in SAMPLES.glob("*.pcap")}
    for prefix, module in BUILDERS.items():
        built = module.build_all(tmp_path_factory.mktemp(prefix))
        out |= {f"{prefix}:{name}": path for name, path in built.items()}
    return out


@cache
def _kinds_of_capture(path: Path) -> frozenset[str]:
    """What the analysis modules say of a capture (their notes; the diagnosis
    picks from them: test_diagnosis.py)."""
    return frozenset(f.kind for f in load_sample(path).diagnosis.notes)


def _unexplained_stall() -> frozenset[str]:
    """A WRITE answered after 1 s: no COMMIT, re-send, delay status or zero window."""
    rows = [{"op": "WRITE", "t_call_ns": i * MS, "t_reply_ns": i * MS + MS // 2} for i in range(5)]
    rows.append({"op": "WRITE", "t_call_ns": 5 * MS, "t_reply_ns": 1_005 * MS})
    rows += [
        {"op": "WRITE", "t_call_ns": (1_006 + i) * MS, "t_reply_ns": (1_006 + i) * MS + MS // 2}
        for i in range(5)
    ]
    for r in rows:
        r["count"] = 8
    return frozenset(f.kind for f in find_stalls(mw.transactions_table(rows), None).findings())


def _offsets_writes(offsets: list[int]) -> frozenset[str]:
    rows = [
        {"op": "WRITE", "t_call_ns": i * 100, "t_reply_ns": i * 100 + 50, "count": 10,
         "offset": o * 10, "fh": "0a"}
        for i, o in enumerate(offsets)
    ]  # fmt: skip
    return frozenset(f.kind for f in analyze_writes(mw.transactions_table(rows)).findings())


def _saturating_load() -> frozenset[str]:
    """Windows of 1 ms at growing load: latency flat at 0.2 ms up to 5 calls a
    window, five times that above (test_workload.py has the numbers)."""
    rows, t = [], 0
    for load in range(1, 11):
        latency = MS // 5 if load <= 5 else MS
        rows += [
            {"op": "WRITE", "t_call_ns": t + i * (MS // load), "t_reply_ns": t + i * (MS // load)
             + latency, "count": 8}
            for i in range(load)
        ]  # fmt: skip
        t += MS
    return frozenset(
        f.kind for f in analyze_workload(mw.transactions_table(rows), window_ns=MS).findings()
    )


def _clock_backwards() -> frozenset[str]:
    """Every frame stamped 1 ms before the previous one (make_damaged)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "backwards.pcap"
        path.write_bytes(md.pcap_bytes(md.clock_running_backwards()))
        return _kinds_of_capture(path)


def _garbage_reply_count() -> frozenset[str]:
    """A 512-byte WRITE whose reply claims 4,000,000,000 bytes written."""
    cap = mc.Capture()
    cap.add(mc.eth(mc.udp_pkt(mc.CLIENT, mc.SERVER, 800, mc.NFS_PORT, mc.write_call(9, 512))))
    reply = mc.write_reply(9, 4_000_000_000)
    cap.add(mc.eth(mc.udp_pkt(mc.SERVER, mc.CLIENT, mc.NFS_PORT, 800, reply)))
    with tempfile.TemporaryDirectory() as tmp:
        return _kinds_of_capture(cap.write(Path(tmp) / "garbage.pcap"))


TABLES: dict[str, Callable[[], frozenset[str]]] = {
    "table:garbage_reply_count": _garbage_reply_count,
    "table:saturating_load": _saturating_load,
    "table:clock_backwards": _clock_backwards,
    "table:unexplained_stall": _unexplained_stall,
    "table:random_offsets": lambda: _offsets_writes(
        [int(b) for b in np.random.default_rng(7).permutation(40)]
    ),
    "table:sequential_offsets": lambda: _offsets_writes(list(range(40))),
}

# kind -> (a capture that has it, a capture that must not have it, why not)
CASES: dict[str, tuple[str, str, str]] = {
    # repeats
    "rpc_retransmission": (
        "frames:udp_backoff",
        "sample:v3-tcp-nfscp-w64k-d2-l0.5.pcap",
        "TCP re-sent the dropped segments, the client did not re-send a call",
    ),
    "duplicate_reply": ("crafted:dup_reply", "backends:xid_reuse", "an xid reused later"),
    "tcp_retransmission": ("frames:tcp_retransmission", "frames:mirror", "mirror copies"),
    "mirror_duplicates": ("frames:mirror", "crafted:dup_reply", "a reply sent twice 2 ms apart"),
    # fragments
    "ip_fragmentation": ("crafted:udp_frag_v4", "sample:v3-tcp-nfscp-w1m-d0-l0.pcap", "TCP"),
    "ip_fragments_lost": (
        "sample:v3-udp-py-w32k-mtu1000-d2-l0.5.server-side.pcap",
        "sample:v3-udp-py-w32k-mtu1000-d2-l0.5.pcap",
        "the same run before the drop point: every fragment",
    ),
    "ip_fragments_not_captured": (
        "rpc_ports:udp_write_fragment_missed",
        "rpc_ports:udp_write_fragment_resent",
        "the network lost the fragment: the client re-sent the call",
    ),
    # stalls, one per cause, and the throughput between them
    "commit_stall": ("writes:commit_stall", "writes:verifier_change", "short COMMITs"),
    "retransmission_stall": (
        "writes:retransmission",
        "crafted:retrans_new_conn",
        "a re-sent GETATTR: no WRITE progress waits on it",
    ),
    "server_delay_stall": ("writes:jukebox", "writes:client_idle", "an idle client"),
    "zero_window_stall": (
        "writes:zero_window",
        "frames:zero_window",
        "a zero window shorter than the stall threshold",
    ),
    "client_idle_stall": (
        "writes:client_idle",
        "writes:jukebox",
        "the idle time is the client's back-off after JUKEBOX: the server's doing",
    ),
    "unknown_stall": ("table:unexplained_stall", "writes:commit_stall", "the COMMIT explains it"),
    "stall_throughput": ("writes:commit_stall", "writes:window", "no stall"),
    # pace
    "sequential_writes": ("writes:client_idle", "writes:window", "4 WRITEs in flight"),
    "write_concurrency": ("writes:window", "writes:client_idle", "one WRITE at a time"),
    "idle_time": ("writes:client_idle", "writes:window", "the client kept WRITEs going"),
    # writes
    "verifier_change": ("writes:verifier_change", "writes:commit_stall", "one verifier"),
    "write_errors": ("writes:jukebox", "writes:commit_stall", "every WRITE succeeded"),
    "stable_writes": ("writes:verifier_change", "writes:commit_stall", "UNSTABLE only"),
    "commits": ("writes:commit_stall", "writes:window", "no COMMIT"),
    "random_writes": ("table:random_offsets", "table:sequential_offsets", "sequential"),
    "writes_without_call": (
        "nfs4:nfs40_orphans_s256",
        "writes:commit_stall",
        "every WRITE call captured",
    ),
    # transport
    "tcp_zero_window": ("frames:zero_window", "frames:window_full", "a full, not a zero, window"),
    "tcp_window_full": ("frames:window_full", "frames:zero_window", "a zero, not a full, window"),
    "tcp_hole": ("crafted:lost_record_mark", "crafted:out_of_order", "late, not missing, bytes"),
    "tcp_retransmission_delay": ("frames:tcp_retransmission", "frames:mirror", "mirror copies"),
    # capture quality
    "capture_drops": ("crafted:pcapng", "crafted:pcap_le", "no interface statistics"),
    "capture_missed_bytes": (
        "crafted:lost_write_segment",
        "crafted:lost_record_mark",
        "a hole the receiver did not acknowledge: lost before the capture point",
    ),
    "snaplen_truncation": ("crafted:snaplen", "crafted:pcap_le", "whole frames"),
    "long_silence": (
        "writes:commit_stall",
        "writes:client_idle",
        "the 1 s silence has nothing outstanding: the client paused",
    ),
    # model and workload
    "model_cannot_estimate": ("crafted:pcap_le", "sample:v3-udp-py-w32k-d2-l0.pcap", "32 WRITEs"),
    "model_dominant_term": ("sample:v3-udp-py-w32k-d2-l0.pcap", "crafted:pcap_le", "no WRITEs"),
    "model_mismatch": (
        "sample:v3-udp-py-w32k-win16-d0-l0.pcap",
        "sample:v3-udp-py-w32k-d10-l0.pcap",
        "3 WRITEs in flight over a 10 ms round trip explain the throughput (within 14%)",
    ),
    "workload_mix": ("sample:v3-tcp-nfscp-w1m-d0-l0.pcap", "crafted:merge_b", "no calls"),
    "workload_saturation": (
        "table:saturating_load",
        "sample:v3-udp-py-w32k-mtu1000-d2-l0.5.pcap",
        "the slow calls are re-sent ones: their latency is a timeout, not load",
    ),
    "implausible_reply_count": (
        "table:garbage_reply_count",
        "sample:v3-tcp-nfscp-w1m-d0-l0.pcap",
        "every reply counts what its call carried",
    ),
    "clock_backwards": (
        "table:clock_backwards",
        "sample:v3-udp-py-w32k-d2-l0.pcap",
        "every reply stamped after its call",
    ),
}


def kinds(captures: dict[str, Path], source: str) -> frozenset[str]:
    if source in TABLES:
        return TABLES[source]()
    return _kinds_of_capture(captures[source])


@pytest.mark.parametrize("kind", CASES)
def test_finding_shown_where_it_happens_and_only_there(
    captures: dict[str, Path], kind: str
) -> None:
    has, has_not, why_not = CASES[kind]
    assert kind in kinds(captures, has), f"{kind} missing on {has}"
    assert kind not in kinds(captures, has_not), f"{kind} on {has_not} ({why_not})"


def test_every_kind_of_finding_is_covered() -> None:
    """The kinds the analysis modules can report are those above, besides the capture
    point (always stated), Little's law (a given outstanding count: test_workload.py)
    and the diagnosis's own: the verdict, one per budget cause and the ceiling's
    (``bandwidth``: test_diagnosis.py), and those of --mountstats (test_mounts.py)."""
    source = "\n".join(
        p.read_text() for p in (Path(nfstrace.__file__).parent / "analysis").glob("*.py")
    )
    literal = set(re.findall(r'^\s+kind="(\w+)",\s*$', source, re.MULTILINE))
    per_cause = {f"{cause}_stall" for cause in (*CAUSES, UNKNOWN)}
    own = {"capture_point", "littles_law_mismatch", "verdict", "bandwidth"}
    own |= {"mountstats", "slot_queue", "transmit_queue", "mountstats_unmatched"}  # (--mountstats)
    assert literal | per_cause == {*CASES, *own}


def test_a_finding_says_which_frames_to_open() -> None:
    """Findings name frame numbers (issue 18), in frame order, once each; none
    when the finding has no frames."""
    f = Finding("loss_recovery", "x", details={"frames": [921, 197, 751, 197, -1]})
    assert f.evidence() == "frames 197, 751, 921"
    assert Finding("k", "x", details={"frames": [5]}).evidence() == "frame 5"
    assert Finding("k", "x").evidence() == ""
