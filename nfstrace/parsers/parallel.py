"""Parse on several cores (or a Dask cluster) with the result of one parse.

A capture is split by **host pair**, not by file or by time: partition ``p`` of
``n`` reads every frame of every file (in the merged order, so frame numbers
are the same) but dissects only the frames whose address pair falls in ``p``
(``ip.partition_of``, set by ``ParseLimits.partitions``/``partition``).  Every
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
nothing (``auto_workers`` keeps it to one process).
"""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np
import pandas as pd

from nfstrace.config import ParseLimits
from nfstrace.errors import UsageError
from nfstrace.parsers import backends
from nfstrace.parsers.capture import Progress
from nfstrace.parsers.stats import ParseStats
from nfstrace.schema import EVENT_DTYPES, MESSAGE_DTYPES

Parsed = tuple[pd.DataFrame, pd.DataFrame, ParseStats]

# Backends that can read one partition (the others ignore ParseLimits.partitions).
PARTITIONED = ("fast", "native")
# ParseStats fields that every partition counts over all frames (taken from
# partition 0); every other int field is a count of the partition's own frames.
SHARED_COUNTS = ("frames",)
# Below this many bytes of input one process is quicker than starting others.
MIN_PARALLEL_BYTES = 64 << 20
# How long --dask waits for its scheduler before giving up.
DASK_CONNECT_TIMEOUT_S = 30


def parse_partition(
    paths: Sequence[str], limits: ParseLimits, parser: str, partition: int, partitions: int
) -> Parsed:
    """One partition's parse (the unit of work a process or Dask worker runs)."""
    part = dataclasses.replace(limits, partition=partition, partitions=partitions)
    return backends.get(parser)(list(paths), part, None)


def _merged_order(frames: Sequence[Sequence[int]]) -> list[np.ndarray]:
    """For each partition, the new id of its connections 1, 2, ...: their rank
    by the frame that began them over all partitions (one parse numbers them
    in that order); index 0 (no connection) stays 0."""
    every = np.concatenate([np.asarray(f, dtype=np.int64) for f in frames])
    rank = np.empty(len(every), dtype=np.int64)
    rank[np.argsort(every, kind="stable")] = np.arange(1, len(every) + 1)
    out, start = [], 0
    for f in frames:
        out.append(np.concatenate([[0], rank[start : start + len(f)]]))
        start += len(f)
    return out


def _renumbered(df: pd.DataFrame, new_ids: np.ndarray) -> pd.DataFrame:
    if not len(df):
        return df
    conn = df["conn"].to_numpy(dtype=np.int64)
    return df.assign(conn=new_ids[conn])


def _addr_key(text: str) -> bytes:
    """An address as the bytes one parse sorts its direction facts by."""
    if not text:
        return b""
    return socket.inet_pton(socket.AF_INET6 if ":" in text else socket.AF_INET, text)


def combine(parts: Sequence[Parsed]) -> Parsed:
    """The partitions' (messages, events, stats), in partition order, as one
    parse of all the frames gives them (see the module's docstring)."""
    if len(parts) == 1:
        return parts[0]
    new_ids = _merged_order([p[2].connection_frames for p in parts])
    messages = _merged(
        [_renumbered(m, ids) for (m, _, _), ids in zip(parts, new_ids, strict=True)],
        MESSAGE_DTYPES,
        ("ts_first_ns", "frame_first"),
    )
    events = _merged(
        [_renumbered(e, ids) for (_, e, _), ids in zip(parts, new_ids, strict=True)],
        EVENT_DTYPES,
        ("ts_ns", "frame"),
    )
    return messages, events, _combined_stats([p[2] for p in parts])


def _merged(
    tables: list[pd.DataFrame], dtypes: dict[str, str], keys: tuple[str, str]
) -> pd.DataFrame:
    """The tables as one, in (keys) order, ties in partition order: one parse
    sorts its rows so (stably), and rows with the same frame come from one
    partition.  Taken column by column (a DataFrame.take of the whole table
    costs 3x as much)."""
    whole = pd.concat(tables, ignore_index=True).astype(dtypes)
    order = np.lexsort((whole[keys[1]].to_numpy(), whole[keys[0]].to_numpy()))
    return pd.DataFrame({c: whole[c].array.take(order) for c in whole.columns}, copy=False)


def _combined_stats(stats: Sequence[ParseStats]) -> ParseStats:
    first = stats[0]
    values: dict[str, Any] = {}
    for f in dataclasses.fields(ParseStats):
        name = f.name
        mine = [getattr(s, name) for s in stats]
        if name == "files" or name in SHARED_COUNTS:
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


def _partitioned(parser: str) -> bool:
    """Can this backend read one partition?"""
    return (backends.auto_choice() if parser == "auto" else parser) in PARTITIONED


def auto_workers(paths: Sequence[str], parser: str) -> int:
    """Processes worth starting for these files with this backend: one per core
    (at most 8) when the input is big enough to repay it, else 1."""
    if not _partitioned(parser):
        return 1
    try:
        size = sum(os.stat(p).st_size for p in paths)
    except OSError:
        return 1
    if size < MIN_PARALLEL_BYTES:
        return 1
    return max(1, min(8, len(os.sched_getaffinity(0))))


def parse(
    paths: Sequence[str],
    limits: ParseLimits,
    parser: str,
    workers: int,
    progress: Progress | None = None,
) -> Parsed:
    """Parse ``paths`` as ``workers`` partitions, combined: partition 0 here
    (it reads every frame, so its ``progress`` is the whole parse's), the
    others in as many processes.  One worker, or a backend that cannot read a
    partition, is the plain parse."""
    if workers < 1:
        raise UsageError(f"--workers must be at least 1, not {workers}")
    parse_all = backends.get(parser)
    if workers == 1 or not _partitioned(parser):
        return parse_all(list(paths), limits, progress)
    with ProcessPoolExecutor(max_workers=workers - 1) as pool:
        futures = [
            pool.submit(parse_partition, list(paths), limits, parser, i, workers)
            for i in range(1, workers)
        ]
        here = parse_all(
            list(paths), dataclasses.replace(limits, partition=0, partitions=workers), progress
        )
        parts = [here] + [f.result() for f in futures]
    return combine(parts)


def parse_on_dask(
    paths: Sequence[str],
    limits: ParseLimits,
    parser: str,
    client: Any,
    partitions: int,
) -> Parsed:
    """Parse on a dask.distributed cluster (``client``: a ``distributed.Client``),
    one task per partition; the files must be readable at the same paths on
    every worker (a shared file system).  The tables come back here and are
    combined."""
    if partitions < 1:
        raise UsageError(f"partitions must be at least 1, not {partitions}")
    absolute = [os.path.abspath(p) for p in paths]
    futures = [
        client.submit(parse_partition, absolute, limits, parser, i, partitions, pure=False)
        for i in range(partitions)
    ]
    return combine(client.gather(futures))


def parse_with_dask(
    paths: Sequence[str], limits: ParseLimits, parser: str, scheduler: str, workers: int
) -> Parsed:
    """``parse_on_dask`` on the cluster whose scheduler is at ``scheduler``
    (``tcp://host:8786``), or on a local cluster of ``workers`` processes
    (0: one per core) when it is ``"local"``; one partition per worker thread
    (``workers`` of them when given)."""
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
            return parse_on_dask(paths, limits, parser, client, _partitions(parser, n))
    try:
        client = Client(scheduler, timeout=DASK_CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError, ValueError) as e:
        raise UsageError(f"--dask {scheduler}: cannot reach the scheduler: {e}") from None
    with client:
        n = workers or sum(client.nthreads().values()) or 1
        return parse_on_dask(paths, limits, parser, client, _partitions(parser, n))


def _partitions(parser: str, wanted: int) -> int:
    """A backend that cannot read one partition is run once, whole."""
    return wanted if _partitioned(parser) else 1
