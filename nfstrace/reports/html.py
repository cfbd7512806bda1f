"""The HTML report: one self-contained file an administrator attaches to a bug ticket.

``write_report(path, trace, diagnosis)`` writes it; ``render_report(trace, diagnosis)``
returns the text.  plotly.js is inlined once, gzip-packed (no CDN, no web fonts: the file
opens offline from file://); every figure is a ``div`` drawn by that one copy.
Order: the diagnosis in plain words (the verdict, then the findings in the
order given, then the time budget: a stacked bar per client/server pair and a
table of each cause's share), capture facts, figures (per client/server pair
when there are several; the cumulative transfer shaded by the budget's causes),
tables.

The report only renders: every table it draws comes from the diagnosis
(``analysis/diagnosis.py``: every result, typed; only the mounts may be
absent), none is computed here.  A budget without WRITE activity
(metadata-only captures) leaves the budget's figure and table out with a note;
an empty table (no stall, no model term estimated) leaves its marks out, and a
figure with nothing to draw says why.  Every
string that comes from the capture (file names, hosts, paths, details, the
budget's evidence) is HTML-escaped.

A small script records script errors and checks that every figure was drawn;
it writes the result on ``<body data-figures=... data-figures-drawn=...
data-errors=...>`` and shows a banner when something failed (the browser test
reads these attributes).

Its length is one section builder per part of the page (verdict, budget,
per-pair figures, findings, tables, events, model): rendering only, every
number comes from the diagnosis; the CSS and scripts are package data.
"""

from __future__ import annotations

import base64
import functools
import gzip
import html
import json
import os
import re
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from nfstrace.analysis.budget import CAUSES, PAIR_COLUMNS
from nfstrace.analysis.kernel_stats import KERNEL_COLUMNS, TRANSPORT_COLUMNS, mountstats_text
from nfstrace.analysis.latency import LATENCY_COLUMNS
from nfstrace.analysis.mounts import OPERATION_COLUMNS
from nfstrace.analysis.overview import throughput_text, write_activity
from nfstrace.analysis.quality import clean_capture_text, damage_texts
from nfstrace.analysis.transport import EXPERT_COLUMNS
from nfstrace.analysis.writes import FILE_COLUMNS
from nfstrace.comparison import speed_words
from nfstrace.protocol.link import LINKTYPE_NAMES
from nfstrace.reports import figures as fg
from nfstrace.reports.files import write_atomically
from nfstrace.text import file_names, printable
from nfstrace.version import __version__

if TYPE_CHECKING:
    from nfstrace.analysis.diagnosis import Diagnosis
    from nfstrace.analysis.findings import Finding
    from nfstrace.analysis.verdict import Verdict
    from nfstrace.comparison import Comparison
    from nfstrace.trace import Trace

MAX_PAIR_SECTIONS = 6  # client/server pairs drawn one section each (the busiest)
MAX_TABLE_ROWS = 500  # rows of one table
PLOT_CONFIG = {"displaylogo": False, "responsive": True}


def _e(value: object, newlines: bool = False) -> str:
    """Text for the page: HTML-escaped, its control characters and bidi
    overrides made visible (nfstrace.text.printable: an NFS name is whatever
    bytes the client sent); ``newlines`` kept in a block of lines."""
    return html.escape(printable(str(value), newlines))


# ---- what the report is drawn from -------------------------------------------------


@dataclass(frozen=True)
class _Inputs:
    """The diagnosis's tables the time figures draw, each with client and server
    columns (one pair's rows are drawn in its section)."""

    progress: pd.DataFrame
    outstanding: pd.DataFrame
    commits: pd.DataFrame
    retransmissions: pd.DataFrame
    stalls: pd.DataFrame
    segments: pd.DataFrame
    budget_intervals: pd.DataFrame  # the time budget's (shaded by cause)


def _inputs(diagnosis: Diagnosis) -> _Inputs:
    """The diagnosis's tables the figures draw (the report computes none itself)."""
    return _Inputs(
        progress=diagnosis.progress,
        outstanding=diagnosis.pace.outstanding,
        commits=diagnosis.writes.commits,
        retransmissions=diagnosis.repeats.retransmissions,
        stalls=diagnosis.stalls.stalls,
        segments=diagnosis.stalls.segments,
        budget_intervals=diagnosis.budget.intervals,
    )


def _of_pair(table: pd.DataFrame, pair: tuple[str, str]) -> pd.DataFrame:
    # compared in their own dtype (no per-row Python strings); missing is no match
    client = table["client"].eq(pair[0]).fillna(False).to_numpy(dtype=bool)
    return table[client & table["server"].eq(pair[1]).fillna(False).to_numpy(dtype=bool)]


def _pairs(tx: pd.DataFrame) -> list[tuple[str, str]]:
    """Client/server pairs with calls, busiest first."""
    calls = tx[(tx["n_calls"] > 0) & tx["client"].notna() & tx["server"].notna()]
    counts = calls.groupby(["client", "server"], sort=True, observed=True).size()
    counts = counts.sort_values(ascending=False, kind="stable")
    return [(str(c), str(s)) for c, s in counts.index]


# ---- HTML pieces ---------------------------------------------------------------------


def _fmt_duration(seconds: float) -> str:
    if not np.isfinite(seconds):
        return "-"
    if abs(seconds) >= 1:
        return f"{seconds:,.3f} s"
    if abs(seconds) >= 1e-3:
        return f"{seconds * 1e3:,.3f} ms"
    return f"{seconds * 1e6:,.2f} µs"


def _cell(value: object, digits: int = 3) -> tuple[str, str]:
    """(text shown, sort key) of one table cell."""
    if value is None or (not isinstance(value, list | tuple | dict) and pd.isna(value)):
        return "-", ""
    if isinstance(value, bool | np.bool_):
        return ("yes" if value else "no"), str(int(value))
    if isinstance(value, int | np.integer):
        return f"{int(value):,}", str(int(value))
    if isinstance(value, float | np.floating):
        return f"{float(value):,.{digits}f}", repr(float(value))
    return str(value), str(value)


def _table(
    rows: pd.DataFrame,
    columns: Sequence[str],
    *,
    headers: dict[str, str] | None = None,
    tips: dict[str, str] | None = None,
    table_id: str,
    total: int | None = None,
    digits: dict[str, int] | None = None,
) -> str:
    """A sortable table (click a header); at most MAX_TABLE_ROWS rows, with a note.
    ``digits``: decimals of a column's floats (default 3)."""
    headers, tips = headers or {}, tips or {}
    places = [(digits or {}).get(c, 3) for c in columns]
    shown = min(len(rows), MAX_TABLE_ROWS)
    total = len(rows) if total is None else total
    head = "".join(
        f'<th title="{_e(tips.get(c, ""))}">{_e(headers.get(c, c))}</th>' for c in columns
    )
    body = []
    # the rows' values as itertuples gives them (each column's Series iterated; no
    # column: an empty tuple a row), without copying the rows shown into a frame
    # of their own first: a third of the time of a small table
    values_of = [rows[c].iloc[:shown] for c in columns]
    for values in zip(*values_of, strict=True) if values_of else [()] * shown:
        cells = []
        for v, d in zip(values, places, strict=True):
            text, key = _cell(v, d)
            cells.append(f'<td data-v="{_e(key)}">{_e(text)}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    note = f'<p class="note">{shown:,} of {total:,} rows shown.</p>' if total > shown else ""
    return (
        f'<div class="scroll"><table class="sortable" id="{_e(table_id)}"><thead><tr>{head}'
        f"</tr></thead><tbody>{''.join(body)}</tbody></table></div>{note}"
    )


def _facts(items: Iterable[tuple[str, object]]) -> str:
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in items if v != "")
    return f'<table class="facts">{rows}</table>'


# ---- sections ------------------------------------------------------------------------


def _finding_html(finding: Finding) -> str:
    severity = finding.severity
    lost = int(finding.time_lost_ns)
    parts = [
        f'<li class="finding sev-{_e(severity)}"><span class="sev">{_e(severity)}</span> ',
        f'<span class="title">{_e(finding.title)}</span>',
    ]
    if lost:
        parts.append(f' <span class="lost">({_e(_fmt_duration(lost / 1e9))} lost)</span>')
    if finding.details:
        text = json.dumps(finding.details, indent=1, default=str, ensure_ascii=False)
        parts.append(f"<details><summary>details</summary><pre>{_e(text, True)}</pre></details>")
    return "".join(parts) + "</li>"


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def _verdict_html(verdict: Verdict) -> str:
    """The verdict's primary cause as a label (in its budget colour) and its text."""
    colour = fg.CAUSE_COLOURS.get(verdict.primary, "#555555")  # bandwidth, none: grey
    return (
        f'<p class="verdict"><span class="primary" style="background:{colour}" '
        f'title="the primary cause">{_e(verdict.primary)}</span> '
        f'<span class="verdict-text">{_e(_sentence(verdict.text))}</span></p>'
    )


def _is_verdict(finding: Finding, verdict: Verdict) -> bool:
    """The finding that repeats the verdict shown above the findings."""
    return finding.kind == "verdict" and (
        finding.title.strip().lower() == verdict.text.strip().lower()
    )


def _budget_table(pairs: pd.DataFrame, verdict: Verdict) -> str:
    """Per pair (longest activity first): elapsed seconds, Mbit/s, the pair's
    verdict and the share (%) of every cause that took time in any pair."""
    causes = [c for c in CAUSES if (pairs[f"{c}_ns"].fillna(0) > 0).any()]
    rows = pairs.sort_values("elapsed_ns", ascending=False, kind="stable")
    elapsed = rows["elapsed_ns"].astype("float64")
    table = pd.DataFrame(
        {
            "client": rows["client"].astype(object),
            "server": rows["server"].astype(object),
            "elapsed_s": elapsed / 1e9,
            "mbit_s": rows["mbit_s"].astype("float64"),
        }
    )
    columns = ["client", "server"]
    by_pair = {(str(v.client), str(v.server)): str(v.primary) for v in verdict.pairs}
    if by_pair:
        table["verdict"] = [
            by_pair.get((str(c), str(s)), "")
            for c, s in zip(table["client"], table["server"], strict=True)
        ]
        columns.append("verdict")
    columns += ["elapsed_s", "mbit_s"]
    shares = {c: f"{c}_share" for c in causes}  # not "server": that is the pair's server
    for c, column in shares.items():
        table[column] = (
            rows[f"{c}_ns"].astype("float64") / elapsed.where(elapsed > 0) * 100
        ).round(1)
        columns.append(column)
    headers = {
        "elapsed_s": "elapsed (s)",
        "mbit_s": "Mbit/s",
        **{column: f"{c} %" for c, column in shares.items()},
    }
    tips = {
        "elapsed_s": PAIR_COLUMNS["elapsed_ns"],
        "mbit_s": PAIR_COLUMNS["mbit_s"],
        "verdict": "the cause the pair's verdict names",
        **{column: f"share of the elapsed time attributed to {c}" for c, column in shares.items()},
    }
    digits = {"elapsed_s": 6, "mbit_s": 1, **{column: 1 for column in shares.values()}}
    return _table(table, columns, headers=headers, tips=tips, digits=digits, table_id="time-budget")


def _budget_html(diagnosis: Diagnosis, figs: _Figures) -> str:
    """The time-budget figure and table, or a note saying why there are none."""
    pairs = diagnosis.budget.pairs
    if pairs.empty:
        return (
            '<p class="note">Time budget: no WRITE activity in the capture, '
            "nothing to split by cause.</p>"
        )
    figs.add("time budget", fg.time_budget(pairs))
    out = ['<h3 id="time-budget-title">Time budget</h3>', *figs.html]
    figs.html = []
    out.append(
        '<p class="note">Each pair\'s write activity (first WRITE call to last WRITE/COMMIT '
        "reply) cut into intervals, each attributed to one cause; the shares add up to "
        "100%.</p>"
    )
    out.append(_budget_table(pairs, diagnosis.verdict))
    return "".join(out)


def _diagnosis_section(trace: Trace, diagnosis: Diagnosis, figs: _Figures) -> str:
    out = ['<section id="diagnosis"><h2>Diagnosis</h2>']
    verdict = diagnosis.verdict
    out.append(_verdict_html(verdict))
    write = write_activity(diagnosis.budget.pairs)
    if write is not None:  # the figure the verdict gives, said with what it measures
        headline = f"Written: {throughput_text(write, 'WRITE')}."
        out.append(f'<p class="headline">{_e(headline)}</p>')
    findings = [f for f in diagnosis.findings if not _is_verdict(f, verdict)]
    if findings:
        out.append('<ol class="findings">' + "".join(map(_finding_html, findings)) + "</ol>")
    out.append(_budget_html(diagnosis, figs))
    out.append("</section>")
    return "".join(out)


def _when(ns: int) -> str:
    return pd.Timestamp(ns, unit="ns", tz="UTC").strftime("%Y-%m-%d %H:%M:%S.%f UTC")


def _completeness(st: Any) -> list[tuple[str, str]]:
    """What the capture missed, cut or damaged: every count, or one line for a
    capture where each is 0 (analysis.quality.clean_capture_text)."""
    clean = clean_capture_text(st)
    if clean is not None:
        return [("completeness", clean)]
    tcp = st.tcp
    damage = damage_texts(st)
    return [
        ("truncation", f"{st.truncated_frames:,} frames cut by the snaplen; "
         f"{st.truncated_messages:,} RPC messages cut short, "
         f"{st.incomplete_messages:,} without their end"),
        ("drops", f"{st.interface_drops:,} frames dropped by the capturing interface; "
         f"{tcp.get('holes', 0):,} TCP holes ({tcp.get('hole_bytes', 0):,} bytes never "
         "captured)"),
        ("TCP", f"{tcp.get('segments', 0):,} segments, {tcp.get('retransmitted', 0):,} "
         f"retransmitted, {tcp.get('out_of_order', 0):,} out of order"),
        ("IP fragments", f"{st.ip_fragments:,}: {st.ip_datagrams_reassembled:,} datagrams "
         f"reassembled, {st.ip_datagrams_incomplete:,} incomplete"),
        *([("damage", ", ".join(damage))] if damage else []),
    ]  # fmt: skip


def _capture_section(trace: Trace, diagnosis: Diagnosis) -> str:
    ov, st = trace.overview, trace.stats
    files = []
    for f in st.files:
        links = ", ".join(sorted(LINKTYPE_NAMES.get(lt, str(lt)) for lt in f.linktypes))
        kind = f.format + (f" ({f.compression})" if f.compression else "")
        files.append(
            (f.path, f"{kind}, {links or '-'}, snaplen {f.snaplen:,}, {f.frames:,} frames")
        )
    if not files:
        files = [(p, "") for p in trace.paths]
    activity = write_activity(diagnosis.budget.pairs)
    throughput = []
    if activity is not None:
        throughput.append(("written", throughput_text(activity, "WRITE")))
    if ov.write is not None:  # a second figure, named for what it measures
        label = "WRITE calls' own span" if activity is not None else "written"
        throughput.append((label, throughput_text(ov.write, "WRITE")))
    if ov.read is not None:
        throughput.append(("read", throughput_text(ov.read, "READ")))
    facts = [
        *(("file", f"{p}: {what}") for p, what in files),
        ("time span", f"{_when(ov.start_ns)} to {_when(ov.end_ns)} "
         f"({(ov.end_ns - ov.start_ns) / 1e9:,.3f} s)"),
        ("clients", ", ".join(ov.clients) or "-"),
        ("servers", ", ".join(ov.servers) or "-"),
        ("versions", ", ".join(f"NFSv{v}" for v in ov.nfs_versions) or "no NFS"),
        ("transports", "/".join(ov.transports).upper() or "-"),
        ("capture point", diagnosis.quality.capture_point),
        ("transactions", ov.counts_text()),
        ("repeats", ov.repeats_text()),
        *throughput,
        *_completeness(st),
        *(("warning", w) for w in st.warnings),
    ]  # fmt: skip
    return f'<section id="capture"><h2>Capture</h2>{_facts(facts)}</section>'


def _mounts_section(diagnosis: Diagnosis) -> str:
    """The kernel's figures per mount and operation (as nfsiostat prints them),
    mountstats beside them when given (analysis.mounts, analysis.kernel_stats)."""
    from nfstrace.reports.mounts_view import mount_name

    mounts = diagnosis.mounts
    if mounts is None or mounts.mounts.empty:
        return ""
    out = ['<section id="mounts"><h2>Mounts, as the client counts them</h2>']
    out.append(
        '<p class="note">Per mount (client, server, NFS version: every connection of an '
        "nconnect mount together) and operation, what /proc/self/mountstats counts and "
        "nfsiostat prints, from the capture: RTT from the first packet of the call's last "
        "send to the reply, execute from its first send; the kernel's clock starts when the "
        "call is handed to its socket, and its queue time before that is invisible in a "
        "capture (--mountstats gives it).</p>"
    )
    cols = ["op", "ops", "ops_per_s", "kb_per_s", "kb_per_op", "retrans", "rtt_ms", "exe_ms"]
    cols += ["rtt_last_ms", "errors", "unanswered", "bytes_sent", "bytes_recv"]
    heads = {
        "ops_per_s": "ops/s",
        "kb_per_s": "kB/s",
        "kb_per_op": "kB/op",
        "rtt_ms": "avg RTT ms",
        "exe_ms": "avg exe ms",
        "rtt_last_ms": "RTT from last packet",
        "unanswered": "no reply",
    }
    kheads = {
        c: c.removeprefix("kernel_").replace("_ms", " ms").replace("_", " ")
        + (" (kernel)" if c.startswith("kernel_") else "")
        for c in KERNEL_COLUMNS
    }
    kernel = {(k.client, k.server, k.vers): k for k in mounts.kernel}
    for i, r in enumerate(mounts.mounts.itertuples(index=False)):
        ops = mounts.operations_of(str(r.client), str(r.server), int(r.vers))
        out.append(f"<h3>{_e(mount_name(r))}, {r.seconds:,.3f} s of calls</h3>")
        out.append(_table(ops, cols, headers=heads, tips=OPERATION_COLUMNS, table_id=f"mount-{i}"))
        k = kernel.get((str(r.client), str(r.server), int(r.vers)))
        if k is None:
            continue
        out.append(f"<h4>mountstats beside the capture: {_e(mountstats_text(k))}</h4>")
        out.append(
            _table(k.operations, list(KERNEL_COLUMNS), headers=kheads, tips=KERNEL_COLUMNS,
                   table_id=f"mountstats-{i}", digits={c: 2 for c in KERNEL_COLUMNS})
        )  # fmt: skip
        out.append(
            _table(k.transports, list(TRANSPORT_COLUMNS), tips=TRANSPORT_COLUMNS,
                   table_id=f"mountstats-xprt-{i}", digits={"backlog": 2, "sending": 2,
                                                           "pending": 2})
        )  # fmt: skip
    out.append("</section>")
    return "".join(out)


# What to look for in each figure, one line under it.
CAPTIONS = {
    "time budget": "Where each pair's write time went, by cause: the largest part "
    "beyond transfer is the one to fix.",
    "cumulative transfer": "Bytes acknowledged over time: the slope is the rate, flat "
    "stretches are time lost, the shading names their cause.",
    "per-transaction throughput": "Each WRITE's bytes over its call→reply time: dips are "
    "slow calls.",
    "WRITE call→reply": "Each WRITE's wait (log scale): a band above the rest or red "
    "crosses (re-sent calls) are the slow ones.",
    "outstanding RPCs": "Calls in flight: flat at a small number, the client limits "
    "concurrency; at zero, it sent nothing.",
    "latency CDF": "Share of calls answered within a time (log scale): a tail to the right "
    "is a slow minority.",
    "operation mix": "The calls by kind beside the LADDIS reference mix: what sort of "
    "workload this is.",
    "response time vs throughput": "Mean response per time window against its load: a "
    "rise with load is saturation.",
    "model": "One WRITE cycle's terms and the throughput they predict: the largest term "
    "limits the writes.",
}


@dataclass
class _Figures:
    html: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    count: int = 0

    def add(self, name: str, fig: fg.Figure) -> None:
        self.count += 1
        # run once plotly.js is unpacked (see _UNPACK_SCRIPT), in document order
        div = figure_div(fig, f"fig-{self.count}", PLOT_CONFIG, script_type=DEFERRED)
        caption = CAPTIONS.get(name)
        caption_html = f'<p class="caption">{_e(caption)}</p>' if caption else ""
        self.html.append(f'<div class="figure" data-figure="{_e(name)}">{div}{caption_html}</div>')
        meta = fig["layout"].get("meta")
        for note in meta.get("notes", []) if isinstance(meta, dict) else []:
            self.notes.append(f"{name}: {note}")


def _css_size(value: object, default: str) -> str:
    """A figure's width or height for its div's style: pixels when a number."""
    if value is None:
        return default
    return f"{value}px" if isinstance(value, int | float) else str(value)


def figure_div(
    fig: fg.Figure,
    div_id: str,
    config: Mapping[str, object],
    *,
    script_type: str | None = None,
    height: str = f"{fg.HEIGHT}px",
) -> str:
    """The figure's ``<div>`` and the script that draws it into it, as plotly.py's
    ``to_html(fig, include_plotlyjs=False, full_html=False, div_id=...,
    config=...)`` writes them: a div sized by the layout's width and height
    (else 100% and ``height``), the plot's div inside, and a script calling
    ``Plotly.newPlot(id, data, layout, config)`` (of type ``script_type`` when
    given: a script the page runs later)."""
    layout = fig["layout"]
    width = _css_size(layout.get("width"), "100%")
    tall = _css_size(layout.get("height"), height)
    config = {**config}
    config.setdefault("responsive", True)
    typed = f' type="{script_type}"' if script_type else ""
    return (
        f'<div style="height:{tall}; width:{width};">'
        f'<div id="{div_id}" class="plotly-graph-div" style="height:100%; width:100%;"></div>'
        f"<script{typed}>window.PLOTLYENV=window.PLOTLYENV || {{}};"
        f'if (document.getElementById("{div_id}")) {{Plotly.newPlot("{div_id}", '
        f"{fg.to_json(fig['data'])}, {fg.to_json(layout)}, {json.dumps(config)})}};"
        "</script></div>"
    )


def _pair_figures(
    figs: _Figures, trace: Trace, data: _Inputs, pair: tuple[str, str] | None, budget: int
) -> None:
    """Figures 1-4 for one client/server pair (None: the whole trace), added."""
    for name, fig in _pair_figure_list(trace, data, pair, budget):
        figs.add(name, fig)


def _pair_figure_list(
    trace: Trace, data: _Inputs, pair: tuple[str, str] | None, budget: int
) -> list[tuple[str, fg.Figure]]:
    """Figures 1-4 for one client/server pair (None: the whole trace), on one
    time axis."""
    t0 = trace.overview.start_ns

    def sel(table: pd.DataFrame) -> pd.DataFrame:
        return table if pair is None else _of_pair(table, pair)

    tx = sel(trace.transactions)  # once: two figures draw the pair's transactions
    ev = trace.events
    tcp_resends = ev[ev["kind"].astype(str) == "tcp_retransmission"] if len(ev) else None
    if tcp_resends is not None and pair is not None:  # either direction of the pair
        hosts = tcp_resends["src"].astype(str), tcp_resends["dst"].astype(str)
        mine = ((hosts[0] == pair[0]) & (hosts[1] == pair[1])) | (
            (hosts[0] == pair[1]) & (hosts[1] == pair[0])
        )
        tcp_resends = tcp_resends[mine.to_numpy(dtype=bool)]

    span_s = (trace.overview.end_ns - t0) / 1e9
    zoom: list[float] | None = None
    out: list[tuple[str, fg.Figure]] = []
    for name, fig in (
        (
            "cumulative transfer",
            fg.cumulative_transfer(
                sel(data.progress),
                sel(data.stalls),
                sel(data.segments),
                sel(data.retransmissions),
                sel(data.commits),
                t0_ns=t0,
                point_budget=budget,
                budget_intervals=sel(data.budget_intervals),
                tcp_resends=tcp_resends,
                origin=fg.TIME_ORIGIN,
            ),
        ),
        (
            "per-transaction throughput",
            fg.transaction_throughput(tx, t0_ns=t0, point_budget=budget, origin=fg.TIME_ORIGIN),
        ),
        (
            "WRITE call→reply",
            fg.write_latency(tx, t0_ns=t0, point_budget=budget, origin=fg.TIME_ORIGIN),
        ),
        (
            "outstanding RPCs",
            fg.outstanding_rpcs(
                sel(data.outstanding), t0_ns=t0, point_budget=budget, origin=fg.TIME_ORIGIN
            ),
        ),
    ):
        if zoom is None and name == "cumulative transfer":
            # a short burst in a long capture: the transfer plot zooms to the writes
            zoom = fig["layout"].get("xaxis", {}).get("range")
            zoom = list(zoom) if zoom else [-0.01 * span_s, 1.01 * span_s]
        if span_s > 0 and fig["data"]:  # one time axis for all: the writes', or the capture's
            fg.update_axes(fig, "x", range=zoom)
        out.append((name, fig))
    return out


def _figures_section(
    trace: Trace, diagnosis: Diagnosis, data: _Inputs, budget: int, figs: _Figures
) -> str:
    pairs = _pairs(trace.transactions)
    parts = ['<section id="figures"><h2>Figures</h2>']
    if len(pairs) <= 1:
        _pair_figures(figs, trace, data, None, budget)
        parts += figs.html
        figs.html = []
    else:
        shown = pairs[:MAX_PAIR_SECTIONS]
        per_pair = max(5_000, budget // len(shown))
        if len(pairs) > len(shown):
            figs.notes.append(
                f"{len(pairs)} client/server pairs: the {len(shown)} busiest drawn one section "
                "each; all pairs are in the latency table"
            )
        for pair in shown:
            parts.append(f'<h3 class="pair">client {_e(pair[0])} → server {_e(pair[1])}</h3>')
            _pair_figures(figs, trace, data, pair, per_pair)
            parts += figs.html
            figs.html = []
    parts.append("<h3>Whole capture</h3>")
    figs.add("latency CDF", fg.latency_cdf(trace.transactions, point_budget=budget))
    workload, model = diagnosis.workload, diagnosis.model
    figs.add("operation mix", fg.operation_mix(workload.op_mix))
    figs.add(
        "response time vs throughput",
        fg.response_vs_throughput(workload.windows, workload.base_ms, workload.slope),
    )
    figs.add("model", fg.model_figure(model.terms, model.predictions, model.what_if))
    parts += figs.html
    figs.html = []
    parts.append("</section>")
    return "".join(parts)


# Event kinds in the order a reader looks for them: what cost time first; the
# TCP events (often hundreds of window-full rows) after, busiest first.
_EVENT_ORDER = ("stall", "RPC re-sent", "error reply", "write verifier changed")


def _events_by_kind(events: pd.DataFrame) -> str:
    """A summary (kind, count, first seen, total duration), then each kind's
    rows in a collapsed ``details`` (stalls open): the stalls are not buried
    among a hundred TCP window events."""
    kinds = events["kind"].astype(str)
    counts = kinds.value_counts()
    order = [k for k in _EVENT_ORDER if k in counts.index]
    order += [k for k in counts.index if k not in order]
    rows_of = {k: kinds == k for k in order}  # (each kind's rows found once)
    t_s, duration_ms = events["t_s"], events["duration_ms"]
    summary = pd.DataFrame(
        {
            "kind": order,
            "count": [int(counts[k]) for k in order],
            "first_s": [t_s[rows_of[k]].min() for k in order],
            "duration_ms": [duration_ms[rows_of[k]].sum() for k in order],
        }
    )
    headers = {"t_s": "time (s)", "duration_ms": "duration (ms)"}  # (s since TIME_ORIGIN)
    tips = {"t_s": f"seconds since {fg.TIME_ORIGIN}"}
    parts = [
        _table(
            summary,
            list(summary.columns),
            headers={"first_s": "first (s)", "duration_ms": "total duration (ms)"},
            tips={"duration_ms": "sum of the durations the events of this kind have (stalls, "
                  "re-sent calls, error replies: their call's wait)"},
            table_id="events",
        )
    ]  # fmt: skip
    columns = [c for c in events.columns if c != "kind"]
    for i, kind in enumerate(order):
        rows = events[rows_of[kind]]
        opened = " open" if kind == "stall" else ""
        parts.append(
            f"<details{opened}><summary>{_e(kind)}: {len(rows):,}</summary>"
            + _table(rows, columns, headers=headers, tips=tips, table_id=f"events-{i}")
            + "</details>"
        )
    return "".join(parts)


def _expert_html(trace: Trace, diagnosis: Diagnosis) -> str:
    """TCP's expert info as tshark gives it, each kind linked to the RPCs in
    progress on its connection meanwhile (``transport.expert``); the
    out-of-order segments, counted only."""
    expert = diagnosis.transport.expert
    out_of_order = trace.stats.tcp.get("out_of_order", 0)
    if expert.empty and not out_of_order:
        return ""
    out = ["<h3>TCP expert info (linked to the RPCs in progress on the connection)</h3>"]
    if len(expert):
        shown = expert.assign(  # (instants have no length: '-')
            duration_ms=expert["duration_ns"].where(expert["duration_ns"] > 0) / 1e6,
            rpc_latency_ms=expert["rpc_latency_ns"] / 1e6,
        )
        columns = ["what", "severity", "events", "duration_ms", "rpcs", "writes"]
        columns += ["rpc_latency_ms", "first_frame", "rpc_frames"]
        headers = {
            "duration_ms": "for (ms)",
            "rpcs": "RPCs",
            "writes": "WRITEs",
            "rpc_latency_ms": "their latency (ms)",
            "first_frame": "first frame",
            "rpc_frames": "slowest RPCs (call frames)",
        }
        tips = {
            **EXPERT_COLUMNS,
            "duration_ms": EXPERT_COLUMNS["duration_ns"],
            "rpc_latency_ms": EXPERT_COLUMNS["rpc_latency_ns"],
        }
        out.append(_table(shown, columns, headers=headers, tips=tips, table_id="tcp-expert"))
    if out_of_order:
        out.append(
            f'<p class="note">{out_of_order:,} TCP segments out of order (counted, not linked '
            "to RPCs: the parser keeps no event for them).</p>"
        )
    return "".join(out)


def _tables_section(trace: Trace, diagnosis: Diagnosis) -> str:
    out = ['<section id="tables"><h2>Tables</h2>']
    lat_tips = dict(LATENCY_COLUMNS)
    lat_cols = list(LATENCY_COLUMNS)
    out.append("<h3>Latency per operation (first call to reply, ms; click a header to sort)</h3>")
    out.append(_table(trace.latency, lat_cols, tips=lat_tips, table_id="latency"))
    by_pair = trace.latency_by_pair
    if len(by_pair) and by_pair[["client", "server"]].drop_duplicates().shape[0] > 1:
        out.append("<h3>Latency per operation and client/server pair</h3>")
        out.append(
            _table(by_pair, ["client", "server", *lat_cols], tips=lat_tips, table_id="latency-pair")
        )
    files = trace.files
    if len(files):
        out.append("<h3>Files written (the slowest first; names from the capture)</h3>")
        out.append(
            _table(
                files,
                list(files.columns),
                tips=dict(FILE_COLUMNS),
                table_id="files",
            )
        )
    out.append(_expert_html(trace, diagnosis))
    shown = diagnosis.timeline
    events = shown.table.drop(columns="t_ns")
    # seconds from the first RPC message (a handshake before it is negative)
    events.insert(0, "t_s", (shown.table["t_ns"].astype("float64") - trace.overview.start_ns) / 1e9)
    total, notes = len(events), shown.notes
    out.append("<h3>Events</h3>")
    if total:
        out.append(_events_by_kind(events))
        out += [f'<p class="note">{_e(n)}</p>' for n in notes]
    else:
        out.append("<p>No stalls, re-sent calls, verifier changes, errors or TCP events.</p>")
    model = diagnosis.model
    params = model.parameters
    out.append("<h3>Model parameters (each with the method that estimated it)</h3>")
    shown = params.assign(
        value=[_fmt_duration(float(v)) if not pd.isna(v) else "-" for v in params["value_s"]],
        spread=[_fmt_duration(float(v)) if not pd.isna(v) else "-" for v in params["spread_s"]],
    )
    cols = ["name", "value", "method", "samples", "spread", "note"]
    out.append(_table(shown, cols, table_id="model-parameters"))
    for name, title, table in (
        (
            "predictions",
            "Predicted vs measured (the WRITE calls over their own span: first call to "
            "last WRITE reply)",
            model.predictions,
        ),
        ("what_if", "What if", model.what_if),
    ):
        if len(table):
            out.append(f"<h3>{_e(title)}</h3>")
            out.append(_table(table, list(table.columns), table_id=f"model-{name}"))
    out.append("</section>")
    return "".join(out)


# ---- the page ------------------------------------------------------------------------
# The page's own CSS and scripts are package data (nfstrace/reports/assets/),
# read once at import.


def _asset(name: str) -> str:
    return resources.files("nfstrace.reports").joinpath("assets", name).read_text("utf-8")


_CSS = _asset("report.css")

# Runs first: records every script error so the check below (and a reader) sees it.
_ERROR_RECORDER = _asset("errors.js")

# Runs last: sortable tables, and the check that every figure was drawn.
# plotly.js: its basic bundle (scatter, bar, pie: what the figures draw), vendored
# with its licence and version (assets/plotly-basic.README.md): 1.2 MB; gzip
# packs it to 395 KB (527 KB as base64 in the page; the whole plotly.js was 4.8
# MB, 2.0 MB packed).  The page unpacks it with the browser's own
# DecompressionStream (Chrome 80, Firefox 113, Safari 16.4 and later): still one
# offline file.  The figures' scripts wait (type DEFERRED) and run after it, in
# document order.  It is vendored packed, as the page carries it: packing it at
# each report (gzip -9 of 1.2 MB) cost 40-50 ms of every report.
PACKED_PLOTLY_ID = "nfstrace-plotly"
DEFERRED = "text/x-nfstrace-figure"
_UNPACK_SCRIPT = (
    _asset("unpack.js").replace("PACKED_PLOTLY_ID", PACKED_PLOTLY_ID).replace("DEFERRED", DEFERRED)
)


PLOTLY_BUNDLE = "plotly-basic.min.js.gz"
_BANNER = re.compile(r"\* plotly\.js \(([^)]*)\) v(\S+)")


def _packed_asset(name: str) -> bytes:
    return resources.files("nfstrace.reports").joinpath("assets", name).read_bytes()


def _version(packed: bytes) -> str:
    """plotly.js's version, from the banner that begins the packed bundle."""
    head = zlib.decompressobj(wbits=31).decompress(packed, 300).decode("utf-8", "replace")
    banner = _BANNER.search(head)
    assert banner, f"{PLOTLY_BUNDLE}: no plotly.js banner"
    return banner.group(2)


@functools.cache
def plotly_js() -> tuple[str, str]:
    """(the vendored plotly.js bundle, unpacked; its version)."""
    packed = _packed_asset(PLOTLY_BUNDLE)
    return gzip.decompress(packed).decode("utf-8"), _version(packed)


@functools.cache
def packed_plotly() -> tuple[str, str]:
    """(plotly.js gzip-packed as base64, its version): the vendored bundle as it is."""
    packed = _packed_asset(PLOTLY_BUNDLE)
    return base64.b64encode(packed).decode("ascii"), _version(packed)


_PAGE_SCRIPT = _asset("page.js")


def transfer_figure(trace: Trace, point_budget: int = fg.POINT_BUDGET) -> fg.Figure:
    """The whole capture's cumulative transfer as the report draws it (the
    budget's shading, stalls, re-sends, COMMITs, TCP retransmissions)."""
    figures = _pair_figure_list(trace, _inputs(trace.diagnosis), None, point_budget)
    return dict(figures)["cumulative transfer"]


def render_report(
    trace: Trace, diagnosis: Diagnosis, *, point_budget: int = fg.POINT_BUDGET
) -> str:
    """The whole report as one HTML document (plotly.js inlined once)."""
    data = _inputs(diagnosis)
    figs = _Figures()  # one numbering of the figure divs, the diagnosis's first
    diagnosis_html = _diagnosis_section(trace, diagnosis, figs)
    figures_html = _figures_section(trace, diagnosis, data, point_budget, figs)
    title = "nfstrace report: " + file_names(trace.paths, base=True)
    when = (
        f"times are seconds since {fg.TIME_ORIGIN} ({_when(trace.overview.start_ns)}; "
        "TCP events before it, such as handshakes, have negative times)"
    )
    body = [
        diagnosis_html,
        _capture_section(trace, diagnosis),
        _mounts_section(diagnosis),
        figures_html,
        _tables_section(trace, diagnosis),
    ]
    return _page(title, when, body, figs.notes)


def _page(title: str, subtitle: str, body: list[str], notes: list[str]) -> str:
    """One offline HTML document: the styles, the error recorder, the body, the
    notes, plotly.js packed and the scripts that unpack it and run the page."""

    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title>",
        f"<style>{_CSS}</style>",
        f"<script>{_ERROR_RECORDER}</script>",
        "</head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<p class="note">nfstrace {_e(__version__)}; {_e(subtitle)}.</p>',
        '<div id="nfstrace-problems" role="alert"></div>',
        *body,
    ]
    if notes:
        parts.append('<section id="notes"><h2>Notes</h2><ul>')
        parts += [f"<li>{_e(n)}</li>" for n in notes]
        parts.append("</ul></section>")
    packed, version = packed_plotly()
    parts += [
        f"<!-- plotly.js {_e(version)} for the figures: gzip, base64; unpacked below -->",
        f'<script type="application/gzip;base64" id="{PACKED_PLOTLY_ID}">{packed}</script>',
        f"<script>{_UNPACK_SCRIPT}</script>",
        f"<script>{_PAGE_SCRIPT}</script>",
        "</body></html>",
    ]
    return "\n".join(parts)


def render_comparison(cmp: Comparison) -> str:
    """``nfstrace compare``: what changed in words, the two budgets as bars (each
    pair before and after), the pairs and the operations side by side."""
    names = [file_names(t.paths, base=True) for t in (cmp.before, cmp.after)]
    title = f"nfstrace compare: {names[0]} → {names[1]}"
    figs = _Figures()
    body = ['<section id="diagnosis"><h2>What changed</h2><ol>']
    body += [f"<li>{_e(line)}</li>" for line in cmp.changes]
    body.append("</ol>")
    for label, t in (("before", cmp.before), ("after", cmp.after)):
        v = t.diagnosis.verdict
        body.append(f"<p><b>{label}</b> ({_e(v.primary)}): {_e(v.text)}</p>")
    bars = []
    for label, t in (("before", cmp.before), ("after", cmp.after)):
        budget = t.diagnosis.budget
        if len(budget.pairs):
            client = label + ": " + budget.pairs["client"].astype(str)
            bars.append(budget.pairs.assign(client=client))
    if bars:
        figs.add("time budget", fg.time_budget(pd.concat(bars, ignore_index=True)))
        body += figs.html
    body.append("</section>")
    body.append('<section id="tables"><h2>Tables</h2><h3>Client/server pairs</h3>')
    pairs, tips = _compared_pairs(cmp.pairs)
    body.append(_table(pairs, list(pairs.columns), tips=tips, table_id="pairs"))
    body.append("<h3>Operations (latency in ms)</h3>")
    ops, tips = _compared_operations(cmp.operations)
    body.append(_table(ops, list(ops.columns), tips=tips, table_id="operations"))
    body.append("</section>")
    return _page(title, "before and after, side by side", body, figs.notes)


def _arrow(before: Any, after: Any, fmt: str) -> str:
    """'before → after', each formatted, '-' where missing (as the terminal)."""
    return " → ".join("-" if pd.isna(x) else format(x, fmt) for x in (before, after))


def _compared_pairs(pairs: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    """The pairs side by side as the terminal says them: 'before → after' cells,
    the change in throughput in words ('8.4x faster'), and only the causes that
    took a share of the time on either side."""
    rows = pairs.itertuples(index=False)
    used = [
        c
        for c in CAUSES
        if (pairs[[f"{c}_share_before", f"{c}_share_after"]].fillna(0) >= 0.005).any().any()
    ]
    table = pd.DataFrame(
        [
            {
                "client → server": f"{r.client} → {r.server}",
                "write activity (s)": _arrow(r.elapsed_s_before, r.elapsed_s_after, ",.3f"),
                "Mbit/s": _arrow(r.mbit_s_before, r.mbit_s_after, ",.1f"),
                "writes": "-" if not r.speedup > 0 else speed_words(1 / r.speedup),
                "verdict": _arrow(r.primary_before, r.primary_after, ""),
                **{
                    f"{c.replace('_', ' ')} %": _arrow(
                        getattr(r, f"{c}_share_before"), getattr(r, f"{c}_share_after"), ".0%"
                    )
                    for c in used
                },
            }
            for r in rows
        ]
    )
    tips = {
        "write activity (s)": "seconds from the pair's first WRITE call to its last WRITE or "
        "COMMIT reply, before → after",
        "Mbit/s": "bytes of its successful WRITE replies over its write activity",
        "writes": "the change in throughput",
        **{f"{c.replace('_', ' ')} %": f"share of the write activity to {c}" for c in used},
    }
    return table, tips


def _compared_operations(ops: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    """The operations side by side as the terminal says them: 'before → after'
    cells and the median's change in words ('5.9x faster')."""
    table = pd.DataFrame(
        {
            "op": [
                str(op) if program == "nfs" else f"{program} {op}"
                for program, op in zip(ops["program"], ops["op"], strict=True)
            ],
            "vers": ops["vers"],
            "calls": [
                _arrow(b, a, ",")
                for b, a in zip(ops["calls_before"], ops["calls_after"], strict=True)
            ],
            "p50 ms": [
                _arrow(b, a, ",.3f")
                for b, a in zip(ops["p50_ms_before"], ops["p50_ms_after"], strict=True)
            ],
            "p99 ms": [
                _arrow(b, a, ",.3f")
                for b, a in zip(ops["p99_ms_before"], ops["p99_ms_after"], strict=True)
            ],
            "p50 change": [
                "-" if not change > -1 else speed_words(1 + change) for change in ops["p50_change"]
            ],
            "errors": [
                _arrow(b, a, ",")
                for b, a in zip(ops["errors_before"], ops["errors_after"], strict=True)
            ],
        }
    )
    tips = {"p50 ms": "median latency, first call to reply", "p50 change": "the median's change"}
    return table, tips


def write_comparison(path: str | os.PathLike[str], cmp: Comparison) -> None:
    text = render_comparison(cmp)
    write_atomically(path, lambda temp: temp.write_text(text, encoding="utf-8"))


def write_report(path: str | os.PathLike[str], trace: Trace, diagnosis: Diagnosis) -> None:
    """Write ``render_report(trace, diagnosis)`` to ``path`` (UTF-8), whole or not at
    all: rendered first, then written beside it and renamed over it."""
    text = render_report(trace, diagnosis)
    write_atomically(path, lambda temp: temp.write_text(text, encoding="utf-8"))
