"""Shared fixtures: the sample captures and their ground truth."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample-pcaps"
sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/ helpers (tshark_ref)

# Real lab captures (make-captures.sh): full-payload ones, and -s 256 twins.
FULL_CAPTURES = sorted(p for p in SAMPLES.glob("*.pcap") if ".s256." not in p.name)
S256_CAPTURES = sorted(SAMPLES.glob("*.s256.pcap"))


def ground_truth(capture: Path) -> dict:
    """The lab's JSON beside a capture (NAME.json for NAME[.variant].pcap)."""
    name = capture.name.split(".pcap")[0]
    for suffix in (".s256", ".server-side"):
        name = name.removesuffix(suffix)
    return json.loads((capture.parent / f"{name}.json").read_text())


@pytest.fixture(scope="session")
def samples() -> Path:
    return SAMPLES
