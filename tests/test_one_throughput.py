"""One write throughput, one definition, said where it is shown (issue 34,
item 2): the verdict's figure (bytes of successful WRITE replies over the write
activity, ``overview.write_activity``) is the one the terminal, the HTML report,
the Markdown and the JSON give as "written"; the WRITE calls' own span, a
second figure, appears only under its own name."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import SAMPLES, load_sample
from typer.testing import CliRunner

import nfstrace
from nfstrace.analysis.overview import write_activity
from nfstrace.cli import app
from nfstrace.comparison import write_rate
from nfstrace.reports.html import render_report
from nfstrace.reports.markdown import render_markdown

CAPTURES = [
    SAMPLES / "v3-tcp-nfscp-w1m-d0-l0.pcap",  # healthy: 228.1 vs 253.9 before
    SAMPLES / "causes" / "v3-tcp-nfscp-w64k-d10-l0.pcap",  # 100.6 vs 117.4
    SAMPLES / "causes" / "v3-tcp-nfscp-w64k-d2-l0.5.pcap",
]
MBIT = re.compile(r"([\d,]+\.\d) Mbit/s")


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.stem)
def test_written_is_the_verdicts_figure_everywhere(capture: Path, tmp_path: Path) -> None:
    trace = load_sample(capture)
    budget = trace.diagnosis.budget
    activity = write_activity(budget.pairs)
    calls = trace.overview.write
    assert activity is not None and calls is not None
    rate, other = f"{activity.mbits_per_s:,.1f}", f"{calls.mbits_per_s:,.1f}"
    assert rate != other  # two different figures: the test means something
    # the verdict, the budget and compare give it
    assert f"writes ran at {rate} Mbit/s" in trace.diagnosis.verdict.text
    assert f"{float(budget.pairs['mbit_s'].iloc[0]):,.1f}" == rate
    assert f"{write_rate(trace):,.1f}" == rate
    # the terminal: "written" is it, with its span; the default view has no other
    summary = nfstrace.summary(trace, width=1000)  # (one line each: nothing wraps)
    written = [line for line in summary.splitlines() if line.strip().startswith("written")]
    assert len(written) == 1 and f"({rate} Mbit/s)" in written[0]
    assert "of write activity (first WRITE call to last WRITE or COMMIT reply)" in written[0]
    assert f"{other} Mbit/s" not in summary
    # --full: the second figure only under its name, before the model's own table
    full = nfstrace.summary(trace, full=True, width=1000).split("Transactional latency model")[0]
    for line in full.splitlines():
        if f"{other} Mbit/s" in line:
            assert line.strip().startswith("WRITE calls' own span:"), line
    # the HTML: the headline and the capture facts say "written" with the same figure
    page = render_report(trace, trace.diagnosis)
    headline = re.search(r'<p class="headline">([^<]*)</p>', page)
    assert headline and f"({rate} Mbit/s)" in headline.group(1)
    assert "of write activity" in headline.group(1)
    facts = dict(re.findall(r"<tr><th>([^<]*)</th><td>([^<]*)</td></tr>", page))
    assert f"({rate} Mbit/s)" in facts["written"]
    assert f"({other} Mbit/s)" in facts["WRITE calls&#x27; own span"]
    # the Markdown for a ticket
    text = render_markdown(trace)
    assert f"**Written:** {activity.bytes / 1e6:,.3f} MB" in text and f"({rate} Mbit/s)" in text
    assert f"{other} Mbit/s" not in text
    # the JSON: write_throughput is it, the overview's figure says what it measures
    out = tmp_path / "s.json"
    r = CliRunner().invoke(app, ["analyze", str(capture), "-q", "--no-report", "--json", str(out)])
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    assert f"{data['write_throughput']['mbits_per_s']:,.1f}" == rate
    assert data["write_throughput"]["span"].startswith("of write activity")
    assert data["overview"]["write"]["span"] == "(first WRITE call to last WRITE reply)"
