"""The Linux client's own figures of each mount, computed from the capture:
per mount and operation, what ``/proc/self/mountstats`` counts and
``nfsiostat`` prints (ops/s, kB/s, kB/op, retransmissions, average RTT and
execute time), so that the two can be put side by side.

A **mount** is one client address, one server address and one NFS version:
every connection of an ``nconnect`` mount (and, as in the kernel, every mount
of that server sharing its transport) together.  Only the NFS program counts:
the kernel's iostats are those of the mount's NFS RPC client (MOUNT, NLM,
NFSACL and portmap calls are not in them).  NFSv4 COMPOUNDs are named as the
kernel names them (``kernel_op``).

The kernel's definitions (``net/sunrpc/stats.c`` ``rpc_count_iostats_metrics``,
``xprt.c``, ``xprtsock.c`` of Linux 6.1) and what the capture can see of them:

* ops: calls that completed (the kernel counts a call when it ends: here,
  calls answered in the capture; unanswered ones are counted apart);
* trans: transmissions, re-sends included (``n_calls``);
* bytes sent: every transmission's RPC message with its 4-byte TCP record
  mark (the kernel's ``rq_xmit_bytes_sent``; UDP: the datagram); bytes
  received: the reply's RPC message without the mark (``rq_reply_bytes_recvd``).
  Both equal mountstats to the byte on the lab's kernel captures;
* RTT: the kernel's clock starts when the RPC layer hands the request (or,
  when the socket's send buffer was full, its last part) to the socket
  (``rq_xtime``, reset at every transmission) and stops when the whole reply
  has been read.  The capture sees the request's first packet of its last
  transmission (``rtt_ms``) and its last packet (``rtt_last_ms``, tshark's
  SRT).  Neither is the kernel's clock: a request that waited in the socket
  behind earlier calls' bytes left later than the kernel's clock started (the
  kernel's RTT is longer: healthy 1 MiB WRITEs, about twice the first-packet
  time), and one handed over in parts restarted the clock part-way (shorter:
  writes under loss, about a third).  Of the two the first packet is the
  nearer on all but the lossy lab captures; a call of one packet has both;
* execute: the kernel's from the task's start to its end: the capture sees
  from the first packet of the first transmission to the reply (``exe_ms``).
  The time before that (the kernel's queue: waiting for a slot, for the
  connection, for a session slot, being copied into the socket) is invisible
  in a capture: ``--mountstats`` gives it (``nfstrace.analysis.kernel_stats``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from nfstrace.analysis.grouping import first_rows, is_value, row_codes, sorted_unique
from nfstrace.analysis.latency import error_mask
from nfstrace.jsonable import json_field

if TYPE_CHECKING:
    from nfstrace.analysis.kernel_stats import KernelFigures

NFS_PROGRAM = 100003
RECORD_MARK = 4  # bytes of a TCP record mark (RFC 5531 §11), one per message the kernel sends

# NFSv4 COMPOUNDs whose name in mountstats is not their main operation
# (fs/nfs/nfs4xdr.c): the operation that decides, wherever it stands.
V4_DECIDING = ("CLOSE", "DELEGRETURN", "OPEN_DOWNGRADE")
# What the kernel's NFSv4 procedures look like on the wire, where the capture
# cannot tell them apart (the attribute mask and the type created are not
# decoded): its FSINFO, PATHCONF, STATFS, SERVER_CAPS, ... are all GETATTRs.
V4_SEEN_AS = {
    "FSINFO": "GETATTR",
    "PATHCONF": "GETATTR",
    "STATFS": "GETATTR",
    "SERVER_CAPS": "GETATTR",
    "GETACL": "GETATTR",
    "GET_LEASE_TIME": "GETATTR",
    "FSID_PRESENT": "GETATTR",
    "SYMLINK": "CREATE",
    "OPEN_NOATTR": "OPEN",
    "SETACL": "SETATTR",
    "FS_LOCATIONS": "LOOKUP",
}

MOUNT_COLUMNS: dict[str, str] = {
    "client": "client address",
    "server": "server address",
    "vers": "NFS version (2, 3, 4)",
    "minor": "NFSv4 minor version (the highest seen; <NA>: v2/v3 or not seen)",
    "transport": "tcp / udp",
    "connections": "connections (TCP) or flows (UDP) the mount's calls used: nconnect > 1",
    "client_ports": "the client's ports, space-separated",
    "first_ns": "first packet of the mount's first NFS call",
    "last_ns": "last packet of its last reply (or call)",
    "seconds": "last_ns - first_ns: the time ops/s and kB/s are per",
    "ops": "calls answered (the kernel's ops: calls that completed)",
    "unanswered": "calls with no reply in the capture (not in ops)",
    "trans": "transmissions of the answered calls, re-sends included",
    "bytes_sent": "bytes sent, every transmission: RPC message + 4-byte TCP record mark",
    "bytes_recv": "bytes received: the replies' RPC messages",
    "session_slots": "NFSv4.1: the session slots the calls used (highest slot id + 1)",
}

OPERATION_COLUMNS: dict[str, str] = {
    "client": "client address",
    "server": "server address",
    "vers": "NFS version",
    "op": "operation as the kernel's mountstats names it (NFSv4: kernel_op)",
    "ops": "calls answered (what the kernel counts)",
    "unanswered": "calls with no reply in the capture (not in ops)",
    "trans": "transmissions (re-sends included)",
    "retrans": "trans - ops: RPC re-sends",
    "errors": "replies with an error (NFS status or RPC): the kernel's errors",
    "bytes_sent": "bytes sent: RPC messages of every transmission + TCP record marks",
    "bytes_recv": "bytes received: the replies' RPC messages",
    "ops_per_s": "ops / the mount's seconds",
    "kb_per_s": "(bytes sent + received) / 1024 / the mount's seconds (nfsiostat's kB/s)",
    "kb_per_op": "(bytes sent + received) / 1024 / ops",
    "rtt_ms": "mean RTT: first packet of the last transmission -> last packet of the reply",
    "rtt_last_ms": "mean from the last packet of the last transmission (tshark's SRT)",
    "exe_ms": "mean execute: first packet of the first transmission -> the reply "
    "(the kernel's execute less its queue, which a capture cannot see)",
}


def kernel_op(vers: int, op: str, ops: str) -> str:
    """An NFS call's name in mountstats: the procedure (v2/v3), or for an NFSv4
    COMPOUND its main operation, except CLOSE/DELEGRETURN/OPEN_DOWNGRADE
    wherever they stand and PUTROOTFH GETFH GETATTR (the kernel's LOOKUP_ROOT)."""
    if vers != 4 or op == "NULL":
        return op
    names = ops.split()
    for decisive in V4_DECIDING:
        if decisive in names:
            return decisive
    if op == "GETATTR" and "PUTROOTFH" in names and "GETFH" in names:
        return "LOOKUP_ROOT"
    return op


@dataclass(frozen=True)
class Mounts:
    """Per mount (MOUNT_COLUMNS) and per mount and operation (OPERATION_COLUMNS),
    the busiest mount first; ``kernel``: the comparison with mountstats
    (``kernel_stats.with_kernel``), one per mount it matched."""

    mounts: pd.DataFrame
    operations: pd.DataFrame
    kernel: tuple[KernelFigures, ...] = field(default=(), metadata=json_field(key="mountstats"))
    # the NFS mounts of the mountstats copies that matched none of the capture's
    unmatched: tuple[str, ...] = field(default=(), metadata=json_field(key="mountstats_unmatched"))

    def operations_of(self, client: str, server: str, vers: int) -> pd.DataFrame:
        ops = self.operations
        keep = is_value(ops["client"], client) & is_value(ops["server"], server)
        return ops[keep & (ops["vers"] == vers).to_numpy()]


def _ms(ns: pd.Series) -> np.ndarray:
    """ns -> ms, negative times (a clock stepping back) as 0, as everywhere; NaN: unknown."""
    return np.clip(ns.to_numpy("float64", na_value=np.nan) / 1e6, 0, None)


# The transactions' columns the figures read (only these are copied: the table is big).
_USED = ["client", "server", "vers", "op", "ops", "transport", "conn", "client_port", "minor",
         "slot", "n_calls", "n_replies", "call_bytes", "reply_bytes", "t_call_ns", "t_call_end_ns",
         "t_call_last_ns", "t_call_last_end_ns", "t_reply_ns", "status", "reply_stat",
         "accept_stat"]  # fmt: skip


def _op_codes(nfs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per call the code of its name in mountstats, and the names by code: each
    distinct (version, operation, COMPOUND) named once."""
    columns = [nfs["vers"], nfs["op"], nfs["ops"]]
    kind = row_codes(columns)
    at = first_rows(kind)
    vers, op, ops = (c.take(at).to_numpy(object) for c in columns)
    names = [kernel_op(int(v), str(o), "" if pd.isna(c) else str(c))
             for v, o, c in zip(vers, op, ops, strict=True)]  # fmt: skip
    code, unique = pd.factorize(np.array(names, dtype=object))
    return code[kind], np.asarray(unique, dtype=object)


def _distinct(codes: np.ndarray) -> np.ndarray:
    """The distinct values of non-negative integers, ascending: by a count per
    value where their range is small (no hash or sort of the rows), else a sort."""
    if len(codes) and int(codes.max()) <= 4 * len(codes) + 4096:
        return np.flatnonzero(np.bincount(codes))
    return sorted_unique(codes)


def _per(group: np.ndarray, n: int, values: np.ndarray) -> np.ndarray:
    return np.bincount(group, weights=values, minlength=n)


def _mean(group: np.ndarray, n: int, values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Per group the mean of ``values`` over ``rows`` where known (NaN: none)."""
    known = rows & np.isfinite(values)
    count = _per(group, n, known.astype("float64"))
    total = _per(group, n, np.where(known, values, 0.0))
    return np.divide(total, count, out=np.full(n, np.nan), where=count > 0)


def _extreme(at: Any, mount: np.ndarray, n: int, values: np.ndarray, start: Any) -> np.ndarray:
    """Per mount code the min or max (``at``: np.minimum.at, np.fmax.at ...) of
    ``values``, from ``start``."""
    out = np.full(n, start, dtype=values.dtype)
    at(out, mount, values)
    return out


def _mounts(nfs: pd.DataFrame, mount: np.ndarray, keys: pd.DataFrame) -> dict[str, Any]:
    """MOUNT_COLUMNS but the sums (ops, trans, bytes), per mount code: the
    columns, as groupby would give them (min and max leave missing values out)."""
    first = nfs["t_call_ns"].to_numpy("int64")
    last = nfs["t_reply_ns"].fillna(nfs["t_call_end_ns"]).to_numpy("int64")
    n = len(keys)
    # (mount, connection) and (mount, client port) as one code each, mount + n x
    # (value + 1) (0: unknown), the distinct ones ascending
    conn = _distinct(mount + n * (nfs["conn"].to_numpy("int64", na_value=-1) + 1))
    port = _distinct(mount + n * (nfs["client_port"].to_numpy("int64", na_value=-1) + 1))
    port = port[port >= n]
    # each mount's ports, ascending (its codes are), as one text: a stable sort
    # by mount, not a Python list per code (tens of thousands of connections)
    by_mount = np.argsort(port % n, kind="stable")
    numbers = (port[by_mount] // n - 1).tolist()
    bounds = np.searchsorted(port[by_mount] % n, np.arange(n + 1)).tolist()
    minor = nfs["minor"].to_numpy("float64", na_value=np.nan)
    slot = nfs["slot"].to_numpy("float64", na_value=np.nan)
    out: dict[str, Any] = {c: keys[c].array for c in keys.columns}
    out["transport"] = nfs["transport"].take(first_rows(mount)).astype(str).to_numpy()
    out["connections"] = np.bincount(conn[conn >= n] % n, minlength=n)
    out["client_ports"] = np.array(
        [" ".join(map(str, numbers[a:b])) for a, b in itertools.pairwise(bounds)], dtype=object
    )
    out["first_ns"] = _extreme(np.minimum.at, mount, n, first, np.iinfo("int64").max)
    out["last_ns"] = _extreme(np.maximum.at, mount, n, last, np.iinfo("int64").min)
    out["seconds"] = (out["last_ns"] - out["first_ns"]) / 1e9
    top_minor = _extreme(np.fmax.at, mount, n, minor, np.nan)  # (NaN: none known)
    top_slot = _extreme(np.fmax.at, mount, n, slot, np.nan)
    v4 = np.asarray(out["vers"]) == 4
    out["minor"] = pd.array(
        [int(m) if ok and m >= 0 else pd.NA for ok, m in zip(v4, top_minor, strict=True)],
        dtype="Int32",
    )
    v41 = v4 & (np.nan_to_num(top_minor, nan=-1) >= 1)
    out["session_slots"] = pd.array(
        [int(s) + 1 if ok and s >= 0 else pd.NA for ok, s in zip(v41, top_slot, strict=True)],
        dtype="Int64",
    )
    return out


def mount_operations(transactions: pd.DataFrame) -> Mounts:
    """The kernel's figures per mount and operation, from the capture's NFS calls."""
    keep = ((transactions["prog"] == NFS_PROGRAM) & (transactions["n_calls"] > 0)).to_numpy()
    nfs = transactions.loc[keep, _USED]
    if nfs.empty:
        return Mounts(
            pd.DataFrame(columns=list(MOUNT_COLUMNS)), pd.DataFrame(columns=list(OPERATION_COLUMNS))
        )
    key_columns = [nfs["client"], nfs["server"], nfs["vers"]]
    mount = row_codes(key_columns)
    at = first_rows(mount)
    keys = pd.DataFrame({c.name: c.take(at).reset_index(drop=True) for c in key_columns})
    keys["vers"] = keys["vers"].astype("int64")
    op, names = _op_codes(nfs)
    group, combos = pd.factorize(mount * len(names) + op)
    n = len(combos)

    answered = (nfs["n_replies"] > 0).to_numpy()
    sends = nfs["n_calls"].to_numpy("int64")
    tcp = is_value(nfs["transport"], "tcp")
    call = nfs["call_bytes"].to_numpy("int64", na_value=0) + np.where(tcp, RECORD_MARK, 0)
    reply = nfs["t_reply_ns"]
    done = answered.astype("float64")
    sums = {
        "ops": _per(group, n, done),
        "unanswered": _per(group, n, 1.0 - done),
        "trans": _per(group, n, done * sends),
        "errors": _per(group, n, done * error_mask(nfs).to_numpy(dtype=bool)),
        "bytes_sent": _per(group, n, done * call * sends),
        "bytes_recv": _per(group, n, done * nfs["reply_bytes"].to_numpy("int64", na_value=0)),
    }
    # the operations' columns as arrays, made a table once (in its final order)
    of_mount = combos // len(names)
    op_name = names[combos % len(names)].astype(str)
    ops = {name: values.round().astype("int64") for name, values in sums.items()}
    ops["retrans"] = ops["trans"] - ops["ops"]
    ops["rtt_ms"] = _mean(group, n, _ms(reply - nfs["t_call_last_ns"]), answered)
    ops["rtt_last_ms"] = _mean(group, n, _ms(reply - nfs["t_call_last_end_ns"]), answered)
    ops["exe_ms"] = _mean(group, n, _ms(reply - nfs["t_call_ns"]), answered)

    mounts = _mounts(nfs, mount, keys)
    for name in ("ops", "unanswered", "trans", "bytes_sent", "bytes_recv"):
        mounts[name] = np.bincount(of_mount, weights=ops[name], minlength=len(keys)).astype("int64")
    seconds = mounts["seconds"][of_mount]
    per_s = np.divide(1.0, seconds, out=np.full(n, np.nan), where=seconds > 0)
    kb = (ops["bytes_sent"] + ops["bytes_recv"]) / 1024
    ops["ops_per_s"] = ops["ops"] * per_s
    ops["kb_per_s"] = kb * per_s
    ops["kb_per_op"] = np.divide(kb, ops["ops"], out=np.full(n, np.nan), where=ops["ops"] > 0)
    # the busiest mount first; in each, the operations by time (ops x exe), then name
    rank = np.argsort(np.argsort(-mounts["ops"], kind="stable"), kind="stable")
    busy = -(np.nan_to_num(ops["exe_ms"], nan=0.0) * ops["ops"])
    order = np.lexsort((op_name, busy, rank[of_mount]))  # (stable, as sort_values)
    at = of_mount[order]
    table = {c: keys[c].array.take(at) for c in ("client", "server", "vers")}
    table["op"] = op_name[order]
    table.update({c: ops[c][order] for c in OPERATION_COLUMNS if c in ops})
    first = np.argsort(rank)
    return Mounts(
        pd.DataFrame({c: mounts[c][first] for c in MOUNT_COLUMNS}),
        pd.DataFrame({c: table[c] for c in OPERATION_COLUMNS}),
    )
