"""The transactional latency model of NFS writes (Boumenot 2002), fitted to a trace.

For sequential transactions, one block per transaction::

    T_cycle = 2*T_prop + T_ser + T_B + T_op        throughput = block_bits / T_cycle

T_prop: one-way network latency; T_ser = block_bits / link_rate; T_B: time for the
server's disk to absorb one block (block / disk_rate); T_op: per-transaction
overhead.  With N transactions in flight the bound rises toward
min(N * block_bits / T_cycle, link_rate, disk_rate).

Each parameter is estimated from the trace with a stated method, sample count and
spread, or given by the user (``ModelOverrides``); when the trace is too thin the
parameter is NaN with method "cannot estimate: <why>" -- never a made-up number.

- T_prop: the smallest of the round trips the trace shows -- TCP handshakes (SYN ->
  handshake ACK, the full round trip at any capture point), data->ACK round trips,
  the call->reply times of trivial RPCs (NULL, GETATTR, ACCESS, GETPORT, FSINFO,
  PATHCONF, NFSv4 compounds of SEQUENCE/PUTFH/GETATTR/ACCESS only) where they contain
  the round trip -- each an upper bound.  On the server side call->reply excludes the
  network, so trivial RPCs cannot give it there.
- T_ser: block_bits / link rate; the rate given, or from packet-train dispersion of
  large calls (bytes over first->last packet time, median over calls).
- T_B: block / disk rate given; else COMMIT server time per byte committed; else
  FILE_SYNC minus UNSTABLE WRITE latency.
- T_op: what the server takes to answer trivial RPCs (their call->reply minus the
  round trip), plus the client's reply->next-WRITE gap when it sends one WRITE at a
  time.

The prediction is the bound at the client's maximum concurrency (the most WRITEs it
kept in flight), from these parameters alone -- none of them is taken from the WRITE
latencies or throughput it is compared with, so "predicted vs measured" is a real
check; what the model leaves out (batching, pauses, the server's time per byte of
WRITE data, losses) shows as the difference, and the time budget (``budget.py``)
says where it went.  Little's law (the measured mean in flight x block / mean
latency) is kept beside it as a consistency check of the measurement, named as such.

Rates: Mbit/s = 10^6 bits per second; block sizes in bytes (8 KiB = 8192).
A pure function of the tables; no I/O.  Its length is the four estimators
of the model's terms (T_prop, T_ser, T_B, T_op), each with the evidence it
needs and the reasons it abstains, beside the cycle arithmetic they feed;
the units and what-if parsing are in units.py and model_inputs.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from nfstrace.analysis.findings import Finding
from nfstrace.analysis.grouping import first_rows, row_codes, rows_where
from nfstrace.analysis.model_inputs import ModelOverrides, WhatIf, parse_what_if
from nfstrace.analysis.overview import throughput as write_throughput
from nfstrace.analysis.quality import ack_round_trips, handshake_times
from nfstrace.analysis.workload import outstanding
from nfstrace.jsonable import NOT_IN_JSON, json_field, jsonable
from nfstrace.protocol.nfs3 import UNSTABLE
from nfstrace.protocol.rpc import NFS_PROGRAM

TERMS = ("2·T_prop", "T_ser", "T_B", "T_op")
PARAMETERS = ("T_prop", "T_ser", "T_B", "T_op")
CAPTURE_POINTS = ("client", "server", "between", "unknown")

PARAMETER_COLUMNS: dict[str, str] = {
    "name": "T_prop (one way), T_ser, T_B, T_op -- seconds per block / transaction",
    "value_s": "estimate in seconds (NaN: cannot estimate)",
    "method": "how it was obtained, or 'cannot estimate: <why>'",
    "samples": "number of measurements behind it (0 for given values)",
    "spread_s": "spread of the samples in seconds (interquartile range or median-min; NaN: none)",
    "note": "caveats in words",
}
PREDICTION_COLUMNS: dict[str, str] = {
    "scenario": "sequential / the client's maximum concurrency (compared with the measured "
    "throughput) / Little's law check (the measured mean in flight and latency: a consistency "
    "check of the measurement, not a prediction)",
    "outstanding": "WRITEs in flight the prediction assumes",
    "predicted_mbit_s": "model throughput, Mbit/s (NaN: parameters missing)",
    "measured_mbit_s": "measured throughput of the WRITE calls over their own span (first "
    "WRITE call to last WRITE reply: the cycles the model predicts, without the COMMIT "
    "after), Mbit/s (NaN: not a measured stretch)",
    "error_pct": "(predicted - measured) / measured, percent",
}
WHAT_IF_COLUMNS: dict[str, str] = {
    "change": "the what-if spec as given",
    "outstanding": "WRITEs in flight assumed",
    "t_cycle_us": "T_cycle after the change, microseconds",
    "predicted_mbit_s": "predicted throughput after the change, Mbit/s",
    "dominant": "what limits it then: a T_cycle term, 'link rate' or 'disk rate'",
}

# Fewest samples a statistical estimate rests on (a COMMIT or a handshake is one
# clean measurement each, so those need one).
MIN_SAMPLES = 3
# Calls at least this big (and spanning several packets) time the link by dispersion.
DISPERSION_MIN_BYTES = 8192
DISPERSION_MIN_FRAMES = 4
# Operations whose call->reply time is almost all network round trip.
TRIVIAL_OPS = frozenset({"NULL", "GETATTR", "ACCESS", "GETPORT", "FSINFO", "PATHCONF"})
TRIVIAL_V4_OPS = frozenset({"SEQUENCE", "PUTFH", "PUTROOTFH", "GETATTR", "ACCESS"})
_TRIVIAL_WORDS = "NULL/GETATTR/ACCESS/GETPORT/FSINFO/SEQUENCE"
# Without enough trivial RPCs, T_op from metadata RPCs this small each way (never
# data or flush operations: their time is what the model predicts).
SMALL_RPC_BYTES = 1024
DATA_OPS = frozenset({"WRITE", "READ", "COMMIT"})
# The model accounts for the measured throughput when its prediction at the
# client's maximum concurrency is within this factor of it; further off, time
# went to something its terms leave out (a server slow with WRITE data, a queue,
# loss, pauses) and neither its largest term nor its what-ifs are the answer.
FIT_FACTOR = 2.0
DATA_SYNC = 1  # stable_how / committed level at which the server has the data on disk

_TERM_ADVICE = {
    "2·T_prop": "the network round trip is {pct:.0%} of each cycle: more outstanding WRITEs "
    "or a closer server would help most",
    "T_ser": "putting each block on the wire is {pct:.0%} of each cycle: a faster link "
    "would help most",
    "T_B": "the server's disk absorbing each block is {pct:.0%} of each cycle: a faster "
    "disk (or a server write cache) would help most",
    "T_op": "per-transaction overhead (client, RPC and server processing) is {pct:.0%} of "
    "each cycle: larger blocks (fewer transactions) would help most",
}


# --------------------------------------------------------------------- arithmetic


@dataclass(frozen=True)
class Cycle:
    """The model's state: per-block terms for a block size, and the concurrency."""

    block_bytes: float
    t_prop_s: float
    link_rate_bps: float  # T_ser = block_bits / link_rate
    disk_rate_Bps: float  # T_B = block / disk_rate
    t_op_s: float
    outstanding: float = 1.0

    @property
    def terms(self) -> dict[str, float]:
        return {
            "2·T_prop": 2 * self.t_prop_s,
            "T_ser": self.block_bytes * 8 / self.link_rate_bps,
            "T_B": self.block_bytes / self.disk_rate_Bps,
            "T_op": self.t_op_s,
        }

    @property
    def t_cycle_s(self) -> float:
        return sum(self.terms.values())

    def throughput_bps(self) -> float:
        """min(N * block_bits / T_cycle, link rate, disk rate); NaN when a term is unknown."""
        bounds = (self._window_bps(), self.link_rate_bps, self.disk_rate_Bps * 8)
        return math.nan if any(math.isnan(b) for b in bounds) else min(bounds)

    def limit(self) -> str:
        """What bounds the throughput: the largest T_cycle term, or the link or disk rate."""
        bound = self.throughput_bps()
        if bound < self._window_bps():
            return "link rate" if bound == self.link_rate_bps else "disk rate"
        return dominant_term(self.terms)

    def _window_bps(self) -> float:
        return self.outstanding * self.block_bytes * 8 / self.t_cycle_s


def cycle_throughput_bps(
    block_bytes: float,
    t_prop_s: float,
    t_ser_s: float,
    t_b_s: float,
    t_op_s: float,
    outstanding: float = 1.0,
) -> float:
    """The model's bound from the four terms: min(N*block_bits/T_cycle, link, disk)."""
    link = block_bytes * 8 / t_ser_s if t_ser_s > 0 else math.inf
    disk = block_bytes / t_b_s if t_b_s > 0 else math.inf
    return Cycle(block_bytes, t_prop_s, link, disk, t_op_s, outstanding).throughput_bps()


def dominant_term(terms: dict[str, float]) -> str:
    """The largest term ('' when any is unknown)."""
    if any(not math.isfinite(v) for v in terms.values()):
        return ""
    return max(terms, key=lambda k: terms[k])


def apply_what_if(cycle: Cycle, change: WhatIf) -> Cycle:
    """The cycle after a what-if change (T_ser and T_B follow the block size)."""
    rtt = 2 * cycle.t_prop_s
    if change.rtt_s is not None:
        rtt = change.rtt_s
    if change.rtt_delta_s is not None:
        rtt += change.rtt_delta_s
    if change.rtt_factor is not None:
        rtt *= change.rtt_factor
    if rtt < 0:  # NaN (unknown round trip) stays NaN
        raise ValueError(f"what-if {change.spec!r}: the round trip would be negative")
    link = change.link_rate_bps or cycle.link_rate_bps
    disk = change.disk_rate_Bps or cycle.disk_rate_Bps
    return replace(
        cycle,
        t_prop_s=rtt / 2,
        link_rate_bps=link * (change.link_factor or 1.0),
        disk_rate_Bps=disk * (change.disk_factor or 1.0),
        block_bytes=change.block_bytes or cycle.block_bytes,
        outstanding=change.outstanding or cycle.outstanding,
    )


# --------------------------------------------------------------------- estimation


@dataclass(frozen=True)
class _Estimate:
    name: str
    value_s: float
    method: str
    samples: int = 0
    spread_s: float = math.nan
    note: str = ""


def _cannot(name: str, why: str, samples: int = 0, note: str = "") -> _Estimate:
    return _Estimate(name, math.nan, f"cannot estimate: {why}", samples, math.nan, note)


def _iqr(values: np.ndarray) -> float:
    if len(values) < 2:
        return math.nan
    q1, q3 = np.percentile(values, [25, 75])
    return float(q3 - q1)


def _is_trivial(op: object, ops: object) -> bool:
    if isinstance(ops, str) and ops.strip():
        return set(ops.split()) <= TRIVIAL_V4_OPS
    return isinstance(op, str) and op in TRIVIAL_OPS


def _trivial_mask(tx: pd.DataFrame) -> np.ndarray:
    """_is_trivial of each row, decided once per distinct (op, ops) pair."""
    pair = row_codes([tx["op"], tx["ops"]])  # (missing a value of its own)
    first = first_rows(pair)
    pairs = zip(tx["op"].iloc[first], tx["ops"].iloc[first], strict=True)
    # An array, not a list: an empty list would select no columns instead of no rows.
    return np.array([_is_trivial(o, s) for o, s in pairs], dtype=bool)[pair]


def _clean_answered(tx: pd.DataFrame, keep: pd.Series | bool = True) -> pd.DataFrame:
    """Transactions sent once and answered once, with a latency (and ``keep``).
    Usually every WRITE is: ``rows_where`` then copies no column."""
    ok = (tx["n_calls"] == 1).to_numpy() & (tx["n_replies"] >= 1).to_numpy()
    ok &= tx["latency_ns"].notna().to_numpy()
    return rows_where(tx, ok & np.asarray(keep, dtype=bool))


@dataclass(frozen=True)
class _Answered:
    """A table's clean answered calls (``_clean_answered``) and which of them are
    trivial (``_trivial_mask``): the round trip's and T_op's estimates read both,
    fit_model makes them once."""

    rows: pd.DataFrame
    trivial: np.ndarray

    @classmethod
    def of(cls, tx: pd.DataFrame) -> _Answered:
        rows = _clean_answered(tx)
        return cls(rows, _trivial_mask(rows))


def _turnaround_rtts(tx: pd.DataFrame) -> np.ndarray:
    """Seen from the server, a client asking one thing at a time (its metadata
    calls before and between the writes: LOOKUP, CREATE, GETATTR, MOUNT ...)
    sends each when the last reply reached it: the time from a reply that left
    nothing outstanding to the client's next such call is the round trip plus
    the client's turnaround (an upper bound).  Seconds, sorted, per client/server
    pair; WRITE, COMMIT and READ calls are left out (sent in windows, on the
    application's pace)."""
    calls = tx[tx["n_calls"] > 0]
    out = []
    keys = calls[["client", "server"]].astype(object)
    for rows in calls.groupby([keys["client"], keys["server"]], sort=False).groups.values():
        one = calls.loc[rows]
        cs = one["t_call_ns"].to_numpy("int64")
        rl = one["t_reply_ns"].astype("Int64").fillna(-1).to_numpy("int64")
        small = ~one["op"].astype(object).isin(DATA_OPS).to_numpy(bool)
        t = np.r_[cs, rl[rl >= 0]]
        step = np.r_[np.ones(len(cs), "int64"), -np.ones(int((rl >= 0).sum()), "int64")]
        meta = np.r_[small, np.zeros(int((rl >= 0).sum()), bool)]
        order = np.argsort(t, kind="stable")
        t, step, meta = t[order], step[order], meta[order]
        open_after = np.cumsum(step)  # calls outstanding after each event
        after = (
            np.flatnonzero((step[1:] > 0) & meta[1:] & (step[:-1] < 0) & (open_after[:-1] == 0)) + 1
        )
        out.append((t[after] - t[after - 1]) / 1e9)
    gaps = np.sort(np.concatenate(out)) if out else np.array([])
    return gaps[gaps > 0]


def _handshake_rtts(events: pd.DataFrame | None) -> np.ndarray:
    """Per connection (by id): SYN -> handshake ACK (the full round trip wherever captured)."""
    h = handshake_times(events).sort_values("conn", kind="stable")
    syn_last = h["syn_ns"].to_numpy()  # a re-sent SYN: time the last one
    ack = h["ack_first_ns"].to_numpy()
    ok = (syn_last >= 0) & (ack >= 0) & (ack > syn_last)
    return (ack[ok] - syn_last[ok]) / 1e9


def _ack_rtts(
    events: pd.DataFrame | None, tx: pd.DataFrame, capture_point: str
) -> tuple[np.ndarray, str]:
    """Per RPC connection, the network round trip its data->ACK times show at this
    capture point (seconds), and how it was taken.  On the client its own data
    waits the round trip for the server's ACK (the server's data is acknowledged
    locally); on the server the reverse; in between each leg shows a part."""
    rtt = ack_round_trips(events, tx)
    c = rtt["client_data_ns"].to_numpy(dtype="float64")
    s = rtt["server_data_ns"].to_numpy(dtype="float64")
    if capture_point == "client":
        ns, how = c, "the client's data to the server's ACK"
    elif capture_point == "server":
        ns, how = s, "the server's data to the client's ACK"
    elif capture_point == "between":
        ns = np.where((c > 0) & (s > 0), c + s, -1.0)
        how = "the client's data to the server's ACK plus the reverse"
    else:  # unknown: the far side's ACK is the slower one
        ns, how = np.maximum(c, s), "the slower of the two directions"
    return np.sort(ns[ns > 0]) / 1e9, how


def _estimate_rtt(
    tx: pd.DataFrame,
    events: pd.DataFrame | None,
    capture_point: str,
    overrides: ModelOverrides,
    answered: _Answered | None = None,
) -> tuple[_Estimate, float]:
    """T_prop, and the network round trip that call->reply times include here
    (``answered``: ``tx``'s clean answered calls, when the caller has them).

    Every candidate -- TCP handshakes (the full round trip at any capture
    point), data->ACK round trips, trivial RPCs where call->reply contains the
    round trip -- times the round trip plus some host's reaction (the SYN-ACK's
    sender, a delayed ACK, the server answering a GETATTR): each is an upper
    bound, so the smallest one is the estimate.  A single handshake on a busy
    host can be several times the propagation delay (lab d0: 199 µs against 22
    µs data->ACK).
    """
    got = _Answered.of(tx) if answered is None else answered
    trivial = got.rows["latency_ns"].to_numpy(dtype="float64")[got.trivial]
    rpc_rtts = np.sort(trivial / 1e9)
    point_note = "" if capture_point != "unknown" else "capture point unknown: assumed client side"
    # The round trip contained in call->reply times at this capture point.
    if capture_point == "server":
        visible = 0.0
    elif capture_point == "between":
        visible = float(rpc_rtts[0]) if len(rpc_rtts) >= MIN_SAMPLES else math.nan
    else:
        visible = math.nan  # = 2*T_prop, set below

    candidates: list[tuple[np.ndarray, str, str]] = []  # (sorted round trips, method, note)
    if len(hs := _handshake_rtts(events)):
        candidates.append(
            (np.sort(hs), "TCP handshake: smallest SYN -> handshake ACK round trip", "")
        )
    rtts, how = _ack_rtts(events, tx, capture_point)
    if len(rtts):
        candidates.append(
            (
                rtts,
                f"TCP data->ACK: smallest round trip of {how}",
                "includes the time the peer took to send its ACK",
            )
        )
    if (
        capture_point == "server"
        and not candidates
        and len(turns := _turnaround_rtts(tx)) >= MIN_SAMPLES
    ):  # UDP seen from the server: nothing else shows the round trip
        candidates.append(
            (
                turns,
                "server side: shortest time from a reply to the client's next metadata "
                "call, nothing else outstanding",
                "includes the client's turnaround: an upper bound",
            )
        )
    if capture_point in ("client", "unknown") and len(rpc_rtts) >= MIN_SAMPLES:
        candidates.append(
            (
                rpc_rtts,
                f"smallest call->reply of trivial RPCs ({_TRIVIAL_WORDS})",
                "includes the server's (small) time to answer them",
            )
        )
    if overrides.rtt_s is not None:
        est = _Estimate("T_prop", overrides.rtt_s / 2, "given round trip (--rtt) / 2", 0)
    elif candidates:
        values, method, note = min(candidates, key=lambda c: float(c[0][0]))
        others = [m.split(":")[0] for v, m, _ in candidates if m != method]
        if others:
            note = "; ".join(n for n in (note, f"the smallest of: {', '.join(others)} too") if n)
        est = _Estimate(
            "T_prop",
            float(values[0]) / 2,
            f"{method} / 2",
            len(values),
            (float(np.median(values)) - float(values[0])) / 2 if len(values) > 1 else math.nan,
            note,
        )
    elif capture_point == "server":
        est = _cannot(
            "T_prop",
            "server-side capture: call->reply excludes the network, no TCP handshake "
            "or data->ACK round trip",
        )
    elif capture_point == "between":
        est = _cannot(
            "T_prop", "capture between client and server: call->reply shows only the server leg"
        )
    else:
        est = _cannot(
            "T_prop",
            f"{len(rpc_rtts)} trivial RPCs ({_TRIVIAL_WORDS}), need {MIN_SAMPLES}",
            len(rpc_rtts),
        )
    if point_note:
        est = replace(est, note="; ".join(n for n in (est.note, point_note) if n))
    if capture_point in ("client", "unknown"):
        visible = 2 * est.value_s
    return est, visible


def _call_rates(tx: pd.DataFrame, messages: pd.DataFrame | None) -> tuple[np.ndarray, str]:
    """Bits per second of large calls from the spacing of their first and last packets."""
    if messages is not None and not messages.empty:
        # the four columns' arrays (a selection of the messages copies all 49)
        length, frames, first, last = (
            messages[c].to_numpy() for c in ("rpc_len", "frames", "ts_first_ns", "ts_last_ns")
        )
        big = (
            (messages["msgtype"] == "call").to_numpy(dtype=bool)
            & (length >= DISPERSION_MIN_BYTES)
            & (frames >= DISPERSION_MIN_FRAMES)
            & (last > first)
        )
        frames = frames[big].astype("float64")
        # first->last packet time covers the serialization of frames-1 packets
        bits = length[big].astype("float64") * 8 * (frames - 1) / frames
        seconds = (last[big] - first[big]).astype("float64") / 1e9
        return bits / seconds, ""
    calls = tx.dropna(subset=["t_call_ns", "t_call_end_ns", "call_bytes"])
    calls = calls[
        (calls["call_bytes"] >= DISPERSION_MIN_BYTES)
        & (calls["t_call_end_ns"] > calls["t_call_ns"])
    ]
    bits = calls["call_bytes"].to_numpy(dtype="float64") * 8
    seconds = (calls["t_call_end_ns"] - calls["t_call_ns"]).to_numpy(dtype="float64") / 1e9
    return bits / seconds, "packet counts unknown (no messages table): rate slightly low"


def _estimate_t_ser(
    tx: pd.DataFrame,
    messages: pd.DataFrame | None,
    block: float,
    capture_point: str,
    overrides: ModelOverrides,
) -> tuple[_Estimate, float]:
    """T_ser and the link rate behind it."""
    if overrides.link_rate_bps is not None:
        rate = overrides.link_rate_bps
        return _Estimate("T_ser", block * 8 / rate, "given link rate (--link-rate)"), rate
    if not math.isfinite(block):
        return _cannot("T_ser", "no block size (no WRITEs)"), math.nan
    rates, note = _call_rates(tx, messages)
    if len(rates) < MIN_SAMPLES:
        why = f"{len(rates)} multi-packet calls of >= {DISPERSION_MIN_BYTES} bytes"
        return _cannot("T_ser", f"{why}, need {MIN_SAMPLES}; give --link-rate", len(rates)), (
            math.nan
        )
    rate = float(np.median(rates))
    side = "arrival" if capture_point == "server" else "sender-side"
    return (
        _Estimate(
            "T_ser",
            block * 8 / rate,
            f"{side} packet-train dispersion of large calls (median {rate / 1e6:,.1f} Mbit/s)",
            len(rates),
            _iqr(block * 8 / rates),
            "; ".join(
                n for n in (note, "waits for TCP window/ACKs make single calls look slower") if n
            ),
        ),
        rate,
    )


def _commit_server_seconds_per_byte(
    tx: pd.DataFrame, writes: pd.DataFrame, visible_rtt: float
) -> np.ndarray:
    """Per COMMIT: (latency - round trip) / bytes it made stable.

    Bytes: UNSTABLE WRITEs of the same file acknowledged since the previous COMMIT's
    call (the COMMIT's own count when that finds none); a COMMIT whose file handle
    is unknown counts the WRITEs of every file.  Cumulative sums, not a scan of the
    WRITEs per COMMIT.
    """
    commits = _clean_answered(tx, (tx["op"] == "COMMIT") & (tx["status"].fillna(-1) == 0))
    commits = commits.sort_values("t_call_ns")
    unstable = writes[writes["committed"].fillna(-1) == UNSTABLE]
    if commits.empty:
        return np.array([])
    call = commits["t_call_ns"].to_numpy("int64")
    # files numbered 1, 2, ... across both tables; 0: handle unknown
    file = pd.factorize(pd.concat([commits["fh"], unstable["fh"]], ignore_index=True))[0] + 1
    c_file, w_file = file[: len(commits)], file[len(commits) :]
    since = _previous_of_same(c_file, call, -(2**62))
    reply = unstable["t_reply_ns"].to_numpy("int64")
    nbytes = unstable["write_bytes"].to_numpy("int64")
    # bytes acknowledged in (since, call] on the same file: the difference of two
    # cumulative sums over WRITEs sorted by (file, reply time); times ranked so the
    # pair sorts as one integer
    times = np.unique(np.r_[reply, call, since])
    span = len(times) + 1
    key = w_file * span + np.searchsorted(times, reply)
    order = np.argsort(key, kind="stable")
    key, cum = key[order], np.r_[0, np.cumsum(nbytes[order])]

    def upto(f: np.ndarray, t: np.ndarray) -> np.ndarray:
        return cum[np.searchsorted(key, f * span + np.searchsorted(times, t), "right")]

    acked = upto(c_file, call) - upto(c_file, since)
    # handle unknown: the WRITEs of every file
    by_time = np.sort(reply, kind="stable")
    every = np.r_[0, np.cumsum(nbytes[np.argsort(reply, kind="stable")])]
    anywhere = every[np.searchsorted(by_time, call, "right")]
    anywhere -= every[np.searchsorted(by_time, since, "right")]
    acked = np.where(c_file == 0, anywhere, acked)
    count = np.maximum(commits["count"].fillna(0).to_numpy("int64"), 0)
    made_stable = np.where(acked != 0, acked, count)
    server = commits["latency_ns"].to_numpy("float64") / 1e9 - visible_rtt
    keep = (made_stable > 0) & (server > 0)
    return server[keep] / made_stable[keep]


def _previous_of_same(keys: np.ndarray, values: np.ndarray, missing: int) -> np.ndarray:
    """For each row, ``values`` of the last earlier row with the same key (``missing``
    for the first of its key)."""
    order = np.argsort(keys, kind="stable")
    k, v = keys[order], values[order]
    previous = np.r_[missing, v[:-1]]
    previous[np.r_[True, k[1:] != k[:-1]]] = missing
    out = np.empty_like(values)
    out[order] = previous
    return out


def _estimate_t_b(
    tx: pd.DataFrame,
    writes: pd.DataFrame,
    block: float,
    visible_rtt: float,
    overrides: ModelOverrides,
    clean: pd.DataFrame | None = None,
) -> tuple[_Estimate, float]:
    """T_B and the disk rate behind it (``clean``: ``_clean_answered(writes)``,
    when the caller has it)."""
    if overrides.disk_rate_Bps is not None:
        rate = overrides.disk_rate_Bps
        return _Estimate("T_B", block / rate, "given disk rate (--disk-rate)"), rate
    if not math.isfinite(block):
        return _cannot("T_B", "no block size (no WRITEs)"), math.nan
    if math.isfinite(visible_rtt):
        per_byte = _commit_server_seconds_per_byte(tx, writes, visible_rtt)
        if len(per_byte):
            t_b = float(np.median(per_byte)) * block
            return (
                _Estimate(
                    "T_B",
                    t_b,
                    "COMMIT server time (latency - round trip) per byte committed x block",
                    len(per_byte),
                    _iqr(per_byte * block),
                    "flushes overlapped with earlier writes make it look faster",
                ),
                block / t_b,
            )
    clean = _clean_answered(writes) if clean is None else clean
    synced = clean[clean["committed"].fillna(-1) >= DATA_SYNC]["latency_ns"]
    unstable = clean[clean["committed"].fillna(-1) == UNSTABLE]["latency_ns"]
    if len(synced) >= MIN_SAMPLES and len(unstable) >= MIN_SAMPLES:
        t_b = (float(synced.median()) - float(unstable.median())) / 1e9
        if t_b > 0:
            return (
                _Estimate(
                    "T_B",
                    t_b,
                    "median FILE_SYNC minus median UNSTABLE WRITE latency",
                    len(synced) + len(unstable),
                    _iqr(synced.to_numpy(dtype="float64") / 1e9),
                ),
                block / t_b,
            )
    return (
        _cannot(
            "T_B",
            "no answered COMMIT (with a known round trip) and too few FILE_SYNC and "
            "UNSTABLE WRITEs to compare; give --disk-rate",
        ),
        math.nan,
    )


def _client_gap_s(writes: pd.DataFrame) -> float:
    """Median time from a WRITE's reply to the next WRITE call (NaN: fewer than 2 gaps)."""
    w = writes.sort_values("t_call_ns")
    # subtract as int64: epoch nanoseconds do not fit a float's 53 bits
    gaps = (w["t_call_ns"].shift(-1) - w["t_reply_ns"]).dropna().astype("int64")
    gaps = gaps[gaps >= 0].to_numpy(dtype="float64") / 1e9
    return float(np.median(gaps)) if len(gaps) >= 2 else math.nan


def _estimate_t_op(
    tx: pd.DataFrame,
    writes: pd.DataFrame,
    visible_rtt: float,
    capture_point: str,
    sequential: bool,
    answered: _Answered | None = None,
    clean: pd.DataFrame | None = None,
) -> _Estimate:
    """T_op from what the server takes for trivial RPCs (their call->reply minus the
    round trip seen here; on the server side, from the call's last packet), plus the
    client's reply->next-WRITE gap when it sends one WRITE at a time.  Not from the
    WRITE latencies the model predicts: a check of the model against the
    measured throughput means something only when its inputs are other
    observations.  (``answered``, ``clean``: ``tx``'s clean answered calls and
    ``_clean_answered(writes)``, when the caller has them.)"""
    got = _Answered.of(tx) if answered is None else answered
    calls, trivial = got.rows, got.trivial
    if capture_point != "server" and not math.isfinite(visible_rtt):
        return _cannot("T_op", "round trip unknown", 0)

    def server_times(rows: pd.DataFrame) -> np.ndarray:
        if capture_point == "server":
            t = rows["t_reply_ns"] - rows["t_call_end_ns"].fillna(rows["t_call_ns"])
            out = t.astype("float64").to_numpy() / 1e9
        else:
            out = rows["latency_ns"].astype("float64").to_numpy() / 1e9 - visible_rtt
        return out[np.isfinite(out)]

    which = "trivial RPCs"
    times = [c for c in ("t_reply_ns", "t_call_end_ns", "t_call_ns", "latency_ns") if c in calls]
    server = server_times(calls[times][trivial])  # (the columns: fewer copies)
    if len(server) < MIN_SAMPLES:
        # Too few trivial RPCs (an NFSv4.1 client may send none but set-up and
        # GETATTR): small metadata RPCs, still not the WRITEs being predicted.
        small = calls[
            ~calls["op"].isin(DATA_OPS)
            & (calls["call_bytes"] <= SMALL_RPC_BYTES)
            & (calls["reply_bytes"] <= SMALL_RPC_BYTES)
        ]
        more = server_times(small)
        if len(more) < MIN_SAMPLES:
            return _cannot(
                "T_op",
                f"{len(server)} trivial RPCs ({_TRIVIAL_WORDS}) and {len(more)} small "
                f"metadata RPCs, need {MIN_SAMPLES}",
                len(server),
            )
        server, which = more, f"small metadata RPCs (<= {SMALL_RPC_BYTES} bytes each way)"
    how = (
        f"median server time of {which} (last packet of the call -> reply)"
        if capture_point == "server"
        else f"median call->reply of {which} minus the round trip"
    )
    value = max(float(np.median(server)), 0.0)
    notes = ["the server's time for a WRITE's data itself is not in it"]
    method = how
    gap = _client_gap_s(_clean_answered(writes) if clean is None else clean)
    if sequential and math.isfinite(gap):
        # One WRITE at a time: the client's reply->next-call time is part of every
        # cycle (the study's T_op includes it).
        value += gap
        method += " plus the median reply->next WRITE gap"
        notes.append(f"includes the client's {gap * 1e6:,.1f} µs reply->next-call gap")
    return _Estimate("T_op", value, method, len(server), _iqr(server), "; ".join(notes))


def _client_outstanding(
    seen: float, writes: pd.DataFrame, hidden_rtt: float, clean: pd.DataFrame | None = None
) -> float:
    """WRITEs in flight at the client, from those seen at the capture point.

    Away from the client a WRITE is seen outstanding only for its latency there; the
    client waits the part of the round trip the capture point does not see as well.
    By Little's law (same throughput) the counts scale with the waits.
    """
    clean = _clean_answered(writes) if clean is None else clean
    latency = clean["latency_ns"].astype("float64")
    if not (math.isfinite(hidden_rtt) and hidden_rtt > 0) or latency.empty:
        return seen
    mean_s = float(latency.mean()) / 1e9
    return seen * (mean_s + hidden_rtt) / mean_s


def _block_size(writes: pd.DataFrame, overrides: ModelOverrides) -> tuple[float, str]:
    if overrides.block_bytes is not None:
        return float(overrides.block_bytes), "given (--block)"
    sizes = writes["write_bytes"]
    sizes = sizes[sizes > 0]
    if sizes.empty:
        return math.nan, "cannot estimate: no acknowledged WRITEs"
    common = int(sizes.mode().max())
    share = float((sizes == common).mean())
    return float(common), f"most common WRITE size ({share:.0%} of {len(sizes)} WRITEs)"


# ------------------------------------------------------------------------ result


@dataclass(frozen=True)
class ModelResult:
    """The fitted model (tables: ``PARAMETER_COLUMNS``, ``PREDICTION_COLUMNS``,
    ``WHAT_IF_COLUMNS``); terms and t_cycle in seconds, rates in bits/bytes per second."""

    capture_point: str
    block_bytes: int | None
    block_method: str
    parameters: pd.DataFrame
    link_rate_bps: float
    disk_rate_Bps: float
    outstanding_seen: float  # mean WRITEs in flight at the capture point
    outstanding_mean: float  # ... at the client (= seen on the client side)
    outstanding_max: int
    terms: dict[str, float] = field(metadata=json_field(key="terms_s"))
    t_cycle_s: float
    dominant: str
    dominant_text: str
    # predicted / measured Mbit/s at the client's maximum concurrency (NaN: unknown)
    prediction_ratio: float = field(metadata=json_field(then=("fits",)))
    measured_mbit_s: float
    predictions: pd.DataFrame
    inputs: list[str] = field(default_factory=list)  # what the prediction rests on
    what_if: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=list(WHAT_IF_COLUMNS))
    )
    # the part of the round trip inside call->reply here
    rtt_visible_s: float = field(default=math.nan, metadata=NOT_IN_JSON)

    @property
    def fits(self) -> bool:
        """The prediction is within FIT_FACTOR of the measured throughput."""
        return 1 / FIT_FACTOR <= self.prediction_ratio <= FIT_FACTOR

    def parameter(self, name: str) -> float:
        return float(self.parameters.set_index("name").loc[name, "value_s"])

    def cycle(self) -> Cycle:
        """The model as fitted, at the client's maximum concurrency (1 when unknown)."""
        n = float(self.outstanding_max) if self.outstanding_max else 1.0
        return Cycle(
            block_bytes=math.nan if self.block_bytes is None else float(self.block_bytes),
            t_prop_s=self.parameter("T_prop"),
            link_rate_bps=self.link_rate_bps,
            disk_rate_Bps=self.disk_rate_Bps,
            t_op_s=self.parameter("T_op"),
            outstanding=max(1.0, n),
        )

    def findings(self) -> list[Finding]:
        out: list[Finding] = []
        missing = self.parameters[self.parameters["value_s"].isna()]
        if not missing.empty:
            out.append(
                Finding(
                    kind="model_cannot_estimate",
                    title=(
                        "the latency model cannot estimate "
                        + ", ".join(missing["name"])
                        + ": "
                        + "; ".join(m.removeprefix("cannot estimate: ") for m in missing["method"])
                    ),
                    details={"parameters": jsonable(self.parameters)},
                )
            )
            return out
        out.append(
            Finding(
                kind="model_dominant_term",
                title=self.dominant_text,
                details={
                    "terms_s": jsonable(self.terms),
                    "t_cycle_s": jsonable(self.t_cycle_s),
                    "dominant": self.dominant,
                },
            )
        )
        overall = self.predictions[
            self.predictions["scenario"].str.startswith("the client's maximum")
        ]
        if not overall.empty and abs(overall["error_pct"].iloc[0]) > 25:
            row = overall.iloc[0]
            out.append(
                Finding(
                    kind="model_mismatch",
                    title=(
                        f"the model predicts {row['predicted_mbit_s']:,.1f} Mbit/s but "
                        f"the WRITE calls ran at {row['measured_mbit_s']:,.1f} Mbit/s "
                        f"({row['error_pct']:+.0f}%): something outside it limits the "
                        "transfer (the time budget says what)"
                    ),
                    severity="warning",
                    details={"predictions": jsonable(self.predictions)},
                )
            )
        return out


def _dominant_text(
    cycle: Cycle, ratio: float, predicted: float, measured: float
) -> tuple[str, str]:
    terms = cycle.terms
    unknown = [k for k, v in terms.items() if not math.isfinite(v)]
    if unknown:
        return "", f"cannot say which term dominates: {', '.join(unknown)} unknown"
    name = dominant_term(terms)
    share = terms[name] / cycle.t_cycle_s
    if math.isfinite(ratio) and not 1 / FIT_FACTOR <= ratio <= FIT_FACTOR:
        return name, (
            f"the model does not account for the measured rate: from its inputs it "
            f"predicts {predicted:,.1f} Mbit/s with {cycle.outstanding:g} WRITEs in flight, "
            f"the WRITE calls ran at {measured:,.1f} (first call to last WRITE reply; "
            f"{ratio:.2g}x): the time went to something "
            f"its terms leave out (the time budget in the diagnosis says what); "
            f"its largest term, {name}, is {share:.0%} of its cycle"
        )
    return name, _TERM_ADVICE[name].format(pct=share)


def _prediction_rows(
    cycle: Cycle,
    writes: pd.DataFrame,
    outstanding_mean: float,
    measured_mbit_s: float,
    clean: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The model's predictions (from the parameters alone) against the measured
    throughput, and Little's law as a consistency check of the measurement itself."""

    def bound(n: float) -> float:
        return replace(cycle, outstanding=max(1.0, n)).throughput_bps() / 1e6

    n_max = cycle.outstanding
    clean = _clean_answered(writes) if clean is None else clean
    latency = clean["latency_ns"].astype("float64")
    little = (
        outstanding_mean * cycle.block_bytes * 8 / (float(latency.mean()) / 1e9) / 1e6
        if len(latency) and math.isfinite(outstanding_mean)
        else math.nan
    )
    rows = [
        ("sequential (1 WRITE in flight)", 1.0, bound(1.0), math.nan),
        (f"the client's maximum concurrency ({n_max:g})", n_max, bound(n_max), measured_mbit_s),
        ("Little's law check (mean in flight x block / mean latency)", outstanding_mean, little,
         measured_mbit_s),
    ]  # fmt: skip
    table = pd.DataFrame(
        rows, columns=["scenario", "outstanding", "predicted_mbit_s", "measured_mbit_s"]
    )
    table["error_pct"] = (
        (table["predicted_mbit_s"] - table["measured_mbit_s"]) / table["measured_mbit_s"] * 100
    )
    return table[list(PREDICTION_COLUMNS)]


def _inputs(estimates: dict[str, _Estimate], n_max: int, capture_point: str) -> list[str]:
    """The observations the prediction rests on, in words."""
    out = [
        f"{e.name}: {e.method} ({e.samples} samples)"
        if not math.isnan(e.value_s)
        else f"{e.name}: {e.method}"
        for e in estimates.values()
    ]
    out.append(f"concurrency: the client's maximum WRITEs in flight seen here ({n_max})")
    out.append(f"capture point: {capture_point}")
    return out


def what_if(result: ModelResult, changes: Sequence[WhatIf | str]) -> pd.DataFrame:
    """One row per what-if spec (``WHAT_IF_COLUMNS``); NaN where the model lacks a term."""
    rows = []
    base = result.cycle()
    for change in changes:
        spec = parse_what_if(change) if isinstance(change, str) else change
        after = apply_what_if(base, spec)
        rows.append(
            (
                spec.spec,
                after.outstanding,
                after.t_cycle_s * 1e6,
                after.throughput_bps() / 1e6,
                after.limit() if math.isfinite(after.t_cycle_s) else "",
            )
        )
    return pd.DataFrame(rows, columns=list(WHAT_IF_COLUMNS))


# The transactions' columns fit_model reads, in the table's order (those its
# module and the functions it calls name: a column left out would be missing).
MODEL_COLUMNS = (
    *("client", "server", "transport", "conn", "prog", "vers", "op", "ops", "t_call_ns"),
    *("t_call_end_ns", "t_reply_ns", "latency_ns", "n_calls", "n_replies", "reply_stat"),
    *("accept_stat", "status", "fh", "name", "count", "stable", "reply_count", "committed"),
    *("write_bytes", "read_bytes", "minor", "call_bytes", "reply_bytes", "call_truncated"),
    "inferred",
)


def fit_model(
    transactions: pd.DataFrame,
    events: pd.DataFrame | None = None,
    *,
    capture_point: str = "unknown",
    outstanding_mean: float | None = None,
    overrides: ModelOverrides | None = None,
    messages: pd.DataFrame | None = None,
    what_ifs: Sequence[WhatIf | str] = (),
) -> ModelResult:
    """Fit the model to a trace's NFS WRITEs.

    transactions: TRANSACTION_COLUMNS; events: transport events (handshake kinds used
    when present); capture_point: client/server/between/unknown; outstanding_mean:
    time-weighted mean of WRITEs in flight (computed from the WRITEs when None; only
    Little's law check uses it: predictions use the client's maximum);
    messages: MESSAGE_COLUMNS, for packet counts in the T_ser dispersion estimate;
    what_ifs: specs answered in ``result.what_if``.
    """
    if capture_point not in CAPTURE_POINTS:
        raise ValueError(f"capture_point must be one of {CAPTURE_POINTS}, got {capture_point!r}")
    overrides = overrides or ModelOverrides()
    # only the columns the model reads (here and in workload.outstanding,
    # overview.throughput, quality's round trips): its row selections copy
    # these, not the table's every column
    transactions = transactions[[c for c in MODEL_COLUMNS if c in transactions.columns]]
    # (rows_where: usually every row kept, no copy of the table's every column)
    called = rows_where(transactions, transactions["n_calls"] > 0)
    nfs = rows_where(called, called["prog"] == NFS_PROGRAM)
    writes = nfs[(nfs["op"] == "WRITE") & (nfs["write_bytes"] > 0)]

    # (the calls sent once and answered, of all and of the WRITEs: made once here)
    answered, clean = _Answered.of(called), _clean_answered(writes)

    block, block_method = _block_size(writes, overrides)
    computed_mean, outstanding_max = outstanding(writes)
    seen = computed_mean if outstanding_mean is None else outstanding_mean
    t_prop, visible = _estimate_rtt(called, events, capture_point, overrides, answered)
    outstanding_mean = _client_outstanding(seen, writes, 2 * t_prop.value_s - visible, clean)
    t_ser, link_rate = _estimate_t_ser(writes, messages, block, capture_point, overrides)
    t_b, disk_rate = _estimate_t_b(nfs, writes, block, visible, overrides, clean)
    t_op = _estimate_t_op(
        called,
        writes,
        visible,
        capture_point,
        sequential=outstanding_max <= 1,
        answered=answered,
        clean=clean,
    )
    estimates = {e.name: e for e in (t_prop, t_ser, t_b, t_op)}
    parameters = pd.DataFrame(
        [vars(estimates[name]) for name in PARAMETERS], columns=list(PARAMETER_COLUMNS)
    )

    throughput = write_throughput(writes, "write_bytes")
    measured = throughput.mbits_per_s if throughput else math.nan
    cycle = Cycle(
        block, t_prop.value_s, link_rate, disk_rate, t_op.value_s, max(1.0, outstanding_max)
    )
    predictions = _prediction_rows(cycle, writes, outstanding_mean, measured, clean)
    predicted = float(predictions["predicted_mbit_s"].iloc[1])
    ratio = predicted / measured if measured > 0 else math.nan
    dominant, text = _dominant_text(cycle, ratio, predicted, measured)
    result = ModelResult(
        capture_point=capture_point,
        parameters=parameters,
        block_bytes=int(block) if math.isfinite(block) else None,
        block_method=block_method,
        link_rate_bps=link_rate,
        disk_rate_Bps=disk_rate,
        outstanding_seen=seen,
        outstanding_mean=outstanding_mean,
        outstanding_max=outstanding_max,
        terms=cycle.terms,
        t_cycle_s=cycle.t_cycle_s,
        dominant=dominant,
        dominant_text=text,
        measured_mbit_s=measured,
        predictions=predictions,
        prediction_ratio=ratio,
        rtt_visible_s=visible,
        inputs=_inputs(estimates, outstanding_max, capture_point),
    )
    if what_ifs:
        result = replace(result, what_if=what_if(result, what_ifs))
    return result
