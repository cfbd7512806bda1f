"""NFS version 2 (RFC 1094): procedure numbers and names (§2.2), the status
of success (§2.3.1), the procedures whose arguments are void or start with
diropargs (§2.2, §2.3.10), and the fixed sizes a decoder steps over (fhandle:
§2.3.3, fattr: §2.3.5).
"""

from __future__ import annotations

# Procedure names by number (§2.2)
PROC_NAMES = [
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
NULL = 0
ROOT = 3
READ = 6
WRITECACHE = 7
WRITE = 8
LINK = 12
# procedures whose arguments start with diropargs (dir handle, then a name)
DIROP_PROCS = frozenset((4, 9, 10, 11, 13, 14, 15))
# procedures without arguments
NO_ARGS = frozenset((NULL, ROOT, WRITECACHE))

NFS_OK = 0

FHSIZE = 32  # fhandle
FATTR_BYTES = 68  # fattr
