"""The diagnosis: every analysis module run on a Trace, the time budget, the
verdict and the findings that lead the reports.

``diagnose(...)`` is the one place that calls the modules of
``nfstrace/analysis/``.  The diagnosis is read from the time budget
(``budget.py``): the verdict names the cause that cost the most time, and
there is one finding per cause that cost time, ranked by the seconds it cost
(``verdict.py``).  Before them come what limits the capture itself (missed
traffic, snaplen, drops), and after them problems that cost no time but must
be said (a server restart that loses unstable data, WRITE errors).  Facts
that cost no time -- capture point, operation mix, COMMIT counts, window
statistics, the model's dominant term -- stay in their sections: each
module's own findings are the ``notes``.  The reports (terminal, JSON,
HTML) render a ``Diagnosis``; they compute nothing themselves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from nfstrace.analysis.budget import Budget, BudgetOptions, time_budget
from nfstrace.analysis.findings import Finding
from nfstrace.analysis.fragments import FragmentsResult, analyze_fragments
from nfstrace.analysis.grouping import is_value
from nfstrace.analysis.kernel_stats import capture_limits as kernel_limits
from nfstrace.analysis.kernel_stats import notes as kernel_notes
from nfstrace.analysis.kernel_stats import slot_findings, with_kernel
from nfstrace.analysis.model import MODEL_COLUMNS, ModelResult, fit_model
from nfstrace.analysis.model_inputs import ModelOverrides, WhatIf
from nfstrace.analysis.mounts import Mounts, mount_operations
from nfstrace.analysis.pace import PaceResult, analyze_pace
from nfstrace.analysis.quality import CaptureQuality, assess_capture
from nfstrace.analysis.repeats import RepeatsResult, analyze_repeats
from nfstrace.analysis.stalls import StallsResult, find_stalls
from nfstrace.analysis.timeline import Timeline, timeline
from nfstrace.analysis.transport import TransportResult, analyze_transport
from nfstrace.analysis.verdict import (
    Context,
    Verdict,
    budget_findings,
    decide,
    verdict_finding,
)
from nfstrace.analysis.workload import WorkloadResult, analyze_workload
from nfstrace.analysis.writes import (
    WritesResult,
    activity_with_pairs,
    analyze_writes,
    prepared,
    progress_with_pairs,
)
from nfstrace.memory import release_freed
from nfstrace.parsers.mountstats import Mountstats
from nfstrace.parsers.stats import ParseStats
from nfstrace.text import bytes_text, count

_SEVERITY_RANK = {"problem": 0, "warning": 1, "info": 2}
# Module findings that are problems without a time cost: they join the diagnosis.
PROBLEM_KINDS = ("verifier_change", "write_errors", "ip_fragments_lost")
# Module findings said beside the causes (facts that explain a cause's time).
SAID_KINDS = ("stable_writes",)
# A capture missing more than this share of the calls (replies without their call)
# limits what can be concluded.
MISSED_CALLS_SHARE = 0.02
# Pairs that get a model of their own (the busiest writers): each pair's round
# trip splits its own waits, each pair's what-ifs price its own remedies.
MAX_PAIR_MODELS = 16


@dataclass(frozen=True)
class DiagnosisOptions:
    """What the user can set about the diagnosis (the CLI builds one)."""

    stall_threshold_ns: int | None = None  # None: derived from the trace's own pace
    model: ModelOverrides | None = None  # --rtt, --link-rate, --disk-rate, --block
    what_if: tuple[WhatIf, ...] = ()  # --what-if specs
    mountstats: Mountstats | None = None  # --mountstats (parsers.mountstats.read_mountstats)


@dataclass(frozen=True)
class Diagnosis:
    """The verdict, the ranked findings, the time budget, each analysis module's
    result and every module's own findings (notes): ``diagnose`` runs them all.

    Attribute names and the tables inside each result are the interface the
    reports use: budget.pairs / budget.intervals, repeats.retransmissions,
    stalls.stalls, writes.commits, pace.outstanding, model.parameters, ...
    """

    quality: CaptureQuality
    repeats: RepeatsResult
    fragments: FragmentsResult
    transport: TransportResult
    writes: WritesResult
    progress: pd.DataFrame  # analysis.writes.write_progress()
    stalls: StallsResult
    pace: PaceResult
    model: ModelResult
    workload: WorkloadResult
    budget: Budget
    verdict: Verdict
    timeline: Timeline  # what happened when, every kind in one table (analysis.timeline)
    findings: list[Finding] = field(default_factory=list)
    pair_models: dict = field(default_factory=dict)  # (client, server) -> ModelResult
    notes: list[Finding] = field(default_factory=list)
    # the kernel's figures per mount and operation, beside mountstats when given
    mounts: Mounts | None = None

    def visible_round_trips(self, transactions: pd.DataFrame) -> np.ndarray:
        """Per transaction, the network round trip its call->reply holds at the
        capture point (ns; NaN: not known): its pair's model's, else the whole
        capture's."""
        whole = _round_trip_ns(self.model)[1]
        out = np.full(len(transactions), whole, "float64")
        if self.pair_models and len(transactions):
            keys = transactions[["client", "server"]].astype(object)
            rows = keys.groupby([keys["client"], keys["server"]], sort=False).indices
            for key, model in self.pair_models.items():
                if key in rows:
                    out[rows[key]] = _round_trip_ns(model)[1]
        return out


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


def capture_limits(quality: Any, transactions: pd.DataFrame, budget: Budget) -> list[str]:
    """What the capture missed, in words, when it is enough to limit the conclusions."""
    out = []
    if quality.interface_drops:
        out.append(f"the capturing interface dropped {count(quality.interface_drops, 'packet')}")
    if quality.capture_missed_bytes:
        out.append(
            f"the capture missed {bytes_text(quality.capture_missed_bytes)} of TCP data the "
            "receiver acknowledged"
        )
    n = int((transactions["n_calls"] > 0).sum())
    orphan = (transactions["n_calls"] == 0).to_numpy()
    orphans = int(orphan.sum())
    if orphans and orphans > MISSED_CALLS_SHARE * (n + orphans):
        writes = orphan & is_value(transactions["op"], "WRITE")
        what = f"{orphans:,} replies whose call it never saw"
        if writes.any():
            nbytes = int(transactions["write_bytes"][writes].clip(lower=0).sum())
            what += (
                f" ({int(writes.sum()):,} WRITEs, {bytes_text(nbytes)} written: "
                "counted from their replies)"
            )
        out.append("the capture missed calls: " + what)
    if quality.writes_stable_unknown or quality.writes_count_unknown:
        out.append(
            f"the snaplen cut {quality.truncated_writes:,} WRITE calls before their "
            "stable_how or count"
        )
    if quality.clock_limits:
        out.append(quality.clock_text())
    cut = unanswered_at_end(transactions)
    if cut:
        out.append(
            f"it ends mid-write: {count(cut, 'WRITE call')} in its last moments "
            f"{'has' if cut == 1 else 'have'} no reply in it (the writes went on after it)"
        )
    gap = budget.seconds().get("capture_gap", 0)
    if budget.elapsed_ns and gap / budget.elapsed_ns >= 0.05:
        out.append(
            f"it missed traffic for {gap / 1e9:.3g} s ({gap / budget.elapsed_ns:.0%} of the "
            "write activity)"
        )
    return out


def unanswered_at_end(transactions: pd.DataFrame) -> int:
    """WRITE calls sent after the last reply the capture holds, none answered: a
    capture that stopped while the writes went on."""
    replied = transactions["t_reply_ns"].dropna()
    last = -1 if replied.empty else int(replied.max())
    late = (
        is_value(transactions["op"], "WRITE")
        & (transactions["n_calls"] > 0).to_numpy()
        & (transactions["n_replies"] == 0).to_numpy()
        & (transactions["t_call_ns"] > last).fillna(False).to_numpy(dtype=bool)
    )  # (masks, not the table's rows: each selection of them copies every column)
    return int(late.sum())


def _round_trip_ns(model: Any) -> tuple[float, float]:
    """The round trip (2*T_prop) and the part of it call->reply shows here, in ns."""
    t_prop = model.parameter("T_prop")
    rtt = 2 * t_prop * 1e9 if math.isfinite(t_prop) else math.nan
    visible = model.rtt_visible_s * 1e9 if math.isfinite(model.rtt_visible_s) else rtt
    return rtt, visible


def _pair_models(
    transactions: pd.DataFrame, events: pd.DataFrame, capture_point: str, options: DiagnosisOptions
) -> dict[tuple[str, str], Any]:
    """A model per client/server pair that wrote, when there are several (the
    busiest MAX_PAIR_MODELS by bytes written): pairs with different servers
    have different round trips, disks and concurrency."""
    wrote = (transactions["write_bytes"] > 0).to_numpy()  # (columns, not the whole rows)
    volume = (
        transactions["write_bytes"][wrote]
        .groupby([transactions[c][wrote].astype(object) for c in ("client", "server")])
        .sum()
    )
    if len(volume) < 2:
        return {}
    tx_of = transactions.groupby(
        [transactions["client"].astype(object), transactions["server"].astype(object)]
    ).indices
    # (each pair's rows taken of the columns the model reads, not of every column)
    transactions = transactions[[c for c in MODEL_COLUMNS if c in transactions.columns]]
    ev_of = (
        events.groupby([events["src"].astype(object), events["dst"].astype(object)]).indices
        if len(events) and "src" in events
        else {}
    )
    out = {}
    for client, server in volume.nlargest(MAX_PAIR_MODELS).index:
        rows = [
            r for r in (ev_of.get((client, server)), ev_of.get((server, client))) if r is not None
        ]
        pair_events = events.iloc[np.sort(np.concatenate(rows))] if rows else None
        out[(client, server)] = fit_model(
            transactions.iloc[tx_of[(client, server)]],
            pair_events,
            capture_point=capture_point,
            overrides=options.model,
        )
    return out


def _context(
    model: ModelResult,
    pace: PaceResult,
    writes: WritesResult,
    repeats: RepeatsResult,
    quality: CaptureQuality,
    transactions: pd.DataFrame,
    events: pd.DataFrame,
) -> Context:
    rtt, _ = _round_trip_ns(model)
    commits = writes.commits["duration_ns"].dropna()
    udp = is_value(transactions["transport"], "udp")
    return Context(
        rtt_ns=rtt,
        writes_in_flight_max=int(pace.outstanding_writes_max),
        writes_in_flight_mean=float(pace.outstanding_writes_mean),
        write_size=pace.write_size,
        commits=len(writes.commits),
        commit_max_ns=float(commits.max()) if len(commits) else math.nan,
        rpc_resent_calls=int(repeats.retransmitted_calls),
        rpc_first_timeout_ms=repeats.first_timeout_ms_median,
        tcp_retransmissions=int(repeats.tcp_retransmitted_segments),
        tcp_silences_ns=tuple(
            int(d)
            for d in events["duration_ns"].to_numpy()[is_value(events["kind"], "tcp_resend_gap")]
        )
        if len(events)
        else (),
        udp=bool(len(udp) and udp.mean() > 0.5),
        capture_point=quality.capture_point,
        stable_asked=dict(writes.stable_asked),
        snaplen_needed=int(quality.snaplen_needed),
    )


def diagnose(
    messages: pd.DataFrame,
    transactions: pd.DataFrame,
    events: pd.DataFrame,
    stats: ParseStats,
    options: DiagnosisOptions | None = None,
) -> Diagnosis:
    """Run every analysis module; the budget, the verdict and the ranked findings."""
    options = options or DiagnosisOptions()
    quality = assess_capture(messages, transactions, events, stats)
    release_freed()
    repeats = analyze_repeats(transactions, events, stats)
    fragments = analyze_fragments(messages, stats, events)
    release_freed()
    transport = analyze_transport(transactions, events)
    # writes, stalls and pace read the same few columns: select and code them once
    # (and each pair's write activity and progress: the stalls, pace and the
    # progress table read them, made once)
    used = prepared(transactions)
    writes = analyze_writes(used)
    release_freed()
    activity, progress_by_pair = activity_with_pairs(used), progress_with_pairs(used)
    progress = progress_by_pair.drop(columns="pair")  # (write_progress)
    stalls = find_stalls(
        used,
        events,
        options.stall_threshold_ns,
        capture_point=quality.capture_point,
        activity=activity,
        progress=progress_by_pair,
    )
    pace = analyze_pace(used, activity=activity)
    del activity, progress_by_pair
    release_freed()
    model = fit_model(
        transactions,
        events,
        messages=messages,
        capture_point=quality.capture_point,
        outstanding_mean=pace.outstanding_writes_mean,
        overrides=options.model,
        what_ifs=options.what_if,
    )
    release_freed()
    rtt, visible = _round_trip_ns(model)
    pair_models = _pair_models(transactions, events, quality.capture_point, options)
    per_pair = {}
    for key, m in pair_models.items():
        p_rtt, p_visible = _round_trip_ns(m)
        if math.isfinite(p_rtt):
            per_pair[key] = BudgetOptions(p_rtt, p_visible, quality.capture_point)
    budget = time_budget(
        transactions, events, BudgetOptions(rtt, visible, quality.capture_point), per_pair
    )
    limits = capture_limits(quality, transactions, budget)
    # -- the kernel's figures (analysis.mounts), with mountstats when given
    # (analysis.kernel_stats): calls it counted that the capture missed limit
    # the conclusions; a slot-table queue is a finding of its own.
    mounts = with_kernel(mount_operations(transactions), options.mountstats)
    release_freed()
    limits += kernel_limits(mounts)
    # --
    verdict = decide(budget, limits)
    # The workload's Little's-law check counts outstanding calls over its own span
    # (first NFS call to last reply), not pace's write activity: let it measure.
    workload = analyze_workload(transactions)
    release_freed()
    results = (quality, repeats, fragments, transport, writes, stalls, pace, model, workload)
    notes = [f for r in results for f in r.findings()] + kernel_notes(mounts)
    ctx = _context(model, pace, writes, repeats, quality, transactions, events)
    loaded = budget.pairs["rtt_loaded_ns"].to_numpy(float) if len(budget.pairs) else []
    if len(loaded) and np.isfinite(loaded).any():
        ctx = replace(ctx, rtt_loaded_ns=float(np.nanmax(loaded)))
    pair_contexts = {
        key: replace(ctx, rtt_ns=_round_trip_ns(m)[0]) for key, m in pair_models.items()
    }
    findings = budget_findings(budget, verdict, ctx, pair_contexts)
    said = {f.kind for f in findings}
    findings += [
        f
        for f in notes
        if f.limits_conclusions
        or f.kind in PROBLEM_KINDS
        or (f.kind in SAID_KINDS and "server" not in said)  # the server's finding says it
    ]
    findings += slot_findings(mounts)  # (analysis.kernel_stats: needs --mountstats)
    findings = rank(findings)
    if budget.elapsed_ns:
        findings.insert(0, verdict_finding(verdict, budget))
    elif writes.writes or unanswered_at_end(transactions):
        # WRITEs were sent but none answered: say what the capture cannot tell
        text = (
            f"no WRITE was answered in the capture ({count(writes.writes, 'WRITE call')} "
            "sent): it says nothing about how fast the writes ran"
        )
        if limits:
            text += f" (limited: {'; '.join(limits)})"
        verdict = Verdict("none", text, limits=limits)
        findings.insert(
            0,
            Finding(
                kind="verdict",
                title=text[0].upper() + text[1:],
                severity="warning",
                limits_conclusions=True,
                details={"primary": "none", "elapsed_ns": 0},
            ),
        )
    shown = timeline(
        transactions,
        events,
        stalls.stalls,
        repeats.retransmissions,
        writes.verifier_changes,
    )
    return Diagnosis(
        timeline=shown,
        findings=findings,
        verdict=verdict,
        budget=budget,
        pair_models=pair_models,
        notes=notes,
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
        mounts=mounts,
    )
