"""``nfstrace watch --prometheus FILE`` / ``--prometheus-port PORT``: the
run's counters in the Prometheus text exposition format (version 0.0.4), as
node_exporter's textfile collector reads it (``--collector.textfile.directory``;
the file named ``*.prom``), or served over HTTP for Prometheus to scrape
(``GET /metrics``).

Written directly (the format is a few lines of text; no prometheus_client to
depend on), after every interval: the file whole and atomically (a temporary
file beside it renamed over it, so the collector never reads half a file);
the HTTP server (``http.server`` in a daemon thread) answers with the text of
the last interval.

Metrics (labels client, server, op: the calls that started in the intervals
reported so far, as the interval lines count them):

- ``nfstrace_calls_total``: calls.
- ``nfstrace_bytes_total``: WRITE and READ data bytes of those calls.
- ``nfstrace_resent_total``: RPC re-sends (sends beyond a call's first).
- ``nfstrace_latency_seconds``: a histogram of the answered calls' latency
  over the run, ``LATENCY_BUCKETS`` (100 µs to 10 s, two a decade): ``_bucket``
  (cumulative, ``le``), ``_sum``, ``_count``.  A histogram rather than a summary
  (a metric name has one type): buckets add up across series and over time, so
  a dashboard takes ``histogram_quantile(0.99, sum by (le, op)
  (rate(nfstrace_latency_seconds_bucket[5m])))`` over any pairs and any span;
  a summary's quantiles (the earlier textfile gave the last interval's) add up
  over nothing.  The quantiles of one interval are in the lines and
  ``--json-lines`` (exact: see ``nfstrace.watch``).
- ``nfstrace_capture_holes_total``, ``nfstrace_capture_hole_bytes_total``: TCP
  holes, stream bytes never captured (``watch.CaptureLoss``):
  ``rate(nfstrace_capture_holes_total) / rate(nfstrace_frames_total)`` is the
  capture loss;
  ``nfstrace_capture_dropped_total``: with ``-i``, tcpdump's "dropped by
  kernel" (libpcap's ps_drop).
- ``nfstrace_alerts_total`` (label kind): alerts said.
- ``nfstrace_series_evicted_total``: label sets dropped, the least recently
  called first, to keep at most ``Metrics.max_series`` (10,000).
- ``nfstrace_frames_total``: frames watched; ``nfstrace_interval_end_seconds``:
  the capture time (Unix seconds) the last reported interval ended.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

Labels = tuple[str, str, str]  # client, server, op
# The latency histogram's upper bounds (seconds), two a decade from 100 µs (a
# reply from a server's cache on a LAN) to 10 s (past the stall threshold);
# +Inf after them.  Fixed: series add up only with the same buckets.
LATENCY_BUCKETS = (0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass
class OpCounts:
    calls: int = 0
    bytes: int = 0
    resent: int = 0
    latency_sum_s: float = 0.0
    latency_count: int = 0
    # calls answered within each of LATENCY_BUCKETS (not cumulative; +Inf: latency_count)
    buckets: list[int] = field(default_factory=lambda: [0] * len(LATENCY_BUCKETS))


@dataclass
class Metrics:
    """The run's counters, per client, server and op: at most ``max_series``
    label sets, the least recently called dropped first (``evicted`` counts
    them; a dropped series starts again from 0 if its op is called again, as
    a restarted exporter's would)."""

    ops: dict[Labels, OpCounts] = field(default_factory=dict)  # least recently called first
    interval_end_ns: int = 0
    max_series: int = 10_000
    evicted: int = 0
    # what the capture missed (watch.CaptureLoss summed)
    holes: int = 0
    hole_bytes: int = 0
    kernel_dropped: int | None = None  # (None: not known, no -i)

    def add_loss(self, loss: Any) -> None:
        """An interval's ``watch.CaptureLoss`` counted."""
        self.holes += loss.holes
        self.hole_bytes += loss.hole_bytes
        if loss.kernel_dropped is not None:
            self.kernel_dropped = (self.kernel_dropped or 0) + loss.kernel_dropped

    def add(self, calls: pd.DataFrame, end_ns: int) -> None:
        """An interval's calls (transactions rows) counted; its end noted."""
        self.interval_end_ns = end_ns
        if calls.empty:
            return
        keys = [calls["client"].astype(str), calls["server"].astype(str), calls["op"].astype(str)]
        for (client, server, op), g in calls.groupby(keys, sort=False):
            c = self.ops.pop((client, server, op), None) or OpCounts()
            self.ops[(client, server, op)] = c  # (the most recently called: last)
            c.calls += len(g)
            c.bytes += int(g["write_bytes"].sum() + g["read_bytes"].sum())
            c.resent += int((g["n_calls"] - 1).clip(lower=0).sum())
            lat = g["latency_ns"].dropna().to_numpy(float) / 1e9
            if len(lat):
                c.latency_sum_s += float(lat.sum())
                c.latency_count += len(lat)
                # (le: a latency equal to a bound is in its bucket)
                at = np.searchsorted(LATENCY_BUCKETS, lat, side="left")
                within = np.bincount(at, minlength=len(LATENCY_BUCKETS) + 1)
                c.buckets = [b + int(n) for b, n in zip(c.buckets, within, strict=False)]
        while len(self.ops) > self.max_series:
            del self.ops[next(iter(self.ops))]
            self.evicted += 1

    def text(self, alerts: Mapping[str, int], frames: int) -> str:
        """The exposition text."""
        out: list[str] = []

        def family(name: str, kind: str, what: str) -> None:
            out.append(f"# HELP {name} {what}")
            out.append(f"# TYPE {name} {kind}")

        ops = sorted(self.ops.items())
        for name, what, value in (
            ("nfstrace_calls_total", "RPC calls started", lambda c: c.calls),
            ("nfstrace_bytes_total", "WRITE and READ data bytes of the calls", lambda c: c.bytes),
            ("nfstrace_resent_total", "RPC re-sends (sends beyond the first)", lambda c: c.resent),
        ):
            family(name, "counter", what)
            out += [f"{name}{{{_labels(k)}}} {value(c)}" for k, c in ops]
        name = "nfstrace_latency_seconds"
        family(name, "histogram", "call to reply of the answered calls")
        for k, c in ops:
            below = 0
            for le, n in zip(LATENCY_BUCKETS, c.buckets, strict=True):
                below += n
                out.append(f'{name}_bucket{{{_labels(k)},le="{le:g}"}} {below}')
            out.append(f'{name}_bucket{{{_labels(k)},le="+Inf"}} {c.latency_count}')
            out.append(f"{name}_sum{{{_labels(k)}}} {_number(c.latency_sum_s)}")
            out.append(f"{name}_count{{{_labels(k)}}} {c.latency_count}")
        for part, what, total in (
            ("holes", "TCP holes: stream bytes never captured (ranges)", self.holes),
            ("hole_bytes", "bytes in the TCP holes", self.hole_bytes),
            ("dropped", "packets dropped by the kernel before tcpdump read them (-i)",
             self.kernel_dropped),
        ):  # fmt: skip
            if total is not None:
                family(f"nfstrace_capture_{part}_total", "counter", what)
                out.append(f"nfstrace_capture_{part}_total {total}")
        family("nfstrace_alerts_total", "counter", "alerts said, by kind")
        out += [f'nfstrace_alerts_total{{kind="{k}"}} {v}' for k, v in alerts.items()]
        family("nfstrace_series_evicted_total", "counter", "label sets dropped (over the cap)")
        out.append(f"nfstrace_series_evicted_total {self.evicted}")
        family("nfstrace_frames_total", "counter", "frames watched")
        out.append(f"nfstrace_frames_total {frames}")
        family("nfstrace_interval_end_seconds", "gauge", "capture time the last interval ended")
        out.append(f"nfstrace_interval_end_seconds {_number(self.interval_end_ns / 1e9)}")
        return "\n".join(out) + "\n"


def _labels(key: Labels) -> str:
    client, server, op = (_escape(v) for v in key)
    return f'client="{client}",server="{server}",op="{op}"'


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(v: float) -> str:
    return "NaN" if math.isnan(v) else f"{v:.9g}"


def write_atomically(path: Path, text: str) -> None:
    """``text`` as ``path``: written beside it, then renamed over it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


class MetricsServer:
    """The last interval's text served at ``GET /metrics`` on (host, port), by
    ``http.server`` in a daemon thread (``port`` 0: one the system picks,
    ``address`` says which)."""

    def __init__(self, host: str, port: int) -> None:
        self.text = "# no interval reported yet\n"
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # (http.server's name)
                if self.path.split("?")[0] not in ("/metrics", "/"):
                    self.send_error(404, "GET /metrics")
                    return
                body = server.text.encode()
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # (a scrape every 15 s is not news)

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.address: tuple[str, int] = self.httpd.server_address[:2]  # type: ignore[assignment]
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, name="nfstrace-metrics", daemon=True
        )
        self._thread.start()

    def publish(self, text: str) -> None:
        self.text = text

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
