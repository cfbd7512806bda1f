"""A crash hunt without shrinking: random mutations of the seeds through the
whole pipeline, every failure written down (seed, mutations, traceback) and
the search goes on.  For long local runs next to the hypothesis test:

    python3 -m tests.fuzz.hunt N [OUTDIR]     # N examples; failures in OUTDIR/failures.jsonl

Each failure's capture is saved as OUTDIR/crash-<n>.pcap.
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
import time
import traceback
from pathlib import Path

from .corpus import seeds
from .mutate import INTERESTING, Timeout, apply, run_pipeline

KINDS = (
    "flip",
    "truncate",
    "splice",
    "concat",
    "length",
    "mark",
    "word",
    "insert",
    "delete",
    "repeat",
)


def random_mutation(rng: random.Random, names: list[str]) -> tuple:
    kind = rng.choice(KINDS)
    value = rng.choice(INTERESTING) if rng.random() < 0.7 else rng.getrandbits(32)
    index = rng.getrandbits(20)
    if kind == "flip":
        return (kind, index, rng.randrange(8))
    if kind == "truncate":
        return (kind, index)
    if kind == "splice":
        return (kind, rng.choice(names), index, rng.getrandbits(20))
    if kind == "concat":
        return (kind, rng.choice(names))
    if kind in ("length", "mark", "word"):
        return (kind, index, value)
    if kind == "insert":
        return (kind, index, rng.randbytes(rng.randint(1, 64)))
    if kind == "delete":
        return (kind, index, rng.randint(1, 256))
    return (kind, index, rng.randint(1, 4096))


def hunt(n: int, outdir: Path, seed: int = 0) -> dict[str, int]:
    rng = random.Random(seed)
    names = sorted(seeds())
    outdir.mkdir(parents=True, exist_ok=True)
    outcomes: dict[str, int] = {}
    signatures: set[str] = set()
    start = time.monotonic()
    slowest = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(n):
            name = rng.choice(names)
            muts = [random_mutation(rng, names) for _ in range(rng.randint(1, 4))]
            data = apply(name, muts)
            try:
                outcome, seconds = run_pipeline(data, Path(tmp), html=i % 20 == 0)
                slowest = max(slowest, seconds)
            except Timeout:
                outcome = "HANG"
                tb = "Timeout"
            except Exception as e:
                outcome = f"CRASH {type(e).__name__}"
                tb = traceback.format_exc()
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            if outcome.startswith(("CRASH", "HANG")):
                where = [ln for ln in tb.splitlines() if ln.strip().startswith("File")][-1:]
                sig = f"{outcome} {where}"
                new = sig not in signatures
                signatures.add(sig)
                if new:
                    crash = outdir / f"crash-{len(signatures)}.pcap"
                    crash.write_bytes(data)
                    with open(outdir / "failures.jsonl", "a") as f:
                        rec = {"i": i, "seed": name, "mutations": repr(muts), "outcome": outcome}
                        f.write(json.dumps({**rec, "file": str(crash), "traceback": tb}) + "\n")
                    print(f"[{i}] NEW {sig}", flush=True)
            if i % 500 == 0:
                rate = (i + 1) / (time.monotonic() - start)
                print(f"[{i}] {rate:.1f}/s slowest {slowest:.2f}s {outcomes}", flush=True)
    print(f"done {n} in {time.monotonic() - start:.0f} s: {outcomes}", flush=True)
    return outcomes


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else Path("fuzz-hunt")
    hunt(count, out, seed=int(sys.argv[3]) if len(sys.argv) > 3 else 0)
