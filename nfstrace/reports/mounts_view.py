"""Terminal rendering (rich) of the kernel's figures per mount
(``nfstrace.analysis.mounts``) and of mountstats beside them
(``nfstrace.analysis.kernel_stats``): as ``nfsiostat`` prints them.

Takes the diagnosis's ``Mounts`` and a Console; computes nothing.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from rich.console import Console
from rich.markup import escape

from nfstrace.analysis.kernel_stats import KernelFigures, mountstats_text
from nfstrace.analysis.mounts import Mounts
from nfstrace.reports.style import Column, FittedTable, rows
from nfstrace.text import count, printable

MAX_MOUNTS = 4  # mounts shown (the busiest); the rest in the JSON/HTML report
MAX_OP_ROWS = 20
SHORT_OPS = 2  # operations in the default view's line per mount
# nfsiostat's columns per operation (the capture's figures)
MOUNT_OP_COLUMNS = (
    Column("op", "left"),
    Column("ops"),
    Column("ops/s", drop=2),
    Column("kB/s"),
    Column("kB/op"),
    Column("retrans", zero_drop=True),
    Column("avg RTT ms"),
    Column("avg exe ms"),
    Column("errors", zero_drop=True),
)
# mountstats beside the capture: each cell "kernel / capture"
KERNEL_OP_COLUMNS = (
    Column("op", "left"),
    Column("ops"),
    Column("retrans"),
    Column("avg RTT ms"),
    Column("avg exe ms"),
    Column("queue ms"),
    Column("timeouts", zero_drop=True),
)


def _num(value: Any, fmt: str = ",.3f") -> str:
    return "-" if value is None or pd.isna(value) else format(float(value), fmt)


def mount_name(r: Any) -> str:
    """'NFSv4.1 10.0.0.7 → 10.0.0.5 (4 connections)' of a Mounts.mounts row."""
    vers = f"NFSv{r.vers}" + ("" if pd.isna(r.minor) else f".{r.minor}")
    conns = count(int(r.connections), "connection")
    return printable(f"{vers} {r.client} → {r.server} ({conns}, {r.transport.upper()})")


def _kernel_of(mounts: Mounts, r: Any) -> KernelFigures | None:
    for k in mounts.kernel:
        if (k.client, k.server, k.vers) == (str(r.client), str(r.server), int(r.vers)):
            return k
    return None


def mount_lines(mounts: Mounts | None) -> list[str]:
    """The default view: a line per mount (the busiest MAX_MOUNTS), its busiest
    operations as nfsiostat counts them, and mountstats' when given."""
    if mounts is None or mounts.mounts.empty:
        return []
    out = []
    named = ["client", "server", "vers", "minor", "connections", "transport"]  # (mount_name)
    for r in rows(mounts.mounts, named, MAX_MOUNTS):
        ops = mounts.operations_of(str(r.client), str(r.server), int(r.vers))
        used = ["op", "ops", "kb_per_op", "rtt_ms", "exe_ms"]
        parts = [
            f"{o.op} {o.ops:,} x {_num(o.kb_per_op, ',.1f')} kB, RTT {_num(o.rtt_ms, ',.2f')} ms"
            + (f" (exe {_num(o.exe_ms, ',.2f')})" if abs(o.exe_ms - o.rtt_ms) > 0.005 else "")
            for o in rows(ops[ops["ops"] > 0], used, SHORT_OPS)
        ]
        line = f"{mount_name(r)} as nfsiostat counts: {'; '.join(parts) or 'no call answered'}"
        k = _kernel_of(mounts, r)
        if k is not None:
            line += "; " + kernel_line(k)
        out.append(line)
    if len(mounts.mounts) > MAX_MOUNTS:
        out.append(f"... {len(mounts.mounts) - MAX_MOUNTS:,} more mounts in the JSON/HTML report")
    return out


def kernel_line(k: KernelFigures) -> str:
    """mountstats in a few words: agreement, and the busiest op's kernel times."""
    ops = k.operations[k.operations["kernel_ops"] > 0]
    if k.missed_calls and not k.since_mount:
        said = f"mountstats: the capture misses {k.missed_calls:,} calls"
    else:
        equal = int((ops["ops_diff"] == 0).sum())
        said = f"mountstats: calls equal for {equal} of {len(ops)} operations"
    if len(ops):
        top = ops.sort_values("kernel_ops", ascending=False, kind="stable").iloc[0]
        said += (
            f", {top.op} RTT {_num(top.kernel_rtt_ms, ',.1f')} ms, exe "
            f"{_num(top.kernel_exe_ms, ',.1f')} ms, queue {_num(top.kernel_queue_ms, ',.1f')} ms"
        )
    return said


def render_mounts(mounts: Mounts | None, console: Console) -> None:
    """--full: per mount, nfsiostat's table from the capture, and mountstats
    beside it when given."""
    if mounts is None or mounts.mounts.empty:
        return
    say = console.print
    for r in mounts.mounts.head(MAX_MOUNTS).itertuples(index=False):
        ops = mounts.operations_of(str(r.client), str(r.server), int(r.vers))
        ports = f" port {r.client_ports}" if r.client_ports else ""
        title = (
            f"{mount_name(r)},{ports}: {r.seconds:,.3f} s of calls, as nfsiostat counts "
            "(RTT from the first packet of the call's last send, exe from its first send)"
        )
        table = FittedTable(escape(title), MOUNT_OP_COLUMNS)
        for o in ops.head(MAX_OP_ROWS).itertuples(index=False):
            share = f" ({o.retrans / o.ops:.1%})" if o.ops and o.retrans else ""
            no_reply = f" +{o.unanswered:,} no reply" if o.unanswered else ""
            table.add_row(
                printable(str(o.op)),
                f"{o.ops:,}{no_reply}",
                _num(o.ops_per_s, ",.1f"),
                _num(o.kb_per_s, ",.1f"),
                _num(o.kb_per_op, ",.1f"),
                f"{o.retrans:,}{share}",
                _num(o.rtt_ms),
                _num(o.exe_ms),
                f"{o.errors:,}",
            )
        say(table)
        if len(ops) > MAX_OP_ROWS:
            say(f"  ... {len(ops) - MAX_OP_ROWS:,} more operations in the JSON/HTML report")
        k = _kernel_of(mounts, r)
        if k is not None:
            say()
            render_kernel(k, console)
        say()


def render_kernel(k: KernelFigures, console: Console) -> None:
    """mountstats beside the capture, per operation, and the client's transports."""
    say = console.print
    title = escape("mountstats beside the capture (kernel / capture): " + mountstats_text(k))
    table = FittedTable(title, KERNEL_OP_COLUMNS)
    for o in k.operations.head(MAX_OP_ROWS).itertuples(index=False):
        differ = " (differ)" if o.ops != o.kernel_ops else ""
        table.add_row(
            printable(str(o.op)),
            f"{o.kernel_ops:,} / {o.ops:,}{differ}",
            f"{o.kernel_trans - o.kernel_ops:,} / {o.trans - o.ops:,}",
            f"{_num(o.kernel_rtt_ms, ',.1f')} / {_num(o.rtt_ms, ',.1f')}",
            f"{_num(o.kernel_exe_ms, ',.1f')} / {_num(o.exe_ms, ',.1f')}",
            _num(o.kernel_queue_ms, ",.1f"),
            f"{o.kernel_timeouts:,}",
        )
    say(table)
    for t in k.transports.itertuples(index=False):
        say(
            f"  xprt {t.transport} port {_num(t.port, ',.0f')}: {t.sends:,} sends, at most "
            f"{_num(t.max_slots, ',.0f')} slots in use; per send on average "
            f"{_num(t.backlog, ',.2f')} waiting for a slot, {_num(t.sending, ',.2f')} waiting to "
            f"transmit, {_num(t.pending, ',.2f')} awaiting a reply",
            soft_wrap=True,
        )
    say(
        "  the kernel's RTT starts when the call is handed to the socket, the capture's at its "
        "first packet; queue (execute - RTT) is the client's, invisible in a capture",
        soft_wrap=True,
    )
