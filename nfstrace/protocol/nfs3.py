"""NFS version 3 (RFC 1813): procedure numbers and names (§3.3), the status
codes (§2.6, nfsstat3), stable_how (§3.3.7, WRITE), the procedures whose
arguments or results carry a name or a new file handle (§3.3), and the fixed
sizes of the XDR items a decoder steps over (§2.4, §2.5).
"""

from __future__ import annotations

# Procedure names by number (§3.3)
PROC_NAMES = [
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
NULL = 0
LOOKUP = 3
READ = 6
WRITE = 7
RENAME = 14
LINK = 15
COMMIT = 21
# procedures whose arguments start with diropargs3 (dir handle, then a name)
DIROP_PROCS = frozenset((3, 8, 9, 10, 11, 12, 13, 14))
# Procedures whose reply hands back the file handle of a (new) object: LOOKUP's
# nfs_fh3, and the post_op_fh3 of CREATE, MKDIR, SYMLINK, MKNOD.  A reply's
# ``fh`` column holds it: with the call's name it names the file.
NEW_OBJECT_PROCS = frozenset((8, 9, 10, 11))

# stable_how
UNSTABLE = 0
DATA_SYNC = 1
FILE_SYNC = 2
STABLE_NAMES = {UNSTABLE: "UNSTABLE", DATA_SYNC: "DATA_SYNC", FILE_SYNC: "FILE_SYNC"}

# nfsstat3
NFS3_OK = 0
NFS3ERR_JUKEBOX = 10008
STATUS_NAMES = {
    0: "NFS3_OK",
    1: "NFS3ERR_PERM",
    2: "NFS3ERR_NOENT",
    5: "NFS3ERR_IO",
    6: "NFS3ERR_NXIO",
    13: "NFS3ERR_ACCES",
    17: "NFS3ERR_EXIST",
    18: "NFS3ERR_XDEV",
    19: "NFS3ERR_NODEV",
    20: "NFS3ERR_NOTDIR",
    21: "NFS3ERR_ISDIR",
    22: "NFS3ERR_INVAL",
    27: "NFS3ERR_FBIG",
    28: "NFS3ERR_NOSPC",
    30: "NFS3ERR_ROFS",
    31: "NFS3ERR_MLINK",
    63: "NFS3ERR_NAMETOOLONG",
    66: "NFS3ERR_NOTEMPTY",
    69: "NFS3ERR_DQUOT",
    70: "NFS3ERR_STALE",
    71: "NFS3ERR_REMOTE",
    10001: "NFS3ERR_BADHANDLE",
    10002: "NFS3ERR_NOT_SYNC",
    10003: "NFS3ERR_BAD_COOKIE",
    10004: "NFS3ERR_NOTSUPP",
    10005: "NFS3ERR_TOOSMALL",
    10006: "NFS3ERR_SERVERFAULT",
    10007: "NFS3ERR_BADTYPE",
    10008: "NFS3ERR_JUKEBOX",
}

# Sizes of fixed-length items, in bytes
FHSIZE3 = 64  # NFS3_FHSIZE: the longest nfs_fh3
FATTR3_BYTES = 84  # fattr3
WCC_ATTR_BYTES = 24  # wcc_attr: size, mtime, ctime
VERIFIER_BYTES = 8  # NFS3_WRITEVERFSIZE (writeverf3)
