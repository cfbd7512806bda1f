"""nfstrace.memory: freed memory handed back to the system between stages."""

from __future__ import annotations

import platform

from nfstrace.memory import map_big_blocks, release_freed


def test_release_freed_where_glibc() -> None:
    # CI runs on Debian (glibc): the trim must be found there, not silently skipped
    assert release_freed() is (platform.libc_ver()[0] == "glibc")


def test_big_blocks_mapped_where_glibc() -> None:
    glibc = platform.libc_ver()[0] == "glibc"
    assert map_big_blocks() is glibc
    assert map_big_blocks() is glibc  # once per process, the same answer after
