"""Shared fixtures: the sample captures and their ground truth."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType

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


def pytest_report_header() -> str:
    if not _LAB:
        return "lab captures: sample-pcaps/ only (NFSTRACE_LAB_CAPTURES=DIR adds more)"
    return f"lab captures: sample-pcaps/ and {len(LAB_CAPTURES)} from {_LAB}"


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
