"""IP fragments: how many per datagram and per RPC, datagrams reassembled and
incomplete, per direction, and the largest IP packet seen (the MTU in use).

An incomplete datagram is one of three things.  The network lost a fragment:
the whole RPC is lost and the client re-sends it after a timeout (no reply to
the first send).  The capture missed a fragment the server did get: the reply
came and nothing was re-sent.  Or the capture ended before its other fragments
(nothing the client sent later is in the capture): neither can be told.  The
parser keeps the call of an incomplete datagram whose first fragment was
captured (cut short, with what its header says), which tells them apart; one
whose first fragment is missing is counted lost unless the capture ended.

From ``messages.ip_frags`` (fragments carrying each message), the parser's
per-direction facts (``ParseStats.directions``) and, when given, its
``ip_datagram_incomplete`` events (which datagrams, by IP id).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from nfstrace.analysis.findings import Finding
from nfstrace.analysis.grouping import filled, group_codes, group_keys
from nfstrace.jsonable import NOT_IN_JSON, json_field

DISTRIBUTION_COLUMNS: dict[str, str] = {
    "ip_frags": "IP fragments carrying a message (1: not fragmented; TCP: one per packet)",
    "calls": "call messages with that many",
    "replies": "reply messages with that many",
}

BY_RPC_COLUMNS: dict[str, str] = {
    "transport": "udp / tcp",
    "msgtype": "call / reply",
    "op": "operation (procedure name; '' when not NFS)",
    "messages": "messages",
    "fragmented": "messages that travelled in IP fragments",
    "frags_mean": "mean IP fragments per fragmented message",
    "frags_max": "most IP fragments for one message",
}

DIRECTION_COLUMNS: dict[str, str] = {
    "src": "source address",
    "dst": "destination address",
    "packets": "IP packets (fragments one by one)",
    "max_ip_len": "largest IP packet: the MTU in use (above it: TSO/GRO capture)",
    "ip_fragments": "fragments seen",
    "datagrams_reassembled": "datagrams made whole",
    "datagrams_incomplete": "datagrams missing fragments (lost, or not captured)",
}

INCOMPLETE_COLUMNS: dict[str, str] = {
    "ts_ns": "first fragment seen",
    "frame": "its frame",
    "src": "source address",
    "dst": "destination address",
    "ip_id": "IP identification (IPv6: fragment identification)",
    "bytes_received": "bytes of the datagram that arrived",
    "xid": "xid of the call its first fragment carries (-1: none captured)",
    "fate": "answered (the capture missed fragments) / re-sent or unanswered (the network "
    "lost them) / capture end (the capture stopped before the rest) / unknown (no call "
    "header captured)",
}

# INCOMPLETE_COLUMNS fate values
ANSWERED, RESENT, UNANSWERED, CAPTURE_END, UNKNOWN = (
    "answered",
    "re-sent",
    "unanswered",
    "capture end",
    "unknown",
)
LOST_FATES = (RESENT, UNANSWERED, UNKNOWN)


def by_fragment_count(distribution: pd.DataFrame) -> dict[int, dict[str, int]]:
    """The distribution (DISTRIBUTION_COLUMNS) as the JSON gives it: fragments
    per message -> {"calls": n, "replies": n}."""
    return {
        int(r.ip_frags): {"calls": int(r.calls), "replies": int(r.replies)}
        for r in distribution.itertuples()
    }


@dataclass(frozen=True)
class FragmentsResult:
    fragments: int
    datagrams_reassembled: int
    datagrams_incomplete: int
    fragmented_messages: int
    max_frags_per_message: int
    mtu: int  # largest IP packet in any direction (0: no IP packet)
    # incomplete datagrams by fate (INCOMPLETE_COLUMNS): lost in the network
    # (re-sent, unanswered, or no call header to tell), answered (fragments the
    # capture missed), cut by the capture's end
    datagrams_lost: int
    datagrams_resent: int
    datagrams_not_captured: int
    datagrams_cut_by_end: int
    # DISTRIBUTION_COLUMNS, UDP messages
    distribution: pd.DataFrame = field(metadata=json_field(convert=by_fragment_count))
    by_rpc: pd.DataFrame = field(metadata=NOT_IN_JSON)  # BY_RPC_COLUMNS
    directions: pd.DataFrame = field(metadata=NOT_IN_JSON)  # DIRECTION_COLUMNS
    # INCOMPLETE_COLUMNS (empty unless events were given)
    incomplete: pd.DataFrame = field(metadata=NOT_IN_JSON)

    def findings(self) -> list[Finding]:
        out: list[Finding] = []
        details = {
            "incomplete": self.datagrams_incomplete,
            "reassembled": self.datagrams_reassembled,
            "lost": self.datagrams_lost,
            "resent": self.datagrams_resent,
            "not_captured": self.datagrams_not_captured,
            "cut_by_capture_end": self.datagrams_cut_by_end,
        }
        if self.datagrams_lost:
            resent = (
                f" ({self.datagrams_resent} re-sent by the client, no reply to the first send)"
                if self.datagrams_resent
                else ""
            )
            out.append(
                Finding(
                    kind="ip_fragments_lost",
                    title=f"{self.datagrams_lost} IP datagrams never got all their "
                    f"fragments{resent}: each lost fragment loses the whole RPC, which the "
                    "client must re-send after a timeout",
                    severity="problem",
                    details=details,
                )
            )
        if self.datagrams_not_captured:
            out.append(
                Finding(
                    kind="ip_fragments_not_captured",
                    title=f"{self.datagrams_not_captured} IP datagrams miss fragments in the "
                    "capture only: the server answered them and nothing was re-sent, so the "
                    "network delivered them whole (the capture dropped packets)",
                    severity="warning",
                    limits_conclusions=True,
                    details=details,
                )
            )
        if self.fragmented_messages:
            out.append(
                Finding(
                    kind="ip_fragmentation",
                    title=f"{self.fragmented_messages} RPC messages travelled in IP fragments "
                    f"(up to {self.max_frags_per_message} per message, packets of at most "
                    f"{self.mtu} bytes)",
                    details={
                        "fragments": self.fragments,
                        "fragmented_messages": self.fragmented_messages,
                        "max_frags_per_message": self.max_frags_per_message,
                        "mtu": self.mtu,
                    },
                )
            )
        return out


def _distribution(udp: pd.DataFrame) -> pd.DataFrame:
    if udp.empty:
        return pd.DataFrame(columns=list(DISTRIBUTION_COLUMNS))
    # crosstab(ip_frags, msgtype) by counting: each distinct count of fragments
    # (ascending) and its calls and replies
    values, at = np.unique(udp["ip_frags"].to_numpy("int64"), return_inverse=True)
    kind = udp["msgtype"].astype(object).to_numpy()
    return pd.DataFrame(
        {
            "ip_frags": values,
            **{
                name: np.bincount(at[kind == what], minlength=len(values))
                for name, what in (("calls", "call"), ("replies", "reply"))
            },
        }
    )


def _by_rpc(messages: pd.DataFrame) -> pd.DataFrame:
    if messages.empty:
        return pd.DataFrame(columns=list(BY_RPC_COLUMNS))
    keys = [messages["transport"], messages["msgtype"], filled(messages["op"])]
    known = (messages["transport"].notna() & messages["msgtype"].notna()).to_numpy()
    if not known.any():  # groupby leaves out missing keys
        return pd.DataFrame(columns=list(BY_RPC_COLUMNS))
    rows = None if known.all() else np.flatnonzero(known)
    if rows is not None:
        keys = [k.take(rows) for k in keys]
    group, parts = group_codes(keys)  # integers, not strings
    n = int(group.max()) + 1  # (groups 0 .. n-1, each present)
    # Over TCP ip_frags counts packets, fragmented or not: only UDP ones are fragments.
    ip_frags = messages["ip_frags"].to_numpy("int64")
    udp = (messages["transport"] == "udp").to_numpy(dtype=bool)
    if rows is not None:
        ip_frags, udp = ip_frags[rows], udp[rows]
    fragmented = np.flatnonzero(udp & (ip_frags > 1))
    # the fragments' figures over the fragmented messages alone (the others, NaN
    # in a column of every message, are left out of a mean and a max the same)
    frags = pd.Series(ip_frags[fragmented].astype("float64")).groupby(group[fragmented])
    out = pd.DataFrame(
        {
            "messages": np.bincount(group, minlength=n),
            "fragmented": np.bincount(group[fragmented], minlength=n),
            "frags_mean": frags.mean().reindex(range(n)).to_numpy("float64"),
            "frags_max": frags.max().reindex(range(n)).fillna(0).to_numpy("int64"),
        }
    )
    out = pd.concat([group_keys(group, parts), out], axis=1)
    return out[list(BY_RPC_COLUMNS)]


def _incomplete(events: pd.DataFrame | None, messages: pd.DataFrame) -> pd.DataFrame:
    if events is None or not len(events):
        return pd.DataFrame(columns=list(INCOMPLETE_COLUMNS))
    ev = events[events["kind"] == "ip_datagram_incomplete"]
    out = ev[["ts_ns", "frame", "src", "dst", "seq", "length"]].rename(
        columns={"seq": "ip_id", "length": "bytes_received"}
    )
    out = out.reset_index(drop=True)
    xids, fates = _fates(out, messages) if len(out) else ([], [])  # (none: nothing to look up)
    return out.assign(xid=pd.array(xids, dtype="int64"), fate=fates)


def _fates(incomplete: pd.DataFrame, messages: pd.DataFrame) -> tuple[list[int], list[str]]:
    """Per incomplete datagram: the xid of the call its first fragment carries
    (the parser's call cut short, whose first frame is the datagram's) and
    its fate (INCOMPLETE_COLUMNS)."""
    udp = messages[messages["transport"] == "udp"]
    cols = ["src", "dst", "xid", "ts_first_ns", "ts_last_ns", "frame_first"]
    calls = udp.loc[udp["msgtype"] == "call", cols].astype({"src": object, "dst": object})
    replies = udp.loc[udp["msgtype"] == "reply", cols].astype({"src": object, "dst": object})
    firsts = {
        (f, s, d): (x, t)
        for f, s, d, x, t in zip(
            calls["frame_first"],
            calls["src"],
            calls["dst"],
            calls["xid"],
            calls["ts_first_ns"],
            strict=True,
        )
    }
    # the last time each direction sent a message (a later one: the capture went on)
    last_sent = udp.groupby(["src", "dst"], observed=True)["ts_first_ns"].max().to_dict()
    wanted = {x for x, _t in firsts.values()}
    call_times: dict[tuple, list[int]] = {}
    for s, d, x, t in zip(
        calls["src"], calls["dst"], calls["xid"], calls["ts_first_ns"], strict=True
    ):
        if x in wanted:
            call_times.setdefault((s, d, x), []).append(int(t))
    reply_times: dict[tuple, list[int]] = {}
    for s, d, x, t in zip(
        replies["src"], replies["dst"], replies["xid"], replies["ts_first_ns"], strict=True
    ):
        if x in wanted:
            reply_times.setdefault((d, s, x), []).append(int(t))  # keyed client, server
    # sorted, so that each datagram finds its next send and reply by bisection
    # (not a scan: a client re-sending one xid thousands of times made it quadratic)
    for times in (*call_times.values(), *reply_times.values()):
        times.sort()
    xids: list[int] = []
    fates: list[str] = []
    for frame, src, dst, ts in zip(
        incomplete["frame"], incomplete["src"], incomplete["dst"], incomplete["ts_ns"], strict=True
    ):
        later = last_sent.get((src, dst), -1) > ts
        hit = firsts.get((frame, src, dst))
        if hit is None:
            xids.append(-1)
            fates.append(UNKNOWN if later else CAPTURE_END)
            continue
        xid, t0 = int(hit[0]), int(hit[1])
        xids.append(xid)
        sends = call_times.get((src, dst, xid), [])
        at = bisect.bisect_right(sends, t0)
        resent = at < len(sends)
        until = sends[at] if resent else 1 << 62  # a re-send takes the replies after it
        answers = reply_times.get((src, dst, xid), [])
        first = bisect.bisect_right(answers, t0)
        if first < len(answers) and answers[first] < until:
            fates.append(ANSWERED)
        elif resent:
            fates.append(RESENT)
        else:
            fates.append(UNANSWERED if later else CAPTURE_END)
    return xids, fates


def analyze_fragments(
    messages: pd.DataFrame, stats: Any, events: pd.DataFrame | None = None
) -> FragmentsResult:
    """Fragmentation facts (``stats``: the parser's ParseStats; ``events``: its
    events table, to name the incomplete datagrams)."""
    # the two columns read, not a selection of every column
    udp = messages[["ip_frags", "msgtype"]][(messages["transport"] == "udp").to_numpy()]
    by_rpc = _by_rpc(messages)
    fragmented = udp[udp["ip_frags"] > 1]
    directions = pd.DataFrame(
        [{c: getattr(d, c) for c in DIRECTION_COLUMNS} for d in stats.directions],
        columns=list(DIRECTION_COLUMNS),
    )
    incomplete = _incomplete(events, messages)
    n_incomplete = int(stats.ip_datagrams_incomplete)
    fate = incomplete["fate"].value_counts().to_dict() if len(incomplete) else {}
    answered, cut = fate.get(ANSWERED, 0), fate.get(CAPTURE_END, 0)
    return FragmentsResult(
        distribution=_distribution(udp),
        by_rpc=by_rpc,
        directions=directions,
        incomplete=incomplete,
        fragments=int(stats.ip_fragments),
        datagrams_reassembled=int(stats.ip_datagrams_reassembled),
        datagrams_incomplete=int(stats.ip_datagrams_incomplete),
        fragmented_messages=len(fragmented),
        max_frags_per_message=int(fragmented["ip_frags"].max()) if len(fragmented) else 0,
        mtu=int(directions["max_ip_len"].max()) if len(directions) else 0,
        # those not listed (events not given, or past the events' bound) count as lost
        datagrams_lost=max(0, n_incomplete - answered - cut),
        datagrams_resent=fate.get(RESENT, 0),
        datagrams_not_captured=answered,
        datagrams_cut_by_end=cut,
    )
