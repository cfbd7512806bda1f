"""How a capture is cut for its parse, decided before anything heavy is
imported (the standard library only: a parse begun ahead plans on its thread
while the main thread imports numpy and pandas, and numpy imported there held
that parse back ~0.1 s): how many processes its bytes repay, how many host-pair
partitions its memory needs (estimated from a sample of the first file), and
which CRC buckets each partition takes (``ParseLimits.buckets``).
``nfstrace.parsers.parallel`` runs the plan; ``nfstrace.parsers.ahead`` starts
a one-partition plan's parse while the analysis imports."""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from collections.abc import Sequence

from nfstrace.config import ParseLimits, memory_available
from nfstrace.errors import CaptureError
from nfstrace.parsers import backends, capture

# Backends that can read one partition (the others ignore ParseLimits.partitions).
PARTITIONED = ("native",)
# Below this many bytes of input one process is quicker than starting others.
MIN_PARALLEL_BYTES = 64 << 20
# Partitions when none are asked for (auto_partitions): one partition's parse
# holds its connections' state and its messages, about PARSE_BYTES_PER_FRAME
# per frame of metadata-heavy traffic at its peak (bench/memory.md: 3.36 GB
# for 10M frames parsed whole); a capture is cut into partitions that each
# take at most PARTITION_MEMORY_SHARE of the memory available, its frames
# estimated from the first ESTIMATE_BYTES of the first file.  Smaller inputs
# are not estimated (one partition per worker).
PARSE_BYTES_PER_FRAME = 340
PARTITION_MEMORY_SHARE = 1 / 16
ESTIMATE_BYTES = 16 << 20
# CRC buckets of the host pairs that ``balanced_buckets`` hands to the
# partitions by their frames in that sample (a plain CRC modulo the partitions
# gave two of four partitions nearly all of 16 clients' traffic).
BUCKETS = 1024
MIN_ESTIMATED_BYTES = 512 << 20


def partitioned(parser: str) -> bool:
    """Can this backend read one partition?"""
    return parser in PARTITIONED


def auto_workers(paths: Sequence[str], parser: str) -> int:
    """Processes worth starting for these files with this backend: one per core
    (at most 8) when the input is big enough to repay it, else 1."""
    if not partitioned(parser):
        return 1
    if files_size(paths) < MIN_PARALLEL_BYTES:
        return 1
    return max(1, min(8, len(os.sched_getaffinity(0))))


@dataclasses.dataclass(frozen=True)
class Sample:
    """The first file's first ESTIMATE_BYTES (compressed files: packed bytes):
    ``frames`` whole frames in ``taken`` bytes, and how many of them fell in
    each of BUCKETS CRC buckets of their host pair (Rust's ``ip::partition_of``)."""

    frames: int = 0
    taken: int = 0
    buckets: tuple[int, ...] = (0,) * BUCKETS


def sample(paths: Sequence[str]) -> Sample:
    """The first file's Sample; an empty one when it cannot be read (the parse
    says why).  Taken once per file as it is (a parse begun ahead and the load
    plan alike: ``nfstrace.parsers.ahead``)."""
    try:
        st = os.stat(paths[0])
    except OSError:
        return Sample()
    return _sample(paths[0], st.st_size, st.st_mtime_ns, st.st_ino)


@functools.lru_cache(maxsize=4)
def _sample(path: str, size: int, mtime_ns: int, inode: int) -> Sample:
    """``sample`` of the file ``path`` while it has this size, change time and inode."""
    info = capture.CaptureInfo(path)
    crcs: list[int] = []
    counted = taken = 0
    partition = backends.native_extension().frame_partition
    try:
        for _, linktype, data, _, _ in capture.read_frames(path, 0, info):
            if info.read_bytes != taken:  # a chunk read: the frames before took the last ones
                counted = len(crcs)
                if taken >= ESTIMATE_BYTES:
                    break
                taken = info.read_bytes
            crcs.append(partition(linktype, data, BUCKETS))
        else:  # the whole file
            counted, taken = len(crcs), files_size([path])
    except CaptureError:
        return Sample()
    counts = [0] * BUCKETS
    for crc in crcs[:counted]:
        counts[crc] += 1
    return Sample(counted, taken, tuple(counts))


def estimated_frames(paths: Sequence[str], first: Sample | None = None) -> int:
    """Frames in the files, from the file bytes per frame of the first file's
    ``sample``; 0 when the first file cannot be read."""
    first = first or sample(paths)
    if not first.frames or not first.taken:
        return 0
    return round(files_size(paths) * first.frames / first.taken)


def balanced_buckets(counts: Sequence[int], partitions: int) -> tuple[int, ...]:
    """``ParseLimits.buckets`` for ``partitions`` partitions of about equal
    frames, given each bucket's frames in a sample: the busiest bucket first to
    the partition with the fewest so far (longest processing time first; ties:
    the lower bucket, the lower partition); buckets the sample did not see go
    round the partitions.  Empty when there is nothing to balance (one
    partition, an empty sample)."""
    if partitions <= 1 or not sum(counts):
        return ()
    owner = [b % partitions for b in range(len(counts))]
    load = [0] * partitions
    for b in sorted(range(len(counts)), key=lambda b: -counts[b]):  # (stable)
        if not counts[b]:
            break
        owner[b] = min(range(partitions), key=load.__getitem__)
        load[owner[b]] += int(counts[b])
    return tuple(owner)


def auto_partitions(
    paths: Sequence[str], parser: str, workers: int, first: Sample | None = None
) -> int:
    """Partitions for these files: as many as ``workers``, more when one
    partition's parse would take more than PARTITION_MEMORY_SHARE of the
    memory available (see PARSE_BYTES_PER_FRAME)."""
    if not partitioned(parser) or files_size(paths) < MIN_ESTIMATED_BYTES:
        return workers
    budget = memory_available() * PARTITION_MEMORY_SHARE
    need = estimated_frames(paths, first) * PARSE_BYTES_PER_FRAME
    return max(workers, math.ceil(need / budget))


def files_size(paths: Sequence[str]) -> int:
    """The files' bytes on disk (0: one cannot be read)."""
    try:
        return sum(os.stat(p).st_size for p in paths)
    except OSError:
        return 0


def partitions_for(parser: str, wanted: int) -> int:
    """A backend that cannot read one partition is run once, whole."""
    return wanted if partitioned(parser) else 1


def plan(
    paths: Sequence[str], limits: ParseLimits, parser: str, workers: int, wanted: int = 0
) -> tuple[int, ParseLimits]:
    """The partitions to cut these files into (``wanted``, else
    ``auto_partitions``) and the limits that read them (their host pairs
    balanced by a sample of the first file: ``balanced_buckets``).  Not
    sampled when it cannot come to more than one partition: a backend that
    cannot read one, one wanted, or one worker on an input too small to
    estimate."""
    if not partitioned(parser):
        return 1, limits
    first = Sample()
    if wanted > 1 or (not wanted and (workers > 1 or files_size(paths) >= MIN_ESTIMATED_BYTES)):
        first = sample(paths)
    partitions = wanted or auto_partitions(paths, parser, workers, first)
    buckets = balanced_buckets(first.buckets, partitions)
    return partitions, dataclasses.replace(limits, buckets=buckets)
