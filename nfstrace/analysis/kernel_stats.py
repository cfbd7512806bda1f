"""The capture's figures beside the client's own (``--mountstats``): which
mount of the copies is the capture's, the per-operation counts and times side
by side, what only the client knows (the time calls queued before their first
byte left, the slot table's backlog), and the findings read from them.

The mount is chosen by NFS version and by address: the device's host part,
its ``addr=``/``mountaddr=`` options or the NFSv4 ``clientaddr=`` (a device
named by a host name matches by version alone, said so), then by the nearest
per-operation counts.  With two copies the counts are the difference between
them; with one, since the mount.  A capture holding fewer calls of an
operation than the kernel counted missed traffic (or began after the first
copy, ended before the second): a limit on what the capture can show.  More
calls than the kernel counted is the capture spanning more time.

The kernel's queue time (execute - RTT: from the task's start until its
request went to the socket) is where a client-side limit shows: tasks waiting
for an RPC slot (the transport's backlog), for an NFSv4.1 session slot, or
for the connection to finish sending the calls before them.  The transport's
counters say which (``xprt:``: backlog and sending queues, summed at every
transmission): the first two are a ``slot_queue`` finding with its remedy;
the third is the connection's own pace, which the time budget measures on the
wire (a note).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from nfstrace.analysis.findings import Finding
from nfstrace.analysis.mounts import V4_SEEN_AS, Mounts
from nfstrace.jsonable import NOT_IN_JSON
from nfstrace.parsers.mountstats import Mountstats, NfsMount, OpCounters
from nfstrace.text import printable

# A queue that is a cause: the kernel's queue time at least its RTT ("large
# against the RTT") and at least this share of its execute time, over all calls.
QUEUE_SHARE = 0.2
# Tasks waiting, on average at each transmission, that make the queue theirs:
# for a slot (backlog) or to send (the connection busy with earlier calls).
WAITING = 1.0
# Client module parameter that caps the NFSv4.1 session's slots (its default).
MAX_SESSION_SLOTS = 64
# Session slots full: the requests awaiting a reply at each transmission, on
# average, plus the one sent, at least this share of the slots the capture saw.
SLOTS_FULL = 0.8

KERNEL_COLUMNS: dict[str, str] = {
    "op": "operation (NFSv4: as the capture can tell them apart, see kernel_names)",
    "kernel_ops": "mountstats: ops",
    "ops": "capture: calls answered",
    "ops_diff": "capture - kernel (< 0: the capture missed calls)",
    "kernel_rtt_ms": "mountstats: mean RTT (hand-over to the socket -> reply read), ms",
    "rtt_ms": "capture: mean RTT from the first packet of the last transmission",
    "rtt_last_ms": "capture: mean RTT from the last packet (tshark's SRT)",
    "kernel_exe_ms": "mountstats: mean execute (task start -> end), ms",
    "exe_ms": "capture: mean from the first packet to the reply",
    "kernel_queue_ms": "mountstats: mean queue (task start -> hand-over to the socket: "
    "execute - RTT less the reply's decoding; invisible in a capture), ms",
    "kernel_trans": "mountstats: transmissions",
    "trans": "capture: transmissions",
    "kernel_timeouts": "mountstats: major timeouts",
    "kernel_errors": "mountstats: errors (<NA>: statvers 1.0)",
    "errors": "capture: replies with an error",
    "kernel_bytes_sent": "mountstats: bytes sent (RPC messages + record marks)",
    "bytes_sent": "capture: the same, from the calls",
    "kernel_bytes_recv": "mountstats: bytes received",
    "bytes_recv": "capture: the same, from the replies",
    "kernel_names": "the kernel's operations counted in this row (NFSv4 GETATTR: FSINFO, "
    "PATHCONF, SERVER_CAPS ... are GETATTRs on the wire)",
}
TRANSPORT_COLUMNS: dict[str, str] = {
    "transport": "tcp / udp / rdma / local",
    "port": "the client's port",
    "sends": "transmissions",
    "recvs": "replies received",
    "bad_xids": "replies matching no request",
    "max_slots": "most RPC slots in use at once (a high-water mark since the mount)",
    "backlog": "tasks waiting for a slot, on average at each transmission",
    "sending": "tasks waiting to transmit, on average at each transmission",
    "pending": "requests sent awaiting their reply, on average at each transmission",
}


@dataclass(frozen=True)
class KernelFigures:
    """One mount of the mountstats copies beside the capture's mount."""

    files: tuple[str, ...]
    mount: str  # 'server:/export on /mnt (NFSv3)'
    matched_by: str  # how it was chosen, in words
    since_mount: bool  # one copy: the counts since the mount; else between the copies
    seconds: int | None  # the copies' age difference (one copy: the mount's age)
    client: str
    server: str
    vers: int
    operations: pd.DataFrame  # KERNEL_COLUMNS
    transports: pd.DataFrame  # TRANSPORT_COLUMNS
    missed_calls: int  # calls the kernel counted that the capture does not hold
    extra_calls: int  # calls the capture holds beyond the kernel's
    session_slots: int | None  # NFSv4.1: slots the capture saw in use
    minor: int | None
    raw: NfsMount = field(metadata=NOT_IN_JSON)

    def total(self, column: str) -> float:
        return float(self.operations[column].fillna(0).sum())

    @property
    def queue_ms(self) -> float:
        return _per_op_total(self.operations, "kernel_queue_ms")

    @property
    def rtt_total_ms(self) -> float:
        return _per_op_total(self.operations, "kernel_rtt_ms")

    @property
    def exe_total_ms(self) -> float:
        return _per_op_total(self.operations, "kernel_exe_ms")

    def xprt_mean(self, name: str) -> float:
        """A transport average over every transmission of the mount's connections."""
        sends = self.transports["sends"].sum()
        return float(self.transports[name] @ self.transports["sends"] / sends) if sends else 0.0

    @property
    def max_slots(self) -> int:
        return int(self.transports["max_slots"].max()) if len(self.transports) else 0

    @property
    def interval(self) -> str:
        if self.since_mount:
            age = "" if self.seconds is None else f", {self.seconds:,} s"
            return f"since the mount{age}"
        age = "" if self.seconds is None else f" ({self.seconds:,} s apart)" if self.seconds else (
            " (within a second)"
        )  # fmt: skip
        return f"between the two copies{age}"


def _per_op_total(ops: pd.DataFrame, column: str) -> float:
    """A mean-per-op column back to its total (ms) over the ops."""
    return float((ops[column].fillna(0) * ops["kernel_ops"]).sum())


def _address(text: str | None) -> str | None:
    try:
        return str(ipaddress.ip_address(str(text).strip("[]")))
    except ValueError:
        return None


def _kernel_ops(mount: NfsMount, vers: int) -> dict[str, tuple[OpCounters, list[str]]]:
    """The kernel's per-op counts as the capture can tell them apart: NFSv4
    operations the wire does not distinguish summed under their wire name."""
    out: dict[str, tuple[OpCounters, list[str]]] = {}
    for name, c in mount.ops.items():
        if c.ops == 0 and c.trans == 0:
            continue
        seen = V4_SEEN_AS.get(name, name) if vers == 4 else name
        if seen in out:
            total, names = out[seen]
            out[seen] = (total.plus(c), [*names, name])
        else:
            out[seen] = (c, [name])
    return out


def _distance(mount: NfsMount, vers: int, ops: pd.DataFrame) -> int:
    kernel = _kernel_ops(mount, vers)
    capture = dict(zip(ops["op"], ops["ops"], strict=True))
    return sum(abs(capture.get(op, 0) - c.ops) for op, (c, _) in kernel.items()) + sum(
        n for op, n in capture.items() if op not in kernel
    )


def _match(
    client: str, server: str, vers: int, ops: pd.DataFrame, mounts: tuple[NfsMount, ...]
) -> tuple[NfsMount, str] | None:
    """The copy's mount that is the capture's (client, server, vers), and how it was chosen."""
    best: tuple[tuple, NfsMount, str] | None = None
    for m in mounts:
        major = m.nfs_version[0]
        if major is not None and major != vers:
            continue
        named = {
            _address(m.server),
            _address(m.opts.get("addr")),
            _address(m.opts.get("mountaddr")),
        }
        by_server = server in named
        by_client = _address(m.opts.get("clientaddr")) == client
        if not by_server and _address(m.server) is not None:
            continue  # another server's mount
        words = [
            w for w, ok in (("server address", by_server), ("client address", by_client)) if ok
        ]
        how = ", ".join(words) + " and NFS version" if words else (
            f"NFS version only (the device names the host {m.server!r}, no address)"
        )  # fmt: skip
        distance = _distance(m, vers, ops)
        key = (by_server, by_client, -distance)
        if best is None or key > best[0]:
            best = (key, m, how)
    if best is None:
        return None
    candidates = sum(1 for m in mounts if m.nfs_version[0] in (None, vers))
    how = best[2] + (f", the nearest counts of {candidates} such mounts" if candidates > 1 else "")
    return best[1], how


def _comparison(kernel: NfsMount, vers: int, ops: pd.DataFrame) -> pd.DataFrame:
    counted = _kernel_ops(kernel, vers)
    capture = ops.set_index("op")
    nothing = OpCounters(0, 0, 0, 0, 0, 0, 0, 0, 0)
    rows = []
    for op in [*counted, *(o for o in capture.index if o not in counted)]:
        c, names = counted.get(op, (nothing, []))
        mine = capture.loc[op] if op in capture.index else None
        n = c.ops

        def seen(column: str, mine: pd.Series | None = mine) -> float:
            return float(mine[column]) if mine is not None else 0.0

        rows.append(
            {
                "op": op,
                "kernel_names": " ".join(names),
                "kernel_ops": n,
                "ops": int(seen("ops")),
                "kernel_trans": c.trans,
                "trans": int(seen("trans")),
                "kernel_timeouts": c.timeouts,
                "kernel_errors": c.errors,
                "errors": int(seen("errors")),
                "kernel_bytes_sent": c.bytes_sent,
                "bytes_sent": int(seen("bytes_sent")),
                "kernel_bytes_recv": c.bytes_recv,
                "bytes_recv": int(seen("bytes_recv")),
                "kernel_rtt_ms": c.rtt_ms / n if n else np.nan,
                "rtt_ms": seen("rtt_ms") if mine is not None else np.nan,
                "rtt_last_ms": seen("rtt_last_ms") if mine is not None else np.nan,
                "kernel_exe_ms": c.execute_ms / n if n else np.nan,
                "exe_ms": seen("exe_ms") if mine is not None else np.nan,
                "kernel_queue_ms": c.queue_ms / n if n else np.nan,
            }
        )
    out = pd.DataFrame(rows, columns=[c for c in KERNEL_COLUMNS if c != "ops_diff"])
    out["ops_diff"] = out["ops"] - out["kernel_ops"]
    out["kernel_errors"] = out["kernel_errors"].astype("Int64")
    return out[list(KERNEL_COLUMNS)]


def _transports(kernel: NfsMount) -> pd.DataFrame:
    rows = []
    for t in kernel.transports:
        sends = t.get("sends") or 0

        def mean(name: str, sends: int = sends, t: object = t) -> float:
            value = t.get(name)  # type: ignore[attr-defined]
            return value / sends if sends and value is not None else np.nan

        rows.append(
            {
                "transport": t.kind,
                "port": t.get("srcport"),
                "sends": sends,
                "recvs": t.get("recvs"),
                "bad_xids": t.get("bad_xids"),
                "max_slots": t.get("max_slots"),
                "backlog": mean("bklog_u"),
                "sending": mean("sending_u"),
                "pending": mean("pending_u"),
            }
        )
    out = pd.DataFrame(rows, columns=list(TRANSPORT_COLUMNS))
    for c in ("port", "recvs", "bad_xids", "max_slots"):
        out[c] = out[c].astype("Int64")
    out["sends"] = out["sends"].astype("int64")
    return out


def with_kernel(mounts: Mounts, mountstats: Mountstats | None) -> Mounts:
    """``mounts`` with the mountstats figures of each mount that matched one."""
    if mountstats is None:
        return mounts
    available = list(mountstats.after)
    out = []
    for r in mounts.mounts.itertuples(index=False):
        client, server, vers = str(r.client), str(r.server), int(r.vers)
        ops = mounts.operations_of(client, server, vers)
        found = _match(client, server, vers, ops, tuple(available))
        if found is None:
            continue
        after, how = found
        available.remove(after)
        before = mountstats.earlier(after)
        kernel = after.minus(before) if before is not None else after
        since_mount = before is None
        if mountstats.before is not None and before is None:
            how += "; it is not in the first copy (mounted in between): counts since the mount"
        minor = None if pd.isna(r.minor) else int(r.minor)
        slots = None if pd.isna(r.session_slots) else int(r.session_slots)
        table = _comparison(kernel, vers, ops)
        out.append(
            KernelFigures(
                files=mountstats.files,
                mount=after.label,
                matched_by=how,
                since_mount=since_mount,
                seconds=kernel.age_s,
                client=client,
                server=server,
                vers=vers,
                operations=table,
                transports=_transports(kernel),
                missed_calls=int((-table["ops_diff"]).clip(lower=0).sum()),
                extra_calls=int(table["ops_diff"].clip(lower=0).sum()),
                session_slots=slots,
                minor=minor,
                raw=kernel,
            )
        )
    unmatched = tuple(m.label for m in available) if not out else ()
    return replace(mounts, kernel=tuple(out), unmatched=unmatched)


# ---- what the comparison says ----------------------------------------------------------


def _missed_words(k: KernelFigures) -> str:
    short = k.operations[k.operations["ops_diff"] < 0]
    ops = ", ".join(f"{r.op} {r.ops:,} of {r.kernel_ops:,}" for r in short.head(4).itertuples())
    return f"{k.missed_calls:,} calls the client's mountstats counted {k.interval} ({ops})"


def capture_limits(mounts: Mounts) -> list[str]:
    """What mountstats shows the capture missed (between two copies: it should
    hold every call the kernel counted), for the verdict's limits."""
    return [
        f"it holds fewer calls than the client counted: it missed {_missed_words(k)}"
        for k in mounts.kernel
        if k.missed_calls and not k.since_mount
    ]


def _queue_kind(k: KernelFigures) -> str | None:
    """Why calls queued in the client, when the kernel's queue is large against
    its RTT and a share of its execute time: 'slots' (tasks waiting for an RPC
    slot at each transmission), 'sending' (waiting for the connection to send
    the calls before them), 'session' (NFSv4.1: neither, while the session's
    slots the capture saw were all awaiting replies); None otherwise (a few
    calls' own copying into the socket, or nothing to say)."""
    queue, rtt, exe = k.queue_ms, k.rtt_total_ms, k.exe_total_ms
    if not exe or queue < rtt or queue < QUEUE_SHARE * exe:
        return None
    backlog, sending = k.xprt_mean("backlog"), k.xprt_mean("sending")
    if backlog >= WAITING and backlog >= sending:
        return "slots"
    if sending >= WAITING:
        return "sending"
    slots = k.session_slots or 0
    session = k.vers == 4 and (k.minor or 0) >= 1 and slots >= 2
    if session and k.xprt_mean("pending") + 1 >= SLOTS_FULL * slots:
        return "session"  # waiting neither for an RPC slot nor to send, the slots full
    return None


def _queue_words(k: KernelFigures) -> str:
    n = k.total("kernel_ops")
    return (
        f"{k.queue_ms / n:,.1f} ms queued per call against {k.rtt_total_ms / n:,.1f} ms RTT "
        f"({k.queue_ms / k.exe_total_ms:.0%} of their execute time, mountstats {k.interval})"
    )


def slot_findings(mounts: Mounts) -> list[Finding]:
    """The client-side queues that are a cause: calls waiting for an RPC slot or
    an NFSv4.1 session slot (mountstats shows them; a capture cannot); and
    mountstats given for none of the capture's mounts."""
    out = []
    if mounts.unmatched:
        seen = ", ".join(
            f"{r.client} → {r.server} NFSv{r.vers}" for r in mounts.mounts.itertuples(index=False)
        )
        out.append(
            Finding(
                kind="mountstats_unmatched",
                title=f"The mountstats copies hold no mount of the capture's "
                f"({seen or 'no NFS calls in it'}): {', '.join(mounts.unmatched)}; not compared",
                severity="warning",
                details={"mountstats_mounts": list(mounts.unmatched)},
            )
        )
    for k in mounts.kernel:
        kind = _queue_kind(k)
        if kind not in ("slots", "session"):
            continue
        pair = f"{k.client} → {k.server}"
        if kind == "slots":
            title = (
                f"Calls waited for a slot in the client's RPC slot table ({pair}): "
                f"{_queue_words(k)}; {k.xprt_mean('backlog'):,.1f} tasks waiting for a slot at "
                f"each transmission, at most {k.max_slots:,} slots in use. Allow more: sysctl "
                "sunrpc.tcp_max_slot_table_entries (and the server's limit), or more connections "
                "(mount -o nconnect=N)"
            )
        else:
            slots = f"{k.session_slots:,} session slots in use" if k.session_slots else "its slots"
            title = (
                f"Calls waited for an NFSv4.1 session slot ({pair}): {_queue_words(k)}, none "
                f"waiting for an RPC slot or for the connection, {slots}. Allow more: the client's "
                f"nfs.max_session_slots (module parameter, default {MAX_SESSION_SLOTS}) and the "
                "server's session slot count (knfsd sizes it from its memory)"
            )
        out.append(
            Finding(
                kind="slot_queue",
                title=title,
                severity="problem",
                details={
                    "queue": kind,
                    "client": k.client,
                    "server": k.server,
                    "queue_ms_per_call": k.queue_ms / k.total("kernel_ops"),
                    "rtt_ms_per_call": k.rtt_total_ms / k.total("kernel_ops"),
                    "queue_share_of_execute": k.queue_ms / k.exe_total_ms,
                    "backlog": k.xprt_mean("backlog"),
                    "sending": k.xprt_mean("sending"),
                    "max_slots": k.max_slots,
                    "session_slots": k.session_slots,
                    "mountstats": list(k.files),
                },
            )
        )
    return out


def _rtt_words(k: KernelFigures) -> str:
    ops = k.operations
    busiest = ops[ops["kernel_ops"] > 0].sort_values("kernel_ops", ascending=False).head(1)
    if busiest.empty:
        return ""
    r = busiest.iloc[0]
    return (
        f"; {r.op}: the kernel's RTT {r.kernel_rtt_ms:,.1f} ms, the capture's "
        f"{r.rtt_ms:,.1f} ms from the first packet ({r.rtt_last_ms:,.1f} from the last), "
        f"execute {r.kernel_exe_ms:,.1f} ms of which {r.kernel_queue_ms:,.1f} ms queued in the "
        "client"
    )


def notes(mounts: Mounts) -> list[Finding]:
    """The comparison in words: which mount, whether the counts agree, and the
    client's queue when it is the connection's own pace."""
    out = []
    for k in mounts.kernel:
        compared = k.operations[k.operations["kernel_ops"] > 0]
        equal = int((compared["ops_diff"] == 0).sum())
        agree = (
            f"the capture's calls equal the kernel's for all {len(compared)} operations"
            if equal == len(compared)
            else f"calls equal for {equal} of {len(compared)} operations"
        )
        if k.missed_calls:
            agree += f"; the capture misses {_missed_words(k)}"
        if k.extra_calls:
            agree += f"; it holds {k.extra_calls:,} calls more (it spans more time than the copies)"
        out.append(
            Finding(
                kind="mountstats",
                title=f"mountstats of {k.mount}, matched to {k.client} → {k.server} by "
                f"{k.matched_by}: {agree}{_rtt_words(k)}",
                severity="warning" if k.missed_calls and not k.since_mount else "info",
                details={
                    "files": list(k.files),
                    "mount": k.mount,
                    "missed_calls": k.missed_calls,
                    "extra_calls": k.extra_calls,
                },
            )
        )
        if _queue_kind(k) == "sending":
            out.append(
                Finding(
                    kind="transmit_queue",
                    title=f"Calls queued in the client for the connection ({k.client} → "
                    f"{k.server}): {_queue_words(k)}, {k.xprt_mean('sending'):,.1f} tasks waiting "
                    "to transmit at each transmission: the connection was busy sending the calls "
                    "before them, at the pace the time budget measures on the wire (nconnect "
                    "spreads a mount over several connections when one is the limit)",
                    details={"sending": k.xprt_mean("sending"), "backlog": k.xprt_mean("backlog")},
                )
            )
    return out


def mountstats_text(k: KernelFigures) -> str:
    """The files and mount in a line (reports)."""
    files = " and ".join(printable(f) for f in k.files)
    return f"{files}: {printable(k.mount)}, {k.interval}; matched by {k.matched_by}"
