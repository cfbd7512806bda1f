"""Link layer: find the IP header inside a frame, and the partition a frame
falls in by its IP addresses (``parallel``).

Ethernet (IEEE 802.3) with 802.1Q / 802.1ad (QinQ) tags, Linux cooked
capture v1 (SLL) and v2 (SLL2), raw IPv4/IPv6, BSD null/loopback.  Link-type
numbers, EtherTypes and address families: ``nfstrace.protocol.link``.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

from nfstrace.parsers.capture import Bytes
from nfstrace.protocol.link import (
    AF_INET,
    AF_INET6,
    ETHERTYPE_IPV4,
    ETHERTYPE_IPV6,
    LINKTYPE_ETHERNET,
    LINKTYPE_IPV4,
    LINKTYPE_IPV6,
    LINKTYPE_LINUX_SLL,
    LINKTYPE_LINUX_SLL2,
    LINKTYPE_LOOP,
    LINKTYPE_NULL,
    LINKTYPE_RAW,
    LINKTYPE_RAW_BSD,
    LINKTYPE_RAW_OPENBSD,
    VLAN_TAGS,
)


def _by_version(data: Bytes, off: int) -> tuple[int, int]:
    if len(data) <= off:
        return 0, off
    v = data[off] >> 4
    return (v, off) if v in (4, 6) else (0, off)


def _by_ethertype(data: Bytes, etype: int, off: int) -> tuple[int, int]:
    while etype in VLAN_TAGS and len(data) >= off + 4:
        etype = (data[off + 2] << 8) | data[off + 3]
        off += 4
    if etype == ETHERTYPE_IPV4:
        return 4, off
    if etype == ETHERTYPE_IPV6:
        return 6, off
    return 0, off


def locate_ip(linktype: int, data: Bytes) -> tuple[int, int]:
    """Return (ip_version, offset of the IP header); version 0 = not IP."""
    if linktype == LINKTYPE_ETHERNET:
        if len(data) < 14:
            return 0, 0
        return _by_ethertype(data, (data[12] << 8) | data[13], 14)
    if linktype == LINKTYPE_LINUX_SLL:
        if len(data) < 16:
            return 0, 0
        return _by_ethertype(data, (data[14] << 8) | data[15], 16)
    if linktype == LINKTYPE_LINUX_SLL2:
        if len(data) < 20:
            return 0, 0
        return _by_ethertype(data, (data[0] << 8) | data[1], 20)
    if linktype in (LINKTYPE_RAW, LINKTYPE_RAW_BSD, LINKTYPE_RAW_OPENBSD):
        return _by_version(data, 0)
    if linktype == LINKTYPE_IPV4:
        return (4, 0) if len(data) else (0, 0)
    if linktype == LINKTYPE_IPV6:
        return (6, 0) if len(data) else (0, 0)
    if linktype in (LINKTYPE_NULL, LINKTYPE_LOOP):
        if len(data) < 4:
            return 0, 0
        # NULL is in the capturing host's byte order, LOOP in network order:
        # accept either, the values do not collide.
        af = int.from_bytes(data[0:4], "little")
        if af > 0xFFFF:
            af = int.from_bytes(data[0:4], "big")
        if af == AF_INET:
            return 4, 4
        if af in AF_INET6:
            return 6, 4
        return 0, 0
    return 0, 0


def partition_of(
    version: int, data: Bytes, off: int, partitions: int, buckets: Sequence[int] = ()
) -> int:
    """The partition (``ParseLimits.partitions``) a frame belongs to: the
    CRC-32 (zlib's) of its IP header's two addresses, the lower first, modulo
    ``partitions``; with ``buckets`` (``ParseLimits.buckets``), modulo their
    number and looked up in them.  A frame that is not IP or whose addresses
    were not captured counts as CRC 0.  Both directions of a host pair, and
    every fragment of a datagram, fall in the same partition."""
    if version == 4 and len(data) >= off + 20:
        a, b = bytes(data[off + 12 : off + 16]), bytes(data[off + 16 : off + 20])
        crc = zlib.crc32(a + b if a <= b else b + a)
    elif version == 6 and len(data) >= off + 40:
        a, b = bytes(data[off + 8 : off + 24]), bytes(data[off + 24 : off + 40])
        crc = zlib.crc32(a + b if a <= b else b + a)
    else:
        crc = 0
    return buckets[crc % len(buckets)] if buckets else crc % partitions
