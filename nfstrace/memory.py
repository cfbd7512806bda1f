"""Freed memory handed back to the system between the analysis stages.

glibc keeps what Python frees in its heap, resident: the parse's and the
match's intermediate arrays and objects (0.4 GB and 0.6 GB on a 5M-packet
capture, measured) stay in the process while the next stages allocate their
big arrays elsewhere (mmap), so they add to the peak instead of being reused.
``release_freed()`` asks glibc to return its free pages (``malloc_trim``); on
other C libraries it does nothing.  The native parser does the same for its own
memory (``native/src/python.rs``).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        trim = ctypes.CDLL(None).malloc_trim  # glibc only
    except (AttributeError, OSError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def release_freed() -> bool:
    """Return the C heap's free pages to the system; False where that is not possible."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
