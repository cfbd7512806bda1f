"""The cumulative-transfer plot as a PNG for a ticket (``analyze --png FILE``),
drawn by a headless Chromium or Chrome from the same figure the HTML report
shows.  A browser is the renderer plotly itself relies on (kaleido drives
one); using the one installed keeps the install small and offline."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from nfstrace.errors import OutputError
from nfstrace.reports.files import write_atomically

if TYPE_CHECKING:  # (plotly and the report: only when a PNG is drawn)
    from nfstrace.trace import Trace

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
WIDTH, HEIGHT = 1200, 620
TIMEOUT_S = 120
GROUP_EXIT_S = 5  # how long the browser's killed helpers may take to be gone
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def browser() -> str | None:
    """A headless-capable browser on the PATH ($NFSTRACE_BROWSER first)."""
    wanted = os.environ.get("NFSTRACE_BROWSER")
    if wanted:
        return shutil.which(wanted)
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


def require_browser(path: Path) -> str:
    """The browser to draw with; an OutputError naming what to install when
    there is none (said before the capture is read)."""
    exe = browser()
    if exe is None:
        raise OutputError(
            "--png needs Chromium or Chrome to draw with (apt-get install chromium, "
            "or set NFSTRACE_BROWSER)",
            str(path),
        )
    return exe


def write_png(trace: Trace, path: Path) -> None:
    """Draw the whole capture's cumulative transfer into ``path`` (whole or not
    at all); an OutputError when no browser is found or it draws nothing."""
    import plotly.io as pio

    from nfstrace.reports.html import transfer_figure

    exe = require_browser(path)
    fig = transfer_figure(trace)
    fig.update_layout(width=WIDTH, height=HEIGHT)
    tmp = Path(tempfile.mkdtemp(prefix="nfstrace-png-"))
    try:
        page, shot = tmp / "figure.html", tmp / "figure.png"
        page.write_text(
            pio.to_html(fig, include_plotlyjs=True, full_html=True, config={"staticPlot": True}),
            encoding="utf-8",
        )
        cmd = [
            exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--no-first-run", "--disable-extensions", f"--user-data-dir={tmp / 'profile'}",
            "--proxy-server=127.0.0.1:9", "--virtual-time-budget=10000",
            f"--window-size={WIDTH},{HEIGHT}", f"--screenshot={shot}", page.as_uri(),
        ]  # fmt: skip
        _draw(cmd, tmp, path)
        if not shot.is_file() or not shot.read_bytes().startswith(PNG_MAGIC):
            raise OutputError(f"the browser ({exe}) did not draw the plot", str(path))
        write_atomically(path, lambda temp: shutil.copyfile(shot, temp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _draw(cmd: list[str], tmp: Path, path: Path) -> None:
    """Run the browser in a process group of its own, with its temporary files
    (profile, crash reports) under ``tmp``; however this ends (drawn, timed
    out, Ctrl-C, SIGTERM), the whole group is stopped before ``tmp`` is
    removed: its helpers wrote into it after the main process was killed
    (left behind, or "Directory not empty", exit 5 instead of 130/143)."""
    env = {**os.environ, "TMPDIR": str(tmp)}
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # Ctrl-C at the terminal reaches us only: we stop it
        )
    except OSError as e:
        raise OutputError(f"the browser did not start: {e}", str(path)) from None
    try:
        proc.wait(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise OutputError(
            f"the browser did not draw the plot within {TIMEOUT_S} s", str(path)
        ) from None
    finally:
        _stop_group(proc)


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill every process of the browser's group and wait until none is left."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + GROUP_EXIT_S
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)  # any member left?
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.01)
