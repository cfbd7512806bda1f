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

from nfstrace.analysis.findings import Finding

_SEVERITY_RANK = {"problem": 0, "warning": 1, "info": 2}


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
