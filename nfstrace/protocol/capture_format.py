"""Capture file formats: the numbers of libpcap and pcapng files
(https://www.tcpdump.org/manpages/pcap-savefile.5.html, the pcapng draft
https://www.ietf.org/archive/id/draft-ietf-opsawg-pcapng-02.html) and the
bounds by which the reader (``native/src/capture.rs``, which
``native/generate_tables.py`` gives them) tells a record or block from
damage and searches for the next one past it.
"""

from __future__ import annotations

# The largest frame libpcap and wiretap accept (WTAP_MAX_PACKET_SIZE_STANDARD);
# the default of ParseLimits.max_frame_bytes.
MAX_CAPLEN = 262144
# A frame's wire length above this is taken as damage when searching for a record.
MAX_WIRE = 256 * 1024 * 1024
# Bytes examined at a time by the resync search (the next plausible record or
# block past damage).
RESYNC_WINDOW = 1024 * 1024
# A candidate pcap record header found by the resync search must be stamped
# within this long of the last good frame.
RESYNC_TS_WINDOW_S = 30 * 86400

# pcap magic numbers, as the file's first four bytes: (byte order, nanoseconds)
PCAP_MAGIC_BYTES = {
    b"\xd4\xc3\xb2\xa1": ("<", False),
    b"\x4d\x3c\xb2\xa1": ("<", True),
    b"\xa1\xb2\xc3\xd4": (">", False),
    b"\xa1\xb2\x3c\x4d": (">", True),
}
# the pcapng Section Header Block type, and as the file's first four bytes
PCAPNG_SHB = 0x0A0D0D0A
PCAPNG_SHB_BYTES = b"\x0a\x0d\x0d\x0a"

# A pcapng block longer than this is damage (bounds what one block may pin in
# memory; packet blocks are bounded by the frame limit as well).
MAX_BLOCK = 32 * 1024 * 1024
# Interfaces one pcapng section may describe (interface ids in packet blocks
# are 16 or 32 bits: a flood of interface blocks is damage).
MAX_INTERFACES = 65536
# A pcapng interface-statistics drop count above this is no count (some writers
# fill an unknown one with all ones): left out (noted as damage), never summed.
MAX_INTERFACE_DROPS = 1 << 48

# pcapng block types
PCAPNG_IDB = 0x00000001
PCAPNG_PB = 0x00000002  # obsolete Packet Block
PCAPNG_SPB = 0x00000003
PCAPNG_NRB = 0x00000004
PCAPNG_ISB = 0x00000005
PCAPNG_EPB = 0x00000006
PCAPNG_JOURNAL = 0x00000009
PCAPNG_DSB = 0x0000000A
# pcapng options
OPT_ENDOFOPT = 0
IF_TSRESOL = 9
IF_TSOFFSET = 14
ISB_IFDROP = 5
ISB_OSDROP = 7
