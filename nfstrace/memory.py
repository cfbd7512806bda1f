"""Freed memory handed back to the system between the analysis stages.

glibc keeps what Python frees in its heap, resident: the parse's and the
match's intermediate arrays and objects (0.4 GB and 0.6 GB on a 5M-packet
capture, measured) stay in the process while the next stages allocate their
big arrays elsewhere (mmap), so they add to the peak instead of being reused.
``release_freed()`` asks glibc to return its free pages (``malloc_trim``); on
other C libraries it does nothing.  The native parser does the same for its own
memory (``native/src/python.rs``).

Within a stage, ``map_big_blocks()`` keeps big blocks out of that heap: glibc
raises its mmap threshold to the biggest block freed (up to 32 MiB), so
after the first big array is freed the next ones of that size (the
partitions' columns, a stage's work arrays) live in the heap and stay
resident after they are freed, until the next trim.  A fixed threshold of
MMAP_THRESHOLD_BYTES maps every block at least that big on its own, handed
back the moment it is freed (10M-packet capture: peak 2.97 -> 2.89 GB, the
same time).  It is 4 MiB, not less: the arrays of a few hundred thousand
rows (1-4 MiB) made and freed by every step of a stage, mapped on their own,
faulted in fresh pages each time (4 KiB ones: numpy asks for huge pages from
4 MiB), once the parser's columns no longer left a heap to reuse (1M metadata
packets: 650k -> 270k page faults, analyze 3.0 -> 2.3 s; 10M: peak 2.53 ->
2.58 GB).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable

# Blocks at least this big are mapped on their own (glibc's M_MMAP_THRESHOLD).
MMAP_THRESHOLD_BYTES = 4 << 20
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)
_M_ARENA_MAX = -8


@functools.cache
def map_big_blocks() -> bool:
    """Map every block of MMAP_THRESHOLD_BYTES or more on its own, for the
    rest of the process (glibc; False elsewhere).  Done once per process."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # glibc only
    except (AttributeError, OSError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))


@functools.cache
def one_arena() -> bool:
    """Every thread allocates from one glibc arena, for the rest of the process
    (False elsewhere): what one thread frees the others reuse.  The Rust parse
    begun on a thread (``nfstrace.parsers.ahead``) frees its state there; in an
    arena of its own, the analysis after it faulted in fresh pages instead (1M
    metadata packets: 465k more page faults, 1.1 s more CPU).  Call it before
    the thread starts (a thread's arena is chosen at its first allocation)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # glibc only
    except (AttributeError, OSError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_ARENA_MAX, 1))


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
