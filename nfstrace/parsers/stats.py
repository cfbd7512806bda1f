"""What a parse saw, for the capture-quality report: ``ParseStats`` (the third
table a parser hands on, beside messages and events), its per-direction
``DirectionFacts`` and the named ``ANOMALIES``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from nfstrace.parsers.capture import CaptureInfo

# Per-direction facts come from the parser as small lists (cheaper than
# objects in the per-packet loop), one per (source address, destination
# address), at these positions; ``DirectionFacts.of`` is the row made of one.
# native/generate_tables.py writes NO_TTL into native/src/tables.rs.
F_PACKETS, F_IP_BYTES, F_MAX_IP_LEN, F_TTL_MIN, F_TTL_MAX = 0, 1, 2, 3, 4
F_FRAGMENTS, F_REASSEMBLED, F_INCOMPLETE = 5, 6, 7
# TCP/UDP checksums verified (on a sample: CHECKSUM_SAMPLE) and those found bad
F_CSUM_CHECKED, F_CSUM_BAD = 8, 9
NO_TTL = 256  # ttl_min before any packet (IPv4 TTL and IPv6 hop limit are 0..255)


@dataclass(frozen=True)
class DirectionFacts:
    """IP-level facts of one direction (source address -> destination address)."""

    src: str
    dst: str
    packets: int  # IP packets, fragments counted one by one (mirror duplicates not)
    ip_bytes: int  # their IP lengths summed
    max_ip_len: int  # the largest IP packet: shows the path MTU (or TSO/GRO when above it)
    ttl_min: int  # IPv4 TTL / IPv6 hop limit (-1: no packet)
    ttl_max: int
    ip_fragments: int
    datagrams_reassembled: int
    datagrams_incomplete: int  # datagrams some of whose fragments never came
    # TCP/UDP checksums verified on a sample (the first 64 whole packets)
    # and those found bad: all bad on one host's outgoing packets is transmit
    # checksum offload, captured on that host
    checksums_checked: int = 0
    checksums_bad: int = 0

    @classmethod
    def of(cls, src: str, dst: str, f: Sequence[int]) -> DirectionFacts:
        """The row of one direction's facts list (``F_*`` positions)."""
        return cls(
            src=src,
            dst=dst,
            packets=f[F_PACKETS],
            ip_bytes=f[F_IP_BYTES],
            max_ip_len=f[F_MAX_IP_LEN],
            ttl_min=f[F_TTL_MIN] if f[F_TTL_MIN] != NO_TTL else -1,
            ttl_max=f[F_TTL_MAX],
            ip_fragments=f[F_FRAGMENTS],
            datagrams_reassembled=f[F_REASSEMBLED],
            datagrams_incomplete=f[F_INCOMPLETE],
            checksums_checked=f[F_CSUM_CHECKED],
            checksums_bad=f[F_CSUM_BAD],
        )


@dataclass
class ParseStats:
    """What the parser saw, for capture-quality reporting."""

    files: list[CaptureInfo] = field(default_factory=list)
    # What befell the inputs before they were parsed (a directory's entry that
    # is no capture, skipped; a pipe's copy stopped at its bound): one line each
    inputs: list[str] = field(default_factory=list)
    frames: int = 0
    non_ip_frames: int = 0
    ipv4_packets: int = 0
    ipv6_packets: int = 0
    tcp_packets: int = 0
    udp_packets: int = 0
    other_ip_packets: int = 0  # ICMP and others (ICMP errors quote RPC headers: not RPC)
    short_transport_headers: int = 0
    ip_fragments: int = 0
    ip_datagrams_reassembled: int = 0
    ip_datagrams_incomplete: int = 0
    tcp: dict[str, int] = field(default_factory=dict)
    messages: int = 0
    calls: int = 0
    replies: int = 0
    truncated_messages: int = 0  # some bytes of the message not captured
    incomplete_messages: int = 0  # the message's end was never seen
    headerless_messages: int = 0  # a record whose RPC header was not captured
    not_rpc_records: int = 0  # records whose first bytes were not an RPC header
    replies_without_call_info: int = 0
    # identical to a frame captured just before (ParseLimits.duplicate_window_ns): skipped
    duplicate_frames: int = 0
    directions: list[DirectionFacts] = field(default_factory=list)
    tcp_connections: int = 0
    # TCP connections whose window scale is unknown in at least one direction
    # (SYN or SYN-ACK not captured): no window-full detection that way.
    tcp_window_scale_unknown: int = 0
    # Damage met in the packets and what was done about it, by name (ANOMALIES)
    anomalies: dict[str, int] = field(default_factory=dict)
    # The frame number at which each connection id (1, 2, ...: messages.conn)
    # began: how the partitions of a parallel parse number them as one parse.
    connection_frames: list[int] = field(default_factory=list, repr=False)

    @property
    def interface_drops(self) -> int:
        return sum(f.interface_drops for f in self.files)

    @property
    def truncated_frames(self) -> int:
        return sum(f.truncated_frames for f in self.files)

    @property
    def warnings(self) -> list[str]:
        """The capture files' damage, then the packets' (ANOMALIES marked as
        warnings): one line each, with its count."""
        out = [*self.inputs, *(f"{f.path}: {w}" for f in self.files for w in f.warnings)]
        for name, (warn, text) in ANOMALIES.items():
            n = self.anomalies.get(name, 0)
            if n and warn:
                out.append(text.format(n=n))
        return out


# Named anomalies (ParseStats.anomalies): (a warning?, what it means).  Those
# that are not warnings also happen on healthy captures of lossy networks and
# are reported with the capture facts.
ANOMALIES: dict[str, tuple[bool, str]] = {
    "tcp_header_length": (
        True,
        "{n:,} TCP segments with an impossible header length (below 20 bytes or past "
        "the packet): skipped",
    ),
    "ip_length_exceeds_frame": (
        True,
        "{n:,} IP packets claiming more bytes than their frame had on the wire: "
        "taken as long as the frame",
    ),
    "record_mark_too_long": (
        False,
        "{n:,} RPC record marks longer than the record limit: the stream was "
        "resynchronised at the next RPC header",
    ),
    "rpc_auth_too_long": (
        False,
        "{n:,} RPC calls or replies with a credential or verifier longer than 400 bytes: "
        "kept without their procedure's arguments/results",
    ),
    "messages_limit": (
        True,
        "stopped reading at frame {n:,}: the RPC messages read reached "
        "ParseLimits.max_messages (half the memory available at start): the rest of "
        "the capture is not analysed",
    ),
    "calls_forgotten": (
        True,
        "{n:,} calls still waiting for their reply were forgotten to bound memory "
        "(ParseLimits.max_pending_calls, max_pending_call_bytes): a reply to one of them "
        "is not decoded",
    ),
    "connections_forgotten": (
        False,
        "{n:,} idle connections forgotten to bound memory (ParseLimits.max_connections)",
    ),
    "messages_cut_by_limits": (
        True,
        "{n:,} RPC messages cut short because their connection was forgotten to bound "
        "memory (ParseLimits.max_connections)",
    ),
    "tcp_holes_by_memory": (
        True,
        "{n:,} TCP holes declared lost early to bound the bytes held for reassembly "
        "(ParseLimits.max_pending_bytes_total)",
    ),
    "ip_datagrams_given_up": (
        True,
        "{n:,} IP datagrams given up to bound fragment reassembly memory "
        "(ParseLimits.max_ip_reassembly_bytes / max_fragments_per_datagram)",
    ),
    "directions_untracked": (
        True,
        "{n:,} packets of address pairs past ParseLimits.max_directions: counted together, "
        "not per pair",
    ),
    "events_not_recorded": (
        True,
        "{n:,} transport events counted but not recorded (ParseLimits.max_events_per_kind)",
    ),
    "tcp_bad_checksum": (
        True,
        "{n:,} TCP segments with SYN set on an established connection and a bad checksum, "
        "from a host whose other segments have good ones (damaged copies the receiver "
        "dropped): skipped",
    ),
    "tcp_syn_in_window": (
        True,
        "{n:,} TCP segments with SYN set inside an established connection's window, before "
        "any FIN or RST (not a new connection: the receiver drops them): skipped",
    ),
}
