"""Names of RPC programs and procedures: the one table reports and decoders use.

Sources: RFC 1094 (NFSv2), RFC 1813 (NFSv3, MOUNTv3, NLMv4), RFC 7530/8881
(NFSv4 COMPOUND and callbacks), RFC 1833 (portmap/rpcbind), the Open Group
XNFS spec (NLM, NSM), Linux nfsacl.
"""

from __future__ import annotations

from nfstrace.parsers.rpc import CALLBACK_RANGE, PROGRAMS

_NFS2 = [
    "NULL",
    "GETATTR",
    "SETATTR",
    "ROOT",
    "LOOKUP",
    "READLINK",
    "READ",
    "WRITECACHE",
    "WRITE",
    "CREATE",
    "REMOVE",
    "RENAME",
    "LINK",
    "SYMLINK",
    "MKDIR",
    "RMDIR",
    "READDIR",
    "STATFS",
]
_NFS3 = [
    "NULL",
    "GETATTR",
    "SETATTR",
    "LOOKUP",
    "ACCESS",
    "READLINK",
    "READ",
    "WRITE",
    "CREATE",
    "MKDIR",
    "SYMLINK",
    "MKNOD",
    "REMOVE",
    "RMDIR",
    "RENAME",
    "LINK",
    "READDIR",
    "READDIRPLUS",
    "FSSTAT",
    "FSINFO",
    "PATHCONF",
    "COMMIT",
]
_MOUNT = [
    "NULL",
    "MNT",
    "DUMP",
    "UMNT",
    "UMNTALL",
    "EXPORT",
    "EXPORTALL",
]
_PORTMAP2 = [
    "NULL",
    "SET",
    "UNSET",
    "GETPORT",
    "DUMP",
    "CALLIT",
]
_RPCBIND3 = [
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
_RPCBIND4 = [
    *_RPCBIND3,
    "GETVERSADDR",
    "INDIRECT",
    "GETADDRLIST",
    "GETSTAT",
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
    (100003, 2): _NFS2,
    (100003, 3): _NFS3,
    (100003, 4): ["NULL", "COMPOUND"],
    (100005, 1): _MOUNT,
    (100005, 2): _MOUNT,
    (100005, 3): _MOUNT[:6],
    (100000, 2): _PORTMAP2,
    (100000, 3): _RPCBIND3,
    (100000, 4): _RPCBIND4,
    (100021, 1): _NLM,
    (100021, 3): _NLM,
    (100021, 4): _NLM,
    (100024, 1): _NSM,
    (100227, 2): _NFSACL2,
    (100227, 3): _NFSACL3,
}
CALLBACK_PROCEDURES = [
    "CB_NULL",
    "CB_COMPOUND",
]


def program_name(prog: int) -> str:
    if prog in PROGRAMS:
        return PROGRAMS[prog]
    if CALLBACK_RANGE[0] <= prog <= CALLBACK_RANGE[1]:
        return "nfs_cb"
    return str(prog) if prog >= 0 else "?"


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
