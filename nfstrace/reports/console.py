"""The terminal's rich Console, made one way for every command and the library.

rich replaces emoji codes (``:b:``, ``:ab:``, ``:smile:``) in the text it is
given by default: an IPv6 address from a capture such as ``2001:db8:a:b::1``
was printed ``2001:db8:a🅱:1``, in the summary's tables and in messages alike.
Nothing nfstrace prints is meant as an emoji code, so none is replaced.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console as _RichConsole


class Console(_RichConsole):
    """``rich.console.Console`` without emoji codes (``emoji=False``)."""

    def __init__(self, **options: Any) -> None:
        options.setdefault("emoji", False)
        super().__init__(**options)
