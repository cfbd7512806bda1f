"""nfstrace.memory: freed memory handed back to the system between stages."""

from __future__ import annotations

import platform

from nfstrace.memory import map_big_blocks, one_arena, release_freed


def test_release_freed_where_glibc() -> None:
    # CI runs on Debian (glibc): the trim must be found there, not silently skipped
    assert release_freed() is (platform.libc_ver()[0] == "glibc")


def test_big_blocks_mapped_where_glibc() -> None:
    glibc = platform.libc_ver()[0] == "glibc"
    assert map_big_blocks() is glibc
    assert map_big_blocks() is glibc  # once per process, the same answer after


def test_one_arena_where_glibc() -> None:
    """glibc accepts the arena bound (mallopt returns 0 for a parameter it does
    not know): the parse begun on a thread frees into the main arena."""
    glibc = platform.libc_ver()[0] == "glibc"
    assert one_arena() is glibc
