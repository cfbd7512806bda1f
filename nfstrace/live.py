"""Where ``nfstrace watch`` gets its records: a stream (standard input, a FIFO,
a file) or a ``tcpdump`` child capturing an interface, read by a thread that
stamps each record with the wall-clock time it arrived.

Why tcpdump as a child rather than a libpcap binding: capturing needs
privileges (root or CAP_NET_RAW) that tcpdump already handles (and may be
given alone, with ``setcap``), a crash or a hang inside libpcap stays in the
child, and there is no binding to build or keep up with; the child's output
is the same pcap stream ``tcpdump -w - | nfstrace watch -`` reads, through the
same reader (``parsers.capture.stream_frames``).

Why a thread: the reader blocks until a record is whole, and time must move
without packets (a hung server sends nothing; its stall must still be said).
The loop waits on the thread's queue with a timeout and, on a live input,
moves the clock itself (``Source.now_ns``).
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import shutil
import signal
import stat
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO, cast

from nfstrace.errors import CaptureError
from nfstrace.parsers.capture import CaptureInfo, stream_frames
from nfstrace.watch import NS, Record, records

# A live input's clock is held back this much: a record may still be on its
# way (tcpdump's buffer, the pipe, this reader) for a moment after its time.
LIVE_GRACE_NS = 1 * NS
QUEUE_RECORDS = 4096  # records read ahead of the loop, at most (bounded memory)
# tcpdump's kernel buffer (-B, KiB): libpcap's default 2 MiB, in immediate mode
# (one slot per packet, sized for the snaplen), held a few hundred packets: on a
# loaded machine (2 cores, the window's analysis beside tcpdump) it dropped 14-30
# of 920 packets sent 1 ms apart (tests/test_watch_live.py), at 32 MiB none.
CAPTURE_BUFFER_KIB = 32 * 1024
TICK_S = 0.2  # how often the loop looks at the clock when nothing arrives
# tcpdump's counts (libpcap's ps_recv, ps_drop, ps_ifdrop): at the end one a
# line ("12 packets captured"), on SIGUSR1 in one line after "tcpdump: ", comma
# separated ("tcpdump: 12 packets captured, 12 packets received by filter, ...")
COUNT_PART = re.compile(
    r"(\d+) packets? (captured|received by filter|dropped by kernel|dropped by interface)"
)
# How long ``Tcpdump.ask_counts`` waits for tcpdump's answer to SIGUSR1
COUNTS_WAIT_S = 0.5


def count_line(line: str) -> dict[str, int]:
    """tcpdump's counts in one of its lines ({}: not a line of counts)."""
    out = {}
    for part in line.removeprefix("tcpdump: ").split(", "):
        m = COUNT_PART.fullmatch(part)
        if m is None:
            return {}
        out[m.group(2)] = int(m.group(1))
    return out


def tcpdump_command(
    interface: str, bpf: str | None, snaplen: int | None, tcpdump: str = "tcpdump"
) -> list[str]:
    """tcpdump writing a pcap stream of the interface's packets to its stdout,
    each packet as it is captured (--immediate-mode: not held in libpcap's
    buffer for up to a second; -U: not in tcpdump's), with a kernel buffer of
    CAPTURE_BUFFER_KIB (-B) to ride out a moment when this process is busy."""
    cmd = [tcpdump, "--immediate-mode", "-U", "-B", str(CAPTURE_BUFFER_KIB), "-w", "-"]
    cmd += ["-i", interface]
    if snaplen is not None:
        cmd += ["-s", str(snaplen)]
    if bpf:
        cmd.append(bpf)
    return cmd


def is_live(fd: int) -> bool:
    """A pipe, FIFO, socket or terminal: data arrives over time (not a file on disk)."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


@dataclass
class _End:
    error: BaseException | None = None


class Source:
    """Records from a stream, read by a thread; ``get`` waits for the next one
    at most a timeout.  ``live``: the stream arrives over time and the clock
    moves without records; ``wall_clock``: records are stamped by this host's
    clock as they are captured (tcpdump -i), so the time is known before the
    first record."""

    def __init__(
        self,
        stream: BinaryIO,
        info: CaptureInfo,
        live: bool,
        wall_clock: bool = False,
        grace_ns: int = LIVE_GRACE_NS,
    ) -> None:
        self.stream = stream
        self.info = info
        self.live = live
        self.wall_clock = wall_clock
        self.grace_ns = grace_ns  # how far the clock is held back (--clock-grace)
        self.last_ns: int | None = None  # the newest record's time
        self.last_arrival = 0.0  # when it arrived (time.monotonic)
        self._queue: queue.Queue[tuple[Record, float] | _End] = queue.Queue(QUEUE_RECORDS)
        self._thread = threading.Thread(target=self._read, name="nfstrace-reader", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for record in records(stream_frames(self.stream, self.info)):
                self._queue.put((record, time.monotonic()))
        except BaseException as e:  # handed to the loop, raised there
            self._queue.put(_End(e))
        else:
            self._queue.put(_End())

    def get(self, timeout: float = TICK_S) -> Record | None:
        """The next record; None when none came within the timeout.  Raises
        EOFError at the end of the stream, and the reader's error if it had one."""
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            return None
        if isinstance(item, _End):
            self._queue.put(item)  # (asked again: the same answer)
            if item.error is not None:
                raise item.error
            raise EOFError
        record, arrival = item
        if self.last_ns is None or record.ts_ns >= self.last_ns:
            self.last_ns, self.last_arrival = record.ts_ns, arrival
        return record

    def now_ns(self) -> int | None:
        """The capture time it is now, held back by grace_ns (packets on their
        way through tcpdump and the pipe); None when it cannot be known (not
        live, or no record yet and no wall clock)."""
        if not self.live:
            return None
        if self.wall_clock:
            return time.time_ns() - self.grace_ns
        if self.last_ns is None:
            return None
        return self.last_ns + round((time.monotonic() - self.last_arrival) * NS) - self.grace_ns


class Tcpdump:
    """tcpdump as a child: its stdout is the stream; its stderr kept (the last
    lines) for its error, and its counts (``latest``) as it says them: at the
    end, and while it runs when asked (``ask_counts``: SIGUSR1, which tcpdump
    answers on Linux with a line of its counts and goes on capturing)."""

    def __init__(self, command: list[str], said: Callable[[str], None] = lambda line: None) -> None:
        self.command = command
        self.said = said  # given tcpdump's "listening on IFACE, ..." once it captures
        if shutil.which(command[0]) is None:
            raise CaptureError(
                f"{command[0]} not found: -i captures through tcpdump "
                "(apt-get install tcpdump), or pipe a capture: ... | nfstrace watch -"
            )
        try:
            self.proc = subprocess.Popen(  # (bufsize 0: a read returns what has come)
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                bufsize=0,
            )
        except OSError as e:
            raise CaptureError(f"cannot run {command[0]}: {e.strerror or e}") from None
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.stdout = cast(BinaryIO, self.proc.stdout)
        self.lines: deque[str] = deque(maxlen=50)
        self.latest: dict[str, int] = {}  # its counts, as it last said them
        self._counted = threading.Event()  # set when it says its counts
        self.listening = False  # it said "listening on": its signal handlers are set
        self._stderr = threading.Thread(target=self._errors, daemon=True)
        self._stderr.start()

    def _errors(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode(errors="replace").rstrip()
            counts = count_line(line)
            if counts:  # (not kept in lines: asked every interval, they would push out the rest)
                self.latest = {**self.latest, **counts}
                self._counted.set()
                continue
            self.lines.append(line)
            if line.startswith("tcpdump: listening on"):
                self.listening = True
                self.said(line)

    def ask_counts(self, wait: float = COUNTS_WAIT_S) -> dict[str, int]:
        """Its counts so far: SIGUSR1 sent (once it listens: before, the signal
        would end it), its answer waited for at most ``wait`` seconds; the
        counts it said last (perhaps older) if it does not answer in time."""
        if self.listening and self.proc.poll() is None:
            self._counted.clear()
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGUSR1)
                self._counted.wait(wait)
        return dict(self.latest)

    def stop(self, timeout: float = 5.0) -> int:
        """Ask tcpdump to stop (SIGINT: it flushes and says its counts), wait
        for it; killed if it does not stop in time.  Returns its exit status."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGINT)
        try:
            status = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            status = self.proc.wait()
        self._stderr.join(timeout)
        return status

    def error(self) -> str:
        """What tcpdump said went wrong (its first line naming itself)."""
        said = [line for line in self.lines if line.startswith("tcpdump:")] or list(self.lines)
        said = [line for line in said if not line.startswith("tcpdump: listening on")]
        return said[0] if said else f"{self.command[0]} exited with status {self.proc.returncode}"

    def counts(self) -> dict[str, int]:
        """Its counts at the end: captured, received by filter, dropped by kernel
        (libpcap's ps_recv/ps_drop), as it printed them."""
        return dict(self.latest)


def pump(
    source: Source,
    feed: Callable[[Record], None],
    tick: Callable[[int], None],
    stopping: Callable[[], bool],
) -> None:
    """The loop: each record fed; when none arrives for a moment, the clock
    ticked (a live input).  Ends at the end of the stream or when ``stopping()``."""
    while not stopping():
        try:
            record = source.get()
        except EOFError:
            return
        if record is not None:
            feed(record)
            continue
        now = source.now_ns()
        if now is not None:
            tick(now)
