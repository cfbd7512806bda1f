"""Terminal rendering (rich) of the latency model and the workload view.

Takes a ``ModelResult`` / ``WorkloadResult`` and a Console; computes nothing.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
from rich.console import Console
from rich.markup import escape

from nfstrace.analysis.model import ModelResult
from nfstrace.analysis.workload import LITTLE_TOLERANCE, WorkloadResult
from nfstrace.reports.style import Column, FittedTable, Wrapped


def _us(seconds: float) -> str:
    return "-" if not math.isfinite(seconds) else f"{seconds * 1e6:,.1f}"


def _num(value: Any, fmt: str = ",.1f") -> str:
    return "-" if value is None or pd.isna(value) else format(float(value), fmt)


def _table(
    title: str,
    heads: list[str],
    left: tuple[str, ...] = (),
    wrap: tuple[str, ...] = (),
    drop: tuple[str, ...] = (),
) -> FittedTable:
    """A table whose cells are never cut: ``left`` columns are names or text,
    ``wrap`` text that may wrap at spaces, ``drop`` give way first when narrow."""
    return FittedTable(
        title,
        [
            Column(h, "left" if h in left + wrap else "right", wrap=h in wrap, drop=int(h in drop))
            for h in heads
        ],
    )


def render_model(result: ModelResult, console: Console) -> None:
    say = console.print
    block = "-" if result.block_bytes is None else f"{result.block_bytes:,} bytes"
    say("[bold]Transactional latency model[/bold]  T_cycle = 2·T_prop + T_ser + T_B + T_op")
    say(
        Wrapped(
            escape(
                f"block {block} ({result.block_method}); capture point {result.capture_point}; "
                f"WRITEs in flight: mean {_num(result.outstanding_mean, '.2f')}, "
                f"max {result.outstanding_max}"
            )
        )
    )
    say(Wrapped(f"[bold]{escape(result.dominant_text)}[/bold]"))

    params = _table(
        "Parameters",
        ["parameter", "µs", "samples", "spread µs", "method"],
        ("parameter",),
        wrap=("method",),
        drop=("spread µs",),
    )
    for p in result.parameters.itertuples(index=False):
        method = p.method + (f" ({p.note})" if p.note else "")
        params.add_row(p.name, _us(p.value_s), f"{p.samples:,}", _us(p.spread_s), method)
    say(params)

    cycle = _table("Cycle", ["term", "µs", "share"], ("term",))
    for name, value in result.terms.items():
        share = value / result.t_cycle_s if math.isfinite(result.t_cycle_s) else math.nan
        mark = " <" if name == result.dominant else ""
        cycle.add_row(name + mark, _us(value), _num(share * 100, ".0f") + "%")
    cycle.add_row("T_cycle", _us(result.t_cycle_s), "100%")
    say(cycle)

    preds = _table(
        "Predicted vs measured (the WRITE calls over their own span: first call to last "
        "WRITE reply)",
        ["scenario", "in flight", "predicted Mbit/s", "measured Mbit/s", "error %"],
        wrap=("scenario",),
    )
    for r in result.predictions.itertuples(index=False):
        preds.add_row(
            r.scenario,
            _num(r.outstanding, ".2f"),
            _num(r.predicted_mbit_s),
            _num(r.measured_mbit_s),
            _num(r.error_pct, "+.1f"),
        )
    say(preds)
    if result.inputs:
        say(Wrapped("the prediction rests on: " + escape("; ".join(result.inputs))))

    if not result.what_if.empty:
        table = _table(
            "What if", ["change", "in flight", "T_cycle µs", "Mbit/s", "limit"], ("change", "limit")
        )
        for r in result.what_if.itertuples(index=False):
            table.add_row(
                r.change,
                _num(r.outstanding, ".2f"),
                _num(r.t_cycle_us),
                _num(r.predicted_mbit_s),
                r.dominant or "-",
            )
        say(table)


def render_workload(result: WorkloadResult, console: Console) -> None:
    say = console.print
    say(f"[bold]Workload[/bold]  {result.calls:,} NFS calls")
    mix = _table(
        "Operation mix vs LADDIS", ["operation", "calls", "share", "LADDIS"], ("operation",)
    )
    for r in result.op_mix.itertuples(index=False):
        if r.calls == 0 and pd.isna(r.laddis_share):
            continue
        mix.add_row(
            r.category,
            f"{r.calls:,}",
            _num(r.share * 100 if pd.notna(r.share) else None, ".1f") + "%",
            "-" if pd.isna(r.laddis_share) else f"{r.laddis_share:.0%}",
        )
    say(mix)
    saturation = "none seen" if result.saturation is None else f"{result.saturation:,.0f} ops/s"
    say(
        Wrapped(
            f"response time vs throughput ({len(result.windows)} windows of "
            f"{result.window_ns / 1e6:,.3f} ms): base {_num(result.base_ms, '.3f')} ms, "
            f"slope {_num(result.slope, '.3g')} ms per op/s, saturation {saturation}"
        )
    )
    verdict = {True: "holds", False: "DOES NOT HOLD", None: "nothing to check"}[result.little_ok]
    say(
        Wrapped(
            f"Little's law {verdict} (tolerance {LITTLE_TOLERANCE:.0%}): "
            f"{_num(result.outstanding_mean, '.2f')} outstanding ({result.outstanding_source}) "
            f"vs {_num(result.throughput_ops_s, ',.0f')} ops/s x "
            f"{_num(result.mean_latency_s * 1e3, '.3f')} ms = "
            f"{_num(result.little_product, '.2f')}"
        )
    )
