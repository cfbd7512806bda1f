"""The diagnosis: every analysis module run on a Trace, findings ranked.

``diagnose(trace)`` is the one place that calls the modules of
``nfstrace/analysis/`` and ranks their findings: capture-quality findings
that limit what can be concluded first, then by time lost, then by severity.
The reports (terminal, JSON, HTML) render a ``Diagnosis``; they compute
nothing themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from nfstrace.analysis.findings import Finding
from nfstrace.analysis.fragments import analyze_fragments
from nfstrace.analysis.model import ModelOverrides, WhatIf, fit_model
from nfstrace.analysis.pace import analyze_pace
from nfstrace.analysis.quality import assess_capture
from nfstrace.analysis.repeats import analyze_repeats
from nfstrace.analysis.stalls import find_stalls
from nfstrace.analysis.transport import analyze_transport
from nfstrace.analysis.workload import analyze_workload
from nfstrace.analysis.writes import analyze_writes, prepared, write_progress
from nfstrace.parsers.fast import ParseStats

_SEVERITY_RANK = {"problem": 0, "warning": 1, "info": 2}


@dataclass(frozen=True)
class DiagnosisOptions:
    """What the user can set about the diagnosis (the CLI builds one)."""

    stall_threshold_ns: int | None = None  # None: derived from the trace's own pace
    model: ModelOverrides | None = None  # --rtt, --link-rate, --disk-rate, --block
    what_if: tuple[WhatIf, ...] = ()  # --what-if specs


@dataclass(frozen=True)
class Diagnosis:
    """Results of each analysis module (None when it could not run) and the ranked findings.

    Attribute names and the tables inside each result are the interface the
    reports use: repeats.retransmissions, stalls.stalls / stalls.segments,
    writes.commits, pace.outstanding, model.parameters, workload.op_mix, ...
    """

    findings: list[Finding] = field(default_factory=list)
    quality: Any = None  # analysis.quality.CaptureQuality
    repeats: Any = None  # analysis.repeats.RepeatsResult
    fragments: Any = None  # analysis.fragments.FragmentsResult
    transport: Any = None  # analysis.transport.TransportResult
    writes: Any = None  # analysis.writes.WritesResult
    progress: Any = None  # DataFrame: analysis.writes.write_progress()
    stalls: Any = None  # analysis.stalls.StallsResult
    pace: Any = None  # analysis.pace.PaceResult
    model: Any = None  # analysis.model.ModelResult
    workload: Any = None  # analysis.workload.WorkloadResult


def rank(findings: list[Finding]) -> list[Finding]:
    """Quality limits first, then the costliest, then the most severe."""
    return sorted(
        findings,
        key=lambda f: (
            not f.limits_conclusions,
            -f.time_lost_ns,
            _SEVERITY_RANK.get(f.severity, 3),
        ),
    )


def diagnose(
    messages: pd.DataFrame,
    transactions: pd.DataFrame,
    events: pd.DataFrame,
    stats: ParseStats,
    options: DiagnosisOptions | None = None,
) -> Diagnosis:
    """Run every analysis module; rank what they found."""
    options = options or DiagnosisOptions()
    quality = assess_capture(messages, transactions, events, stats)
    repeats = analyze_repeats(transactions, events, stats)
    fragments = analyze_fragments(messages, stats, events)
    transport = analyze_transport(transactions, events)
    # writes, stalls and pace read the same few columns: select and code them once
    used = prepared(transactions)
    writes = analyze_writes(used)
    progress = write_progress(used)
    stalls = find_stalls(
        used, events, options.stall_threshold_ns, capture_point=quality.capture_point
    )
    pace = analyze_pace(used)
    model = fit_model(
        transactions,
        events,
        messages=messages,
        capture_point=quality.capture_point,
        segments=stalls.segments,
        outstanding_mean=pace.outstanding_writes_mean,
        overrides=options.model,
        what_ifs=options.what_if,
    )
    # The workload's Little's-law check counts outstanding calls over its own span
    # (first NFS call to last reply), not pace's write activity: let it measure.
    workload = analyze_workload(transactions)
    results = (quality, repeats, fragments, transport, writes, stalls, pace, model, workload)
    findings = [f for r in results for f in r.findings()]
    return Diagnosis(
        findings=rank(findings),
        quality=quality,
        repeats=repeats,
        fragments=fragments,
        transport=transport,
        writes=writes,
        progress=progress,
        stalls=stalls,
        pace=pace,
        model=model,
        workload=workload,
    )
