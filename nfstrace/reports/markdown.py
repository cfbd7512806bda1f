"""The diagnosis as Markdown for a ticket's body (``analyze --markdown FILE``):
the verdict, the findings, each pair's time budget, the operations that took
the most time and what the capture missed -- the terminal's default view, in a
form GitHub, GitLab and Jira render.  Text from the capture is escaped."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import pandas as pd

from nfstrace.analysis.budget import CAUSES
from nfstrace.analysis.latency import by_time_spent, server_time_note
from nfstrace.analysis.overview import throughput_text, write_activity
from nfstrace.analysis.quality import clean_capture_text
from nfstrace.reports.files import write_atomically
from nfstrace.text import count, file_names, printable
from nfstrace.trace import Trace

MAX_OPERATIONS = 8
MAX_PAIRS = 8
_SPECIAL = re.compile(r"([\\`*_\[\]|~])")  # what makes markup inside a line


def md(text: object) -> str:
    """Text safe in Markdown inside a line (a list item, a table cell): control
    characters shown, HTML escaped, the characters that make emphasis, code,
    links or table cells escaped (a file name such as ``*x*`` or ``a|b`` stays
    itself)."""
    return _SPECIAL.sub(r"\\\1", html.escape(printable(str(text)), quote=False))


def _ms(v: Any) -> str:
    return "-" if pd.isna(v) else f"{float(v):,.3f}"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def rate_lines_of(trace: Trace) -> list[tuple[str, str]]:
    """The write throughput the verdict gives, with what it measures (else the
    WRITE calls' own), and the reads'."""
    activity = write_activity(trace.diagnosis.budget.pairs)
    ov = trace.overview
    out = []
    if activity is not None:
        out.append(("Written", throughput_text(activity, "WRITE")))
    elif ov.write is not None:
        out.append(("Written", throughput_text(ov.write, "WRITE")))
    if ov.read is not None:
        out.append(("Read", throughput_text(ov.read, "READ")))
    return out


def render_markdown(trace: Trace) -> str:
    ov, st, d = trace.overview, trace.stats, trace.diagnosis
    names = file_names(trace.paths, base=True)
    versions = ", ".join(f"NFSv{v}" for v in ov.nfs_versions) or "no NFS"
    out = [
        f"## nfstrace: {md(names)}",
        "",
        f"{count(st.frames, 'frame')} over {(ov.end_ns - ov.start_ns) / 1e9:.3f} s; "
        f"clients {md(', '.join(ov.clients) or '-')}; servers {md(', '.join(ov.servers) or '-')}; "
        f"{md(versions)} over {md('/'.join(ov.transports).upper() or '-')}",
        "",
    ]
    out += [f"**Verdict (`{d.verdict.primary}`):** {md(d.verdict.text)}", ""]
    for label, t in rate_lines_of(trace):
        out += [f"**{label}:** {md(t)}", ""]
    out += ["### Diagnosis", ""]
    out += [
        f"{i}. {md(f.title)}" + (f" ({f.evidence()})" if f.evidence() else "")
        for i, f in enumerate(d.findings, 1)
    ] or ["Nothing notable."]
    out.append("")
    if not d.budget.pairs.empty:
        pairs = d.budget.pairs.sort_values("elapsed_ns", ascending=False, kind="stable")
        used = [c for c in CAUSES if pairs[f"{c}_ns"].sum() > 0]
        out += ["### Time budget of the writes (share of each pair's write activity)", ""]
        out.append(
            _row(
                ["client → server", "write activity s", "Mbit/s"]
                + [c.replace("_", " ") for c in used]
            )
        )
        out.append(_row(["---"] * (3 + len(used))))
        for r in pairs.head(MAX_PAIRS).itertuples(index=False):
            e = r.elapsed_ns
            shares = [f"{getattr(r, f'{c}_ns') / e:.0%}" if e else "-" for c in used]
            pair = f"{md(r.client)} → {md(r.server)}"
            out.append(_row([pair, f"{e / 1e9:,.3f}", f"{r.mbit_s:,.1f}", *shares]))
        if len(pairs) > MAX_PAIRS:
            out.append(f"\n{len(pairs) - MAX_PAIRS:,} more pairs in the HTML report.")
        out.append("")
    latency = by_time_spent(trace.latency).head(MAX_OPERATIONS)
    if len(latency):
        out += ["### Operations by time spent", ""]
        out.append(
            _row(["op", "calls", "min ms", "p50 ms", "p99 ms", "sum ms", "server p50 ms", "errors"])
        )
        out.append(_row(["---"] * 8))
        for r in latency.itertuples(index=False):
            out.append(
                _row(
                    [
                        md(f"{r.program} {r.op}"),
                        f"{r.calls:,}",
                        _ms(r.min_ms),
                        _ms(r.p50_ms),
                        _ms(r.p99_ms),
                        _ms(r.sum_ms),
                        _ms(r.server_p50_ms),
                        md(r.error_names or (f"{r.errors:,}" if r.errors else "")),
                    ]
                )
            )
        out += [
            "",
            "min/p50/p99/sum from the first packet of the call (as the client waits; sum: "
            "the operation's time in all); "
            f"{server_time_note(trace.diagnosis.model.rtt_visible_s)}.",
            "",
        ]
    tcp = st.tcp
    out += [
        "### Capture",
        "",
        f"- {ov.counts_text()}; {ov.repeats_text()}",
        "- "
        + (
            clean_capture_text(st)
            or f"TCP segments {tcp.get('segments', 0):,}: {tcp.get('retransmitted', 0):,} "
            f"retransmitted; frames cut by snaplen {st.truncated_frames:,}; dropped by the "
            f"interface {st.interface_drops:,}"
        ),
        *(f"- warning: {md(w)}" for w in st.warnings),
        "",
    ]
    return "\n".join(out)


def write_markdown(trace: Trace, path: Path) -> None:
    text = render_markdown(trace)
    write_atomically(path, lambda temp: temp.write_text(text, encoding="utf-8"))
