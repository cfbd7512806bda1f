"""Fuzzing with hypothesis: mutated sample captures (bit flips, truncations,
splices, concatenations, corrupt length fields and record marks, absurd
counts in RPC payloads) end with a result or an NfstraceError, never another
exception, never a hang.

Two stages, so that CI stays within a couple of minutes:

* NFSTRACE_FUZZ_EXAMPLES (default 2,000) mutated captures through the parser
  (``nfstrace.parsers.native.parse``: capture reading, link, IP, TCP/UDP, record marking, RPC,
  NFS, the typed tables): the stage that reads the damaged bytes;
* NFSTRACE_FUZZ_PIPELINE_EXAMPLES (default an eighth of that) through the whole
  pipeline: ``nfstrace.load`` (match, every analysis module), the terminal
  summary and the JSON, the HTML report for one in HTML_EVERY.  (The analysis
  costs ~0.2 s per capture however small, so 2,000 whole runs take ~7 min.)

A long local run:

    NFSTRACE_FUZZ_EXAMPLES=50000 NFSTRACE_FUZZ_PIPELINE_EXAMPLES=5000 \
        python3 -m pytest -q tests/test_fuzz.py

(``python3 -m tests.fuzz.hunt N`` runs N whole-pipeline examples without
shrinking and writes every crash down.)  Seeds and mutations:
tests/fuzz/corpus.py and tests/fuzz/mutate.py.  Every crash found (here, by
the hunt or, earlier, by atheris) is kept as a small
capture in tests/fuzz/regressions/, replayed by test_robustness.py and used
as a seed here.
"""

from __future__ import annotations

import os
import signal
import struct
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

try:
    from fuzz.corpus import field_map, seeds
    from fuzz.mutate import INTERESTING, _alarm, apply, run_pipeline
except ImportError:  # tests/ not on sys.path: import as a package
    from tests.fuzz.corpus import field_map, seeds
    from tests.fuzz.mutate import INTERESTING, _alarm, apply, run_pipeline


from nfstrace.errors import NfstraceError
from nfstrace.parsers import native

pytestmark = pytest.mark.slow  # the fast loop (-m 'not slow') skips this module

EXAMPLES = int(os.environ.get("NFSTRACE_FUZZ_EXAMPLES", "2000"))
PIPELINE_EXAMPLES = int(os.environ.get("NFSTRACE_FUZZ_PIPELINE_EXAMPLES", str(EXAMPLES // 8)))
# One example (a capture of at most ~60 frames) through the whole pipeline:
# anything near this is a hang, not a slow machine.
EXAMPLE_LIMIT_S = 30
HTML_EVERY = 10  # the HTML report for one example in this many

SEED_NAMES = sorted(seeds())
_values = st.one_of(st.sampled_from(INTERESTING), st.integers(0, 0xFFFFFFFF))
_index = st.integers(0, 1 << 20)
MUTATION = st.one_of(
    st.tuples(st.just("flip"), _index, st.integers(0, 7)),
    st.tuples(st.just("truncate"), _index),
    st.tuples(st.just("splice"), st.sampled_from(SEED_NAMES), _index, _index),
    st.tuples(st.just("concat"), st.sampled_from(SEED_NAMES)),
    st.tuples(st.just("length"), _index, _values),
    st.tuples(st.just("mark"), _index, _values),
    st.tuples(st.just("word"), _index, _values),
    st.tuples(st.just("insert"), _index, st.binary(min_size=1, max_size=64)),
    st.tuples(st.just("delete"), _index, st.integers(1, 256)),
    st.tuples(st.just("repeat"), _index, st.integers(1, 4096)),
)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


_derandomize = os.environ.get("NFSTRACE_FUZZ_SEED") is None
_captures = st.sampled_from(SEED_NAMES)
_mutations = st.lists(MUTATION, min_size=1, max_size=4)


def _parse(path: Path) -> str:
    """The parser stage on one capture: "ok" or the NfstraceError's class name."""
    try:
        native.parse([str(path)])
    except NfstraceError as e:
        return type(e).__name__
    return "ok"


@settings(
    max_examples=EXAMPLES,
    deadline=None,  # the time bound is EXAMPLE_LIMIT_S, enforced by an alarm
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=_derandomize,
    database=None,
)
@given(seed=_captures, mutations=_mutations)
def _fuzz_parse(workdir: Path, outcomes: dict[str, int], seed: str, mutations: list[tuple]) -> None:
    path = workdir / "parse.pcap"
    path.write_bytes(apply(seed, mutations))
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(EXAMPLE_LIMIT_S)
    start = time.monotonic()
    try:
        outcome = _parse(path)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert time.monotonic() - start < EXAMPLE_LIMIT_S
    outcomes[outcome] = outcomes.get(outcome, 0) + 1


@settings(
    max_examples=PIPELINE_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=_derandomize,
    database=None,
)
@given(seed=_captures, mutations=_mutations)
def _fuzz_pipeline(
    workdir: Path, outcomes: dict[str, int], seed: str, mutations: list[tuple]
) -> None:
    data = apply(seed, mutations)
    n = sum(outcomes.values()) + 1
    outcome, seconds = run_pipeline(
        data, workdir, html=n % HTML_EVERY == 0, limit_s=EXAMPLE_LIMIT_S
    )
    assert outcome == "ok" or outcome.endswith("Error")
    assert seconds < EXAMPLE_LIMIT_S
    outcomes[outcome] = outcomes.get(outcome, 0) + 1


def _ran_and_mostly_analysed(outcomes: dict[str, int], wanted: int) -> None:
    """The examples really ran, and most mutants still gave a result
    (mutations that only ever produced errors would test little)."""
    total = sum(outcomes.values())
    assert total >= wanted * 0.95, outcomes
    assert outcomes.get("ok", 0) > total * 0.7, outcomes
    print(f"fuzz outcomes: {outcomes}")


def test_mutated_captures_parse_to_a_result_or_an_nfstrace_error(workdir: Path) -> None:
    outcomes: dict[str, int] = {}
    _fuzz_parse(workdir, outcomes)
    _ran_and_mostly_analysed(outcomes, EXAMPLES)


def test_mutated_captures_through_the_whole_pipeline(workdir: Path) -> None:
    outcomes: dict[str, int] = {}
    _fuzz_pipeline(workdir, outcomes)
    _ran_and_mostly_analysed(outcomes, PIPELINE_EXAMPLES)


def _frames_in(data: bytes) -> int:
    """Whole frames in a pcap (its own walk: independent of the parser)."""
    e = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    pos, n = 24, 0
    while pos + 16 <= len(data):
        caplen = struct.unpack_from(e + "I", data, pos + 8)[0]
        if pos + 16 + caplen > len(data):
            break
        pos += 16 + caplen
        n += 1
    return n


PCAP_SEEDS = [n for n in SEED_NAMES if seeds()[n][:4] in (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4")]


@settings(max_examples=min(EXAMPLES // 10, 500), deadline=None, database=None, derandomize=True)
@given(seed=st.sampled_from(PCAP_SEEDS), cut=st.integers(24, 1 << 20))
def test_a_cut_keeps_every_message_before_it(workdir: Path, seed: str, cut: int) -> None:
    """A capture cut anywhere keeps every message whose frames all came before
    the cut, exactly as the intact capture gives them."""
    whole = seeds()[seed]
    part = whole[: max(cut % (len(whole) + 1), 24)]
    kept = _frames_in(part)
    full_path, part_path = workdir / "whole.pcap", workdir / "part.pcap"
    full_path.write_bytes(whole)
    part_path.write_bytes(part)
    cols = ["xid", "msgtype", "ts_first_ns", "frame_first", "frame_last", "rpc_len", "op"]
    full = native.parse([str(full_path)])[0]
    expect = full[full["frame_last"] <= kept][cols]
    got = native.parse([str(part_path)])[0][cols]
    merged = expect.merge(got, how="left", on=cols, indicator=True)
    assert (merged["_merge"] == "both").all(), merged[merged["_merge"] != "both"]


def test_the_fuzz_budget_is_small_enough_for_ci() -> None:
    """Seeds stay small: the CI run of EXAMPLES examples must take a minute or two."""
    start = time.monotonic()
    sizes = [len(v) for v in seeds().values()]
    assert max(sizes) < 64 * 1024 and time.monotonic() - start < 30
    assert all(field_map(n).lengths for n in SEED_NAMES if not n.startswith(("pcap_gz", "regr")))
