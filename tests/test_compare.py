"""nfstrace compare (issue 18): two captures side by side, what changed in
words, in the terminal, JSON and one HTML report."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import SAMPLES
from report_page import plotly_copies
from typer.testing import CliRunner

import nfstrace
from nfstrace.cli import app
from nfstrace.comparison import compare, speed_words

SLOW = SAMPLES / "causes" / "v3-tcp-nfscp-w64k-d10-l0.pcap"  # 10 ms round trip added
FAST = SAMPLES / "causes" / "v3-tcp-nfscp-w64k-d0-l0.pcap"  # the same copy without


@pytest.fixture(scope="module")
def slow() -> nfstrace.Trace:
    return nfstrace.load(SLOW)


@pytest.fixture(scope="module")
def fast() -> nfstrace.Trace:
    return nfstrace.load(FAST)


def test_a_fix_of_the_round_trip_is_said_in_words(slow, fast) -> None:
    cmp = compare(slow, fast)
    assert cmp.changes[0].startswith("Writes ran 8.") and "100.6 → 843.8 Mbit/s" in cmp.changes[0]
    assert cmp.changes[1].startswith("The verdict changed: round_trip → none")
    assert cmp.changes[2].startswith("169.254.77.1 → 169.254.77.2: round trip 75% → 1%")
    assert cmp.changes[3].startswith("WRITE median 12.945 → 2.193 ms (5.9x faster; 16 → 16")
    (pair,) = cmp.pairs.itertuples(index=False)
    assert (pair.primary_before, pair.primary_after) == ("round_trip", "none")
    assert pair.speedup == pytest.approx(pair.mbit_s_after / pair.mbit_s_before)
    assert pair.round_trip_share_before == pytest.approx(0.75, abs=0.01)
    write = cmp.operations[cmp.operations["op"] == "WRITE"].iloc[0]
    assert (write.calls_before, write.calls_after) == (16, 16)
    assert write.p50_change == pytest.approx(2.193 / 12.945 - 1, abs=1e-3)


def test_a_capture_against_itself_changes_nothing(slow) -> None:
    cmp = compare(slow, slow)
    assert cmp.changes[0] == "Writes ran about as fast: 100.6 → 100.6 Mbit/s"
    assert cmp.changes[1].startswith("The verdict is still round_trip")
    assert len(cmp.changes) == 2  # no share moved, no median moved
    assert speed_words(1.0) == "unchanged" and speed_words(0.5) == "2.0x faster"


def test_one_pair_each_on_other_addresses_is_compared(slow, fast) -> None:
    """The same copy re-run from another host: one pair each, compared anyway."""
    moved = fast.diagnosis.budget.pairs.assign(client="10.9.9.9")
    budget = type(fast.diagnosis.budget)(moved, fast.diagnosis.budget.intervals)
    other = type(fast)(**{**fast.__dict__, "diagnosis": type(fast.diagnosis)(
        **{**fast.diagnosis.__dict__, "budget": budget})})  # fmt: skip
    (pair,) = compare(slow, other).pairs.itertuples(index=False)
    assert pair.client == "169.254.77.1 / 10.9.9.9" and pair.mbit_s_after > 800


def test_the_command_writes_terminal_json_and_html(tmp_path: Path) -> None:
    before, after = tmp_path / "before.pcap", tmp_path / "after.pcap"
    shutil.copy(SLOW, before)
    shutil.copy(FAST, after)
    out = tmp_path / "change.json"
    r = CliRunner().invoke(app, ["compare", str(before), str(after), "--json", str(out)])
    assert r.exit_code == 0, r.output
    assert "What changed" in r.stdout and "Writes ran 8." in r.stdout
    assert "round trip 75% → 1%" in r.stdout and "5.9x faster" in r.stdout
    data = json.loads(out.read_text())
    assert data["before"]["verdict"]["primary"] == "round_trip"
    assert data["after"]["verdict"]["primary"] == "none"
    assert data["changes"][0].startswith("Writes ran") and len(data["pairs"]) == 1
    page = (tmp_path / "after.pcap.compare.html").read_text(encoding="utf-8")  # the default
    assert plotly_copies(page) == 1 and 'data-figure="time budget"' in page
    assert "before: 169.254.77.1" in page and "after: 169.254.77.1" in page
    same = CliRunner().invoke(app, ["compare", str(before), str(before), "-o", str(before)])
    assert same.exit_code == 2  # an output over an input is refused before reading


def test_the_html_says_changes_as_the_terminal_does(slow, fast) -> None:
    """Issue 34, item 7: the report's tables say 'before → after' and '5.9x
    faster' as the terminal does, never a fraction (-0.831), and the pairs table
    keeps to the causes that took time (it overflowed the page with 20 share
    columns)."""
    import re

    from nfstrace.reports.html import render_comparison

    cmp = compare(slow, fast)
    page = render_comparison(cmp)
    pair = cmp.pairs.iloc[0]
    round_trip = f"{pair.round_trip_share_before:.0%} → {pair.round_trip_share_after:.0%}"
    pairs = page.split('id="pairs"')[1].split("</table>")[0]
    heads = re.findall(r"<th[^>]*>([^<]*)</th>", pairs)
    assert heads[:5] == ["client → server", "write activity (s)", "Mbit/s", "writes", "verdict"]
    assert "round trip %" in heads and "capture gap %" not in heads and len(heads) <= 12
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", pairs)
    assert "100.6 → 843.8" in cells and "8.4x faster" in cells and round_trip in cells
    ops = page.split('id="operations"')[1].split("</table>")[0]
    write = re.search(r"<tr><td[^>]*>WRITE</td>(.*?)</tr>", ops)
    assert write is not None
    assert re.findall(r">([^<]*)</td>", write.group(1)) == [
        "3", "16 → 16", "12.945 → 2.193", "28.119 → 5.049", "5.9x faster", "0 → 0",
    ]  # fmt: skip
    assert not re.search(r">-?0\.\d+</td>", pairs + ops)  # no bare fractions
