"""``nfstrace watch`` says what the capture missed as it happens (issue 35, as
Zeek's capture-loss does): every interval the TCP holes the window's analysis
stepped over (bytes acknowledged that the capture never saw) as a share of the
frames seen, a warning over ``--loss-warn``; with ``-i`` tcpdump's "dropped by
kernel" asked for every interval (SIGUSR1); both in --json-lines and in the
Prometheus text."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_watch import SAMPLES, _json_lines, _watch

import nfstrace
from nfstrace.live import count_line
from nfstrace.parsers.capture import CaptureInfo, read_frames
from nfstrace.trace import AnalysisConfig
from nfstrace.watch import (
    CaptureLoss,
    Record,
    Watcher,
    WatchOptions,
    loss_text,
    records,
    write_pcap,
)

WRITE_1M = SAMPLES / "v3-tcp-nfscp-w1m-d0-l0.pcap"


def _with_holes(path: Path) -> int:
    """WRITE_1M without every 40th full-size segment (18 of them): holes the
    server's ACKs step over, as a capture that could not keep up leaves them.
    Returns the frames left."""
    frames = list(read_frames(str(WRITE_1M), 0, CaptureInfo(path=str(WRITE_1M))))
    big = [n for n, f in enumerate(frames) if len(f[2]) > 1000]
    gone = set(big[10::40])
    kept = [Record(f[0], n, f[1], bytes(f[2]), f[3]) for n, f in enumerate(frames) if n not in gone]
    write_pcap(path, kept, 1 << 18)
    return len(kept)


def test_capture_loss_adds_up_to_analyze(tmp_path: Path) -> None:
    """The intervals' holes are analyze's tcp_hole events on the same packets;
    an interval over --loss-warn is a warning line, one under it a plain line."""
    capture = tmp_path / "holes.pcap"
    kept = _with_holes(capture)
    trace = nfstrace.load(str(capture))
    ev = trace.events[trace.events["kind"].astype(str) == "tcp_hole"]
    assert len(ev) == trace.stats.tcp["holes_acked"] == 18  # (what the crafted capture holds)
    prom = tmp_path / "w.prom"
    out_json = tmp_path / "w.jsonl"
    rc, out, err = _watch(
        ["--interval", "10ms", "--json-lines", str(out_json), "--prometheus", str(prom)]
        + ["--alert-after", "1000"],
        capture.read_bytes(),
        cwd=tmp_path,
    )
    assert rc == 0, err
    objs = _json_lines(out_json)
    losses = [o["capture"] for o in objs if o["type"] == "interval"]
    assert sum(c["holes"] for c in losses) == len(ev)
    assert sum(c["hole_bytes"] for c in losses) == int(ev["length"].sum()) > 0
    assert sum(c["frames"] for c in losses) == kept
    assert all(c["kernel_dropped"] is None for c in losses)  # (no -i)
    said = [x for x in out.splitlines() if "capture loss" in x and "TCP hole" in x]
    over = [c for c in losses if c["loss_pct"] > 1]
    under = [c for c in losses if 0 < c["loss_pct"] <= 1]
    assert over and len([x for x in said if x.startswith("nfstrace: warning:")]) == len(over)
    assert len(said) == len(over) + len(under) + 1  # (+ the summary's)
    for c in over:
        assert f"capture loss {c['loss_pct']:.1f}%: {c['holes']} TCP hole" in out
    assert all("(over 1%, the interval's figures are short)" in x for x in said if "warning" in x)
    assert f"capture loss 2.17%: 18 TCP holes (26,064 bytes never captured) in {kept} frames" in out
    assert objs[-1]["capture"] == {"holes": 18, "hole_bytes": 26_064, "kernel_dropped": None}
    text = prom.read_text()
    assert "# TYPE nfstrace_capture_holes_total counter" in text
    assert "\nnfstrace_capture_holes_total 18\n" in text
    assert "\nnfstrace_capture_hole_bytes_total 26064\n" in text
    assert "nfstrace_capture_dropped_total" not in text  # (not known without -i)
    # a higher threshold: the same lines, none a warning
    rc, quiet, err = _watch(["--interval", "10ms", "--loss-warn", "50"], capture.read_bytes(),
                            cwd=tmp_path)  # fmt: skip
    assert rc == 0, err
    assert "warning" not in quiet and quiet.count("capture loss") == len(said)


def test_no_loss_no_line() -> None:
    """A capture that missed nothing: no capture-loss line, 0 in the JSON."""
    lines: list[str] = []
    objs: list[dict] = []

    class Sink:
        def write(self, text: str) -> None:
            objs.append(json.loads(text))

        def flush(self) -> None:
            pass

    options = WatchOptions(interval_ns=10_000_000, alert_after=1000, evidence_dir=None)
    watcher = Watcher(options, AnalysisConfig(), lines.append, Sink())  # type: ignore[arg-type]
    try:
        for record in records(read_frames(str(WRITE_1M), 0, CaptureInfo(path=str(WRITE_1M)))):
            watcher.feed(record)
        watcher.finish()
    finally:
        watcher.close()
    assert not [x for x in lines if "capture loss" in x or "dropped" in x]
    losses = [o["capture"] for o in objs if o["type"] == "interval"]
    assert losses and all(c["holes"] == 0 and c["loss_pct"] == 0 for c in losses)
    assert sum(c["frames"] for c in losses) == 847


def test_kernel_drops_per_interval(tmp_path: Path) -> None:
    """tcpdump's "dropped by kernel" so far, asked every interval: each
    interval says the drops since the one before (a warning: its figures are
    short), the JSON and the Prometheus counter carry them."""
    said = iter([None, 0, 5, 5, 12, 12, 12, 12, 12, 12, 12, 12])
    asked: list[int | None] = []

    def dropped() -> int | None:
        asked.append(next(said))
        return asked[-1]

    lines: list[str] = []
    prom = tmp_path / "w.prom"
    options = WatchOptions(interval_ns=10_000_000, alert_after=1000, evidence_dir=None)
    out_json = tmp_path / "w.jsonl"
    with out_json.open("w") as json_out:
        watcher = Watcher(options, AnalysisConfig(), lines.append, json_out, prometheus=prom,
                          kernel_dropped=dropped)  # fmt: skip
        try:
            for record in records(read_frames(str(WRITE_1M), 0, CaptureInfo(path=str(WRITE_1M)))):
                watcher.feed(record)
            watcher.finish()
            watcher.json_summary()
        finally:
            watcher.close()
    objs = _json_lines(out_json)
    drops = [o["capture"]["kernel_dropped"] for o in objs if o["type"] == "interval"]
    assert len(drops) == len(asked) >= 5
    assert drops[:5] == [None, 0, 5, 0, 7]
    warned = [x for x in lines if "dropped by kernel" in x]
    assert len(warned) == 2 and all(x.startswith("nfstrace: warning: ") for x in warned)
    assert "5 packets dropped by kernel (tcpdump)" in warned[0]
    assert "7 packets dropped by kernel (tcpdump) (the interval's figures are short)" in warned[1]
    assert objs[-1]["capture"]["kernel_dropped"] == 12
    assert "\nnfstrace_capture_dropped_total 12\n" in prom.read_text()


def test_loss_text() -> None:
    start = 1_700_000_000_000_000_000
    assert loss_text(start, CaptureLoss(100, 0, 0, 0), 1.0) is None
    assert loss_text(start, CaptureLoss(100, 1, 1448), 1.0) == (
        "22:13:20  capture loss 1.0%: 1 TCP hole (1,448 bytes never captured) in 100 frames"
    )
    over = loss_text(start, CaptureLoss(50, 2, 2896, 3), 1.0)
    assert over == (
        "nfstrace: warning: 22:13:20  capture loss 4.0%: 2 TCP holes (2,896 bytes never "
        "captured) in 50 frames; 3 packets dropped by kernel (tcpdump) (over 1%, the "
        "interval's figures are short)"
    )
    assert CaptureLoss(0, 3, 10).pct == 100.0


@pytest.mark.parametrize(
    ("line", "counts"),
    [
        (  # its answer to SIGUSR1 (tcpdump 4.99 on Linux)
            "tcpdump: 12 packets captured, 14 packets received by filter, 2 packets dropped "
            "by kernel",
            {"captured": 12, "received by filter": 14, "dropped by kernel": 2},
        ),
        ("1 packet captured", {"captured": 1}),  # (at the end: a line each)
        ("3 packets dropped by interface", {"dropped by interface": 3}),
        ("tcpdump: listening on w1, link-type EN10MB (Ethernet)", {}),
        ("12 packets captured, and more", {}),
    ],
)
def test_count_line(line: str, counts: dict[str, int]) -> None:
    assert count_line(line) == counts


PROM_BUCKET = re.compile(r'nfstrace_latency_seconds_bucket\{(.*),le="([^"]+)"\} (\d+)')
