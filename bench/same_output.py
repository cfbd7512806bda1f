#!/usr/bin/env python3
"""Are nfstrace's outputs identical at two commits?  (A speed change must not change them.)

    python3 bench/same_output.py --base COMMIT [--samples DIR] [--html] [--only TEXT]

Runs ``nfstrace analyze FILE`` on every capture under sample-pcaps/ (recursive),
once with the nfstrace of COMMIT (exported with ``git archive``; the built Rust
extension of this checkout is copied in when native/ is the same at both; when it
differs, the base needs one built from its own native/, else the script stops) and
once with this working tree, and compares byte for byte: the terminal text
(COLUMNS=100, default view and ``--full``), the exit status, the JSON summary
(``--json``), the Markdown (``--markdown``), the CSV transactions (``--csv``)
and, with ``--html``, the HTML report.  The outputs hold no timing figure or
date; only the samples directory's path is written SAMPLES in them (two
checkouts' paths are not a difference).  The base's outputs are cached in
/var/tmp/nfstrace-bench/same-output/out-SHA[-html][-DIR] (they do not change),
the working tree's go to out-worktree-CHECKOUT[...], one per checkout.  With
``--samples DIR`` (lab captures, say) any directory of captures is compared.  Exit status 0
when every output is identical, 1 otherwise (the differing files are listed).
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = (ROOT / "sample-pcaps").resolve()
CACHE = Path(os.environ.get("NFSTRACE_BENCH_DIR", "/var/tmp/nfstrace-bench")) / "same-output"

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import snapshot  # noqa: E402  (bench/run.py: one way to unpack a commit)


def _slug(samples: Path) -> str:
    """The samples directory in a cache directory's name: the same for every
    checkout's own sample-pcaps/, the absolute path for any other."""
    samples = samples.resolve()
    if samples == SAMPLES:
        return ""
    return "-" + str(samples).strip("/").replace("/", "_")


def run_all(source: Path, out: Path, samples: Path, captures: list[Path], html: bool) -> None:
    """Every output of every capture with the nfstrace in source, into out/.
    The samples directory is written SAMPLES in every output (a checkout's path
    is not a difference)."""
    env = dict(os.environ, COLUMNS="100", PYTHONSAFEPATH="1", PYTHONPATH=str(source))
    env.pop("NO_COLOR", None)
    out.mkdir(parents=True, exist_ok=True)
    for cap in captures:
        name = str(cap.relative_to(samples)).replace("/", "__")
        if (out / f"{name}.full.txt").exists():
            continue  # cached (base) or already run
        files = {
            "--json": out / f"{name}.json",
            "--markdown": out / f"{name}.md",
            "--csv": out / f"{name}.csv",
        }
        cmd = [sys.executable, "-m", "nfstrace.cli", "analyze", str(cap)]
        extra = [a for opt, path in files.items() for a in (opt, str(path))]
        extra += ["-o", str(out / f"{name}.html")] if html else ["--no-report"]
        for view, args in (("default", extra), ("full", ["--full", "--no-report"])):
            p = subprocess.run(cmd + args, env=env, capture_output=True, text=True, cwd=out)
            text = p.stdout.replace(str(out), "OUT") + p.stderr.replace(str(out), "OUT")
            text += f"\n[exit {p.returncode}]\n"
            (out / f"{name}.{view}.txt").write_text(text)
        for path in out.glob(f"{name}.*"):
            data = path.read_bytes()
            if bytes(samples) in data:
                path.write_bytes(data.replace(bytes(samples), b"SAMPLES"))
        print(f"  {name}", file=sys.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--base", required=True, help="the commit to compare the working tree with")
    ap.add_argument("--samples", type=Path, default=SAMPLES)
    ap.add_argument("--html", action="store_true", help="compare the HTML reports too")
    ap.add_argument("--only", help="captures whose path contains this")
    ap.add_argument("--work", type=Path, help="where the working tree's outputs go")
    args = ap.parse_args()
    samples = args.samples.resolve()
    captures = sorted(samples.rglob("*.pcap"))
    captures += sorted(samples.rglob("*.pcapng"))
    if args.only:
        captures = [c for c in captures if args.only in str(c)]
    base_src, sha = snapshot(args.base, CACHE)
    if not any((base_src / "nfstrace").glob("_native*.so")):
        # without its own extension the base would import this checkout's (an
        # editable install's finder): the tree compared with itself
        sys.exit(
            f"same_output: {sha}'s native/ differs from this checkout's and {base_src}/nfstrace "
            "has no _native extension built from it: build one there (cargo build --release "
            "in its native/, as bench/parse_speed.py does) and copy it in, then run again"
        )
    suffix = ("-html" if args.html else "") + _slug(samples)
    base_out = CACHE / f"out-{sha}{suffix}"
    print(f"base {sha}: {base_src}", file=sys.stderr)
    run_all(base_src, base_out, samples, captures, args.html)
    # one directory per checkout: two worktrees checked at once do not mix
    work_out = args.work or CACHE / f"out-worktree-{ROOT.name}{suffix}"
    shutil.rmtree(work_out, ignore_errors=True)
    print(f"working tree: {ROOT}", file=sys.stderr)
    run_all(ROOT, work_out, samples, captures, args.html)
    names = sorted(p.name for p in base_out.iterdir() if p.is_file())
    wanted = {str(c.relative_to(samples)).replace("/", "__") for c in captures}
    names = [n for n in names if n.rsplit(".", 2)[0] in wanted or n.rsplit(".", 1)[0] in wanted]
    differ = [
        n
        for n in names
        if not (work_out / n).exists() or not filecmp.cmp(base_out / n, work_out / n, False)
    ]
    extra = sorted(p.name for p in work_out.iterdir() if p.name not in set(names))
    print(
        f"{len(captures)} captures, {len(names)} output files compared: "
        f"{len(differ)} differ, {len(extra)} only in the working tree"
    )
    for n in differ + extra:
        print(f"  DIFFERS: {n}  ({base_out / n} vs {work_out / n})")
    return 1 if differ or extra else 0


if __name__ == "__main__":
    sys.exit(main())
