#!/usr/bin/env python3
"""The Rust parse's speed on big captures, a commit against the working tree (issue 33).

    python3 bench/parse_speed.py --base COMMIT [--runs 7] [--inputs DIR] [--out FILE]

Two inputs, made once under --inputs (default /var/tmp/nfstrace-bench/parse-speed,
never committed):

* ``meta-v41-1m``: 1,000,026 packets of small NFSv4.1 RPCs from 16 clients
  (bench/run.py's replicate_small_rpcs, the benchmark's v41-metadata input);
* ``v3-write-300``: sample-pcaps/v3-tcp-nfscp-w1m-d0-l0 (NFSv3/TCP, 1 MiB
  WRITEs) copied 300 times, copy k from its own client address 10.1.x.y and
  starting after the previous one ends: 253,500 packets, 336 MB, 300 host pairs.

Per input, each figure is the median of ``--runs`` interleaved runs (base,
tree, base, tree, ... alternating which goes first), each a fresh process
under ``nice -n 10``:

* the parse alone: ``nfstrace._native.parse`` on the file (the Rust parse and
  the columns handed to Python), its CPU time (user + system: on a shared
  machine the wall time mostly measures the others' load), packets per CPU
  second, wall time, peak RSS;
* ``nfstrace analyze FILE --no-report --quiet``: wall and CPU time, peak RSS.

The base is the commit's ``nfstrace`` package (``git archive``) with its Rust
extension built into the same cache (``cargo build --release`` of its
``native/``: a few minutes the first time); the tree is this checkout with its
built extension.  The load average at the start and end is written with the
figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # noqa: E402  (bench/run.py: the metadata input's maker)

CACHE = Path(os.environ.get("NFSTRACE_BENCH_DIR", "/var/tmp/nfstrace-bench")) / "parse-speed"
WRITE_SOURCE = run.SAMPLES / "v3-tcp-nfscp-w1m-d0-l0.pcap"
WRITE_COPIES = 300

PARSE_ALONE = """
import resource, sys, time
from nfstrace.config import ParseLimits
from nfstrace.parsers import native
try:  # (a base commit before nfstrace.parsers.ahead: native's own)
    from nfstrace.parsers.ahead import native_settings
except ImportError:
    native_settings = native._settings
settings = native_settings(ParseLimits())
c0, t0 = time.process_time(), time.perf_counter()
out = native._native.parse([sys.argv[1]], [None], settings, None)
c1, t1 = time.process_time(), time.perf_counter()
print(out["stats"]["frames"], t1 - t0, c1 - c0)
"""


def make_write_input(source: Path, out: Path, copies: int) -> int:
    """The source's IPv4/TCP frames copied ``copies`` times, copy k from client
    address 10.(1 + k >> 16).(k >> 8 & 255).(k & 255) (IPv4 and TCP checksums
    adjusted), each copy after the previous one ends.  Returns the frames written."""
    header, records = run._pcap_records(source)
    frames = [
        (ts, f) for ts, f in records if len(f) > 34 and f[12:14] == b"\x08\x00" and f[23] == 6
    ]
    syn = next(f for _, f in frames if f[14 + (f[14] & 15) * 4 + 13] & 0x02)
    client = syn[26:30]
    t0 = frames[0][0]
    span = frames[-1][0] - t0 + 1000
    written = 0
    tmp = out.with_name(out.name + ".part")
    with open(tmp, "wb", buffering=1 << 22) as f:
        f.write(header)
        for k in range(copies):
            new_ip = bytes([10, 1 + (k >> 16), (k >> 8) & 255, k & 255])
            for ts, frame in frames:
                buf = bytearray(frame)
                tcp = 14 + (buf[14] & 15) * 4
                at = 26 if buf[26:30] == client else 30
                run._rewrite(buf, at, new_ip, (24, tcp + 16))
                t = ts + k * span
                f.write(run._REC.pack(t // 1_000_000, t % 1_000_000, len(buf), len(buf)))
                f.write(buf)
                written += 1
    tmp.replace(out)
    return written


def inputs(cache: Path) -> dict[str, Path]:
    cache.mkdir(parents=True, exist_ok=True)
    meta, write = cache / "meta-v41-1m.pcap", cache / f"v3-write-{WRITE_COPIES}.pcap"
    if not meta.exists():
        run.replicate_small_rpcs(run.METADATA_SOURCE, meta, 1_000_000)
    if not write.exists():
        make_write_input(WRITE_SOURCE, write, WRITE_COPIES)
    return {"meta-v41-1m": meta, "v3-write-300": write}


def base_tree(commit: str, cache: Path) -> Path:
    """The commit's package with its own built extension."""
    sha = run.short_sha(commit)
    dest = cache / f"base-{sha}"
    if (dest / "nfstrace" / "_native.abi3.so").exists():
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", sha, "nfstrace", "native"],
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    target = cache / "target"
    subprocess.run(
        ["nice", "-n", "10", "cargo", "build", "-q", "--release"],
        cwd=dest / "native",
        env=dict(os.environ, CARGO_TARGET_DIR=str(target)),
        check=True,
    )
    shutil.copy2(target / "release" / "lib_native.so", dest / "nfstrace" / "_native.abi3.so")
    return dest


def measure(argv: list[str], pythonpath: Path) -> dict[str, float]:
    """One run through /usr/bin/time (the child's own CPU time and peak RSS)."""
    fmt = "%e %U %S %M"
    env = dict(os.environ, PYTHONPATH=str(pythonpath), PYTHONSAFEPATH="1")
    proc = subprocess.run(
        ["/usr/bin/time", "-f", fmt, "nice", "-n", "10", *argv],
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"bench: {argv} exited {proc.returncode}: {proc.stderr[-500:]}")
    wall, user, system, rss = proc.stderr.strip().splitlines()[-1].split()
    row = {"wall": float(wall), "cpu": float(user) + float(system), "rss_mb": int(rss) / 1024}
    if argv[1] == "-c":  # the parse alone prints frames, its own wall and CPU
        frames, pwall, pcpu = proc.stdout.split()
        row.update(frames=int(frames), parse_wall=float(pwall), parse_cpu=float(pcpu))
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", required=True)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--inputs", type=Path, default=CACHE)
    ap.add_argument("--out", type=Path, help="write the markdown table here")
    args = ap.parse_args(argv)
    files = inputs(args.inputs)
    trees = {"base": base_tree(args.base, args.inputs), "tree": ROOT}
    py = sys.executable
    load_start = os.getloadavg()
    rows: dict[tuple[str, str, str], list[dict[str, float]]] = {}
    for name, path in files.items():
        for what, cmd in (
            ("parse alone", [py, "-c", PARSE_ALONE, str(path)]),
            ("analyze --no-report", [py, "-m", "nfstrace.cli", "analyze", str(path)]),
        ):
            if what.startswith("analyze"):
                cmd += ["--no-report", "--quiet"]
            for i in range(args.runs):
                order = list(trees.items()) if i % 2 == 0 else list(reversed(trees.items()))
                for label, src in order:
                    rows.setdefault((name, what, label), []).append(measure(cmd, src))
                    print(name, what, label, rows[(name, what, label)][-1], flush=True)
    load_end = os.getloadavg()
    lines = [
        f"Load average (1, 5, 15 min) at the start {load_start[0]:.1f}, {load_start[1]:.1f}, "
        f"{load_start[2]:.1f}; at the end {load_end[0]:.1f}, {load_end[1]:.1f}, "
        f"{load_end[2]:.1f}; {args.runs} interleaved runs each, medians.",
        "",
        "| input | what | checkout | CPU s | packets/s (CPU) | wall s | peak RSS MB "
        "| CPU tree/base |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (name, what, label), runs in rows.items():
        key = "parse_cpu" if what == "parse alone" else "cpu"
        cpu = statistics.median(r[key] for r in runs)
        wall = statistics.median(r["parse_wall" if what == "parse alone" else "wall"] for r in runs)
        rss = statistics.median(r["rss_mb"] for r in runs)
        rate = f"{runs[0]['frames'] / cpu / 1e6:.2f} M" if "frames" in runs[0] else ""
        ratio = ""
        if label == "tree":
            base = statistics.median(r[key] for r in rows[(name, what, "base")])
            ratio = f"{cpu / base:.2f}"
        lines.append(
            f"| {name} | {what} | {label} | {cpu:.3f} | {rate} | {wall:.2f} | {rss:.0f} | {ratio} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
