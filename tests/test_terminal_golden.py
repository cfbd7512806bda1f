"""The terminal summary of three sample captures, pinned word for word
(issue 18): a healthy copy, a copy over a 10 ms round trip and a lossy one.
Any change to what an administrator reads shows up here as a diff.

After a deliberate change, regenerate and review the diff:

    NFSTRACE_UPDATE_GOLDEN=1 python3 -m pytest -q tests/test_terminal_golden.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nfstrace.cli import app

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"
CAPTURES = [
    "sample-pcaps/causes/v3-tcp-nfsrs-w1m-d0-l0.pcap",  # healthy, a LOOKUP gets NOENT
    "sample-pcaps/causes/v3-tcp-nfscp-w64k-d10-l0.pcap",  # the round trip
    "sample-pcaps/v3-tcp-nfscp-w64k-d2-l0.5.pcap",  # TCP loss
]


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda c: Path(c).stem)
def test_terminal_output_is_pinned(capture: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the header names the capture as given: relative
    result = CliRunner().invoke(app, ["analyze", capture, "--no-report"])
    assert result.exit_code == 0, result.output
    golden = GOLDEN / (Path(capture).stem + ".txt")
    if os.environ.get("NFSTRACE_UPDATE_GOLDEN"):
        golden.write_text(result.stdout, encoding="utf-8")
    assert result.stdout == golden.read_text(encoding="utf-8")
