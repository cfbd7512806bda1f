"""``nfstrace watch`` on a terminal: a table redrawn every interval
(``rich.live.Live``) in place of the plain lines: one row per client → server
pair with the fields of its line, what the capture missed and the last alerts
under it, the run's totals in its caption.  ``render`` is a pure function of
the ``watch.Screen``; the command line owns the ``Live``.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from nfstrace.watch import Screen, clock


def _ms(ns: float) -> str:
    return "-" if ns != ns else f"{ns / 1e6:.2f}"  # (nan: no answered WRITE)


def render(screen: Screen) -> RenderableType:
    """The table of one interval, the capture's loss and the alerts below it."""
    mbit = 8 / screen.seconds / 1e6
    when = clock(screen.start_ns, screen.fraction)
    table = Table(
        title=f"nfstrace watch: the interval from {when} ({screen.seconds:g} s)",
        caption=screen.totals,
        caption_justify="left",
        expand=False,
    )
    for name, right in (
        ("client → server", False),
        ("write Mbit/s", True),
        ("read Mbit/s", True),
        ("ops/s", True),
        ("WRITE p50 ms", True),
        ("p99 ms", True),
        ("re-sent", True),
        ("verdict", False),
    ):
        table.add_column(name, justify="right" if right else "left", overflow="fold")
    for r in screen.rows:
        table.add_row(
            f"{r.client} → {r.server}",
            f"{r.write_bytes * mbit:,.1f}",
            f"{r.read_bytes * mbit:,.1f}",
            f"{r.calls / screen.seconds:,.1f}",
            _ms(r.write_p50_ns),
            _ms(r.write_p99_ns),
            f"{r.resent:,}",
            Text(r.cause, style="bold red" if r.verdict not in ("", "none") else ""),
        )
    if not screen.rows:
        table.add_row("no RPC calls", *[""] * 7)
    loss = screen.loss
    said = f"capture: {loss.frames:,} frames, {loss.holes:,} TCP holes ({loss.pct:.1f}%)"
    if loss.kernel_dropped is not None:
        said += f", {loss.kernel_dropped:,} dropped by kernel"
    parts: list[RenderableType] = [
        table,
        Text(said, style="bold yellow" if loss.holes or loss.kernel_dropped else "dim"),
    ]
    if screen.alerts:
        shown = len(screen.alerts)
        parts.append(Text(f"alerts ({screen.alerts_said:,}; the last {shown}):", style="bold"))
        parts += [Text(line, style="red") for line in screen.alerts]
    else:
        parts.append(Text("no alerts", style="dim"))
    return Group(*parts)
