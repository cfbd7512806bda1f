"""The cumulative-transfer plot as a PNG for a ticket (``analyze --png FILE``),
drawn by a headless Chromium or Chrome from the same figure the HTML report
shows.  A browser is the renderer plotly itself relies on (kaleido drives
one); using the one installed keeps the install small and offline."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import struct
import subprocess
import tempfile
import time
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

from nfstrace.errors import OutputError
from nfstrace.reports.files import write_atomically

if TYPE_CHECKING:  # (the report: only when a PNG is drawn)
    from nfstrace.trace import Trace

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
WIDTH, HEIGHT = 1200, 620
TIMEOUT_S = 120
GROUP_EXIT_S = 5  # how long the browser's killed helpers may take to be gone
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# A headless Chromium paints less than its window's height (its own frame takes
# some: 143 pixels of 620 in Chromium 156), so the window is taller than the
# figure and the screenshot is cut to the figure's height afterwards.
WINDOW_HEIGHT = 2 * HEIGHT
_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}  # PNG colour type -> samples per pixel


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png_top(data: bytes, height: int) -> bytes:
    """The top ``height`` rows of a PNG (non-interlaced; each row's filter refers
    only to the rows above it, so the first rows decode alone); the PNG as it is
    when it is no taller or not one this can cut."""
    pos, chunks = len(PNG_MAGIC), []
    while pos + 8 <= len(data):
        size, kind = struct.unpack(">I4s", data[pos : pos + 8])
        chunks.append((kind, data[pos + 8 : pos + 8 + size]))
        pos += 12 + size
    header = dict(chunks).get(b"IHDR", b"")
    if len(header) != 13:
        return data
    width, tall, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    if tall <= height or interlace or colour not in _CHANNELS:
        return data
    stride = 1 + (width * _CHANNELS[colour] * depth + 7) // 8
    pixels = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    top = zlib.compress(pixels[: stride * height], 9)
    out = [PNG_MAGIC, _chunk(b"IHDR", struct.pack(">II", width, height) + header[8:])]
    for kind, body in chunks:
        if kind == b"IDAT":
            if top:
                out.append(_chunk(b"IDAT", top))
                top = b""
        elif kind != b"IHDR":
            out.append(_chunk(kind, body))
    return b"".join(out)


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
    from nfstrace.reports.html import figure_div, plotly_js, transfer_figure

    exe = require_browser(path)
    fig = transfer_figure(trace)
    fig["layout"] |= {"width": WIDTH, "height": HEIGHT}
    tmp = Path(tempfile.mkdtemp(prefix="nfstrace-png-"))
    try:
        page, shot = tmp / "figure.html", tmp / "figure.png"
        # the report's own plotly.js bundle, before the figure's script
        library = f"<script>{plotly_js()[0]}</script>"
        plot = figure_div(fig, "figure", {"staticPlot": True})
        page.write_text(
            '<!doctype html>\n<html>\n<head>\n<meta charset="utf-8" />\n'
            "<style>html, body {height: 100%;}</style>\n</head>\n"
            f'<body style="margin:0">{library}\n{plot}\n</body>\n</html>',
            encoding="utf-8",
        )
        cmd = [
            exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--no-first-run", "--disable-extensions", f"--user-data-dir={tmp / 'profile'}",
            "--proxy-server=127.0.0.1:9", "--virtual-time-budget=10000",
            f"--window-size={WIDTH},{WINDOW_HEIGHT}", f"--screenshot={shot}", page.as_uri(),
        ]  # fmt: skip
        _draw(cmd, tmp, path)
        if not shot.is_file() or not shot.read_bytes().startswith(PNG_MAGIC):
            raise OutputError(f"the browser ({exe}) did not draw the plot", str(path))
        image = png_top(shot.read_bytes(), HEIGHT)
        write_atomically(path, lambda temp: temp.write_bytes(image))
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
