"""Copies of the Linux NFS client's ``/proc/self/mountstats``: the kernel's own
count of every operation of a mount (``nfsiostat`` and ``mountstats`` read it).

The format (``fs/nfs/super.c`` ``nfs_show_stats``, ``net/sunrpc/stats.c``
``rpc_clnt_show_stats``, ``xprtsock.c`` ``xs_*_print_stats``)::

    device 10.0.0.5:/export mounted on /mnt with fstype nfs statvers=1.1
    \topts:\trw,vers=3,rsize=1048576,...,proto=tcp,...
    \tage:\t117
    \tcaps:\tcaps=0xf,wtmult=512,...
    \tsec:\tflavor=1,pseudoflavor=1
    \tevents:\t0 1 0 ...                      (27 counters)
    \tbytes:\t0 67108864 ...                  (8 counters)
    \tRPC iostats version: 1.1  p/v: 100003/3 (nfs)
    \txprt:\ttcp 748 1 2 0 0 74 74 0 166 0 10 165 71
    \tper-op statistics
    \t        NULL: 1 1 0 44 24 4 0 5 0
    \t       WRITE: 64 64 0 67116800 8704 754 708 1547 0

A per-op line holds ops, transmissions, major timeouts, bytes sent (the RPC
message and its TCP record mark, every transmission), bytes received (the
reply's RPC message), then the milliseconds summed over the ops of queue
(task start to the request's last hand-over to the socket), RTT (that
hand-over to the reply) and execute (task start to its end), and from
statvers 1.1 the ops that ended in an error.  Other file systems' device
lines, unknown lines and fields past the known ones are skipped; several
mounts in one file are kept apart.  Reading is all this module does: the
analysis (``nfstrace.analysis.mounts``) matches a mount to the capture.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from nfstrace.errors import UsageError
from nfstrace.text import printable

# The per-op counters in the order of a per-op line (statvers 1.0 has the first 8).
OP_FIELDS = (
    "ops",
    "trans",
    "timeouts",
    "bytes_sent",
    "bytes_recv",
    "queue_ms",
    "rtt_ms",
    "execute_ms",
    "errors",
)
# The xprt line's counters by transport, in order (xs_tcp_print_stats, ...).
# req_u, bklog_u, sending_u and pending_u are sums, over every transmission, of
# the requests outstanding, the tasks waiting for a slot (backlog), waiting to
# transmit and waiting for a reply at that moment: divided by sends, averages.
_COMMON = ("sends", "recvs", "bad_xids", "req_u", "bklog_u", "max_slots", "sending_u", "pending_u")
XPRT_FIELDS: dict[str, tuple[str, ...]] = {
    "tcp": ("srcport", "bind_count", "connect_count", "connect_time", "idle_time", *_COMMON),
    "udp": ("srcport", "bind_count", *_COMMON),
    "local": ("bind_count", "connect_count", "connect_time", "idle_time", *_COMMON),
    # RDMA: its own counters follow bklog_u (not read)
    "rdma": ("srcport", "bind_count", "connect_count", "connect_time", "idle_time", *_COMMON[:5]),
}
# Counters that are not running sums (a port, a high-water mark, ages): a
# difference of two snapshots keeps the later value.
NOT_SUMS = frozenset(("srcport", "max_slots", "connect_time", "idle_time"))
EVENT_NAMES = (
    "inoderevalidate", "dentryrevalidate", "datainvalidate", "attrinvalidate", "vfsopen",
    "vfslookup", "vfsaccess", "vfsupdatepage", "vfsreadpage", "vfsreadpages", "vfswritepage",
    "vfswritepages", "vfsgetdents", "vfssetattr", "vfsflush", "vfsfsync", "vfslock",
    "vfsrelease", "congestionwait", "setattrtrunc", "extendwrite", "sillyrename", "shortread",
    "shortwrite", "delay", "pnfs_read", "pnfs_write",
)  # fmt: skip
BYTE_NAMES = (
    "normalreadbytes", "normalwritebytes", "directreadbytes", "directwritebytes",
    "serverreadbytes", "serverwritebytes", "readpages", "writepages",
)  # fmt: skip
# A copy larger than this is not a mountstats file (thousands of mounts take a few MB).
MAX_BYTES = 64 * 1024 * 1024

_DEVICE = re.compile(r"device (\S+) mounted on (.+?) with fstype (\S+)(?: statvers=(\S+))?\s*$")
_IOSTATS = re.compile(r"RPC iostats version:\s*(\S+)\s+p/v:\s*(\d+)/(\d+)")
_OP_LINE = re.compile(r"([A-Za-z0-9_]+):((?:\s+\d+)+)\s*$")


@dataclass(frozen=True)
class OpCounters:
    """One per-op line: the kernel's totals for one operation (OP_FIELDS)."""

    ops: int
    trans: int
    timeouts: int
    bytes_sent: int
    bytes_recv: int
    queue_ms: int
    rtt_ms: int
    execute_ms: int
    errors: int | None = None  # statvers 1.0 has none

    @classmethod
    def of(cls, values: Sequence[int]) -> OpCounters:
        """From a per-op line's numbers (at least 8; a 9th is the errors)."""
        counts = dict(zip(OP_FIELDS[:-1], values[:8], strict=True))
        return cls(**counts, errors=values[8] if len(values) > 8 else None)

    def combined(self, other: OpCounters, sign: int) -> OpCounters:
        """``self + sign * other``, field by field (errors unknown if either's is)."""
        counts = {f: getattr(self, f) + sign * getattr(other, f) for f in OP_FIELDS[:-1]}
        errors = None
        if self.errors is not None and other.errors is not None:
            errors = self.errors + sign * other.errors
        return OpCounters(**counts, errors=errors)

    def minus(self, before: OpCounters) -> OpCounters:
        """The counts between two snapshots."""
        return self.combined(before, -1)

    def plus(self, other: OpCounters) -> OpCounters:
        return self.combined(other, 1)


@dataclass(frozen=True)
class Transport:
    """One xprt line: a connection of the mount (nconnect: several)."""

    kind: str  # tcp, udp, rdma, local
    counters: dict[str, int] = field(default_factory=dict)  # XPRT_FIELDS[kind] present

    def get(self, name: str) -> int | None:
        return self.counters.get(name)


@dataclass(frozen=True)
class NfsMount:
    """One NFS mount of a mountstats copy."""

    device: str  # server:/export as mounted
    mountpoint: str
    fstype: str  # nfs, nfs4
    statvers: str
    server: str  # the device's host part (an address or a name)
    export: str
    opts: dict[str, str]  # opts: line (flags map to "")
    age_s: int | None  # seconds since the mount
    events: dict[str, int]
    bytes: dict[str, int]
    prog: int | None  # RPC program/version of its iostats
    vers: int | None
    transports: tuple[Transport, ...]
    ops: dict[str, OpCounters]  # per-op statistics by name

    @property
    def nfs_version(self) -> tuple[int | None, int | None]:
        """(major, minor) from ``opts: vers=`` (3, 4.1), else the iostats' version."""
        text = self.opts.get("vers", "")
        m = re.fullmatch(r"(\d+)(?:\.(\d+))?", text)
        if m:
            return int(m.group(1)), (int(m.group(2)) if m.group(2) else None)
        return self.vers, None

    @property
    def label(self) -> str:
        major, minor = self.nfs_version
        vers = "" if major is None else f"NFSv{major}" + ("" if minor is None else f".{minor}")
        return f"{self.device} on {self.mountpoint} ({vers or self.fstype})"

    def same(self, other: NfsMount) -> bool:
        """The same mount (device and mount point) in another copy."""
        return (self.device, self.mountpoint) == (other.device, other.mountpoint)

    def grew_from(self, before: NfsMount) -> bool:
        """Every per-op counter at least ``before``'s (the same mount, later)."""
        for name, b in before.ops.items():
            a = self.ops.get(name)
            if a is not None and any(getattr(a, f) < getattr(b, f) for f in OP_FIELDS[:-1]):
                return False
        return True

    def minus(self, before: NfsMount) -> NfsMount:
        """The counts between an earlier copy ``before`` and this one: per op,
        and the transports' running sums (NOT_SUMS keep this copy's value; a
        transport with no counterpart, a connection made in between, is kept
        whole); the age is the copies' age difference."""
        ops = {name: c.minus(before.ops[name]) if name in before.ops else c
               for name, c in self.ops.items()}  # fmt: skip
        transports = []
        for i, t in enumerate(self.transports):
            b = before.transports[i] if i < len(before.transports) else None
            if b is None or b.kind != t.kind:
                transports.append(t)
                continue
            counters = {k: v if k in NOT_SUMS else v - b.counters.get(k, 0)
                        for k, v in t.counters.items()}  # fmt: skip
            transports.append(Transport(t.kind, counters))
        age = None if self.age_s is None or before.age_s is None else self.age_s - before.age_s
        return replace(
            self,
            age_s=age,
            events={k: v - before.events.get(k, 0) for k, v in self.events.items()},
            bytes={k: v - before.bytes.get(k, 0) for k, v in self.bytes.items()},
            transports=tuple(transports),
            ops=ops,
        )


@dataclass(frozen=True)
class Mountstats:
    """What ``--mountstats`` gave: the NFS mounts of one copy (``after``), and of
    an earlier one (``before``) when two were given; ``files`` as named."""

    after: tuple[NfsMount, ...]
    before: tuple[NfsMount, ...] | None = None
    files: tuple[str, ...] = ()

    def earlier(self, mount: NfsMount) -> NfsMount | None:
        """``mount`` (of ``after``) in the earlier copy, if one was given and has it."""
        return next((m for m in self.before or () if m.same(mount)), None)


def _host_and_export(device: str) -> tuple[str, str]:
    """'10.0.0.5:/e' -> ('10.0.0.5', '/e'); '[2001:db8::5]:/e' -> ('2001:db8::5', '/e')."""
    if device.startswith("["):
        host, _, rest = device[1:].partition("]")
        return host, rest.removeprefix(":")
    host, sep, export = device.partition(":")
    return (host, export) if sep else ("", device)


def _ints(text: str) -> list[int] | None:
    try:
        return [int(x) for x in text.split()]
    except ValueError:
        return None


def _named(values: list[int], names: Sequence[str], extra: str) -> dict[str, int]:
    out = dict(zip(names, values, strict=False))
    out.update((f"{extra}{i}", v) for i, v in enumerate(values[len(names) :], len(names)))
    return out


def _opts(text: str) -> dict[str, str]:
    out = {}
    for item in text.split(","):
        key, _, value = item.strip().partition("=")
        if key:
            out[key] = value
    return out


class _Builder:
    """The lines of one NFS device as they come."""

    def __init__(self, device: str, mountpoint: str, fstype: str, statvers: str) -> None:
        self.head = (device, mountpoint, fstype, statvers)
        self.opts: dict[str, str] = {}
        self.age: int | None = None
        self.events: dict[str, int] = {}
        self.bytes: dict[str, int] = {}
        self.prog: int | None = None
        self.vers: int | None = None
        self.transports: list[Transport] = []
        self.ops: dict[str, OpCounters] = {}
        self.in_ops = False

    def line(self, text: str) -> None:
        key, sep, rest = text.partition(":")
        if self.in_ops and (m := _OP_LINE.fullmatch(text)):
            values = _ints(m.group(2)) or []
            if len(values) >= 8:
                self.ops[m.group(1)] = OpCounters.of(values)
            return
        self.in_ops = False
        if text == "per-op statistics":
            self.in_ops = True
        elif key == "opts" and sep:
            self.opts = _opts(rest)
        elif key == "age" and sep:
            age = _ints(rest)
            self.age = age[0] if age else None
        elif key == "events" and sep:
            self.events = _named(_ints(rest) or [], EVENT_NAMES, "event")
        elif key == "bytes" and sep:
            self.bytes = _named(_ints(rest) or [], BYTE_NAMES, "bytes")
        elif key == "xprt" and sep:
            kind, *numbers = rest.split() or [""]
            counters = _ints(" ".join(numbers))
            if kind and counters is not None:
                named = _named(counters, XPRT_FIELDS.get(kind, ()), "field")
                self.transports.append(Transport(kind, named))
        elif m := _IOSTATS.match(text):
            self.prog, self.vers = int(m.group(2)), int(m.group(3))

    def build(self) -> NfsMount:
        device, mountpoint, fstype, statvers = self.head
        server, export = _host_and_export(device)
        return NfsMount(
            device=device,
            mountpoint=mountpoint.replace("\\040", " "),
            fstype=fstype,
            statvers=statvers,
            server=server,
            export=export,
            opts=self.opts,
            age_s=self.age,
            events=self.events,
            bytes=self.bytes,
            prog=self.prog,
            vers=self.vers,
            transports=tuple(self.transports),
            ops=self.ops,
        )


def parse_mountstats(text: str) -> tuple[NfsMount, ...]:
    """The NFS mounts of a mountstats copy that have per-op statistics, in file
    order (other devices and unknown lines are skipped)."""
    mounts: list[NfsMount] = []
    current: _Builder | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if m := _DEVICE.fullmatch(line):
            if current is not None:
                mounts.append(current.build())
            device, mountpoint, fstype, statvers = m.groups()
            nfs = fstype.startswith("nfs") and statvers is not None
            current = _Builder(device, mountpoint, fstype, statvers) if nfs else None
        elif current is not None:
            current.line(line)
    if current is not None:
        mounts.append(current.build())
    return tuple(m for m in mounts if m.ops)


def _read(path: str) -> str:
    """A file's text; a usage error when it is not a readable text file."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as e:
        raise UsageError(f"--mountstats: cannot read: {e.strerror}", path) from None
    if len(data) > MAX_BYTES:
        raise UsageError("--mountstats: over 64 MB: not a copy of /proc/self/mountstats", path)
    if b"\0" in data:
        raise UsageError("--mountstats: binary data, not a copy of /proc/self/mountstats", path)
    return data.decode("utf-8", errors="replace")


def read_mountstats(paths: Sequence[str]) -> Mountstats:
    """``--mountstats``: one copy (the counts since each mount) or two, an
    earlier and a later one (the counts between them).  A file that is not a
    mountstats copy with an NFS mount, or two copies whose counters do not grow
    from the first to the second, is a usage error."""
    if not 1 <= len(paths) <= 2:
        raise UsageError(f"--mountstats: give one or two files, not {len(paths)}")
    parsed = []
    for path in paths:
        text = _read(path)
        mounts = parse_mountstats(text)
        if not mounts:
            what = (
                "no NFS mount with per-op statistics in it"
                if "device " in text
                else "not a copy of /proc/self/mountstats (no 'device' line)"
            )
            raise UsageError(f"--mountstats: {what}", path)
        parsed.append(mounts)
    if len(parsed) == 1:
        return Mountstats(after=parsed[0], files=tuple(paths))
    found = Mountstats(after=parsed[1], before=parsed[0], files=tuple(paths))
    for mount in found.after:
        earlier = found.earlier(mount)
        if earlier is not None and not mount.grew_from(earlier):
            raise UsageError(
                f"--mountstats: the counters of {printable(mount.device)} on "
                f"{printable(mount.mountpoint)} are smaller in the second file than in the first: "
                "give the earlier copy first (or two copies of the same mount)",
                paths[1],
            )
    return found
