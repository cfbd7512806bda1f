"""The report's figures: one function per figure, each returning a ``Figure``,
the plain figure spec plotly.js draws (``{"data": [...], "layout": {...}}``,
built without plotly.py: see "the figure specs" below).

1. ``cumulative_transfer``: bytes acknowledged by WRITE replies vs time, with
   stalls, segment slopes, re-sends and COMMITs marked, and optionally the time
   budget's intervals shaded behind the curve in their cause's colour;
2. ``transaction_throughput``: block / latency of each READ and WRITE;
3. ``write_latency``: call→reply time of each WRITE, re-sent ones marked;
4. ``outstanding_rpcs``: RPCs in flight vs time;
5. ``latency_cdf``: call→reply time distribution per operation;
6. ``operation_mix``: share of calls per category beside LADDIS;
7. ``response_vs_throughput``: mean response time vs ops/s per time window;
8. ``model_figure``: the transactional model's terms, predictions, what-ifs;
9. ``time_budget``: one stacked bar per client→server pair, its write activity
   split by cause (``nfstrace.analysis.budget``).

Each function takes the documented tables (``nfstrace.schema`` transactions, or
the tables of the analysis results: ``Diagnosis.progress``,
``stalls.stalls``/``stalls.segments``, ``writes.commits``, ``pace.outstanding``,
``workload.op_mix``/``workload.windows``, ``model.terms``/``predictions``/``what_if``,
``budget.pairs``/``budget.intervals``) and is usable as is from Jupyter::

    fig = cumulative_transfer(diagnosis.progress, diagnosis.stalls.stalls,
                              budget_intervals=diagnosis.budget.intervals)
    plotly.graph_objects.Figure(fig).show()  # plotly.py reads the spec as it is
    json_text = to_json(time_budget(diagnosis.budget.pairs))  # what the report inlines

Time axes are seconds since ``t0_ns`` (default: the first time in the data),
named on the axis by ``origin`` (the report: ``TIME_ORIGIN``, the first RPC
message, as its header and tables say).  Log axes are labelled at 1, 2 and 5
of each decade and span at least two labels (``log_axis``).  Every mark drawn
has its legend entry, and the notes never speak of clicking: each figure
reads as a static image (a screenshot in a ticket, ``--png``).
Above ``point_budget`` points a figure is thinned (the minimum and maximum of
each time bucket are kept, so spikes and stalls survive) and says so in its
subtitle.  Every trace is SVG (``scatter``, ``bar``): the report inlines
plotly.js's basic bundle, which has no WebGL, and ``POINT_BUDGET`` points
(the minimum and maximum of 5,000 buckets, more than a plot has pixels across)
draw in SVG within a second.  Strings
from the capture are HTML-escaped: plotly renders a subset of HTML in labels.

Each budget cause has one colour, ``CAUSE_COLOURS``, used by the budget bars,
the budget shading and (through ``STALL_CAUSE``) the stall shading.

Its length is one builder per figure (cumulative transfer with its shadings,
per-transaction latency, outstanding RPCs, budget bars, the model), sharing
the decimation to POINT_BUDGET points and the colours above.
"""

from __future__ import annotations

import base64
import functools
import html
import json
import math
import re
from collections.abc import Mapping
from importlib import resources
from typing import Any

import numpy as np
import pandas as pd

from nfstrace.analysis.budget import CAUSES

POINT_BUDGET = 10_000  # points per figure before thinning
# The trace types the figures draw: those of the plotly.js bundle the report
# inlines (reports/assets/plotly-basic.README.md); tests/test_figures.py checks.
TRACE_TYPES = ("scatter", "bar")
MAX_LABELLED = 20  # stalls / segments labelled with text (the longest ones)
MAX_CDF_LINES = 8  # latency CDF: the busiest operations, the rest as one line
# cumulative transfer: writes spanning less than this share of the plotted time are zoomed to
ZOOM_BELOW = 0.5
HEIGHT = 420

MAX_BUDGET_PAIRS = 30  # bars of the time-budget figure (the pairs with the longest activity)
MAX_BUDGET_SHAPES = 300  # budget stretches shaded behind the cumulative transfer (the longest)
BUDGET_MERGE_SHARE = 0.001  # same-cause stretches closer than this share of the span: merged
SHADE_OPACITY = 0.25
_LEGEND_ABOVE = {"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 1, "xanchor": "right"}

# The time origin the report gives its time axes (and its header, its tables).
TIME_ORIGIN = "the first RPC message"

# One colour per time-budget cause (nfstrace.analysis.budget.CAUSES), everywhere.
CAUSE_COLOURS: dict[str, str] = {
    "transfer": "#2ca02c",
    "round_trip": "#1f77b4",
    "server": "#9467bd",
    "commit": "#d62728",
    "loss_recovery": "#ff7f0e",
    "window": "#8c564b",
    "server_busy": "#e377c2",
    "client_idle": "#7f7f7f",
    "capture_gap": "#17becf",
    "unknown": "#bcbd22",
}

# The budget cause a stall cause (nfstrace.analysis.stalls) is a case of: its colour.
STALL_CAUSE: dict[str, str] = {
    "commit": "commit",
    "retransmission": "loss_recovery",
    "server_delay": "server_busy",
    "zero_window": "window",
    "client_idle": "client_idle",
    "unknown": "unknown",
}


def _rgba(colour: str, alpha: float) -> str:
    """``#rrggbb`` with an alpha, as ``rgba(r, g, b, alpha)``."""
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r}, {g}, {b}, {alpha})"


STALL_COLOURS = {
    stall: _rgba(CAUSE_COLOURS[cause], SHADE_OPACITY) for stall, cause in STALL_CAUSE.items()
}


# ---- the figure specs ---------------------------------------------------------------
# A figure is what plotly.js draws, as a dict: {"data": [trace, ...], "layout": {...}}
# (https://plotly.com/javascript/reference/), built here without plotly.py, whose
# validation of every property cost more than the analysis of a small capture.
# Arrays stay numpy arrays until ``to_json`` writes them as plotly.js typed
# arrays, as plotly.py 6 and later does.

Figure = dict[str, Any]  # {"data": [trace dict, ...], "layout": {...}}
Trace = dict[str, Any]  # {"type": "scatter" | "bar", ...} (TRACE_TYPES)

TEMPLATE_ASSET = "plotly_white.json"  # plotly.py's "plotly_white" template, as JSON


@functools.cache
def _template() -> dict[str, Any]:
    text = resources.files("nfstrace.reports").joinpath("assets", TEMPLATE_ASSET).read_text("utf-8")
    template: dict[str, Any] = json.loads(text)
    return template


def template() -> dict[str, Any]:
    """plotly.py's "plotly_white" template as plotly.js reads it in
    ``layout.template`` (vendored: assets/plotly_white.json; a test checks it
    is still plotly's): a copy, for one figure to hold."""
    return json.loads(json.dumps(_template()))


def figure(*traces: Trace) -> Figure:
    return {"data": list(traces), "layout": {}}


def scatter(**props: Any) -> Trace:
    """A scatter trace (SVG): its properties as plotly.js names them."""
    return {"type": "scatter", **props}


def bar(**props: Any) -> Trace:
    return {"type": "bar", **props}


def _merge(target: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """``update`` merged into ``target`` as plotly's ``update`` does: a dict
    into the dict it replaces, key by key; anything else replaced whole."""
    for key, value in update.items():
        if isinstance(value, Mapping):
            old = target.get(key)
            target[key] = _merge(old if isinstance(old, dict) else {}, value)
        else:
            target[key] = value
    return target


def update_layout(fig: Figure, update: Mapping[str, Any]) -> Figure:
    _merge(fig["layout"], update)
    return fig


_AXIS = {"x": re.compile(r"xaxis\d*"), "y": re.compile(r"yaxis\d*")}


def update_axes(fig: Figure, axis: str, **props: Any) -> Figure:
    """``props`` set on every x (or y) axis of the figure (``xaxis``,
    ``xaxis2``, ... of subplots; ``xaxis`` when there is none yet)."""
    layout = fig["layout"]
    keys = [k for k in layout if _AXIS[axis].fullmatch(k)] or [f"{axis}axis"]
    for key in keys:
        layout[key] = _merge(layout.get(key, {}), props)
    return fig


def axis_title(text: str) -> dict[str, Any]:
    return {"title": {"text": text}}


def _axis_refs(row: int | None, col: int | None) -> dict[str, str]:
    """The axes of subplot (1, col) (``subplots`` has one row)."""
    if row is None or col is None:
        return {}
    n = "" if col == 1 else str(col)
    return {"xaxis": f"x{n}", "yaxis": f"y{n}"}


def add_trace(fig: Figure, trace: Trace, row: int | None = None, col: int | None = None) -> Figure:
    fig["data"].append({**trace, **_axis_refs(row, col)})
    return fig


def add_annotation(
    fig: Figure, row: int | None = None, col: int | None = None, **props: Any
) -> Figure:
    """A text at (x, y), in the axes of subplot (row, col) if given."""
    refs = {k[0] + "ref": v for k, v in _axis_refs(row, col).items()}
    fig["layout"].setdefault("annotations", []).append({**props, **refs})
    return fig


def subplots(titles: list[str]) -> Figure:
    """One row of ``len(titles)`` subplots side by side, each titled, as
    plotly's ``make_subplots(rows=1, cols=n, subplot_titles=titles)`` lays
    them out: columns 0.2/n apart, axes ``xaxisN``/``yaxisN`` anchored to each
    other, the titles centred above each column."""
    cols = len(titles)
    spacing = 0.2 / cols
    width = (1.0 - spacing * (cols - 1)) / cols
    fig = figure()
    layout = fig["layout"]
    annotations = []
    for c in range(cols):
        start = width * c + c * spacing
        end = start + width
        n = "" if c == 0 else str(c + 1)
        layout[f"xaxis{n}"] = {"anchor": f"y{n}", "domain": [max(0.0, start), min(1.0, end)]}
        layout[f"yaxis{n}"] = {"anchor": f"x{n}", "domain": [0.0, 1.0]}
        annotations.append(
            {"font": {"size": 16}, "showarrow": False, "text": titles[c], "x": (start + end) / 2,
             "xanchor": "center", "xref": "paper", "y": 1.0, "yanchor": "bottom", "yref": "paper"}
        )  # fmt: skip
    layout["annotations"] = annotations
    return fig


# ---- a figure as JSON ---------------------------------------------------------------

# numpy dtypes plotly.js reads as typed arrays ({"dtype": "f8", "bdata": base64})
_TYPED = {"int8": "i1", "uint8": "u1", "int16": "i2", "uint16": "u2", "int32": "i4",
          "uint32": "u4", "float32": "f4", "float64": "f8"}  # fmt: skip
_NARROW = {"int64": ("int8", "int16", "int32"), "uint64": ("uint8", "uint16", "uint32")}
_UNTYPED_KEYS = frozenset({"geojson", "layer", "layers", "range"})  # plotly.py: lists


def _typed_array(v: np.ndarray) -> Any:
    """A numpy array as plotly.py 6 writes it: a typed array (64-bit integers
    narrowed to the smallest type that holds them; plotly.js has none), or a
    list when it is empty or of another dtype."""
    if v.size and str(v.dtype) in _NARROW:
        for dtype in _NARROW[str(v.dtype)]:
            info = np.iinfo(dtype)
            if v.min() >= info.min and v.max() <= info.max:
                v = v.astype(dtype)
                break
    short = _TYPED.get(str(v.dtype))
    if not v.size or short is None:
        return _plain(v.tolist())
    spec = {
        "dtype": short,
        "bdata": base64.b64encode(np.ascontiguousarray(v).tobytes()).decode("ascii"),
    }
    if v.ndim > 1:
        spec["shape"] = str(v.shape)[1:-1]
    return spec


def _plain(value: Any, key: str | None = None) -> Any:
    """The figure with only JSON values: arrays as typed arrays (``range`` and
    the like as lists, as plotly.py leaves them), NaN and infinities as null."""
    if isinstance(value, dict):
        return {k: _plain(v, k) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, pd.Series | pd.Index):
        value = value.to_numpy()
    if isinstance(value, np.ndarray):
        return _plain(value.tolist()) if key in _UNTYPED_KEYS else _typed_array(value)
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# characters a JSON string may hold that would end or open a tag in a <script>
_SCRIPT_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "/": "\\u002f"})


def to_json(value: Any) -> str:
    """A figure (or its data, or its layout) as the JSON plotly.js reads,
    safe inside an HTML ``<script>``: as plotly.py's ``to_json`` writes it
    (compact, ASCII, ``<``, ``>`` and ``/`` escaped)."""
    return json.dumps(_plain(value), separators=(",", ":"), allow_nan=False).translate(_SCRIPT_SAFE)


# ---- helpers ------------------------------------------------------------------------


def esc(value: object) -> str:
    """A capture string made safe for plotly labels (and HTML)."""
    return html.escape(str(value))


def thin_indices(y: np.ndarray, budget: int) -> np.ndarray:
    """Row positions to draw at most ``budget`` points of an x-ordered series:
    the first and last point of the series and the minimum and maximum of each
    of budget/2 consecutive buckets (so peaks, dips and steps survive)."""
    n = len(y)
    if n <= budget:
        return np.arange(n)
    buckets = max(1, budget // 2 - 1)
    bucket = (np.arange(n) * buckets) // n
    values = np.nan_to_num(np.asarray(y, dtype="float64"), nan=-np.inf)
    order = np.lexsort((values, bucket))  # by bucket, then value
    starts = np.searchsorted(bucket[order], np.arange(buckets))
    ends = np.r_[starts[1:], n] - 1
    keep = np.unique(np.r_[0, n - 1, order[starts], order[ends]])
    return keep


def _seconds(t_ns: pd.Series | np.ndarray, t0_ns: int) -> np.ndarray:
    return (np.asarray(t_ns, dtype="float64") - float(t0_ns)) / 1e9


def time_title(origin: str | None, t0_given: bool, what: str = "time") -> str:
    """A time axis's title: 'time (s since the first RPC message)'."""
    since = origin or ("t0" if t0_given else "the first point shown")
    return f"{what} (s since {since})"


def _t0(*columns: pd.Series) -> int:
    firsts = [int(c.min()) for c in columns if c is not None and len(c.dropna())]
    return min(firsts) if firsts else 0


def _layout(fig: Figure, title: str, notes: list[str], **kw: object) -> Figure:
    """Title with the thinning notes as a subtitle; the notes are also kept in
    ``fig["layout"]["meta"]["notes"]`` for the HTML report."""
    text = esc(title)
    if notes:
        text += "<br><sup>" + esc("; ".join(notes)) + "</sup>"
    layout: dict[str, object] = {
        "title": {"text": text, "x": 0.01},
        "height": HEIGHT,
        "margin": {"l": 70, "r": 30, "t": 90 if notes else 70, "b": 55},
        "template": template(),
        "legend": _LEGEND_ABOVE,
        "showlegend": True,  # even for one trace: every mark named
        "meta": {"notes": notes},
    }
    update_layout(fig, {**layout, **kw})
    # numbers in full: an axis of 12e-6 MB reads "12µ" with plotly's SI prefixes
    update_axes(fig, "x", exponentformat="none")
    update_axes(fig, "y", exponentformat="none")
    return fig


def log_axis(values: np.ndarray, title: str) -> dict[str, object]:
    """A log axis labelled in full at 1, 2 and 5 of each decade the values span
    (plotly alone writes 200 and 300 ms as "2" and "3")."""
    v = np.asarray(values, dtype="float64")
    v = v[np.isfinite(v) & (v > 0)]
    axis: dict[str, object] = {"type": "log", "title": {"text": title}}
    if not len(v):
        return axis
    lo, hi = int(np.floor(np.log10(v.min()))) - 1, int(np.ceil(np.log10(v.max()))) + 1
    ticks = [m * 10.0**e for e in range(lo, hi + 1) for m in (1, 2, 5)]
    decades = np.log10(v.max() / v.min())
    if decades > 4:  # many decades: the powers of ten only
        ticks = [t for t in ticks if round(t / 10 ** np.floor(np.log10(t))) == 1]
    # the axis runs from the label at or below the smallest value to the one at
    # or above the largest (plotly's own range can leave one label, or none, in view)
    low = max(t for t in ticks if t <= v.min() * (1 + 1e-9))
    high = min(t for t in ticks if t >= v.max() * (1 - 1e-9))
    if low == high:  # one value, on a label: the labels either side too
        low = max(t for t in ticks if t < low)
        high = min(t for t in ticks if t > high)
    ticks = [t for t in ticks if low * (1 - 1e-9) <= t <= high * (1 + 1e-9)]
    text = [f"{t:,.0f}" if t >= 1 else f"{t:.10g}" for t in ticks]
    pad = 0.02 * (np.log10(high) - np.log10(low))  # the end labels not on the frame
    axis |= {
        "tickvals": ticks,
        "ticktext": text,
        "range": [float(np.log10(low) - pad), float(np.log10(high) + pad)],
    }
    return axis


def _thinned_note(what: str, shown: int, total: int) -> str:
    return f"{what}: {shown:,} of {total:,} points drawn (min and max of each time bucket)"


def _empty(title: str, why: str) -> Figure:
    fig = figure()
    add_annotation(fig, text=esc(why), showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    update_axes(fig, "x", visible=False)
    update_axes(fig, "y", visible=False)
    return _layout(fig, title, [])


def _pairs(table: pd.DataFrame) -> list[tuple[tuple[str, str], pd.DataFrame]]:
    """(client, server) groups of a table, or the whole table as one group."""
    if {"client", "server"} <= set(table.columns) and len(table):
        groups = table.groupby(["client", "server"], sort=True, dropna=False, observed=True)
        return [((str(c), str(s)), part) for (c, s), part in groups]
    return [(("", ""), table)]


def _pair_label(pair: tuple[str, str]) -> str:
    return f"{pair[0]} → {pair[1]}" if pair != ("", "") else ""


def _interp(x_ns: np.ndarray, curve_x: np.ndarray, curve_y: np.ndarray) -> np.ndarray:
    if len(curve_x) == 0:
        return np.zeros(len(x_ns))
    return np.interp(np.asarray(x_ns, dtype="float64"), curve_x, curve_y)


def _is_write(tx: pd.DataFrame) -> pd.Series:
    return tx["op"].astype(object).eq("WRITE")


# ---- 1. cumulative transfer ------------------------------------------------------------


def cumulative_transfer(
    progress: pd.DataFrame,
    stalls: pd.DataFrame | None = None,
    segments: pd.DataFrame | None = None,
    retransmissions: pd.DataFrame | None = None,
    commits: pd.DataFrame | None = None,
    *,
    t0_ns: int | None = None,
    point_budget: int = POINT_BUDGET,
    budget_intervals: pd.DataFrame | None = None,
    tcp_resends: pd.DataFrame | None = None,
    origin: str | None = None,
) -> Figure:
    """Bytes acknowledged by WRITE replies vs time (the study's main plot).

    progress: t_ns, client, server, bytes (cumulated here per client/server in
    time order); stalls: start_ns, end_ns, duration_ns, cause, detail (shaded,
    one legend entry per cause); segments: start_ns, end_ns, mbit_s (slope of
    each stretch between stalls, written on the curve); retransmissions: the
    re-sent calls (``repeats.RETRANSMISSION_COLUMNS``: each re-send marked); commits: t_call_ns,
    t_reply_ns, duration_ns (COMMIT calls marked); budget_intervals: the time
    budget's intervals (``budget.INTERVAL_COLUMNS``: start_ns, end_ns,
    duration_ns, cause, evidence; one pair's, or several pairs' shaded over each
    other), shaded behind the curve in ``CAUSE_COLOURS`` (``transfer`` too, as
    the budget's bar shows it), one legend entry per cause (its square marks,
    along the time axis, give each stretch's cause and evidence on hover); see
    ``_add_budget_shading`` for how thousands of intervals stay cheap;
    tcp_resends: TCP retransmission events (ts_ns; marked on the curve, at most
    POINT_BUDGET // 10 of them, evenly chosen); origin: what ``t0_ns`` is, in
    words, for the time axis.  The slopes are written only between stalls (two
    stretches or more: one would be the writes' own rate again).
    """
    title = "Cumulative transfer: bytes acknowledged by WRITE replies"
    if progress is None or progress.empty:
        return _empty(title, "no successful WRITE reply in the capture")
    t0 = int(t0_ns) if t0_ns is not None else _t0(progress["t_ns"])
    fig = figure()
    notes: list[str] = []
    groups = _pairs(progress)
    per_line = max(2, point_budget // max(1, len(groups)) - 2 * MAX_LABELLED)
    curve_x_ns: list[np.ndarray] = []
    curve_mb: list[np.ndarray] = []
    for pair, part in groups:
        part = part.sort_values("t_ns", kind="stable")
        t_ns = part["t_ns"].to_numpy(dtype="float64")
        mb = part["bytes"].to_numpy(dtype="float64").cumsum() / 1e6
        # the curve starts at zero at the time origin (or its first point, if earlier)
        t_ns, mb = np.r_[min(float(t0), t_ns[0]), t_ns], np.r_[0.0, mb]
        keep = thin_indices(mb, per_line)
        if len(keep) < len(mb):
            notes.append(_thinned_note(f"transfer {_pair_label(pair)}".strip(), len(keep), len(mb)))
        curve_x_ns.append(t_ns)
        curve_mb.append(mb)
        add_trace(
            fig,
            scatter(
                x=_seconds(t_ns[keep], t0),
                y=mb[keep],
                mode="lines",
                line={"shape": "hv", "width": 2},
                name=esc("MB acknowledged" + (f" {_pair_label(pair)}" if len(groups) > 1 else "")),
                hovertemplate="%{x:.6f} s<br>%{y:,.3f} MB<extra></extra>",
            ),
        )
    all_x = np.concatenate(curve_x_ns)
    order = np.argsort(all_x, kind="stable")
    all_x, all_mb = all_x[order], np.maximum.accumulate(np.concatenate(curve_mb)[order])
    top = float(all_mb.max()) if len(all_mb) else 1.0
    shaded = budget_intervals is not None and not budget_intervals.empty
    if shaded:
        shaded = _add_budget_shading(fig, budget_intervals, t0, all_x, notes)
    if stalls is not None and not stalls.empty:
        _add_stalls(fig, stalls, t0, top)
    if segments is not None and len(segments) > 1:
        _add_segment_slopes(fig, segments, t0, all_x, all_mb)

    def mark(times_ns: np.ndarray, marker: dict, name: str, what: str) -> None:
        """Events at their times, on the curve (its height then)."""
        add_trace(
            fig,
            scatter(
                x=_seconds(times_ns, t0),
                y=_interp(times_ns, all_x, all_mb),
                mode="markers",
                marker=marker,
                name=name,
                hovertemplate=f"{what} at %{{x:.6f}} s<extra></extra>",
            ),
        )

    if retransmissions is not None and not retransmissions.empty:
        resend_ns = _resend_times(retransmissions)
        mark(resend_ns, {"symbol": "x", "size": 9, "color": "#d62728"},
             f"RPC re-sends ({len(resend_ns):,})", "re-send")  # fmt: skip
    if tcp_resends is not None and not tcp_resends.empty:
        ts = np.sort(tcp_resends["ts_ns"].to_numpy(dtype="float64"))
        keep = np.unique(np.linspace(0, len(ts) - 1, min(len(ts), point_budget // 10)).round())
        if len(keep) < len(ts):
            notes.append(_thinned_note("TCP retransmissions", len(keep), len(ts)))
        mark(ts[keep.astype(int)], {"symbol": "line-ns-open", "size": 12, "color": "#9467bd"},
             f"TCP retransmissions ({len(tcp_resends):,})", "TCP retransmission")  # fmt: skip
    if commits is not None and not commits.empty:
        c = commits.dropna(subset=["t_call_ns"])
        call_ns = c["t_call_ns"].to_numpy(dtype="float64")
        ms = c["duration_ns"].astype("Float64").fillna(np.nan).to_numpy(dtype="float64") / 1e6
        add_trace(
            fig,
            scatter(
                x=_seconds(call_ns, t0),
                y=_interp(call_ns, all_x, all_mb),
                mode="markers",
                marker={"symbol": "triangle-down", "size": 10, "color": "#2ca02c"},
                name=f"COMMIT calls ({len(c):,})",
                customdata=ms,
                hovertemplate="COMMIT at %{x:.6f} s, %{customdata:.3f} ms<extra></extra>",
            ),
        )
    xaxis: dict[str, object] = {"title": {"text": time_title(origin, t0_ns is not None)}}
    # the write activity: the budget's span (first WRITE call to last WRITE or
    # COMMIT reply) and the WRITE replies
    first, last = float(all_x[1]) if len(all_x) > 1 else float(all_x[0]), float(all_x[-1])
    if budget_intervals is not None and not budget_intervals.empty:
        first = min(first, float(budget_intervals["start_ns"].min()))
        last = max(last, float(budget_intervals["end_ns"].max()))
    if last - first < ZOOM_BELOW * (last - float(all_x[0])):
        # a short burst in a long capture would be a step at the edge: zoom to it
        margin = max(0.05 * (last - first), 1e6)
        xaxis["range"] = [(first - margin - t0) / 1e9, (last + margin - t0) / 1e9]
        start = min(float(all_x[0]), float(t0))
        notes.append(
            f"zoomed to the write activity, {(first - t0) / 1e9:,.3f}-{(last - t0) / 1e9:,.3f} s "
            f"(the RPC traffic: {(start - t0) / 1e9:,.3f}-{(max(last, all_x[-1]) - t0) / 1e9:,.3f}"
            " s)"
        )
    # with the budget's causes the legend is long: below the plot (not over the title,
    # and not beside it: the time axis keeps the width of the other figures')
    below = {"orientation": "h", "x": 0, "xanchor": "left", "yref": "container", "y": 0.01}
    return _layout(
        fig,
        title,
        notes,
        xaxis=xaxis,
        yaxis=axis_title("MB acknowledged (10^6 bytes)"),
        **(
            {
                "legend": {**below, "yanchor": "bottom"},
                "height": HEIGHT + 80,
                "margin": {"l": 70, "r": 30, "t": 90 if notes else 70, "b": 150},
            }
            if shaded
            else {}
        ),
    )


def _resend_times(retransmissions: pd.DataFrame) -> np.ndarray:
    """Every re-send time (ns): each call's first send, then the times between
    its sends added up (``repeats.RETRANSMISSION_COLUMNS``: t_call_ns,
    intervals_ms)."""
    times = [
        float(first) + float(after_ms) * 1e6
        for first, intervals in zip(
            retransmissions["t_call_ns"], retransmissions["intervals_ms"], strict=True
        )
        for after_ms in np.cumsum(intervals)
    ]
    return np.asarray(times, dtype="float64")


def _budget_stretches(intervals: pd.DataFrame, merge_ns: float) -> pd.DataFrame:
    """The budget's intervals, with the intervals of one cause merged where one
    starts at most ``merge_ns`` after the previous one ended (whatever lies
    between: below a pixel, stretches cannot be told apart).

    Columns: cause, start_ns, end_ns (floats), seconds (the cause's own time in
    the stretch), intervals (merged), evidence (of the longest of them)."""
    cause = intervals["cause"].astype(str).to_numpy(dtype=object)
    evidence = (
        intervals["evidence"].astype(str).to_numpy(dtype=object)
        if "evidence" in intervals
        else np.full(len(intervals), "", dtype=object)
    )
    start = intervals["start_ns"].to_numpy(dtype="float64")
    end = intervals["end_ns"].to_numpy(dtype="float64")
    present = set(cause)
    order = [c for c in CAUSES if c in present] + sorted(present - set(CAUSES))
    parts = []
    for name in order:
        rows = np.flatnonzero(cause == name)
        rows = rows[np.argsort(start[rows], kind="stable")]
        s, e = start[rows], end[rows]
        d = np.maximum(e - s, 0.0)
        reach = np.maximum.accumulate(e)  # intervals of several pairs may overlap
        new = np.r_[True, s[1:] - reach[:-1] > merge_ns]  # starts a stretch
        first, group = np.flatnonzero(new), np.cumsum(new) - 1
        by_length = np.lexsort((d, group))  # within each group, the longest last
        longest = by_length[np.r_[first[1:] - 1, len(rows) - 1]]
        parts.append(
            pd.DataFrame(
                {
                    "cause": name,
                    "start_ns": s[first],
                    "end_ns": np.maximum.reduceat(e, first),
                    "seconds": np.add.reduceat(d, first) / 1e9,
                    "intervals": np.diff(np.r_[first, len(rows)]),
                    "evidence": evidence[rows[longest]],
                }
            )
        )
    if not parts:
        return pd.DataFrame(
            columns=["cause", "start_ns", "end_ns", "seconds", "intervals", "evidence"]
        )
    return pd.concat(parts, ignore_index=True)


def _add_budget_shading(
    fig: Figure, intervals: pd.DataFrame, t0: int, curve_x: np.ndarray, notes: list[str]
) -> bool:
    """The budget's intervals as translucent rectangles the plot's height (layout
    shapes below the traces, one legend entry per cause), and a rug of markers
    on the time axis whose hover gives each stretch's cause, time and evidence.

    Thousands of intervals stay cheap: same-cause intervals closer than
    ``BUDGET_MERGE_SHARE`` of the plot's time span are merged, and at most
    ``MAX_BUDGET_SHAPES`` stretches are drawn (the longest), with a note.
    The legend has one entry per cause, its seconds and share of the time:
    the square marks' trace (the shapes themselves stay out of it).
    False when there was nothing to shade."""
    ends = intervals["end_ns"].to_numpy(dtype="float64")
    starts = intervals["start_ns"].to_numpy(dtype="float64")
    lo = min(float(np.nanmin(starts)), float(curve_x.min()) if len(curve_x) else np.inf)
    hi = max(float(np.nanmax(ends)), float(curve_x.max()) if len(curve_x) else -np.inf)
    stretches = _budget_stretches(intervals, BUDGET_MERGE_SHARE * max(hi - lo, 0.0))
    if stretches.empty:
        return False
    total = len(stretches)
    if total > MAX_BUDGET_SHAPES:
        length = (stretches["end_ns"] - stretches["start_ns"]).to_numpy()
        keep = np.sort(np.argsort(-length, kind="stable")[:MAX_BUDGET_SHAPES])
        notes.append(
            f"time budget: {MAX_BUDGET_SHAPES:,} of {total:,} stretches shaded (the longest; "
            f"{len(intervals):,} intervals, same-cause neighbours merged)"
        )
        stretches = stretches.iloc[keep]
    x0 = _seconds(stretches["start_ns"], t0)
    x1 = _seconds(stretches["end_ns"], t0)
    causes = stretches["cause"].to_numpy(dtype=object)
    all_causes = intervals["cause"].astype(str).to_numpy(dtype=object)
    seconds = pd.Series(np.maximum(ends - starts, 0.0)).groupby(all_causes).sum() / 1e9
    shapes = list(fig["layout"].get("shapes", ()))
    for a, b, cause in zip(x0, x1, causes, strict=True):
        colour = CAUSE_COLOURS.get(cause, CAUSE_COLOURS["unknown"])
        shapes.append(
            {
                "type": "rect",
                "xref": "x",
                "yref": "paper",
                "x0": float(a),
                "x1": float(b),
                "y0": 0,
                "y1": 1,
                "fillcolor": colour,
                "opacity": SHADE_OPACITY,
                "line": {"width": 0},
                "layer": "below",
                "name": esc(f"time budget: {cause}"),
                "legendgroup": f"budget-{cause}",
                "showlegend": False,  # the cause's marks carry its legend entry
            }
        )
    fig["layout"]["shapes"] = shapes
    hover = [
        esc(f"{c}: {a:.6f} to {b:.6f} s ({s:.6f} s in {n:,} interval{'s' if n > 1 else ''})")
        + "<br>"
        + esc(ev)
        for a, b, c, s, n, ev in zip(
            x0,
            x1,
            causes,
            stretches["seconds"],
            stretches["intervals"],
            stretches["evidence"],
            strict=True,
        )
    ]
    all_seconds = float(seconds.sum())
    hover_of = np.asarray(hover, dtype=object)
    order = [c for c in CAUSES if c in set(causes)] + sorted(set(causes) - set(CAUSES))
    for cause in order:  # one trace (and legend entry) per cause, in the budget's order
        mine = causes == cause
        share = float(seconds.get(cause, 0.0)) / all_seconds if all_seconds > 0 else 0.0
        add_trace(
            fig,
            scatter(
                x=((x0 + x1) / 2)[mine],
                y=np.zeros(int(mine.sum())),
                mode="markers",
                marker={
                    "symbol": "square",
                    "size": 7,
                    "color": CAUSE_COLOURS.get(cause, CAUSE_COLOURS["unknown"]),
                },
                name=esc(
                    f"time budget: {cause} ({float(seconds.get(cause, 0.0)):.3f} s, {share:.0%})"
                ),
                legendgroup=f"budget-{cause}",
                hovertext=list(hover_of[mine]),
                hoverinfo="text",
            ),
        )
    return True


def _add_stalls(fig: Figure, stalls: pd.DataFrame, t0: int, top: float) -> None:
    """Each cause one filled trace (a legend entry), the longest stalls labelled."""
    for cause, part in stalls.groupby(stalls["cause"].astype(str), sort=True):
        s = _seconds(part["start_ns"], t0)
        e = _seconds(part["end_ns"], t0)
        # one closed rectangle per stall, NaN breaks between them
        xs = np.column_stack([s, s, e, e, s, np.full(len(s), np.nan)]).ravel()
        ys = np.tile([0.0, top, top, 0.0, 0.0, np.nan], len(s))
        lost = part["duration_ns"].sum() / 1e9
        add_trace(
            fig,
            scatter(
                x=xs,
                y=ys,
                fill="toself",
                mode="lines",
                line={"width": 0},
                fillcolor=STALL_COLOURS.get(cause, STALL_COLOURS["unknown"]),
                name=esc(f"stall: {cause} ({len(part):,}, {lost:.3f} s)"),
                hoverinfo="name",
            ),
        )
    longest = stalls.nlargest(MAX_LABELLED, "duration_ns").sort_values("start_ns")
    mid = _seconds(longest["start_ns"] + longest["duration_ns"] / 2, t0)
    span = max(float(mid.max() - mid.min()), 1e-9) if len(mid) else 1.0
    level = 0
    for i, row in enumerate(longest.itertuples(index=False)):
        # labels closer than 4% of the labelled span step down (three levels, then
        # back up): side by side they would print over each other
        level = (level + 1) % 3 if i and mid[i] - mid[i - 1] < 0.04 * span else 0
        add_annotation(
            fig,
            x=float(mid[i]),
            y=top,
            yanchor="bottom",
            yshift=-14 * level if len(longest) <= 4 else 0,
            text=esc(f"{row.cause} {row.duration_ns / 1e9:.3f} s"),
            showarrow=False,
            font={"size": 10},
            textangle=-90 if len(longest) > 4 else 0,
            xshift=9 * level if len(longest) > 4 else 0,
        )


def _add_segment_slopes(
    fig: Figure, segments: pd.DataFrame, t0: int, curve_x: np.ndarray, curve_mb: np.ndarray
) -> None:
    longest = segments.nlargest(MAX_LABELLED, "duration_ns")
    mid_ns = (longest["start_ns"].to_numpy("float64") + longest["end_ns"].to_numpy("float64")) / 2
    add_trace(
        fig,
        scatter(
            x=_seconds(mid_ns, t0),
            y=_interp(mid_ns, curve_x, curve_mb),
            mode="text",
            text=[f"{v:,.1f} Mbit/s" for v in longest["mbit_s"].astype("float64")],
            textposition="middle left",
            name="slope between stalls",
            hoverinfo="skip",
            showlegend=False,  # the text says what it is
        ),
    )


# ---- 2. per-transaction throughput -----------------------------------------------------


def transaction_throughput(
    transactions: pd.DataFrame,
    *,
    t0_ns: int | None = None,
    point_budget: int = POINT_BUDGET,
    origin: str | None = None,
) -> Figure:
    """Block / latency of every answered WRITE and READ vs its call time (Mbit/s)."""
    title = "Per-transaction throughput: block / call→reply time"
    tx = transactions
    moved = tx["write_bytes"].where(tx["write_bytes"] > 0, tx["read_bytes"])
    ok = (moved > 0) & tx["latency_ns"].notna() & (tx["latency_ns"].fillna(0) > 0)
    if not ok.any():
        return _empty(title, "no answered READ or WRITE carrying data")
    t0 = int(t0_ns) if t0_ns is not None else _t0(tx.loc[ok, "t_call_ns"])
    fig = figure()
    notes: list[str] = []
    ops = tx.loc[ok, "op"].astype(str)
    per_op = max(2, point_budget // max(1, ops.nunique()))
    for op in sorted(ops.unique()):
        part = tx[ok & tx["op"].astype(object).eq(op)].sort_values("t_call_ns", kind="stable")
        b = moved[part.index].to_numpy("float64")
        mbit_s = b * 8e3 / part["latency_ns"].to_numpy("float64")
        keep = thin_indices(mbit_s, per_op)
        if len(keep) < len(mbit_s):
            notes.append(_thinned_note(op, len(keep), len(mbit_s)))
        add_trace(
            fig,
            scatter(
                x=_seconds(part["t_call_ns"].to_numpy("float64")[keep], t0),
                y=mbit_s[keep],
                mode="markers",
                marker={"size": 5},
                name=esc(op),
                customdata=np.column_stack([b[keep] / 1024, mbit_s[keep]]),
                hovertemplate="%{x:.6f} s<br>%{customdata[0]:,.0f} KiB: "
                "%{customdata[1]:,.1f} Mbit/s<extra></extra>",
            ),
        )
    return _layout(
        fig,
        title,
        notes,
        xaxis=axis_title(time_title(origin, t0_ns is not None, "call time")),
        yaxis=axis_title("Mbit/s (bytes of the transaction / its latency)"),
    )


# ---- 3. call→reply time of each WRITE ---------------------------------------------------


def write_latency(
    transactions: pd.DataFrame,
    *,
    t0_ns: int | None = None,
    point_budget: int = POINT_BUDGET,
    origin: str | None = None,
) -> Figure:
    """Call→reply time of each WRITE (first packet of the first call to the
    reply, log scale) vs call time; re-sent WRITEs (n_calls > 1) marked."""
    title = "Call→reply time of each WRITE (from the first packet of the first call)"
    tx = transactions
    w = tx[_is_write(tx) & tx["latency_ns"].notna()].sort_values("t_call_ns", kind="stable")
    if w.empty:
        return _empty(title, "no answered WRITE in the capture")
    t0 = int(t0_ns) if t0_ns is not None else _t0(w["t_call_ns"])
    resent = (w["n_calls"] > 1).to_numpy()
    fig = figure()
    notes: list[str] = []
    for label, mask, marker in (
        ("WRITE", ~resent, {"size": 5, "color": "#1f77b4"}),
        ("WRITE re-sent", resent, {"size": 10, "symbol": "x", "color": "#d62728"}),
    ):
        part = w[mask]
        if part.empty:
            continue
        ms = part["latency_ns"].to_numpy("float64") / 1e6
        keep = thin_indices(ms, point_budget if label == "WRITE" else point_budget // 5)
        if len(keep) < len(ms):
            notes.append(_thinned_note(label, len(keep), len(ms)))
        add_trace(
            fig,
            scatter(
                x=_seconds(part["t_call_ns"].to_numpy("float64")[keep], t0),
                y=ms[keep],
                mode="markers",
                marker=marker,
                name=f"{label} ({len(part):,})",
                customdata=part["n_calls"].to_numpy()[keep],
                hovertemplate="%{x:.6f} s: %{y:.3f} ms, sent %{customdata}×<extra></extra>",
            ),
        )
    return _layout(
        fig,
        title,
        notes,
        xaxis=axis_title(time_title(origin, t0_ns is not None, "call time")),
        yaxis=log_axis(w["latency_ns"].to_numpy("float64") / 1e6, "call→reply (ms, log)"),
    )


# ---- 4. outstanding RPCs ----------------------------------------------------------------


def outstanding_rpcs(
    outstanding: pd.DataFrame,
    *,
    t0_ns: int | None = None,
    point_budget: int = POINT_BUDGET,
    origin: str | None = None,
) -> Figure:
    """RPCs in flight vs time (a step per change; one line per client/server)."""
    title = "Outstanding RPCs (calls sent, reply not yet seen)"
    if outstanding is None or outstanding.empty:
        return _empty(title, "no RPC in flight in the capture")
    t0 = int(t0_ns) if t0_ns is not None else _t0(outstanding["t_ns"])
    groups = _pairs(outstanding)
    fig = figure()
    notes: list[str] = []
    for pair, part in groups:
        part = part.sort_values("t_ns", kind="stable")
        n = part["outstanding"].to_numpy("float64")
        keep = thin_indices(n, max(2, point_budget // len(groups)))
        if len(keep) < len(n):
            notes.append(
                _thinned_note(f"outstanding {_pair_label(pair)}".strip(), len(keep), len(n))
            )
        add_trace(
            fig,
            scatter(
                x=_seconds(part["t_ns"].to_numpy("float64")[keep], t0),
                y=n[keep],
                mode="lines",
                line={"shape": "hv"},
                name=esc(_pair_label(pair) or "RPCs in flight"),
                hovertemplate="%{x:.6f} s: %{y} in flight<extra></extra>",
            ),
        )
    return _layout(
        fig,
        title,
        notes,
        xaxis=axis_title(time_title(origin, t0_ns is not None)),
        yaxis=axis_title("RPCs in flight"),
    )


# ---- 5. latency CDF ---------------------------------------------------------------------


def latency_cdf(transactions: pd.DataFrame, *, point_budget: int = POINT_BUDGET) -> Figure:
    """Distribution of call→reply time per operation (program, version, op)."""
    title = "Latency distribution per operation (first call to reply)"
    tx = transactions[transactions["latency_ns"].notna() & (transactions["n_calls"] > 0)]
    if tx.empty:
        return _empty(title, "no answered call in the capture")
    labels = tx["program"].astype(str) + "v" + tx["vers"].astype(str) + " " + tx["op"].astype(str)
    groups = labels.groupby(labels, sort=False).size().sort_values(ascending=False)
    if len(groups) > MAX_CDF_LINES:  # one colour each: the busiest, the rest together
        rest = groups.index[MAX_CDF_LINES - 1 :]
        other = f"other ({len(rest)} operations)"
        labels = labels.where(~labels.isin(rest), other)
        groups = labels.groupby(labels, sort=False).size()
        groups = pd.concat([groups.drop(other).sort_values(ascending=False), groups[[other]]])
    per_op = max(50, point_budget // len(groups))
    fig = figure()
    notes: list[str] = []
    for label, n in groups.items():
        ms = np.sort(tx.loc[labels == label, "latency_ns"].to_numpy("float64")) / 1e6
        rank = np.arange(1, n + 1) / n
        # a CDF thins exactly by rank: evenly spaced quantiles, ends kept
        keep = np.unique(np.linspace(0, n - 1, min(n, per_op)).round().astype(int))
        if len(keep) < n:
            notes.append(f"{label}: {len(keep):,} of {n:,} quantiles drawn")
        add_trace(
            fig,
            scatter(
                x=np.r_[ms[0], ms[keep]],  # rises from 0 at the fastest call
                y=np.r_[0.0, rank[keep]],
                mode="lines",
                line={"shape": "hv"},
                name=esc(f"{label} ({n:,})"),
                hovertemplate="%{x:.3f} ms: %{y:.1%}<extra></extra>",
            ),
        )
    return _layout(
        fig,
        title,
        notes[:5] + ([f"and {len(notes) - 5} more thinned"] if len(notes) > 5 else []),
        xaxis=log_axis(tx["latency_ns"].to_numpy("float64") / 1e6, "call→reply (ms, log)"),
        yaxis={"title": {"text": "fraction of calls"}, "tickformat": ".0%"},
        legend={"orientation": "v"},
    )


# ---- 6. operation mix vs LADDIS ----------------------------------------------------------


def _as_percent(share: pd.Series) -> np.ndarray:
    """Shares as percent whether the table holds fractions or percents."""
    v = share.astype("float64").fillna(0).to_numpy()
    return v if v.sum() > 1.5 else v * 100


def operation_mix(op_mix: pd.DataFrame) -> Figure:
    """Share of calls per operation category beside the LADDIS reference mix.

    op_mix: category, calls, share, laddis_share (workload.op_mix)."""
    title = "Operation mix vs the LADDIS (SPEC SFS) reference mix"
    if op_mix is None or op_mix.empty:
        return _empty(title, "no operations to compare")
    cats = [esc(c) for c in op_mix["category"]]
    fig = figure(
        bar(
            x=cats,
            y=_as_percent(op_mix["share"]),
            name="this capture",
            customdata=op_mix["calls"].to_numpy(),
            hovertemplate="%{x}: %{y:.1f}% (%{customdata:,} calls)<extra></extra>",
        ),
        bar(
            x=cats,
            y=_as_percent(op_mix["laddis_share"]),
            name="LADDIS",
            hovertemplate="%{x}: %{y:.1f}%<extra></extra>",
        ),
    )
    return _layout(fig, title, [], barmode="group", yaxis=axis_title("% of calls"))


# ---- 7. response time vs throughput ------------------------------------------------------


def response_vs_throughput(
    windows: pd.DataFrame, base_ms: float | None = None, slope: float | None = None
) -> Figure:
    """Mean response time vs throughput (ops/s) per time window, SFS-style,
    with the fitted line mean_latency_ms = base_ms + slope · ops_per_s.

    windows: start_ns, ops_per_s, mbit_s, mean_latency_ms, calls (workload.windows)."""
    title = "Response time vs throughput per time window"
    if windows is None or windows.empty:
        return _empty(title, "too few time windows")
    x = windows["ops_per_s"].to_numpy("float64")
    fig = figure(
        scatter(
            x=x,
            y=windows["mean_latency_ms"].to_numpy("float64"),
            mode="markers",
            name="window",
            customdata=np.column_stack(
                [windows["mbit_s"].to_numpy("float64"), windows["calls"].to_numpy("float64")]
            ),
            hovertemplate="%{x:,.0f} ops/s, %{customdata[0]:,.1f} Mbit/s: %{y:.3f} ms "
            "(%{customdata[1]:,.0f} calls)<extra></extra>",
        )
    )
    if base_ms is not None and slope is not None and np.isfinite([base_ms, slope]).all():
        line_x = np.array([0.0, float(np.nanmax(x)) if len(x) else 1.0])
        if slope != 0:  # a time is never negative: the line stops where it reaches zero
            zero = -base_ms / slope
            lo, hi = (max(0.0, zero), line_x[1]) if slope > 0 else (0.0, min(line_x[1], zero))
            line_x = np.array([lo, hi]) if lo < hi else np.zeros(0)
        line_y = base_ms + slope * line_x
        add_trace(
            fig,
            scatter(
                x=line_x,
                y=line_y,
                mode="lines",
                line={"dash": "dash"},
                name=f"fit: {base_ms:.3f} ms + {slope:.3g} ms per op/s",
            ),
        )
    return _layout(
        fig,
        title,
        [],
        xaxis=axis_title("throughput (operations/s)"),
        yaxis=axis_title("mean response (ms)"),
    )


# ---- 8. the model ------------------------------------------------------------------------


def model_figure(
    terms: Mapping[str, float] | None,
    predictions: pd.DataFrame | None = None,
    what_if: pd.DataFrame | None = None,
) -> Figure:
    """The transactional model: T_cycle split into its terms (µs, stacked),
    predicted vs measured throughput per scenario, and the what-if answers.

    terms: {"2·T_prop", "T_ser", "T_B", "T_op"} -> seconds (model.terms);
    predictions: scenario, predicted_mbit_s, measured_mbit_s, error_pct;
    what_if: change, predicted_mbit_s, dominant."""
    title = "The transactional model: T_cycle = 2·T_prop + T_ser + T_B + T_op"
    notes: list[str] = []
    if terms and not np.isfinite([np.nan if v is None else float(v) for v in terms.values()]).any():
        # no term known: no T_cycle to stack (an empty panel left its axis unplottable)
        notes.append(f"cannot estimate {', '.join(terms)}: T_cycle not drawn")
        terms = None
    panels: list[tuple[str, Any]] = [
        (name, data)
        for name, data in (
            ("T_cycle per block (µs)", terms),
            ("predicted vs measured (Mbit/s)", predictions),
            ("what if (Mbit/s)", what_if),
        )
        if data is not None and len(data)
    ]
    if not panels:
        return _empty(title, "the model could not be fitted on this capture")
    fig = subplots([p[0] for p in panels])
    for col, (name, data) in enumerate(panels, start=1):
        if name.startswith("T_cycle"):
            known = {k: float(v) * 1e6 for k, v in data.items() if v is not None}
            unknown = [k for k, us in known.items() if not np.isfinite(us)]
            if unknown:
                notes.append("cannot estimate " + ", ".join(unknown) + ": left out of T_cycle")
            base = 0.0
            for term, us in known.items():
                if not np.isfinite(us):
                    continue
                add_trace(
                    fig,
                    bar(
                        x=["T_cycle"],
                        y=[us],
                        base=[base],
                        offsetgroup="T_cycle",  # one column, stacked by hand via base
                        name=esc(term),
                        text=[f"{esc(term)} {us:,.1f} µs"],
                        textposition="inside",
                        hovertemplate=f"{esc(term)}: {us:,.2f} µs<extra></extra>",
                    ),
                    row=1,
                    col=col,
                )
                base += us
            add_annotation(
                fig,
                x="T_cycle",
                y=base,
                text=f"{base:,.1f} µs" + (" (incomplete)" if unknown else ""),
                showarrow=False,
                yanchor="bottom",
                row=1,
                col=col,
            )
        elif name.startswith("predicted"):
            scen = [esc(s) for s in data["scenario"]]
            for column, label in (
                ("predicted_mbit_s", "predicted"),
                ("measured_mbit_s", "measured"),
            ):
                add_trace(
                    fig,
                    bar(
                        x=scen,
                        y=data[column].to_numpy(dtype="float64"),
                        name=label,
                        hovertemplate="%{x}: %{y:,.2f} Mbit/s<extra>" + label + "</extra>",
                    ),
                    row=1,
                    col=col,
                )
        else:
            add_trace(
                fig,
                bar(
                    x=[esc(c) for c in data["change"]],
                    y=data["predicted_mbit_s"].to_numpy(dtype="float64"),
                    name="what if",
                    text=[esc(f"dominant: {d}") for d in data["dominant"]],
                    textposition="auto",
                    hovertemplate="%{x}: %{y:,.2f} Mbit/s<extra></extra>",
                ),
                row=1,
                col=col,
            )
    below = {"orientation": "h", "x": 0, "xanchor": "left", "y": -0.12, "yanchor": "top"}
    return _layout(
        fig,
        title,
        notes,
        barmode="group",
        height=HEIGHT + 60,
        legend=below,  # above, it would cover the panel titles
        margin={"l": 70, "r": 30, "t": 90, "b": 90},
    )


# ---- 9. the time budget ------------------------------------------------------------------


def time_budget(pairs: pd.DataFrame) -> Figure:
    """Where each client→server pair's write activity went: one horizontal bar
    per pair (the busiest on top), one segment per cause that took time, in
    ``CAUSES`` order and ``CAUSE_COLOURS``; a segment's length is the cause's
    seconds (hover: the cause, its seconds, its share of the pair's elapsed time).

    pairs: client, server, elapsed_ns, mbit_s and ``<cause>_ns`` per cause
    (``budget.pairs``, ``nfstrace.analysis.budget.PAIR_COLUMNS``).  Above
    ``MAX_BUDGET_PAIRS`` pairs the ones with the longest write activity are
    drawn, and the title says how many were left out."""
    title = "Time budget: the write activity of each client/server pair, split by cause"
    if pairs is None or pairs.empty:
        return _empty(title, "no WRITE activity in the capture: no time budget")
    notes: list[str] = []
    shown = pairs.sort_values("elapsed_ns", ascending=False, kind="stable")
    if len(shown) > MAX_BUDGET_PAIRS:
        notes.append(
            f"the {MAX_BUDGET_PAIRS} pairs with the longest write activity drawn; "
            f"{len(shown) - MAX_BUDGET_PAIRS:,} of {len(shown):,} pairs left out"
        )
        shown = shown.head(MAX_BUDGET_PAIRS)
    labels = [
        esc(_pair_label((str(c), str(s))))
        for c, s in zip(shown["client"], shown["server"], strict=True)
    ]
    elapsed = shown["elapsed_ns"].to_numpy(dtype="float64")
    fig = figure()
    for cause in CAUSES:
        column = f"{cause}_ns"
        if column not in shown:
            continue
        ns = shown[column].fillna(0).to_numpy(dtype="float64")
        if not (ns > 0).any():
            continue
        share = np.divide(ns, elapsed, out=np.zeros(len(ns)), where=elapsed > 0)
        add_trace(
            fig,
            bar(
                x=np.where(ns > 0, ns / 1e9, np.nan),  # no segment where the cause took none
                y=labels,
                orientation="h",
                name=cause,
                marker={"color": CAUSE_COLOURS[cause], "line": {"width": 0}},
                customdata=share,
                hovertemplate="%{y}<br>" + cause + ": %{x:.6f} s, "
                "%{customdata:.1%} of the pair's elapsed time<extra></extra>",
            ),
        )
    rates = shown["mbit_s"] if "mbit_s" in shown else pd.Series(np.nan, index=shown.index)
    for label, seconds, rate in zip(
        labels, elapsed / 1e9, rates.to_numpy(dtype="float64"), strict=True
    ):
        add_annotation(
            fig,
            x=seconds,
            y=label,
            text=f"{seconds:,.3f} s" + (f", {rate:,.1f} Mbit/s" if np.isfinite(rate) else ""),
            showarrow=False,
            xanchor="left",
            font={"size": 10},
        )
    return _layout(
        fig,
        title,
        notes,
        barmode="stack",
        height=max(HEIGHT - 120, 170 + 34 * len(labels)),
        xaxis={
            "title": {"text": "seconds of write activity (first WRITE call to last reply)"},
            "range": [0, 1.25 * float(elapsed.max()) / 1e9 or 1.0],  # room for the totals
        },
        yaxis={"autorange": "reversed", "automargin": True, "type": "category"},
        legend={**_LEGEND_ABOVE, "traceorder": "normal"},  # causes in CAUSES order
    )
