#!/usr/bin/env python3
"""Memory and time of ``analyze --no-report`` at 1M/5M/10M NFSv4.1 metadata packets (issue 33).

    python3 bench/scaling_big.py [--sizes 1M,5M,10M] [--base COMMIT] [--runs 1]
                                 [--inputs /var/tmp/bench] [--out bench/results/scaling-big.md]

Per size, the benchmark's metadata input (bench/run.py's replicate_small_rpcs:
small NFSv4.1 RPCs from 16 clients; made once under ``--inputs``, never
committed) is analysed by ``nfstrace analyze FILE --no-report --quiet`` with
the default options (no ``--partitions``), a fresh process under ``nice -n
10`` and GNU time: wall, CPU (user + system) and peak RSS, the peak per
packet.  With ``--base`` the commit's package (its own Rust extension built:
bench/parse_speed.py's base_tree) runs too, interleaved run by run.  The time
and the peak are fitted against the packets on a log-log scale: the exponent
(1 linear, 2 quadratic).

Then, per size, one more run of the tree, instrumented in process (``--child``):
the wall, CPU, RSS after and peak RSS of each stage (the parse of each
partition, its match, the combines, each diagnosis step, the latency tables,
the overview, the terminal), the peak of each stage read from the kernel's
high-water mark (VmHWM, reset at every stage boundary through
/proc/self/clear_refs), so a stage's peak is its own.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
import parse_speed  # noqa: E402  (the base commit's build)
import run  # noqa: E402  (the metadata input's maker, machine facts)

INPUTS = Path(os.environ.get("NFSTRACE_BIG_INPUTS", "/var/tmp/bench"))
OUT = ROOT / "bench" / "results" / "scaling-big.md"

# Functions timed by the instrumented run: (module, attribute, stage name).  The
# names are looked up where the caller finds them (trace.py imports match,
# diagnose, ... by name; diagnosis.py its steps).
STAGES = (
    ("nfstrace.parsers.parallel", "parse_partition", "parse (a partition)"),
    ("nfstrace.trace", "match", "match (a partition)"),
    ("nfstrace.trace", "combine_transactions", "combine transactions"),
    ("nfstrace.parsers.parallel", "combine", "combine messages"),
    ("nfstrace.trace", "diagnose", "diagnose"),
    *(
        ("nfstrace.analysis.diagnosis", name, f"  {name}")
        for name in (
            "assess_capture",
            "analyze_repeats",
            "analyze_fragments",
            "analyze_transport",
            "prepared",
            "analyze_writes",
            "write_progress",
            "find_stalls",
            "analyze_pace",
            "fit_model",
            "_pair_models",
            "time_budget",
            "capture_limits",
            "mount_operations",
            "analyze_workload",
            "budget_findings",
            "timeline",
        )
    ),
    ("nfstrace.trace", "latency_table", "latency table"),
    ("nfstrace.trace", "compound_op_latency", "compound op latency"),
    ("nfstrace.trace", "overview", "overview"),
    ("nfstrace.trace", "_matched", "parse and match"),
    ("nfstrace.reports.terminal", "render_summary", "terminal summary"),
)

CHILD = r"""
import importlib, json, os, resource, sys, time

def status():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmHWM", "VmRSS")):
                key, value = line.split(":")
                out[key] = int(value.split()[0]) * 1024
    return out

def reset():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")

import itertools
open_frames, rows, overall, counter = [], [], [0], itertools.count()

def fold():
    hwm = status()["VmHWM"]
    overall[0] = max(overall[0], hwm)
    for frame in open_frames:
        frame["peak"] = max(frame["peak"], hwm)
    reset()

def wrap(name, fn):
    def timed(*args, **kwargs):
        fold()
        frame = {"stage": name, "peak": 0, "rss_before": status()["VmRSS"]}
        frame["order"] = next(counter)
        open_frames.append(frame)
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            frame["wall"] = time.perf_counter() - wall
            frame["cpu"] = time.process_time() - cpu
            fold()
            open_frames.pop()
            frame["rss_after"] = status()["VmRSS"]
            rows.append(frame)
    return timed

stages = json.loads(sys.argv[2])
import nfstrace.cli  # (everything analyze imports)
for module, attr, name in stages:
    mod = importlib.import_module(module)
    if hasattr(mod, attr):
        setattr(mod, attr, wrap(name, getattr(mod, attr)))
reset()
wall, cpu = time.perf_counter(), time.process_time()
code = 0
try:
    nfstrace.cli.app(["analyze", sys.argv[1], "--no-report", "--quiet"])
except SystemExit as e:
    code = e.code or 0
fold()
print(json.dumps({"rows": rows, "peak": overall[0], "exit": code,
                  "wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu}))
"""


def packets_of(size: str) -> int:
    """'1M' -> 1,000,000; '500k' -> 500,000; '20000' -> 20,000."""
    scale = {"k": 1_000, "m": 1_000_000}.get(size[-1].lower(), 1)
    return int(float(size[:-1] if scale > 1 else size) * scale)


def ensure_input(packets: int, inputs: Path) -> Path:
    path = inputs / f"meta-v41-{packets}p-{run.METADATA_CLIENTS}c.pcap"
    if not path.exists():
        inputs.mkdir(parents=True, exist_ok=True)
        run.replicate_small_rpcs(run.METADATA_SOURCE, path, packets)
    return path


def frames_in(path: Path) -> int:
    """Frames of a little-endian microsecond pcap (the generator's), by a walk of
    its record headers."""
    count, at = 0, 24
    size = path.stat().st_size
    with path.open("rb") as f:
        while at < size:
            f.seek(at + 8)
            at += 16 + int.from_bytes(f.read(4), "little")
            count += 1
    return count


def measure(path: Path, code: Path) -> dict[str, float]:
    """One ``analyze --no-report --quiet`` under GNU time: wall, CPU, peak RSS."""
    env = run.nfstrace_env(code)
    proc = subprocess.run(
        ["/usr/bin/time", "-f", "%e %U %S %M", "nice", "-n", "10", *run.NFSTRACE_CMD]
        + ["analyze", str(path), "--no-report", "--quiet"],
        env=env,
        capture_output=True,
        text=True,
    )
    wall, user, system, rss = proc.stderr.strip().splitlines()[-1].split()
    return {
        "wall": float(wall),
        "cpu": float(user) + float(system),
        "peak": int(rss) * 1024,
        "exit": proc.returncode,
    }


def stage_profile(path: Path, code: Path = ROOT) -> dict:
    """The instrumented run (CHILD) of a checkout (default: the working tree)."""
    proc = subprocess.run(
        ["nice", "-n", "10", sys.executable, "-c", CHILD, str(path), json.dumps(STAGES)],
        env=run.nfstrace_env(code),
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        raise SystemExit(f"bench: the instrumented run failed: {proc.stderr[-800:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def exponent(xs: list[float], ys: list[float]) -> float | None:
    """The slope of log(y) against log(x) (least squares); None with < 2 points."""
    if len(xs) < 2:
        return None
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True)) / sum(
        (a - mx) ** 2 for a in lx
    )


def mb(n: float) -> str:
    return f"{n / 2**20:,.0f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1M,5M,10M", help="packets per input, comma-separated")
    ap.add_argument("--base", help="a commit to measure beside the working tree")
    ap.add_argument("--runs", type=int, default=1, help="runs per checkout and size (median)")
    ap.add_argument("--inputs", type=Path, default=INPUTS)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument(
        "--stages", help="sizes given the instrumented run (default: every size; '': none)"
    )
    args = ap.parse_args(argv)
    sizes = [packets_of(s) for s in args.sizes.split(",")]
    files = {n: ensure_input(n, args.inputs) for n in sizes}
    frames = {n: frames_in(p) for n, p in files.items()}
    trees = {"tree": ROOT}
    if args.base:
        trees = {"base": parse_speed.base_tree(args.base, parse_speed.CACHE), **trees}
    load_start = os.getloadavg()
    results: dict[tuple[str, int], list[dict]] = {}
    for n, path in files.items():
        subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)  # page cache
        for i in range(args.runs):
            order = list(trees.items())
            for label, code in order if i % 2 == 0 else reversed(order):
                row = measure(path, code)
                results.setdefault((label, n), []).append(row)
                print(label, n, row, flush=True)
    staged = sizes if args.stages is None else [packets_of(s) for s in args.stages.split(",") if s]
    profiles = {n: stage_profile(files[n]) for n in staged}
    load_end = os.getloadavg()

    def med(label: str, n: int, key: str) -> float:
        return statistics.median(r[key] for r in results[(label, n)])

    facts = run.machine_facts()
    lines = [
        "# analyze --no-report at 1M/5M/10M NFSv4.1 metadata packets (issue 33)",
        "",
        f"{facts['cpu']} · {facts['cores']} cores · {facts['memory_gb']} GB · Python "
        f"{facts['python']} · `python3 bench/scaling_big.py --sizes {args.sizes}"
        f"{' --base ' + args.base if args.base else ''} --runs {args.runs}`",
        "",
        f"Load average (1, 5, 15 min) at the start {', '.join(f'{x:.1f}' for x in load_start)}; "
        f"at the end {', '.join(f'{x:.1f}' for x in load_end)} (2 cores shared: wall times "
        "are loose, CPU times and peaks are the figures).  Default options (no "
        "`--partitions`); peak RSS from GNU time; B/packet = peak / packets.",
        "",
        "| checkout | packets | wall s | CPU s | peak RSS MiB | B/packet | exit |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label in trees:
        for n in sizes:
            peak = med(label, n, "peak")
            exits = ",".join(sorted({str(r["exit"]) for r in results[(label, n)]}))
            lines.append(
                f"| {label} | {frames[n]:,} | {med(label, n, 'wall'):.1f} | "
                f"{med(label, n, 'cpu'):.1f} | {mb(peak)} | {peak / frames[n]:.0f} | {exits} |"
            )
    lines += ["", "Exponents (log-log least squares over the sizes; 1 = linear):", ""]
    for label in trees:
        xs = [frames[n] for n in sizes]
        cells = [
            f"{what} {e:.3f}"
            for what, key in (("wall", "wall"), ("CPU", "cpu"), ("peak RSS", "peak"))
            if (e := exponent(xs, [med(label, n, key) for n in sizes])) is not None
        ]
        lines.append(f"- {label}: {', '.join(cells) or '(one size)'}")
    for n, prof in profiles.items():
        lines += [
            "",
            f"## Stages at {frames[n]:,} packets (the tree, instrumented: wall "
            f"{prof['wall']:.1f} s, CPU {prof['cpu']:.1f} s, peak {mb(prof['peak'])} MiB = "
            f"{prof['peak'] / frames[n]:.0f} B/packet, exit {prof['exit']}; "
            f"{sum(r['stage'] == 'parse (a partition)' for r in prof['rows'])} partition(s), "
            "chosen by the memory available: `partitioning.auto_partitions`)",
            "",
            "| stage | wall s | CPU s | RSS before MiB | peak MiB | RSS after MiB |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for r in sorted(prof["rows"], key=lambda r: r.get("order", 0)):
            name = r["stage"].replace("  ", "&nbsp;&nbsp;", 1)
            lines.append(
                f"| {name} | {r['wall']:.2f} | {r['cpu']:.2f} | {mb(r['rss_before'])} | "
                f"{mb(r['peak'])} | {mb(r['rss_after'])} |"
            )
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.write_text(text)
    args.out.with_suffix(".json").write_text(
        json.dumps(
            {
                "load": [load_start, load_end],
                "frames": frames,
                "runs": {f"{k[0]}:{k[1]}": v for k, v in results.items()},
                "stages": profiles,
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
