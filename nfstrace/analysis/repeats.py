"""Repeats, told apart: RPC retransmissions (the same xid sent again, also on a
new TCP connection), duplicate replies, TCP retransmissions of the same bytes
(transport repeats, not RPC ones) and identical frames captured more than once.

RPC retransmissions come from the transactions table (``match.py`` groups the
sends of one call: ``n_calls``, ``call_times_ns``, ``call_conns``); TCP ones
from the parser's ``tcp_retransmission`` events; mirror duplicates from
``ParseStats.duplicate_frames``.

Time lost by a re-sent call: its latency minus what the same operation takes
when it is not re-sent (the median latency of that op among answered,
never re-sent calls; of all such calls when the op has none), clipped at 0.
A call never answered lost at least the time from its first to its last send.
The trace's total is the union of those lost intervals on the clock (the last
ones of each call's wait), so calls stuck together are not counted twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np
import pandas as pd

from nfstrace.analysis.findings import MAX_DETAIL_ITEMS, Finding, listed
from nfstrace.analysis.grouping import group_codes, rows_where
from nfstrace.jsonable import NOT_IN_JSON

RETRANSMISSION_COLUMNS: dict[str, str] = {
    "client": "client address",
    "server": "server address",
    "transport": "tcp / udp",
    "conn": "connection of the first send",
    "call_conns": "connections the call was sent on (>1: re-sent after a reconnect)",
    "xid": "RPC transaction id",
    "program": "RPC program name",
    "op": "operation",
    "n_calls": "sends of the call (1 + re-sends)",
    "t_call_ns": "first send (first packet)",
    "t_call_last_ns": "last send (first packet)",
    "t_reply_ns": "the reply (<NA>: never answered in the capture)",
    "intervals_ms": "tuple: time between successive sends (the retransmission timeouts)",
    "backoff": "tuple: ratio of each interval to the one before (2.0 = doubling)",
    "latency_ns": "first send to the reply (what the client waited)",
    "latency_last_ns": "last send to the reply",
    "reply_after_resend": "the reply came after a re-send (it may answer either send)",
    "n_replies": "replies seen (>1: duplicate replies)",
    "expected_latency_ns": "median latency of the op when not re-sent (the baseline)",
    "time_lost_ns": "latency - expected latency, clipped at 0 (unanswered: first to last send)",
}

TCP_RETRANSMISSION_COLUMNS: dict[str, str] = {
    "conn": "connection id",
    "src": "sender of the repeated bytes",
    "sport": "its port",
    "dst": "receiver",
    "dport": "its port",
    "segments": "segments carrying only bytes already seen",
    "bytes": "bytes they carried",
    "first_ns": "first such segment",
    "last_ns": "last such segment",
}


@dataclass(frozen=True)
class RepeatsResult:
    # RETRANSMISSION_COLUMNS, one row per re-sent call
    retransmissions: pd.DataFrame = field(metadata=NOT_IN_JSON)
    # TCP_RETRANSMISSION_COLUMNS, one row per direction
    tcp_retransmissions: pd.DataFrame = field(metadata=NOT_IN_JSON)
    retransmitted_calls: int  # calls sent more than once
    resends: int  # extra sends in all
    resent_on_new_connection: int  # calls re-sent on another connection
    unanswered_retransmitted: int
    time_lost_ns: int  # on the wall clock: the union of the re-sent calls' lost intervals
    duplicate_replies: int  # extra replies in all
    calls_with_duplicate_replies: int
    tcp_retransmitted_segments: int
    tcp_retransmitted_bytes: int
    mirror_duplicates: int  # identical frames captured more than once (skipped by the parser)
    first_timeout_ms_median: float | None  # median first re-send interval

    def findings(self) -> list[Finding]:
        out: list[Finding] = []
        if self.retransmitted_calls:
            worst = self.retransmissions.sort_values("time_lost_ns", ascending=False).iloc[0]
            intervals = listed([f"{v:.0f} ms" for v in worst["intervals_ms"]])
            title = (
                f"{self.retransmitted_calls} RPC calls were re-sent ({self.resends} re-sends), "
                f"costing {self.time_lost_ns / 1e9:.3f} s; the worst, {worst['op']} "
                f"xid {int(worst['xid']):#x}, was re-sent after {intervals}"
            )
            if self.resent_on_new_connection:
                title += f"; {self.resent_on_new_connection} re-sent on a new connection"
            out.append(
                Finding(
                    kind="rpc_retransmission",
                    title=title,
                    severity="problem",
                    time_lost_ns=self.time_lost_ns,
                    details={
                        "calls": self.retransmitted_calls,
                        "resends": self.resends,
                        "unanswered": self.unanswered_retransmitted,
                        "first_timeout_ms_median": self.first_timeout_ms_median,
                        "worst_xid": int(worst["xid"]),
                        "worst_intervals_ms": [
                            float(v) for v in worst["intervals_ms"][:MAX_DETAIL_ITEMS]
                        ],
                        "worst_resends": len(worst["intervals_ms"]),
                    },
                )
            )
        if self.duplicate_replies:
            out.append(
                Finding(
                    kind="duplicate_reply",
                    title=f"{self.calls_with_duplicate_replies} calls were answered more than "
                    f"once ({self.duplicate_replies} extra replies: the server's duplicate "
                    "request cache answering re-sent calls)",
                    details={"extra_replies": self.duplicate_replies},
                )
            )
        if self.tcp_retransmitted_segments:
            out.append(
                Finding(
                    kind="tcp_retransmission",
                    title=f"{self.tcp_retransmitted_segments} TCP segments "
                    f"({self.tcp_retransmitted_bytes} bytes) were sent again on "
                    f"{self.tcp_retransmissions['conn'].nunique()} connections "
                    "(TCP repeats of the same bytes, not RPC re-sends)",
                    severity="warning",
                    details={
                        "segments": self.tcp_retransmitted_segments,
                        "bytes": self.tcp_retransmitted_bytes,
                    },
                )
            )
        if self.mirror_duplicates:
            out.append(
                Finding(
                    kind="mirror_duplicates",
                    title=f"{self.mirror_duplicates} identical frames captured more than once "
                    "(byte for byte, within ParseLimits.duplicate_window_ns of the first); the "
                    "copies were ignored",
                    details={"frames": self.mirror_duplicates},
                )
            )
        return out


def _expected_latency(tx: pd.DataFrame, resent: pd.DataFrame) -> pd.Series:
    """Per re-sent call: median latency of its op among answered, never re-sent calls."""
    clean = tx[(tx["n_calls"] == 1) & tx["latency_ns"].notna()]
    lat = clean["latency_ns"].astype("float64")
    by_op = lat.groupby(clean["op"].astype(object).fillna("")).median()
    overall = float(lat.median()) if len(lat) else 0.0
    ops = resent["op"].astype(object).fillna("")
    return ops.map(by_op).fillna(overall).astype("float64")


def _intervals(times: tuple) -> tuple[float, ...]:
    t = np.asarray(times, dtype="int64")
    return tuple(float(v) for v in np.diff(t) / 1e6)


def _backoff(intervals: tuple[float, ...]) -> tuple[float, ...]:
    return tuple(round(b / a, 3) if a > 0 else float("nan") for a, b in pairwise(intervals))


def _retransmissions(tx: pd.DataFrame) -> pd.DataFrame:
    again = (tx["n_calls"] > 1).to_numpy()
    if not again.any():  # (the usual case: no selection of every column)
        return pd.DataFrame(columns=list(RETRANSMISSION_COLUMNS))
    resent = tx[again]
    out = resent[
        [
            "client",
            "server",
            "transport",
            "conn",
            "call_conns",
            "xid",
            "program",
            "op",
            "n_calls",
            "t_call_ns",
            "t_call_last_ns",
            "t_reply_ns",
            "latency_ns",
            "latency_last_ns",
            "n_replies",
        ]
    ].copy()
    out["intervals_ms"] = [_intervals(t) for t in resent["call_times_ns"]]
    out["backoff"] = [_backoff(i) for i in out["intervals_ms"]]
    out["reply_after_resend"] = (out["t_reply_ns"] > out["t_call_last_ns"]).fillna(False)
    expected = _expected_latency(tx, resent)
    out["expected_latency_ns"] = expected.round().astype("int64")
    latency = out["latency_ns"].astype("Float64")
    lost = (latency - expected).clip(lower=0)
    unanswered = (out["t_call_last_ns"] - out["t_call_ns"]).astype("Float64")
    out["time_lost_ns"] = lost.fillna(unanswered).round().astype("int64")
    return out[list(RETRANSMISSION_COLUMNS)].reset_index(drop=True)


def _tcp_retransmissions(events: pd.DataFrame) -> pd.DataFrame:
    rows = np.flatnonzero((events["kind"] == "tcp_retransmission").to_numpy(dtype=bool))
    if not len(rows):
        return pd.DataFrame(columns=list(TCP_RETRANSMISSION_COLUMNS))
    # per direction, in groupby(keys, sort=True)'s order: integer group codes
    # (grouping.group_codes), sums, min and max by ufunc.at, keys from a first row
    keys = ["conn", "src", "sport", "dst", "dport"]
    group, _ = group_codes([events[k].take(rows) for k in keys])
    n = int(group.max()) + 1
    first = np.unique(group, return_index=True)[1]
    out = {k: events[k].to_numpy()[rows][first] for k in keys}
    out["segments"] = np.bincount(group, minlength=n)
    length, ts = (events[c].to_numpy("int64")[rows] for c in ("length", "ts_ns"))
    for name, at, values, start in (
        ("bytes", np.add.at, length, 0),
        ("first_ns", np.minimum.at, ts, np.iinfo("int64").max),
        ("last_ns", np.maximum.at, ts, np.iinfo("int64").min),
    ):
        out[name] = np.full(n, start, "int64")
        at(out[name], group, values)
    return pd.DataFrame(out)[list(TCP_RETRANSMISSION_COLUMNS)]


def _wall_clock_lost(rt: pd.DataFrame) -> int:
    """The time lost by re-sent calls on the clock, not summed: calls in flight
    together wait together (16 WRITEs stuck for 1 s lose 1 s, not 16)."""
    if rt.empty:
        return 0
    end = rt["t_reply_ns"].fillna(rt["t_call_last_ns"]).to_numpy(dtype="int64")
    start = end - rt["time_lost_ns"].to_numpy(dtype="int64")
    order = np.argsort(start, kind="stable")
    total, reach = 0, None
    for s, e in zip(start[order], end[order], strict=True):
        if reach is None or s > reach:
            total += e - s
            reach = e
        elif e > reach:
            total += e - reach
            reach = e
    return int(total)


def analyze_repeats(transactions: pd.DataFrame, events: pd.DataFrame, stats: Any) -> RepeatsResult:
    """Every kind of repeat in the trace (``stats``: the parser's ParseStats)."""
    tx = rows_where(transactions, transactions["n_calls"] > 0)
    rt = _retransmissions(tx)
    tcp = _tcp_retransmissions(events)
    first = [i[0] for i in rt["intervals_ms"] if i]
    extra_replies = (tx["n_replies"] - 1).clip(lower=0)
    return RepeatsResult(
        retransmissions=rt,
        tcp_retransmissions=tcp,
        retransmitted_calls=len(rt),
        resends=int((rt["n_calls"] - 1).sum()) if len(rt) else 0,
        resent_on_new_connection=int((rt["call_conns"] > 1).sum()) if len(rt) else 0,
        unanswered_retransmitted=int(rt["t_reply_ns"].isna().sum()) if len(rt) else 0,
        time_lost_ns=_wall_clock_lost(rt),
        duplicate_replies=int(extra_replies.sum()),
        calls_with_duplicate_replies=int((extra_replies > 0).sum()),
        tcp_retransmitted_segments=int(tcp["segments"].sum()) if len(tcp) else 0,
        tcp_retransmitted_bytes=int(tcp["bytes"].sum()) if len(tcp) else 0,
        mirror_duplicates=int(getattr(stats, "duplicate_frames", 0)),
        first_timeout_ms_median=float(np.median(first)) if first else None,
    )
