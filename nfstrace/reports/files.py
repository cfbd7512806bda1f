"""Output files written safely: whole or not at all, never over the user's input.

Every output (HTML report, JSON, CSV, Parquet) is written to a temporary file
in the target's own directory, flushed to disk, then renamed over the target
(``os.replace``: atomic on POSIX).  A failure or a signal part-way (a full
disk, Ctrl-C, SIGTERM) removes the temporary file and leaves whatever was at
the target before; two runs writing the same target each leave a complete
file, the last one to finish.  A new file gets the mode an ordinary ``open``
would give it (0666 less the umask); a replaced one keeps its mode.

``check_outputs`` refuses, before anything is read, an output that is one of
the input captures (by path, symlink or hard link) or another output.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from nfstrace.errors import UsageError

TEMP_SUFFIX = ".part"


def _same(a: Path, b: Path) -> bool:
    """The same file: one inode when both exist, else the same resolved path."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a.resolve() == b.resolve()


def check_outputs(inputs: Iterable[Path], outputs: dict[str, Path | None]) -> None:
    """UsageError when an output would replace an input capture or another output.

    outputs: option name (``-o``, ``--json`` ...) -> path (None: not written).
    """
    given = [(name, Path(p)) for name, p in outputs.items() if p is not None]
    captures = [Path(p) for p in inputs]
    for i, (name, path) in enumerate(given):
        for capture in captures:
            if _same(path, capture):
                raise UsageError(f"{name} {path} is the input capture {capture}: not overwritten")
        for other, other_path in given[:i]:
            if _same(path, other_path):
                raise UsageError(f"{other} and {name} name the same file {path}")


def _new_file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path beside ``path``; renamed over it when the block ends
    normally, removed when it raises (any exception, KeyboardInterrupt too)."""
    target = Path(path)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=TEMP_SUFFIX, dir=target.parent)
    os.close(fd)
    temp = Path(name)
    try:
        yield temp
        try:
            mode = os.stat(target).st_mode & 0o7777
        except OSError:
            mode = _new_file_mode()
        os.chmod(temp, mode)
        with open(temp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    with contextlib.suppress(OSError):  # the rename itself on disk (best effort)
        dir_fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def write_atomically(path: str | os.PathLike[str], write: Callable[[Path], object]) -> None:
    """``write(temporary path)``, then the result renamed over ``path``."""
    with atomic_path(path) as temp:
        write(temp)
