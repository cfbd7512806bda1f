#!/usr/bin/env python3
"""Time what runs after the parser, stage by stage, on captures parsed once.

    python3 bench/stages.py CAPTURE... [--report] [--repeat N] [--code DIR] [--cache DIR]

For each capture: match, latency (the three tables of ``load()``), overview,
diagnose and, with ``--report``, the terminal summary, the JSON summary and the
HTML report text; wall and CPU seconds (the best of ``--repeat`` runs) and the
process's peak RSS.  The parse (messages, events, stats) is pickled once per
capture under ``--cache`` (default $NFSTRACE_BENCH_DIR/parsed, i.e.
/var/tmp/nfstrace-bench/parsed) and reused, so a stage's time can be followed
across commits without paying for the parser each time; ``--code DIR`` times
another checkout (its ``nfstrace`` first on the path).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import pickle
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CACHE = Path(os.environ.get("NFSTRACE_BENCH_DIR", "/var/tmp/nfstrace-bench")) / "parsed"
CORE = ("match", "latency", "overview", "diagnose")


def parsed(capture: Path, cache: Path) -> tuple:
    """(messages, events, stats) of the capture, from the cache when it is there."""
    st = capture.stat()
    key = hashlib.sha1(f"{capture.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()
    path = cache / f"{capture.name}.{key[:12]}.pkl"
    if path.exists():
        with path.open("rb") as f:
            return pickle.load(f)
    from nfstrace.parsers import native

    result = native.parse([str(capture)])
    cache.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        pickle.dump(result, f, protocol=pickle.HIGHEST_PROTOCOL)
    return result


def timed(fn: Callable[[], object], repeat: int) -> tuple[object, float, float]:
    """(result, best wall seconds, best CPU seconds) of ``repeat`` calls."""
    best_wall = best_cpu = float("inf")
    result = None
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        result = fn()
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    return result, best_wall, best_cpu


def stages(capture: Path, cache: Path, report: bool, repeat: int) -> dict[str, tuple[float, float]]:
    from nfstrace.analysis.diagnosis import diagnose
    from nfstrace.analysis.latency import compound_op_latency, latency_table
    from nfstrace.analysis.overview import overview
    from nfstrace.match import match
    from nfstrace.trace import Trace

    messages, events, stats = parsed(capture, cache)
    times: dict[str, tuple[float, float]] = {}

    def stage(name: str, fn: Callable[[], object]) -> object:
        result, wall, cpu = timed(fn, repeat)
        times[name] = (wall, cpu)
        return result

    tx = stage("match", lambda: match(messages))
    latency = stage(
        "latency",
        lambda: (
            latency_table(tx),
            latency_table(tx, by=["client", "server"]),
            compound_op_latency(tx),
        ),
    )
    ov = stage("overview", lambda: overview(messages, tx))
    diagnosis = stage("diagnose", lambda: diagnose(messages, tx, events, stats))
    if report:
        from rich.console import Console

        from nfstrace.reports.export import summary
        from nfstrace.reports.html import render_report
        from nfstrace.reports.terminal import render_summary

        trace = Trace(
            paths=(str(capture),),
            messages=messages,
            transactions=tx,
            latency=latency[0],
            latency_by_pair=latency[1],
            compound_latency=latency[2],
            events=events,
            stats=stats,
            overview=ov,
            diagnosis=diagnosis,
        )
        stage(
            "terminal",
            lambda: render_summary(trace, Console(file=io.StringIO(), width=140)),
        )
        stage("json", lambda: json.dumps(summary(trace), default=str))
        stage("html", lambda: render_report(trace, diagnosis))
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("captures", nargs="+", type=Path)
    ap.add_argument("--report", action="store_true", help="time the terminal, JSON and HTML too")
    ap.add_argument("--repeat", type=int, default=1, help="runs per stage; the best is shown")
    ap.add_argument("--code", type=Path, default=ROOT, help="checkout whose nfstrace is timed")
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="parsed captures")
    args = ap.parse_args()
    sys.path.insert(0, str(args.code.resolve()))
    for capture in args.captures:
        times = stages(capture, args.cache, args.report, args.repeat)
        core_wall = sum(times[s][0] for s in CORE)
        core_cpu = sum(times[s][1] for s in CORE)
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        cells = "  ".join(f"{name} {wall:.2f}s ({cpu:.2f})" for name, (wall, cpu) in times.items())
        print(f"{capture.name}: {cells}  | match..diagnose {core_wall:.2f}s ({core_cpu:.2f} CPU)")
        print(f"  peak RSS so far {peak_mb:,.0f} MB (the parse is loaded from the cache)")


if __name__ == "__main__":
    main()
