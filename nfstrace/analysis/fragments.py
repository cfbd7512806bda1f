"""IP fragments: how many per datagram and per RPC, datagrams reassembled and
incomplete (a lost fragment loses the whole RPC: the client re-sends it all),
per direction, and the largest IP packet seen (the MTU in use).

From ``messages.ip_frags`` (fragments carrying each message), the parser's
per-direction facts (``ParseStats.directions``) and, when given, its
``ip_datagram_incomplete`` events (which datagrams, by IP id).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from nfstrace.analysis.findings import Finding
from nfstrace.analysis.grouping import group_codes, group_keys

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
    "datagrams_incomplete": "datagrams missing fragments (lost)",
}

INCOMPLETE_COLUMNS: dict[str, str] = {
    "ts_ns": "first fragment seen",
    "frame": "its frame",
    "src": "source address",
    "dst": "destination address",
    "ip_id": "IP identification (IPv6: fragment identification)",
    "bytes_received": "bytes of the datagram that arrived",
}


@dataclass(frozen=True)
class FragmentsResult:
    distribution: pd.DataFrame  # DISTRIBUTION_COLUMNS, UDP messages
    by_rpc: pd.DataFrame  # BY_RPC_COLUMNS
    directions: pd.DataFrame  # DIRECTION_COLUMNS
    incomplete: pd.DataFrame  # INCOMPLETE_COLUMNS (empty unless events were given)
    fragments: int
    datagrams_reassembled: int
    datagrams_incomplete: int
    fragmented_messages: int
    max_frags_per_message: int
    mtu: int  # largest IP packet in any direction (0: no IP packet)

    def findings(self) -> list[Finding]:
        out: list[Finding] = []
        if self.datagrams_incomplete:
            out.append(
                Finding(
                    kind="ip_fragments_lost",
                    title=f"{self.datagrams_incomplete} IP datagrams never got all their "
                    "fragments: each lost fragment loses the whole RPC, which the client "
                    "must re-send after a timeout",
                    severity="problem",
                    details={
                        "incomplete": self.datagrams_incomplete,
                        "reassembled": self.datagrams_reassembled,
                    },
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

    def as_dict(self) -> dict[str, Any]:
        return {
            "fragments": self.fragments,
            "datagrams_reassembled": self.datagrams_reassembled,
            "datagrams_incomplete": self.datagrams_incomplete,
            "fragmented_messages": self.fragmented_messages,
            "max_frags_per_message": self.max_frags_per_message,
            "mtu": self.mtu,
            "distribution": {
                int(r.ip_frags): {"calls": int(r.calls), "replies": int(r.replies)}
                for r in self.distribution.itertuples()
            },
        }


def _distribution(udp: pd.DataFrame) -> pd.DataFrame:
    if udp.empty:
        return pd.DataFrame(columns=list(DISTRIBUTION_COLUMNS))
    counts = pd.crosstab(udp["ip_frags"], udp["msgtype"].astype(object))
    return pd.DataFrame(
        {
            "ip_frags": counts.index.astype("int64"),
            "calls": counts.get("call", pd.Series(0, index=counts.index)).to_numpy(),
            "replies": counts.get("reply", pd.Series(0, index=counts.index)).to_numpy(),
        }
    )


def _by_rpc(messages: pd.DataFrame) -> pd.DataFrame:
    if messages.empty:
        return pd.DataFrame(columns=list(BY_RPC_COLUMNS))
    keys = [messages["transport"], messages["msgtype"], messages["op"].fillna("")]
    # Over TCP ip_frags counts packets, fragmented or not: only UDP ones are fragments.
    ip_frags = messages["ip_frags"].astype("int64")
    fragmented = (messages["transport"] == "udp") & (ip_frags > 1)
    m = pd.DataFrame({"fragmented": fragmented, "frags": ip_frags.where(fragmented)})
    known = (messages["transport"].notna() & messages["msgtype"].notna()).to_numpy()
    m, keys = m[known], [k[known] for k in keys]  # groupby leaves out missing keys
    if m.empty:
        return pd.DataFrame(columns=list(BY_RPC_COLUMNS))
    group, parts = group_codes(keys)  # integers, not strings
    g = m.groupby(group, sort=True)
    out = pd.DataFrame(
        {
            "messages": g.size(),
            "fragmented": g["fragmented"].sum(),
            "frags_mean": g["frags"].mean(),
            "frags_max": g["frags"].max().fillna(0).astype("int64"),
        }
    )
    out = pd.concat([group_keys(group, parts), out.reset_index(drop=True)], axis=1)
    return out[list(BY_RPC_COLUMNS)]


def _incomplete(events: pd.DataFrame | None) -> pd.DataFrame:
    if events is None or not len(events):
        return pd.DataFrame(columns=list(INCOMPLETE_COLUMNS))
    ev = events[events["kind"] == "ip_datagram_incomplete"]
    out = ev[["ts_ns", "frame", "src", "dst", "seq", "length"]].rename(
        columns={"seq": "ip_id", "length": "bytes_received"}
    )
    return out.reset_index(drop=True)


def analyze_fragments(
    messages: pd.DataFrame, stats: Any, events: pd.DataFrame | None = None
) -> FragmentsResult:
    """Fragmentation facts (``stats``: the parser's ParseStats; ``events``: its
    events table, to name the incomplete datagrams)."""
    udp = messages[messages["transport"] == "udp"]
    by_rpc = _by_rpc(messages)
    fragmented = udp[udp["ip_frags"] > 1]
    directions = pd.DataFrame(
        [{c: getattr(d, c) for c in DIRECTION_COLUMNS} for d in stats.directions],
        columns=list(DIRECTION_COLUMNS),
    )
    return FragmentsResult(
        distribution=_distribution(udp),
        by_rpc=by_rpc,
        directions=directions,
        incomplete=_incomplete(events),
        fragments=int(stats.ip_fragments),
        datagrams_reassembled=int(stats.ip_datagrams_reassembled),
        datagrams_incomplete=int(stats.ip_datagrams_incomplete),
        fragmented_messages=len(fragmented),
        max_frags_per_message=int(fragmented["ip_frags"].max()) if len(fragmented) else 0,
        mtu=int(directions["max_ip_len"].max()) if len(directions) else 0,
    )
