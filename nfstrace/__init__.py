"""nfstrace: NFS / ONC-RPC packet-trace analysis.

>>> import nfstrace
>>> t = nfstrace.load("capture.pcap")
>>> t                                  # the verdict in one line
>>> print(nfstrace.summary(t))         # the terminal's summary, as text
>>> nfstrace.report(t, "x.html")       # the HTML report

``report`` and ``summary`` are functions of the package, not methods of
``Trace``: a Trace is what the analysis produced, and the reports sit above it
(they import it); the package is where the layers meet.

``import nfstrace`` is quick: ``load``, ``Trace``, ``AnalysisConfig`` and
``__version__`` are looked up on first use (the analysis brings pandas).
"""

from __future__ import annotations

import io
import os
from typing import TYPE_CHECKING, Any

from nfstrace.errors import NfstraceError

if TYPE_CHECKING:
    from nfstrace.trace import AnalysisConfig, Trace, load

    __version__: str

_FROM_TRACE = ("AnalysisConfig", "Trace", "load")


if not TYPE_CHECKING:  # (type checkers see the imports above; other names stay unknown)

    def __getattr__(name: str) -> Any:
        """The names imported on first use (PEP 562); each is then a plain attribute."""
        if name in _FROM_TRACE:
            from nfstrace import trace

            value: Any = getattr(trace, name)
        elif name == "__version__":
            from nfstrace.version import __version__ as value
        else:
            raise AttributeError(f"module 'nfstrace' has no attribute {name!r}")
        globals()[name] = value
        return value


__all__ = [
    "AnalysisConfig",
    "NfstraceError",
    "Trace",
    "__version__",
    "load",
    "report",
    "summary",
]


def report(trace: Trace, path: str | os.PathLike[str]) -> None:
    """Write the HTML report of ``trace`` to ``path`` (whole or not at all)."""
    from nfstrace.reports.html import write_report  # only when a report is written

    write_report(path, trace, trace.diagnosis)


def summary(trace: Trace, full: bool = False, width: int = 100) -> str:
    """The terminal summary as plain text (``full``: every table, as ``--full``)."""
    from nfstrace.reports.console import Console
    from nfstrace.reports.terminal import render_summary

    out = io.StringIO()
    render_summary(trace, Console(file=out, width=width, highlight=False), full)
    return out.getvalue()
