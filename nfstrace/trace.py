"""``load()``: capture files in, the analysis tables out (the library entry point)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd

from nfstrace.config import ParseLimits
from nfstrace.errors import UsageError
from nfstrace.parsers import fast
from nfstrace.parsers.fast import ParseStats


@dataclass(frozen=True)
class Trace:
    """Everything nfstrace learned from a set of capture files.

    messages: one row per RPC message (columns: ``nfstrace.schema.MESSAGE_COLUMNS``)
    events: transport events (TCP retransmissions, holes, zero windows, resyncs)
    stats: what the parser saw (frames, fragments, truncation, drops, warnings)
    """

    paths: tuple[str, ...]
    messages: pd.DataFrame
    events: pd.DataFrame
    stats: ParseStats


def load(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    limits: ParseLimits | None = None,
    progress: Callable[[int], None] | None = None,
) -> Trace:
    """Read one or more capture files (merged in time order) into a Trace."""
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    plist = [os.fspath(p) for p in paths]
    if not plist:
        raise UsageError("no capture file given")
    messages, events, stats = fast.parse(plist, limits, progress)
    return Trace(tuple(plist), messages, events, stats)
