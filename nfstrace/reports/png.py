"""The cumulative-transfer plot as a PNG for a ticket (``analyze --png FILE``),
drawn by a headless Chromium or Chrome from the same figure the HTML report
shows.  A browser is the renderer plotly itself relies on (kaleido drives
one); using the one installed keeps the install small and offline."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import plotly.io as pio

from nfstrace.errors import OutputError
from nfstrace.reports.files import write_atomically
from nfstrace.reports.html import transfer_figure
from nfstrace.trace import Trace

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
WIDTH, HEIGHT = 1200, 620
TIMEOUT_S = 120
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def browser() -> str | None:
    """A headless-capable browser on the PATH ($NFSTRACE_BROWSER first)."""
    wanted = os.environ.get("NFSTRACE_BROWSER")
    if wanted:
        return shutil.which(wanted)
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


def write_png(trace: Trace, path: Path) -> None:
    """Draw the whole capture's cumulative transfer into ``path`` (whole or not
    at all); an OutputError when no browser is found or it draws nothing."""
    exe = browser()
    if exe is None:
        raise OutputError(
            "--png needs Chromium or Chrome to draw with (apt-get install chromium, "
            "or set NFSTRACE_BROWSER)",
            str(path),
        )
    fig = transfer_figure(trace)
    fig.update_layout(width=WIDTH, height=HEIGHT)
    with tempfile.TemporaryDirectory(prefix="nfstrace-png-") as tmp:
        page, shot = Path(tmp) / "figure.html", Path(tmp) / "figure.png"
        page.write_text(
            pio.to_html(fig, include_plotlyjs=True, full_html=True, config={"staticPlot": True}),
            encoding="utf-8",
        )
        cmd = [
            exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--no-first-run", "--disable-extensions", f"--user-data-dir={Path(tmp) / 'profile'}",
            "--proxy-server=127.0.0.1:9", "--virtual-time-budget=10000",
            f"--window-size={WIDTH},{HEIGHT}", f"--screenshot={shot}", page.as_uri(),
        ]  # fmt: skip
        try:
            subprocess.run(cmd, capture_output=True, timeout=TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise OutputError(f"the browser did not draw the plot: {e}", str(path)) from None
        if not shot.is_file() or not shot.read_bytes().startswith(PNG_MAGIC):
            raise OutputError(f"the browser ({exe}) did not draw the plot", str(path))
        write_atomically(path, lambda temp: shutil.copyfile(shot, temp))
