"""Shared fixtures: the sample captures and their ground truth."""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample-pcaps"
sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/ helpers (tshark_ref)
# python3 -P (README's test command: the installed package, not ./nfstrace): the
# Pythons the tests start (python -m nfstrace.cli ...) run the same way
if sys.flags.safe_path:
    os.environ["PYTHONSAFEPATH"] = "1"

# Real lab captures (make-captures.sh): full-payload ones, and -s 256 twins.
FULL_CAPTURES = sorted(p for p in SAMPLES.glob("*.pcap") if ".s256." not in p.name)
S256_CAPTURES = sorted(SAMPLES.glob("*.s256.pcap"))

# More lab captures (NAME.pcap with NAME.json, made with ../shared/lab) for the
# tests that run over every capture: opt-in, so that what a run covers never
# depends silently on what a machine has lying around.
#     NFSTRACE_LAB_CAPTURES=/var/tmp/caps-small python3 -m pytest
_LAB = os.environ.get("NFSTRACE_LAB_CAPTURES", "")
LAB_CAPTURES = sorted(Path(_LAB).glob("*.pcap")) if _LAB else []


def pytest_configure(config: pytest.Config) -> None:
    if _LAB and not LAB_CAPTURES:
        raise pytest.UsageError(f"NFSTRACE_LAB_CAPTURES={_LAB}: no *.pcap there")
    if not hasattr(config, "workerinput"):  # (once, in pytest-xdist's controller)
        _compile_the_package()


def _compile_the_package() -> None:
    """The package's bytecode written where it is imported from (compileall
    skips what is up to date).  Many tests start ``nfstrace`` as a process;
    where PYTHONDONTWRITEBYTECODE is set (this project's machines) an editable
    checkout's modules were compiled anew by each: 0.57 s of 1.38 s for one
    ``analyze`` of a sample, 18 s of the fast loop's wall time.  A package
    pip installed has its bytecode already; a tree not writable is left as is."""
    import compileall

    spec = importlib.util.find_spec("nfstrace")
    if spec is not None and spec.origin is not None:
        with contextlib.suppress(OSError):
            compileall.compile_dir(Path(spec.origin).parent, quiet=2, workers=1)


def pytest_report_header() -> str:
    if not _LAB:
        return "lab captures: sample-pcaps/ only (NFSTRACE_LAB_CAPTURES=DIR adds more)"
    return f"lab captures: sample-pcaps/ and {len(LAB_CAPTURES)} from {_LAB}"


# ---- sample captures loaded once per test process ---------------------------------
# nfstrace.load of a sample with the default configuration is a pure function
# of the file, and about half the fast loop's time went to loading the same
# dozen samples again (728 loads, 224 s of 424 s of tests at 90a9da3).  A test
# that uses monkeypatch may change what load computes: it always loads afresh.
_LOADED: dict[tuple[str, int, int], Any] = {}
_PATCHING = False


@pytest.fixture(autouse=True)
def _sample_cache_guard(request: pytest.FixtureRequest) -> Iterator[None]:
    global _PATCHING
    _PATCHING = "monkeypatch" in request.fixturenames
    yield
    _PATCHING = False


def load_sample(path: str | os.PathLike[str]) -> Any:
    """``nfstrace.load(path)``: a capture under sample-pcaps/ loaded once per
    process (keyed by its path, size and time) and handed out as a deep copy,
    so that no test sees what another did to its tables; any other path, or
    inside a test that monkeypatches, loaded as it is."""
    import nfstrace

    real = Path(path).resolve()
    if _PATCHING or not real.is_relative_to(SAMPLES):
        return nfstrace.load(path)
    st = real.stat()
    key = (str(real), st.st_size, st.st_mtime_ns)
    if key not in _LOADED:
        _LOADED[key] = nfstrace.load(path)
    return copy.deepcopy(_LOADED[key])


def bench_module() -> ModuleType:
    """bench/run.py (not a package) as a module: its inputs and helpers."""
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "bench" / "run.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def ground_truth(capture: Path) -> dict:
    """The lab's JSON beside a capture (NAME.json for NAME[.variant].pcap)."""
    name = capture.name.split(".pcap")[0]
    for suffix in (".s256", ".server-side"):
        name = name.removesuffix(suffix)
    return json.loads((capture.parent / f"{name}.json").read_text())


@pytest.fixture(scope="session")
def samples() -> Path:
    return SAMPLES
