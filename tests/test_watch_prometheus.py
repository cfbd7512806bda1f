"""``nfstrace watch``'s Prometheus text (issue 35): the latency histogram per
(client, server, op), cumulative over the run, equal to analyze's latencies on
the same packets; ``--prometheus-port`` serving the same text over HTTP."""

from __future__ import annotations

import re
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_watch import NFSTRACE, SAMPLES, _prometheus_samples, _watch

import nfstrace
from nfstrace.prometheus import LATENCY_BUCKETS, Metrics

COMMIT = SAMPLES / "causes" / "v3-tcp-nfscp-w64k-commit1200ms-d0-l0.pcap"


def test_latency_histogram_counts_as_analyze(tmp_path: Path) -> None:
    """Every series' buckets hold analyze's answered calls of that op within
    each bound (cumulative: le), +Inf and _count all of them; the 1.2 s COMMIT
    in the bucket of 3 s, not of 1 s."""
    prom = tmp_path / "w.prom"
    rc, _, err = _watch(
        ["--interval", "200ms", "--prometheus", str(prom), "--commit-threshold", "10s"]
        + ["--alert-after", "1000"],
        COMMIT.read_bytes(),
        cwd=tmp_path,
    )
    assert rc == 0, err
    families, samples = _prometheus_samples(prom.read_text())
    assert families["nfstrace_latency_seconds"] == "histogram"
    assert "nfstrace_latency_seconds" not in {n for n, _ in samples}  # (no summary's quantiles)
    tx = nfstrace.load(str(COMMIT)).transactions
    calls = tx[tx["n_calls"] > 0]
    ops = calls.groupby([calls["client"].astype(str), calls["server"].astype(str),
                         calls["op"].astype(str)])  # fmt: skip
    assert len(ops) >= 5
    bounds = [f"{b:g}" for b in LATENCY_BUCKETS] + ["+Inf"]
    for (client, server, op), g in ops:
        labels = {("client", client), ("server", server), ("op", op)}
        lat = g["latency_ns"].dropna().to_numpy(float) / 1e9
        got = [samples[("nfstrace_latency_seconds_bucket", frozenset(labels | {("le", le)}))]
               for le in bounds]  # fmt: skip
        want = [int((lat <= b).sum()) for b in LATENCY_BUCKETS] + [len(lat)]
        assert got == want, (op, got, want)
        assert samples[("nfstrace_latency_seconds_count", frozenset(labels))] == len(lat)
        total = samples[("nfstrace_latency_seconds_sum", frozenset(labels))]
        assert total == pytest.approx(lat.sum(), rel=1e-6, abs=1e-9)
    commit = {("client", "169.254.77.1"), ("server", "169.254.77.2"), ("op", "COMMIT")}
    assert samples[("nfstrace_latency_seconds_bucket", frozenset(commit | {("le", "1")}))] == 0
    assert samples[("nfstrace_latency_seconds_bucket", frozenset(commit | {("le", "3")}))] == 1


def test_histogram_bounds_are_inclusive_and_the_run_cumulative() -> None:
    """A latency equal to a bound is in its bucket (le), one over the last only
    in +Inf; two intervals add up; a series is 13 bucket lines whatever its calls."""
    metrics = Metrics()

    def interval(latencies_s: list[float], end_ns: int) -> None:
        n = len(latencies_s)
        metrics.add(
            pd.DataFrame(
                {
                    "client": ["c"] * n,
                    "server": ["s"] * n,
                    "op": ["WRITE"] * n,
                    "write_bytes": [0] * n,
                    "read_bytes": [0] * n,
                    "n_calls": [1] * n,
                    "latency_ns": pd.array([round(x * 1e9) for x in latencies_s], "Int64"),
                }
            ),
            end_ns,
        )

    interval([0.0001, 0.00010001, 0.001, 20.0], 1)
    interval([0.0001, 10.0] + [0.05] * 1000, 2)
    text = metrics.text({}, 0)
    buckets = dict(re.findall(r'_bucket\{.*,le="([^"]+)"\} (\d+)', text))
    assert len(buckets) == len(LATENCY_BUCKETS) + 1 == 12
    assert buckets["0.0001"] == "2" and buckets["0.0003"] == "3" and buckets["0.001"] == "4"
    assert buckets["0.03"] == "4" and buckets["0.1"] == "1004"
    assert buckets["10"] == "1005" and buckets["+Inf"] == "1006"
    assert 'nfstrace_latency_seconds_count{client="c",server="s",op="WRITE"} 1006' in text
    assert np.all(np.diff([int(v) for v in buckets.values()]) >= 0)


@pytest.mark.slow  # (wall-clock paced: seconds of a live run)
def test_prometheus_port_serves_the_text(tmp_path: Path) -> None:
    """--prometheus-port 127.0.0.1:0: the port said on standard error; GET
    /metrics answers the text the textfile holds, in the text format's content
    type; another path is a 404; the end of input ends the server with the run."""
    prom = tmp_path / "w.prom"
    watch = subprocess.Popen(
        [*NFSTRACE, "watch", "-", "--interval", "200ms", "--prometheus", str(prom)]
        + [
            "--prometheus-port",
            "127.0.0.1:0",
            "--commit-threshold",
            "10s",
            "--clock-grace",
            "0.2s",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    assert watch.stdin is not None and watch.stderr is not None
    try:
        said = watch.stderr.readline().decode()
        m = re.fullmatch(
            r"nfstrace: Prometheus metrics on (http://127\.0\.0\.1:\d+/metrics)\n", said
        )
        assert m, said
        url = m.group(1)
        with urllib.request.urlopen(url, timeout=30) as r:  # (before any interval)
            assert r.status == 200 and r.read().decode().startswith("#")
        watch.stdin.write(COMMIT.read_bytes())  # (the pipe left open: the clock ends intervals)
        watch.stdin.flush()
        served, deadline = "", time.monotonic() + 120
        while time.monotonic() < deadline:
            with urllib.request.urlopen(url, timeout=30) as r:
                served = r.read().decode()
                kind = r.headers["Content-Type"]
            if prom.exists() and "COMMIT" in served and served == prom.read_text():
                break
            time.sleep(0.2)
        assert "COMMIT" in served and served == prom.read_text()
        assert kind == "text/plain; version=0.0.4; charset=utf-8"
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(url.replace("/metrics", "/other"), timeout=30)
        assert e.value.code == 404
        watch.stdin.close()
        assert watch.wait(120) == 0, watch.stderr.read().decode()
    finally:
        if watch.poll() is None:
            watch.kill()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url, timeout=5)


@pytest.mark.parametrize("port", ["abc", "70000", "host:"])
def test_bad_prometheus_port_is_a_usage_error(port: str, tmp_path: Path) -> None:
    rc, _, err = _watch(["--prometheus-port", port], b"", cwd=tmp_path)
    assert rc == 2 and f"--prometheus-port {port}: give [HOST:]PORT" in err


def test_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        rc, _, err = _watch(["--prometheus-port", f"127.0.0.1:{port}"], b"", cwd=tmp_path)
    assert rc != 0 and "Traceback" not in err and err.strip().count("\n") == 0
    assert f"cannot listen: Address already in use (--prometheus-port 127.0.0.1:{port})" in err
