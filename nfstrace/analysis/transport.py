"""Transport health linked to RPCs: per connection the TCP retransmissions,
holes, zero-window and window-full stretches, and for each event or stretch
the RPCs it may have delayed.

An event (an instant) or stretch ([ts_ns, ts_ns + duration_ns]) is linked to
every RPC between the same two hosts (either direction) whose
[t_call_ns, t_reply_ns] interval overlaps it; an RPC never answered spans
[t_call_ns, t_call_last_end_ns].  Linking is by host pair rather than by
connection: a stall on one connection delays calls re-sent on the next.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from nfstrace.analysis.findings import Finding

# events.kind values this module reports
TRANSPORT_KINDS = ("tcp_retransmission", "tcp_hole", "tcp_zero_window", "tcp_window_full")

EVENT_LINK_COLUMNS: dict[str, str] = {
    "ts_ns": "event time / stretch start",
    "duration_ns": "stretch length (0: an instant)",
    "frame": "frame of the event / of the stretch's start",
    "conn": "connection id",
    "src": "sender of the packet(s) concerned",
    "sport": "its port",
    "dst": "receiver",
    "dport": "its port",
    "kind": "tcp_retransmission / tcp_hole / tcp_zero_window / tcp_window_full",
    "length": "bytes concerned (window-full: the window)",
    "rpcs": "RPCs between the two hosts in progress during it",
    "rpc_latency_ns": "their latencies summed",
    "rpc_ops": "their operations, with counts (e.g. 'WRITE x3')",
}

CONNECTION_COLUMNS: dict[str, str] = {
    "conn": "connection id",
    "host_a": "one end (the lower address)",
    "host_b": "the other end",
    "retransmissions": "TCP segments re-sent (same bytes)",
    "retransmitted_bytes": "bytes they carried",
    "holes": "byte ranges never captured",
    "hole_bytes": "bytes in them",
    "zero_windows": "zero-window stretches",
    "zero_window_ns": "their total length",
    "window_full": "window-full stretches",
    "window_full_ns": "their total length",
    "rpcs_delayed": "distinct RPCs overlapping any of these",
    "delayed_latency_ns": "their latencies summed",
}


@dataclass(frozen=True)
class TransportResult:
    events: pd.DataFrame  # EVENT_LINK_COLUMNS
    connections: pd.DataFrame  # CONNECTION_COLUMNS, connections with any event
    retransmissions: int
    retransmitted_bytes: int
    holes: int
    hole_bytes: int
    zero_windows: int
    zero_window_ns: int
    window_full: int
    window_full_ns: int
    rpcs_in_zero_window: int  # distinct RPCs overlapping a zero-window stretch
    rpcs_in_window_full: int  # distinct RPCs overlapping a window-full stretch

    def findings(self) -> list[Finding]:
        out: list[Finding] = []
        ev = self.events
        if self.zero_windows:
            zw = ev[ev["kind"] == "tcp_zero_window"]
            who = ", ".join(sorted(zw["src"].astype(str).unique()))
            out.append(
                Finding(
                    kind="tcp_zero_window",
                    title=f"{who} advertised a zero TCP window {self.zero_windows} times for "
                    f"{self.zero_window_ns / 1e9:.3f} s in all, delaying "
                    f"{self.rpcs_in_zero_window} RPCs: its peer could send nothing",
                    severity="problem",
                    time_lost_ns=self.zero_window_ns,
                    details={"stretches": self.zero_windows, "total_ns": self.zero_window_ns},
                )
            )
        if self.window_full:
            out.append(
                Finding(
                    kind="tcp_window_full",
                    title=f"The sender filled the receiver's TCP window {self.window_full} "
                    f"times ({self.window_full_ns / 1e9:.3f} s window-limited), during "
                    f"{self.rpcs_in_window_full} RPCs",
                    severity="warning",
                    details={"stretches": self.window_full, "total_ns": self.window_full_ns},
                )
            )
        if self.holes:
            out.append(
                Finding(
                    kind="tcp_hole",
                    title=f"{self.holes} TCP byte ranges ({self.hole_bytes} bytes) never "
                    "appeared in the capture",
                    severity="warning",
                    details={"holes": self.holes, "bytes": self.hole_bytes},
                )
            )
        if self.retransmissions:
            rt = ev[ev["kind"] == "tcp_retransmission"]
            out.append(
                Finding(
                    kind="tcp_retransmission_delay",
                    title=f"{self.retransmissions} TCP retransmissions happened while "
                    f"{int((rt['rpcs'] > 0).sum())} of them had RPCs in progress",
                    severity="warning",
                    details={
                        "segments": self.retransmissions,
                        "bytes": self.retransmitted_bytes,
                    },
                )
            )
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "retransmissions": self.retransmissions,
            "retransmitted_bytes": self.retransmitted_bytes,
            "holes": self.holes,
            "hole_bytes": self.hole_bytes,
            "zero_windows": self.zero_windows,
            "zero_window_ns": self.zero_window_ns,
            "window_full": self.window_full,
            "window_full_ns": self.window_full_ns,
            "rpcs_in_zero_window": self.rpcs_in_zero_window,
            "rpcs_in_window_full": self.rpcs_in_window_full,
            "connections": len(self.connections),
        }


def _pair(a: pd.Series, b: pd.Series) -> pd.Series:
    a, b = a.astype(object), b.astype(object)
    return pd.Series(
        [(x, y) if x <= y else (y, x) for x, y in zip(a, b, strict=True)], index=a.index
    )


def _link(ev: pd.DataFrame, tx: pd.DataFrame) -> tuple[list[int], list[int], list[str], list]:
    """Per event: count, summed latency and ops of the overlapping RPCs, and their ids."""
    rpcs = tx[tx["n_calls"] > 0]
    start = rpcs["t_call_ns"].astype("int64").to_numpy()
    end = rpcs["t_reply_ns"].fillna(rpcs["t_call_last_end_ns"]).astype("int64").to_numpy()
    latency = rpcs["latency_ns"].fillna(0).astype("int64").to_numpy()
    ops = rpcs["op"].astype(object).fillna("").to_numpy()
    pairs = _pair(rpcs["client"], rpcs["server"]).to_numpy()
    by_pair: dict[tuple, np.ndarray] = {}
    for i, p in enumerate(pairs):
        by_pair.setdefault(p, []).append(i)  # type: ignore[arg-type]
    counts, sums, op_text, ids = [], [], [], []
    ev_pairs = _pair(ev["src"], ev["dst"])
    for s, d, p in zip(ev["ts_ns"], ev["ts_ns"] + ev["duration_ns"], ev_pairs, strict=True):
        idx = np.asarray(by_pair.get(p, []), dtype="int64")
        hit = idx[(start[idx] <= d) & (end[idx] >= s)] if len(idx) else idx
        counts.append(len(hit))
        sums.append(int(latency[hit].sum()))
        names, n = np.unique(ops[hit].astype(str), return_counts=True) if len(hit) else ([], [])
        op_text.append(" ".join(f"{o}x{c}" for o, c in zip(names, n, strict=True)))
        ids.append(rpcs.index[hit])
    return counts, sums, op_text, ids


def analyze_transport(transactions: pd.DataFrame, events: pd.DataFrame) -> TransportResult:
    """Transport events and stretches with the RPCs they overlap."""
    if len(events):
        ev = events[events["kind"].isin(TRANSPORT_KINDS)].reset_index(drop=True)
    else:
        ev = pd.DataFrame(columns=[c for c in EVENT_LINK_COLUMNS if c not in ("rpcs",)])
    if len(ev):
        counts, sums, op_text, ids = _link(ev, transactions)
    else:
        counts, sums, op_text, ids = [], [], [], []
    linked = ev.reindex(columns=[c for c in EVENT_LINK_COLUMNS if c in ev.columns]).copy()
    linked["rpcs"] = pd.Series(counts, dtype="int64")
    linked["rpc_latency_ns"] = pd.Series(sums, dtype="int64")
    linked["rpc_ops"] = pd.Series(op_text, dtype=object)
    linked = linked[list(EVENT_LINK_COLUMNS)]
    connections = _connections(linked, ids, transactions)

    def total(kind: str, col: str) -> int:
        return int(linked.loc[linked["kind"] == kind, col].sum())

    def count(kind: str) -> int:
        return int((linked["kind"] == kind).sum())

    def distinct_rpcs(kind: str) -> int:
        return len({i for k in linked.index[linked["kind"] == kind] for i in ids[k]})

    return TransportResult(
        events=linked,
        connections=connections,
        retransmissions=count("tcp_retransmission"),
        retransmitted_bytes=total("tcp_retransmission", "length"),
        holes=count("tcp_hole"),
        hole_bytes=total("tcp_hole", "length"),
        zero_windows=count("tcp_zero_window"),
        zero_window_ns=total("tcp_zero_window", "duration_ns"),
        window_full=count("tcp_window_full"),
        window_full_ns=total("tcp_window_full", "duration_ns"),
        rpcs_in_zero_window=distinct_rpcs("tcp_zero_window"),
        rpcs_in_window_full=distinct_rpcs("tcp_window_full"),
    )


def _connections(linked: pd.DataFrame, ids: list, tx: pd.DataFrame) -> pd.DataFrame:
    if linked.empty:
        return pd.DataFrame(columns=list(CONNECTION_COLUMNS))
    rows = []
    for conn, g in linked.groupby("conn", sort=True):
        a, b = sorted((str(g["src"].iloc[0]), str(g["dst"].iloc[0])))
        hit = sorted({i for k in g.index for i in ids[k]})
        lat = tx.loc[hit, "latency_ns"].fillna(0).astype("int64").sum() if hit else 0

        def of(kind: str, col: str | None = None, g: pd.DataFrame = g) -> int:
            sel = g[g["kind"] == kind]
            return len(sel) if col is None else int(sel[col].sum())

        rows.append(
            {
                "conn": int(conn),
                "host_a": a,
                "host_b": b,
                "retransmissions": of("tcp_retransmission"),
                "retransmitted_bytes": of("tcp_retransmission", "length"),
                "holes": of("tcp_hole"),
                "hole_bytes": of("tcp_hole", "length"),
                "zero_windows": of("tcp_zero_window"),
                "zero_window_ns": of("tcp_zero_window", "duration_ns"),
                "window_full": of("tcp_window_full"),
                "window_full_ns": of("tcp_window_full", "duration_ns"),
                "rpcs_delayed": len(hit),
                "delayed_latency_ns": int(lat),
            }
        )
    return pd.DataFrame(rows, columns=list(CONNECTION_COLUMNS))
