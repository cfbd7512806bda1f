"""Link-layer numbers: the capture file's link type (the tcpdump.org LINKTYPE
registry, https://www.tcpdump.org/linktypes.html, which pcap and pcapng
headers carry) and the names reports give them; the EtherTypes of IPv4, IPv6
and VLAN tags (IEEE 802.1Q, 802.1ad QinQ, and the older 0x9100/0x9200 QinQ
tags); the address families in a BSD null/loopback header.
"""

from __future__ import annotations

# LINKTYPE_* values
LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW_OPENBSD = 12
LINKTYPE_RAW_BSD = 14
LINKTYPE_RAW = 101
LINKTYPE_LOOP = 108
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276

LINKTYPE_NAMES = {
    LINKTYPE_NULL: "null/loopback",
    LINKTYPE_ETHERNET: "ethernet",
    LINKTYPE_RAW_OPENBSD: "raw",
    LINKTYPE_RAW_BSD: "raw",
    LINKTYPE_RAW: "raw",
    LINKTYPE_LOOP: "loop",
    LINKTYPE_LINUX_SLL: "linux-sll",
    LINKTYPE_IPV4: "raw-ipv4",
    LINKTYPE_IPV6: "raw-ipv6",
    LINKTYPE_LINUX_SLL2: "linux-sll2",
}

# EtherTypes
ETHERTYPE_IPV4 = 0x0800
ETHERTYPE_IPV6 = 0x86DD
VLAN_TAGS = frozenset((0x8100, 0x88A8, 0x9100, 0x9200))

# BSD address families in DLT_NULL/LOOP headers (IPv6 differs per OS)
AF_INET = 2
AF_INET6 = frozenset((10, 24, 28, 30))
