"""``nfstrace watch`` (issue 35): real captures fed through a pipe (fast and at
their recorded pace) against ``analyze`` on the same packets, a stall's alert
and its evidence, the ring's bounds, bad input."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import pytest
from crafted import make_crafted as mc

import nfstrace
from nfstrace.parsers.capture import CaptureInfo, read_frames
from nfstrace.trace import AnalysisConfig
from nfstrace.watch import NS, RECORD_OVERHEAD, Record, Ring, Watcher, WatchOptions, records

SAMPLES = Path(__file__).resolve().parent.parent / "sample-pcaps"
NFSTRACE = [sys.executable, "-c", "from nfstrace.cli import main; main()"]


def _watch(args: list[str], data: bytes | None = None, cwd: Path | None = None, feed=None):
    """nfstrace watch - ARGS with ``data`` written into its standard input (a pipe)."""
    proc = subprocess.Popen(
        [*NFSTRACE, "watch", "-", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
    )
    stdin = proc.stdin
    assert stdin is not None
    proc.stdin = None  # (fed by a thread: the lines are read meanwhile)

    def write() -> None:
        with contextlib.suppress(BrokenPipeError), stdin:
            if feed is not None:
                feed(stdin)
            else:
                stdin.write(data or b"")

    writer = threading.Thread(target=write)
    writer.start()
    out, err = proc.communicate(timeout=300)
    writer.join()
    return proc.returncode, out.decode(), err.decode()


def _json_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# Captures of a few hundred ms to 2 s, watched in intervals of 50 ms: several
# intervals each, every call answered well within the stall threshold.
PIPED = [
    "v3-tcp-nfscp-w64k-d2-l0.5.pcap",
    "v41-tcp-nfsrs-w1m-d0-l0.pcap",
    "causes/v3-tcp-nfsrs-w1m-rate50mbit-d0-l0.pcap",
    pytest.param("kernel/kvm-v3-ganesha-d0-l1.pcap", marks=pytest.mark.slow),  # (2 s: 40 windows)
]


@pytest.mark.parametrize("name", PIPED)
def test_intervals_add_up_to_analyze(name: str, tmp_path: Path) -> None:
    path = SAMPLES / name
    iv = 50_000_000
    out_json = tmp_path / "w.jsonl"
    rc, out, err = _watch(
        ["--interval", "50ms", "--stall-threshold", "500ms", "--json-lines", str(out_json)]
        + ["--alert-after", "1000"],  # (no verdict alert: no evidence's report to write)
        path.read_bytes(),
        cwd=tmp_path,
    )
    assert rc == 0, err
    objs = _json_lines(out_json)
    intervals = [o for o in objs if o["type"] == "interval"]
    times = [f[0] for f in read_frames(str(path), 0, CaptureInfo(path=str(path)))]
    assert len(intervals) == times[-1] // iv - times[0] // iv + 1
    assert [o["start_ns"] for o in intervals] == [
        times[0] // iv * iv + k * iv for k in range(len(intervals))
    ]
    tx = nfstrace.load(str(path)).transactions
    pairs = [p for o in intervals for p in o["pairs"]]
    assert sum(p["write_bytes"] for p in pairs) == int(tx["write_bytes"].sum()) > 0
    assert sum(p["calls"] for p in pairs) == int((tx["n_calls"] > 0).sum())
    summary = objs[-1]
    assert summary["type"] == "summary" and summary["frames"] == len(times)
    assert summary["write_bytes"] == int(tx["write_bytes"].sum())
    # one plain line per pair and interval (or "no RPC calls"), then the summary
    lines = out.splitlines()
    assert len([x for x in lines if "Mbit/s" in x or "no RPC calls" in x]) == sum(
        max(1, len(o["pairs"])) for o in intervals
    )
    assert lines[-2].startswith(f"watched {len(times):,} frames")


def _paced(data: bytes, speed: float = 1.0):
    """A feeder writing a capture's records at their recorded pace (file order)."""
    records = []
    pos = 24
    while pos < len(data):
        sec, frac, caplen, _ = (int.from_bytes(data[pos + i : pos + i + 4], "little")
                                for i in (0, 4, 8, 12))  # fmt: skip
        records.append((sec + frac / 1e6, data[pos : pos + 16 + caplen]))
        pos += 16 + caplen

    def feed(stdin) -> None:
        stdin.write(data[:24])
        stdin.flush()
        start, t0 = time.monotonic(), records[0][0]
        for t, rec in records:
            wait = (t - t0) / speed - (time.monotonic() - start)
            if wait > 0:
                time.sleep(wait)
            stdin.write(rec)
            stdin.flush()

    return feed


@pytest.mark.slow  # (two runs, two evidence reports: 20-40 s)
def test_paced_and_fast_give_the_same_lines(tmp_path: Path) -> None:
    """Intervals are capture time: the commit1200ms capture (1.2 s) fed at its
    pace gives the lines it gives fed at once, alerts and evidence included."""
    data = (SAMPLES / "causes" / "v3-tcp-nfscp-w64k-commit1200ms-d0-l0.pcap").read_bytes()
    assert int.from_bytes(data[:4], "little") == 0xA1B2C3D4  # (the feeder reads microseconds)
    args = ["--interval", "200ms", "--commit-threshold", "1s"]
    (tmp_path / "fast").mkdir()
    (tmp_path / "paced").mkdir()
    rc, fast, err = _watch(args, data, cwd=tmp_path / "fast")
    assert rc == 0, err
    started = time.monotonic()
    rc, paced, err = _watch(args, cwd=tmp_path / "paced", feed=_paced(data))
    assert rc == 0, err
    assert time.monotonic() - started > 1.2  # (it was fed at its pace)
    assert paced == fast
    assert "ALERT commit" in fast  # the 1.2 s COMMIT
    assert "COMMIT xid" in fast


def _stalled_capture(path: Path) -> tuple[int, int]:
    """NFSv3 over TCP: WRITEs answered, one WRITE never answered, then 8 s later
    GETATTRs answered.  Returns (the stalled call's xid, its frame)."""
    cap = mc.Capture()
    conn = mc.TcpConn(cap, 900)
    conn.handshake()
    for xid in range(0x100, 0x105):
        conn.client_send(mc.record(mc.write_call(xid, 4096)))
        conn.server_send(mc.record(mc.write_reply(xid, 4096)))
    stalled = 0x5757
    frame = conn.client_send(mc.record(mc.write_call(stalled, 4096)))
    assert frame is not None
    for xid in range(0x200, 0x204):
        conn.client_send(mc.record(mc.getattr_call(xid)))
        conn.server_send(mc.record(mc.getattr_reply(xid)))
    cap.frames = [(t + (8 * NS if n > frame else 0), d, w)
                  for n, (t, d, w) in enumerate(cap.frames, 1)]  # fmt: skip
    cap.write(path)
    return stalled, frame


@pytest.mark.slow  # (the evidence's HTML report: 15-25 s)
def test_stall_alert_keeps_the_evidence(tmp_path: Path) -> None:
    capture = tmp_path / "stall.pcap"
    xid, frame = _stalled_capture(capture)
    evidence = tmp_path / "evidence"
    got = tmp_path / "on-alert.txt"
    code = f"import sys, pathlib; pathlib.Path({json.dumps(str(got))}).write_text(sys.argv[1])"
    hook = f"{sys.executable} -c '{code}'"
    rc, out, err = _watch(
        ["--interval", "1s", "--stall-threshold", "5s", "--evidence-dir", str(evidence),
         "--on-alert", hook, "--json-lines", str(tmp_path / "w.jsonl")],
        capture.read_bytes(),
        cwd=tmp_path,
    )  # fmt: skip
    assert rc == 0, err
    alerts = [line for line in out.splitlines() if line.startswith("ALERT stall")]
    assert len(alerts) == 1, out
    assert f"WRITE xid 0x{xid:08x} no reply for" in alerts[0]
    assert f"(frames {frame})" in alerts[0]
    pcaps = sorted(evidence.glob("alert-*.pcap"))
    assert len(pcaps) == 1 and f"evidence {pcaps[0]}" in alerts[0]
    assert pcaps[0].with_name(pcaps[0].name + ".report.html").stat().st_size > 10_000
    assert got.read_text() == str(pcaps[0])  # --on-alert ran with the pcap's path
    tx = nfstrace.load(str(pcaps[0])).transactions  # analyze reads it
    row = tx[tx["xid"] == xid]
    assert len(row) == 1 and int(row["n_replies"].iloc[0]) == 0
    (alert,) = [o for o in _json_lines(tmp_path / "w.jsonl") if o["type"] == "alert"]
    assert alert["kind"] == "stall" and alert["frames"] == [frame]
    assert alert["evidence"] == str(pcaps[0])


def test_no_stall_when_answered_in_time(tmp_path: Path) -> None:
    """The same capture with a 10 s threshold: no alert, no evidence."""
    capture = tmp_path / "stall.pcap"
    _stalled_capture(capture)
    rc, out, err = _watch(["--interval", "1s", "--stall-threshold", "10s"],
                          capture.read_bytes(), cwd=tmp_path)  # fmt: skip
    assert rc == 0, err
    assert "ALERT" not in out and "alerts: stall 0, commit 0, verdict 0" in out
    assert not (tmp_path / "nfstrace-watch").exists()


def _record(ts_s: float, size: int, n: int) -> Record:
    return Record(round(ts_s * NS), n, 1, b"x" * size, size)


def test_ring_holds_at_most_keep_and_max_bytes() -> None:
    ring = Ring(keep_ns=5 * NS, max_bytes=10_000)
    for n in range(1, 2001):
        ring.add(_record(n * 0.01, 84, n))  # 284 bytes each in memory (84 + 200), 100 a second
        oldest, newest = ring.records[0].ts_ns, ring.records[-1].ts_ns
        assert newest - oldest <= 5 * NS
        assert ring.bytes == sum(r.memory for r in ring.records) <= 10_000
    assert len(ring.records) == 10_000 // (84 + RECORD_OVERHEAD)  # (5 s would be 500 records)
    assert ring.dropped == 2000 - len(ring.records)
    ring = Ring(keep_ns=2 * NS, max_bytes=1 << 30)
    for n in range(1, 2001):
        ring.add(_record(n * 0.01, 84, n))
    assert len(ring.records) == 201  # the time bound: 20.00 s back to 18.00 s
    assert [r.frame for r in ring.between(19 * NS, 19 * NS + 50_000_000)] == list(range(1900, 1905))


def test_record_memory_is_what_the_ring_takes() -> None:
    """--keep-bytes bounds the ring's memory: a record's ``memory`` is within
    15% of what it takes (tracemalloc), for small frames (where the objects
    around the data weigh most) and large ones."""
    for size in (60, 1500):
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            ring = Ring(keep_ns=1 << 62, max_bytes=1 << 40)
            for n in range(1, 20_001):
                ring.add(
                    Record(1_700_000_000 * NS + n * 1000, 100_000 + n, 1, bytes(size), 5000 + n)
                )
            taken = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert abs(ring.bytes - taken) < 0.15 * taken, (size, ring.bytes, taken)


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b"", "empty file"),
        (b"this is not a capture", "not a pcap or pcapng capture file"),
        (b"\x1f\x8b\x08\x00" + b"\x00" * 40, "gzip-compressed"),
    ],
)
def test_bad_input_is_one_line(data: bytes, said: str, tmp_path: Path) -> None:
    rc, _, err = _watch([], data, cwd=tmp_path)
    assert rc == 3
    assert err.strip().count("\n") == 0 and said in err and "Traceback" not in err


def test_bad_option_is_a_usage_error(tmp_path: Path) -> None:
    rc, _, err = _watch(["--interval", "0s"], b"", cwd=tmp_path)
    assert rc == 2 and "--interval" in err


def _watched(path: Path, options: WatchOptions) -> list[str]:
    """Lines of a Watcher fed a capture in this process (no evidence written)."""
    lines: list[str] = []
    watcher = Watcher(options, AnalysisConfig(), lines.append)
    try:
        for record in records(read_frames(str(path), 0, CaptureInfo(path=str(path)))):
            watcher.feed(record)
        watcher.finish()
        lines += watcher.summary()
    finally:
        watcher.close()
    return lines


@pytest.mark.parametrize(
    ("name", "what"),
    [
        ("v3-tcp-nfscp-w64k-d2-l0.5.pcap", r"(\d+) TCP segments? re-sent of (\d+)"),
        ("causes/v3-udp-py-w32k-mtu1000-d2-l0.5.pcap", r"(\d+) RPC re-sends? of (\d+) sends"),
    ],
)
def test_resend_alert_on_lossy_samples(name: str, what: str) -> None:
    """--resend-alert: one line per pair and interval over the share, the
    re-sends it counts adding up to analyze's; none above the share."""
    path = SAMPLES / name
    trace = nfstrace.load(str(path))
    tx, ev = trace.transactions, trace.events
    rpc = int((tx["n_calls"] - 1).clip(lower=0).sum())
    tcp = int((ev["kind"].astype(str) == "tcp_retransmission").sum())
    assert (rpc, tcp) in ((0, 4), (3, 0))  # (what the samples hold)
    options = WatchOptions(interval_ns=100_000_000, alert_after=1000, evidence_dir=None)
    lines = _watched(path, dataclasses.replace(options, resend_pct=0.1))
    alerts = [x for x in lines if x.startswith("ALERT resend")]
    assert alerts and len(alerts) <= 4
    said = [re.search(what, a) for a in alerts]
    assert all(m is not None for m in said), alerts
    assert sum(int(m.group(1)) for m in said if m) == (tcp or rpc)
    assert all("169.254.77.1 → 169.254.77.2" in a and "(over 0.1%)" in a for a in alerts)
    assert f"resend {len(alerts)}" in lines[-1]
    quiet = _watched(path, dataclasses.replace(options, resend_pct=10))  # (7.5% at most)
    assert not [x for x in quiet if x.startswith("ALERT")]


PROM_SAMPLE = re.compile(r'([a-z_]+)(?:\{((?:[a-z]+="[^"]*",?)*)\})? (\S+)')


def _prometheus_samples(text: str) -> tuple[dict[str, str], dict[tuple[str, frozenset], float]]:
    """The text format's families (name -> type) and samples ((name, labels) ->
    value), every sample checked to come after its family's HELP and TYPE."""
    families: dict[str, str] = {}
    samples: dict[tuple[str, frozenset], float] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            families[name] = kind
            continue
        if line.startswith("# HELP "):
            continue
        m = PROM_SAMPLE.fullmatch(line)
        assert m, line
        name, labels, value = m.groups()
        family = re.sub(r"_(sum|count|bucket)$", "", name)
        assert name in families or families.get(family) == "histogram", line
        pairs = frozenset(re.findall(r'([a-z]+)="([^"]*)"', labels or ""))
        samples[(name, pairs)] = float(value)
    return families, samples


def test_prometheus_textfile_counts_as_analyze(tmp_path: Path) -> None:
    """--prometheus: the text format (every sample after its family's HELP and
    TYPE), per pair and op counters equal to analyze's on the same packets,
    written by rename (no temporary file left)."""
    path = SAMPLES / "causes" / "v3-udp-py-w32k-mtu1000-d2-l0.5.pcap"
    prom = tmp_path / "nfstrace.prom"
    rc, _, err = _watch(["--interval", "100ms", "--prometheus", str(prom)], path.read_bytes(),
                        cwd=tmp_path)  # fmt: skip
    assert rc == 0, err
    assert [p.name for p in tmp_path.iterdir() if p.name != "nfstrace-watch"] == [prom.name]
    families, samples = _prometheus_samples(prom.read_text())
    assert families["nfstrace_calls_total"] == "counter"
    assert families["nfstrace_latency_seconds"] == "histogram"
    tx = nfstrace.load(str(path)).transactions
    calls = tx[tx["n_calls"] > 0]

    def total(name: str, **want: str) -> float:
        return sum(v for (n, ls), v in samples.items() if n == name and set(want.items()) <= ls)

    assert total("nfstrace_calls_total") == len(calls) == 41
    for op, g in calls.groupby(calls["op"].astype(str)):
        assert total("nfstrace_calls_total", op=op, client="169.254.77.1") == len(g)
        assert total("nfstrace_latency_seconds_count", op=op) == g["latency_ns"].notna().sum()
    assert total("nfstrace_bytes_total", op="WRITE") == int(calls["write_bytes"].sum()) > 0
    assert total("nfstrace_resent_total", op="WRITE") == 3
    assert total("nfstrace_frames_total") == 1240
    latency = calls[calls["op"].astype(str) == "WRITE"]["latency_ns"].sum() / 1e9
    assert total("nfstrace_latency_seconds_sum", op="WRITE") == pytest.approx(latency, rel=1e-6)
