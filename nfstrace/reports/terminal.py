"""Terminal summary (rich): what the capture holds and how the RPCs fared,
leading with the facts an administrator checks first.  Takes a Trace and a
Console; prints nothing else.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from rich.console import Console
from rich.markup import escape as _markup_escape

from nfstrace.analysis.budget import CAUSES
from nfstrace.analysis.diagnosis import Diagnosis
from nfstrace.analysis.latency import by_time_spent, server_time_note
from nfstrace.analysis.overview import Throughput, throughput_text, write_activity
from nfstrace.analysis.quality import clean_capture_text, damage_texts
from nfstrace.comparison import Comparison, speed_words
from nfstrace.parsers.stats import ParseStats
from nfstrace.protocol.link import LINKTYPE_NAMES
from nfstrace.reports.model_view import render_model, render_workload
from nfstrace.reports.mounts_view import mount_lines, render_mounts
from nfstrace.reports.style import Column, FittedTable, Wrapped, rows
from nfstrace.text import count, file_names, printable
from nfstrace.trace import Trace


def escape(text: str) -> str:
    """Text from the capture or the user, safe in rich markup and in a terminal."""
    return _markup_escape(printable(text))


def escape_plain(text: str) -> str:
    """Text from the capture or the user for a table cell (plain text, no markup)."""
    return printable(text)


MAX_LATENCY_ROWS = 25
MAX_FINDINGS = 5  # the diagnosis on one screen; the rest in the JSON/HTML report
MAX_PAIR_TABLES = 8  # per-pair latency tables: the busiest pairs (hundreds render slowly)
MAX_STALL_ROWS = 15
_SEVERITY_STYLE = {"problem": "bold red", "warning": "yellow", "info": "default"}


def _when(ns: int) -> str:
    return pd.Timestamp(ns, unit="ns", tz="UTC").strftime("%Y-%m-%d %H:%M:%S.%f UTC")


def write_throughput(trace: Trace) -> Throughput | None:
    """The write throughput the verdict states (``overview.write_activity``)."""
    return write_activity(trace.diagnosis.budget.pairs)


def rate_lines(trace: Trace, full: bool = False) -> list[str]:
    """The throughput lines: the writes over their write activity (the figure
    the verdict gives); with ``full`` also over the WRITE calls' own span; the
    reads over theirs."""
    ov = trace.overview
    activity = write_throughput(trace)
    lines = []
    if activity is not None:
        lines.append(f"written {throughput_text(activity, 'WRITE')}")
    if ov.write is not None and (full or activity is None):
        label = "WRITE calls' own span:" if activity is not None else "written"
        lines.append(f"{label} {throughput_text(ov.write, 'WRITE')}")
    if ov.read is not None:
        lines.append(f"read {throughput_text(ov.read, 'READ')}")
    return lines


def _ms(v: Any) -> str:
    return "-" if pd.isna(v) else f"{float(v):,.3f}"


LATENCY_COLUMNS = (
    Column("program", "left", same_drop=True),
    Column("op", "left"),
    Column("calls"),
    Column("no reply", zero_drop=True),
    Column("resent", zero_drop=True),
    Column("errors", zero_drop=True),
    Column("min", drop=3),
    Column("mean", drop=2),
    Column("p50"),
    Column("p90", drop=1),
    Column("p99"),
    Column("max"),
    Column("sum"),
)


def latency_rich_table(latency: pd.DataFrame, title: str) -> FittedTable:
    """Count and latency (ms) of each operation (its program and version first),
    the sum being the time it took in all: at a narrow width the all-zero
    counts, then p90, the mean and the minimum give way."""
    table = FittedTable(title, LATENCY_COLUMNS, label=2)
    for r in latency.head(MAX_LATENCY_ROWS).itertuples(index=False):
        table.add_row(
            f"{r.program} v{r.vers}",
            escape_plain(str(r.op)),
            f"{r.calls:,}",
            f"{r.no_reply:,}",
            f"{r.retransmitted:,}",
            f"{r.errors:,}",
            *(
                _ms(v)
                for v in (r.min_ms, r.mean_ms, r.p50_ms, r.p90_ms, r.p99_ms, r.max_ms, r.sum_ms)
            ),
        )
    return table


def render_diagnosis(diagnosis: Diagnosis, console: Console, full: bool = False) -> None:
    """The findings in plain words, ranked (capture limits first, then by time
    lost): the first MAX_FINDINGS, or all with ``full``."""
    findings = diagnosis.findings
    console.print("[bold]Diagnosis[/bold]")
    if not findings:
        console.print("  nothing notable found")
    shown = findings if full else findings[:MAX_FINDINGS]
    for i, f in enumerate(shown, 1):
        style = _SEVERITY_STYLE.get(f.severity, "default")
        where = f" [dim]({escape(f.evidence())})[/dim]" if f.evidence() else ""
        console.print(Wrapped(f"{i:>2}. [{style}]{escape(f.title)}[/{style}]{where}", 2, 6))
    if len(findings) > len(shown):
        more = len(findings) - len(shown)
        console.print(Wrapped(f"... {more} more with --full and in the JSON/HTML report", 6, 6))


def render_budget(diagnosis: Diagnosis, console: Console) -> None:
    """Where each pair's write time went: a line per client/server pair (the
    busiest MAX_PAIR_TABLES), its causes by share of its elapsed time, largest
    first; causes that cost nothing are left out."""
    if diagnosis.budget.pairs.empty:
        return
    pairs = diagnosis.budget.pairs.sort_values("elapsed_ns", ascending=False, kind="stable")
    console.print("[bold]Time budget of the writes[/bold] (share of each pair's write activity)")
    used = ["client", "server", "elapsed_ns", "mbit_s", *(f"{c}_ns" for c in CAUSES)]
    for r in rows(pairs, used, MAX_PAIR_TABLES):
        elapsed = r.elapsed_ns
        shares = sorted(
            ((getattr(r, f"{c}_ns") / elapsed, c) for c in CAUSES if elapsed),
            key=lambda x: -x[0],
        )
        text = ", ".join(
            f"{c.replace('_', ' ')} {share:.0%}" for share, c in shares if share >= 0.005
        )
        console.print(
            Wrapped(
                f"{escape(str(r.client))} → {escape(str(r.server))}  {elapsed / 1e9:,.3f} s "
                f"at {r.mbit_s:,.1f} Mbit/s: {text or '-'}"
            )
        )
    if len(pairs) > MAX_PAIR_TABLES:
        console.print(f"  ... {len(pairs) - MAX_PAIR_TABLES:,} more pairs in the JSON/HTML report")


def render_stalls(diagnosis: Diagnosis, console: Console, t0_ns: int) -> None:
    """The stalls, their start in seconds since ``t0_ns`` (the first RPC
    message: the origin the report's time axes use)."""
    stalls = diagnosis.stalls
    if stalls.stalls.empty:
        return
    limit = f"{stalls.threshold_ns / 1e6:,.1f} ms"
    table = FittedTable(
        f"Stalls (no write progress for more than {limit}; start: seconds since the first "
        "RPC message)",
        [
            Column("start s"),
            Column("duration ms"),
            Column("cause", "left"),
            Column("client → server", "left", drop=1),
            Column("evidence", "left", wrap=True),
        ],
    )
    for r in stalls.stalls.head(MAX_STALL_ROWS).itertuples(index=False):
        table.add_row(
            f"{(r.start_ns - t0_ns) / 1e9:,.3f}",
            f"{r.duration_ns / 1e6:,.1f}",
            str(r.cause),
            escape_plain(f"{r.client} → {r.server}"),
            escape_plain(str(r.detail)),
        )
    console.print(table)


MAX_OPERATION_ROWS = 8  # the default view: the busiest operations


OPERATION_COLUMNS = (
    Column("op", "left"),
    Column("calls"),
    Column("min", drop=2),
    Column("p50"),
    Column("p99"),
    Column("sum"),
    Column("server p50", drop=1),
    Column("no reply", zero_drop=True),
    Column("resent", zero_drop=True),
    Column("errors", "left", wrap=True, zero_drop=True),
)


def operations_rich_table(latency: pd.DataFrame) -> FittedTable:
    """The default view of latency: the operations that took the most time
    (their latencies summed), one compact row each (calls, the minimum, median,
    p99 and sum from the first packet of the call, the server's median time
    from its last packet, re-sends, errors by name), as tshark's SRT table
    gives its min and sum."""
    latency = by_time_spent(latency)
    table = FittedTable("Operations by time spent (ms)", OPERATION_COLUMNS)
    nfs = latency["program"].astype(str).eq("nfs")
    used = ["program", "op", "error_names", "errors", "calls", "min_ms", "p50_ms", "p99_ms"]
    used += ["sum_ms", "server_p50_ms", "no_reply", "retransmitted"]
    for r in rows(latency, used, MAX_OPERATION_ROWS):
        name = str(r.op) if nfs.all() else f"{r.program} {r.op}"
        errors = str(r.error_names or "") or (f"{r.errors:,}" if r.errors else "")
        table.add_row(
            escape_plain(name),
            f"{r.calls:,}",
            _ms(r.min_ms),
            _ms(r.p50_ms),
            _ms(r.p99_ms),
            _ms(r.sum_ms),
            _ms(r.server_p50_ms),
            f"{r.no_reply:,}" if r.no_reply else "",
            f"{r.retransmitted:,}" if r.retransmitted else "",
            escape_plain(errors),
        )
    return table


def render_header(trace: Trace, console: Console) -> None:
    ov = trace.overview
    st = trace.stats
    say = console.print
    say(f"[bold]nfstrace[/bold] {escape(printable(file_names(trace.paths)))}", soft_wrap=True)
    links = sorted({LINKTYPE_NAMES.get(lt, str(lt)) for f in st.files for lt in f.linktypes})
    say(
        Wrapped(
            f"{count(st.frames, 'frame')} ({', '.join(links) or '-'}) from {_when(ov.start_ns)}, "
            f"{(ov.end_ns - ov.start_ns) / 1e9:.3f} s"
        )
    )
    versions = ", ".join(f"NFSv{v}" for v in ov.nfs_versions) or "no NFS"
    say(
        Wrapped(
            f"clients {_listed(ov.clients)}  servers {_listed(ov.servers)}"
            f"  ({versions} over {'/'.join(ov.transports).upper()})"
        )
    )


def _listed(items: list[str], most: int = 4) -> str:
    """A few addresses, and how many more."""
    if not items:
        return "-"
    more = f" and {len(items) - most:,} more" if len(items) > most else ""
    return escape(", ".join(items[:most])) + more


def render_transactions(trace: Trace, console: Console, full: bool = False) -> None:
    ov = trace.overview
    say = console.print
    say("[bold]Transactions[/bold]")
    say(Wrapped(escape(ov.counts_text())))
    say(Wrapped(escape(ov.repeats_text())))
    for line in rate_lines(trace, full):
        say(Wrapped(escape(line)))
    for line in mount_lines(trace.diagnosis.mounts):  # as nfsiostat counts (mounts_view)
        say(Wrapped(escape(line)))


def render_latency_tables(trace: Trace, console: Console) -> None:
    """--full: every operation, per client/server pair, NFSv4 ops in COMPOUNDs."""
    say = console.print
    say(latency_rich_table(trace.latency, "Latency per operation (ms, first call to reply)"))
    pairs = trace.latency_by_pair
    if len(pairs) and pairs[["client", "server"]].drop_duplicates().shape[0] > 1:
        busiest = pairs.groupby(["client", "server"])["calls"].sum().nlargest(MAX_PAIR_TABLES)
        for (client, server), part in pairs.groupby(["client", "server"], sort=True):
            if (client, server) not in busiest.index:
                continue
            say()
            title = f"Latency per operation, client {client} → server {server}"
            say(latency_rich_table(part, title))
        n_pairs = pairs[["client", "server"]].drop_duplicates().shape[0]
        if n_pairs > MAX_PAIR_TABLES:
            say(f"  ... {n_pairs - MAX_PAIR_TABLES} quieter client/server pairs in the JSON")
    if not trace.compound_latency.empty:
        say()
        say(
            latency_rich_table(trace.compound_latency, "NFSv4: COMPOUNDs containing each operation")
        )


MAX_FILE_ROWS = 15


def render_files(trace: Trace, console: Console) -> None:
    """--full: the files written, the slowest first, by name where the capture
    shows it (else the handle)."""
    files = trace.files
    if files.empty:
        return
    table = FittedTable(
        "Files written (the slowest first; Mbit/s over each file's first WRITE call to its "
        "last WRITE reply)",
        [
            Column("file", "left"),
            Column("writes"),
            Column("MB"),
            Column("seconds"),
            Column("Mbit/s"),
            Column("sequential", drop=1),
        ],
    )
    for r in files.head(MAX_FILE_ROWS).itertuples(index=False):
        label = str(r.name) if r.name else f"fh {str(r.fh)[:16]}..."
        table.add_row(
            escape_plain(label),
            f"{r.writes:,}",
            f"{r.bytes / 1e6:,.3f}",
            "-" if pd.isna(r.seconds) else f"{r.seconds:,.3f}",
            "-" if pd.isna(r.mbit_s) else f"{r.mbit_s:,.1f}",
            "-" if pd.isna(r.sequential_share) else f"{r.sequential_share:.0%}",
        )
    console.print(table)
    if len(files) > MAX_FILE_ROWS:
        console.print(f"  ... {len(files) - MAX_FILE_ROWS:,} more files in the JSON/HTML report")


def _cut_to(stats: ParseStats) -> str:
    """' (to 96 bytes)': the length the frames cut short were cut to."""
    lengths = sorted({f.cut_len for f in stats.files if f.cut_len})
    return f" (to {', '.join(str(n) for n in lengths)} bytes)" if lengths else ""


def render_capture(trace: Trace, console: Console) -> None:
    """What the capture holds and what it missed or damaged."""
    st = trace.stats
    tcp = st.tcp
    lines = [
        f"IP fragments {st.ip_fragments:,}: {st.ip_datagrams_reassembled:,} datagrams reassembled, "
        f"{st.ip_datagrams_incomplete:,} incomplete",
        f"TCP segments {tcp.get('segments', 0):,}: {tcp.get('retransmitted', 0):,} retransmitted, "
        f"{tcp.get('out_of_order', 0):,} out of order, {tcp.get('holes', 0):,} holes "
        f"({tcp.get('hole_bytes', 0):,} bytes never captured), {tcp.get('resyncs', 0):,} resyncs",
        f"messages cut short {st.truncated_messages:,} (snaplen or loss), "
        f"{st.incomplete_messages:,} without their end",
        f"frames cut by snaplen {st.truncated_frames:,}{_cut_to(st)}; "
        f"dropped by the capturing interface {st.interface_drops:,}",
    ]
    damage = damage_texts(st)
    if damage:
        lines.append("damage: " + ", ".join(damage))
    clean = clean_capture_text(st)
    if clean is not None:  # a clean capture in one line (each count above is 0)
        lines = [clean]
    console.print("[bold]Capture[/bold]")
    for line in lines:
        console.print(Wrapped(escape(line)))


def render_expert(trace: Trace, console: Console) -> None:
    """--full: TCP's expert info as tshark gives it (retransmissions, segments
    not captured, zero and full windows), each kind with the RPCs in progress
    on its connection meanwhile (the WRITEs among them) and the frames of the
    slowest; the out-of-order segments, counted only."""
    expert = trace.diagnosis.transport.expert
    out_of_order = trace.stats.tcp.get("out_of_order", 0)
    if expert.empty and not out_of_order:
        return
    table = FittedTable(
        "TCP expert info, linked to the RPCs in progress on the connection meanwhile",
        [
            Column("what", "left", wrap=True),
            Column("events"),
            Column("for ms", zero_drop=True),
            Column("RPCs"),
            Column("WRITEs"),
            Column("their latency ms", drop=1),
            Column("first frame", drop=2),
            Column("slowest RPCs (call frames)", "left", wrap=True),
        ],
    )
    for r in expert.itertuples(index=False):
        table.add_row(
            r.what,
            f"{r.events:,}",
            f"{r.duration_ns / 1e6:,.3f}" if r.duration_ns else "",
            f"{r.rpcs:,}",
            f"{r.writes:,}",
            f"{r.rpc_latency_ns / 1e6:,.3f}",
            f"{r.first_frame:,}",
            r.rpc_frames,
        )
    if len(expert):
        console.print(table)
    if out_of_order:
        console.print(
            Wrapped(
                f"out of order: {count(out_of_order, 'segment')} (counted, not linked to RPCs: "
                "the parser keeps no event for them)"
            )
        )


def render_summary(trace: Trace, console: Console, full: bool = False) -> None:
    """One screen by default: the capture, the diagnosis, the time budget, the
    transactions, the busiest operations, the capture's limits.  ``full`` adds
    every latency table (per operation, per pair, NFSv4 ops), the stalls, the
    model and the workload."""
    say = console.print
    render_header(trace, console)
    say()
    render_diagnosis(trace.diagnosis, console, full)
    say()
    if not trace.diagnosis.budget.pairs.empty:
        render_budget(trace.diagnosis, console)
        say()
    render_transactions(trace, console, full)
    say()
    if full:
        render_mounts(trace.diagnosis.mounts, console)
        render_latency_tables(trace, console)
        if not trace.files.empty:
            say()
            render_files(trace, console)
    elif len(trace.latency):
        say(operations_rich_table(trace.latency))
        more = len(trace.latency) - MAX_OPERATION_ROWS
        say(
            Wrapped(
                "min/p50/p99/sum: first packet of the call to the reply, as the client waits "
                "(sum: the operation's time in all); "
                + server_time_note(trace.diagnosis.model.rtt_visible_s)
                + (f"; {more:,} more operations with --full" if more > 0 else "")
            )
        )
    say()
    render_capture(trace, console)
    if full:
        say()
        render_expert(trace, console)
        say()
        render_diagnosis_sections(trace.diagnosis, console, trace.overview.start_ns)


def render_diagnosis_sections(diagnosis: Diagnosis, console: Console, t0_ns: int) -> None:
    """The figures behind the findings: stalls, the model, the workload."""
    if not diagnosis.stalls.stalls.empty:
        render_stalls(diagnosis, console, t0_ns)
        console.print()
    render_model(diagnosis.model, console)
    console.print()
    render_workload(diagnosis.workload, console)


def _two(before: float, after: float, fmt: str) -> str:
    """'before → after', each formatted, '-' where missing."""
    return " → ".join("-" if pd.isna(x) else format(x, fmt) for x in (before, after))


def render_comparison(cmp: Comparison, console: Console) -> None:
    """``nfstrace compare``: the two captures, what changed in words, each pair's
    budget before and after, the busiest operations' latency before and after."""
    say = console.print
    say("[bold]nfstrace compare[/bold]")
    for label, t in (("before", cmp.before), ("after", cmp.after)):
        v = t.diagnosis.verdict
        names = escape(printable(file_names(t.paths)))
        say(
            Wrapped(
                f"{label:<6} {names}: {count(t.stats.frames, 'frame')}, "
                f"{count(t.overview.transactions, 'transaction')}; "
                f"verdict {v.primary if v else '-'}"
            )
        )
    say()
    say("[bold]What changed[/bold]")
    for i, line in enumerate(cmp.changes, 1):
        say(Wrapped(f"{i:>2}. {escape(line)}", 2, 6))
    if not cmp.changes:
        say("  nothing to compare: no writes and no operations in common")
    say()
    if len(cmp.pairs):
        say("[bold]Time budget of the writes[/bold] (share of each pair's write activity)")
        for r in cmp.pairs.head(MAX_PAIR_TABLES).itertuples(index=False):
            say(
                Wrapped(
                    f"{escape(str(r.client))} → {escape(str(r.server))}  "
                    f"{_two(r.elapsed_s_before, r.elapsed_s_after, ',.3f')} s, "
                    f"{_two(r.mbit_s_before, r.mbit_s_after, ',.1f')} Mbit/s"
                )
            )
            shares = []
            for c in CAUSES:
                b, a = getattr(r, f"{c}_share_before"), getattr(r, f"{c}_share_after")
                if max(np.nan_to_num(b), np.nan_to_num(a)) >= 0.005:
                    shares.append(f"{c.replace('_', ' ')} {_two(b, a, '.0%')}")
            say(Wrapped(", ".join(shares), 5, 5))
        say()
    ops = cmp.operations.head(MAX_OPERATION_ROWS)
    if len(ops):
        table = FittedTable(
            "Operations, before → after (ms)",
            [
                Column("op", "left"),
                Column("calls"),
                Column("p50"),
                Column("p99", drop=1),
                Column("p50 change"),
                Column("errors", zero_drop=True),
            ],
        )
        for r in ops.itertuples(index=False):
            table.add_row(
                escape_plain(str(r.op) if r.program == "nfs" else f"{r.program} {r.op}"),
                f"{r.calls_before:,} → {r.calls_after:,}",
                f"{_ms(r.p50_ms_before)} → {_ms(r.p50_ms_after)}",
                f"{_ms(r.p99_ms_before)} → {_ms(r.p99_ms_after)}",
                "-" if not r.p50_change > -1 else speed_words(1 + r.p50_change),
                f"{r.errors_before:,} → {r.errors_after:,}",
            )
        say(table)
