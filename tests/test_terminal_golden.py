"""The terminal summary of three sample captures, pinned word for word
(issue 18): a healthy copy, a copy over a 10 ms round trip and a lossy one.
Any change to what an administrator reads shows up here as a diff.

Pinned at the widths the text is read at (issue 34, item 1): written to a
pipe or a file (100 columns: the default view and ``--full``), and ``--full``
on a terminal of 80 and of 120 columns.  At every width nothing is cut: no
ellipsis, no line wider than the width (but the first, which names the capture
whole), every operation's name whole.

After a deliberate change, regenerate and review the diff:

    NFSTRACE_UPDATE_GOLDEN=1 python3 -m pytest -q tests/test_terminal_golden.py
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from conftest import load_sample
from rich.cells import cell_len
from typer.testing import CliRunner

import nfstrace
from nfstrace.cli import WIDTH, app

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"
CAPTURES = [
    "sample-pcaps/causes/v3-tcp-nfsrs-w1m-d0-l0.pcap",  # healthy, a LOOKUP gets NOENT
    "sample-pcaps/causes/v3-tcp-nfscp-w64k-d10-l0.pcap",  # the round trip
    "sample-pcaps/v3-tcp-nfscp-w64k-d2-l0.5.pcap",  # TCP loss
]
# (golden file suffix, width, --full, through the command line into a pipe)
MODES = [
    ("", WIDTH, False, True),
    (".full-pipe", WIDTH, True, True),
    (".full-80", 80, True, False),
    (".full-120", 120, True, False),
]


def _text(capture: str, width: int, full: bool, pipe: bool) -> str:
    if pipe:  # CliRunner's output is no terminal: what a file or a pipe receives
        args = ["analyze", capture, "--no-report"] + ["--full"] * full
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        return result.stdout
    return nfstrace.summary(load_sample(capture), full=full, width=width)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m[0].strip(".") or "pipe")
@pytest.mark.parametrize("capture", CAPTURES, ids=lambda c: Path(c).stem)
def test_terminal_output_is_pinned(
    capture: str, mode: tuple[str, int, bool, bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    suffix, width, full, pipe = mode
    monkeypatch.chdir(ROOT)  # the header names the capture as given: relative
    text = _text(capture, width, full, pipe)
    golden = GOLDEN / (Path(capture).stem + suffix + ".txt")
    if os.environ.get("NFSTRACE_UPDATE_GOLDEN"):
        golden.write_text(text, encoding="utf-8")
    assert text == golden.read_text(encoding="utf-8")
    # nothing cut, at any width
    assert "…" not in text
    lines = text.splitlines()
    assert lines[0] == f"nfstrace {capture}"
    wide = [line for line in lines[1:] if cell_len(line) > width]
    assert not wide, wide
    if full:
        words = set(re.findall(r"[\w-]+", text))
        trace = load_sample(capture)
        for op in trace.latency["op"].astype(str):
            assert op in words, op  # each operation named whole
        for value in trace.latency["p99_ms"]:
            assert f"{value:,.3f}" in text  # and its figures
