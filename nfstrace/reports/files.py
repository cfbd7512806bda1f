"""Output files written safely: whole or not at all, never over the user's input.

Where an output goes depends on what its path names (``target``):

- a regular file, or nothing yet: written to a temporary file in the target's
  own directory, flushed to disk, then renamed over it (``os.replace``: atomic
  on POSIX).  A symlink to a regular file is followed: the file it names is
  replaced, the link stays.  A failure or a signal part-way (a full disk,
  Ctrl-C, SIGTERM) removes the temporary file and leaves whatever was at the
  target before; two runs writing the same target each leave a complete file,
  the last one to finish.  A new file gets the mode an ordinary ``open`` would
  give it (0666 less the umask); a replaced one keeps its mode.
- a FIFO, a character or block device, a socket (``/dev/null``,
  ``/proc/self/fd/1``, ``>(gzip > x.gz)``): never renamed over (that would
  put a regular file in its place: a FIFO's reader would get nothing, and a
  root run would replace ``/dev/null``).  The output is made whole in a
  temporary file under $TMPDIR first, then copied into the target opened for
  writing, so a failure part-way writes nothing there.
- ``-``: standard output, the same way (the terminal summary then goes to
  standard error: ``analyze``'s ``--json -``).

``check_outputs`` refuses, before anything is read, an output that is one of
the files actually read (a directory's captures after expansion, the file
behind standard input, by device and inode, so through symlinks, hard links
and ``..``), another output, or standard output when standard output is one
of the input files (``nfstrace analyze x.pcap >> x.pcap``); and it says
before the analysis when an output cannot be written (its directory missing or
read-only, a directory as its path).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from nfstrace.errors import OutputError, UsageError

TEMP_SUFFIX = ".part"
STDOUT = "-"  # the output path that means standard output
STDIN = "-"  # the input path that means standard input


@dataclass(frozen=True)
class _Identity:
    """A file as the kernel knows it: (device, inode)."""

    dev: int
    ino: int

    @classmethod
    def of(cls, st: os.stat_result) -> _Identity:
        return cls(st.st_dev, st.st_ino)


def _identity(path: str | os.PathLike[str]) -> _Identity | None:
    """The file a path names, following symlinks (None: nothing there)."""
    try:
        return _Identity.of(os.stat(path))
    except OSError:
        return None


def _fd_identity(fd: int) -> tuple[_Identity, bool] | None:
    """The file behind an open descriptor and whether it is a regular file."""
    try:
        st = os.fstat(fd)
    except (OSError, ValueError):
        return None
    return _Identity.of(st), stat.S_ISREG(st.st_mode)


def is_stdout(path: str | os.PathLike[str]) -> bool:
    return os.fspath(path) == STDOUT


def input_identities(inputs: Iterable[str | os.PathLike[str]]) -> dict[_Identity, str]:
    """The files read, by identity -> the name to quote: every path given (a
    directory's capture files already listed by the caller) and, for ``-``,
    the file behind standard input when it is one (``< x.pcap``)."""
    out: dict[_Identity, str] = {}
    for p in inputs:
        name = os.fspath(p)
        if name == STDIN:
            got = _fd_identity(0)
            if got is not None and got[1]:
                out.setdefault(got[0], "standard input")
            continue
        ident = _identity(name)
        if ident is not None:
            out.setdefault(ident, name)
    return out


def check_outputs(
    inputs: Iterable[str | os.PathLike[str]],
    outputs: dict[str, Path | None],
    strict: Iterable[str] | None = None,
) -> None:
    """UsageError when an output would replace a file read, or another output,
    or when standard output is one of the files read.

    inputs: every file read (directories expanded; ``-`` for standard input);
    outputs: option name (``-o``, ``--json`` ...) -> path (None: not written);
    strict: the options whose place must be writable now (default: all): a
    missing directory or a directory as the path is refused before reading.
    """
    read = input_identities(inputs)
    given = [(name, Path(p)) for name, p in outputs.items() if p is not None]
    strict_names = set(outputs) if strict is None else set(strict)
    out_fd = _fd_identity(1)
    if out_fd is not None and out_fd[1] and out_fd[0] in read:
        raise UsageError(f"standard output is the input capture {read[out_fd[0]]}: not overwritten")
    seen: list[tuple[str, Path, _Identity | None]] = []
    for name, path in given:
        if is_stdout(path):
            ident = None
        else:
            ident = _identity(path)
            if ident is not None and ident in read:
                raise UsageError(
                    f"{name} {path} is the input capture {read[ident]}: not overwritten"
                )
        for other, other_path, other_ident in seen:
            if is_stdout(path) or is_stdout(other_path):
                same = is_stdout(path) and is_stdout(other_path)
            elif ident is not None and other_ident is not None:
                same = ident == other_ident
            else:
                same = path.resolve() == other_path.resolve()
            if same:
                raise UsageError(f"{other} and {name} name the same file {path}")
        seen.append((name, path, ident))
        if name in strict_names and not is_stdout(path):
            _check_writable_place(name, path)


def _check_writable_place(name: str, path: Path) -> None:
    """An output that cannot be written (a directory as its path, a directory
    that does not exist or is not writable): the OutputError now, before the
    analysis, not after it."""
    if path.is_dir():
        raise OutputError(f"cannot write {name}: is a directory", str(path))
    if _special(path):
        return  # written into where it is
    parent = Path(os.path.realpath(path)).parent  # where the temporary file goes
    if not parent.is_dir():
        raise OutputError(f"cannot write {name}: no such directory", str(path))
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write {name}: permission denied in {parent}", str(path))


def _new_file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _special(path: Path) -> bool:
    """A FIFO, a device or a socket: written into, never renamed over."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


@contextlib.contextmanager
def _temporary(directory: Path | None, name: str) -> Iterator[Path]:
    fd, temp_name = tempfile.mkstemp(prefix=f".{name}.", suffix=TEMP_SUFFIX, dir=directory)
    os.close(fd)
    temp = Path(temp_name)
    try:
        yield temp
    finally:
        with contextlib.suppress(OSError):
            temp.unlink()


def _copy_into(temp: Path, path: str | os.PathLike[str]) -> None:
    """The finished output's bytes into standard output or a special file."""
    with open(temp, "rb") as src:
        if is_stdout(path):
            sys.stdout.flush()
            shutil.copyfileobj(src, sys.stdout.buffer)
            sys.stdout.buffer.flush()
            return
        with open(path, "wb") as dst:
            shutil.copyfileobj(src, dst)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path to write the output into; when the block ends normally
    it is renamed over ``path`` (a regular file or nothing: the file a symlink
    names) or copied into it (standard output, a FIFO, a device); when the
    block raises (any exception, KeyboardInterrupt too) it is removed and
    ``path`` is left as it was."""
    if is_stdout(path) or _special(Path(path)):
        with _temporary(None, "nfstrace-output") as temp:
            yield temp
            _copy_into(temp, path)
        return
    target = Path(os.path.realpath(path))  # a symlink's file replaced, the link kept
    with _temporary(target.parent, target.name) as temp:
        yield temp
        try:
            mode = os.stat(target).st_mode & 0o7777
        except OSError:
            mode = _new_file_mode()
        os.chmod(temp, mode)
        with open(temp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(temp, target)
    with contextlib.suppress(OSError):  # the rename itself on disk (best effort)
        dir_fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def write_atomically(path: str | os.PathLike[str], write: Callable[[Path], object]) -> None:
    """``write(temporary path)``, then the result put in place at ``path``
    (``atomic_path``)."""
    with atomic_path(path) as temp:
        write(temp)
