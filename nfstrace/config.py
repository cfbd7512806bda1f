"""Options and limits that flow down the pipeline as one frozen object.

Every limit says what happens when it is hit; none is a silent cap.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

# What one RPC message costs through the analysis (its row in the messages and
# transactions tables and the analyses' columns; measured ~0.7 KB, rounded up).
MESSAGE_BYTES = 1024
# ... and the share of the memory available at start-up the messages may take.
MEMORY_SHARE = 0.5
CHECK_EVERY_FRAMES = 4096  # the message count is checked this often
# What one call remembered for its reply is counted as costing (measured on
# 1.1M unanswered calls: ~170 bytes in the Rust parser; 400 was the larger cost
# of the Python parser it was ported from, kept so that the same calls are
# remembered): ParseLimits.max_pending_call_bytes becomes a count with it.
PENDING_CALL_BYTES = 400

# The parser's fixed bounds and thresholds (native/src/, through the constants
# native/generate_tables.py writes into tables.rs): not ParseLimits, which a
# caller sets, but what the parser takes for damage or for a new start.
# A TCP sequence jump this far ahead is not a hole to wait for: restart framing.
MAX_SEQ_JUMP = 1 << 30
# Data->ACK round trips time segments up to a jumbo frame's payload: a larger one
# is a TSO/GSO burst captured before the NIC split it, whose ACK waits for all of it.
RTT_MAX_SEGMENT = 9000
# A SYN whose sequence number is within this many bytes (or the peer's last
# window, if larger) of the next byte its direction of an established
# connection expects is not a new connection (a repeated SYN, dropped).
SYN_WINDOW = 65535
# TCP and UDP checksums are verified on the first this many packets of each
# direction that are whole (unfragmented, not cut by the snaplen): enough to
# tell a host whose outgoing checksums are all left to the NIC (transmit
# offload, captured on that host) from one whose packets carry them, at a
# bounded cost.  UDP checksum 0 (not computed) is not counted.
CHECKSUM_SAMPLE = 64
# A call taken as the start of a stream (resynchronisation): the program numbers
# it accepts (assigned ones start at 100000, the portmapper; 0x60000000 and
# above are reserved) and the highest version.
STRICT_MIN_PROG, STRICT_MAX_PROG = 100000, 0x5FFFFFFF
STRICT_MAX_VERS = 255
# portmap/rpcbind strings longer than this are not netids or universal
# addresses: the message is damaged.
MAX_NETID = 255
MAX_UADDR = 255
# An NFSv2/v3 file name longer than this is taken for damage.
MAX_NAME = 1024
# Frames remembered for the mirror-duplicate check: past it the older
# generation is dropped early (only above ~4M frames a second).
MAX_RECENT_FRAMES = 4096
# UDP (address, port) pairs learnt from portmap/rpcbind replies that are
# remembered, and portmap/rpcbind calls whose question is remembered until
# their reply (all forgotten at once past the bound).
MAX_LEARNT_PORTS = 65536
MAX_PORTMAP_ASKS = 4096
# A reply whose call was not captured is decoded when the last call seen on its
# flow (same addresses and ports, the other way) was NFS with a plain body: the
# flows remembered for that are bounded (all forgotten past it).
MAX_FLOWS = 65536


def memory_available() -> int:
    """Bytes of memory available now (Linux MemAvailable; else physical memory)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError, AttributeError):
        return 8 << 30


def default_max_messages() -> int:
    """Messages that fit in MEMORY_SHARE of the memory available (at least 1M)."""
    return max(1_000_000, int(memory_available() * MEMORY_SHARE) // MESSAGE_BYTES)


@dataclass(frozen=True)
class ParseLimits:
    # A frame whose captured length is above this is damage (the libpcap and
    # wiretap maximum): the reader searches for the next plausible record.
    max_frame_bytes: int = 262144
    # Bytes kept from the start of each message for header decoding (RPC + the
    # procedure's arguments/results).  Bytes past it are counted, never kept:
    # WRITE payloads cost nothing.  A decoder that needs more marks the message.
    head_bytes: int = 8192
    # A record-mark fragment longer than this is taken as garbage: the stream
    # loses sync and resynchronises on the next plausible RPC header.
    max_record_bytes: int = 64 * 1024 * 1024
    # Out-of-order TCP segments held per direction while waiting for a hole to
    # be filled (by a retransmission).  Past either bound, or after the hole
    # has been open this long, the hole is declared lost and stepped over.
    max_pending_segments: int = 4096
    max_pending_bytes: int = 32 * 1024 * 1024
    max_hole_age_ns: int = 5_000_000_000
    # ... and held by all directions together: a direction adding a segment
    # past this declares its own hole lost.
    max_pending_bytes_total: int = 256 * 1024 * 1024
    # Incomplete IP datagrams are dropped (counted as incomplete) after this
    # long without a new fragment (Linux ipfrag_time is 30 s).
    ip_reassembly_timeout_ns: int = 30_000_000_000
    max_ip_reassemblies: int = 65536
    # ... holding at most this many captured bytes together (the oldest
    # incomplete datagram is given up past it), each of at most this many
    # fragments (a datagram with more is given up: a 64 KiB datagram at the
    # smallest IPv6 MTU has 52).  Exact repeats of a fragment are not held.
    max_ip_reassembly_bytes: int = 64 * 1024 * 1024
    max_fragments_per_datagram: int = 1024
    # Calls remembered per (client, server, xid) to name and decode replies;
    # the oldest is forgotten past this (its reply is then "unknown call").
    max_pending_calls: int = 1_000_000
    # ... and the memory they may take (PENDING_CALL_BYTES each: 335,544 calls
    # by default, far more than clients keep outstanding, even a server's
    # thousand clients of 128 slots): a capture of a million unanswered calls
    # no longer holds a million of them.  ``pending_calls`` is the bound both make.
    max_pending_call_bytes: int = 128 * 1024 * 1024
    # A TCP direction that never showed a plausible RPC header after this many
    # bytes is taken as not RPC and ignored.
    max_unsynced_bytes: int = 1 * 1024 * 1024
    # TCP connections and UDP flows remembered at once.  Past it the least
    # recently active eighth is forgotten (a TCP message in progress there is
    # emitted cut short and counted); a flow that comes back gets a new id.
    max_connections: int = 262144
    # (source, destination) address pairs with their own per-direction facts;
    # packets of pairs past it are counted together, not per pair.
    max_directions: int = 262144
    # Transport events recorded per kind (retransmissions, holes, mirror
    # copies, ...); past it they are counted, not recorded.
    max_events_per_kind: int = 500_000
    # A frame byte-identical to one captured at most this long before it (any
    # frame of that window, not just the last few) is the same frame captured
    # more than once (a mirror/SPAN port, several capture points): counted,
    # recorded as an event and skipped (not a TCP retransmission nor a
    # repeated datagram).
    # Real repeats come much later (RTO >= 200 ms) and differ in IP id or
    # TCP timestamps.  0 disables the check.
    duplicate_window_ns: int = 1_000_000
    # A TCP sender that sends no data for at least this long in the middle of an
    # RPC message, or before re-sending bytes, is recorded as a ``tcp_send_gap``
    # event (why a message took long to cross: the sender waited for ACKs, for a
    # retransmission timeout, or paused).  Shorter gaps are the normal spacing of
    # a transfer and are not recorded; 0 records every gap.
    send_gap_ns: int = 100_000
    # TCP messages per direction waiting for the receiver's ACK of their last
    # byte (messages.acked_ns).  Past it the oldest is given up (its acked_ns
    # stays -1): a capture that sees one direction only never shows the ACKs.
    max_ack_waiting: int = 4096
    # A pipe, FIFO or device given as input (standard input, ``<(tcpdump -w -)``)
    # is copied once into a temporary file under $TMPDIR, to be read more than
    # once: its first bytes are checked first (a capture's or a compressed file's
    # magic, so ``/dev/zero`` or ``yes |`` is refused at once), then at most this
    # many bytes are copied, and never so many that less than 1 GiB stays free
    # there (capture.SPOOL_RESERVE_BYTES).  Past it the rest of the pipe is not
    # read: a warning (exit 6), and what was copied is analysed.  64 GiB is
    # several times the largest capture whose messages fit in memory here
    # (max_messages), while an endless pipe can no longer fill the disk.
    max_spool_bytes: int = 64 * 1024**3
    # Records of one unframed stretch (a record mark cut off by the snaplen: the
    # records after it stepped over by the length of the last one framed, events
    # rpc_unframed_record) held until the stretch ends; past it the stretch is
    # not split into records (its rpc_unframed event still counts its bytes).
    max_unframed_records: int = 4096
    # RPC messages read before the parser stops (checked every
    # CHECK_EVERY_FRAMES frames): the tables grow ~MESSAGE_BYTES per message,
    # so a capture of millions of tiny RPCs (or a small file decompressing to
    # gigabytes of them) would exhaust memory.  Past it the rest of the capture
    # is not read: a warning (exit 6).  Default: MEMORY_SHARE of the memory
    # available at start-up.
    max_messages: int = field(default_factory=default_max_messages)
    # Not a limit: which share of the traffic this parse reads.  A frame goes
    # to partition ``zlib.crc32(lower address + higher address) % partitions``
    # of its IP header (frames without one: partition 0), so each TCP
    # connection, UDP flow and fragmented datagram is read whole by one parse;
    # nfstrace.parsers.parallel runs the partitions side by side and combines
    # them into what one parse of everything gives.
    partitions: int = 1
    partition: int = 0
    # With ``buckets`` (a partition number per bucket), a frame goes to partition
    # ``buckets[crc32 % len(buckets)]`` instead: ``partitioning.balanced_buckets``
    # spreads the host pairs so that the partitions get about equal traffic.
    buckets: tuple[int, ...] = ()

    @property
    def pending_calls(self) -> int:
        """Calls remembered at most: max_pending_calls, within max_pending_call_bytes."""
        by_memory = self.max_pending_call_bytes // PENDING_CALL_BYTES
        return max(1, min(self.max_pending_calls, by_memory))
