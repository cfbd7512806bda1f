#!/usr/bin/env python3
"""Small captures: nfstrace's wall time against tshark's (issue 33's first target).

    python3 bench/small.py [--base COMMIT] [--runs N] [--results DIR] [CAPTURE ...]

A capture of about a thousand frames is where a Python tool is slowest
relative to a C one: the time goes to starting up (the interpreter, numpy,
pandas, the command line's typer) and to the fixed cost of each analysis step,
not to the packets.  Every command below runs in a fresh process, interleaved
run by run (a burst of load elsewhere hits every command alike), on the same
file; the median (and the least) wall time of the runs is reported:

- nfstrace ``analyze FILE --no-report``, ``analyze FILE -o X.html`` (the HTML
  report) and ``analyze FILE --no-report --json X.json``, with this working tree
  and, with ``--base``, with the nfstrace of that commit (``git archive``; this
  checkout's built Rust extension is copied in when native/ is the same);
- ``tshark -n -q -r FILE -d tcp.port==2049,rpc -d udp.port==2049,rpc -z rpc,srt,100003,V``;
- the floors: ``python -c pass``, ``python -c "import numpy, pandas"`` (what any
  pandas tool pays before its first line), ``python -c "import nfstrace.cli"``,
  the imports of an analysis (the command line, ``nfstrace.trace`` and the
  terminal report: all ``analyze --no-report`` imports before it reads a
  frame) and the parse alone (``nfstrace.parsers.native.parse``, with its
  imports);
- nfstrace ``--no-report`` without a bytecode cache (``PYTHONDONTWRITEBYTECODE=1``
  on a tree with no ``__pycache__``, as in a sandbox or a read-only checkout):
  every module of nfstrace compiled from source on each run.

Python's bytecode cache goes to a directory of the cache
(``PYTHONPYCACHEPREFIX``), filled by one warm-up run of each command, so the
timed runs read bytecode as an installed package does.  Results:
bench/results/small.md and small.json (with the load average at start and end).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import short_sha, snapshot  # (bench/run.py: one way to unpack a commit)

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample-pcaps"
CACHE = Path(os.environ.get("NFSTRACE_BENCH_DIR", "/var/tmp/nfstrace-bench")) / "small"
DEFAULT_CAPTURES = (
    SAMPLES / "v3-tcp-nfscp-w64k-d2-l0.5.pcap",  # the 952 frames, 0.5% loss
    SAMPLES / "v3-udp-py-w32k-d2-l0.pcap",
    SAMPLES / "v41-tcp-nfsrs-w1m-d0-l0.pcap",
)
TSHARK_DECODE_AS = ("-d", "tcp.port==2049,rpc", "-d", "udp.port==2049,rpc")
# Issue 33: a capture of ~1,000 frames analysed within these multiples of tshark's time.
TARGET_NO_REPORT = 2.0
TARGET_REPORT = 3.0


def frames(path: Path) -> int:
    out = subprocess.run(["capinfos", "-c", "-M", str(path)], capture_output=True, text=True)
    for line in out.stdout.splitlines():
        if "Number of packets" in line:
            return int(line.split(":")[1].strip())
    return 0


def nfs_version(path: Path) -> int:
    return 4 if "v4" in path.name.split("-")[0] else 3


def commands(cap: Path, sources: dict[str, Path], tmp: Path) -> list[tuple[str, list[str], dict]]:
    """(label, argv, environment) of every command timed on one capture."""
    base_env = dict(os.environ, PYTHONPYCACHEPREFIX=str(CACHE / "pycache"), PYTHONSAFEPATH="1")
    base_env.pop("PYTHONDONTWRITEBYTECODE", None)
    py = sys.executable
    out: list[tuple[str, list[str], dict]] = []
    for name, src in sources.items():
        env = dict(base_env, PYTHONPATH=str(src))
        nfs = [py, "-m", "nfstrace.cli", "analyze", str(cap)]
        out += [
            (f"nfstrace {name} --no-report", [*nfs, "--no-report"], env),
            (f"nfstrace {name} -o report.html", [*nfs, "-o", str(tmp / f"{name}.html")], env),
            (
                f"nfstrace {name} --no-report --json",
                [*nfs, "--no-report", "--json", str(tmp / f"{name}.json")],
                env,
            ),
        ]
    work_env = dict(base_env, PYTHONPATH=str(sources["work"]))
    cold = dict(work_env, PYTHONDONTWRITEBYTECODE="1")
    cold.pop("PYTHONPYCACHEPREFIX")  # (a tree without __pycache__: sources compiled each run)
    out.append(
        (
            "nfstrace work --no-report, no bytecode cache",
            [py, "-m", "nfstrace.cli", "analyze", str(cap), "--no-report"],
            cold,
        )
    )
    srt = f"rpc,srt,100003,{nfs_version(cap)}"
    out.append(
        (
            "tshark -z rpc,srt",
            ["tshark", "-n", "-q", "-r", str(cap), *TSHARK_DECODE_AS, "-z", srt],
            base_env,
        )
    )
    out += [
        ("floor: python -c pass", [py, "-c", "pass"], base_env),
        ("floor: import numpy, pandas", [py, "-c", "import numpy, pandas"], base_env),
        ("floor: import nfstrace.cli", [py, "-c", "import nfstrace.cli"], work_env),
        (  # everything ``analyze --no-report`` imports before it reads a frame
            "floor: the imports of an analysis",
            [py, "-c", "import nfstrace.cli, nfstrace.trace, nfstrace.reports.terminal"],
            work_env,
        ),
        (
            "floor: native parse (with its imports)",
            [py, "-c", f"from nfstrace.parsers.native import parse; parse([{str(cap)!r}])"],
            work_env,
        ),
    ]
    return out


def timed(argv: list[str], env: dict) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd="/")
    return time.perf_counter() - start, done.returncode


def bench(caps: list[Path], sources: dict[str, Path], runs: int) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="nfstrace-small-") as t:
        tmp = Path(t)
        for cap in caps:
            cmds = commands(cap, sources, tmp)
            for _, argv, env in cmds:  # warm-up: bytecode cache, page cache
                timed(argv, env)
            times: dict[str, list[float]] = {label: [] for label, _, _ in cmds}
            status: dict[str, int] = {}
            for _ in range(runs):
                for label, argv, env in cmds:
                    wall, status[label] = timed(argv, env)
                    times[label].append(wall)
            tshark = statistics.median(times["tshark -z rpc,srt"])
            rows.append(
                {
                    "capture": str(cap.relative_to(ROOT)) if cap.is_relative_to(ROOT) else str(cap),
                    "frames": frames(cap),
                    "bytes": cap.stat().st_size,
                    "results": {
                        label: {
                            "median_s": round(statistics.median(ts), 4),
                            "min_s": round(min(ts), 4),
                            "runs_s": [round(x, 4) for x in ts],
                            "vs_tshark": round(statistics.median(ts) / tshark, 2),
                            "exit_status": status[label],
                        }
                        for label, ts in times.items()
                    },
                }
            )
            print(f"small: {cap.name} done", file=sys.stderr)
    return rows


def markdown(report: dict) -> str:
    lines = [
        f"# Small captures: nfstrace vs tshark ({report['runs']} runs each, interleaved; median)",
        "",
        f"{report['date']} · {report['machine']['cpu']} · {report['machine']['cores']} cores · "
        f"Python {report['machine']['python']} · load average at start "
        f"{report['load_average']['start']}, at end {report['load_average']['end']}",
        "",
        "Sources: " + "; ".join(f"`{k}` = {v}" for k, v in report["sources"].items()),
        "",
        f"Targets (issue 33): `--no-report` ≤ {TARGET_NO_REPORT:g}× tshark, with the HTML "
        f"report ≤ {TARGET_REPORT:g}× tshark.",
    ]
    for row in report["inputs"]:
        lines += [
            "",
            f"## {row['capture']} ({row['frames']:,} frames, {row['bytes'] / 1e6:.1f} MB)",
            "",
            "| command | median s | least s | × tshark (median) |",
            "|---|---:|---:|---:|",
        ]
        for label, r in row["results"].items():
            flag = "" if r["exit_status"] in (0, 6) else f" (exit {r['exit_status']})"
            lines.append(
                f"| {label}{flag} | {r['median_s']:.3f} | {r['min_s']:.3f} | {r['vs_tshark']:.2f} |"
            )
    return "\n".join(lines) + "\n"


def machine() -> dict:
    cpu = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("captures", nargs="*", type=Path, help="default: three small samples")
    ap.add_argument("--base", help="also time the nfstrace of this commit (before/after)")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args()
    caps = [c.resolve() for c in args.captures] or list(DEFAULT_CAPTURES)
    sources = {"work": ROOT}
    labels = {"work": f"working tree at {short_sha('HEAD')}"}
    if args.base:
        src, sha = snapshot(args.base, CACHE)
        sources = {"base": src, "work": ROOT}
        labels = {"base": f"commit {sha}", **labels}
    if subprocess.run(
        ["git", "-C", str(ROOT), "diff", "--quiet", "HEAD", "--", "nfstrace"]
    ).returncode:
        labels["work"] += " +changes"
    start = [round(x, 2) for x in os.getloadavg()]
    rows = bench(caps, sources, args.runs)
    report = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "runs": args.runs,
        "sources": labels,
        "load_average": {"start": start, "end": [round(x, 2) for x in os.getloadavg()]},
        "inputs": rows,
    }
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "small.json").write_text(json.dumps(report, indent=1) + "\n")
    text = markdown(report)
    (args.results / "small.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
