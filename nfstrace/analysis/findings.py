"""What every analysis module hands to the reports: findings in plain words.

Each module in ``nfstrace/analysis/`` returns a frozen result dataclass with
its tables and figures, and a ``findings()`` list built from them.  The
diagnosis (``nfstrace/analysis/diagnosis.py``) ranks the findings of all
modules by the time they cost; the terminal, JSON and HTML reports show them
in that order.  Capture-quality findings that limit what can be concluded
are shown first whatever their cost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Severity = Literal["info", "warning", "problem"]

# Items a finding's words list before "... and N more" (a call re-sent 100,000
# times, 10,000 hosts with zero windows): a finding is a line, not a dump; the
# tables keep every item.
MAX_LISTED = 10
# ... and the items a finding's details (JSON, HTML) keep of a list.
MAX_DETAIL_ITEMS = 100


def listed(items: list[str], limit: int = MAX_LISTED) -> str:
    """``items`` joined with commas, at most ``limit`` of them and how many more."""
    if len(items) <= limit:
        return ", ".join(items)
    return ", ".join(items[:limit]) + f" ... and {len(items) - limit:,} more"


@dataclass(frozen=True)
class Finding:
    """One thing the trace shows, said once in words and once in numbers."""

    kind: str  # stable identifier, e.g. "commit_stall", "rpc_retransmission"
    title: str  # one plain sentence, e.g. "2 commit stalls cost 4.5 s of 12 s (38%)"
    severity: Severity = "info"
    time_lost_ns: int = 0  # what it cost the transfer (ranking key); 0: not a time cost
    limits_conclusions: bool = False  # capture-quality: shown before everything else
    details: dict[str, Any] = field(default_factory=dict)  # JSON-able figures

    def evidence(self) -> str:
        """Where to look in Wireshark: "frames 12, 40, 77" (the frames of the
        costliest intervals behind it, in frame order), or ''."""
        frames = sorted({int(f) for f in self.details.get("frames") or () if int(f) > 0})
        if not frames:
            return ""
        return ("frame " if len(frames) == 1 else "frames ") + ", ".join(map(str, frames))
