"""atheris (libFuzzer for Python) on the parser's hot path: capture bytes ->
frames -> IP -> TCP/UDP -> record marking -> RPC header -> NFS decoding ->
the messages table -> transactions.  Coverage-guided, so it reaches corners
the mutation-based hypothesis test (tests/test_fuzz.py) does not.

    pip install atheris
    python3 -m tests.fuzz.corpus /tmp/nfs-corpus          # the seeds
    NFSTRACE_ATHERIS_CRASHES=/tmp/nfs-crashes python3 tests/fuzz/atheris_parser.py \
        /tmp/nfs-corpus -max_total_time=1800 -timeout=30 -rss_limit_mb=3072

A crash is any exception other than NfstraceError (a file that is not a
capture).  With NFSTRACE_ATHERIS_CRASHES set, each new kind of crash (by where
it was raised) is saved there as crash-N.pcap with its traceback, and the
fuzzing goes on; without it the first crash stops the run (libFuzzer's way,
the input saved as crash-<sha1>).  A hang stops the run (-timeout).  Each crash
found is kept in tests/fuzz/regressions/ and replayed by tests/test_robustness.py.
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from pathlib import Path

import atheris

# fuzz the checkout this file is in (not an installed nfstrace)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

with atheris.instrument_imports(include=["nfstrace"]):
    from nfstrace.errors import NfstraceError
    from nfstrace.match import match
    from nfstrace.parsers import frame_loop

print(f"fuzzing {frame_loop.__file__}", flush=True)
_FD, PATH = tempfile.mkstemp(prefix="nfstrace-atheris-", suffix=".pcap", dir="/dev/shm")
os.close(_FD)


CRASHES = os.environ.get("NFSTRACE_ATHERIS_CRASHES")
_seen: set[str] = set()


def run(data: bytes) -> None:
    with open(PATH, "wb") as f:
        f.write(data)
    try:
        messages, _events, _stats = frame_loop.parse([PATH])
    except NfstraceError:
        return
    match(messages)


def test_one_input(data: bytes) -> None:
    if not CRASHES:
        run(data)
        return
    try:
        run(data)
    except Exception as e:
        tb = traceback.format_exc()
        where = [ln for ln in tb.splitlines() if ln.strip().startswith("File")][-1]
        sig = f"{type(e).__name__} {where}"
        if sig not in _seen:
            _seen.add(sig)
            out = Path(CRASHES)
            out.mkdir(parents=True, exist_ok=True)
            (out / f"crash-{len(_seen)}.pcap").write_bytes(data)
            (out / f"crash-{len(_seen)}.txt").write_text(tb)
            print(f"NEW CRASH {sig}", flush=True)


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
