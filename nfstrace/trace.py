"""``load()``: capture files in, the analysis tables out (the library entry point)."""

from __future__ import annotations

import functools
import html
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import pandas as pd

from nfstrace.analysis.budget import CAUSES as BUDGET_CAUSES
from nfstrace.analysis.diagnosis import Diagnosis, DiagnosisOptions, diagnose
from nfstrace.analysis.latency import compound_op_latency, latency_table, status_name
from nfstrace.analysis.overview import Overview, overview
from nfstrace.analysis.writes import FILE_COLUMNS
from nfstrace.config import ParseLimits
from nfstrace.errors import CaptureError, UsageError
from nfstrace.match import MESSAGE_COLUMNS_READ, MatchConfig, match
from nfstrace.match import combine as combine_transactions
from nfstrace.memory import map_big_blocks, release_freed
from nfstrace.parsers import backends, capture, parallel, partitioning
from nfstrace.parsers.capture import Progress
from nfstrace.parsers.stats import ParseStats
from nfstrace.schema import MESSAGE_FACTS
from nfstrace.text import count, file_names, printable


@dataclass(frozen=True)
class AnalysisConfig:
    """Options that flow down the pipeline (the CLI builds one)."""

    limits: ParseLimits = field(default_factory=ParseLimits)
    match: MatchConfig = field(default_factory=MatchConfig)
    # Keep only traffic to/from these addresses / ports (empty: everything).
    clients: tuple[str, ...] = ()
    servers: tuple[str, ...] = ()
    ports: tuple[int, ...] = ()
    # Which backend dissects the captures (nfstrace.parsers.backends.PARSERS).
    parser: str = backends.DEFAULT
    diagnosis: DiagnosisOptions = field(default_factory=DiagnosisOptions)
    # Processes that parse, split by host pair (nfstrace.parsers.parallel):
    # 1 = this one only; 0 = partitioning.auto_workers (one per core for big inputs).
    workers: int = 1
    # Parse on a dask.distributed cluster: its scheduler's address, or "local"
    # for a local cluster of ``workers`` processes (None: no Dask).
    dask: str | None = None
    # Host-pair partitions parsed and matched one by one (``workers`` at a
    # time), each reading every frame: the parser's state and the messages of
    # one partition are held at a time, for captures too big for memory.
    # 0: as many as ``workers``, more when one would not fit in memory
    # (``partitioning.auto_partitions``); with Dask, one per thread of the cluster.
    partitions: int = 0
    # False: Trace.messages keeps only ``schema.MESSAGE_FACTS``, the columns
    # the analysis reads (the command line's choice: a quarter of the bytes).
    keep_messages: bool = True


@dataclass(frozen=True, repr=False)
class Trace:
    """Everything nfstrace learned from a set of capture files.

    messages: one row per RPC message (``nfstrace.schema.MESSAGE_COLUMNS``)
    transactions: one row per logical call (``nfstrace.schema.TRANSACTION_COLUMNS``)
    latency: per-operation latency (``nfstrace.analysis.latency.LATENCY_COLUMNS``)
    latency_by_pair: the same per client/server pair
    compound_latency: NFSv4, per operation inside COMPOUNDs
    events: transport events (``nfstrace.schema.EVENT_COLUMNS`` / ``EVENT_KINDS``)
    stats: what the parser saw (frames, fragments, truncation, drops, warnings)
    overview: the headline facts (hosts, versions, counts, throughput)
    diagnosis: every analysis module's result and the ranked findings
    """

    paths: tuple[str, ...]
    messages: pd.DataFrame
    transactions: pd.DataFrame
    latency: pd.DataFrame
    latency_by_pair: pd.DataFrame
    compound_latency: pd.DataFrame
    events: pd.DataFrame
    stats: ParseStats
    overview: Overview
    diagnosis: Diagnosis

    @property
    def files(self) -> pd.DataFrame:
        """The files written, the slowest first: name (from the LOOKUP/CREATE/OPEN
        replies in the capture), bytes, seconds, rate, sequential share
        (``nfstrace.analysis.writes.FILE_COLUMNS``)."""
        writes = self.diagnosis.writes
        if writes is None:
            return pd.DataFrame(columns=list(FILE_COLUMNS))
        return writes.files

    def readable(self) -> pd.DataFrame:
        """The transactions for reading (Jupyter): call and reply times as UTC
        Timestamps, latencies as Timedeltas, the NFS status by name beside its
        code.  A copy: the ``*_ns`` integer columns stay the exact values."""
        tx = self.transactions
        out = pd.DataFrame(
            {
                "t_call": pd.to_datetime(tx["t_call_ns"], unit="ns", utc=True),
                "t_reply": pd.to_datetime(tx["t_reply_ns"], unit="ns", utc=True),
                "latency": pd.to_timedelta(tx["latency_ns"], unit="ns"),
                "server_time": pd.to_timedelta(tx["srt_ns"], unit="ns"),
            }
        )
        names = [
            status_name(int(st), int(v)) if prog == "nfs" and not pd.isna(st) and st >= 0 else ""
            for st, v, prog in zip(tx["status"], tx["vers"], tx["program"].astype(str), strict=True)
        ]
        out["status_name"] = pd.Series(names, index=tx.index, dtype="string")
        keep = ["client", "server", "xid", "program", "vers", "op", "name", "status"]
        return pd.concat([tx[keep], out, tx.drop(columns=keep)], axis=1)

    def _facts(self) -> tuple[str, str, str]:
        """(the files, what they hold, the verdict) in a few words each."""
        names = file_names(self.paths, base=True)
        ov = self.overview
        versions = "/".join(f"NFSv{v}" for v in ov.nfs_versions) or "no NFS"
        held = (
            f"{count(self.stats.frames, 'frame')}, {count(ov.transactions, 'transaction')}, "
            f"{versions} over {'/'.join(ov.transports).upper() or '-'}"
        )
        verdict = self.diagnosis.verdict
        said = f"{verdict.primary}: {verdict.text}" if verdict is not None else "no verdict"
        return printable(names), held, printable(said)

    def __repr__(self) -> str:
        """One line (the tables are attributes: print them one at a time)."""
        names, held, said = self._facts()
        said = said if len(said) <= 160 else said[:157] + "..."
        return f"<Trace {names}: {held}; {said}>"

    def _repr_html_(self) -> str:
        """Jupyter: the files, what they hold, the verdict, the first findings
        and each pair's time budget."""
        names, held, said = self._facts()
        rows = [("capture", names), ("holds", held), ("verdict", said)]
        rows += [(f"finding {i}", printable(f.title)) for i, f in
                 enumerate(self.diagnosis.findings[:5], 1)]  # fmt: skip
        budget = self.diagnosis.budget
        if budget is not None:
            for r in budget.pairs.head(8).itertuples(index=False):
                share = r.elapsed_ns and {
                    c: getattr(r, f"{c}_ns") / r.elapsed_ns for c in BUDGET_CAUSES
                }
                top = sorted((share or {}).items(), key=lambda x: -x[1])
                words = ", ".join(f"{c} {v:.0%}" for c, v in top if v >= 0.005)
                rows.append((f"budget {r.client} → {r.server}", printable(words or "-")))
        cells = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
            f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
            for k, v in rows
        )
        return f"<table>{cells}</table>"


def _select(messages: pd.DataFrame, config: AnalysisConfig) -> pd.DataFrame:
    """Messages of the chosen clients/servers/ports (either direction)."""
    keep = pd.Series(True, index=messages.index)
    if config.clients:
        c = list(config.clients)
        keep &= messages["src"].isin(c) | messages["dst"].isin(c)
    if config.servers:
        s = list(config.servers)
        keep &= messages["src"].isin(s) | messages["dst"].isin(s)
    if config.ports:
        p = list(config.ports)
        keep &= messages["sport"].isin(p) | messages["dport"].isin(p)
    return messages[keep].reset_index(drop=True) if not keep.all() else messages


Matched = tuple[pd.DataFrame, pd.DataFrame, ParseStats, pd.DataFrame]


def match_partition(
    paths: Sequence[str],
    config: AnalysisConfig,
    partition: int,
    partitions: int,
    progress: Progress | None = None,
) -> Matched:
    """One host-pair partition's (messages, events, stats, transactions): the
    unit of work a process or a Dask worker runs (``parallel.run``)."""
    map_big_blocks()  # (in a worker process too: nfstrace.memory)
    messages, events, stats = parallel.parse_partition(
        paths, config.limits, config.parser, partition, partitions, progress
    )
    messages = _select(messages, config)
    if not config.keep_messages:  # the columns neither the match nor the analysis reads: let go
        wanted = MESSAGE_COLUMNS_READ | set(MESSAGE_FACTS)
        messages = messages[[c for c in messages.columns if c in wanted]]
    release_freed()  # each stage's garbage back to the system before the next (nfstrace.memory)
    transactions = match(messages, config.match, events)
    if not config.keep_messages:
        messages = messages[list(MESSAGE_FACTS)]
    release_freed()
    return messages, events, stats, transactions


def _matched(paths: list[str], config: AnalysisConfig, progress: Progress | None) -> Matched:
    """The parse and the match, in this process, in several (``config.workers``)
    or on Dask, of ``config.partitions`` partitions combined."""
    if config.dask is not None:  # (the files at the same paths on every worker)
        paths = [os.path.abspath(p) for p in paths]
        with parallel.dask_client(config.dask, config.workers) as (client, threads):
            wanted, limits = partitioning.plan(
                paths, config.limits, config.parser, threads, config.partitions or threads
            )
            work = functools.partial(match_partition, paths, replace(config, limits=limits))
            parts = parallel.run_on_dask(work, wanted, client)
    else:
        workers = config.workers or partitioning.auto_workers(paths, config.parser)
        wanted, limits = partitioning.plan(
            paths, config.limits, config.parser, workers, config.partitions
        )
        work = functools.partial(match_partition, paths, replace(config, limits=limits))
        parts = parallel.run(work, wanted, workers, progress, partitioning.files_size(paths))
    if len(parts) == 1:
        return parts[0]
    ids = parallel.connection_ids([p[2] for p in parts])
    tables = [p[3] for p in parts]
    parsed = [p[:3] for p in parts]
    parts.clear()  # (each table is held once: the combines let go of the parts as they go)
    transactions = combine_transactions(tables, ids)
    messages, events, stats = parallel.combine(parsed)
    return messages, events, stats, transactions


def load(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    config: AnalysisConfig | None = None,
    progress: Progress | None = None,
) -> Trace:
    """Read one or more capture files (merged in time order) into a Trace;
    ``progress(frames, file bytes read)`` is called while parsing (see
    ``nfstrace.parsers.capture.Progress``)."""
    config = config or AnalysisConfig()
    map_big_blocks()
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    notes: list[str] = []  # what befell the inputs before the parse (ParseStats.inputs)
    plist = capture.expand_directories([os.fspath(p) for p in paths], notes)
    if not plist:
        raise UsageError("no capture file given")
    backends.get(config.parser)  # an unknown or unavailable parser: said before reading
    with capture.regular_files(plist, config.limits.max_spool_bytes, notes) as readable:
        try:
            messages, events, stats, transactions = _matched(readable, config, progress)
        except CaptureError as e:  # named as the user gave it, not its temporary copy
            if e.path is not None:
                e.path = dict(zip(readable, plist, strict=True)).get(e.path, e.path)
            raise
    for info, path in zip(stats.files, plist, strict=False):
        info.path = path  # a pipe read through its temporary copy: named as given
    stats.inputs[:0] = notes
    release_freed()
    diagnosis = diagnose(messages, transactions, events, stats, config.diagnosis)
    release_freed()
    network = diagnosis.visible_round_trips(transactions)  # the server's time less the network
    latency = latency_table(transactions, network_ns=network)
    release_freed()
    latency_by_pair = latency_table(transactions, by=["client", "server"], network_ns=network)
    release_freed()
    compound_latency = compound_op_latency(transactions)
    release_freed()
    summary = overview(messages, transactions)
    release_freed()
    return Trace(
        paths=tuple(plist),
        messages=messages,
        transactions=transactions,
        latency=latency,
        latency_by_pair=latency_by_pair,
        compound_latency=compound_latency,
        events=events,
        stats=stats,
        overview=summary,
        diagnosis=diagnosis,
    )
