"""The HTML report opened in a real browser: headless Chromium, network off.

Each test writes a report, loads it from file:// with Chromium's --dump-dom
after a virtual-time budget, and reads what the report's own check script
wrote on <body>: figures present, figures drawn (plot SVG), script errors
recorded (window.onerror, unhandled rejections, console.error).  Chromium's
console log (--enable-logging=stderr) must be empty of messages from the page.
Chromium missing is a failure, not a skip: .ci/run installs it (Debian package
``chromium``).
"""

from __future__ import annotations

import html
import os
import re
import shutil
import struct
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT, SAMPLES, ground_truth
from report_page import plotly_copies
from test_figures import full_diagnosis, synthetic_trace, write_trace

import nfstrace
from nfstrace.analysis.budget import CAUSES
from nfstrace.reports.html import render_report, write_report

pytestmark = pytest.mark.slow  # the fast loop (-m 'not slow') skips this module

try:
    from crafted import make_crafted as mc
except ImportError:  # tests/ not on sys.path: import as a package
    from tests.crafted import make_crafted as mc

SAMPLE = SAMPLES / "v3-tcp-nfscp-w1m-d0-l0.pcap"
BROWSER_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
    "--disable-extensions",
    # network off: every host resolves to nothing, every proxy connection is refused
    "--proxy-server=127.0.0.1:9",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--enable-logging=stderr",
    "--v=0",
]
XSS_NAME = "<script>alert(1)</script>"
XSS_MARKER = "<img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">"


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail("chromium is not installed: apt-get install -y chromium (see .ci/run)")
    return path


def open_in_browser(
    report: Path, tmp: Path, *extra: str, budget_ms: int = 30_000
) -> tuple[str, list[str], float]:
    """(dumped DOM, console lines of the page, seconds) of the report in Chromium."""
    profile = tmp / f"profile-{report.stem}"
    start = time.monotonic()
    run = subprocess.run(
        [
            chromium(),
            *BROWSER_FLAGS,
            *extra,
            f"--user-data-dir={profile}",
            f"--virtual-time-budget={budget_ms}",
            "--dump-dom",
            report.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    seconds = time.monotonic() - start
    assert run.returncode == 0, run.stderr[-2000:]
    console = [line for line in run.stderr.splitlines() if ":CONSOLE" in line]
    return run.stdout, console, seconds


def screenshot(report: Path, tmp: Path, *extra: str) -> Path:
    """A 1400x8000 screenshot of the whole report, kept as a test artifact in
    $NFSTRACE_ARTIFACTS (default: test-artifacts/ at the top of the tree) to be looked at."""
    png = tmp / f"{report.stem}.png"
    subprocess.run(
        [
            chromium(),
            *BROWSER_FLAGS,
            *extra,
            f"--user-data-dir={tmp / ('shot-' + report.stem)}",
            "--virtual-time-budget=30000",
            "--hide-scrollbars",
            "--window-size=1400,8000",
            f"--screenshot={png}",
            report.resolve().as_uri(),
        ],
        capture_output=True,
        timeout=300,
        check=True,
    )
    assert png.stat().st_size > 50_000  # a drawn page, not a blank one
    artifacts = Path(os.environ.get("NFSTRACE_ARTIFACTS") or ROOT / "test-artifacts")
    artifacts.mkdir(parents=True, exist_ok=True)
    shutil.copy(png, artifacts / png.name)
    return artifacts / png.name


def body_state(dom: str) -> dict[str, str]:
    """The attributes the report's check script set on <body>."""
    body = re.search(r"<body([^>]*)>", dom)
    assert body, "no <body> in the dumped DOM"
    return dict(re.findall(r'([\w-]+)="([^"]*)"', body.group(1)))


def in_dom(text: str) -> str:
    """Text as Chromium's --dump-dom serializes it (only &, <, > escaped)."""
    return html.escape(text, quote=False)


def assert_all_drawn(report_html: str, dom: str, console: list[str]) -> int:
    """Every figure div drawn, no script error, nothing on the console; returns the count."""
    state = body_state(dom)
    figures = report_html.count('<div class="figure"')
    assert figures > 0
    assert state.get("data-figures") == str(figures), state
    assert state.get("data-figures-drawn") == str(figures), state
    assert state.get("data-errors") == "0", state
    assert dom.count('class="main-svg"') >= figures  # plotly's SVG in every figure
    assert console == [], console
    return figures


def assert_offline(report_html: str) -> None:
    """No resource fetched from anywhere: no src/href to a URL, no CSS import, one plotly."""
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", report_html)
    assert "@import" not in report_html and "fonts.googleapis" not in report_html
    assert report_html.count("<script") == report_html.count("</script>")
    assert plotly_copies(report_html) == 1  # the bundle's banner: inlined once (packed)


# ---- a real capture ---------------------------------------------------------------------


def test_sample_capture_report_in_chromium(tmp_path: Path) -> None:
    trace = nfstrace.load(SAMPLE)
    diagnosis = trace.diagnosis
    report = tmp_path / "sample.report.html"
    write_report(report, trace, diagnosis)
    text = report.read_text(encoding="utf-8")
    assert_offline(text)
    dom, console, _ = open_in_browser(report, tmp_path)
    assert_all_drawn(text, dom, console)
    # the diagnosis in words, first: the findings in order, or the headline
    truth = ground_truth(SAMPLE)
    headline = f"Written: {truth['workload']['bytes'] / 1e6:,.3f} MB in 1 WRITE over"
    assert headline in dom
    titles = [in_dom(f.title) for f in diagnosis.findings]
    where = [dom.index(t) for t in titles]
    assert titles and where == sorted(where) and all(w < dom.index('id="capture"') for w in where)
    # capture facts of this capture
    assert "169.254.77.1" in dom and "169.254.77.2" in dom and "NFSv3" in dom
    # the verdict leads; the time budget (a figure that must draw, a table) follows
    verdict = diagnosis.verdict
    assert dom.index(in_dom(verdict.text[1:])) < dom.index('class="findings"')
    assert 'data-figure="time budget"' in text and 'id="time-budget"' in dom
    assert dom.index('data-figure="time budget"') < dom.index('id="capture"')
    screenshot(report, tmp_path)


# ---- every figure, with a diagnosis holding every table ------------------------------


def test_full_diagnosis_report_in_chromium(tmp_path: Path) -> None:
    tx = write_trace(3_000, stall_after=1_499, resent=2_200)
    trace = synthetic_trace(tx)
    diagnosis = full_diagnosis(trace, stall_after=1_499)
    report = tmp_path / "study.report.html"
    write_report(report, trace, diagnosis)
    text = report.read_text(encoding="utf-8")
    assert_offline(text)
    # sort the latency table by calls (ascending) in the browser, as a click would
    probe = tmp_path / "study-sorted.html"
    probe.write_text(
        text.replace(
            "</body>",
            "<script>window.addEventListener('load', function () {"
            "var th = document.querySelectorAll('#latency th')[3]; th.click();"
            "var ops = Array.prototype.map.call(document.querySelectorAll("
            "'#latency tbody tr td:nth-child(3)'), function (td) { return td.textContent; });"
            "document.body.setAttribute('data-sorted', ops.join(','));});</script></body>",
        ),
        encoding="utf-8",
    )
    dom, console, _ = open_in_browser(report, tmp_path)
    assert assert_all_drawn(text, dom, console) == 9  # figures 1-8, one section; budget
    assert text.count('data-figure="time budget"') == 1
    assert in_dom(diagnosis.verdict.text) in dom and 'id="time-budget"' in dom
    # the budget shades the cumulative transfer (layout shapes, drawn by plotly)
    assert "time budget: commit (2.266 s, " in dom
    for i, finding in enumerate(diagnosis.findings):
        assert in_dom(finding.title) in dom
        if i:
            before = in_dom(diagnosis.findings[i - 1].title)
            assert dom.index(before) < dom.index(in_dom(finding.title))
    assert "capture point</th><td>client" in dom
    # drawn into the figures' SVG: the segment slopes and the stall's cause
    assert "260.0 Mbit/s" in dom and "133.8 Mbit/s" in dom and "commit 2.266 s" in dom
    for words in ("T_prop", "NULL call→reply", "rtt=+5ms", "write verifier changed", "stall"):
        assert in_dom(words) in dom, words
    sorted_dom, console, _ = open_in_browser(probe, tmp_path)
    assert console == []
    assert body_state(sorted_dom)["data-sorted"] == "COMMIT,WRITE"  # 1 call, then 3,000
    screenshot(report, tmp_path)


# ---- escaping: a capture with a script in a file name --------------------------------------


def _marker(attr: str) -> str:
    """Markup that, if it ever ran, would set data-<attr> on <body>."""
    return f"<img src=x onerror=\"document.body.setAttribute('data-{attr}','1')\">"


# Strings a capture carries into the analysis, each hostile in its own way
HOSTILE = {
    "v3_name": XSS_NAME,  # NFSv3 LOOKUP file names
    "v3_marker": XSS_MARKER,
    "v3_breakout": "</script><script>document.body.setAttribute('data-pwned-js','1')</script>",
    "machine": _marker("pwned-machine"),  # the AUTH_SYS machine name of a call
    "v4_tag": _marker("pwned-tag"),  # an NFSv4 COMPOUND tag
    "v4_name": _marker("pwned-v4name"),  # an NFSv4 LOOKUP name
}


def _v4_lookup(xid: int, tag: str, name: str, machine: str) -> bytes:
    """NFSv4.0 COMPOUND {PUTROOTFH, LOOKUP name} with an AUTH_SYS credential
    naming `machine`."""
    cred = mc.u32(0x5EED) + mc.opaque(machine.encode()) + mc.u32(mc.UID, mc.GID, 0)
    header = mc.u32(xid, 0, 2, mc.NFS_PROG, 4, 1, 1, len(cred)) + cred + mc.u32(0, 0)
    ops = mc.u32(2) + mc.u32(24) + mc.u32(15) + mc.opaque(name.encode())
    return header + mc.opaque(tag.encode()) + mc.u32(0) + ops


def xss_capture(path: Path) -> Path:
    """LOOKUP calls of hostile file names (NFSv3, answered NFS3ERR_NOENT; one by
    a client whose machine name is hostile) and an NFSv4 COMPOUND with a
    hostile tag and name (answered NFS4ERR_NOENT)."""
    cap = mc.Capture()
    conn = mc.TcpConn(cap, cport=40901)
    conn.handshake()
    for xid, name in ((0xE01, XSS_NAME), (0xE02, XSS_MARKER), (0xE03, HOSTILE["v3_breakout"])):
        call = mc.rpc_call(xid, mc.LOOKUP, mc.fhandle(xid) + mc.opaque(name.encode()))
        conn.client_send(mc.record(call))
        conn.server_send(mc.record(mc.rpc_reply(xid, mc.u32(2, 0))))  # NOENT, no dir attrs
    cred = mc.u32(0x5EED) + mc.opaque(HOSTILE["machine"].encode()) + mc.u32(mc.UID, mc.GID, 0)
    args = mc.fhandle(7) + mc.opaque(b"plain")
    call = mc.u32(0xE04, 0, 2, mc.NFS_PROG, 3, mc.LOOKUP, 1, len(cred)) + cred + mc.u32(0, 0)
    conn.client_send(mc.record(call + args))
    conn.server_send(mc.record(mc.rpc_reply(0xE04, mc.u32(2, 0))))
    v4 = mc.TcpConn(cap, cport=40902)
    v4.handshake()
    v4.client_send(mc.record(_v4_lookup(0xE05, HOSTILE["v4_tag"], HOSTILE["v4_name"], "m")))
    # NFS4ERR_NOENT, tag echoed, two results: PUTROOTFH OK, LOOKUP NOENT
    res = mc.u32(2) + mc.opaque(HOSTILE["v4_tag"].encode()) + mc.u32(2, 24, 0, 15, 2)
    v4.server_send(mc.record(mc.rpc_reply(0xE05, res)))
    return cap.write(path)


def test_hostile_file_names_are_shown_not_run(tmp_path: Path) -> None:
    """Every string the capture carries (NFSv3 and v4 file names, an NFSv4 tag,
    an AUTH_SYS machine name) and the capture's own file name: none runs in
    the report, in a real browser; those the report shows are shown escaped."""
    capture = xss_capture(tmp_path / "<img src=x onerror=alert(2)>.pcap")
    trace = nfstrace.load(capture)
    names = set(trace.transactions["name"].dropna())
    assert {XSS_NAME, XSS_MARKER, HOSTILE["v3_breakout"]} <= names  # the decoder carried them
    assert HOSTILE["machine"] in set(trace.messages["auth_machine"])
    assert HOSTILE["v4_name"] in set(trace.messages["name"])
    report = tmp_path / "xss.report.html"
    write_report(report, trace, trace.diagnosis)
    text = report.read_text(encoding="utf-8")
    assert XSS_NAME not in text and "<img src=x" not in text and "</script><script>" not in text
    assert html.escape(XSS_NAME) in text  # shown, in the events table (error replies)
    dom, console, _ = open_in_browser(report, tmp_path)
    assert_all_drawn(text, dom, console)
    assert not [k for k in body_state(dom) if k.startswith("data-pwned")], body_state(dom)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom
    assert dom.count("<script") == text.count("<script")  # no script element added
    assert "<img" not in dom  # no element made of a capture's string


# ---- size: a million transactions -----------------------------------------------------------


def test_million_transactions_report_size_and_render(tmp_path: Path) -> None:
    tx = write_trace(1_000_000, stall_after=400_000, resent=700_000)
    trace = synthetic_trace(tx)
    diagnosis = full_diagnosis(trace, stall_after=400_000)
    start = time.monotonic()
    text = render_report(trace, diagnosis)
    render_s = time.monotonic() - start
    size = len(text.encode("utf-8"))
    assert size < 20_000_000, size
    assert "points drawn" in text  # the notes say what was thinned
    assert render_s < 120, render_s
    report = tmp_path / "million.report.html"
    report.write_text(text, encoding="utf-8")
    dom, console, seconds = open_in_browser(report, tmp_path)
    assert_all_drawn(text, dom, console)
    assert "<canvas" not in dom  # thinned to SVG: the report's plotly.js has no WebGL
    print(
        f"1M transactions: {size / 1e6:.1f} MB HTML, written in {render_s:.1f} s, "
        f"Chromium: page loaded in {body_state(dom)['data-load-ms']} ms ({seconds:.1f} s with "
        "browser start)"
    )


# ---- several clients and servers ------------------------------------------------------------


def test_several_pairs_one_section_each(tmp_path: Path) -> None:
    first = write_trace(400, resent=100)
    second = write_trace(200)
    second["client"] = pd.array(["10.0.0.3"] * len(second), dtype="string")
    trace = synthetic_trace(pd.concat([first, second], ignore_index=True))
    report = tmp_path / "pairs.report.html"
    write_report(report, trace, trace.diagnosis)
    text = report.read_text(encoding="utf-8")
    busiest = text.index("client 10.0.0.1 → server 10.0.0.2")
    assert busiest < text.index("client 10.0.0.3 → server 10.0.0.2")
    assert 'id="latency-pair"' in text
    dom, console, _ = open_in_browser(report, tmp_path)
    # figures 1-4 per pair; the budget, the CDF, the operation mix, response time, the model
    assert assert_all_drawn(text, dom, console) == 2 * 4 + 5
    assert text.count('data-figure="cumulative transfer"') == 2
    # the re-sent WRITE is in the first pair's figure only
    assert text.count("WRITE re-sent (") == 1 and text.count("WRITE re-sent (1)") == 1


def test_comparison_report_in_chromium(tmp_path: Path) -> None:
    """nfstrace compare's report (issue 18): offline, drawn, the changes in words;
    a lossy capture against a healthy one, screenshot kept."""
    from nfstrace.comparison import compare
    from nfstrace.reports.html import write_comparison

    before = nfstrace.load(SAMPLE.parent / "v3-tcp-nfscp-w64k-d2-l0.5.pcap")
    after = nfstrace.load(SAMPLE.parent / "v3-tcp-nfscp-w64k-d2-l0.pcap")
    cmp = compare(before, after)
    report = tmp_path / "compare.html"
    write_comparison(report, cmp)
    text = report.read_text(encoding="utf-8")
    assert_offline(text)
    dom, console, _ = open_in_browser(report, tmp_path)
    assert_all_drawn(text, dom, console)
    assert in_dom(cmp.changes[0]) in dom and cmp.changes[0].startswith("Writes ran")
    # issue 34, item 7: the tables fit a 1,300-pixel window (they overflowed the page)
    probe = tmp_path / "compare-widths.html"
    probe.write_text(
        text.replace(
            "</body>",
            "<script>window.addEventListener('load', function () {"
            "var page = document.body.clientWidth; var wide = [];"
            "document.querySelectorAll('table').forEach(function (t) {"
            "if (t.getBoundingClientRect().width > page) { wide.push(t.id); } });"
            "document.body.setAttribute('data-page-width', String(page));"
            "document.body.setAttribute('data-wide', wide.join(','));});</script></body>",
        ),
        encoding="utf-8",
    )
    dom, console, _ = open_in_browser(probe, tmp_path, "--window-size=1300,900")
    state = body_state(dom)
    assert int(state["data-page-width"]) > 1000 and state["data-wide"] == "", state
    screenshot(report, tmp_path)


def test_lossy_capture_report_in_chromium(tmp_path: Path) -> None:
    """A lossy capture's report (issue 18: a screenshot of a lossy and a healthy
    one kept): drawn offline, the loss named first, its retransmissions marked."""
    lossy = SAMPLE.parent / "v3-tcp-nfscp-w64k-d2-l0.5.pcap"
    trace = nfstrace.load(lossy)
    assert trace.diagnosis.verdict.primary == "loss_recovery"
    report = tmp_path / "lossy.report.html"
    write_report(report, trace, trace.diagnosis)
    text = report.read_text(encoding="utf-8")
    assert_offline(text)
    dom, console, _ = open_in_browser(report, tmp_path)
    assert_all_drawn(text, dom, console)
    assert dom.index(in_dom(trace.diagnosis.verdict.text[1:])) < dom.index('id="capture"')
    assert "TCP retransmissions (4)" in text
    screenshot(report, tmp_path)


def test_png_of_the_transfer_plot(tmp_path: Path) -> None:
    """--png (issue 18): the cumulative-transfer plot drawn by the installed
    Chromium into a PNG, written whole; kept as an artifact."""
    from typer.testing import CliRunner

    from nfstrace.cli import app

    chromium()  # installed, or the test fails saying so
    png = tmp_path / "transfer.png"
    lossy = SAMPLE.parent / "v3-tcp-nfscp-w64k-d2-l0.5.pcap"
    r = CliRunner().invoke(app, ["analyze", str(lossy), "--no-report", "--png", str(png)])
    assert r.exit_code == 0, r.output
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1200, 620)
    artifacts = Path(os.environ.get("NFSTRACE_ARTIFACTS") or ROOT / "test-artifacts")
    artifacts.mkdir(parents=True, exist_ok=True)
    shutil.copy(png, artifacts / png.name)


# ---- plots that read as static images (issue 34, item 3) --------------------------------------

READ_WELL = [
    SAMPLE,  # healthy
    SAMPLE.parent / "causes" / "v3-tcp-nfscp-w64k-d2-l0.5.pcap",  # lossy
    SAMPLE.parent / "causes" / "v3-tcp-nfscp-w64k-d10-l0.pcap",  # a 10 ms round trip
]


def figure_svg(dom: str, name: str) -> str:
    """The drawn SVG of one figure of a report (its data-figure name)."""
    at = dom.index(f'data-figure="{in_dom(name)}"')
    end = dom.find('<div class="figure"', at + 1)
    return dom[at : end if end > 0 else len(dom)]


def svg_texts(svg: str, klass: str) -> list[str]:
    """The texts plotly drew with a class: legendtext, or the ticks' and titles'
    groups (xtick, ytick, xtitle, ytitle)."""
    if klass == "legendtext":
        found = re.findall(r'<text class="legendtext"[^>]*>(.*?)</text>', svg)
    elif klass.endswith("title"):
        found = re.findall(rf'<text class="{klass}"[^>]*>(.*?)</text>', svg)
    else:
        found = re.findall(rf'<g class="{klass}"><text[^>]*>(.*?)</text>', svg)
    return [html.unescape(re.sub(r"<[^>]+>", "", t)) for t in found]


def one_two_five(labels: list[str]) -> bool:
    values = [float(t.replace(",", "")) for t in labels]
    return all(round(v / 10 ** np.floor(np.log10(v)), 6) in (1, 2, 5) for v in values)


@pytest.mark.parametrize("capture", READ_WELL, ids=lambda p: p.stem)
def test_plots_read_as_static_images(capture: Path, tmp_path: Path) -> None:
    """What Chromium draws, read back from the SVG: the cumulative transfer's
    legend names every cause the budget's bar shows (transfer too) and every
    mark, and no stray text trace; every log axis with data has two labels or
    more, at 1-2-5; every time axis and the page name one origin; nothing says
    to click."""
    trace = nfstrace.load(capture)
    report = tmp_path / f"{capture.stem}.html"
    write_report(report, trace, trace.diagnosis)
    text = report.read_text(encoding="utf-8")
    dom, console, _ = open_in_browser(report, tmp_path)
    assert_all_drawn(text, dom, console)
    # the cumulative transfer: a legend entry per cause and per mark
    transfer = figure_svg(dom, "cumulative transfer")
    legend = svg_texts(transfer, "legendtext")
    pairs = trace.diagnosis.budget.pairs
    causes = [c for c in CAUSES if (pairs[f"{c}_ns"] > 0).any()]
    assert "transfer" in causes
    for cause in causes:
        assert any(e.startswith(f"time budget: {cause} (") for e in legend), (cause, legend)
    assert "MB acknowledged" in legend and "COMMIT calls (1)" in legend
    assert not [e for e in legend if "slope" in e]  # no stray text-trace entry
    bar = svg_texts(figure_svg(dom, "time budget"), "legendtext")
    assert bar == causes  # the same causes as the budget's bar
    # log axes with data: two labels or more, at 1, 2 and 5 of a decade
    for name, axis in (("WRITE call→reply", "ytick"), ("latency CDF", "xtick")):
        labels = svg_texts(figure_svg(dom, name), axis)
        assert len(labels) >= 2 and one_two_five(labels), (name, labels)
    # one time origin, named the same on every time axis and in the page's header
    for name in ("cumulative transfer", "per-transaction throughput", "WRITE call→reply",
                 "outstanding RPCs"):  # fmt: skip
        (title,) = svg_texts(figure_svg(dom, name), "xtitle")
        assert title.endswith("(s since the first RPC message)"), title
    assert "times are seconds since the first RPC message" in dom
    assert "since start of capture" not in dom and "since the start" not in dom
    assert "double-click" not in dom  # a screenshot cannot be clicked
    for name in ("cumulative transfer", "WRITE call→reply", "latency CDF"):
        assert "click" not in figure_svg(dom, name).split('class="caption"')[0]
    # every figure with marks has a legend (a lone trace is named too)
    for name in ("per-transaction throughput", "WRITE call→reply", "outstanding RPCs"):
        assert svg_texts(figure_svg(dom, name), "legendtext"), name
    shot = screenshot(report, tmp_path)
    assert shot.stat().st_size > 100_000


def png_rows(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, bytes per pixel, each row's pixel bytes) of an 8-bit,
    non-interlaced PNG: the filters undone (PNG spec, 9.2)."""
    import zlib

    pos, idat, header = 8, b"", b""
    while pos < len(data):
        size, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + size]
        header = body if kind == b"IHDR" else header
        idat += body if kind == b"IDAT" else b""
        pos += 12 + size
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and colour in (2, 6)
    bpp = 4 if colour == 6 else 3
    raw, stride = zlib.decompress(idat), 1 + width * bpp
    rows: list[bytes] = []
    prev = bytearray(width * bpp)
    for y in range(height):
        f, line = raw[y * stride], bytearray(raw[y * stride + 1 : (y + 1) * stride])
        for i in range(len(line)):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, bpp, rows


def test_png_shows_the_whole_figure_with_its_legend(tmp_path: Path) -> None:
    """--png (issue 34, items 3 and 4): drawn with the report's plotly.js bundle,
    1200x620 with the legend in the picture (a headless Chromium paints less
    than its window: the legend below the axis was cut off), and no note asking
    to click."""
    from nfstrace.reports.html import transfer_figure
    from nfstrace.reports.png import write_png

    trace = nfstrace.load(READ_WELL[1])
    notes = " ".join(transfer_figure(trace)["layout"]["meta"]["notes"])
    assert "click" not in notes
    png = tmp_path / "lossy.png"
    write_png(trace, png)
    width, bpp, rows = png_rows(png.read_bytes())
    assert (width, len(rows)) == (1200, 620)

    def inked(y: int) -> int:  # pixels darker than the background in row y
        row = rows[y]
        return sum(1 for x in range(0, width * bpp, bpp) if min(row[x : x + 3]) < 160)

    # the legend's two lines of text: ink in the bottom 80 rows of the picture
    assert sum(inked(y) for y in range(540, 620)) > 500
    shutil.copy(png, Path(os.environ.get("NFSTRACE_ARTIFACTS") or ROOT / "test-artifacts"))
