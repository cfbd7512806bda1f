"""``nfstrace watch``: a capture stream analysed as it arrives, in windows.

Not a second parser: a ring of the stream's raw records (bounded by capture
time and by bytes), and every ``interval`` of capture time the records of the
last window written to a temporary pcap and analysed by ``load()`` (the same
parse, match and diagnosis as ``analyze``).  From each window's transactions,
pure functions make the interval's lines (``interval_rows``, ``row_text``) and
its alerts (``call_alerts``); ``Watcher`` is the thin loop around them.

Timing.  Intervals are capture time (the records' timestamps), aligned to
multiples of the interval: a file fed fast gives the lines it gives fed at its
pace.  An interval's lines count the calls that *started* in it, and are
written when the interval after it ends: each call had a whole interval to be
answered (its bytes count then), so the WRITE bytes summed over the intervals
are the WRITE bytes ``analyze`` counts, but for a call answered more than an
interval later (an alert says so).  The window analysed is that interval and
the next (more when a threshold is longer than an interval, so a stall is seen
whole); the verdict of a line is the window's.  On a live input without
packets, ``tick`` closes intervals by a clock (``nfstrace.live`` says the
time): as a packet stamped then would have.

Why no quantile sketch (t-digest, DDSketch): an interval's quantiles are
computed from the window's transactions, held whole by the ring, so they are
exact and bounded by the ring (``--keep-bytes``), not by the run's length; the
run-wide latency distribution is ``nfstrace.prometheus``'s histogram (fixed
buckets, mergeable over series and time).  What the capture missed is said
every interval (``CaptureLoss``: TCP holes, tcpdump's kernel drops), and on a
terminal ``Screen`` is what the live table (``nfstrace.reports.watch_view``)
shows.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import math
import os
import shlex
import struct
import subprocess
import tempfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import pandas as pd

from nfstrace.analysis.verdict import PairVerdict, Verdict, cause_words
from nfstrace.prometheus import Metrics, write_atomically
from nfstrace.text import count
from nfstrace.trace import AnalysisConfig, Trace, load

NS = 1_000_000_000
PCAP_NS_MAGIC = 0xA1B23C4D  # a pcap whose fractions of a second are nanoseconds
PCAP_RECORD_HEADER = 16
DEFAULT_SNAPLEN = 262_144
ALERT_KINDS = ("stall", "commit", "verdict", "resend")
EVIDENCE_LISTED = 20  # evidence files named in the summary (the last ones)
# Records this much older than a window's start are not looked for behind it
# (a capture is in time order but for reordering of a few microseconds).
REORDER_NS = NS
# What a Record takes in memory besides its data: the object (72 bytes), its
# bytes object's header (33), three ints (88), the ring's pointer (8); measured
# with tracemalloc (317 bytes for 100-byte records).  The ring's --keep-bytes
# counts these too: a ring of 60-byte frames takes 4x their bytes.
RECORD_OVERHEAD = 200


@dataclass(frozen=True, slots=True)
class Record:
    """One captured frame as read: its time, its number in the stream (from 1)."""

    ts_ns: int
    frame: int
    linktype: int
    data: bytes
    wire_len: int

    @property
    def size(self) -> int:
        """Bytes it takes in a pcap."""
        return PCAP_RECORD_HEADER + len(self.data)

    @property
    def memory(self) -> int:
        """Bytes it takes in the ring: its data and the Python objects around it."""
        return RECORD_OVERHEAD + len(self.data)


class Ring:
    """The last ``keep_ns`` of records (by capture time), taking at most
    ``max_bytes`` of memory (``Record.memory``): whatever the run's length,
    this is what is held."""

    def __init__(self, keep_ns: int, max_bytes: int) -> None:
        self.keep_ns = keep_ns
        self.max_bytes = max_bytes
        self.records: deque[Record] = deque()
        self.bytes = 0
        self.dropped = 0  # records let go (aged out or over the size)
        self.squeezed_ns = -1  # the newest time of a record let go for the size

    def add(self, record: Record) -> None:
        self.records.append(record)
        self.bytes += record.memory
        self.trim(record.ts_ns)

    def trim(self, now_ns: int) -> None:
        """Let go of the records older than keep_ns before now_ns, and of the
        oldest while the ring holds more than max_bytes."""
        records = self.records
        while records and (records[0].ts_ns < now_ns - self.keep_ns or self.bytes > self.max_bytes):
            r = records.popleft()
            self.bytes -= r.memory
            self.dropped += 1
            if r.ts_ns >= now_ns - self.keep_ns:
                self.squeezed_ns = max(self.squeezed_ns, r.ts_ns)

    def between(self, start_ns: int, end_ns: int) -> list[Record]:
        """The records stamped in [start_ns, end_ns), in stream order."""
        out = []
        for r in reversed(self.records):
            if r.ts_ns < start_ns - REORDER_NS:
                break
            if start_ns <= r.ts_ns < end_ns:
                out.append(r)
        out.reverse()
        return out


def write_pcap(path: str | os.PathLike[str], records: Iterable[Record], snaplen: int) -> int:
    """Write records as a nanosecond pcap of the first record's link type;
    records of another link type are left out (their number is returned)."""
    left_out = 0
    with open(path, "wb") as f:
        linktype = None
        for r in records:
            if linktype is None:
                linktype = r.linktype
                f.write(struct.pack("<IHHiIII", PCAP_NS_MAGIC, 2, 4, 0, 0, snaplen, linktype))
            if r.linktype != linktype:
                left_out += 1
                continue
            sec, frac = divmod(r.ts_ns, NS)
            f.write(struct.pack("<IIII", sec, frac, len(r.data), r.wire_len))
            f.write(r.data)
        if linktype is None:  # no record: an empty capture of Ethernet
            f.write(struct.pack("<IHHiIII", PCAP_NS_MAGIC, 2, 4, 0, 0, snaplen, 1))
    return left_out


# ---- an interval's lines: pure functions of the window's transactions ----------------


@dataclass(frozen=True)
class PairRow:
    """One client → server pair in one interval (the calls that started in it)."""

    client: str
    server: str
    calls: int
    write_bytes: int
    read_bytes: int
    writes: int
    write_p50_ns: float  # of the answered WRITEs (nan: none)
    write_p99_ns: float
    resent: int  # RPC re-sends (sends beyond the first)
    verdict: str  # the window's verdict for the pair: a cause name, or "none"
    cause: str  # in the words of analyze's verdict ("no problem", "COMMITs 62%, ...")

    def json(self, seconds: float) -> dict[str, Any]:
        return {
            "client": self.client,
            "server": self.server,
            "calls": self.calls,
            "ops_s": round(self.calls / seconds, 3),
            "write_bytes": self.write_bytes,
            "write_mbit_s": round(self.write_bytes * 8 / seconds / 1e6, 3),
            "read_bytes": self.read_bytes,
            "read_mbit_s": round(self.read_bytes * 8 / seconds / 1e6, 3),
            "writes": self.writes,
            "write_p50_ms": _ms_or_none(self.write_p50_ns),
            "write_p99_ms": _ms_or_none(self.write_p99_ns),
            "resent": self.resent,
            "verdict": self.verdict,
            "cause": self.cause,
        }


def _ms_or_none(ns: float) -> float | None:
    return None if math.isnan(ns) else round(ns / 1e6, 3)


NO_WRITES = "no WRITE activity to judge"


# A call, across windows: (client, client port, xid); a re-send whose first send
# fell before the window is a new transaction there, the same call here.  Kept
# as a 64-bit hash of the three (8 bytes a call; two calls share one with odds
# of about n^2 / 2^65: 1 in 4 million for 3 million calls).
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a bijection of uint64 that spreads every bit."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def _hash_text(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def call_keys(calls: pd.DataFrame) -> np.ndarray:
    """The calls' keys: hashes of (client, client port, xid), as uint64."""
    if calls.empty:
        return np.zeros(0, np.uint64)
    codes, clients = pd.factorize(calls["client"].astype(str))
    host = np.array([_hash_text(c) for c in clients], np.uint64)[codes]
    port = calls["client_port"].astype("Int64").fillna(0x10000).to_numpy("int64").astype(np.uint64)
    xid = calls["xid"].astype("int64").to_numpy().astype(np.uint64)
    return _mix(_mix((port << np.uint64(32)) | xid) + host)


class CallSet:
    """The calls in the lines so far (``call_keys``), by the end of their
    interval: forgotten when older than ``forget_before`` is told (--keep), and
    past ``max_calls`` the oldest interval's first (``evicted`` counts them: a
    re-send of one of them whose first send is out of the window would be
    counted again).  A sorted uint64 array per interval: 8 bytes a call."""

    def __init__(self, max_calls: int) -> None:
        self.max_calls = max_calls
        self.parts: deque[tuple[int, np.ndarray]] = deque()  # (end ns, sorted keys)
        self.size = 0
        self.evicted = 0

    def __len__(self) -> int:
        return self.size

    def add(self, keys: np.ndarray, end_ns: int) -> None:
        keys = np.unique(keys)
        self.parts.append((end_ns, keys))
        self.size += len(keys)
        while self.size > self.max_calls and len(self.parts) > 1:
            self.evicted += self._drop()

    def forget_before(self, ns: int) -> None:
        while self.parts and self.parts[0][0] < ns:
            self._drop()

    def _drop(self) -> int:
        n = len(self.parts.popleft()[1])
        self.size -= n
        return n

    def contains(self, keys: np.ndarray) -> np.ndarray:
        """Which of keys are in the set (a bool per key)."""
        found = np.zeros(len(keys), bool)
        for _, part in self.parts:
            if len(part):
                i = np.minimum(np.searchsorted(part, keys), len(part) - 1)
                found |= part[i] == keys
        return found


def started_in(tx: pd.DataFrame, start_ns: int, end_ns: int) -> pd.DataFrame:
    """The calls (not replies without their call) that started in [start_ns, end_ns)."""
    return tx[(tx["n_calls"] > 0) & tx["t_call_ns"].between(start_ns, end_ns - 1)]


def new_calls(
    tx: pd.DataFrame, start_ns: int, end_ns: int, counted: CallSet | None = None
) -> pd.DataFrame:
    """The calls that started in [start_ns, end_ns), but those in ``counted``."""
    calls = started_in(tx, start_ns, end_ns)
    if calls.empty or counted is None or not len(counted):
        return calls
    return calls[~counted.contains(call_keys(calls))]


def interval_rows(
    tx: pd.DataFrame,
    start_ns: int,
    end_ns: int,
    verdict: Verdict | None,
    counted: CallSet | None = None,
) -> list[PairRow]:
    """The pairs' rows for the calls that started in [start_ns, end_ns) and are
    not in ``counted`` (calls of an earlier interval), the busiest pair first;
    ``verdict`` is the window's (its pairs' causes)."""
    calls = new_calls(tx, start_ns, end_ns, counted)
    if calls.empty:
        return []
    by_pair: dict[tuple[str, str], PairVerdict] = {
        (p.client, p.server): p for p in (verdict.pairs if verdict is not None else [])
    }
    rows = []
    groups = calls.groupby([calls["client"].astype(str), calls["server"].astype(str)], sort=False)
    for (client, server), g in groups:
        writes = g[g["op"].astype(str) == "WRITE"]
        lat = writes["latency_ns"].dropna().to_numpy(float)
        p50, p99 = np.percentile(lat, [50, 99]) if len(lat) else (math.nan, math.nan)
        pv = by_pair.get((client, server))
        rows.append(
            PairRow(
                client=client,
                server=server,
                calls=len(g),
                write_bytes=int(g["write_bytes"].sum()),
                read_bytes=int(g["read_bytes"].sum()),
                writes=len(writes),
                write_p50_ns=float(p50),
                write_p99_ns=float(p99),
                resent=int((g["n_calls"] - 1).clip(lower=0).sum()),
                verdict=pv.primary if pv is not None else "",
                cause=cause_words(pv) if pv is not None else NO_WRITES,
            )
        )
    rows.sort(key=lambda r: (-(r.write_bytes + r.read_bytes), -r.calls, r.client, r.server))
    return rows


def clock(ts_ns: int, fraction: bool = False) -> str:
    """A capture time as HH:MM:SS (UTC), with milliseconds when asked."""
    t = datetime.fromtimestamp(ts_ns / NS, UTC)
    return t.strftime("%H:%M:%S.%f")[:12] if fraction else t.strftime("%H:%M:%S")


def stamp(ts_ns: int) -> str:
    """A capture time as an ISO date and time (UTC, milliseconds)."""
    t = datetime.fromtimestamp(ts_ns / NS, UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:23] + "Z"


def _lat(ns: float) -> str:
    return "-" if math.isnan(ns) else f"{ns / 1e6:.2f} ms"


def row_text(start_ns: int, seconds: float, row: PairRow, fraction: bool = False) -> str:
    """One plain line: the interval's start, the pair, its rates and the cause."""
    mbit = 8 / seconds / 1e6
    return (
        f"{clock(start_ns, fraction)}  {row.client} → {row.server}  "
        f"write {row.write_bytes * mbit:,.1f} Mbit/s  read {row.read_bytes * mbit:,.1f} Mbit/s  "
        f"{row.calls / seconds:,.1f} ops/s  "
        f"WRITE p50 {_lat(row.write_p50_ns)} p99 {_lat(row.write_p99_ns)}  "
        f"re-sent {row.resent}  | {row.cause}"
    )


# ---- what the capture missed (Zeek's capture-loss, per interval) ------------------------


@dataclass(frozen=True)
class CaptureLoss:
    """What the capture missed in one interval, as Zeek's capture-loss says it
    (the ACKs for data never seen over the ACKs seen): ``holes``, ranges of TCP
    stream bytes the capture never saw that the stream stepped over when the
    receiver acknowledged them (tshark's "previous segment not captured":
    events.kind ``tcp_hole``; or left at a stream's end), over the frames seen
    in the interval, each counted at its own time as the holes are (at the
    frame that stepped over them); and with ``-i`` the packets the kernel
    dropped before tcpdump read them (its "dropped by kernel": libpcap's
    ps_drop)."""

    frames: int  # frames seen stamped in the interval
    holes: int  # tcp_hole events in the interval
    hole_bytes: int  # the bytes they stepped over
    kernel_dropped: int | None = None  # tcpdump's count since the interval before (None: no -i)

    @property
    def pct(self) -> float:
        """The holes as a share of the frames, in % (a hole counted as one
        frame: it may be more; at most 100)."""
        return min(100.0, 100 * self.holes / max(1, self.frames)) if self.holes else 0.0

    def json(self) -> dict[str, Any]:
        return {
            "frames": self.frames,
            "holes": self.holes,
            "hole_bytes": self.hole_bytes,
            "loss_pct": round(self.pct, 3),
            "kernel_dropped": self.kernel_dropped,
        }


def capture_loss(
    trace: Trace | None,
    start_ns: int,
    end_ns: int,
    frames: int,
    kernel_dropped: int | None = None,
) -> CaptureLoss:
    """The capture's loss in [start_ns, end_ns), as the window's analysis saw
    it, of the ``frames`` seen stamped in it."""
    if trace is None:
        return CaptureLoss(frames, 0, 0, kernel_dropped)
    ev = trace.events
    ev = ev[
        (ev["kind"].astype(str) == "tcp_hole") & (ev["ts_ns"] >= start_ns) & (ev["ts_ns"] < end_ns)
    ]
    return CaptureLoss(frames, len(ev), int(ev["length"].sum()), kernel_dropped)


def loss_text(
    start_ns: int, loss: CaptureLoss, warn_pct: float, fraction: bool = False
) -> str | None:
    """The interval's capture loss in a line (None: nothing missed); a warning
    when the holes are over warn_pct % or the kernel dropped packets: the
    interval's figures are short."""
    said = []
    if loss.holes:
        said.append(
            f"capture loss {loss.pct:.1f}%: {count(loss.holes, 'TCP hole')} "
            f"({loss.hole_bytes:,} bytes never captured) in {count(loss.frames, 'frame')}"
        )
    if loss.kernel_dropped:
        said.append(f"{count(loss.kernel_dropped, 'packet')} dropped by kernel (tcpdump)")
    if not said:
        return None
    text = f"{clock(start_ns, fraction)}  {'; '.join(said)}"
    if loss.pct > warn_pct or loss.kernel_dropped:
        over = f"over {warn_pct:g}%, " if loss.pct > warn_pct else ""
        return f"nfstrace: warning: {text} ({over}the interval's figures are short)"
    return text


# ---- alerts -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Alert:
    kind: str  # one of ALERT_KINDS
    ts_ns: int  # capture time it is about (a call's start; a verdict's interval end)
    client: str
    server: str
    frames: tuple[int, ...]  # frame numbers in the stream (from 1)
    text: str
    key: tuple[Any, ...] = field(default=(), compare=False)  # what makes it the same alert

    def line(self) -> str:
        frames = ", ".join(str(f) for f in self.frames) or "-"
        return f"ALERT {self.kind} at {stamp(self.ts_ns)} (frames {frames}): {self.text}"


def _frames(row: Any, to_stream: Callable[[int], int]) -> tuple[int, ...]:
    out = []
    for col in ("call_frame_first", "reply_frame"):
        v = getattr(row, col)
        if not pd.isna(v) and v > 0:
            out.append(to_stream(int(v)))
    return tuple(out)


def call_alerts(
    tx: pd.DataFrame,
    now_ns: int,
    stall_ns: int,
    commit_ns: int,
    to_stream: Callable[[int], int] = lambda f: f,
) -> list[Alert]:
    """The calls of a window that waited too long, as of now_ns: any call
    without its reply for more than stall_ns (answered late or not yet), a
    COMMIT that took more than commit_ns.  ``to_stream`` maps the window's
    frame numbers to the stream's."""
    calls = tx[tx["n_calls"] > 0]
    if calls.empty:
        return []
    t_call = calls["t_call_ns"].to_numpy("int64", na_value=0)
    answered = calls["n_replies"].to_numpy() > 0
    latency = calls["latency_ns"].to_numpy(float, na_value=math.nan)
    waited = np.where(answered, latency, now_ns - t_call)
    commit = (calls["op"].astype(str) == "COMMIT").to_numpy()
    stalled = waited > stall_ns
    slow_commit = commit & (waited > commit_ns) & ~stalled
    out = []
    for i in np.flatnonzero(stalled | slow_commit):
        row = calls.iloc[i]
        kind = "stall" if stalled[i] else "commit"
        how = (
            f"answered after {waited[i] / 1e9:.3f} s"
            if answered[i]
            else f"no reply for {waited[i] / 1e9:.3f} s (yet)"
        )
        what = f"{row['op']} xid 0x{int(row['xid']):08x}"
        out.append(
            Alert(
                kind=kind,
                ts_ns=int(t_call[i]),
                client=str(row["client"]),
                server=str(row["server"]),
                frames=_frames(row, to_stream),
                text=f"{row['client']} → {row['server']}: {what} {how}",
                key=(kind, str(row["client"]), row["client_port"], int(row["xid"]), int(t_call[i])),
            )
        )
    return out


def resend_alerts(
    trace: Trace,
    start_ns: int,
    end_ns: int,
    pct: float,
    to_stream: Callable[[int], int] = lambda f: f,
) -> list[Alert]:
    """The pairs whose re-sends in [start_ns, end_ns) were more than pct % of
    what they sent: RPC re-sends of the sends of the calls that started in it,
    or TCP segments re-sent (the ``tcp_retransmission`` events) of the segments
    carrying the pair's messages (both ways) that started in it."""
    tx = started_in(trace.transactions, start_ns, end_ns)
    counts: dict[tuple[str, str], list[int]] = {}  # pair -> [sends, re-sends, segs, re-sent]
    first: dict[tuple[str, str], list[int]] = {}  # pair -> frames of its re-sends (a few)
    for (client, server), g in tx.groupby(
        [tx["client"].astype(str), tx["server"].astype(str)], sort=False
    ):
        c = counts.setdefault((client, server), [0, 0, 0, 0])
        c[0] += int(g["n_calls"].sum())
        c[1] += int((g["n_calls"] - 1).clip(lower=0).sum())
        again = g[g["n_calls"] > 1]["call_frame_first"].dropna()
        first.setdefault((client, server), []).extend(int(f) for f in again[:5])
    hosts = {frozenset(pair): pair for pair in counts}
    m = trace.messages
    m = m[(m["ts_first_ns"] >= start_ns) & (m["ts_first_ns"] < end_ns)]
    for (a, b), n in (
        m.groupby([m["src"].astype(str), m["dst"].astype(str)], sort=False)["frames"].sum().items()
    ):
        pair = hosts.get(frozenset((a, b)))
        if pair is not None:
            counts[pair][2] += int(n)
    ev = trace.events
    ev = ev[
        (ev["kind"].astype(str) == "tcp_retransmission")
        & (ev["ts_ns"] >= start_ns)
        & (ev["ts_ns"] < end_ns)
    ]
    for a, b, frame in zip(ev["src"].astype(str), ev["dst"].astype(str), ev["frame"], strict=True):
        pair = hosts.get(frozenset((a, b)))
        if pair is not None:
            counts[pair][3] += 1
            if len(first[pair]) < 10:
                first[pair].append(int(frame))
    out = []
    for (client, server), (sends, resent, segs, retx) in counts.items():
        said = []
        if sends and resent * 100 > pct * sends:
            said.append(f"{count(resent, 'RPC re-send')} of {sends:,} sends ({resent / sends:.1%})")
        if segs and retx * 100 > pct * segs:
            said.append(f"{count(retx, 'TCP segment')} re-sent of {segs:,} ({retx / segs:.1%})")
        if said:
            out.append(
                Alert(
                    kind="resend",
                    ts_ns=start_ns,
                    client=client,
                    server=server,
                    frames=tuple(to_stream(f) for f in sorted(first[(client, server)])[:10]),
                    text=f"{client} → {server}: {', '.join(said)} in the interval (over {pct:g}%)",
                    key=("resend", client, server, start_ns),
                )
            )
    return out


# ---- the loop ---------------------------------------------------------------------------

ALERTS_SHOWN = 5  # alerts under the live table (the last ones; --json-lines has them all)


@dataclass(frozen=True)
class Screen:
    """What a live table shows after an interval is reported: its rows (as its
    lines say them), what the capture missed, the last alerts, the run's totals
    (``nfstrace.reports.watch_view`` draws it)."""

    start_ns: int  # the interval's start
    seconds: float  # its length
    rows: tuple[PairRow, ...]
    loss: CaptureLoss
    alerts: tuple[str, ...]  # the last ALERTS_SHOWN alert lines
    alerts_said: int  # all of them
    totals: str  # the run so far, in words
    fraction: bool = False  # times with milliseconds (an interval not whole seconds)


@dataclass(frozen=True)
class WatchOptions:
    interval_ns: int = 10 * NS
    keep_ns: int = 300 * NS
    keep_bytes: int = 256 * 1024 * 1024
    stall_ns: int = 5 * NS
    commit_ns: int = 1 * NS
    alert_after: int = 3  # intervals in a row with a verdict other than none
    resend_pct: float | None = None  # alert on re-sends over this % of an interval's sends
    evidence_dir: Path | None = Path("nfstrace-watch")  # None: no evidence written
    on_alert: str | None = None  # a command, run with the evidence pcap's path
    loss_warn_pct: float = 1.0  # a warning when an interval's capture loss is over this %
    # What is kept across intervals, bounded whatever the run's length and rate:
    max_calls: int = 4_000_000  # calls remembered as in the lines (8 bytes each)
    max_series: int = 10_000  # Prometheus label sets (client, server, op)
    # Traffic analysed before the first interval reported (at most an interval):
    # a TCP stream picked up in the middle of a record is in step by then, and a
    # reply in it finds its call.
    resync_ns: int = 2 * NS

    def lag(self) -> int:
        """Intervals an interval's calls are given to be answered before its lines
        are written: the stall threshold (a call waiting longer is a stall)."""
        return max(1, -(-self.stall_ns // self.interval_ns))

    def window_intervals(self) -> int:
        """Intervals analysed at once: the one reported and those its calls are
        given to be answered (so a stall is seen in a window whole)."""
        return self.lag() + 1


@dataclass
class Totals:
    """The whole run's counts (the summary)."""

    frames: int = 0
    bytes: int = 0
    first_ns: int | None = None
    last_ns: int | None = None
    intervals: int = 0
    calls: int = 0
    write_bytes: int = 0
    read_bytes: int = 0
    resent: int = 0
    alerts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ALERT_KINDS, 0))
    evidence: deque[str] = field(default_factory=lambda: deque(maxlen=EVIDENCE_LISTED))
    evidence_files: int = 0  # evidence pcaps written (the last EVIDENCE_LISTED named)
    left_out: int = 0  # frames of a second link type, not in the windows' pcaps
    late: int = 0  # frames that came after the clock had closed their interval
    cut_windows: int = 0  # windows the ring no longer held whole (--keep-bytes)
    holes: int = 0  # CaptureLoss summed over the intervals
    hole_bytes: int = 0
    kernel_dropped: int | None = None  # tcpdump's count (None: not asked, no -i)


# What is done with an evidence pcap besides writing it: its HTML report (the
# command line passes the report's writer: the reports are a stage above this one).
Reporter = Callable[[Trace, Path], None]


class Watcher:
    """Records in (``feed``), lines and alerts out (``emit``, ``json_out``)."""

    def __init__(
        self,
        options: WatchOptions,
        config: AnalysisConfig,
        emit: Callable[[str], None],
        json_out: TextIO | None = None,
        reporter: Reporter | None = None,
        snaplen: Callable[[], int] = lambda: DEFAULT_SNAPLEN,
        prometheus: Path | None = None,
        kernel_dropped: Callable[[], int | None] | None = None,
        publish: Callable[[str], None] | None = None,
        warn: Callable[[str], None] | None = None,
        show: Callable[[Screen], None] | None = None,
    ) -> None:
        self.o = options
        # warnings (a live table shows the lines, not these); the interval's Screen
        self.warn = warn or emit
        self.show = show
        self.screen: Screen | None = None
        self.recent: deque[str] = deque(maxlen=ALERTS_SHOWN)  # the last alert lines
        self.publish = publish  # given the Prometheus text after every interval (HTTP)
        # tcpdump's "dropped by kernel" so far (-i), asked every interval
        self.kernel_dropped = kernel_dropped
        self.prometheus = prometheus  # the textfile written after every interval
        self.metrics = (
            Metrics(max_series=options.max_series)
            if prometheus is not None or publish is not None
            else None
        )
        self.warned: set[str] = set()  # the bounds whose eviction was said
        self.prometheus_failed = False
        self.config = config
        self.emit = emit
        self.json_out = json_out
        self.reporter = reporter
        self.snaplen = snaplen
        self.ring = Ring(options.keep_ns, options.keep_bytes)
        self.totals = Totals()
        self.open: int | None = None  # the start of the interval being filled
        self.reported: int | None = None  # the start of the next interval to report
        self.alerted: dict[tuple[Any, ...], int] = {}  # alert key -> its call's time
        self.counted = CallSet(options.max_calls)  # the calls in the lines
        self.streaks: dict[tuple[str, str], int] = {}  # pair -> intervals with a problem
        self.ticked_ns = 0  # the last interval end the clock closed (not a packet)
        self.clock_ns = 0  # the clock's last time
        self.children: list[subprocess.Popen[bytes]] = []
        self.frames_in: dict[int, int] = {}  # interval start -> frames stamped in it (unreported)
        self.fraction = options.interval_ns % NS != 0
        self._tmp = tempfile.TemporaryDirectory(prefix="nfstrace-watch-")
        self.window_path = Path(self._tmp.name) / "window.pcap"

    def close(self) -> None:
        self._tmp.cleanup()
        for child in self.children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=10)

    def feed(self, record: Record) -> None:
        t = self.totals
        t.frames += 1
        t.bytes += len(record.data)
        if t.first_ns is None or self.open is None:
            t.first_ns = record.ts_ns
        t.last_ns = record.ts_ns if t.last_ns is None else max(t.last_ns, record.ts_ns)
        at = record.ts_ns // self.o.interval_ns * self.o.interval_ns
        self.frames_in[at] = self.frames_in.get(at, 0) + 1
        if self.open is not None and record.ts_ns < self.ticked_ns:
            t.late += 1  # its interval was closed by the clock before it came
        self._advance(record.ts_ns)
        self.ring.add(record)

    def tick(self, now_ns: int) -> None:
        """The clock (a live input without packets): every interval ended by
        now_ns is closed as a packet stamped now_ns would close it."""
        if self.open is None:  # (the first interval starts with the clock, then)
            self.totals.first_ns = now_ns
        self.clock_ns = max(self.clock_ns, now_ns)
        closed = self._advance(now_ns)
        if closed:
            self.ticked_ns = max(self.ticked_ns, closed)

    def _advance(self, ts_ns: int) -> int | None:
        """The intervals ended by ts_ns closed (reported); returns the last end."""
        iv = self.o.interval_ns
        if self.open is None:
            self.open = self.reported = ts_ns // iv * iv
        closed = None
        while ts_ns >= self.open + iv:  # the open interval (and any empty after it) end
            self.open += iv
            self._report(self.open)
            closed = self.open
        return closed

    def finish(self) -> None:
        """End of input: the intervals not reported yet (the last one partial)."""
        if self.open is None:
            return
        last = self.totals.last_ns
        self._report(max(self.clock_ns, last + 1 if last is not None else 0), final=True)

    def _report(self, now_ns: int, final: bool = False) -> None:
        """The window ending at now_ns analysed; the intervals before its last
        (all of them at the end) reported; the alerts as of now_ns."""
        assert self.reported is not None and self.open is not None
        iv = self.o.interval_ns
        # reported: each interval ended ``lag`` intervals ago (its calls had that
        # long to be answered); at the end, every one
        upto = now_ns if final else self.open - self.o.lag() * iv
        w = self.o.window_intervals() - (1 if final else 0)
        # (resync_ns before the first reported, at most an interval: a TCP stream
        # picked up in the middle of a record is in step again by then)
        start = min(self.reported - min(iv, self.o.resync_ns), self.open - w * iv)
        records = self.ring.between(start, now_ns)
        if self.ring.squeezed_ns >= self.reported:  # (packets of the intervals to report gone)
            self.totals.cut_windows += 1
            self._evictions()
        trace = self._analyse(records) if records else None
        active: list[set[tuple[str, str]]] = []  # the pairs that called, per interval
        intervals = []  # their starts
        while self.reported < upto:
            active.append(self._interval(self.reported, trace))
            intervals.append(self.reported)
            self.reported += iv
        self._alerts(trace, records, now_ns, start, active, intervals)
        if intervals:
            self._metrics()
        if self.screen is not None and self.screen.alerts_said != sum(self.totals.alerts.values()):
            self._show()  # (the alerts said after the intervals' lines)

    def _show(self) -> None:
        """The live table redrawn: the last interval, the alerts, the totals."""
        if self.show is None or self.screen is None:
            return
        self.screen = dataclasses.replace(
            self.screen,
            alerts=tuple(self.recent),
            alerts_said=sum(self.totals.alerts.values()),
            totals=self.summary()[0],
        )
        self.show(self.screen)

    def _alerts(
        self,
        trace: Trace | None,
        records: list[Record],
        now_ns: int,
        start: int,
        active: list[set[tuple[str, str]]],
        intervals: list[int],
    ) -> None:
        """The window's alerts said (those not said before)."""
        iv = self.o.interval_ns
        if trace is None:
            if active:  # (intervals without a call end every pair's run of verdicts)
                self.streaks.clear()
            return
        tx = trace.transactions
        frames = [r.frame for r in records]

        def to_stream(local: int) -> int:
            return frames[local - 1] if 0 < local <= len(frames) else -local

        alerts = [
            a
            for a in call_alerts(tx, now_ns, self.o.stall_ns, self.o.commit_ns, to_stream)
            if a.key not in self.alerted
        ]
        alerts += self._verdict_alerts(trace, active, now_ns, records)
        if self.o.resend_pct is not None:
            for start_ns in intervals:
                alerts += resend_alerts(
                    trace, start_ns, start_ns + iv, self.o.resend_pct, to_stream
                )
        for a in alerts:
            self.alerted[a.key] = a.ts_ns
        oldest = start - iv  # a call older than the window cannot be seen again
        for k in [k for k, ts in self.alerted.items() if ts < oldest]:
            del self.alerted[k]
        if alerts:
            self._alert(alerts, now_ns)

    def _metrics(self) -> None:
        """The Prometheus text published, the textfile written anew (a failure
        said once, not fatal)."""
        if self.metrics is None:
            return
        text = self.metrics.text(self.totals.alerts, self.totals.frames)
        if self.publish is not None:
            self.publish(text)
        if self.prometheus is None:
            return
        try:
            write_atomically(self.prometheus, text)
            self.prometheus_failed = False
        except OSError as e:
            if not self.prometheus_failed:
                self.warn(f"nfstrace: warning: --prometheus {self.prometheus}: {e.strerror or e}")
            self.prometheus_failed = True

    def _analyse(self, records: list[Record]) -> Trace:
        self.totals.left_out += write_pcap(self.window_path, records, self.snaplen())
        return load(str(self.window_path), self.config)

    def _interval(self, start_ns: int, trace: Trace | None) -> set[tuple[str, str]]:
        """The interval's lines written; returns the pairs that called in it."""
        seconds = self.o.interval_ns / NS
        end_ns = start_ns + self.o.interval_ns
        rows = []
        if trace is not None:
            tx = trace.transactions
            if self.metrics is not None:
                self.metrics.add(new_calls(tx, start_ns, end_ns, self.counted), end_ns)
            rows = interval_rows(tx, start_ns, end_ns, trace.diagnosis.verdict, self.counted)
            self.counted.add(call_keys(started_in(tx, start_ns, end_ns)), end_ns)
        elif self.metrics is not None:
            self.metrics.interval_end_ns = end_ns
        self.counted.forget_before(end_ns - self.o.keep_ns)
        self._evictions()
        frames = self.frames_in.pop(start_ns, 0)
        for old in [s for s in self.frames_in if s < start_ns]:  # (late frames' intervals)
            del self.frames_in[old]
        loss = capture_loss(trace, start_ns, end_ns, frames, self._kernel_dropped())
        if self.metrics is not None:
            self.metrics.add_loss(loss)
        t = self.totals
        t.intervals += 1
        t.holes += loss.holes
        t.hole_bytes += loss.hole_bytes
        for r in rows:
            t.calls += r.calls
            t.write_bytes += r.write_bytes
            t.read_bytes += r.read_bytes
            t.resent += r.resent
            self.emit(row_text(start_ns, seconds, r, self.fraction))
        if not rows:
            self.emit(f"{clock(start_ns, self.fraction)}  no RPC calls")
        said = loss_text(start_ns, loss, self.o.loss_warn_pct, self.fraction)
        if said is not None:
            (self.warn if said.startswith("nfstrace: warning:") else self.emit)(said)
        self._json_interval(start_ns, seconds, rows, loss)
        self.screen = Screen(start_ns, seconds, tuple(rows), loss, (), 0, "", self.fraction)
        self._show()
        return {(r.client, r.server) for r in rows}

    def _kernel_dropped(self) -> int | None:
        """tcpdump's drops since the last interval (None: not known)."""
        so_far = self.kernel_dropped() if self.kernel_dropped is not None else None
        if so_far is None:
            return None
        before = self.totals.kernel_dropped or 0
        self.totals.kernel_dropped = max(before, so_far)
        return max(0, so_far - before)

    def _evictions(self) -> None:
        """A bound that let go of something: said once (counted in the summary)."""
        for name, n, what in self._evicted():
            if n and name not in self.warned:
                self.warned.add(name)
                self.warn(f"nfstrace: warning: {what} (counted in the summary)")

    def _evicted(self) -> list[tuple[str, int, str]]:
        """(bound, things let go, what it means) for every bound of the run."""
        return [
            (
                "ring",
                self.totals.cut_windows,
                f"--keep-bytes {self.o.keep_bytes / 2**20:,.1f} MiB holds less than the "
                "window analysed (an interval and the stall threshold after it): the lines "
                "miss the calls of the packets it let go (give more --keep-bytes); windows cut",
            ),
            (
                "calls",
                self.counted.evicted,
                f"more than {self.o.max_calls:,} calls in --keep: the oldest forgotten "
                "(a re-send of one of them could be counted twice)",
            ),
            (
                "series",
                self.metrics.evicted if self.metrics is not None else 0,
                f"more than {self.o.max_series:,} client, server and op label sets: "
                "the least recently called dropped from --prometheus",
            ),
        ]

    def _json_interval(
        self, start_ns: int, seconds: float, rows: list[PairRow], loss: CaptureLoss
    ) -> None:
        self._json(
            {
                "type": "interval",
                "start": stamp(start_ns),
                "start_ns": start_ns,
                "seconds": seconds,
                "pairs": [r.json(seconds) for r in rows],
                "capture": loss.json(),
            }
        )

    def _verdict_alerts(
        self, trace: Trace, active: list[set[tuple[str, str]]], now_ns: int, records: list[Record]
    ) -> list[Alert]:
        """A pair whose verdict is not none in alert_after intervals in a row in
        which it called (an interval without its calls ends the run)."""
        verdict = trace.diagnosis.verdict
        pairs = {(p.client, p.server): p for p in (verdict.pairs if verdict else [])}
        out = []
        for called in active:
            for pair in list(self.streaks):
                if pair not in called:
                    del self.streaks[pair]
            for pair in called:
                p = pairs.get(pair)
                if p is None or p.primary == "none":
                    self.streaks.pop(pair, None)
                    continue
                n = self.streaks[pair] = self.streaks.get(pair, 0) + 1
                if n != self.o.alert_after:
                    continue
                out.append(
                    Alert(
                        kind="verdict",
                        ts_ns=now_ns,
                        client=p.client,
                        server=p.server,
                        frames=(records[0].frame, records[-1].frame),
                        text=f"{p.client} → {p.server}: {cause_words(p)}, {n} intervals in a row",
                        key=("verdict", p.client, p.server, now_ns),
                    )
                )
        return out

    def _alert(self, alerts: list[Alert], now_ns: int) -> None:
        evidence = self._evidence(now_ns) if self.o.evidence_dir is not None else None
        for a in alerts:
            self.totals.alerts[a.kind] += 1
            line = a.line() + (f"; evidence {evidence}" if evidence else "")
            self.recent.append(line)
            self.emit(line)
            self._json(
                {
                    "type": "alert",
                    "kind": a.kind,
                    "time": stamp(a.ts_ns),
                    "ts_ns": a.ts_ns,
                    "client": a.client,
                    "server": a.server,
                    "frames": list(a.frames),
                    "text": a.text,
                    "evidence": str(evidence) if evidence else None,
                }
            )
        if evidence is not None and self.o.on_alert:
            self.children = [c for c in self.children if c.poll() is None]  # (reaped)
            cmd = [*shlex.split(self.o.on_alert), str(evidence)]
            try:
                self.children.append(subprocess.Popen(cmd))
            except OSError as e:
                self.warn(f"nfstrace: warning: --on-alert {cmd[0]}: {e.strerror or e}")

    def _evidence(self, now_ns: int) -> Path:
        """The ring up to now_ns as DIR/alert-TIME.pcap, its HTML report beside it."""
        directory = self.o.evidence_dir
        assert directory is not None
        directory.mkdir(parents=True, exist_ok=True)
        name = "alert-" + datetime.fromtimestamp(now_ns / NS, UTC).strftime("%Y%m%dT%H%M%S")
        path = directory / f"{name}.pcap"
        n = 1
        while path.exists():
            n += 1
            path = directory / f"{name}-{n}.pcap"
        write_pcap(path, self.ring.between(-1, now_ns), self.snaplen())
        self.totals.evidence.append(str(path))
        self.totals.evidence_files += 1
        if self.reporter is not None:
            self.reporter(load(str(path), self.config), path.with_name(path.name + ".report.html"))
        return path

    def _json(self, obj: dict[str, Any]) -> None:
        if self.json_out is not None:
            import json

            self.json_out.write(json.dumps(obj, ensure_ascii=False) + "\n")
            self.json_out.flush()

    def summary(self) -> list[str]:
        t = self.totals
        span = (t.last_ns - t.first_ns) / NS if t.first_ns is not None and t.last_ns else 0.0
        alerts = ", ".join(f"{k} {v}" for k, v in t.alerts.items())
        lines = [
            f"watched {t.frames:,} frames ({t.bytes:,} bytes) over {span:,.3f} s of capture time "
            f"in {t.intervals:,} intervals: {t.calls:,} calls, WRITE {t.write_bytes:,} bytes, "
            f"READ {t.read_bytes:,} bytes, {t.resent:,} re-sends",
            f"alerts: {alerts}" + (f"; evidence: {', '.join(t.evidence)}" if t.evidence else ""),
        ]
        if t.evidence_files > len(t.evidence):
            lines[-1] += f" (the last {len(t.evidence)} of {t.evidence_files:,} files)"
        lines += [f"{what}: {n:,}" for _, n, what in self._evicted() if n]
        if t.holes:
            lines.append(
                f"capture loss {CaptureLoss(t.frames, t.holes, 0).pct:.2f}%: "
                f"{count(t.holes, 'TCP hole')} ({t.hole_bytes:,} bytes never captured) in "
                f"{count(t.frames, 'frame')}"
            )
        if t.left_out:
            lines.append(f"{t.left_out:,} frames of a second link type were not analysed")
        if t.late:
            lines.append(
                f"{t.late:,} frames came after the clock had closed their interval "
                "(their calls are not in the lines)"
            )
        return lines

    def json_summary(self) -> None:
        t = self.totals
        self._json(
            {
                "type": "summary",
                "frames": t.frames,
                "bytes": t.bytes,
                "intervals": t.intervals,
                "calls": t.calls,
                "write_bytes": t.write_bytes,
                "read_bytes": t.read_bytes,
                "resent": t.resent,
                "alerts": t.alerts,
                "evidence": list(t.evidence),
                "evidence_files": t.evidence_files,
                "evicted": {name: n for name, n, _ in self._evicted()},
                "capture": {
                    "holes": t.holes,
                    "hole_bytes": t.hole_bytes,
                    "kernel_dropped": t.kernel_dropped,
                },
            }
        )


def records(frames: Iterator[tuple[int, int, Any, int, int]]) -> Iterator[Record]:
    """The reader's frames as records (their bytes copied out of its buffer)."""
    for n, (ts, linktype, data, wire, _) in enumerate(frames, 1):
        yield Record(ts, n, linktype, bytes(data), wire)
