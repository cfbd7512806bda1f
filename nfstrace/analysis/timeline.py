"""The timeline: what happened when, in one table for the reader (the report's
events section, the JSON summary): stalls, RPC calls re-sent, error replies,
write verifier changes and every transport event the parser recorded, each
with its client, server, duration and a description."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from nfstrace.analysis.latency import error_mask, status_name
from nfstrace.combining import string_codes
from nfstrace.jsonable import json_field

# Rows of one kind in the timeline: past it the longest are kept.
MAX_PER_KIND = 200
TIMELINE_COLUMNS = {
    "t_ns": "when (ns since the epoch; a stretch or stall: its start)",
    "kind": "stall / RPC re-sent / error reply / write verifier changed / a parser event kind",
    "duration_ms": "how long it lasted (stalls, waits; empty for instants)",
    "client": "client address (the sender, for transport events)",
    "server": "server address (the receiver, for transport events)",
    "what": "a description",
}


@dataclass(frozen=True)
class Timeline:
    """table: one row per event (TIMELINE_COLUMNS), in time order; notes: the
    kinds cut to MAX_PER_KIND rows.  The report's events section draws it and
    the JSON summary holds it (diagnosis.timeline)."""

    table: pd.DataFrame = field(metadata=json_field(key="events"))
    notes: list[str]


def _status_name(vers: Any, status: Any) -> str:
    if pd.isna(status):
        return ""
    return status_name(int(status), 0 if pd.isna(vers) else int(vers))


def _event_words(columns: dict[str, np.ndarray], rows: np.ndarray) -> list[str]:
    """A parser event's words in the timeline: its endpoints, sequence and length
    (``columns``: the events' columns of one kind, as arrays)."""
    picked = (columns[c][rows].tolist() for c in ("src", "sport", "dst", "dport", "seq", "length"))
    return [
        f"{s}:{sp} → {d}:{dp} seq {q} ({n:,} bytes)"
        for s, sp, d, dp, q, n in zip(*picked, strict=True)
    ]


def _rows_by_kind(kind: pd.Series) -> Iterator[tuple[str, np.ndarray]]:
    """Each kind's name and its rows (positions), the kinds in their names'
    order: a category column's codes compared (not a string per row made and
    compared, as ``np.unique(kind.astype(str))`` did: 0.1 GB at 10M packets)."""
    if (
        isinstance(kind.dtype, pd.CategoricalDtype)
        and pd.api.types.is_string_dtype(kind.cat.categories.dtype)
        and kind.notna().all()
    ):
        codes = kind.cat.codes.to_numpy()
        present = np.flatnonzero(np.bincount(codes, minlength=len(kind.cat.categories)))
        names = np.asarray(kind.cat.categories, dtype=object)[present]
        for at in np.argsort(names, kind="stable"):
            yield str(names[at]), np.flatnonzero(codes == present[at])
        return
    kinds = kind.astype(str).to_numpy()
    for name in np.unique(kinds).tolist():
        yield name, np.flatnonzero(kinds == name)


def _column_reader(column: pd.Series, objects: bool) -> Callable[[np.ndarray], np.ndarray]:
    """``lambda at: column.take(at).to_numpy(dtype=object if objects else None)``
    for a column read at many positions (a kind's rows at a time): a numpy column
    indexed as it is, a category column of strings by its codes and categories
    (missing NaN), without a Series made per read."""
    dtype = column.dtype
    if isinstance(dtype, np.dtype) and dtype.kind != "O" and not objects:
        values = column.to_numpy()
        return lambda at: values[at]
    by_codes = string_codes(column, missing=np.nan) if objects else None
    if by_codes is not None:
        names, codes = by_codes
        return lambda at: names[codes[at]]
    return lambda at: column.take(at).to_numpy(dtype=object if objects else None)


# The transactions' columns an error reply's row is made of.
_ERROR_COLUMNS = ("t_call_ns", "latency_ns", "client", "server", "op", "vers", "status",
                  "reply_stat", "accept_stat", "name")  # fmt: skip


def timeline(
    transactions: pd.DataFrame,
    events: pd.DataFrame,
    stalls: pd.DataFrame | None,
    retransmissions: pd.DataFrame,
    verifier_changes: pd.DataFrame | None,
    max_per_kind: int = MAX_PER_KIND,
) -> Timeline:
    """Stalls, re-sent calls, verifier changes, error replies and the parser's
    transport events in one time-ordered table; of a kind with more than
    ``max_per_kind`` rows, the longest are kept (in time order) and a note says so."""
    tx = transactions
    # the rows kept of each kind, column by column: one table is made at the end
    parts: dict[str, list[np.ndarray]] = {c: [] for c in TIMELINE_COLUMNS}
    notes: list[str] = []

    def add(
        kind: str,
        t_ns: pd.Series,
        dur_ns: Any,
        client: Any,
        server: Any,
        what: Callable[[np.ndarray], Iterable[object]],
        total: int | None = None,
    ) -> None:
        """``what(rows)``: the descriptions of the rows kept (positions): the rows
        are chosen first, so only the shown ones are worded (not 100,000 handshakes).
        ``total``: of instants given only their first rows, how many there are."""
        t = np.asarray(t_ns, dtype="int64")
        total = len(t) if total is None else total
        if dur_ns is None:  # (instants: NaN each, and the first rows the longest)
            duration = np.full(len(t), np.nan)
            rows = np.arange(min(len(t), max_per_kind))
        else:
            duration = pd.Series(dur_ns, index=t_ns.index).astype("Float64").to_numpy() / 1e6
            rows = np.arange(len(t))
            if len(t) > max_per_kind:
                order = np.nan_to_num(duration.astype("float64"), nan=0.0)
                rows = np.sort(np.argsort(-order, kind="stable")[:max_per_kind])
        if total > max_per_kind:
            notes.append(f"{kind}: {max_per_kind:,} of {total:,} shown")
        parts["t_ns"].append(t[rows])
        parts["kind"].append(np.full(len(rows), kind, dtype=object))
        parts["duration_ms"].append(duration[rows])
        for name, values in (("client", client), ("server", server)):
            # the rows kept, then as objects (not every row's)
            if isinstance(values, pd.Series):
                parts[name].append(values.take(rows).to_numpy(dtype=object))
            elif isinstance(values, np.ndarray) and values.dtype == object:
                parts[name].append(values[rows])
            else:  # (None: a column the table lacks)
                values = pd.Series(values, index=t_ns.index)
                parts[name].append(values.to_numpy(dtype=object)[rows])
        parts["what"].append(np.array(list(what(rows)) + [None], dtype=object)[:-1])

    if stalls is not None and len(stalls):
        s = stalls
        add(
            "stall",
            s["start_ns"],
            s["duration_ns"],
            s.get("client"),
            s.get("server"),
            lambda rows: (s["cause"].astype(str) + ": " + s["detail"].astype(str)).iloc[rows],
        )
    r = retransmissions
    if len(r):
        add(
            "RPC re-sent",
            r["t_call_ns"],
            r.get("latency_ns"),
            r["client"],
            r["server"],
            lambda rows: [
                f"{op} xid 0x{int(xid):08x} sent {int(n)}×"
                for op, xid, n in zip(
                    r["op"].iloc[rows], r["xid"].iloc[rows], r["n_calls"].iloc[rows], strict=True
                )
            ],
        )
    v = verifier_changes
    if v is not None and len(v):
        add(
            "write verifier changed",
            v["t_ns"],
            None,
            v["client"],
            v["server"],
            lambda rows: [
                f"{old} → {new}: {int(b):,} bytes uncommitted (must be re-sent)"
                for old, new, b in zip(
                    v["old"].iloc[rows],
                    v["new"].iloc[rows],
                    v["uncommitted_bytes"].iloc[rows],
                    strict=True,
                )
            ],
        )
    # the error replies' rows of the columns worded (a selection of every column
    # copied 0.25 GB of a 10M-packet capture's transactions at the analysis' peak)
    errs = tx[list(_ERROR_COLUMNS)][error_mask(tx) & (tx["n_calls"] > 0)]
    if len(errs):
        add(
            "error reply",
            errs["t_call_ns"],
            errs["latency_ns"],
            errs["client"],
            errs["server"],
            lambda rows: [
                " ".join(
                    str(x)
                    for x in (op, _status_name(vers, st) or f"RPC {rs} {acc}", name)
                    if x is not None and not pd.isna(x) and str(x)
                )
                for op, vers, st, rs, acc, name in zip(
                    *(
                        errs[c].iloc[rows]
                        for c in ("op", "vers", "status", "reply_stat", "accept_stat", "name")
                    ),
                    strict=True,
                )
            ],
        )
    ev = events
    if len(ev):
        used = ("ts_ns", "src", "sport", "dst", "dport", "seq", "length")
        readers = {c: _column_reader(ev[c], c in ("src", "dst")) for c in used}
        for kind, at in _rows_by_kind(ev["kind"]):  # in the order of the kinds' names
            # the kind's rows of each column (addresses as objects): not every row's,
            # and of these instants only the first rows, the ones shown (not 74,000
            # round trips' endpoints for 200 of them)
            part = {c: read(at[:max_per_kind]) for c, read in readers.items()}
            add(
                kind,  # the parser's name: tcp_window_full, ip_datagram_incomplete, ...
                pd.Series(part["ts_ns"]),
                None,
                part["src"],
                part["dst"],
                functools.partial(_event_words, part),
                total=len(at),
            )
    if not parts["t_ns"]:
        return Timeline(pd.DataFrame(columns=list(TIMELINE_COLUMNS)), [])
    columns = {c: np.concatenate(arrays) for c, arrays in parts.items()}
    order = np.argsort(columns["t_ns"], kind="stable")
    table = pd.DataFrame({c: a[order] for c, a in columns.items()})
    return Timeline(table, notes)
