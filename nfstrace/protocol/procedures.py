"""Names of RPC programs' procedures, by program and version: the one table
the decoders, the matching and the reports name procedures with.

Sources: RFC 1094 §2.2 (NFSv2), RFC 1813 §3.3 (NFSv3), §5 (MOUNTv3) and §6
(NLMv4), RFC 7530 §15 and RFC 8881 §16, §19 (NFSv4 COMPOUND and callbacks),
RFC 1833 (portmap/rpcbind), the Open Group XNFS specification (NLM, NSM), Linux
nfsacl.  The NFS and portmap/rpcbind names are kept with the rest of their
protocol (nfs2.py, nfs3.py, nfs4.py, portmap.py); MOUNT, NLM, NSM and NFSACL
have no other module, so theirs are here.
"""

from __future__ import annotations

from nfstrace.protocol import nfs2, nfs3, nfs4, portmap
from nfstrace.protocol.rpc import CALLBACK_RANGE, NFS_PROGRAM, PORTMAP_PROGRAM

# The names the transactions' ``op`` gives a WRITE (an NFSv2/v3 procedure, the
# main operation of an NFSv4 COMPOUND) and a COMMIT: what the inference and the
# write analyses look for.
WRITE_OP = "WRITE"
COMMIT_OP = "COMMIT"

_MOUNT = [
    "NULL",
    "MNT",
    "DUMP",
    "UMNT",
    "UMNTALL",
    "EXPORT",
    "EXPORTALL",
]
_NLM = [
    "NULL",
    "TEST",
    "LOCK",
    "CANCEL",
    "UNLOCK",
    "GRANTED",
    "TEST_MSG",
    "LOCK_MSG",
    "CANCEL_MSG",
    "UNLOCK_MSG",
    "GRANTED_MSG",
    "TEST_RES",
    "LOCK_RES",
    "CANCEL_RES",
    "UNLOCK_RES",
    "GRANTED_RES",
    "",
    "",
    "",
    "",
    "SHARE",
    "UNSHARE",
    "NM_LOCK",
    "FREE_ALL",
]
_NSM = [
    "NULL",
    "STAT",
    "MON",
    "UNMON",
    "UNMON_ALL",
    "SIMU_CRASH",
    "NOTIFY",
]
_NFSACL2 = [
    "NULL",
    "GETACL",
    "SETACL",
    "GETATTR",
    "ACCESS",
    "GETXATTRDIR",
]
_NFSACL3 = [
    "NULL",
    "GETACL",
    "SETACL",
    "GETXATTRDIR",
]

# (prog, vers) -> procedure names by number
PROCEDURES: dict[tuple[int, int], list[str]] = {
    (NFS_PROGRAM, 2): nfs2.PROC_NAMES,
    (NFS_PROGRAM, 3): nfs3.PROC_NAMES,
    (NFS_PROGRAM, 4): nfs4.PROC_NAMES,
    (100005, 1): _MOUNT,
    (100005, 2): _MOUNT,
    (100005, 3): _MOUNT[:6],
    (PORTMAP_PROGRAM, 2): portmap.PORTMAP2_PROC_NAMES,
    (PORTMAP_PROGRAM, 3): portmap.RPCBIND3_PROC_NAMES,
    (PORTMAP_PROGRAM, 4): portmap.RPCBIND4_PROC_NAMES,
    (100021, 1): _NLM,
    (100021, 3): _NLM,
    (100021, 4): _NLM,
    (100024, 1): _NSM,
    (100227, 2): _NFSACL2,
    (100227, 3): _NFSACL3,
}
# NFSv4 callback programs, whatever number the client chose in CALLBACK_RANGE
CALLBACK_PROCEDURES = nfs4.CB_PROC_NAMES


def procedure_name(prog: int, vers: int, proc: int) -> str:
    """E.g. WRITE, COMPOUND, MNT; the number when unnamed, '?' when unknown."""
    if proc < 0:
        return "?"
    names = PROCEDURES.get((prog, vers))
    if names is None and CALLBACK_RANGE[0] <= prog <= CALLBACK_RANGE[1]:
        names = CALLBACK_PROCEDURES
    if names is not None and proc < len(names) and names[proc]:
        return names[proc]
    return f"proc{proc}"
