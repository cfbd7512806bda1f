"""The report's size (issue 34, item 4): one attachable file of at most 1 MB
for a typical capture (Bugzilla's default limit is 1,000 KB; it was 2.1 MB),
because it inlines plotly.js's basic bundle (vendored with its licence and
version in nfstrace/reports/assets) instead of the whole library; the figures
draw only the trace types that bundle holds (that they draw with it in
Chromium: tests/test_report_browser.py)."""

from __future__ import annotations

import base64
import gzip
import re
from importlib import resources
from pathlib import Path

import pytest
from conftest import SAMPLES, load_sample
from report_page import plotly_copies
from test_figures import full_diagnosis, synthetic_trace, write_trace

from nfstrace.comparison import compare
from nfstrace.reports import figures as fg
from nfstrace.reports.html import (
    PACKED_PLOTLY_ID,
    _inputs,
    _pair_figure_list,
    plotly_js,
    render_comparison,
    render_report,
)

ASSETS = resources.files("nfstrace.reports").joinpath("assets")
LIMIT = 1_000_000  # bytes


@pytest.mark.parametrize(
    "capture",
    [
        SAMPLES / "v3-tcp-nfscp-w1m-d0-l0.pcap",
        SAMPLES / "causes" / "v3-tcp-nfscp-w64k-d2-l0.5.pcap",
        SAMPLES / "causes" / "v3-tcp-nfscp-w64k-d10-l0.pcap",
        SAMPLES / "v41-tcp-nfsrs-w1m-d0-l0.pcap",
    ],
    ids=lambda p: p.stem,
)
def test_a_typical_report_is_at_most_1_mb(capture: Path) -> None:
    trace = load_sample(capture)
    page = render_report(trace, trace.diagnosis)
    size = len(page.encode("utf-8"))
    assert size <= LIMIT, size
    assert plotly_copies(page) == 1
    packed = re.search(rf'id="{PACKED_PLOTLY_ID}">([^<]*)<', page)
    assert packed is not None
    js = gzip.decompress(base64.b64decode(packed.group(1))).decode()
    assert js == plotly_js()[0]  # the vendored bundle, whole
    print(f"{capture.name}: {size / 1e6:.2f} MB")


def test_the_comparison_is_at_most_1_mb() -> None:
    slow = load_sample(SAMPLES / "causes" / "v3-tcp-nfscp-w64k-d10-l0.pcap")
    fast = load_sample(SAMPLES / "causes" / "v3-tcp-nfscp-w64k-d0-l0.pcap")
    assert len(render_comparison(compare(slow, fast)).encode("utf-8")) <= LIMIT


def test_the_bundle_is_vendored_with_its_licence_and_version() -> None:
    js, version = plotly_js()
    assert js.startswith("/**\n* plotly.js (basic - minified) v")
    licence = ASSETS.joinpath("plotly-basic.LICENSE").read_text("utf-8")
    assert licence.startswith("MIT License") and "Plotly" in licence
    readme = ASSETS.joinpath("plotly-basic.README.md").read_text("utf-8")
    assert f"plotly.js-basic-dist-min@{version}" in readme
    assert f"{len(js.encode()):,} bytes" in readme
    import hashlib

    assert hashlib.sha256(js.encode()).hexdigest() in readme
    # the plotly.js of the Python package whose template the figures carry and which
    # validates them (tests/test_figures.py): the same major version
    from plotly.offline import get_plotlyjs_version

    assert version.split(".")[0] == get_plotlyjs_version().split(".")[0], (
        version,
        get_plotlyjs_version(),
    )


def _types(figures: list[fg.Figure]) -> set[str]:
    return {trace["type"] for fig in figures for trace in fig["data"]}


def test_the_figures_draw_only_the_bundles_trace_types() -> None:
    """Every figure of a full diagnosis, and of a million transactions (once
    drawn in WebGL), uses only scatter and bar: the basic bundle's types."""
    bundle = {"scatter", "bar", "pie"}  # plotly.js-basic-dist-min (its README)
    assert set(fg.TRACE_TYPES) <= bundle
    # (30,000 WRITEs: three times the point budget, so every per-transaction
    # figure has to be thinned; the million-transaction test is the slow one)
    assert 2 * fg.POINT_BUDGET < 30_000
    for n in (3_000, 30_000):
        tx = write_trace(n, stall_after=n // 2 - 1, resent=n * 2 // 3)
        trace = synthetic_trace(tx)
        diagnosis = full_diagnosis(trace, stall_after=n // 2 - 1)
        figures = [
            f for _, f in _pair_figure_list(trace, _inputs(diagnosis), None, fg.POINT_BUDGET)
        ]
        figures += [
            fg.latency_cdf(trace.transactions),
            fg.time_budget(diagnosis.budget.pairs),
            fg.operation_mix(diagnosis.workload.op_mix),
            fg.response_vs_throughput(diagnosis.workload.windows, 1.0, 0.1),
            fg.model_figure(
                diagnosis.model.terms, diagnosis.model.predictions, diagnosis.model.what_if
            ),
        ]
        assert _types(figures) <= set(fg.TRACE_TYPES), _types(figures)
        points = max(len(t["x"]) for f in figures for t in f["data"] if t["type"] == "scatter")
        assert points <= fg.POINT_BUDGET + 2  # thinned: SVG draws them in time
