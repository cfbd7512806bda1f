"""Text from a capture or a user made safe to show: control characters (ESC,
NUL, BEL, newlines ...) as ``\\xNN``.  A file name in an NFS call is whatever
bytes the client sent, and a capture's path whatever the user typed: written
raw, an escape sequence in either would drive the reader's terminal."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def printable(text: str) -> str:
    """``text`` with each control character as ``\\xNN``."""
    return CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


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
