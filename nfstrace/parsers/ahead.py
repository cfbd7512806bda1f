"""The Rust parse started ahead of the analysis' imports (issue 33).

A command spends its first ~0.4 s importing pandas, numpy and the analysis;
the Rust parse needs none of them and releases the GIL.  ``start`` (light:
nothing heavy imported) begins the parse of plain capture files on a thread,
with the settings the load will ask for if it parses them in this process --
its partitioning plan (``partitioning.plan``): the whole files, or the first
of the host-pair partitions a capture too big for one parse is cut into --
and the native parser's ``parse`` takes the result (``take``) when it asks
for exactly those files, unchanged since, with exactly those settings;
otherwise it parses as it would have (the result started ahead is dropped).
Nothing else differs: the same call of the same extension with the same
arguments.  2.2 GB of NFSv3 1 MiB WRITEs (bench/results): the parse's
~0.5 s ran beside the imports instead of after them; a 10M-packet capture cut
into three partitions: the first one's parse.

Not started for compressed files, standard input or pipes (read through
Python), more than MAX_FILES files, several worker processes (a process
forked while the thread parses could inherit a lock it holds) or Dask.
The thread is not a daemon: like the parse in the main thread (which runs to
the end of the files once begun, ``native/src/python.rs``), a command that
fails after ``start`` exits when the parse is done.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Sequence
from typing import Any

from nfstrace.config import CHECK_EVERY_FRAMES, ParseLimits
from nfstrace.errors import CaptureError
from nfstrace.memory import one_arena
from nfstrace.parsers import backends, capture
from nfstrace.parsers.capture import Progress


def native_settings(limits: ParseLimits) -> dict[str, int | list[int]]:
    """The settings ``nfstrace._native.parse`` reads ``limits`` as."""
    return {
        "head_bytes": limits.head_bytes,
        "max_record_bytes": limits.max_record_bytes,
        "max_pending_segments": limits.max_pending_segments,
        "max_pending_bytes": limits.max_pending_bytes,
        "max_pending_bytes_total": limits.max_pending_bytes_total,
        "max_hole_age_ns": limits.max_hole_age_ns,
        "max_unsynced_bytes": limits.max_unsynced_bytes,
        "max_frame_bytes": limits.max_frame_bytes,
        "max_interface_drops": capture.MAX_INTERFACE_DROPS,
        "max_messages": limits.max_messages,
        "check_every_frames": CHECK_EVERY_FRAMES,
        "ip_reassembly_timeout_ns": limits.ip_reassembly_timeout_ns,
        "max_ip_reassemblies": limits.max_ip_reassemblies,
        "max_ip_reassembly_bytes": limits.max_ip_reassembly_bytes,
        "max_fragments_per_datagram": limits.max_fragments_per_datagram,
        "max_pending_calls": limits.pending_calls,  # (max_pending_call_bytes folded in)
        "max_connections": limits.max_connections,
        "max_directions": limits.max_directions,
        "max_events_per_kind": limits.max_events_per_kind,
        "duplicate_window_ns": limits.duplicate_window_ns,
        "send_gap_ns": limits.send_gap_ns,
        "max_ack_waiting": limits.max_ack_waiting,
        "max_unframed_records": limits.max_unframed_records,
        "partitions": limits.partitions,
        "partition": limits.partition,
        "buckets": list(limits.buckets),
    }


# At most this many files: files whose frames overlap in time are open at once,
# and the imports beside the parse open theirs too (300 rotated copies under a
# limit of 200 open files: pandas' import failed instead of the parse naming
# the file it could not open).
MAX_FILES = 8

Key = tuple[Any, ...]


@dataclasses.dataclass
class _Started:
    """A parse begun by ``start``: what it read with (``key``: set by the thread
    once planned; None: not parsed), its result or error, how far it has come
    (a ``_native.ParseProgress``, set without the GIL: a callback would wait
    for it while the main thread imports)."""

    thread: threading.Thread | None = None
    key: Key | None = None
    out: dict[str, Any] | None = None
    error: BaseException | None = None
    progress: Any = None


_started: list[_Started] = []  # at most one not yet taken: the command's own parse


def _key(paths: Sequence[str], settings: dict[str, int | list[int]]) -> Key | None:
    """The files (each with its size, change time and inode) and the settings."""
    try:
        stats = [os.stat(p) for p in paths]
    except OSError:
        return None
    files = tuple(
        (p, s.st_size, s.st_mtime_ns, s.st_ino) for p, s in zip(paths, stats, strict=True)
    )
    frozen = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in settings.items()))
    return files, frozen


def _plain(path: str) -> bool:
    """A regular, uncompressed file (the ones Rust reads itself)."""
    if path == capture.STDIN or not os.path.isfile(path):
        return False
    try:
        stream, compression = capture.open_stream(path)
    except CaptureError:
        return False
    stream.close()
    return not compression


def start(
    paths: Sequence[str], limits: ParseLimits, parser: str, workers: int, partitions: int
) -> bool:
    """Begin the parse of ``paths`` on a thread if the load would parse them
    here, in this process alone (``workers``/``partitions`` as
    ``AnalysisConfig`` has them: 0 = chosen automatically): the files whole, or
    the plan's first partition; True if begun.  One at a time: the next parse takes
    it (``take``), whether it was for that parse or not."""
    paths = list(paths)
    if _started or parser != "native" or not paths or workers > 1:
        return False
    if len(paths) > MAX_FILES:
        return False
    if not all(_plain(p) for p in paths):
        return False
    started = _Started()

    def parse() -> None:
        # (imported here, not before the main thread's imports: light, no numpy)
        from nfstrace.memory import map_big_blocks
        from nfstrace.parsers import partitioning

        try:
            n = workers or partitioning.auto_workers(paths, parser)
            count, planned = partitioning.plan(paths, limits, parser, n, partitions)
            if n != 1:
                return
            settings = native_settings(dataclasses.replace(planned, partition=0, partitions=count))
            started.key = _key(paths, settings)
            map_big_blocks()  # as the load does before it parses
            native = backends.native_extension()
            started.progress = native.ParseProgress()
            started.out = native.parse(paths, [None] * len(paths), settings, started.progress)
        except BaseException as e:  # (raised where the load takes it)
            started.error = e

    one_arena()  # (its freed memory reused by the analysis after it)
    started.thread = threading.Thread(target=parse, name="nfstrace-parse-ahead")
    _started.append(started)
    started.thread.start()
    return True


def take(
    paths: Sequence[str],
    readers: Sequence[object | None],
    settings: dict[str, int | list[int]],
    progress: Progress | None = None,
) -> dict[str, Any] | None:
    """What ``nfstrace._native.parse(paths, readers, settings, ...)`` returns,
    from the parse ``start`` began if it read exactly these plain files
    (unchanged since) with these settings, waited for (its progress passed on
    to ``progress``) and raised as it raised; else None (and that parse is
    dropped)."""
    if not _started:
        return None
    started = _started.pop()  # (taken once, used or not)
    if started.thread is None or any(r is not None for r in readers):
        return None
    while started.key is None and started.thread.is_alive():  # (planning: a moment)
        started.thread.join(0.005)
    if started.key is None or started.key != _key(paths, settings):
        return None  # (a parse of other files or settings: not waited for)
    while started.thread.is_alive():
        started.thread.join(0.1)
        if progress is not None and started.progress is not None and started.progress.frames:
            progress(started.progress.frames, started.progress.bytes)
    if started.error is not None:
        raise started.error
    return started.out
