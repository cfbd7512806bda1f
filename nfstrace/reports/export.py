"""Machine-readable exports: the JSON summary and the transactions table as
CSV or Parquet."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from nfstrace.analysis.overview import write_activity
from nfstrace.comparison import Comparison
from nfstrace.jsonable import jsonable
from nfstrace.match import columns_from
from nfstrace.nfs_fields import NFS_FIELDS
from nfstrace.reports.files import write_atomically
from nfstrace.text import CONTROL, printable
from nfstrace.trace import Trace

SUMMARY_FORMAT = 1  # bump when the JSON summary changes incompatibly


def _version() -> str:
    """The version (``nfstrace.version``) stamped on the files written."""
    from nfstrace.version import __version__

    return __version__


DIAGNOSIS_PARTS = (
    "quality",
    "repeats",
    "fragments",
    "transport",
    "writes",
    "stalls",
    "pace",
    "model",
    "workload",
    "mounts",  # the kernel's figures per mount and operation, mountstats beside them
)


def diagnosis_summary(trace: Trace) -> dict:
    """The verdict, the ranked findings, the time budget, then each module's
    result and findings (``notes``), and the timeline: the objects, in the
    order the JSON gives them (``jsonable`` makes the JSON of each)."""
    d = trace.diagnosis
    out: dict = {"verdict": d.verdict, "findings": d.findings, "budget": d.budget, "notes": d.notes}
    out.update((part, getattr(d, part)) for part in DIAGNOSIS_PARTS)
    out["timeline"] = d.timeline  # what happened when (analysis.timeline.TIMELINE_COLUMNS)
    return out


def summary(trace: Trace) -> dict:
    """The JSON summary (``--json``), as data ``json.dumps`` writes."""
    st = trace.stats
    data = jsonable(
        {
            "format": SUMMARY_FORMAT,
            "nfstrace_version": _version(),
            "captures": [
                {
                    "path": f.path,
                    "format": f.format,
                    "compression": f.compression,
                    "frames": f.frames,
                    "linktypes": sorted(f.linktypes),
                    "snaplen": f.snaplen,
                    "truncated_frames": f.truncated_frames,
                    "interface_drops": f.interface_drops,
                    "warnings": f.warnings,
                    "damage": {
                        kind: {
                            "count": d.count,
                            "first_at_byte": d.offset,
                            "bytes_skipped": d.skipped,
                        }
                        for kind, d in f.damage.items()
                    },
                }
                for f in st.files
            ],
            # the write throughput the verdict states: bytes over the write activity
            # (overview.write_activity; its span says what the seconds measure)
            "write_throughput": write_activity(trace.diagnosis.budget.pairs),
            "overview": trace.overview,
            "diagnosis": diagnosis_summary(trace),
            "latency": trace.latency,
            "latency_by_pair": trace.latency_by_pair,
            "compound_latency": trace.compound_latency,
            "parse": {
                "frames": st.frames,
                "ip_fragments": st.ip_fragments,
                "ip_datagrams_reassembled": st.ip_datagrams_reassembled,
                "ip_datagrams_incomplete": st.ip_datagrams_incomplete,
                "tcp": st.tcp,
                "messages": st.messages,
                "truncated_messages": st.truncated_messages,
                "incomplete_messages": st.incomplete_messages,
                "not_rpc_records": st.not_rpc_records,
                "headerless_messages": st.headerless_messages,
                "anomalies": st.anomalies,
            },
            # every warning printed on stderr (capture damage, limits hit)
            "warnings": st.warnings,
        }
    )
    assert isinstance(data, dict)
    return data


def write_json(trace: Trace, path: Path) -> None:
    text = json.dumps(summary(trace), indent=1, allow_nan=False) + "\n"
    write_atomically(path, lambda temp: temp.write_text(text, encoding="utf-8"))


# The transaction columns of NFS fields whose parser default (-1) says "not in
# this message" (the status of a portmap or MOUNT reply, the offset of a
# reply without its call): empty in the CSV and null in Parquet, as every other
# unknown there.
NOT_GIVEN = tuple(
    column
    for field, (_dtype, default, _meaning) in NFS_FIELDS.items()
    if default == -1
    for column in columns_from(field)
)


def _flat(tx: pd.DataFrame) -> pd.DataFrame:
    """The transactions for a flat file: tuples of send times as space-separated
    text (CSV has no lists), the xid also in hex (``xid_hex``, as the terminal,
    the report and Wireshark show it), the fields' "not given" -1 as empty."""
    out = tx.copy()
    out["call_times_ns"] = [
        " ".join(map(str, v)) if isinstance(v, tuple) else "" for v in tx["call_times_ns"]
    ]
    out.insert(
        out.columns.get_loc("xid") + 1,
        "xid_hex",
        pd.array([f"{x:#010x}" for x in tx["xid"].to_numpy("int64")], dtype="string"),
    )
    for column in NOT_GIVEN:
        if column in out:
            out[column] = out[column].mask(out[column].eq(-1).fillna(False))
    return out


# A spreadsheet runs a cell starting with one of these as a formula (OWASP's CSV
# injection): such text gets a leading single quote in the CSV.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(table: pd.DataFrame) -> pd.DataFrame:
    """Text cells a spreadsheet would not run or mangle: formula prefixes quoted,
    control characters (ESC, NUL, BEL, newlines ...) as \\xNN.  For CSV only: JSON
    and Parquet keep the text exact (a file name is whatever bytes the client sent)."""
    out = table
    for column in table.columns:
        values = table[column]
        if isinstance(values.dtype, pd.CategoricalDtype):
            if not _risky(pd.Series(values.cat.categories, dtype="string")).any():
                continue  # (each distinct value checked once)
        elif not (pd.api.types.is_string_dtype(values.dtype) or values.dtype == object):
            continue
        text = values.astype("string")
        risky = _risky(text)
        if not risky.any():
            continue
        fixed = text[risky].map(
            lambda v: ("'" if v.startswith(FORMULA_STARTS) else "") + printable(v)
        )
        if out is table:
            out = table.copy()
        out[column] = text.mask(risky, fixed)
    return out


def _risky(text: pd.Series) -> pd.Series:
    return (text.str.startswith(FORMULA_STARTS) | text.str.contains(CONTROL)).fillna(False)


def write_csv(trace: Trace, path: Path) -> None:
    table = spreadsheet_safe(_flat(trace.transactions))
    write_atomically(path, lambda temp: table.to_csv(temp, index=False))


def write_parquet(trace: Trace, path: Path) -> None:
    table = _flat(trace.transactions)
    write_atomically(path, lambda temp: table.to_parquet(temp, index=False))


def write_model_json(trace: Trace, path: Path) -> None:
    """``nfstrace model --json``: the model's parameters, predictions and what-ifs."""
    model = trace.diagnosis.model
    body = {"format": SUMMARY_FORMAT, "nfstrace_version": _version(), "model": model}
    text = json.dumps(jsonable(body), indent=1, allow_nan=False) + "\n"
    write_atomically(path, lambda temp: temp.write_text(text, encoding="utf-8"))


def write_comparison_json(cmp: Comparison, path: Path) -> None:
    """``nfstrace compare --json``: both verdicts, the changes in words, the
    pairs and operations tables (``nfstrace.comparison``)."""
    data = {"format": SUMMARY_FORMAT, "nfstrace_version": _version(), **jsonable(cmp)}
    text = json.dumps(data, indent=1, allow_nan=False) + "\n"
    write_atomically(path, lambda temp: temp.write_text(text, encoding="utf-8"))
