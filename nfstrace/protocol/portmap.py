"""The portmapper and rpcbind (RFC 1833, program 100000): the procedures the
parser reads port announcements from, their names, the protocol numbers and
netids a mapping names.

* portmap version 2 (§3): PMAPPROC_GETPORT asks for a (prog, vers, prot) and
  answers a port; PMAPPROC_DUMP lists (prog, vers, prot, port) mappings, prot
  being IPPROTO_TCP or IPPROTO_UDP (§3.1);
* rpcbind versions 3 and 4 (§2): RPCBPROC_GETADDR (and version 4's
  RPCBPROC_GETVERSADDR) answers a universal address; RPCBPROC_DUMP lists rpcb
  entries (prog, vers, netid, uaddr, owner); the UDP netids are "udp" and
  "udp6" (RFC 5665).
"""

from __future__ import annotations

PMAPPROC_GETPORT = 3
PMAPPROC_DUMP = 4
RPCBPROC_GETADDR = 3
RPCBPROC_DUMP = 4
RPCBPROC_GETVERSADDR = 9
IPPROTO_UDP = 17
UDP_NETIDS = (b"udp", b"udp6")

# Procedure names by number
PORTMAP2_PROC_NAMES = [
    "NULL",
    "SET",
    "UNSET",
    "GETPORT",
    "DUMP",
    "CALLIT",
]
RPCBIND3_PROC_NAMES = [
    "NULL",
    "SET",
    "UNSET",
    "GETADDR",
    "DUMP",
    "CALLIT",
    "GETTIME",
    "UADDR2TADDR",
    "TADDR2UADDR",
]
RPCBIND4_PROC_NAMES = [
    *RPCBIND3_PROC_NAMES,
    "GETVERSADDR",
    "INDIRECT",
    "GETADDRLIST",
    "GETSTAT",
]
