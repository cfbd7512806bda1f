"""Capture quality: where the capture was taken, and what it failed to record
(snaplen truncation, interface drops, bytes the capture missed, silent gaps),
so that findings it limits are read with that in mind.

Capture point, from five kinds of evidence (strongest first):

* TCP/UDP checksums (decisive): a host that leaves its checksums to the NIC
  (transmit offload) hands the capture its outgoing packets before the NIC
  fills them in, so they are captured with bad checksums, on that host only.
  Bad on (nearly) all of one side's sampled packets and good on the other
  side's: the capture ran on the first side.  Nothing else can say so; it
  decides over the votes below.
* TCP handshakes: on the client, SYN -> SYN-ACK is a network round trip and
  SYN-ACK -> ACK the client's own reaction (short); on the server the reverse.
  Both long: the capture sat between them.
* TTL / hop limit: a host's packets still carry its initial value (64, 128,
  255) only where they were captured before any router; if one side's do and
  the other's do not, the capture was on the first side.  Both initial: one
  L2 segment (no evidence); neither: between routers.
* Data -> ACK round trips (events ``tcp_ack_rtt``): on the client, its data
  waits a network round trip for the server's ACK while the server's data is
  acknowledged by the client's own stack (fast); on the server the reverse.
  Weak (a host that delays its ACKs looks far away), and, like the pace, it
  decides only at ACK_RATIO or more: on one network segment without added
  delay both are stack times.
* Pace of answered calls: on the client the call -> reply time (from the
  call's last packet) includes the round trip, on the server the reply ->
  next-call time does.  Weak: processing times can outweigh a short round
  trip, so it decides only when nothing stronger does, and only when one
  side is at least PACE_RATIO times the other.  Without a round trip to see
  (one L2 segment, no added delay) the two medians compare the server's
  time with the client's, not the capture point: two lab runs of the same
  loss-free UDP scenario gave ratios of 1.11 and 0.69, so a smaller margin
  would be a coin toss.

The three timing votes (handshake, ACK round trips, pace) abstain when the
timestamps come in steps of COARSE_CLOCK_NS or more (a 10 ms clock stamps a
call and its reply alike): a 0 µs interval is then the clock's, not the
network's, and "unknown" is said rather than a guess.

Its size (over 600 lines): each quality check is short, but they share the
capture-point votes and the findings' wording, which belong together.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from nfstrace.analysis.findings import Finding
from nfstrace.analysis.grouping import first_rows, is_value, row_codes, rows_where, sorted_search
from nfstrace.analysis.pace import call_ends_ns
from nfstrace.combining import unique_first
from nfstrace.inference import TYPICAL_BODY_OFFSET, WRITE_HEADER, write_headers
from nfstrace.jsonable import NOT_IN_JSON, json_field
from nfstrace.match import reply_count_bound
from nfstrace.protocol.rpc import MIN_CUT_CALL_LEN
from nfstrace.text import bytes_text, count

INITIAL_TTLS = frozenset((32, 64, 128, 255))
# A handshake interval this many times the other one decides a vote.
HANDSHAKE_RATIO = 2.0
# Pace: call->reply over reply->next-call beyond this (or below its inverse) votes;
# closer than that, processing times, not a round trip, make the difference.
PACE_RATIO = 2.0
# Data->ACK: the median over connections of client-data / server-data round trips
# beyond this (or below its inverse) votes.
ACK_RATIO = 2.0
# Checksums: a vote needs this many packets checked each way (ParseStats
# directions), bad on at least CHECKSUM_BAD_SHARE of one side's and at most
# CHECKSUM_GOOD_SHARE of the other's.
CHECKSUM_MIN_CHECKED = 4
CHECKSUM_BAD_SHARE = 0.9
CHECKSUM_GOOD_SHARE = 0.1
# Timestamps all multiples of this (or a larger power of ten): too coarse to time
# round trips; the timing votes abstain.  At least CLOCK_MIN_TIMES distinct times
# are needed to tell.
COARSE_CLOCK_NS = 10_000_000
CLOCK_MIN_TIMES = 8
CLOCK_SAMPLE = 4096  # times whose step is found first (an upper bound of the step)
CLOCK_CHUNK = 1 << 20  # times looked at at a time
# Both handshake intervals at least this share of the total: captured in between.
BETWEEN_SHARE = 0.25
# An interval with no packet at all this long, while calls were outstanding.
GAP_NS = 1_000_000_000
# Timestamps running backwards in more than this share of the answered calls
# (replies stamped before their call) or of the messages (stamped before one
# captured earlier) make the times and rates doubtful: that limits conclusions.
CLOCK_BACK_SHARE = 0.02

# The snaplen that keeps what the analysis reads of the WRITEs (snaplen_needed):
# the frames' headers (the longest the capture cut, else Ethernet, IPv4 and TCP
# with timestamps), the record mark (TCP), then the more of a WRITE call
# through its stable_how (its header less the data's length) and a whole WRITE
# reply (count, committed and verifier end it) -- as the WRITEs seen show them,
# else as the longest typical: an NFSv4.1 WRITE call, an NFSv3 WRITE3resok with
# both wcc attributes (24 + 4 + 28 + 88 + 16 bytes).  Rounded up to SNAPLEN_STEP.
TYPICAL_FRAME_HEADERS = 14 + 20 + 32
RECORD_MARK = 4
TYPICAL_WRITE_REPLY = 24 + 4 + 28 + 88 + 16
SNAPLEN_STEP = 16

EVIDENCE_COLUMNS: dict[str, str] = {
    "method": "checksum / ttl / handshake / ack / pace (strongest first)",
    "vote": "client / server / between / none",
    "strength": "decisive / strong / weak",
    "detail": "the numbers behind the vote",
}

GAP_COLUMNS: dict[str, str] = {
    "start_ns": "last packet before the gap",
    "end_ns": "first packet after it",
    "duration_ns": "its length",
    "outstanding": "calls waiting for their reply all through it",
}


@dataclass(frozen=True)
class CaptureQuality:
    capture_point: str  # client / server / between / unknown
    evidence: pd.DataFrame  # EVIDENCE_COLUMNS
    snaplens: list[int]  # per file, its header's snaplen (0: unknown)
    truncated_frames: int
    truncated_messages: int
    truncated_writes: int  # WRITE calls cut short
    writes_stable_unknown: int  # ... whose stable_how was not captured
    writes_count_unknown: int  # ... whose count was not captured
    interface_drops: int
    duplicate_frames: int
    capture_missed_bytes: int  # TCP bytes the receiver acknowledged, never captured
    capture_missed_ranges: int
    gaps: pd.DataFrame = field(metadata=json_field(convert=len))  # GAP_COLUMNS
    warnings: list[str]
    # the capture's clock ran backwards: replies stamped before their call (their
    # latency is negative in the transactions table; analyses take it as 0) and
    # messages stamped before one captured earlier (in frame order)
    replies_before_call: int = 0
    answered: int = field(default=0, metadata=NOT_IN_JSON)
    messages_back_in_time: int = 0
    messages: int = field(default=0, metadata=NOT_IN_JSON)
    # WRITE/READ replies claiming more bytes than their call asked for or their
    # record carried (match counts what the call carried: reply_count_bound)
    implausible_reply_counts: int = 0
    # per file, the length its frames cut short were cut to: the length actually
    # captured, whatever its header says (0: no frame cut)
    cut_lengths: list[int] = field(default_factory=list)
    # a snaplen that keeps what the analysis reads of the WRITEs seen (0: no
    # frame cut): ``snaplen_needed``
    snaplen_needed: int = 0
    # WRITEs some of whose values were inferred (transactions.inferred), and
    # the bytes they wrote
    writes_inferred: int = 0
    bytes_inferred: int = 0

    def recapture_text(self) -> str:
        """What snaplen reads what this one hid: ``snaplen_needed``, or, when the
        frames were already cut no shorter, whole frames (the headers it hid
        began part-way through segments, past any useful snaplen)."""
        cut = max(self.cut_lengths, default=0)
        if self.snaplen_needed > cut:
            return f"capture again with -s {self.snaplen_needed} to read them"
        return (
            f"-s {self.snaplen_needed} reads the messages that begin a segment; those that "
            "began part-way through one need whole frames (-s 0)"
        )

    @property
    def cut_text(self) -> str:
        """'96 bytes' (or '96, 128 bytes'): what the frames were cut to."""
        lengths = sorted({n for n in self.cut_lengths if n})
        return f"{', '.join(str(n) for n in lengths)} bytes" if lengths else "an unknown length"

    @property
    def clock_limits(self) -> bool:
        """Enough backwards time to doubt the times and rates (CLOCK_BACK_SHARE)."""
        return self.replies_before_call > CLOCK_BACK_SHARE * max(self.answered, 1) or (
            self.messages_back_in_time > CLOCK_BACK_SHARE * max(self.messages, 1)
        )

    def clock_text(self) -> str:
        parts = []
        if self.replies_before_call:
            one = self.replies_before_call == 1
            parts.append(
                f"{self.replies_before_call:,} "
                + ("reply stamped before its call" if one else "replies stamped before their call")
            )
        if self.messages_back_in_time:
            parts.append(
                f"{self.messages_back_in_time:,} of {self.messages:,} messages stamped "
                "before one captured earlier"
            )
        return "the capture's clock ran backwards: " + ", ".join(parts) if parts else ""

    def findings(self) -> list[Finding]:
        out: list[Finding] = []
        reasons = "; ".join(
            f"{r.method}: {r.detail}" for r in self.evidence.itertuples() if r.vote != "none"
        )
        if not reasons and len(self.evidence):
            reasons = "inconclusive: " + "; ".join(
                f"{r.method}: {r.detail}" for r in self.evidence.itertuples()
            )
        out.append(
            Finding(
                kind="capture_point",
                title=f"Capture point: {self.capture_point}"
                + (f" ({reasons})" if reasons else " (no timing or TTL evidence)"),
                details={"capture_point": self.capture_point},
            )
        )
        if self.interface_drops:
            out.append(
                Finding(
                    kind="capture_drops",
                    title=f"The capturing interface dropped {self.interface_drops} packets: "
                    "gaps and losses may be the capture's, not the network's",
                    severity="warning",
                    limits_conclusions=True,
                    details={"interface_drops": self.interface_drops},
                )
            )
        if self.capture_missed_bytes:
            out.append(
                Finding(
                    kind="capture_missed_bytes",
                    title=f"The capture missed {bytes_text(self.capture_missed_bytes)} of TCP "
                    f"data ({self.capture_missed_ranges:,} ranges) that the receiver acknowledged: "
                    "lost by the capture, not the network",
                    severity="warning",
                    limits_conclusions=True,
                    details={
                        "bytes": self.capture_missed_bytes,
                        "ranges": self.capture_missed_ranges,
                    },
                )
            )
        if self.truncated_frames:
            hidden = []
            if self.writes_stable_unknown:
                hidden.append(f"stable_how of {self.writes_stable_unknown} WRITEs")
            if self.writes_count_unknown:
                hidden.append(f"the count of {self.writes_count_unknown} WRITEs")
            title = (
                f"{self.truncated_frames} frames were cut by the snaplen to {self.cut_text}; "
                f"{self.truncated_messages} RPC messages are incomplete but were timed and "
                "matched"
            )
            if hidden:
                title += "; not captured: " + ", ".join(hidden)
            if self.writes_inferred:
                title += (
                    f"; {count(self.writes_inferred, 'WRITE')} ({bytes_text(self.bytes_inferred)})"
                    " counted from what it left (record and datagram lengths, TCP sequence "
                    "numbers: transactions.inferred)"
                )
            if hidden or self.writes_inferred:
                title += "; " + self.recapture_text()
            out.append(
                Finding(
                    kind="snaplen_truncation",
                    title=title,
                    severity="warning" if hidden else "info",
                    limits_conclusions=bool(hidden),
                    details={
                        "truncated_frames": self.truncated_frames,
                        "truncated_messages": self.truncated_messages,
                        "cut_lengths": self.cut_lengths,
                        "writes_stable_unknown": self.writes_stable_unknown,
                        "writes_count_unknown": self.writes_count_unknown,
                        "writes_inferred": self.writes_inferred,
                        "bytes_inferred": self.bytes_inferred,
                        "snaplen_needed": self.snaplen_needed,
                    },
                )
            )
        if self.replies_before_call or self.messages_back_in_time:
            text = self.clock_text()
            out.append(
                Finding(
                    kind="clock_backwards",
                    title=f"{text[0].upper()}{text[1:]} (a clock stepped back, or captures "
                    "of interfaces with clocks apart merged): calls are matched to replies in "
                    "capture order; a negative latency counts as 0 in the analyses",
                    severity="warning",
                    limits_conclusions=self.clock_limits,
                    details={
                        "replies_before_call": self.replies_before_call,
                        "messages_back_in_time": self.messages_back_in_time,
                    },
                )
            )
        if self.implausible_reply_counts:
            n = self.implausible_reply_counts
            out.append(
                Finding(
                    kind="implausible_reply_count",
                    title=f"{n:,} WRITE or READ repl{'ies' if n > 1 else 'y'} claimed more bytes "
                    "than the call asked for or the record carried (damaged, or a faulty "
                    "server): counted as what the call carried",
                    severity="warning",
                    details={"replies": n},
                )
            )
        if len(self.gaps):
            out.append(
                Finding(
                    kind="long_silence",
                    title=f"{len(self.gaps)} interval{'s' * (len(self.gaps) > 1)} of at least "
                    f"{GAP_NS / 1e9:.0f} s with "
                    "no packet while calls were outstanding "
                    f"({self.gaps['duration_ns'].sum() / 1e9:.3f} s in all): a stalled "
                    "peer or a capture that stopped recording",
                    severity="info",
                    details={"gaps": len(self.gaps)},
                )
            )
        return out


# ---- capture point --------------------------------------------------------------------


HANDSHAKE_KINDS = ("tcp_syn", "tcp_syn_ack", "tcp_handshake_ack")
HANDSHAKE_TIME_COLUMNS: dict[str, str] = {
    "conn": "connection id (connections in order of their first handshake event)",
    "syn_ns": "last SYN (a re-sent SYN restarts the clock); -1 if none",
    "syn_ack_ns": "last SYN-ACK; -1 if none",
    "ack_first_ns": "first handshake ACK; -1 if none",
    "ack_last_ns": "last handshake ACK; -1 if none",
}


def handshake_times(events: pd.DataFrame | None) -> pd.DataFrame:
    """Per connection, when each packet of its TCP handshake was seen
    (``HANDSHAKE_TIME_COLUMNS``).  One pass over the events for all
    connections: a capture of many short connections has tens of thousands."""
    if events is None or not len(events) or "kind" not in events:
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in HANDSHAKE_TIME_COLUMNS})
    # each event's kind coded among HANDSHAKE_KINDS (-1: another kind), then the
    # handshake's rows of the columns read (events.kind: a category column of its own)
    kind = pd.Index(HANDSHAKE_KINDS).get_indexer(events["kind"]).astype("int64")
    hs = kind >= 0
    kind = kind[hs]
    conn, conns = pd.factorize(events["conn"].to_numpy()[hs])  # first-appearance order
    t = events["ts_ns"].to_numpy("int64")[hs]
    last = np.full((len(HANDSHAKE_KINDS), len(conns)), -1, "int64")
    np.maximum.at(last, (kind, conn), t)  # times are >= 0: -1 stays only where none
    is_ack = kind == 2
    first_ack = np.full(len(conns), np.iinfo("int64").max, "int64")
    np.minimum.at(first_ack, conn[is_ack], t[is_ack])
    return pd.DataFrame(
        {
            "conn": np.asarray(conns, dtype="int64"),
            "syn_ns": last[0],
            "syn_ack_ns": last[1],
            "ack_first_ns": np.where(last[2] >= 0, first_ack, -1),
            "ack_last_ns": last[2],
        }
    )


ACK_RTT_COLUMNS: dict[str, str] = {
    "conn": "connection id (connections that carried RPC calls)",
    "client_data_ns": "smallest round trip from a client data segment to the server's ACK "
    "covering it, as seen at the capture point; -1 if none",
    "server_data_ns": "the same for the server's data and the client's ACK; -1 if none",
}


def _other_than(a: pd.Series, rows_a: np.ndarray, b: pd.Series, rows_b: np.ndarray) -> np.ndarray:
    """``a`` at ``rows_a`` differs from ``b`` at ``rows_b`` (as objects: a missing
    value differs from any): two category columns of strings compared by their
    codes, each's categories found among the other's once (no string per row)."""
    if all(
        isinstance(c.dtype, pd.CategoricalDtype)
        and pd.api.types.is_string_dtype(c.cat.categories.dtype)
        for c in (a, b)
    ):
        into_b = pd.Index(b.cat.categories).get_indexer(a.cat.categories)
        into_b = np.append(np.where(into_b >= 0, into_b, -2), -2)  # (absent, missing: -2)
        code_b = b.cat.codes.to_numpy()[rows_b].astype("int64")
        code_b[code_b < 0] = -3  # (a missing value differs from any)
        return into_b[a.cat.codes.to_numpy()[rows_a]] != code_b
    return a.take(rows_a).to_numpy(dtype=object) != b.take(rows_b).to_numpy(dtype=object)


def ack_round_trips(events: pd.DataFrame | None, transactions: pd.DataFrame) -> pd.DataFrame:
    """Per RPC connection, the smallest data->ACK round trip of each direction
    (``ACK_RTT_COLUMNS``), told apart by which side sent the calls."""

    def empty() -> pd.DataFrame:  # (made only when returned: a frame of Series costs)
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in ACK_RTT_COLUMNS})

    if events is None or not len(events) or "kind" not in events or "conn" not in transactions:
        return empty()
    # in numpy: a few columns, a few rows (a merge and a drop_duplicates cost more)
    is_rtt = (events["kind"] == "tcp_ack_rtt").to_numpy(dtype=bool)
    tx = transactions
    keep = (tx["n_calls"] > 0).to_numpy(dtype=bool) & tx["conn"].notna().to_numpy(dtype=bool)
    keep = keep & tx["client"].notna().to_numpy(dtype=bool)
    if not is_rtt.any() or not keep.any():
        return empty()
    # each connection's client: that of its first call (the rows' integers and
    # the first rows' addresses: not a Python object per transaction)
    kept = np.flatnonzero(keep)
    tx_conns, first = unique_first(tx["conn"].to_numpy("int64", na_value=0)[kept])
    client_row = kept[first]
    rtt = np.flatnonzero(is_rtt)
    ev_conn = events["conn"].to_numpy("int64")[rtt]
    at = np.minimum(np.searchsorted(tx_conns, ev_conn), len(tx_conns) - 1)
    called = tx_conns[at] == ev_conn  # connections that carried calls
    if not called.any():
        return empty()
    server_data = _other_than(events["src"], rtt[called], tx["client"], client_row[at[called]])
    duration = events["duration_ns"].to_numpy("int64")[rtt[called]]
    # the smallest per connection (in order) and side, -1 where a side has none
    conns, conn = np.unique(ev_conn[called], return_inverse=True)
    none = np.iinfo("int64").max
    least = np.full((len(conns), 2), none, "int64")
    np.minimum.at(least, (conn, server_data.astype("int64")), duration)
    least[least == none] = -1
    out = pd.DataFrame(dict(zip(ACK_RTT_COLUMNS, (conns, least[:, 0], least[:, 1]), strict=True)))
    out.columns.name = "side"  # (as the pivot table it stands for named them)
    return out


def _ack_vote(events: pd.DataFrame, transactions: pd.DataFrame) -> dict[str, str] | None:
    rtt = ack_round_trips(events, transactions)
    both = rtt[(rtt["client_data_ns"] > 0) & (rtt["server_data_ns"] > 0)]
    if both.empty:
        return None
    ratio = float(np.median(both["client_data_ns"] / both["server_data_ns"]))
    vote = "client" if ratio >= ACK_RATIO else "server" if ratio <= 1 / ACK_RATIO else "none"
    return {
        "method": "ack",
        "vote": vote,
        "strength": "weak",
        "detail": f"{len(both)} connections: median data->ACK round trip of the client's "
        f"data / of the server's = {ratio:.3g}",
    }


def _handshake_vote(events: pd.DataFrame) -> dict[str, str] | None:
    if not len(events):
        return None
    h = handshake_times(events)
    syn, syn_ack, ack = (h[c].to_numpy() for c in ("syn_ns", "syn_ack_ns", "ack_last_ns"))
    a = syn_ack - syn  # SYN -> SYN-ACK
    b = ack - syn_ack  # SYN-ACK -> ACK
    ok = (syn >= 0) & (syn_ack >= 0) & (ack >= 0) & (a >= 0) & (b >= 0) & (a + b != 0)
    a, b = a[ok], b[ok]
    ratios = a / np.maximum(b, 1)
    client = a >= HANDSHAKE_RATIO * b
    server = ~client & (b >= HANDSHAKE_RATIO * a)
    between = ~client & ~server & (np.minimum(a, b) >= BETWEEN_SHARE * (a + b))
    votes = np.select([client, server, between], ["client", "server", "between"], "")
    votes = votes[votes != ""]
    if not len(votes):
        return None
    # the most common vote; a tie goes to the one seen first (as value_counts orders it)
    names, first, counts = np.unique(votes, return_index=True, return_counts=True)
    best = min(range(len(names)), key=lambda i: (-counts[i], first[i]))
    vote, n = str(names[best]), int(counts[best])
    return {
        "method": "handshake",
        "vote": vote if n * 2 > len(votes) else "none",
        "strength": "strong",
        "detail": f"{n} of {len(votes)} handshakes say {vote} (median SYN->SYN-ACK / "
        f"SYN-ACK->ACK = {float(np.median(ratios)):.1f})",
    }


def busiest_pair(transactions: pd.DataFrame) -> tuple[str, str] | None:
    """The client/server pair with the most calls (of ties, the first seen), as
    ``value_counts().index[0]`` of the calls' pairs says; None without calls.
    Counted by integer codes: no Python string per row."""
    called = (transactions["n_calls"] > 0).to_numpy(dtype=bool)
    if not called.any():
        return None
    both = [transactions[c] for c in ("client", "server")]
    if all(
        isinstance(c.dtype, pd.CategoricalDtype)
        and pd.api.types.is_string_dtype(c.cat.categories.dtype)
        for c in both
    ):
        return _busiest_by_codes(both[0], both[1], np.flatnonzero(called))
    calls = transactions.loc[called, ["client", "server"]]
    (client, clients), (server, servers) = (pd.factorize(calls[c]) for c in ("client", "server"))
    known = (client >= 0) & (server >= 0)  # (value_counts leaves missing values out)
    client, server = client[known], server[known]
    pair = row_codes([client, server])  # numbered as first seen
    at = first_rows(pair)[np.argmax(np.bincount(pair))]  # argmax: the first of ties
    return clients[client[at]], servers[server[at]]


def _busiest_by_codes(
    client: pd.Series, server: pd.Series, calls: np.ndarray
) -> tuple[str, str] | None:
    """``busiest_pair`` of category columns (``calls``: the rows with a call): a
    count per pair of their codes, of the pairs most called the one whose first
    call comes first (no hash of the rows)."""
    c = client.cat.codes.to_numpy()[calls].astype("int64")
    s = server.cat.codes.to_numpy()[calls].astype("int64")
    known = (c >= 0) & (s >= 0)  # (value_counts leaves missing values out)
    if not known.all():
        c, s = c[known], s[known]
    if not len(c):
        return None
    pair = c * len(server.cat.categories) + s
    del c, s
    counts = np.bincount(pair)
    tied = np.flatnonzero(counts == counts.max())
    first = min((int(np.argmax(pair == p)), int(p)) for p in tied)[1]
    i, j = divmod(first, len(server.cat.categories))
    return client.cat.categories[i], server.cat.categories[j]


def _ttl_vote(transactions: pd.DataFrame, stats: Any) -> dict[str, str] | None:
    busiest = busiest_pair(transactions)
    if busiest is None:
        return None
    client, server = busiest
    ttl = {(d.src, d.dst): d.ttl_max for d in stats.directions}
    c, s = ttl.get((client, server)), ttl.get((server, client))
    if c is None or s is None or c < 0 or s < 0:
        return None
    c_home, s_home = c in INITIAL_TTLS, s in INITIAL_TTLS
    vote = {
        (True, False): "client",
        (False, True): "server",
        (False, False): "between",
        (True, True): "none",
    }[(c_home, s_home)]
    return {
        "method": "ttl",
        "vote": vote,
        "strength": "strong",
        "detail": f"client's packets TTL {c}, server's {s}"
        + (" (both initial: one network segment)" if vote == "none" else ""),
    }


def _checksum_vote(transactions: pd.DataFrame, stats: Any) -> dict[str, str] | None:
    busiest = busiest_pair(transactions)
    if busiest is None:
        return None
    client, server = busiest
    facts = {(d.src, d.dst): d for d in stats.directions}
    c, s = facts.get((client, server)), facts.get((server, client))
    if c is None or s is None:
        return None
    cn, sn = getattr(c, "checksums_checked", 0), getattr(s, "checksums_checked", 0)
    cb, sb = getattr(c, "checksums_bad", 0), getattr(s, "checksums_bad", 0)
    if cn < CHECKSUM_MIN_CHECKED or sn < CHECKSUM_MIN_CHECKED or not cb + sb:
        return None
    c_bad, s_bad = cb / cn, sb / sn
    if c_bad >= CHECKSUM_BAD_SHARE and s_bad <= CHECKSUM_GOOD_SHARE:
        vote = "client"
    elif s_bad >= CHECKSUM_BAD_SHARE and c_bad <= CHECKSUM_GOOD_SHARE:
        vote = "server"
    else:
        vote = "none"
    return {
        "method": "checksum",
        "vote": vote,
        "strength": "decisive",
        "detail": f"bad TCP/UDP checksums on {cb} of the client's {cn} packets checked and "
        f"{sb} of the server's {sn}"
        + (
            f" (checksums left to the {vote}'s NIC: captured on the {vote})"
            if vote != "none"
            else ""
        ),
    }


def clock_step_ns(messages: pd.DataFrame, events: pd.DataFrame | None) -> int:
    """The step of the capture's timestamps: the largest power of ten (1 ns to
    1 s) they are all multiples of; 1 when fewer than CLOCK_MIN_TIMES distinct
    times tell.  No sort of the times: being a multiple of 10^k implies being one
    of 10^(k-1), so a sample's step bounds the whole's, and the whole is then
    checked from there down (usually one pass)."""
    parts = [messages[c].to_numpy("int64") for c in ("ts_first_ns", "ts_last_ns") if c in messages]
    if events is not None and len(events) and "ts_ns" in events:
        parts.append(events["ts_ns"].to_numpy("int64"))
    # the columns one after the other, CLOCK_CHUNK times at a time (not one
    # array of all of them and its remainders: 0.3 GB at 10M packets)
    chunks = [p[a : a + CLOCK_CHUNK] for p in parts for a in range(0, len(p), CLOCK_CHUNK)]
    sample = (
        np.concatenate([p[:CLOCK_SAMPLE] for p in parts])[:CLOCK_SAMPLE]
        if parts
        else np.zeros(0, "int64")
    )
    if not _has_distinct(sample, CLOCK_MIN_TIMES) and not _chunks_distinct(chunks):
        return 1
    step = 1_000_000_000
    for some in (sample, *chunks):
        while step > 1 and (some % step).any():
            step //= 10
    return step


def _chunks_distinct(chunks: list[np.ndarray]) -> bool:
    """Whether the chunks hold at least CLOCK_MIN_TIMES distinct values between them."""
    seen: set[int] = set()
    for chunk in chunks:
        if _has_distinct(chunk, CLOCK_MIN_TIMES):
            return True
        seen.update(np.unique(chunk).tolist())  # (fewer than CLOCK_MIN_TIMES)
        if len(seen) >= CLOCK_MIN_TIMES:
            return True
    return False


def _has_distinct(values: np.ndarray, n: int) -> bool:
    """Whether ``values`` holds at least ``n`` distinct values (n small): drop
    each value found in turn, n passes at most instead of a sort."""
    for _ in range(n):
        if not len(values):
            return False
        values = values[values != values[0]]
    return True


def _step_text(step: int) -> str:
    for unit, ns in (("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)):
        if step >= ns:
            return f"{step // ns} {unit}"
    return f"{step} ns"


def _abstain(vote: dict[str, str] | None, step: int) -> dict[str, str] | None:
    """A timing vote on a clock too coarse for it: no vote, and why."""
    if vote is None or step < COARSE_CLOCK_NS:
        return vote
    return {
        **vote,
        "vote": "none",
        "detail": f"timestamps in steps of {_step_text(step)}: too coarse to time round trips "
        f"({vote['detail']})",
    }


def _pace_vote(transactions: pd.DataFrame) -> dict[str, str] | None:
    once = (transactions["n_calls"] == 1) & transactions["t_reply_ns"].notna()
    tx = transactions.loc[once, ["t_reply_ns", "t_call_end_ns"]]
    if len(tx) < 3:
        return None
    srt = (tx["t_reply_ns"] - tx["t_call_end_ns"]).astype("int64").to_numpy()
    # (times come nearly sorted: a stable sort's merges are quick on them)
    call = transactions["t_call_ns"]
    calls = call.to_numpy("int64", na_value=0)[call.notna().to_numpy()]
    calls.sort(kind="stable")  # (in place: the copy just made)
    replies = tx["t_reply_ns"].to_numpy("int64", copy=True)  # (sorted in place: a copy)
    replies.sort(kind="stable")
    nxt = sorted_search(calls, replies, side="right")
    ok = nxt < len(calls)
    if ok.sum() < 3:
        return None
    reply_to_call = calls[nxt[ok]] - replies[ok]
    c2r, r2c = float(np.median(srt)), float(np.median(reply_to_call))
    ratio = c2r / max(r2c, 1.0)
    vote = "client" if ratio >= PACE_RATIO else "server" if ratio <= 1 / PACE_RATIO else "none"
    return {
        "method": "pace",
        "vote": vote,
        "strength": "weak",
        "detail": f"median call->reply {c2r / 1e3:.0f} us vs reply->next call {r2c / 1e3:.0f} us",
    }


def _capture_point(evidence: list[dict[str, str]]) -> str:
    for strength in ("decisive", "strong", "weak"):
        votes = {e["vote"] for e in evidence if e["strength"] == strength and e["vote"] != "none"}
        if len(votes) == 1:
            return votes.pop()
        if len(votes) > 1:
            return "unknown"  # strong evidence that disagrees: say so
    return "unknown"


# ---- what the capture lost ----------------------------------------------------------------


def _gaps(messages: pd.DataFrame, transactions: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    times = [messages["ts_first_ns"].to_numpy(), messages["ts_last_ns"].to_numpy()]
    if len(events):
        times.append(events["ts_ns"].to_numpy())
    # stable sort: timsort merges the (nearly sorted) runs fast; equal times do not
    # matter, a gap is between two different times (sorted in place: one copy)
    t = np.concatenate([np.asarray(x, dtype="int64") for x in times])
    del times
    t.sort(kind="stable")
    if len(t) < 2 or t[0] == t[-1]:
        return pd.DataFrame(columns=list(GAP_COLUMNS))
    # (the differences CLOCK_CHUNK at a time: not an array of them all)
    idx = np.concatenate(
        [
            a + np.flatnonzero(np.diff(t[a : a + CLOCK_CHUNK + 1]) >= GAP_NS)
            for a in range(0, len(t) - 1, CLOCK_CHUNK)
        ]
    )
    s, e = t[idx], t[idx + 1]
    del t
    if not len(idx):  # no gap: no call outstanding through one
        return pd.DataFrame([], columns=list(GAP_COLUMNS))
    tx = rows_where(transactions, transactions["n_calls"] > 0)
    start = tx["t_call_ns"].astype("int64").to_numpy()
    # an unanswered call holds nothing up past UNANSWERED_HORIZON_NS after its last send
    end = call_ends_ns(tx, np.iinfo("int64").max)
    outstanding = _outstanding_through(start, end, s, e)
    rows = [
        (int(si), int(ei), int(ei - si), int(n))
        for si, ei, n in zip(s, e, outstanding, strict=True)
        if n
    ]
    return pd.DataFrame(rows, columns=list(GAP_COLUMNS))


def _outstanding_through(
    start: np.ndarray, end: np.ndarray, gap_start: np.ndarray, gap_end: np.ndarray
) -> np.ndarray:
    """Per gap, the calls outstanding all through it (start <= gap start and end >=
    gap end), for gaps that do not overlap, in time order (each from one packet
    time to the next).  A call with start > end never counts; for the others,
    #(start <= gs and end >= ge) = #(start <= gs) - #(end < ge) + #(gs < start
    and end < ge), and a call of the last kind lies inside the gap, of which it
    can lie in one only: binary searches, not a scan of every call per gap (a
    capture of many gaps and a call ending in one was quadratic)."""
    if not len(gap_start):
        return np.zeros(0, "int64")
    keep = start <= end
    start, end = start[keep], end[keep]
    starts, ends = np.sort(start, kind="stable"), np.sort(end, kind="stable")  # (nearly sorted)
    began = np.searchsorted(starts, gap_start, "right")
    ended = np.searchsorted(ends, gap_end, "left")
    # the gap each call starts in (the last with gs < start), if it also ends in it
    at = np.searchsorted(gap_start, start, "left") - 1
    ok = at >= 0
    inside = ok & (end < gap_end[np.maximum(at, 0)])
    within = np.bincount(at[inside], minlength=len(gap_start))
    return (began - ended + within).astype("int64")


def assess_capture(
    messages: pd.DataFrame, transactions: pd.DataFrame, events: pd.DataFrame, stats: Any
) -> CaptureQuality:
    """Capture point and what the capture failed to record (``stats``: ParseStats)."""
    step = clock_step_ns(messages, events)
    evidence = [
        e
        for e in (
            _checksum_vote(transactions, stats),
            _ttl_vote(transactions, stats),
            _abstain(_handshake_vote(events), step),
            _abstain(_ack_vote(events, transactions), step),
            _abstain(_pace_vote(transactions), step),
        )
        if e is not None
    ]
    calls = rows_where(transactions, transactions["n_calls"] > 0)
    # the WRITE calls cut short: their columns' rows, not a copy of every column
    cut = is_value(calls["op"], "WRITE") & calls["call_truncated"].fillna(False).to_numpy(bool)
    told = transactions.get("inferred")
    inferred = transactions["write_bytes"][
        np.asarray(
            is_value(transactions["op"], "WRITE") & ~(True if told is None else is_value(told, "")),
            dtype=bool,
        )
    ]
    return CaptureQuality(
        capture_point=_capture_point(evidence),
        evidence=pd.DataFrame(evidence, columns=list(EVIDENCE_COLUMNS)),
        snaplens=[int(f.snaplen or 0) for f in stats.files],
        truncated_frames=int(stats.truncated_frames),
        truncated_messages=int(stats.truncated_messages),
        truncated_writes=int(cut.sum()),
        writes_stable_unknown=int((calls["stable"][cut].fillna(-1) < 0).sum()),
        writes_count_unknown=int((calls["count"][cut].fillna(-1) < 0).sum()),
        interface_drops=int(stats.interface_drops),
        duplicate_frames=int(getattr(stats, "duplicate_frames", 0)),
        capture_missed_bytes=int(stats.tcp.get("hole_bytes_acked", 0)),
        capture_missed_ranges=int(stats.tcp.get("holes_acked", 0)),
        gaps=_gaps(messages, transactions, events),
        warnings=list(stats.warnings),
        replies_before_call=int((calls["t_reply_ns"] < calls["t_call_ns"]).fillna(False).sum()),
        answered=int(calls["t_reply_ns"].notna().sum()),
        messages_back_in_time=_back_in_time(messages),
        messages=len(messages),
        implausible_reply_counts=_implausible_counts(transactions),
        cut_lengths=[int(f.cut_len) for f in stats.files],
        snaplen_needed=snaplen_needed(transactions, stats),
        writes_inferred=len(inferred),
        bytes_inferred=int(inferred.sum()),
    )


def damage_texts(stats: Any) -> list[str]:
    """The damage the readers met (``ParseStats``): file bytes skipped, and each
    anomaly counted, in words."""
    skipped = sum(f.skipped_bytes for f in stats.files)
    out = [f"{skipped:,} file bytes skipped as damaged"] if skipped else []
    return out + [
        f"{name.replace('_', ' ')} {n:,}" for name, n in sorted(stats.anomalies.items()) if n
    ]


def clean_capture_text(stats: Any) -> str | None:
    """A capture that missed, cut and damaged nothing (``ParseStats``: no
    incomplete datagram, TCP re-send, segment out of order, hole or resync, no
    message cut short or without its end, no frame cut by the snaplen or dropped
    by the interface, no damage) in one line; None when one of those counts is
    not 0 (the reports then give every count)."""
    tcp = stats.tcp
    wrong = (
        stats.ip_datagrams_incomplete,
        *(tcp.get(k, 0) for k in ("retransmitted", "out_of_order", "holes", "resyncs")),
        stats.truncated_messages,
        stats.incomplete_messages,
        stats.truncated_frames,
        stats.interface_drops,
        len(damage_texts(stats)),
    )
    if any(wrong):
        return None
    segments = tcp.get("segments", 0)
    seen = [f"{segments:,} TCP segments (none re-sent or missing)"] if segments else []
    seen += [f"{stats.ip_fragments:,} IP fragments (all reassembled)"] if stats.ip_fragments else []
    return f"nothing missed, cut or damaged: {', '.join([*seen, 'no interface drops'])}"


def snaplen_needed(transactions: pd.DataFrame, stats: Any) -> int:
    """A snaplen that keeps what the analysis reads of the WRITEs seen (0: the
    capture cut no frame): the headers of the frames cut (their longest), the
    record mark (over TCP), then the more of a WRITE call's header through its
    stable_how and a whole WRITE reply, as the WRITEs seen show them (a
    header learnt from those whose count and length were both captured, the
    replies' lengths; each the median), else as the typical longest
    (TYPICAL_FRAME_HEADERS, ...); rounded up to SNAPLEN_STEP bytes."""
    files = stats.files
    if not any(f.cut_len for f in files):
        return 0
    headers = max((f.cut_headers for f in files), default=0)
    if headers <= 0:
        headers = TYPICAL_FRAME_HEADERS
    tx = transactions
    tcp = is_value(tx["transport"], "tcp").any() if len(tx) else stats.tcp_packets > 0
    w = rows_where(tx, is_value(tx["op"], "WRITE")) if len(tx) else tx
    if len(w):

        def col(name: str) -> np.ndarray:
            return w[name].astype("Int64").fillna(-1).to_numpy("int64")

        header = write_headers(
            w["client"].astype(object).to_numpy(), w["server"].astype(object).to_numpy(),
            col("vers"), col("minor"), col("count"), col("call_bytes"),
            is_value(w["inferred"], "") if "inferred" in w else np.ones(len(w), bool),
            np.full(len(w), -1, "int64"),
        )  # fmt: skip
        call = int(np.median(header)) - 4  # (the data's length is not needed)
        replies = col("reply_bytes")
        reply = int(np.median(replies[replies >= 0])) if (replies >= 0).any() else 0
    else:  # nothing seen: the longest typical WRITE call and reply
        call = TYPICAL_BODY_OFFSET + max(WRITE_HEADER.values()) - 4
        reply = TYPICAL_WRITE_REPLY
    need = headers + (RECORD_MARK if tcp else 0) + max(call, reply)
    return -(-need // SNAPLEN_STEP) * SNAPLEN_STEP


def too_short_for_rpc(stats: Any) -> str:
    """When the frames were cut too short to hold an RPC header (nothing could be
    read as RPC), one line naming the length captured and a snaplen that
    works; '' otherwise (no frame cut, or room for a header after all)."""
    cut = max((int(f.cut_len) for f in stats.files), default=0)
    if not cut:
        return ""
    headers = max((f.cut_headers for f in stats.files), default=0)
    if headers > 0 and cut >= headers + RECORD_MARK + MIN_CUT_CALL_LEN:
        return ""  # a header had room: there was no RPC to read
    empty = pd.DataFrame({"transport": pd.Series(dtype=object), "op": pd.Series(dtype=object)})
    return (
        f"frames were cut to {cut} bytes: too short for the RPC header; "
        f"capture again with -s {snaplen_needed(empty, stats)}"
    )


def _implausible_counts(transactions: pd.DataFrame) -> int:
    """WRITE/READ replies whose count is beyond reply_count_bound."""
    read = ("reply_count", "op", "count", "call_bytes", "reply_bytes")  # (what the bound reads)
    used = [c for c in read if c in transactions]
    tx = transactions.loc[transactions["reply_count"].notna(), used]
    if tx.empty:
        return 0
    counts = tx["reply_count"].astype("int64").to_numpy()
    return int((counts > reply_count_bound(tx)).sum())


def _back_in_time(messages: pd.DataFrame) -> int:
    """Messages stamped earlier than one captured before them (frame order)."""
    if messages.empty:
        return 0
    frames = messages["frame_first"].to_numpy("int64")
    ts = messages["ts_first_ns"].to_numpy("int64")
    if not all(
        (frames[a + 1 : b + 1] >= frames[a:b]).all()
        for a in range(0, len(frames) - 1, CLOCK_CHUNK)
        for b in [min(a + CLOCK_CHUNK, len(frames) - 1)]
    ):  # (a table in frame order, the usual: no sort, no copy)
        ts = ts[np.argsort(frames, kind="stable")]
    del frames
    # each time against the latest before it, CLOCK_CHUNK at a time
    back, latest = 0, ts[0]
    for a in range(0, len(ts), CLOCK_CHUNK):
        chunk = ts[a : a + CLOCK_CHUNK]
        running = np.maximum.accumulate(chunk)
        np.maximum(running, latest, out=running)
        back += int((chunk[1:] < running[:-1]).sum()) + int(a > 0 and chunk[0] < latest)
        latest = running[-1]
    return back
