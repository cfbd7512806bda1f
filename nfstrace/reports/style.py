"""The terminal's table style, shared by the summary and the model view."""

from __future__ import annotations

from rich.table import Table


def titled_table(title: str) -> Table:
    """A terminal table: title on the left, bold headers, no frame."""
    return Table(title=title, show_edge=False, header_style="bold", title_justify="left")
