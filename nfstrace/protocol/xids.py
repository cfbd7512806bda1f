"""How clients number their calls' xids.

RFC 5531 §9 leaves the xid to the client: it must only tell calls apart.  Most
clients count: libnfs, nfs-rs and the Python clients of the lab add one per
call to a 32-bit counter sent big-endian, as XDR has every integer.  The Linux
kernel counts too, but ``xprt_alloc_xid`` (net/sunrpc/xprt.c) stores its
host-order counter as the ``__be32`` it sends without converting it, so on a
little-endian host (x86, arm64) the xid read big-endian steps by 0x01000000:
``0x1496c5d1, 0x1596c5d1, 0x1696c5d1``.  Read with its bytes reversed it
counts one by one again.  What infers calls from a client's numbering (a
snaplen that hid call headers, calls a capture missed) reads the xids in the
order the client counts in: ``counting`` below.
"""

from __future__ import annotations

import numpy as np

XID_MOD = 1 << 32


def swapped(xids: np.ndarray) -> np.ndarray:
    """The xids (int64 holding 32-bit values) with their four bytes reversed."""
    return xids.astype("<u4").byteswap().astype("int64")


def swapped_one(xid: int) -> int:
    """One xid with its bytes reversed (``swapped``)."""
    return int(swapped(np.array([xid % XID_MOD], "int64"))[0])


def counts_little_endian(xids_in_order: np.ndarray) -> bool:
    """Whether a client's successive calls' xids (in the order it sent them)
    count up one by one read with their bytes reversed more often than read
    as sent: the Linux kernel's numbering on a little-endian host."""
    if len(xids_in_order) < 2:
        return False
    as_sent = int(((np.diff(xids_in_order) % XID_MOD) == 1).sum())
    reversed_ = int(((np.diff(swapped(xids_in_order)) % XID_MOD) == 1).sum())
    return reversed_ > as_sent


def counting(xids: np.ndarray, little_endian: bool) -> np.ndarray:
    """The xids as the client counts them (reversing is its own inverse: the
    same call turns counted values back into xids)."""
    return swapped(xids) if little_endian else xids
