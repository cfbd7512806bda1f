"""atheris (libFuzzer for Python) on the parser's hot path: capture bytes ->
frames -> IP -> TCP/UDP -> record marking -> RPC header -> NFS decoding ->
the messages table -> transactions.  Coverage-guided, so it reaches corners
the mutation-based hypothesis test (tests/test_fuzz.py) does not.

    pip install atheris
    python3 -m tests.fuzz.corpus /tmp/nfs-corpus          # the seeds
    python3 tests/fuzz/atheris_parser.py /tmp/nfs-corpus -fork=1 -ignore_crashes=1 \
        -max_total_time=1800 -timeout=20 -rss_limit_mb=3072 -artifact_prefix=/tmp/nfs-crash-

A crash is any exception other than NfstraceError (a file that is not a
capture); each one found is kept in tests/fuzz/regressions/ and replayed by
tests/test_robustness.py.
"""

from __future__ import annotations

import os
import sys
import tempfile

import atheris

with atheris.instrument_imports(include=["nfstrace"]):
    from nfstrace.errors import NfstraceError
    from nfstrace.match import match
    from nfstrace.parsers import fast

_FD, PATH = tempfile.mkstemp(prefix="nfstrace-atheris-", suffix=".pcap", dir="/dev/shm")
os.close(_FD)


def test_one_input(data: bytes) -> None:
    with open(PATH, "wb") as f:
        f.write(data)
    try:
        messages, _events, _stats = fast.parse([PATH])
    except NfstraceError:
        return
    match(messages)


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
