"""Fuzzing the whole pipeline with hypothesis: mutated sample captures (bit
flips, truncations, splices, concatenations, corrupt length fields and record
marks, absurd counts in RPC payloads) end with a result or an NfstraceError,
never another exception, never a hang.

CI runs NFSTRACE_FUZZ_EXAMPLES (default 2,000) examples; a long local run:

    NFSTRACE_FUZZ_EXAMPLES=50000 python3 -m pytest -q tests/test_fuzz.py

Seeds and mutations: tests/fuzz/corpus.py and tests/fuzz/mutate.py.  Every
crash a long run (or atheris, tests/fuzz/atheris_parser.py) found is kept as a
small capture in tests/fuzz/regressions/ (run by test_robustness.py, and a
seed here).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

try:
    from fuzz.corpus import field_map, seeds
    from fuzz.mutate import INTERESTING, apply, run_pipeline
except ImportError:  # tests/ not on sys.path: import as a package
    from tests.fuzz.corpus import field_map, seeds
    from tests.fuzz.mutate import INTERESTING, apply, run_pipeline

import nfstrace

EXAMPLES = int(os.environ.get("NFSTRACE_FUZZ_EXAMPLES", "2000"))
# One example (a capture of at most ~60 frames) through the whole pipeline:
# anything near this is a hang, not a slow machine.
EXAMPLE_LIMIT_S = 30
HTML_EVERY = 20  # the HTML report for one example in this many

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


_stats: dict[str, int] = {}
_count = [0]


@settings(
    max_examples=EXAMPLES,
    deadline=None,  # the time bound is EXAMPLE_LIMIT_S, enforced by an alarm
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=os.environ.get("NFSTRACE_FUZZ_SEED") is None,
    database=None,
)
@given(seed=st.sampled_from(SEED_NAMES), mutations=st.lists(MUTATION, min_size=1, max_size=4))
def test_mutated_captures_end_in_a_result_or_an_nfstrace_error(
    workdir: Path, seed: str, mutations: list[tuple]
) -> None:
    data = apply(seed, mutations)
    _count[0] += 1
    outcome, seconds = run_pipeline(
        data, workdir, html=_count[0] % HTML_EVERY == 0, limit_s=EXAMPLE_LIMIT_S
    )
    assert outcome == "ok" or outcome.endswith("Error")
    assert seconds < EXAMPLE_LIMIT_S
    _stats[outcome] = _stats.get(outcome, 0) + 1


def test_fuzz_ran_every_example_and_most_were_analysed() -> None:
    """The run above really happened, and most mutants still gave an analysis
    (mutations that only ever produced errors would test little)."""
    total = sum(_stats.values())
    assert total >= min(EXAMPLES, 2000) * 0.95 or total >= EXAMPLES, _stats
    assert _stats.get("ok", 0) > total / 2, _stats


def _frames_in(data: bytes) -> int:
    """Whole frames in a pcap (its own walk: independent of the parser)."""
    import struct

    e = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    pos = n = 0
    pos = 24
    while pos + 16 <= len(data):
        caplen = struct.unpack_from(e + "I", data, pos + 8)[0]
        if pos + 16 + caplen > len(data):
            break
        pos += 16 + caplen
        n += 1
    return n


PCAP_SEEDS = [n for n in SEED_NAMES if seeds()[n][:4] in (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4")]


@settings(max_examples=min(EXAMPLES // 10, 400), deadline=None, database=None, derandomize=True)
@given(seed=st.sampled_from(PCAP_SEEDS), cut=st.integers(24, 1 << 20))
def test_a_cut_keeps_every_message_before_it(
    workdir: Path, seed: str, cut: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A capture cut anywhere keeps every message whose frames all came before
    the cut, exactly as the intact capture gives them."""
    whole = seeds()[seed]
    cut %= len(whole) + 1
    part = whole[: max(cut, 24)]
    kept = _frames_in(part)
    full_path, part_path = workdir / "whole.pcap", workdir / "part.pcap"
    full_path.write_bytes(whole)
    part_path.write_bytes(part)
    cols = ["xid", "msgtype", "ts_first_ns", "frame_first", "frame_last", "rpc_len", "op"]
    full = nfstrace.load(full_path).messages
    expect = full[full["frame_last"] <= kept][cols].reset_index(drop=True)
    got = nfstrace.load(part_path).messages
    got = got[got["frame_last"] <= kept][cols]
    # messages still open at the cut are emitted incomplete: they end at or before it too,
    # so compare those complete in the whole capture
    merged = expect.merge(got, how="left", on=cols, indicator=True)
    assert (merged["_merge"] == "both").all(), merged[merged["_merge"] != "both"]
    assert field_map(seed) is not None


def test_the_fuzz_budget_is_small_enough_for_ci() -> None:
    """Seeds stay small: the CI run of EXAMPLES examples must take a minute or two."""
    start = time.monotonic()
    sizes = [len(v) for v in seeds().values()]
    assert max(sizes) < 64 * 1024 and time.monotonic() - start < 30
