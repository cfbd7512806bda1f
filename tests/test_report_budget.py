"""The time budget in the reports: the stacked-bar figure (figures.time_budget),
the cumulative transfer shaded by cause, and the HTML report's verdict, budget
figure and table (nfstrace/reports/html.py).

Inputs from real captures where cheap: the lab's v3-tcp-nfscp-w64k-d10-l0
(10 ms delay: the verdict is the round trip) and the crafted two-server capture
(tests/crafted/make_causes.py: two_mounts.pcap, two pairs); hand-built tables
where a known answer or a hostile string is needed.
"""

from __future__ import annotations

import html
import re
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import SAMPLES, load_sample
from report_page import plotly_copies
from test_figures import (
    CLIENT,
    SERVER,
    START_NS,
    full_diagnosis,
    study_budget,
    synthetic_trace,
    write_trace,
)

from nfstrace.analysis.budget import CAUSES, INTERVAL_COLUMNS, Budget
from nfstrace.analysis.findings import Finding
from nfstrace.analysis.verdict import Verdict, decide
from nfstrace.reports import figures as fg
from nfstrace.reports import html as report
from nfstrace.reports.html import render_report
from nfstrace.trace import Trace

try:
    from crafted import make_causes
except ImportError:  # tests/ not on sys.path: import as a package
    from tests.crafted import make_causes

ROUND_TRIP_CAPTURE = SAMPLES / "v3-tcp-nfscp-w64k-d10-l0.pcap"
XSS = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def round_trip() -> Trace:
    trace = load_sample(ROUND_TRIP_CAPTURE)
    assert trace.diagnosis.verdict.primary == "round_trip"  # the capture's known answer
    return trace


@pytest.fixture(scope="module")
def two_mounts(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    paths = make_causes.build_all(tmp_path_factory.mktemp("causes"))
    trace = load_sample(paths["two_mounts"])
    assert len(trace.diagnosis.budget.pairs) == 2
    return trace


def bar_x(trace: fg.Trace) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in trace["x"]], dtype="float64")


def intervals(rows: list[tuple[int, int, str]], evidence: str = "") -> pd.DataFrame:
    """A budget.intervals table of one pair from (start_ns, end_ns, cause) rows."""
    start, end, cause = (list(c) for c in zip(*rows, strict=True)) if rows else ([], [], [])
    table = pd.DataFrame(
        {
            "client": CLIENT,
            "server": SERVER,
            "start_ns": np.asarray(start, dtype="int64"),
            "end_ns": np.asarray(end, dtype="int64"),
            "duration_ns": np.asarray(end, dtype="int64") - np.asarray(start, dtype="int64"),
            "cause": cause,
            "evidence": evidence,
            "frame": -1,
        },
        index=range(len(start)),
    )
    assert list(table.columns) == list(INTERVAL_COLUMNS)
    return table


def progress_over(start_ns: int, end_ns: int) -> pd.DataFrame:
    """Write progress: one 8 KiB reply at each end."""
    return pd.DataFrame(
        {"t_ns": [start_ns, end_ns], "client": CLIENT, "server": SERVER, "bytes": [8192, 8192]}
    )


# ---- the colours ------------------------------------------------------------------------


def test_one_colour_per_cause_and_stalls_use_them() -> None:
    assert set(fg.CAUSE_COLOURS) == set(CAUSES)
    assert len(set(fg.CAUSE_COLOURS.values())) == len(CAUSES)  # told apart
    # the stall shading is the same colour as the budget cause the stall is a case of
    for stall, cause in fg.STALL_CAUSE.items():
        r, g, b = (int(fg.CAUSE_COLOURS[cause][i : i + 2], 16) for i in (1, 3, 5))
        assert fg.STALL_COLOURS[stall].startswith(f"rgba({r}, {g}, {b}, ")


# ---- 9. the time-budget bars ---------------------------------------------------------------


def test_budget_bars_of_a_real_capture(round_trip: Trace) -> None:
    pairs = round_trip.diagnosis.budget.pairs
    fig = fg.time_budget(pairs)
    present = [c for c in CAUSES if pairs[f"{c}_ns"].iloc[0] > 0]
    assert [t["name"] for t in fig["data"]] == present  # one trace per cause present, in order
    assert {"transfer", "round_trip", "commit"} <= set(present)
    assert fig["layout"]["barmode"] == "stack"
    seconds = round_trip.diagnosis.budget.seconds()
    for t in fig["data"]:
        assert t["type"] == "bar" and t["orientation"] == "h"
        assert list(t["y"]) == ["169.254.77.1 → 169.254.77.2"]  # one bar: one pair
        assert bar_x(t)[0] == pytest.approx(seconds[t["name"]] / 1e9)
        assert t["marker"]["color"] == fg.CAUSE_COLOURS[t["name"]]
        assert t["customdata"][0] == pytest.approx(seconds[t["name"]] / pairs["elapsed_ns"].iloc[0])
        assert t["name"] in t["hovertemplate"] and "elapsed" in t["hovertemplate"]
    # the bar is the pair's whole write activity; the verdict's cause is its longest segment
    assert sum(bar_x(t)[0] for t in fig["data"]) == pytest.approx(pairs["elapsed_ns"][0] / 1e9)
    assert max(fig["data"], key=lambda t: bar_x(t)[0])["name"] == "round_trip"


def test_budget_bars_of_two_pairs(two_mounts: Trace) -> None:
    pairs = two_mounts.diagnosis.budget.pairs
    fig = fg.time_budget(pairs)
    present = [c for c in CAUSES if (pairs[f"{c}_ns"] > 0).any()]
    assert [t["name"] for t in fig["data"]] == present
    longest = pairs.sort_values("elapsed_ns", ascending=False)
    labels = [f"{c} → {s}" for c, s in zip(longest["client"], longest["server"], strict=True)]
    assert fig["layout"]["yaxis"]["autorange"] == "reversed"  # the longest activity on top
    for t in fig["data"]:
        assert list(t["y"]) == labels  # one bar per pair, every segment on its pair's bar
        expected = longest[f"{t['name']}_ns"].to_numpy("float64") / 1e9
        x = bar_x(t)
        assert np.allclose(x[expected > 0], expected[expected > 0])
        assert np.isnan(x[expected == 0]).all()  # no segment where the cause took nothing
    totals = np.nansum([bar_x(t) for t in fig["data"]], axis=0)
    assert totals == pytest.approx(longest["elapsed_ns"].to_numpy("float64") / 1e9)


def test_budget_bars_without_writes_say_so() -> None:
    for pairs in (None, pd.DataFrame(columns=["client", "server", "elapsed_ns", "mbit_s"])):
        fig = fg.time_budget(pairs)
        assert not fig["data"] and "no WRITE activity" in fig["layout"]["annotations"][0]["text"]


def test_budget_bars_of_hundreds_of_pairs() -> None:
    n = 300
    elapsed = (np.arange(n, dtype="int64") + 1) * 1_000_000
    pairs = pd.DataFrame(
        {
            "client": [f"10.1.{i // 250}.{i % 250}" for i in range(n)],
            "server": SERVER,
            "elapsed_ns": elapsed,
            "mbit_s": 100.0,
            "transfer_ns": elapsed // 4,
            "server_ns": elapsed - elapsed // 4,
        }
    )
    fig = fg.time_budget(pairs)
    assert [t["name"] for t in fig["data"]] == ["transfer", "server"]
    shown = list(fig["data"][0]["y"])
    assert len(shown) == fg.MAX_BUDGET_PAIRS == 30
    assert shown[0] == f"10.1.1.49 → {SERVER}"  # the longest activity (pair 299) first
    assert bar_x(fig["data"][1])[0] == pytest.approx(0.3 - 0.075)
    note = "270 of 300 pairs left out"
    assert note in fig["layout"]["title"]["text"] and any(
        note in s for s in fig["layout"]["meta"]["notes"]
    )


def test_budget_bar_labels_are_escaped() -> None:
    pairs = pd.DataFrame(
        {"client": [XSS], "server": [SERVER], "elapsed_ns": [10], "mbit_s": [1.0], "server_ns": 10}
    )
    fig = fg.time_budget(pairs)
    assert "<script>" not in fig["data"][0]["y"][0] and "&lt;script&gt;" in fig["data"][0]["y"][0]


# ---- 1. the cumulative transfer shaded by cause -----------------------------------------------


def test_shading_of_a_real_capture(round_trip: Trace) -> None:
    d = round_trip.diagnosis
    t0 = round_trip.overview.start_ns
    iv = d.budget.intervals
    fig = fg.cumulative_transfer(d.progress, d.stalls.stalls, budget_intervals=iv, t0_ns=t0)
    shapes = fig["layout"]["shapes"]
    assert shapes
    colour_of = {v: k for k, v in fg.CAUSE_COLOURS.items()}
    drawn = {colour_of[s["fillcolor"]] for s in shapes}  # every shape in a cause's colour
    slow = iv[iv["cause"] != "transfer"]
    assert drawn == set(iv["cause"])  # transfer too, green as in the budget's bar
    for s in shapes:
        assert s["legendgroup"] == f"budget-{colour_of[s['fillcolor']]}" and not s["showlegend"]
        assert s["yref"] == "paper" and (s["y0"], s["y1"]) == (0, 1) and s["opacity"] < 1
    # the legend: one entry per cause present, its square marks along the time axis
    rugs = [t for t in fig["data"] if (t["name"] or "").startswith("time budget: ")]
    assert [t["legendgroup"] for t in rugs] == [f"budget-{c}" for c in CAUSES if c in drawn]
    assert all(t["marker"]["color"] == fg.CAUSE_COLOURS[t["legendgroup"][7:]] for t in rugs)
    assert any(t["name"].startswith("time budget: round_trip (0.063 s, ") for t in rugs)
    # x in seconds since t0, as the curve; each stretch covers its intervals
    assert min(s["x0"] for s in shapes) == pytest.approx((iv["start_ns"].min() - t0) / 1e9)
    assert max(s["x1"] for s in shapes) == pytest.approx((iv["end_ns"].max() - t0) / 1e9)
    # the round trips between a call's 5 µs bursts are one stretch, not 52 shapes
    assert (
        len([s for s in shapes if s["fillcolor"] != fg.CAUSE_COLOURS["transfer"]]) < len(slow) / 2
    )
    # no cap hit: nothing to say but the zoom to the writes (after 0.19 s of mounting)
    (note,) = fig["layout"]["meta"]["notes"]
    assert note.startswith("zoomed to the write activity, 0.190-0.289 s (the RPC traffic: 0.000-")
    assert "click" not in note  # a static image cannot be clicked
    lo, hi = fig["layout"]["xaxis"]["range"]
    assert lo < (slow["start_ns"].min() - t0) / 1e9 and hi > (iv["end_ns"].max() - t0) / 1e9
    # the stretches' evidence is in the hover of the marks under the plot, escaped
    assert sum(len(t["x"]) for t in rugs) == len(shapes)
    assert any("client waited for ACKs" in h for t in rugs for h in t["hovertext"])


def test_shading_keeps_the_stall_marking() -> None:
    tx = write_trace(600, stall_after=299)
    d = full_diagnosis(synthetic_trace(tx), stall_after=299)
    fig = fg.cumulative_transfer(
        d.progress, d.stalls.stalls, budget_intervals=d.budget.intervals, t0_ns=START_NS
    )
    stall = next(t for t in fig["data"] if t["name"].startswith("stall: commit (1, 2.266 s)"))
    assert stall["fillcolor"] == fg.STALL_COLOURS["commit"]
    assert any(a["text"] == "commit 2.266 s" for a in fig["layout"]["annotations"])
    commit = [s for s in fig["layout"]["shapes"] if s["fillcolor"] == fg.CAUSE_COLOURS["commit"]]
    assert len(commit) == 1 and commit[0]["x1"] - commit[0]["x0"] == pytest.approx(2.266)
    # the same figure without the budget: as before, no shapes, no cause marks
    plain = fg.cumulative_transfer(d.progress, d.stalls.stalls, t0_ns=START_NS)
    causes = set(d.budget.intervals["cause"])
    assert not plain["layout"].get("shapes") and len(plain["data"]) == len(fig["data"]) - len(
        causes
    )


def test_shading_merges_close_neighbours_of_one_cause() -> None:
    span = 10**9  # the plot's span: 1 s; 0.1% of it is 1 ms
    progress = progress_over(START_NS, START_NS + span)

    def shapes(gap_ns: int) -> tuple:
        a = START_NS + 400_000_000
        rows = [
            (a, a + 1_000_000, "server"),
            (a + 1_000_000, a + 1_000_000 + gap_ns, "transfer"),
            (a + 1_000_000 + gap_ns, a + 2_000_000 + gap_ns, "server"),
        ]
        fig = fg.cumulative_transfer(progress, budget_intervals=intervals(rows), t0_ns=START_NS)
        return fig["layout"]["shapes"]

    def server(gap_ns: int) -> list:
        return [s for s in shapes(gap_ns) if s["fillcolor"] == fg.CAUSE_COLOURS["server"]]

    (merged,) = server(900_000)  # closer than 0.1% of the span: one stretch
    assert (merged["x0"], merged["x1"]) == pytest.approx((0.4, 0.4029))
    assert len(server(1_100_000)) == 2  # farther: two


def test_shading_draws_at_most_the_cap_with_a_note() -> None:
    # 2,400 stretches of 4 causes, each 1 ms, every one 4 ms after the last:
    # one cause's stretches are 16 ms apart (1.6% of the span), none merge
    n, step = 2_400, 4_000_000
    start = START_NS + np.arange(n, dtype="int64") * step
    causes = ["round_trip", "server", "commit", "window"]
    rows = []
    for i, s in enumerate(start):
        length = 1_000_000 + (500_000 if i % 97 == 0 else 0)  # 25 longer ones
        rows += [
            (int(s), int(s) + length, causes[i % 4]),
            (int(s) + length, int(s) + step, "transfer"),
        ]
    iv = intervals(rows)
    progress = progress_over(START_NS, int(start[-1]) + step)
    t = time.monotonic()
    fig = fg.cumulative_transfer(progress, budget_intervals=iv, t0_ns=START_NS)
    assert time.monotonic() - t < 5
    shapes = fig["layout"]["shapes"]
    assert len(shapes) == fg.MAX_BUDGET_SHAPES == 300
    # transfer's intervals are 1 ms apart (below 0.1% of the span): one stretch
    # under all the others (drawn first); then the longest of the others
    transfer = [s for s in shapes if s["fillcolor"] == fg.CAUSE_COLOURS["transfer"]]
    assert len(transfer) == 1 and shapes[0] is transfer[0]
    assert transfer[0]["x1"] - transfer[0]["x0"] == pytest.approx((n * step - 1_500_000) / 1e9)
    long_ones = sum(1 for s in shapes[1:] if s["x1"] - s["x0"] > 0.0014)
    assert long_ones == len(range(0, n, 97))  # the longest are among those drawn
    assert sum(1 for s in shapes if s["showlegend"]) == 0
    rugs = [t for t in fig["data"] if (t["name"] or "").startswith("time budget: ")]
    assert [t["legendgroup"] for t in rugs] == [f"budget-{c}" for c in ["transfer", *causes]]
    note = "300 of 2,401 stretches shaded"
    assert (
        any(note in s for s in fig["layout"]["meta"]["notes"])
        and note in fig["layout"]["title"]["text"]
    )


def test_shading_of_transfer_only_is_green_and_named() -> None:
    """Data moving is shaded as the budget's bar shows it (issue 34, item 3: it
    was left white and out of the legend)."""
    progress = progress_over(START_NS, START_NS + 10**9)
    iv = intervals([(START_NS, START_NS + 10**9, "transfer")])
    fig = fg.cumulative_transfer(progress, budget_intervals=iv, t0_ns=START_NS)
    (shape,) = fig["layout"]["shapes"]
    assert shape["fillcolor"] == fg.CAUSE_COLOURS["transfer"]
    assert [t["name"] for t in fig["data"]] == [
        "MB acknowledged", "time budget: transfer (1.000 s, 100%)"
    ]  # fmt: skip


def test_shading_evidence_is_escaped() -> None:
    progress = progress_over(START_NS, START_NS + 10**9)
    iv = intervals([(START_NS, START_NS + 10**8, "commit")], evidence=f"COMMIT of {XSS}")
    fig = fg.cumulative_transfer(progress, budget_intervals=iv, t0_ns=START_NS)
    (hover,) = next(t for t in fig["data"] if t["name"].startswith("time budget: commit"))[
        "hovertext"
    ]
    assert XSS not in hover and "&lt;script&gt;alert(1)&lt;/script&gt;" in hover


# ---- the HTML report ---------------------------------------------------------------------


def section(text: str, name: str) -> str:
    return text[text.index(f'<section id="{name}">') : text.index("</section>", text.index(name))]


def test_report_leads_with_the_verdict_then_findings_then_budget(round_trip: Trace) -> None:
    d = round_trip.diagnosis
    text = render_report(round_trip, d)
    diagnosis = section(text, "diagnosis")
    said = html.escape(d.verdict.text[0].upper() + d.verdict.text[1:])
    verdict_at = diagnosis.index(f'<span class="verdict-text">{said}</span>')
    assert '<span class="primary"' in diagnosis[:verdict_at]
    assert ">round_trip</span>" in diagnosis[:verdict_at]
    assert diagnosis.count(said) == 1  # the verdict finding is not repeated below it
    findings_at = diagnosis.index('<ol class="findings">')
    figure_at = diagnosis.index('data-figure="time budget"')
    table_at = diagnosis.index('<table class="sortable" id="time-budget">')
    assert verdict_at < findings_at < figure_at < table_at
    for f in d.findings[1:]:  # the other findings, as before
        assert html.escape(f.title) in diagnosis
    # the table: one row per pair, the causes that took time, in CAUSES order
    table = diagnosis[table_at : diagnosis.index("</table>", table_at)]
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", table)
    pairs = d.budget.pairs
    shares = [f"{c} %" for c in CAUSES if pairs[f"{c}_ns"].iloc[0] > 0]
    assert headers == ["client", "server", "verdict", "elapsed (s)", "Mbit/s", *shares]
    assert table.count("<tr>") == 2  # header and the pair
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", table)
    assert cells[:5] == [
        "169.254.77.1",
        "169.254.77.2",
        "round_trip",
        f"{pairs['elapsed_ns'][0] / 1e9:,.6f}",
        f"{pairs['mbit_s'][0]:,.1f}",
    ]
    share = pairs["round_trip_ns"][0] / pairs["elapsed_ns"][0] * 100
    assert cells[5 + shares.index("round_trip %")] == f"{share:.1f}"
    assert plotly_copies(text) == 1  # still one offline file


def test_report_shades_each_pairs_figure_with_its_own_intervals(
    two_mounts: Trace, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[set, int]] = []
    original = fg.cumulative_transfer

    def spy(*args: object, budget_intervals: pd.DataFrame | None = None, **kw: object) -> fg.Figure:
        assert budget_intervals is not None
        pair = set(zip(budget_intervals["client"], budget_intervals["server"], strict=True))
        seen.append((pair, len(budget_intervals)))
        return original(*args, budget_intervals=budget_intervals, **kw)

    monkeypatch.setattr(report.fg, "cumulative_transfer", spy)
    text = render_report(two_mounts, two_mounts.diagnosis)
    iv = two_mounts.diagnosis.budget.intervals
    expected = iv.groupby(["client", "server"]).size()
    assert sorted((next(iter(p)), n) for p, n in seen) == sorted(expected.items())
    table = text[
        text.index('id="time-budget"') : text.index("</table>", text.index('id="time-budget"'))
    ]
    assert table.count("<tr>") == 3 and "10.0.0.2" in table and "10.0.0.3" in table


def test_report_escapes_the_verdict_and_the_evidence() -> None:
    trace = synthetic_trace(write_trace(200, stall_after=99))
    d = full_diagnosis(trace, stall_after=99)
    pair = replace(d.verdict.pairs[0], primary=XSS)
    d = replace(
        d,
        verdict=replace(d.verdict, text=f"the writes waited on {XSS}", primary=XSS, pairs=[pair]),
        budget=Budget(
            pairs=d.budget.pairs.assign(client=pd.array([f"{CLIENT}{XSS}"], dtype="str")),
            intervals=d.budget.intervals.assign(evidence=f"COMMIT of {XSS}"),
        ),
        findings=[Finding(kind="verdict", title=f"The writes waited on {XSS}"), *d.findings[1:]],
    )
    text = render_report(trace, d)
    assert "<script>alert" not in text and "</script><script>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    diagnosis = section(text, "diagnosis")
    assert "The writes waited on &lt;script&gt;alert(1)&lt;/script&gt;" in diagnosis
    assert f"{CLIENT}&lt;script&gt;" in diagnosis  # in the table and the figure's label
    assert text.count("<script") == text.count("</script>")


def test_report_with_an_empty_budget_and_no_stalls() -> None:
    """Steady writes (no stall found: an empty stall table, one stretch of
    writes), their budget empty as without WRITE activity and the verdict
    ``decide`` gives it: no budget figure or table, a note; the verdict, then
    every finding (none repeats it); no stall or slope drawn."""
    trace = synthetic_trace(write_trace(600))
    d = trace.diagnosis
    assert d.stalls.stalls.empty and len(d.stalls.segments) == 1 and len(d.budget.pairs) == 1
    empty = Budget(pairs=d.budget.pairs.iloc[:0], intervals=d.budget.intervals.iloc[:0])
    d = replace(d, budget=empty, verdict=decide(empty))
    assert d.verdict == Verdict("none", "no WRITE activity to judge")
    text = render_report(trace, d)
    assert 'id="time-budget"' not in text and 'data-figure="time budget"' not in text
    assert "Time budget: no WRITE activity in the capture, nothing to split by cause." in text
    diagnosis = section(text, "diagnosis")
    assert '<span class="verdict-text">No WRITE activity to judge</span>' in diagnosis
    assert ">none</span>" in diagnosis and "Written:" not in diagnosis  # no write activity
    assert d.findings and all(html.escape(f.title) in diagnosis for f in d.findings)
    assert 'data-figure="cumulative transfer"' in text  # the writes are still drawn
    assert "stall: " not in text and "slope between stalls" not in text


def test_budget_table_without_verdict_pairs() -> None:
    """A verdict without per-pair verdicts: the budget table has no verdict column."""
    trace = synthetic_trace(write_trace(600, stall_after=299))
    d = full_diagnosis(trace, stall_after=299)
    d = replace(d, verdict=replace(d.verdict, pairs=[]))
    table = section(render_report(trace, d), "diagnosis")
    table = table[table.index('id="time-budget"') :]
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", table[: table.index("</thead>")])
    assert headers[:4] == ["client", "server", "elapsed (s)", "Mbit/s"]
    assert "verdict" not in headers


def test_report_of_a_capture_without_writes(tmp_path: Path) -> None:
    from test_report_browser import xss_capture  # LOOKUPs only: metadata traffic

    trace = load_sample(xss_capture(tmp_path / "lookups.pcap"))
    budget = trace.diagnosis.budget
    assert budget is not None and budget.pairs.empty
    text = render_report(trace, trace.diagnosis)
    assert "no WRITE activity in the capture" in text
    assert 'id="time-budget"' not in text and 'data-figure="time budget"' not in text


@pytest.mark.slow
def test_report_of_hundreds_of_pairs() -> None:
    n = 240
    parts, budgets = [], []
    for i in range(n):
        tx = write_trace(2 + i)  # pair i writes 2 + i blocks: the last is the busiest
        tx["client"] = pd.array([f"10.2.{i // 200}.{i % 200}"] * len(tx), dtype="string")
        parts.append(tx)
        budgets.append(study_budget(tx))
    trace = synthetic_trace(pd.concat(parts, ignore_index=True))
    budget = Budget(
        pairs=pd.concat([b.pairs for b in budgets], ignore_index=True),
        intervals=pd.concat([b.intervals for b in budgets], ignore_index=True),
    )
    d = replace(trace.diagnosis, budget=budget, verdict=decide(budget))
    assert len(d.verdict.pairs) == n
    start = time.monotonic()
    text = render_report(trace, d)
    assert time.monotonic() - start < 60
    assert "210 of 240 pairs left out" in text  # the bars: the 30 busiest
    table = text[
        text.index('id="time-budget"') : text.index("</table>", text.index('id="time-budget"'))
    ]
    assert table.count("<tr>") == n + 1
    assert table.index("10.2.1.39") < table.index("10.2.0.0")  # the busiest first
    assert text.count('data-figure="cumulative transfer"') == report.MAX_PAIR_SECTIONS
    assert plotly_copies(text) == 1


def test_events_are_grouped_by_kind_with_the_stalls_first() -> None:
    """The events (issue 18: 153 tcp_window_full rows with the stalls buried among
    them): a summary by kind -- what cost time first, then the parser's events,
    busiest first -- and each kind's rows in a collapsed block, the stalls open."""
    t = load_sample(SAMPLES / "causes" / "v41-tcp-nfsrs-w1m-pause200ms-d0-l0.pcap")
    text = render_report(t, t.diagnosis)
    start = text.index('<table class="sortable" id="events"')
    summary = text[start : text.index("</table>", start)]
    kinds = re.findall(r'<tr><td data-v="([^"]*)">', summary)
    assert kinds[:2] == ["stall", "error reply"]
    parser_kinds = set(t.events["kind"].astype(str))
    assert set(kinds[2:]) == parser_kinds  # named as the parser names them
    counts = t.events["kind"].astype(str).value_counts()
    assert [counts[k] for k in kinds[2:]] == sorted(counts, reverse=True)
    blocks = re.findall(r"<details( open)?><summary>([^<:]*): ([\d,]+)</summary>", text)
    assert [(opened, kind) for opened, kind, _ in blocks][:2] == [
        (" open", "stall"),
        ("", "error reply"),
    ]
    assert [k for _, k, _ in blocks] == kinds
    assert all(opened == "" for opened, _, _ in blocks[1:])


def test_every_figure_has_a_caption_and_time_axes_share_the_zoom(round_trip: Trace) -> None:
    """Each figure says what to look for (issue 18); the time figures share the
    cumulative transfer's zoom to the write activity."""
    text = render_report(round_trip, round_trip.diagnosis)
    names = re.findall(r'<div class="figure" data-figure="([^"]*)">', text)
    assert names and set(names) <= set(report.CAPTIONS)
    assert text.count('<p class="caption">') == len(names)
    ranges = re.findall(r'"range":\[([-\d.e]+),([-\d.e]+)\]', text)
    zoom = max(set(ranges), key=ranges.count)
    assert ranges.count(zoom) == 4  # one zoom for the four time figures
    assert float(zoom[0]) > 0.15  # past the mount, to the writes
