"""Terminal summary (rich): what the capture holds, leading with the counts an
administrator checks first.  Takes a Trace and a Console; prints nothing else.
"""

from __future__ import annotations

import pandas as pd
from rich.console import Console
from rich.table import Table

from nfstrace.parsers.link import LINKTYPE_NAMES
from nfstrace.parsers.procnames import procedure_name, program_name
from nfstrace.trace import Trace


def _span(messages: pd.DataFrame) -> str:
    if messages.empty:
        return "-"
    t0 = int(messages["ts_first_ns"].min())
    t1 = int(messages["ts_last_ns"].max())
    start = pd.Timestamp(t0, unit="ns", tz="UTC").strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    return f"{start}, {(t1 - t0) / 1e9:.3f} s"


def procedure_counts(messages: pd.DataFrame) -> pd.DataFrame:
    """Calls and replies per program/version/procedure, with names."""
    if messages.empty:
        return pd.DataFrame(columns=["program", "vers", "procedure", "calls", "replies"])
    counts = (
        messages.groupby(["prog", "vers", "proc", "msgtype"], observed=True)
        .size()
        .unstack("msgtype", fill_value=0)
        .reindex(columns=["call", "reply"], fill_value=0)
        .reset_index()
    )
    counts.insert(0, "program", [program_name(p) for p in counts["prog"]])
    counts["procedure"] = [
        procedure_name(p, v, c)
        for p, v, c in zip(counts["prog"], counts["vers"], counts["proc"], strict=True)
    ]
    counts = counts.rename(columns={"call": "calls", "reply": "replies"})
    return counts[["program", "vers", "procedure", "calls", "replies"]]


def render_summary(trace: Trace, console: Console) -> None:
    m = trace.messages
    st = trace.stats
    files = ", ".join(trace.paths)
    console.print(f"[bold]nfstrace[/bold] {files}")
    links = sorted({LINKTYPE_NAMES.get(lt, str(lt)) for f in st.files for lt in f.linktypes})
    console.print(f"  frames {st.frames:,}  ({', '.join(links) or '-'})   time {_span(m)}")
    calls = int((m["msgtype"] == "call").sum())
    replies = len(m) - calls
    over_tcp = int((m["transport"] == "tcp").sum())
    console.print(
        f"  RPC messages {len(m):,}: {calls:,} calls, {replies:,} replies"
        f"  (over TCP {over_tcp:,}, UDP {len(m) - over_tcp:,})"
    )
    table = Table(title="RPC procedures", show_edge=False, header_style="bold")
    for name in ("program", "vers", "procedure", "calls", "replies"):
        table.add_column(name, justify="right" if name in ("vers", "calls", "replies") else "left")
    for row in procedure_counts(m).itertuples(index=False):
        table.add_row(
            row.program, str(row.vers), row.procedure, f"{row.calls:,}", f"{row.replies:,}"
        )
    console.print(table)
    tcp = st.tcp
    lines = [
        f"IP fragments {st.ip_fragments:,}: {st.ip_datagrams_reassembled:,} datagrams reassembled, "
        f"{st.ip_datagrams_incomplete:,} incomplete",
        f"TCP segments {tcp.get('segments', 0):,}: {tcp.get('retransmitted', 0):,} retransmitted, "
        f"{tcp.get('out_of_order', 0):,} out of order, {tcp.get('holes', 0):,} holes "
        f"({tcp.get('hole_bytes', 0):,} bytes never captured), {tcp.get('resyncs', 0):,} resyncs",
        f"messages cut short {st.truncated_messages:,} (snaplen or loss), "
        f"{st.incomplete_messages:,} without their end",
        f"frames cut by snaplen {st.truncated_frames:,}; "
        f"dropped by the capturing interface {st.interface_drops:,}",
    ]
    for line in lines:
        console.print("  " + line, soft_wrap=True)
