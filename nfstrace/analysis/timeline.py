"""The timeline: what happened when, in one table for the reader (the report's
events section, the JSON summary): stalls, RPC calls re-sent, error replies,
write verifier changes and every transport event the parser recorded, each
with its client, server, duration and a description."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from nfstrace.analysis.latency import error_mask, status_name
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


def _event_words(part: pd.DataFrame, rows: np.ndarray) -> list[str]:
    """A parser event's words in the timeline: its endpoints, sequence and length."""
    columns = (part[c].iloc[rows] for c in ("src", "sport", "dst", "dport", "seq", "length"))
    return [
        f"{s}:{sp} → {d}:{dp} seq {q} ({n:,} bytes)"
        for s, sp, d, dp, q, n in zip(*columns, strict=True)
    ]


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
    frames: list[pd.DataFrame] = []
    notes: list[str] = []

    def add(
        kind: str,
        t_ns: pd.Series,
        dur_ns: Any,
        client: Any,
        server: Any,
        what: Callable[[np.ndarray], Iterable[object]],
    ) -> None:
        """``what(rows)``: the descriptions of the rows kept (positions): the rows
        are chosen first, so only the shown ones are worded (not 100,000 handshakes)."""
        part = pd.DataFrame(
            {
                "t_ns": pd.Series(t_ns).astype("int64").to_numpy(),
                "kind": kind,
                "duration_ms": pd.Series(dur_ns, index=t_ns.index).astype("Float64").to_numpy()
                / 1e6,
            }
        )
        rows = np.arange(len(part))
        if len(part) > max_per_kind:
            notes.append(f"{kind}: {max_per_kind:,} of {len(part):,} shown")
            order = part["duration_ms"].fillna(0).to_numpy()
            rows = np.sort(np.argsort(-order, kind="stable")[:max_per_kind])
            part = part.iloc[rows]
        for name, values in (("client", client), ("server", server)):
            part[name] = pd.Series(values, index=t_ns.index).iloc[rows].astype(object).to_numpy()
        part["what"] = pd.Series(list(what(rows)), dtype=object).to_numpy()
        frames.append(part)

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
    errs = tx[error_mask(tx) & (tx["n_calls"] > 0)]
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
        for kind, part in ev.groupby(ev["kind"].astype(str), sort=True):
            add(
                kind,  # the parser's name: tcp_window_full, ip_datagram_incomplete, ...
                part["ts_ns"],
                None,
                part["src"],
                part["dst"],
                functools.partial(_event_words, part),
            )
    if not frames:
        return Timeline(pd.DataFrame(columns=list(TIMELINE_COLUMNS)), [])
    table = pd.concat(frames, ignore_index=True).sort_values("t_ns", kind="stable")
    return Timeline(table.reset_index(drop=True), notes)
