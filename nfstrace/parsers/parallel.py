"""Parse on several cores (or a Dask cluster) with the result of one parse.

A capture is split by **host pair**, not by file or by time: partition ``p`` of
``n`` reads every frame of every file (in the merged order, so frame numbers
are the same) but dissects only the frames whose address pair falls in ``p``
(Rust's ``ip::partition_of``, set by ``ParseLimits.partitions``/``partition``).  Every
TCP connection, UDP flow and fragmented datagram is thereby read whole, from
its first frame to its last, by one parse: the state that a split by file or
by time would have to hand across a boundary (reassembly, the RPC framing, the
window scales learnt from a handshake, retransmission history) never crosses
partitions, so a record split over two rotated files is read as it is in one
parse.  Frames that are copies of each other have the same addresses, so the
mirror-duplicate check (run over every frame by every partition) gives the
same answer too.

``combine`` then makes the partitions' tables one: messages and events merged
in the order one parse gives (by time and frame: rows with the same frame come
from one partition, whose order is kept), connection ids renumbered by the
frame that began each connection (``ParseStats.connection_frames``), counters
summed, per-direction facts merged in their sorted order, the file facts
taken from partition 0 (every partition read all the files).

What is not the same as one parse:
- the per-parse bounds (``ParseLimits``: connections, directions, events per
  kind, messages read) apply to each partition: only a capture that reaches
  one of them (a warning) can differ;
- a UDP RPC port learnt from a portmap reply is known to the partition of
  that reply's host pair only: UDP calls to it from another client, whose own
  portmap query was not captured, are not recognised (one parse would).
Everything else is identical: ``tests/test_parallel.py`` compares the tables
field by field with one parse on every sample and crafted capture.

Costs: each partition reads (and checks for copies) every frame, so n
partitions read the files n times; the dissection, which dominates, is split.
One host pair cannot be split: a capture of one client and one server gains
nothing.  How many processes and partitions a capture gets is
``nfstrace.parsers.partitioning``'s (``auto_workers``, ``plan``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import socket
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pandas as pd

from nfstrace.combining import merged
from nfstrace.config import ParseLimits
from nfstrace.errors import UsageError
from nfstrace.parsers import backends
from nfstrace.parsers.capture import Progress
from nfstrace.parsers.partitioning import files_size, partitioned, partitions_for
from nfstrace.parsers.stats import ParseStats
from nfstrace.schema import EVENT_DTYPES, MESSAGE_DTYPES

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

Parsed = tuple[pd.DataFrame, pd.DataFrame, ParseStats]
T = TypeVar("T")

# ParseStats fields that every partition counts over all frames (taken from
# partition 0); every other int field is a count of the partition's own frames.
SHARED_COUNTS = ("frames",)
# How long --dask waits for its scheduler before giving up.
DASK_CONNECT_TIMEOUT_S = 30


def parse_partition(
    paths: Sequence[str],
    limits: ParseLimits,
    parser: str,
    partition: int,
    partitions: int,
    progress: Progress | None = None,
) -> Parsed:
    """One partition's parse (the unit of work a process or Dask worker runs)."""
    if limits.buckets and max(limits.buckets) >= partitions:
        raise ValueError(f"ParseLimits.buckets name partitions beyond {partitions}")
    part = dataclasses.replace(limits, partition=partition, partitions=partitions)
    return backends.get(parser)(list(paths), part, progress)


def connection_ids(stats: Sequence[ParseStats]) -> list[np.ndarray]:
    """For each partition, the new id of its connections 1, 2, ...: their rank
    by the frame that began them over all partitions (one parse numbers them
    in that order); index 0 (no connection) stays 0."""
    frames = [s.connection_frames for s in stats]
    every = np.concatenate([np.asarray(f, dtype=np.int64) for f in frames])
    rank = np.empty(len(every), dtype=np.int64)
    rank[np.argsort(every, kind="stable")] = np.arange(1, len(every) + 1)
    out, start = [], 0
    for f in frames:
        out.append(np.concatenate([[0], rank[start : start + len(f)]]))
        start += len(f)
    return out


def _renumbered(df: pd.DataFrame, new_ids: np.ndarray) -> pd.DataFrame:
    if not len(df) or "conn" not in df:
        return df
    conn = df["conn"].to_numpy(dtype=np.int64)
    return df.assign(conn=new_ids[conn])


def _addr_key(text: str) -> bytes:
    """An address as the bytes one parse sorts its direction facts by."""
    if not text:
        return b""
    return socket.inet_pton(socket.AF_INET6 if ":" in text else socket.AF_INET, text)


def combine(parts: list[Parsed]) -> Parsed:
    """The partitions' (messages, events, stats), in partition order, as one
    parse of all the frames gives them (see the module's docstring).  The
    messages may be any of their columns (the same in every part).  Empties
    ``parts``: each part's columns are let go once merged."""
    if len(parts) == 1:
        return parts.pop()
    stats = [p[2] for p in parts]
    new_ids = connection_ids(stats)
    messages = [_renumbered(p[0], ids) for p, ids in zip(parts, new_ids, strict=True)]
    events = [_renumbered(p[1], ids) for p, ids in zip(parts, new_ids, strict=True)]
    parts.clear()
    return (
        _sorted_merge(messages, MESSAGE_DTYPES, ("ts_first_ns", "frame_first")),
        _sorted_merge(events, EVENT_DTYPES, ("ts_ns", "frame")),
        _combined_stats(stats),
    )


def _sorted_merge(
    tables: list[pd.DataFrame], dtypes: dict[str, str], keys: tuple[str, str]
) -> pd.DataFrame:
    """The tables as one, in (keys) order, ties in partition order: one parse
    sorts its rows so (stably), and rows with the same frame come from one
    partition."""
    first = np.concatenate([t[keys[0]].to_numpy("int64") for t in tables])
    second = np.concatenate([t[keys[1]].to_numpy("int64") for t in tables])
    order = np.lexsort((second, first))
    del first, second
    return merged(tables, dtypes, order)


def _combined_stats(stats: Sequence[ParseStats]) -> ParseStats:
    first = stats[0]
    values: dict[str, Any] = {}
    for f in dataclasses.fields(ParseStats):
        name = f.name
        mine = [getattr(s, name) for s in stats]
        if name in ("files", "inputs") or name in SHARED_COUNTS:
            values[name] = getattr(first, name)
        elif name == "connection_frames":
            values[name] = sorted(x for s in mine for x in s)
        elif name == "directions":
            rows = [d for s in mine for d in s]
            values[name] = sorted(rows, key=lambda d: (_addr_key(d.src), _addr_key(d.dst)))
        elif name in ("tcp", "anomalies"):
            total: dict[str, int] = {}
            for counts in mine:
                for key, n in counts.items():
                    total[key] = total.get(key, 0) + n
            if name == "anomalies" and "messages_limit" in total:  # a frame number
                total["messages_limit"] = min(
                    c["messages_limit"] for c in mine if c.get("messages_limit")
                )
            # one parse's dicts list their keys in a fixed order (the first
            # partition's); keys only other partitions met follow
            order = list(getattr(first, name)) + [k for k in total if k not in getattr(first, name)]
            values[name] = {k: total[k] for k in order}
        else:
            assert isinstance(mine[0], int), name
            values[name] = sum(mine)
    return ParseStats(**values)


def run(
    work: Callable[[int, int, Progress | None], T],
    partitions: int,
    workers: int,
    progress: Progress | None = None,
    size: int = 0,
) -> list[T]:
    """``work(partition, partitions, progress)`` for every partition, in
    partition order: one after another in this process when ``workers`` is
    1; else partitions 0, workers, 2 * workers, ... here and the others in
    ``workers - 1`` processes (``work`` must pickle).  This process reads
    every frame of the files once per partition it runs, so ``progress``
    (frames, bytes) follows its passes, scaled to one read of the files
    (``size``: their bytes, ``files_size``)."""
    if workers < 1:
        raise UsageError(f"--workers must be at least 1, not {workers}")
    if partitions < 1:
        raise UsageError(f"--partitions must be at least 1, not {partitions}")
    workers = min(workers, partitions)
    mine = list(range(0, partitions, workers))
    results: dict[int, T] = {}
    with contextlib.ExitStack() as stack:
        pool: ProcessPoolExecutor | None = None
        if workers > 1:
            from concurrent.futures import ProcessPoolExecutor  # (multiprocessing: when used)

            pool = stack.enter_context(ProcessPoolExecutor(workers - 1))
        futures = {
            i: pool.submit(work, i, partitions, None)
            for i in range(partitions)
            if pool is not None and i not in mine
        }
        for n, i in enumerate(mine):
            results[i] = work(i, partitions, _pass_of(progress, n, len(mine), size))
        results.update({i: f.result() for i, f in futures.items()})
    return [results[i] for i in range(partitions)]


def _pass_of(progress: Progress | None, n: int, passes: int, size: int) -> Progress | None:
    """``progress`` of pass ``n`` of ``passes`` over files of ``size`` bytes,
    as a share of one read: the frames of the pass, its bytes scaled (the
    bar moves once through all the passes)."""
    if progress is None or passes == 1 or not size:
        return progress

    def scaled(frames: int, done: int) -> None:
        progress(frames, (n * size + done) // passes)

    return scaled


def run_on_dask(
    work: Callable[[int, int, Progress | None], T], partitions: int, client: Any
) -> list[T]:
    """``work`` for every partition on a dask.distributed cluster (``client``:
    a ``distributed.Client``), one task per partition; its results here."""
    if partitions < 1:
        raise UsageError(f"partitions must be at least 1, not {partitions}")
    futures = [client.submit(work, i, partitions, None, pure=False) for i in range(partitions)]
    return list(client.gather(futures))


@contextlib.contextmanager
def dask_client(scheduler: str, workers: int) -> Iterator[tuple[Any, int]]:
    """(a ``distributed.Client``, the partitions to cut): the cluster whose
    scheduler is at ``scheduler`` (``tcp://host:8786``), or a local cluster of
    ``workers`` processes (0: one per core) when it is ``"local"``; one
    partition per worker thread (``workers`` of them when given)."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise UsageError("--dask needs dask.distributed: pip install 'nfstrace[dask]'") from None
    if scheduler == "local":
        n = workers or len(os.sched_getaffinity(0))
        with (
            LocalCluster(
                n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None
            ) as cluster,
            Client(cluster) as client,
        ):
            yield client, n
        return
    try:
        client = Client(scheduler, timeout=DASK_CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError, ValueError) as e:
        raise UsageError(f"--dask {scheduler}: cannot reach the scheduler: {e}") from None
    with client:
        yield client, workers or sum(client.nthreads().values()) or 1


def parse(
    paths: Sequence[str],
    limits: ParseLimits,
    parser: str,
    workers: int,
    progress: Progress | None = None,
) -> Parsed:
    """Parse ``paths`` as ``workers`` partitions, combined (``run``).  One
    worker, or a backend that cannot read a partition, is the plain parse."""
    if workers < 1:
        raise UsageError(f"--workers must be at least 1, not {workers}")
    if workers == 1 or not partitioned(parser):
        return backends.get(parser)(list(paths), limits, progress)
    work = functools.partial(parse_partition, list(paths), limits, parser)
    return combine(run(work, workers, workers, progress, files_size(paths)))


def parse_on_dask(
    paths: Sequence[str],
    limits: ParseLimits,
    parser: str,
    client: Any,
    partitions: int,
) -> Parsed:
    """Parse on a dask.distributed cluster (``client``), one task per
    partition; the files must be readable at the same paths on every worker
    (a shared file system).  The tables come back here and are combined."""
    absolute = [os.path.abspath(p) for p in paths]
    work = functools.partial(parse_partition, absolute, limits, parser)
    return combine(run_on_dask(work, partitions_for(parser, partitions), client))


def parse_with_dask(
    paths: Sequence[str], limits: ParseLimits, parser: str, scheduler: str, workers: int
) -> Parsed:
    """``parse_on_dask`` on ``dask_client(scheduler, workers)``."""
    with dask_client(scheduler, workers) as (client, n):
        return parse_on_dask(paths, limits, parser, client, n)
