"""Ports learnt from the portmapper / rpcbind (program 100000) answers seen in
the capture: where a server said an RPC program listens over UDP.

A datagram to or from such a port is RPC whatever its program (the parser
accepts there what it accepts on ports 2049 and 111).  Read from:

* portmap v2 (RFC 1833 §3): PMAPPROC_GETPORT (3), whose call says the
  protocol asked for and whose reply is the port; PMAPPROC_DUMP (4), a list of
  (prog, vers, prot, port) mappings;
* rpcbind v3 and v4 (RFC 1833 §2): RPCBPROC_GETADDR (3) and v4's
  RPCBPROC_GETVERSADDR (9), whose call names the netid asked for and whose
  reply is a universal address ("h1.h2.h3.h4.p1.p2", IPv6 "x::y.p1.p2": the
  port is p1 * 256 + p2); RPCBPROC_DUMP (4), a list of rpcb entries
  (prog, vers, netid, uaddr, owner).

The port is learnt for the address that answered (the universal address's
host part is not used: often 0.0.0.0 or ::, or an address of another
interface).  Only what the message's captured head holds is read.
"""

from __future__ import annotations

import struct

from nfstrace.protocol.portmap import (
    IPPROTO_UDP,
    PMAPPROC_DUMP,
    PMAPPROC_GETPORT,
    RPCBPROC_DUMP,
    RPCBPROC_GETADDR,
    RPCBPROC_GETVERSADDR,
    UDP_NETIDS,
)

MAX_NETID = 255  # longer strings are not netids: the message is damaged
MAX_UADDR = 255

_U32 = struct.Struct(">I").unpack_from


def asks_udp(vers: int, proc: int, head: bytes, off: int) -> bool | None:
    """A portmap/rpcbind call's arguments at head[off:]: does it ask where a
    program listens over UDP?  None: not a call that asks for an address."""
    if off < 0:
        return None
    if vers == 2 and proc == PMAPPROC_GETPORT:
        if len(head) < off + 16:
            return None
        return _U32(head, off + 8)[0] == IPPROTO_UDP
    if _getaddr(vers, proc):
        netid = _string(head, off + 8, MAX_NETID)
        if netid is None:
            return None
        return netid[0] in UDP_NETIDS
    return None


def learnt_ports(vers: int, proc: int, head: bytes, off: int, asked_udp: bool) -> list[int]:
    """The UDP ports a portmap/rpcbind reply (results at head[off:]) announces.
    ``asked_udp``: its call asked for a UDP address (GETPORT, GETADDR)."""
    if off < 0:
        return []
    n = len(head)
    out: list[int] = []
    if vers == 2:
        if proc == PMAPPROC_GETPORT:
            if asked_udp and n >= off + 4:
                port = _U32(head, off)[0]
                if 0 < port < 65536:
                    out.append(port)
        elif proc == PMAPPROC_DUMP:
            pos = off
            while n >= pos + 20 and _U32(head, pos)[0] == 1:
                _prog, _vers, prot, port = struct.unpack_from(">IIII", head, pos + 4)
                if prot == IPPROTO_UDP and 0 < port < 65536:
                    out.append(port)
                pos += 20
    elif vers in (3, 4):
        if _getaddr(vers, proc):
            uaddr = _string(head, off, MAX_UADDR)
            if asked_udp and uaddr is not None:
                port = uaddr_port(uaddr[0])
                if port > 0:
                    out.append(port)
        elif proc == RPCBPROC_DUMP:
            pos = off
            while n >= pos + 4 and _U32(head, pos)[0] == 1:
                netid = _string(head, pos + 12, MAX_NETID)
                if netid is None:
                    break
                uaddr = _string(head, netid[1], MAX_UADDR)
                if uaddr is None:
                    break
                owner = _string(head, uaddr[1], MAX_UADDR)
                if netid[0] in UDP_NETIDS:
                    port = uaddr_port(uaddr[0])
                    if port > 0:
                        out.append(port)
                if owner is None:
                    break
                pos = owner[1]
    return out


def _getaddr(vers: int, proc: int) -> bool:
    """rpcbind's procedures answering with one universal address."""
    return vers in (3, 4) and (
        proc == RPCBPROC_GETADDR or (vers == 4 and proc == RPCBPROC_GETVERSADDR)
    )


def uaddr_port(uaddr: bytes) -> int:
    """The port of a universal address (RFC 5665 §5.2.3.3: the host, then
    ".p1.p2" in decimal); -1 if it is not one."""
    parts = uaddr.rsplit(b".", 2)
    if len(parts) != 3 or not parts[0]:
        return -1
    p1, p2 = parts[1], parts[2]
    if not (0 < len(p1) <= 3 and 0 < len(p2) <= 3 and p1.isdigit() and p2.isdigit()):
        return -1
    hi, lo = int(p1), int(p2)
    if hi > 255 or lo > 255:
        return -1
    return hi * 256 + lo


def _string(head: bytes, pos: int, limit: int) -> tuple[bytes, int] | None:
    """The XDR string at head[pos:] and the position after it; None when it is
    longer than limit or not all captured."""
    if len(head) < pos + 4:
        return None
    (length,) = _U32(head, pos)
    end = pos + 4 + ((length + 3) & ~3)
    if length > limit or len(head) < end:
        return None
    return head[pos + 4 : pos + 4 + length], end
