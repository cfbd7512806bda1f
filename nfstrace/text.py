"""Text from a capture or a user made safe to show: control characters (ESC,
NUL, BEL, newlines ..., the C1 controls) as ``\\xNN`` and the Unicode bidi
overrides and isolates (U+202A-U+202E, U+2066-U+2069) as ``\\uNNNN``.  A file
name in an NFS call is whatever bytes the client sent, and a capture's path
whatever the user typed: written raw, an escape sequence in either would drive
the reader's terminal, and a right-to-left override would make
``report\\u202eexe.csv`` read as ``reportvsc.exe`` in a terminal, a page or a
spreadsheet.  The terminal, the HTML report and the CSV use this one rule.

And quantities in words, as the findings and the terminal write them: counts
with their noun (``count``), bytes (``bytes_text``), durations
(``seconds_text``)."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
CONTROL_BUT_NEWLINES = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escaped(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def printable(text: str, newlines: bool = False) -> str:
    """``text`` with each control character as ``\\xNN``, each bidi override or
    isolate as ``\\uNNNN`` (``newlines``: line breaks kept, for a block of lines)."""
    return (CONTROL_BUT_NEWLINES if newlines else CONTROL).sub(_escaped, text)


def file_names(paths: Sequence[str], shown: int = 3, base: bool = False) -> str:
    """The capture files named in a line: the first ``shown``, then how many
    more ('a.pcap, b.pcap, c.pcap and 5 more' for a directory of rotated
    files); ``base``: without their directories."""
    names = [os.path.basename(p) if base else p for p in paths]
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and its noun, singular for one: '1 call', '2 calls', '1,024 replies
    without call' (``plural`` when adding 's' is wrong)."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def bytes_text(n: float) -> str:
    """Bytes in words for findings: 32 KiB, 1.5 MiB (binary units, as NFS sizes are)."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{int(n)} B"


def seconds_text(ns: float) -> str:
    """Nanoseconds in words for findings: 395 µs, 12.5 ms, 4.5 s."""
    s = ns / 1e9
    if s >= 1:
        return f"{s:.3g} s" if s < 100 else f"{s:.0f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} µs"
