"""``nfstrace watch`` on a terminal (issue 35): a table redrawn every interval
(``reports.watch_view.render``, a pure function of the Screen), the plain lines
when piped or with --plain."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import termios
from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console
from test_watch import NFSTRACE, SAMPLES

from nfstrace.reports.watch_view import render
from nfstrace.watch import CaptureLoss, PairRow, Screen

START = 1_795_488_549_800_000_000  # 02:49:09.800 UTC


def _text(screen: Screen) -> str:
    console = Console(record=True, file=StringIO(), force_terminal=True, width=200)
    console.print(render(screen))
    return console.export_text()


def _row(client: str, write_bytes: int, verdict: str, cause: str) -> PairRow:
    return PairRow(client, "10.0.0.9", 31, write_bytes, 0, 16, 3.94e6, 5.07e6, 2, verdict, cause)


def test_render_shows_the_rows_alerts_and_totals() -> None:
    alert = "ALERT commit at 2026-11-24T02:49:09.821Z (frames 997): 10.0.0.1 → 10.0.0.9: ..."
    screen = Screen(
        START,
        0.2,
        (_row("10.0.0.1", 1_048_576, "commit", "COMMITs 96%, about 23.0x faster fixed"),
         _row("10.0.0.2", 0, "none", "no problem")),
        CaptureLoss(1000, 3, 4344, 12),
        (alert,),
        4,
        "watched 1,000 frames ... 31 calls",
        fraction=True,
    )  # fmt: skip
    text = _text(screen)
    assert "the interval from 02:49:09.800 (0.2 s)" in text
    lines = text.splitlines()
    (first,) = [x for x in lines if "10.0.0.1 → 10.0.0.9" in x and "│" in x]
    cells = [c.strip() for c in re.split(r"[│┃]", first) if c.strip()]
    assert cells == ["10.0.0.1 → 10.0.0.9", "41.9", "0.0", "155.0", "3.94", "5.07", "2",
                     "COMMITs 96%, about 23.0x faster fixed"]  # fmt: skip
    assert [x for x in lines if "10.0.0.2 → 10.0.0.9" in x and "no problem" in x]
    assert text.index("10.0.0.1 →") < text.index("10.0.0.2 →")  # (the order given: busiest first)
    assert "capture: 1,000 frames, 3 TCP holes (0.3%), 12 dropped by kernel" in text
    assert "alerts (4; the last 1):" in text and alert in text
    assert text.index("└") < text.index("alerts (4")  # the alerts below the table
    assert "watched 1,000 frames ... 31 calls" in text  # the caption


def test_render_without_calls_nor_alerts() -> None:
    text = _text(Screen(START, 10.0, (), CaptureLoss(0, 0, 0), (), 0, "watched 0 frames"))
    assert "no RPC calls" in text and "no alerts" in text
    assert "the interval from 02:49:09 (10 s)" in text
    assert "dropped by kernel" not in text  # (not known without -i)


COMMIT = SAMPLES / "causes" / "v3-tcp-nfscp-w64k-commit1200ms-d0-l0.pcap"


def _on_a_terminal(args: list[str], cwd: Path) -> tuple[int, str]:
    """nfstrace watch ARGS with its standard output a pseudo-terminal (200 x 50)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    proc = subprocess.Popen(
        [*NFSTRACE, "watch", *args],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env={**env, "TERM": "xterm-256color"},
    )
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # (EIO: the terminal's other end closed)
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert proc.stderr is not None
    rc = proc.wait(120)
    assert "Traceback" not in proc.stderr.read().decode()
    return rc, re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.decode(errors="replace"))


@pytest.mark.slow  # (wall-clock paced: seconds of a live run)
def test_a_terminal_gets_the_table_and_plain_gets_the_lines(tmp_path: Path) -> None:
    """On a pseudo-terminal: the table (its header, the pair's row, the alert
    under it), then the summary in lines, exit 0 at the end of input; with
    --plain the lines a pipe gets."""
    args = [str(COMMIT), "--interval", "200ms", "--evidence-dir", str(tmp_path / "ev")]
    rc, shown = _on_a_terminal(args, tmp_path)
    assert rc == 0, shown[-2000:]
    assert "┃ client → server ┃ write Mbit/s ┃" in shown
    assert re.search(r"│ 169\.254\.77\.1 → 169\.254\.77\.2 +│ +41\.9 │", shown), shown[-3000:]
    assert "alerts (1; the last 1):" in shown and "ALERT commit at" in shown
    assert "Mbit/s  read" not in shown  # (no plain line)
    assert shown.rstrip().splitlines()[-1].startswith("alerts: stall 0, commit 1")
    rc, plain = _on_a_terminal([*args, "--plain"], tmp_path)
    assert rc == 0
    assert (
        "┃" not in plain and "02:49:09.800  169.254.77.1 → 169.254.77.2  write 41.9 Mbit/s" in plain
    )
