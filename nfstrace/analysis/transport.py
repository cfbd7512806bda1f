"""Transport health linked to RPCs: per connection the TCP retransmissions,
holes, zero-window and window-full stretches, and for each event or stretch
the RPCs it may have delayed.

An event (an instant) or stretch ([ts_ns, ts_ns + duration_ns]) is linked to
every RPC first sent on its connection whose [t_call_ns, t_reply_ns] interval
overlaps it; an RPC never answered spans [t_call_ns, t_call_last_end_ns].  A
call stuck on a stalled connection and re-sent on the next is linked there,
by its first send.  By connection, the links are bounded by the RPCs one
connection has in flight (its slots): joined by host pair, thousands of
connections whose windows closed for good each overlapped every later RPC of
the pair (N^2/2 links: 15 s and 0.8 GB for 4,000 connections).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from nfstrace.analysis.findings import Finding, listed
from nfstrace.analysis.grouping import rows_where, sorted_codes
from nfstrace.jsonable import NOT_IN_JSON, json_field

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

# tshark's expert info for each kind: its words, and its severity.  Retransmission:
# a TCP segment sent again; previous segment not captured: bytes the capture never
# saw; zero window: the receiver could take no more; window full: the sender
# filled the receiver's window.
EXPERT_WORDS: dict[str, tuple[str, str]] = {
    "tcp_retransmission": ("Retransmission", "warning"),
    "tcp_hole": ("Previous segment not captured", "warning"),
    "tcp_zero_window": ("Zero window", "warning"),
    "tcp_window_full": ("Window full", "note"),
}
EXPERT_COLUMNS: dict[str, str] = {
    "kind": "the event kind (events.kind)",
    "what": "in tshark's expert-info words",
    "severity": "warning / note, as tshark grades it",
    "events": "how many",
    "duration_ns": "stretches: their total length (0: instants)",
    "rpcs": "distinct RPCs in progress on the connection during one of them",
    "writes": "of these, WRITE and COMMIT calls",
    "rpc_latency_ns": "the distinct RPCs' latencies summed",
    "first_frame": "frame of the first one",
    "rpc_frames": "the call frames of the slowest RPCs they overlap (up to 5, slowest first)",
}
MAX_EXPERT_FRAMES = 5

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
    events: pd.DataFrame = field(metadata=NOT_IN_JSON)  # EVENT_LINK_COLUMNS
    # EXPERT_COLUMNS: one row per kind seen, tshark's expert info linked to the RPCs
    expert: pd.DataFrame
    # CONNECTION_COLUMNS, connections with any event (the JSON: how many)
    connections: pd.DataFrame = field(metadata=json_field(convert=len))

    def findings(self) -> list[Finding]:
        out: list[Finding] = []
        ev = self.events
        if self.zero_windows:
            zw = ev[ev["kind"] == "tcp_zero_window"]
            who = listed(sorted(zw["src"].astype(str).unique()))
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


def _overlaps(
    ev_pair: np.ndarray,
    ev_start: np.ndarray,
    ev_end: np.ndarray,
    pair: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Every (event, interval) of the same connection (``pair``: its id) that
    overlap (start <= event end, end >= event start), as two position arrays
    sorted by event then interval.

    Intervals sorted by (pair, start): an event's candidates are those starting in
    [event start - longest duration, event end].  The intervals are taken in classes
    of similar duration (powers of two), each with its own longest, so one long RPC
    does not make every event scan everything: within a class an interval starting
    that early is at least half as long as needed, so the candidates that do not
    overlap are typically no more than those that do."""
    events, hits = [], []
    duration = np.maximum(end - start, 0)
    klass = np.floor(np.log2(np.maximum(duration, 1))).astype("int64")
    for k in np.unique(klass):
        members = np.flatnonzero(klass == k)
        longest = int(duration[members].max())
        # (pair, time) as one sortable integer: times replaced by their rank
        times = np.unique(np.r_[start[members], ev_start - longest, ev_end])
        width = len(times) + 1
        key = pair[members] * width + np.searchsorted(times, start[members])
        order = np.argsort(key, kind="stable")
        key = key[order]
        lo = np.searchsorted(key, ev_pair * width + np.searchsorted(times, ev_start - longest))
        hi = np.searchsorted(key, ev_pair * width + np.searchsorted(times, ev_end), "right")
        n = np.maximum(hi - lo, 0)
        event = np.repeat(np.arange(len(ev_start)), n)
        at = np.repeat(lo - np.cumsum(n) + n, n) + np.arange(n.sum())
        candidate = members[order[at]]
        keep = end[candidate] >= ev_start[event]
        events.append(event[keep])
        hits.append(candidate[keep])
    event, hit = (
        np.concatenate([np.zeros(0, "int64"), *events]),
        np.concatenate([np.zeros(0, "int64"), *hits]),
    )
    order = np.lexsort((hit, event))
    return event[order], hit[order]


@dataclass(frozen=True)
class _Links:
    """Events linked to the RPCs they overlap."""

    rpcs: np.ndarray  # per event: how many
    latency_ns: np.ndarray  # per event: their latencies summed
    ops: list[str]  # per event: "WRITEx3 COMMITx1", operations in name order
    event: np.ndarray  # every (event, RPC) overlap: the event's position ...
    rpc: np.ndarray  # ... and the RPC's position among the transactions with a call
    rpc_latency_ns: np.ndarray  # per RPC position: its latency (0 unanswered)


def _link(ev: pd.DataFrame, tx: pd.DataFrame) -> _Links:
    """Per event: count, summed latency and ops of the overlapping RPCs."""
    rpcs = rows_where(tx, tx["n_calls"] > 0)
    start = rpcs["t_call_ns"].astype("int64").to_numpy()
    end = rpcs["t_reply_ns"].fillna(rpcs["t_call_last_end_ns"]).astype("int64").to_numpy()
    latency = rpcs["latency_ns"].fillna(0).astype("int64").to_numpy()
    op_code, op_names = sorted_codes(rpcs["op"].astype(object).fillna("").astype(str))
    pairs = rpcs["conn"].astype("Int64").fillna(-1).to_numpy("int64")
    ev_pairs = ev["conn"].to_numpy("int64")
    ev_start = ev["ts_ns"].to_numpy("int64")
    ev_end = (ev["ts_ns"] + ev["duration_ns"]).to_numpy("int64")
    event, hit = _overlaps(ev_pairs, ev_start, ev_end, pairs, start, end)
    counts = np.bincount(event, minlength=len(ev))
    sums = np.zeros(len(ev), "int64")
    np.add.at(sums, event, latency[hit])
    # "OPxN" per operation, names in order, for each event
    per_op = event * len(op_names) + op_code[hit]
    key, n = np.unique(per_op, return_counts=True)
    texts: list[list[str]] = [[] for _ in range(len(ev))]
    for k, c in zip(key.tolist(), n.tolist(), strict=True):
        texts[k // len(op_names)].append(f"{op_names[k % len(op_names)]}x{c}")
    return _Links(counts, sums, [" ".join(t) for t in texts], event, hit, latency)


def analyze_transport(transactions: pd.DataFrame, events: pd.DataFrame) -> TransportResult:
    """Transport events and stretches with the RPCs they overlap."""
    if len(events):
        ev = events[events["kind"].isin(TRANSPORT_KINDS)].reset_index(drop=True)
    else:
        ev = pd.DataFrame(columns=[c for c in EVENT_LINK_COLUMNS if c not in ("rpcs",)])
    none = np.zeros(0, "int64")
    links = _link(ev, transactions) if len(ev) else _Links(none, none, [], none, none, none)
    linked = ev.reindex(columns=[c for c in EVENT_LINK_COLUMNS if c in ev.columns]).copy()
    linked["rpcs"] = pd.Series(links.rpcs, dtype="int64")
    linked["rpc_latency_ns"] = pd.Series(links.latency_ns, dtype="int64")
    linked["rpc_ops"] = pd.Series(links.ops, dtype=object)
    linked = linked[list(EVENT_LINK_COLUMNS)]
    connections = _connections(linked, links)
    kinds = linked["kind"].astype(object).to_numpy()

    def total(kind: str, col: str) -> int:
        return int(linked[col].to_numpy()[kinds == kind].sum())

    def count(kind: str) -> int:
        return int((kinds == kind).sum())

    def distinct_rpcs(kind: str) -> int:
        return len(np.unique(links.rpc[kinds[links.event] == kind]))

    return TransportResult(
        events=linked,
        expert=_expert(linked, links, rows_where(transactions, transactions["n_calls"] > 0)),
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


def _expert(linked: pd.DataFrame, links: _Links, rpcs: pd.DataFrame) -> pd.DataFrame:
    """Per kind seen (EXPERT_WORDS order): how many, for how long, and the
    distinct RPCs they overlap (``links.rpc`` indexes ``rpcs``), WRITEs and
    COMMITs among them, and the call frames of the slowest to open."""
    kinds = linked["kind"].astype(object).to_numpy()
    op = rpcs["op"].astype(object).to_numpy()
    frame = rpcs["call_frame"].astype("Int64").fillna(-1).to_numpy("int64")
    rows = []
    for kind, (what, severity) in EXPERT_WORDS.items():
        mine = kinds == kind
        if not mine.any():
            continue
        hit = np.unique(links.rpc[kinds[links.event] == kind])
        slowest = hit[np.argsort(-links.rpc_latency_ns[hit], kind="stable")]
        # (two calls may end in one frame: named once)
        frames = list(dict.fromkeys(int(f) for f in frame[slowest] if f >= 0))[:MAX_EXPERT_FRAMES]
        rows.append(
            {
                "kind": kind,
                "what": what,
                "severity": severity,
                "events": int(mine.sum()),
                "duration_ns": int(linked.loc[mine, "duration_ns"].sum()),
                "rpcs": len(hit),
                "writes": int(np.isin(op[hit], ("WRITE", "COMMIT")).sum()),
                "rpc_latency_ns": int(links.rpc_latency_ns[hit].sum()),
                "first_frame": int(linked.loc[mine, "frame"].min()),
                "rpc_frames": " ".join(map(str, frames)),
            }
        )
    return pd.DataFrame(rows, columns=list(EXPERT_COLUMNS))


def _connections(linked: pd.DataFrame, links: _Links) -> pd.DataFrame:
    """Per connection with events: the events by kind and the distinct RPCs they
    overlap (all connections at once: sorted codes and bincounts)."""
    if linked.empty:
        return pd.DataFrame(columns=list(CONNECTION_COLUMNS))
    conns, first, code = np.unique(
        linked["conn"].to_numpy("int64"), return_index=True, return_inverse=True
    )
    ends = [
        sorted((str(a), str(b)))  # the first event's two hosts, in order
        for a, b in zip(linked["src"].iloc[first], linked["dst"].iloc[first], strict=True)
    ]
    out: dict[str, object] = {
        "conn": conns,
        "host_a": np.array([e[0] for e in ends], dtype=object),
        "host_b": np.array([e[1] for e in ends], dtype=object),
    }
    kind = linked["kind"].astype(object).to_numpy()
    for name, ev_kind, col in (
        ("retransmissions", "tcp_retransmission", None),
        ("retransmitted_bytes", "tcp_retransmission", "length"),
        ("holes", "tcp_hole", None),
        ("hole_bytes", "tcp_hole", "length"),
        ("zero_windows", "tcp_zero_window", None),
        ("zero_window_ns", "tcp_zero_window", "duration_ns"),
        ("window_full", "tcp_window_full", None),
        ("window_full_ns", "tcp_window_full", "duration_ns"),
    ):
        of_kind = kind == ev_kind
        total = np.zeros(len(conns), "int64")
        values = 1 if col is None else linked[col].to_numpy("int64")[of_kind]
        np.add.at(total, code[of_kind], values)
        out[name] = total
    # distinct RPCs per connection: unique (connection, RPC) overlaps
    pair = np.unique(code[links.event] * (len(links.rpc_latency_ns) + 1) + links.rpc)
    conn_of, rpc_of = (
        pair // (len(links.rpc_latency_ns) + 1),
        pair % (len(links.rpc_latency_ns) + 1),
    )
    out["rpcs_delayed"] = np.bincount(conn_of, minlength=len(conns))
    delayed = np.zeros(len(conns), "int64")
    np.add.at(delayed, conn_of, links.rpc_latency_ns[rpc_of])
    out["delayed_latency_ns"] = delayed
    return pd.DataFrame(out, columns=list(CONNECTION_COLUMNS))
