"""Only what a command needs is imported (checked in a fresh process each): the
package without pandas, the command line without the analysis and the
reports, an analysis without the HTML report's plotly or Parquet's writer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SAMPLE = Path(__file__).resolve().parent.parent / "sample-pcaps" / "v3-tcp-nfscp-w1m-d0-l0.pcap"


def _imported_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys\nprint(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return set(done.stdout.split())


def test_import_nfstrace_is_light() -> None:
    mods = _imported_after("import nfstrace")
    assert not {"pandas", "numpy", "nfstrace.trace"} & mods
    mods = _imported_after("import nfstrace\nprint(nfstrace.__version__, nfstrace.load)")
    assert "nfstrace.trace" in mods  # on first use


def test_command_line_imports_no_analysis_nor_reports() -> None:
    mods = _imported_after("import nfstrace.cli")
    heavy = {m for m in mods if m.startswith(("nfstrace.analysis", "nfstrace.reports.", "plotly"))}
    assert heavy <= {"nfstrace.reports.files"}
    assert not {"nfstrace.trace", "nfstrace.comparison", "rich.progress"} & mods
    # --help and option errors answer without pandas, numpy or a parser
    assert not {"pandas", "numpy", "pyarrow", "nfstrace.parsers.native"} & mods
    assert not {m for m in mods if m.startswith("nfstrace.parsers.") and m not in LIGHT}


# What the command line's option handling may import from the parsers.
LIGHT = {"nfstrace.parsers.backends"}


def test_analysis_without_report_imports_no_plotly() -> None:
    code = (
        "from nfstrace.cli import app\n"
        f"app(['analyze', {str(SAMPLE)!r}, '--no-report', '--quiet'], standalone_mode=False)"
    )
    mods = _imported_after(code)
    assert "nfstrace.analysis.diagnosis" in mods
    assert not {m for m in mods if m.startswith(("plotly", "pyarrow.parquet"))}
    assert not {"nfstrace.reports.html", "nfstrace.reports.figures", "nfstrace.reports.png"} & mods
