"""The NfstraceError family: what can go wrong with the user's input, each
class with its own exit code so scripts can tell them apart.

Library code raises these; only the CLI turns them into one-line messages.
"""

from __future__ import annotations

from enum import IntEnum


class ExitStatus(IntEnum):
    OK = 0
    ERROR = 1  # unexpected: a bug in nfstrace
    USAGE = 2
    UNREADABLE = 3  # missing, unreadable, or not a capture file
    NO_RPC = 4  # a capture, but no ONC-RPC traffic in it
    OUTPUT = 5  # an output file could not be written
    # analysed, every output written, but the capture was damaged (or a memory
    # limit was hit): what was readable is in the analysis, warnings on stderr
    DAMAGED = 6


class NfstraceError(Exception):
    """Base class: a problem with the input or the request, not a bug."""

    exit_status = ExitStatus.ERROR

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path

    def __str__(self) -> str:
        return f"{self.message} ({self.path})" if self.path else self.message

    def __reduce__(self) -> tuple[type, tuple[str, str | None]]:
        """Pickled whole (path too): raised in a worker process, said here."""
        return type(self), (self.message, self.path)


class UsageError(NfstraceError):
    exit_status = ExitStatus.USAGE


class CaptureError(NfstraceError):
    """The file cannot be read as a capture at all."""

    exit_status = ExitStatus.UNREADABLE


class NoRpcTrafficError(NfstraceError):
    exit_status = ExitStatus.NO_RPC


class OutputError(NfstraceError):
    exit_status = ExitStatus.OUTPUT
