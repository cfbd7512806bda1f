"""``nfstrace watch --prometheus FILE``: the run's counters in the Prometheus
text exposition format (version 0.0.4), as node_exporter's textfile collector
reads it (``--collector.textfile.directory``; the file named ``*.prom``).

Written directly (the format is a few lines of text; no prometheus_client to
depend on), whole and atomically after every interval: a temporary file
beside it renamed over it, so the collector never reads half a file.

Metrics (labels client, server, op: the calls that started in the intervals
reported so far, as the interval lines count them):

- ``nfstrace_calls_total``: calls.
- ``nfstrace_bytes_total``: WRITE and READ data bytes of those calls.
- ``nfstrace_resent_total``: RPC re-sends (sends beyond a call's first).
- ``nfstrace_latency_seconds``: a summary of the answered calls' latency:
  ``_sum`` and ``_count`` over the run, quantiles 0.5 and 0.99 of the last
  interval in which the op was answered.
- ``nfstrace_alerts_total`` (label kind): alerts said.
- ``nfstrace_series_evicted_total``: label sets dropped, the least recently
  called first, to keep at most ``Metrics.max_series`` (10,000).
- ``nfstrace_frames_total``: frames watched; ``nfstrace_interval_end_seconds``:
  the capture time (Unix seconds) the last reported interval ended.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

Labels = tuple[str, str, str]  # client, server, op
QUANTILES = (0.5, 0.99)


@dataclass
class OpCounts:
    calls: int = 0
    bytes: int = 0
    resent: int = 0
    latency_sum_s: float = 0.0
    latency_count: int = 0
    quantiles_s: tuple[float, ...] = field(default_factory=lambda: (math.nan,) * len(QUANTILES))


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
                c.quantiles_s = tuple(float(q) for q in np.quantile(lat, QUANTILES))
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
        family(name, "summary", "call to reply (quantiles: the last interval with replies)")
        for k, c in ops:
            for q, v in zip(QUANTILES, c.quantiles_s, strict=True):
                out.append(f'{name}{{{_labels(k)},quantile="{q:g}"}} {_number(v)}')
            out.append(f"{name}_sum{{{_labels(k)}}} {_number(c.latency_sum_s)}")
            out.append(f"{name}_count{{{_labels(k)}}} {c.latency_count}")
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
