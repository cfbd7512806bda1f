"""The terminal's text and tables, shared by the summary and the model view:
laid out for the width they are drawn at (a terminal's, or 100 columns in a
file or a pipe), never cutting a number or a name.

- ``Wrapped``: a line of text wrapped to the width at spaces, its
  continuation lines indented under it (a finding, a throughput line).
- ``FittedTable``: a table whose cells are never cut.  Its columns are given
  with how they may give way: text columns (``wrap``) wrap at spaces; the
  others (numbers, operation names, addresses) are kept whole.  When the
  table is wider than the width, columns give way in this order: the
  optional columns whose every cell is zero or the same (said in a note: "0
  for every row", "nfs v4 for every row"), then the optional columns by
  their ``drop`` rank (said in a note); when it is still too wide, each row
  is written as a paragraph of "header value" pairs (a vertical layout).

Both decide at render time, from the width rich gives them.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections import namedtuple
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

PAD = 1  # cell padding left and right (rich's default (0, 1))
# a cell that says nothing happened: 0, 0.0, -, empty, or '0 → 0' (compare)
ZERO = re.compile(r"^((0|0\.0+|-)( → (0|0\.0+|-))?)?$")


def rows(table: Any, columns: Sequence[str], limit: int | None = None) -> Iterator[Any]:
    """``table.head(limit)[columns].itertuples(index=False)``: the first ``limit``
    rows (all without it) of a DataFrame's ``columns``, each a named tuple of
    the values itertuples gives.  Only those columns are read, and the tuple
    type is made once (itertuples reads every column, then makes its type anew:
    ~2 ms for the time budget's one row of 74 columns)."""
    make = _row_type(tuple(columns))._make
    return map(make, itertools.islice(zip(*(table[c] for c in columns), strict=True), limit))


@functools.cache
def _row_type(columns: tuple[str, ...]) -> Any:
    return namedtuple("Row", columns)


def titled_table(title: str) -> Table:
    """A terminal table: title on the left, bold headers, no frame."""
    return Table(title=title, show_edge=False, header_style="bold", title_justify="left")


# A number stays with the word after it ("100.6 Mbit/s", "10.2 ms", "0 errors"),
# an error count with its name ("NOENT ×7").
_NUMBER = re.compile(r"^[(\[]?[-+]?[\d,]*\.?\d+[x%]?[,;:]?$")


def _tokens(plain: str) -> list[tuple[int, int]]:
    """(start, end) of each unbreakable piece: words, with a number and the
    word after it as one."""
    out: list[tuple[int, int]] = []
    glue = False
    for m in re.finditer(r"\S+", plain):
        word = m.group()
        if out and (glue or word.startswith("×")):
            out[-1] = (out[-1][0], m.end())
        else:
            out.append((m.start(), m.end()))
        glue = bool(_NUMBER.match(word)) and not glue
    return out


def wrap_text(text: Text, first: int, rest: int) -> list[Text]:
    """``text`` in lines of at most ``first`` cells (then ``rest``), broken only
    at spaces between pieces (``_tokens``); a piece wider than a line has one to
    itself, whole.  Styles are kept."""
    plain = text.plain
    lines: list[tuple[int, int]] = []
    start = end = None
    room = first
    for a, b in _tokens(plain):
        if start is None:
            start, end = a, b
        elif cell_len(plain[start:b]) <= room:
            end = b
        else:
            lines.append((start, end))  # type: ignore[arg-type]
            start, end, room = a, b, rest
    if start is not None:
        lines.append((start, end))  # type: ignore[arg-type]
    return [text[a:b] for a, b in lines] or [Text("")]


@dataclass(frozen=True)
class Wrapped:
    """Text (a string of rich markup, or a Text) wrapped at spaces to the width
    it is drawn at: the first line after ``indent`` spaces, the others after
    ``hang``; a number stays with its unit, nothing is cut."""

    text: str | Text
    indent: int = 2
    hang: int = 4

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        text = Text.from_markup(self.text) if isinstance(self.text, str) else self.text
        indent = self.indent + len(text.plain) - len(text.plain.lstrip(" "))  # its own too
        width = options.max_width
        lines = wrap_text(text, max(10, width - indent), max(10, width - self.hang))
        for i, line in enumerate(lines):
            yield Text(" " * (indent if i == 0 else self.hang)) + line


@dataclass(frozen=True)
class Column:
    """A column of a FittedTable.

    justify: 'right' for numbers, 'left' for names and text; wrap: text that may
    wrap at spaces (a method, evidence), else the cells are kept whole; drop:
    0 always shown, else the rank at which it gives way when the table is too
    wide (1 first); zero_drop: may give way when every cell is zero (or
    empty), before any other, said in a note; same_drop: likewise when every
    cell is the same."""

    header: str
    justify: str = "right"
    wrap: bool = False
    drop: int = 0
    zero_drop: bool = False
    same_drop: bool = False


def _words(text: str) -> list[str]:
    return text.split() or [""]


class FittedTable:
    """A table that fits the width it is drawn at without cutting a cell
    (module docstring).  ``add_row`` takes the cells as plain text."""

    def __init__(self, title: str, columns: Sequence[Column], label: int = 1) -> None:
        self.title = title
        self.columns = list(columns)
        self.rows: list[list[str]] = []
        self.label = label  # the first `label` columns name a row in the vertical layout

    def add_row(self, *cells: str) -> None:
        self.rows.append([str(c) for c in cells])

    # ---- widths -------------------------------------------------------------------

    def _least(self, i: int) -> int:
        """The narrowest column i can be: its longest cell (kept whole) or, for
        text, its longest word; the header may wrap at spaces."""
        column = self.columns[i]
        cells = [r[i] for r in self.rows]
        if column.wrap:
            longest = max((cell_len(w) for c in cells for w in _words(c)), default=0)
        else:
            longest = max((cell_len(c) for c in cells), default=0)
        return max(longest, *(cell_len(w) for w in _words(column.header)))

    def _natural(self, i: int) -> int:
        cells = [self.rows[r][i] for r in range(len(self.rows))]
        return max(cell_len(self.columns[i].header), *(cell_len(c) for c in cells), 1)

    def _widths(self, shown: list[int], width: int, narrow: bool = True) -> list[int] | None:
        """Each shown column's width within ``width`` (None: it cannot fit):
        natural widths, and with ``narrow`` the headers, then the text columns
        narrowed (widest first) as needed."""
        overhead = len(shown) * 2 * PAD + len(shown) - 1
        widths = {i: self._natural(i) for i in shown}
        least = {i: self._least(i) for i in shown} if narrow else widths
        if sum(least.values()) + overhead > width:
            return None
        excess = sum(widths.values()) + overhead - width
        # narrow what may narrow: first the headers wider than their cells (a
        # header wraps at its spaces), then the text columns (widest first)
        for phase in (False, True):
            while excess > 0:
                spare = [i for i in shown if self.columns[i].wrap == phase and widths[i] > least[i]]
                if not spare:
                    break
                i = max(spare, key=lambda i: widths[i] - least[i])
                cut = min(excess, widths[i] - least[i])
                widths[i] -= cut
                excess -= cut
        return [widths[i] for i in shown]

    # ---- rendering ----------------------------------------------------------------

    def _candidates(self) -> Iterator[tuple[list[int], list[str]]]:
        """Column sets to try, widest first, each with the notes of what gave way."""
        everything = list(range(len(self.columns)))
        yield everything, []
        zero = [
            i
            for i in everything
            if self.columns[i].zero_drop and all(ZERO.match(r[i].strip()) for r in self.rows)
        ]
        same = [
            i
            for i in everything
            if self.columns[i].same_drop and self.rows and len({r[i] for r in self.rows}) == 1
        ]
        shown = [i for i in everything if i not in zero and i not in same]
        notes = [", ".join(self.columns[i].header for i in zero) + ": 0 for every row"] * bool(zero)
        notes += [f"{self.columns[i].header}: {self.rows[0][i]} for every row" for i in same]
        if zero or same:
            yield shown, notes
        ranks = sorted({c.drop for c in self.columns if c.drop})
        dropped: list[str] = []
        for rank in ranks:
            gone = [i for i in shown if self.columns[i].drop == rank]
            if not gone:
                continue
            shown = [i for i in shown if i not in gone]
            dropped += [self.columns[i].header for i in gone]
            yield shown, [*notes, "left out at this width: " + ", ".join(dropped)]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        candidates = list(self._candidates())
        # as they are, or without the columns of zeros (or of one value): before
        # wrapping a header or a text, or leaving a column out
        tries = [(c, False) for c in candidates[:2] if not c[1] or "left out" not in c[1][-1]]
        for (shown, notes), narrow in [*tries, *((c, True) for c in candidates)]:
            widths = self._widths(shown, width, narrow)
            if widths is not None:
                yield self._table(shown, widths)
                for note in notes:
                    yield Wrapped(f"[dim]({note})[/dim]", indent=1, hang=2)
                return
        yield from self._vertical(width)

    def _table(self, shown: list[int], widths: list[int]) -> Table:
        table = titled_table(self.title)
        for i, w in zip(shown, widths, strict=True):
            column = self.columns[i]
            table.add_column(
                Text(column.header, no_wrap=False),  # a header wraps at its spaces
                justify=column.justify,  # type: ignore[arg-type]
                width=w,
            )
        for row in self.rows:
            # a cell kept whole, or text wrapped at spaces (its width fits its longest word)
            table.add_row(
                *(Text(row[i], no_wrap=not self.columns[i].wrap, overflow="fold") for i in shown)
            )
        return table

    def _vertical(self, width: int) -> Iterator[Text]:
        """Each row a paragraph: its label, then 'header value' for each cell,
        packed into lines at the pairs (a pair is never split)."""
        yield Text(self.title, style="bold") if self.title else Text("")
        for row in self.rows:
            label = " ".join(c for c in row[: self.label] if c)
            units = [
                f"{self.columns[i].header} {row[i]}"
                for i in range(self.label, len(self.columns))
                if row[i] != ""
            ]
            yield from packed(f"{label}:" if label else "", units, width, indent=2, hang=6)


def packed(label: str, units: list[str], width: int, indent: int, hang: int) -> Iterator[Text]:
    """``label`` (bold) and ``units`` joined by ', ' into lines of at most
    ``width`` cells, breaking only between units; a unit wider than a line has
    one to itself (never cut)."""
    lines: list[str] = []
    line = " " * indent + label
    for k, unit in enumerate(units):
        piece = unit + ("," if k < len(units) - 1 else "")
        if line.strip() and cell_len(line) + 1 + cell_len(piece) > width:
            lines.append(line)
            line = " " * hang + piece
        else:
            line += (" " if line.strip() else "") + piece
    lines.append(line)
    for i, text in enumerate(lines):
        out = Text(text)
        if i == 0 and label:
            out.stylize("bold", indent, indent + len(label))
        yield out
