"""Two traces side by side: what a change (a fix, a tuning, another client)
did to the writes.  ``compare(before, after)`` is a pure function of two
``Trace`` objects; the reports render its tables.

Pairs are matched by client and server address; when each capture has exactly
one client/server pair with writes, those two are compared even if their
addresses differ (the same copy re-run from another host).  Operations are
matched by program, version and operation.

Tables (columns documented in ``PAIR_COLUMNS`` and ``OPERATION_COLUMNS``):
``pairs`` one row per matched pair, ``operations`` one row per operation seen
in either capture; ``changes`` the differences that matter, in words, the
largest first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from nfstrace.analysis.budget import CAUSES
from nfstrace.analysis.overview import Throughput, write_activity
from nfstrace.jsonable import json_field
from nfstrace.trace import Trace

PAIR_COLUMNS: dict[str, str] = {
    "client": "str: client address (before; after when it differs: 'a / b')",
    "server": "str: server address (likewise)",
    "elapsed_s_before": "float: seconds of write activity before",
    "elapsed_s_after": "float: ... after",
    "mbit_s_before": "float: write throughput of the pair before (10^6 bit/s)",
    "mbit_s_after": "float: ... after",
    "speedup": "float: mbit_s_after / mbit_s_before",
    "primary_before": "str: the pair's verdict before (a cause, bandwidth or none)",
    "primary_after": "str: ... after",
    **{f"{c}_share_before": f"float: share of the elapsed time to {c}, before" for c in CAUSES},
    **{f"{c}_share_after": f"float: ... after ({c})" for c in CAUSES},
}
OPERATION_COLUMNS: dict[str, str] = {
    "program": "str: RPC program name",
    "vers": "int: program version",
    "op": "str: operation",
    "calls_before": "int: calls before (0: none)",
    "calls_after": "int: calls after",
    "p50_ms_before": "float: median latency before (NaN: no answered call)",
    "p50_ms_after": "float: ... after",
    "p99_ms_before": "float: 99th percentile before",
    "p99_ms_after": "float: ... after",
    "p50_change": "float: p50_ms_after / p50_ms_before - 1",
    "errors_before": "int: error replies before",
    "errors_after": "int: ... after",
}
# A change worth saying: throughput or a median latency moving by this factor,
# a cause's share moving by this many points.
NOTABLE_FACTOR = 1.1
NOTABLE_SHARE = 0.05
MAX_OPERATIONS = 3  # operations whose change is said in words: the busiest


def side_summary(t: Trace) -> dict[str, Any]:
    """What the JSON gives of one side: its captures, verdict and write rate."""
    return {"paths": list(t.paths), "verdict": t.diagnosis.verdict, "write_mbit_s": write_rate(t)}


@dataclass(frozen=True)
class Comparison:
    before: Trace = field(metadata=json_field(convert=side_summary))
    after: Trace = field(metadata=json_field(convert=side_summary))
    changes: list[str]
    pairs: pd.DataFrame
    operations: pd.DataFrame


def compare(before: Trace, after: Trace) -> Comparison:
    pairs = _pairs(before, after)
    operations = _operations(before, after)
    changes = _changes(before, after, pairs, operations)
    return Comparison(before, after, changes=changes, pairs=pairs, operations=operations)


def _pair_rows(t: Trace) -> pd.DataFrame:
    budget = t.diagnosis.budget
    if budget is None or budget.pairs.empty:
        return pd.DataFrame(columns=["client", "server", "elapsed_s", "mbit_s", "primary"])
    p = budget.pairs
    verdicts = {(v.client, v.server): v.primary for v in t.diagnosis.verdict.pairs}
    elapsed = p["elapsed_ns"].to_numpy("float64")
    out = pd.DataFrame(
        {
            "client": p["client"].astype(str).to_numpy(),
            "server": p["server"].astype(str).to_numpy(),
            "elapsed_s": elapsed / 1e9,
            "mbit_s": p["mbit_s"].to_numpy("float64"),
        }
    )
    out["primary"] = [verdicts.get((c, s), "") for c, s in zip(out.client, out.server, strict=True)]
    with np.errstate(divide="ignore", invalid="ignore"):
        for c in CAUSES:
            out[f"{c}_share"] = np.where(elapsed > 0, p[f"{c}_ns"].to_numpy("float64") / elapsed, 0)
    return out


def _pairs(before: Trace, after: Trace) -> pd.DataFrame:
    b, a = _pair_rows(before), _pair_rows(after)
    if len(b) == 1 and len(a) == 1 and (b.client[0], b.server[0]) != (a.client[0], a.server[0]):
        joined = pd.concat(
            [b.add_suffix("_before"), a.add_suffix("_after")], axis=1
        )  # one pair each: the same copy, another host
        joined["client"] = f"{b.client[0]} / {a.client[0]}"
        joined["server"] = f"{b.server[0]} / {a.server[0]}"
    else:
        joined = b.merge(a, on=["client", "server"], how="outer", suffixes=("_before", "_after"))
    joined["speedup"] = joined["mbit_s_after"] / joined["mbit_s_before"]
    for column in PAIR_COLUMNS:
        if column not in joined:
            joined[column] = np.nan
    return joined[list(PAIR_COLUMNS)].sort_values(
        "elapsed_s_before", ascending=False, na_position="last", ignore_index=True
    )


def _operations(before: Trace, after: Trace) -> pd.DataFrame:
    keep = ["program", "vers", "op", "calls", "p50_ms", "p99_ms", "errors"]
    b = before.latency[keep].astype({"program": str, "op": str})
    a = after.latency[keep].astype({"program": str, "op": str})
    out = b.merge(a, on=["program", "vers", "op"], how="outer", suffixes=("_before", "_after"))
    for column in ("calls_before", "calls_after", "errors_before", "errors_after"):
        out[column] = out[column].fillna(0).astype("int64")
    for column in ("p50_ms_before", "p50_ms_after", "p99_ms_before", "p99_ms_after"):
        out[column] = out[column].astype("float64")
    out["p50_change"] = out["p50_ms_after"] / out["p50_ms_before"] - 1
    busiest = np.maximum(out["calls_before"], out["calls_after"])
    out = out.iloc[np.argsort(-busiest.to_numpy(), kind="stable")].reset_index(drop=True)
    return out[list(OPERATION_COLUMNS)]


def write_rate(t: Trace) -> float:
    """Mbit/s of the writes as the verdict states it (``overview.write_activity``:
    bytes acknowledged over the time budget's write activity, all pairs); NaN
    without WRITE activity."""
    budget = t.diagnosis.budget
    w: Throughput | None = write_activity(budget.pairs if budget is not None else None)
    return w.mbits_per_s if w is not None else float("nan")


def _changes(
    before: Trace, after: Trace, pairs: pd.DataFrame, operations: pd.DataFrame
) -> list[str]:
    """The differences that matter, in words: throughput, the verdict, the causes
    whose share moved, the operations whose median moved (the busiest first)."""
    out: list[str] = []
    b, a = write_rate(before), write_rate(after)
    if np.isfinite(b) and np.isfinite(a) and b > 0:
        ratio = a / b
        how = (
            f"{ratio:.2f}x faster" if ratio >= NOTABLE_FACTOR
            else f"{1 / ratio:.2f}x slower" if ratio <= 1 / NOTABLE_FACTOR
            else "about as fast"
        )  # fmt: skip
        out.append(f"Writes ran {how}: {b:,.1f} → {a:,.1f} Mbit/s")
    vb, va = before.diagnosis.verdict, after.diagnosis.verdict
    if vb is not None and va is not None:
        if vb.primary != va.primary:
            out.append(f"The verdict changed: {vb.primary} → {va.primary} ({va.text})")
        else:
            out.append(f"The verdict is still {va.primary}: {va.text}")
    for r in pairs.itertuples(index=False):
        label = f"{r.client} → {r.server}"
        moved = []
        for c in CAUSES:
            sb, sa = getattr(r, f"{c}_share_before"), getattr(r, f"{c}_share_after")
            if pd.notna(sb) and pd.notna(sa) and abs(sa - sb) >= NOTABLE_SHARE:
                moved.append((abs(sa - sb), f"{c.replace('_', ' ')} {sb:.0%} → {sa:.0%}"))
        if moved:
            text = ", ".join(t for _, t in sorted(moved, key=lambda x: -x[0]))
            out.append(f"{label}: {text} of the write time")
        elif pd.isna(r.elapsed_s_before) or pd.isna(r.elapsed_s_after):
            when = "after" if pd.isna(r.elapsed_s_before) else "before"
            out.append(f"{label}: writes only {when}")
    said = 0
    for r in operations.itertuples(index=False):  # the busiest first
        if pd.isna(r.p50_change) or said >= MAX_OPERATIONS:
            continue
        if r.p50_ms_before > 0 and r.p50_ms_after > 0:
            factor = r.p50_ms_after / r.p50_ms_before
            if factor >= NOTABLE_FACTOR or factor <= 1 / NOTABLE_FACTOR:
                said += 1
                name = r.op if r.program == "nfs" else f"{r.program} {r.op}"
                out.append(
                    f"{name} median {r.p50_ms_before:,.3f} → {r.p50_ms_after:,.3f} ms "
                    f"({speed_words(factor)}; {r.calls_before:,} → {r.calls_after:,} calls)"
                )
    return out


def speed_words(factor: float) -> str:
    """A time's after/before ratio in words: '5.9x faster', '1.3x slower'."""
    if round(factor, 2) == 1:
        return "unchanged"
    return f"{1 / factor:.1f}x faster" if factor < 1 else f"{factor:.1f}x slower"
