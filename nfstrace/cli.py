"""Command line: thin.  Parse options, call ``load()`` and the reports; one
wrapper turns NfstraceError into a one-line message and its exit status.
Its length is the option declarations and help texts of four commands
(analyze, model, compare, version), which typer wants in one place.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import stat
import sys
import time
import traceback
from collections.abc import Callable, Container, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from functools import wraps
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from typer.core import TyperGroup

from nfstrace.config import ParseLimits
from nfstrace.errors import (
    CaptureError,
    ExitStatus,
    NfstraceError,
    NoRpcTrafficError,
    OutputError,
    UsageError,
)
from nfstrace.parsers import backends
from nfstrace.parsers.backends import PARSERS
from nfstrace.reports.console import Console
from nfstrace.reports.files import check_outputs, is_stdout
from nfstrace.text import count, file_names, printable
from nfstrace.units import parse_duration

# The analysis, the reports and the exports are imported where a command needs
# them: --help, --version and a mistyped option answer without loading them.
if TYPE_CHECKING:
    from nfstrace.trace import AnalysisConfig, Trace

# A first argument that names a capture (an existing path, ``-``, or a capture
# file's suffix) rather than a command means ``analyze``: ``nfstrace x.pcap``.
CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".dmp", ".gz", ".bz2", ".xz")


def names_a_capture(arg: str, commands: Container[str]) -> bool:
    """``nfstrace ARG ...``: ARG is a capture to analyse, not a command."""
    if arg in commands:
        return False
    if arg == "-":  # standard input
        return True
    return not arg.startswith("-") and (
        arg.lower().endswith(CAPTURE_SUFFIXES) or os.path.exists(arg)
    )


class _CaptureMeansAnalyze(TyperGroup):
    """The command group, with ``nfstrace CAPTURE [OPTIONS]`` read as
    ``nfstrace analyze CAPTURE [OPTIONS]``."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and names_a_capture(args[0], self.commands):
            args = ["analyze", *args]
        return super().parse_args(ctx, args)


app = typer.Typer(
    cls=_CaptureMeansAnalyze,
    add_completion=True,
    no_args_is_help=True,
    help="NFS / ONC-RPC packet-trace analysis: where did the time go?  "
    "[bold]nfstrace CAPTURE ...[/bold] is [bold]nfstrace analyze CAPTURE ...[/bold]",
    rich_markup_mode="rich",  # (the help's escaped brackets, on every typer version)
)


def _version(value: bool) -> None:
    if value:
        from nfstrace import __version__

        typer.echo(f"nfstrace {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", metavar="", callback=_version, is_eager=True, help="Show the version."
        ),
    ] = False,
) -> None:
    """nfstrace reads pcap/pcapng captures of NFS traffic."""


class _Terminated(BaseException):
    """SIGTERM (or SIGHUP) as an exception: outputs part-way are removed on the way out."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum: int, _frame: FrameType | None) -> NoReturn:
    raise _Terminated(signum)


@contextmanager
def _signals_unwind() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt even when the process started with it ignored
    (a background job of a script), SIGTERM and SIGHUP raise _Terminated: either
    way the stack unwinds and no partial output is left.  Restored afterwards."""
    wanted = {signal.SIGINT: signal.default_int_handler}
    wanted |= {sig: _raise_terminated for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        before = {sig: signal.signal(sig, handler) for sig, handler in wanted.items()}
    except ValueError:  # not the main thread: signals cannot be handled here
        yield
        return
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _errors_handled(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Map errors to one line on stderr and an exit status (httpie's habit)."""

    @wraps(fn)
    def run(*args: Any, debug: bool = False, **kwargs: Any) -> Any:
        err = Console(stderr=True, highlight=False, soft_wrap=True)
        try:
            with _signals_unwind():
                return fn(*args, **kwargs)
        except typer.Exit:  # an exit status chosen on purpose (DAMAGED)
            raise
        except NfstraceError as e:
            if debug:
                traceback.print_exc()
            err.print(f"nfstrace: error: {printable(str(e))}", markup=False)
            raise typer.Exit(int(e.exit_status)) from None
        except KeyboardInterrupt:
            err.print("nfstrace: interrupted")
            raise typer.Exit(128 + signal.SIGINT) from None
        except _Terminated as e:
            err.print(f"nfstrace: terminated by {signal.Signals(e.signum).name}")
            raise typer.Exit(128 + e.signum) from None
        except Exception as e:  # a bug: still one line unless --debug
            if debug:
                traceback.print_exc()
            err.print(
                f"nfstrace: internal error: {type(e).__name__}: {printable(str(e))} "
                "(run with --debug for details)",
                markup=False,
            )
            raise typer.Exit(int(ExitStatus.ERROR)) from None

    return run


def _load_with_progress(paths: list[str], config: AnalysisConfig, quiet: bool) -> Trace:
    """load() with a progress bar on stderr when it is a terminal: the share of
    the files' bytes read (compressed files by their packed bytes) and the time
    left; frames only when the size is unknown (standard input, a pipe)."""
    from nfstrace.trace import load

    err = Console(stderr=True)
    if quiet or not err.is_terminal:
        return load(paths, config)
    from rich.progress import (  # (only for a bar)
        BarColumn,
        Progress,
        SpinnerColumn,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    total = _total_size(paths)
    columns = [SpinnerColumn(), TextColumn("reading {task.fields[frames]:,} frames")]
    if total:
        columns += [BarColumn(), TaskProgressColumn(), TimeRemainingColumn()]
    with Progress(*columns, TimeElapsedColumn(), console=err, transient=True) as bar:
        task = bar.add_task("read", total=total or None, frames=0)

        def update(frames: int, done: int) -> None:
            bar.update(task, frames=frames, completed=max(done, 0))

        return load(paths, config, progress=update)


def _total_size(paths: list[str]) -> int:
    """The files' size on disk; 0 when one is not a regular file (unknown)."""
    try:
        sizes = [os.stat(p) for p in paths]
    except OSError:
        return 0
    if not all(stat.S_ISREG(s.st_mode) for s in sizes):
        return 0
    return sum(s.st_size for s in sizes)


Captures = Annotated[
    list[Path],
    typer.Argument(
        help="pcap/pcapng files (.gz/.bz2/.xz too); - for standard input", metavar="CAPTURE"
    ),
]
ClientOpt = Annotated[
    list[str] | None,
    typer.Option("--client", metavar="ADDRESS", help="Only traffic of this client address."),
]
ServerOpt = Annotated[
    list[str] | None,
    typer.Option("--server", metavar="ADDRESS", help="Only traffic of this server address."),
]
PortOpt = Annotated[
    list[int] | None,
    typer.Option("--port", metavar="PORT", help="Only traffic to or from this port."),
]
ParserOpt = Annotated[
    str,
    typer.Option(
        "--parser",
        metavar="NAME",
        help=f"How captures are dissected: {', '.join(PARSERS)} (native: the Rust core; "
        "pyshark: Wireshark's dissectors as a cross-check, which needs its extra, "
        "pip install 'nfstrace\\[pyshark]', and tshark).",
    ),
]
WorkersOpt = Annotated[
    int | None,
    typer.Option(
        "--workers",
        metavar="N",
        help="Parse in N processes, the traffic split by client/server host pair: the "
        "same result as one process (0: one per core when the input is over 64 MB). "
        "With --dask local: the local cluster's processes (default: one per core); "
        "with --dask SCHEDULER: the partitions, if --partitions is not given "
        "(default: one per worker thread).  [default: 1]",
    ),
]
DaskOpt = Annotated[
    str | None,
    typer.Option(
        "--dask",
        metavar="SCHEDULER",
        help="Parse on a dask.distributed cluster: its scheduler's address "
        "(tcp://host:8786; the captures must be at the same path on every worker) or "
        "'local' for a local cluster of --workers processes. Needs "
        "pip install 'nfstrace\\[dask]'.",
    ),
]
PartitionsOpt = Annotated[
    int | None,
    typer.Option(
        "--partitions",
        metavar="N",
        help="Parse and match the capture in N parts split by client/server host pair, "
        "--workers at a time, for a capture too big for memory: each part reads every "
        "frame but holds only its own traffic. The same result as one part.  "
        "[default: as many as --workers, more when the input would not fit in memory]",
    ),
]
StallOpt = Annotated[
    str | None,
    typer.Option(
        "--stall-threshold",
        metavar="DURATION",
        help="No write progress for longer than this is a stall (e.g. 200ms; "
        "default: from the trace's own pace).",
    ),
]
RttOpt = Annotated[
    str | None,
    typer.Option(
        "--rtt",
        metavar="DURATION",
        help="Model: network round trip, e.g. 0.2ms (default: estimated).",
    ),
]
LinkOpt = Annotated[
    str | None,
    typer.Option("--link-rate", metavar="RATE", help="Model: link rate, e.g. 1G, 10Gbit/s."),
]
DiskOpt = Annotated[
    str | None,
    typer.Option("--disk-rate", metavar="RATE", help="Model: server disk rate, e.g. 200MB/s."),
]
BlockOpt = Annotated[
    str | None,
    typer.Option(
        "--block", metavar="SIZE", help="Model: bytes per WRITE, e.g. 64K (default: seen)."
    ),
]
WhatIfOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--what-if",
        metavar="CHANGE",
        help="Model: predict a change, e.g. rtt=+5ms, link=10G, disk=2x, outstanding=16, "
        "block=1M (comma-separated to combine; repeat for several).",
    ),
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", metavar="", help="No progress display.")]
NoReportOpt = Annotated[bool, typer.Option("--no-report", metavar="", help="Write no HTML report.")]
FullOpt = Annotated[
    bool,
    typer.Option(
        "--full",
        metavar="",
        help="Every finding and table in the terminal: latency per operation and per "
        "client/server pair, stalls, the model, the workload (default: one screen).",
    ),
]
DebugOpt = Annotated[bool, typer.Option("--debug", metavar="", help="Show tracebacks.")]
MergeOpt = Annotated[
    bool,
    typer.Option(
        "--merge",
        metavar="",
        help="Analyse several capture files as one even when they are not pieces of one "
        "capture (they share no client/server pair, do not follow one another in time, or "
        "overlap: the same traffic captured twice).  Without it such files are refused.",
    ),
]
MountstatsOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--mountstats",
        metavar="FILE",
        help="Copies of the client's /proc/self/mountstats: an earlier and a later one "
        "(--mountstats before.txt after.txt), or one (the counts since the mount). The "
        "kernel's per-operation figures beside the capture's, and the time calls queued "
        "in the client.",
    ),
]


@dataclass(frozen=True)
class _Choices:
    """The options shared by the commands, as typed on the command line (a
    command's parameters of these names: ``_choices``; one it does not take
    stays at its default)."""

    client: list[str] | None = None
    server: list[str] | None = None
    port: list[int] | None = None
    parser: str = backends.DEFAULT
    stall_threshold: str | None = None
    rtt: str | None = None
    link_rate: str | None = None
    disk_rate: str | None = None
    block: str | None = None
    what_if: list[str] | None = None
    workers: int | None = None  # not given: 1, or the cluster's size with --dask
    dask: str | None = None
    partitions: int | None = None  # not given: AnalysisConfig's default
    merge: bool = False  # several files of different traffic analysed as one
    mountstats: list[Path] | None = None

    def _workers(self) -> int:
        return self.workers if self.workers is not None else (0 if self.dask else 1)

    def parse_ahead(self, files: list[str]) -> ParseLimits:
        """Begin the parse of ``files`` while the analysis imports, where the
        load will parse them whole here (``nfstrace.parsers.ahead``); the
        limits it read with, for ``config`` (their default message bound
        depends on the memory available at the time)."""
        from nfstrace.parsers import ahead

        limits = ParseLimits()
        if self.dask is None and self._workers() >= 0:
            ahead.start(files, limits, self.parser, self._workers(), self.partitions or 0)
        return limits

    def config(self, limits: ParseLimits | None = None) -> AnalysisConfig:
        """Options -> AnalysisConfig (with ``limits``, else the default ones); a
        malformed value is a usage error, not a traceback."""
        from nfstrace.analysis.diagnosis import DiagnosisOptions
        from nfstrace.analysis.model_inputs import overrides_from_options, parse_what_if
        from nfstrace.trace import AnalysisConfig

        stall = self.stall_threshold
        try:
            stall_ns = None if stall is None else round(parse_duration(stall) * 1e9)
        except ValueError as e:
            raise UsageError(f"--stall-threshold: {e}") from None
        mountstats = None
        if self.mountstats:
            from nfstrace.parsers.mountstats import read_mountstats

            mountstats = read_mountstats([str(p) for p in self.mountstats])  # UsageError
        try:
            options = DiagnosisOptions(
                stall_threshold_ns=stall_ns,
                model=overrides_from_options(self.rtt, self.link_rate, self.disk_rate, self.block),
                what_if=tuple(parse_what_if(spec) for spec in self.what_if or ()),
                mountstats=mountstats,
            )
        except ValueError as e:
            raise UsageError(str(e)) from None
        if self.parser not in PARSERS:
            raise UsageError(f"unknown parser {self.parser!r}: choose one of {', '.join(PARSERS)}")
        workers = self._workers()
        if workers < 0:
            raise UsageError(f"--workers {self.workers}: give 1 or more (0: one per core)")
        if self.partitions is not None and self.partitions < 1:
            raise UsageError(f"--partitions {self.partitions}: give 1 or more")
        for port in self.port or ():
            if not 0 <= port <= 65535:
                raise UsageError(f"--port {port}: a port is 0 to 65535")
        return AnalysisConfig(
            limits=limits or ParseLimits(),
            clients=_addresses("--client", self.client),
            servers=_addresses("--server", self.server),
            ports=tuple(self.port or ()),
            parser=self.parser,
            diagnosis=options,
            workers=workers,
            dask=self.dask,
            partitions=self.partitions or 0,
            keep_messages=False,  # (the outputs read only the analysis' columns of them)
        )


def _choices(params: dict[str, Any]) -> _Choices:
    """The shared options out of a command's parameters (its ``locals()``), by
    the names of ``_Choices``' fields."""
    return _Choices(**{f.name: params[f.name] for f in fields(_Choices) if f.name in params})


def _addresses(option: str, given: list[str] | None) -> tuple[str, ...]:
    """IPv4/IPv6 addresses as the tables write them (2001:DB8::1 -> 2001:db8::1);
    anything else is a usage error (a host name is not looked up)."""
    out = []
    for text in given or ():
        try:
            out.append(str(ipaddress.ip_address(text.strip())))
        except ValueError:
            raise UsageError(
                f"{option} {printable(text)!r}: not an IP address (give 10.0.0.5 or 2001:db8::5)"
            ) from None
    return tuple(out)


@app.command()
def analyze(
    captures: Captures,
    report: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            metavar="FILE",
            help="Write the HTML report here (default: <capture>.report.html).",
        ),
    ] = None,
    no_report: NoReportOpt = False,
    json_out: Annotated[
        Path | None,
        typer.Option("--json", metavar="FILE", help="Write the summary as JSON to this file."),
    ] = None,
    csv_out: Annotated[
        Path | None,
        typer.Option("--csv", metavar="FILE", help="Write the transactions table as CSV."),
    ] = None,
    parquet_out: Annotated[
        Path | None,
        typer.Option("--parquet", metavar="FILE", help="Write the transactions table as Parquet."),
    ] = None,
    markdown_out: Annotated[
        Path | None,
        typer.Option(
            "--markdown",
            metavar="FILE",
            help="Write the diagnosis, the time budget and the key numbers as Markdown "
            "(for a ticket's body).",
        ),
    ] = None,
    png_out: Annotated[
        Path | None,
        typer.Option(
            "--png",
            metavar="FILE",
            help="Draw the cumulative-transfer plot as a PNG (needs Chromium or Chrome).",
        ),
    ] = None,
    client: ClientOpt = None,
    server: ServerOpt = None,
    port: PortOpt = None,
    parser: ParserOpt = backends.DEFAULT,
    workers: WorkersOpt = None,
    dask: DaskOpt = None,
    partitions: PartitionsOpt = None,
    stall_threshold: StallOpt = None,
    rtt: RttOpt = None,
    link_rate: LinkOpt = None,
    disk_rate: DiskOpt = None,
    block: BlockOpt = None,
    what_if: WhatIfOpt = None,
    mountstats: MountstatsOpt = None,
    full: FullOpt = False,
    merge: MergeOpt = False,
    quiet: QuietOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Analyse NFS/RPC traffic in one or more captures (merged in time order): a diagnosis
    in the terminal and an HTML report.

    Examples:

      nfstrace analyze capture.pcap                  (report: capture.pcap.report.html)

      nfstrace analyze rotated-*.pcap.gz --full      (several files; every table)

      nfstrace analyze captures/ --workers 2         (a directory; two processes)

      tcpdump -i eth0 -w - port 2049 | nfstrace analyze -

      nfstrace analyze x.pcap --server 10.0.0.5 --markdown ticket.md --json x.json

      nfstrace analyze x.pcap --mountstats before.txt after.txt

    Several files are pieces of one capture (rotated, cut): files of different
    traffic are refused unless --merge is given.
    """
    captures, mountstats = _mountstats_arguments(captures, mountstats)
    choices = _choices(locals())
    if report is None and not no_report:
        report = _default_report(captures[0]) if captures else None
        explicit = False
    else:
        explicit = True
    outputs = _Outputs(
        None if no_report else report,
        explicit,
        json_out,
        csv_out,
        parquet_out,
        markdown_out,
        png_out,
    )
    _analyze(captures, choices, quiet, outputs, full, debug=debug)


def _mountstats_arguments(
    captures: list[Path], mountstats: list[Path] | None
) -> tuple[list[Path], list[Path] | None]:
    """With --mountstats, a CAPTURE argument that is a mountstats copy (a text
    file starting "device ") is its second file: ``--mountstats before after``."""
    if not mountstats:
        return captures, mountstats
    texts = [p.is_file() and _starts_with(p, b"device ") for p in captures]  # (no FIFO read)
    moved = [p for p, t in zip(captures, texts, strict=True) if t]
    return [p for p, t in zip(captures, texts, strict=True) if not t], [*mountstats, *moved]


def _starts_with(path: Path, prefix: bytes) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(len(prefix)) == prefix
    except OSError:
        return False


def _default_report(capture: Path) -> Path:
    """Beside the capture; for standard input (``-``) or a pipe, in the current
    directory (stdin.report.html, <name>.report.html)."""
    from nfstrace.parsers.capture import STDIN  # (the reader: only when a command runs)

    if str(capture) == STDIN:
        return Path("stdin.report.html")
    if capture.is_dir():  # rotated captures: beside the directory
        capture = capture.resolve()
        return capture.with_name(capture.name + ".report.html")
    if capture.exists() and not capture.is_file():  # a FIFO, /dev/stdin, /dev/fd/N
        return Path(capture.name + ".report.html")
    return capture.with_name(capture.name + ".report.html")


@app.command()
def model(
    captures: Captures,
    json_out: Annotated[
        Path | None,
        typer.Option("--json", metavar="FILE", help="Write the model as JSON to this file."),
    ] = None,
    client: ClientOpt = None,
    server: ServerOpt = None,
    port: PortOpt = None,
    parser: ParserOpt = backends.DEFAULT,
    workers: WorkersOpt = None,
    dask: DaskOpt = None,
    partitions: PartitionsOpt = None,
    stall_threshold: StallOpt = None,
    rtt: RttOpt = None,
    link_rate: LinkOpt = None,
    disk_rate: DiskOpt = None,
    block: BlockOpt = None,
    what_if: WhatIfOpt = None,
    merge: MergeOpt = False,
    quiet: QuietOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Fit the transactional latency model (T_cycle = 2·T_prop + T_ser + T_B + T_op) to the
    WRITEs of a capture, compare it with the measured throughput, and answer what-ifs.

    Examples:

      nfstrace model x.pcap --what-if rtt=+5ms --what-if link=10G,outstanding=16

      nfstrace model x.pcap --rtt 0.2ms --link-rate 1G --disk-rate 200MB/s --block 64K
    """
    choices = _choices(locals())
    _model(captures, choices, quiet, json_out, debug=debug)


@app.command()
def compare(
    before: Annotated[
        Path, typer.Argument(help="The capture before the change.", metavar="BEFORE")
    ],
    after: Annotated[Path, typer.Argument(help="The capture after it.", metavar="AFTER")],
    report: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            metavar="FILE",
            help="Write the HTML comparison here (default: <after>.compare.html).",
        ),
    ] = None,
    no_report: NoReportOpt = False,
    json_out: Annotated[
        Path | None,
        typer.Option("--json", metavar="FILE", help="Write the comparison as JSON to this file."),
    ] = None,
    client: ClientOpt = None,
    server: ServerOpt = None,
    port: PortOpt = None,
    parser: ParserOpt = backends.DEFAULT,
    workers: WorkersOpt = None,
    dask: DaskOpt = None,
    partitions: PartitionsOpt = None,
    stall_threshold: StallOpt = None,
    merge: MergeOpt = False,
    quiet: QuietOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Compare two captures, before and after a change: the time budgets side by side
    per client/server pair, throughput and per-operation latency, what got better or
    worse and by how much.

    Examples:

      nfstrace compare before.pcap after.pcap

      nfstrace compare slow.pcap fixed.pcap --server 10.0.0.5 --json change.json
    """
    choices = _choices(locals())
    if report is None and not no_report:
        report, explicit = after.with_name(after.name + ".compare.html"), False
    else:
        explicit = True
    _compare(before, after, choices, quiet, None if no_report else report, explicit, json_out,
             debug=debug)  # fmt: skip


@_errors_handled
def _compare(
    before: Path,
    after: Path,
    choices: _Choices,
    quiet: bool,
    report: Path | None,
    explicit: bool,
    json_out: Path | None,
) -> None:
    from nfstrace.comparison import compare as compare_traces
    from nfstrace.reports.export import write_comparison_json
    from nfstrace.reports.terminal import render_comparison

    report_name = "-o" if explicit else "the report"
    outputs = {report_name: report, "--json": json_out}
    check_outputs(_files_read([before, after]), outputs, _strict(outputs, explicit))
    config = choices.config()
    for side in (before, after):
        _one_capture(_files_read([side]), choices.merge)
    traces = [_loaded([p], config, quiet) for p in (before, after)]
    cmp = compare_traces(*traces)
    out = _stdout(outputs)
    render_comparison(cmp, out)
    if json_out is not None:
        _write(json_out, lambda _t, path: write_comparison_json(cmp, path), traces[1])
    if report is not None:
        from nfstrace.reports.html import write_comparison  # only for the report

        _write_report(lambda path: write_comparison(path, cmp), report, explicit, out)
    for t in traces:
        _damaged_exit(t)


@dataclass(frozen=True)
class _Outputs:
    report: Path | None
    report_explicit: bool  # -o given: failing to write it is an error, not a warning
    json: Path | None
    csv: Path | None
    parquet: Path | None
    markdown: Path | None = None
    png: Path | None = None


def _loaded(captures: list[Path], config: AnalysisConfig, quiet: bool) -> Trace:
    """Load, print the parser's warnings, refuse a capture without RPC traffic."""
    trace = _load_with_progress([str(p) for p in captures], config, quiet)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    for warning in trace.stats.warnings:
        err.print(f"nfstrace: warning: {printable(warning)}", markup=False)
    if trace.messages.empty:
        from nfstrace.analysis.quality import too_short_for_rpc  # (not for --help)

        what = "matching the filters" if config.clients or config.servers or config.ports else ""
        short = too_short_for_rpc(trace.stats)
        raise NoRpcTrafficError(
            short
            or f"no ONC-RPC traffic {what} found in {count(trace.stats.frames, 'frame')}".replace(
                "  ", " "
            ),
            file_names(trace.paths),
        )
    return trace


WIDTH = 100  # columns of the text written to a file or a pipe


def _stdout(outputs: dict[str, Path | None]) -> Console:
    """Where the terminal text goes: standard output, or standard error when an
    output file is standard output (``--json -``)."""
    stderr = any(p is not None and is_stdout(p) for p in outputs.values())
    out = Console(highlight=False, stderr=stderr)
    if not out.is_terminal:
        out = Console(highlight=False, width=WIDTH, stderr=stderr)  # files, pipes: a steady width
    return out


def _files_read(captures: list[Path]) -> list[str]:
    """Every file the captures name (a directory's capture files; ``-``), for
    ``check_outputs`` before anything is read."""
    from nfstrace.parsers.capture import expand_directories  # (the reader: when a command runs)

    return expand_directories([str(p) for p in captures])


def _one_capture(files: list[str], merge: bool) -> None:
    """Several files must be pieces of one capture (``parsers.spans``), unless
    ``--merge``: a UsageError naming the captures found, before the analysis.
    Standard input and pipes are not looked at (they can be read only once)."""
    if merge or len(files) < 2 or any(not os.path.isfile(f) for f in files):
        return
    from nfstrace.parsers.spans import captures, described, spans

    try:
        found = captures(spans(files))
    except NfstraceError:
        return  # a file that is no capture: the analysis says which, as for one file
    if len(found) < 2:
        return
    shown = "; ".join(described(g) for g in found[:3]) + ("; ..." if len(found) > 3 else "")
    raise UsageError(
        f"{len(found)} captures of different traffic in {count(len(files), 'file')} ({shown}): "
        "they share no client/server pair, do not follow one another in time, or overlap "
        "(the same traffic captured twice); analyse them separately, or give --merge to "
        "analyse them as one"
    )


def _strict(outputs: dict[str, Path | None], report_explicit: bool) -> list[str]:
    """The outputs whose place must be writable before reading: all but a
    default report (beside the capture, perhaps read-only: a warning at the end)."""
    return [name for name in outputs if report_explicit or name != "the report"]


def _write(path: Path, writer: Callable[[Trace, Path], None], trace: Trace) -> None:
    try:
        writer(trace, path)
    except OSError as e:
        raise OutputError(f"cannot write: {e.strerror}", str(path)) from None


def _damaged_exit(trace: Trace) -> None:
    """Everything written: exit DAMAGED when the capture was damaged (its
    warnings are on stderr), else OK."""
    if trace.stats.warnings:
        raise typer.Exit(int(ExitStatus.DAMAGED))


@_errors_handled
def _model(captures: list[Path], choices: _Choices, quiet: bool, json_out: Path | None) -> None:
    outputs = {"--json": json_out}
    files = _files_read(captures)
    check_outputs(files, outputs)
    _one_capture(files, choices.merge)
    limits = choices.parse_ahead(files)
    from nfstrace.reports.export import write_model_json
    from nfstrace.reports.model_view import render_model

    config = choices.config(limits)
    trace = _loaded(captures, config, quiet)
    render_model(trace.diagnosis.model, _stdout(outputs))
    if json_out is not None:
        _write(json_out, write_model_json, trace)
    _damaged_exit(trace)


@_errors_handled
def _analyze(
    captures: list[Path], choices: _Choices, quiet: bool, outputs: _Outputs, full: bool
) -> None:
    named = {
        "-o" if outputs.report_explicit else "the report": outputs.report,
        "--json": outputs.json,
        "--csv": outputs.csv,
        "--parquet": outputs.parquet,
        "--markdown": outputs.markdown,
        "--png": outputs.png,
    }
    files = _files_read(captures)
    read = files + [str(p) for p in choices.mountstats or ()]
    check_outputs(read, named, _strict(named, outputs.report_explicit))
    if outputs.png is not None:
        from nfstrace.reports.png import require_browser  # (not the report's modules yet)

        require_browser(outputs.png)  # before reading, not after the analysis
    _one_capture(files, choices.merge)
    limits = choices.parse_ahead(files)  # before pandas and the analysis are imported
    from nfstrace.reports.export import write_csv, write_json, write_parquet
    from nfstrace.reports.markdown import write_markdown
    from nfstrace.reports.terminal import render_summary

    config = choices.config(limits)
    trace = _loaded(captures, config, quiet)
    out = _stdout(named)
    render_summary(trace, out, full)
    for path, writer in (
        (outputs.json, write_json),
        (outputs.csv, write_csv),
        (outputs.parquet, write_parquet),
        (outputs.markdown, write_markdown),
    ):
        if path is not None:
            _write(path, writer, trace)
    if outputs.png is not None:
        from nfstrace.reports.png import write_png  # only for a figure

        _write(outputs.png, write_png, trace)
    if outputs.report is not None:
        # imported here: the report's modules are needed only for the report
        from nfstrace.reports.html import write_report

        _write_report(
            lambda path: write_report(path, trace, trace.diagnosis),
            outputs.report,
            outputs.report_explicit,
            out,
        )
    _damaged_exit(trace)


def _write_report(write: Callable[[Path], None], path: Path, explicit: bool, out: Console) -> None:
    """Write an HTML report; failing at the default place (beside the capture,
    perhaps read-only) is a warning, at a place given with -o an error."""
    try:
        write(path)
    except OSError as e:
        if explicit:
            raise OutputError(f"cannot write: {e.strerror}", str(path)) from None
        # The default place (beside the capture) may be read-only: still a good analysis.
        err = Console(stderr=True, highlight=False, soft_wrap=True)
        err.print(
            f"nfstrace: warning: no HTML report: cannot write {printable(str(path))}: {e.strerror} "
            "(choose a place with -o)",
            markup=False,
        )
        return
    out.print(f"\nHTML report: {printable(str(path))}", soft_wrap=True, markup=False)


@app.command()
def watch(
    capture: Annotated[
        str | None,
        typer.Argument(
            help="A pcap/pcapng stream: - for standard input (tcpdump -U -w - ... |), or a "
            "file or FIFO.  Not with -i.",
            metavar="[CAPTURE]",
        ),
    ] = None,
    interface: Annotated[
        str | None,
        typer.Option(
            "--interface",
            "-i",
            metavar="IFACE",
            help="Capture this interface: runs tcpdump -U -w - -i IFACE as a child and reads "
            "its stream (tcpdump has the privileges, libpcap stays out of this process, no "
            "binding to build).",
        ),
    ] = None,
    bpf: Annotated[
        str,
        typer.Option(
            "--filter",
            metavar="BPF",
            help="With -i: tcpdump's filter ('' for every packet).",
        ),
    ] = "port 2049",
    snaplen: Annotated[
        int | None,
        typer.Option(
            "--snaplen", "-s", metavar="BYTES", help="With -i: bytes kept of each packet."
        ),
    ] = None,
    interval: Annotated[
        str,
        typer.Option(
            "--interval", metavar="DURATION", help="One line per pair this often (capture time)."
        ),
    ] = "10s",
    keep: Annotated[
        str,
        typer.Option(
            "--keep",
            metavar="DURATION",
            help="The ring of raw packets kept for "
            "the evidence: this much capture time (5m, 300s).",
        ),
    ] = "5m",
    keep_bytes: Annotated[
        str,
        typer.Option(
            "--keep-bytes",
            metavar="SIZE",
            help="... in at most this much memory (the packets' bytes and about 200 bytes "
            "each around them).",
        ),
    ] = "256M",
    stall: Annotated[
        str,
        typer.Option(
            "--stall-threshold",
            metavar="DURATION",
            help="Alert on a call without a reply for longer than this.",
        ),
    ] = "5s",
    commit: Annotated[
        str,
        typer.Option(
            "--commit-threshold", metavar="DURATION", help="Alert on a COMMIT slower than this."
        ),
    ] = "1s",
    alert_after: Annotated[
        int,
        typer.Option(
            "--alert-after",
            metavar="N",
            help="Alert on a verdict other than none in N windows in a row.",
        ),
    ] = 3,
    resend_alert: Annotated[
        float | None,
        typer.Option(
            "--resend-alert",
            metavar="PCT",
            help="Alert on a pair whose re-sends in an interval are over PCT % of what it "
            "sent: RPC calls re-sent, or TCP segments re-sent.",
        ),
    ] = None,
    evidence_dir: Annotated[
        Path,
        typer.Option(
            "--evidence-dir",
            metavar="DIR",
            help="Where an alert's pcap (the ring) and its HTML report are written.",
        ),
    ] = Path("nfstrace-watch"),
    on_alert: Annotated[
        str | None,
        typer.Option(
            "--on-alert",
            metavar="CMD",
            help="Run CMD with the alert's pcap as its last argument (no shell).",
        ),
    ] = None,
    json_lines: Annotated[
        Path | None,
        typer.Option(
            "--json-lines",
            metavar="FILE",
            help="One JSON object per interval, per alert and at the end.",
        ),
    ] = None,
    clock_grace: Annotated[
        str,
        typer.Option(
            "--clock-grace",
            metavar="DURATION",
            help="On a live input, how long the clock waits for packets still on their way "
            "(through tcpdump and the pipe) before it closes their interval; packets later "
            "than that are counted in the summary, not in their interval's line.",
        ),
    ] = "1s",
    prometheus: Annotated[
        Path | None,
        typer.Option(
            "--prometheus",
            metavar="FILE",
            help="Per pair and op counters and latency histograms in Prometheus' text format, "
            "rewritten atomically every interval (node_exporter's textfile collector: "
            "name it *.prom in its directory).",
        ),
    ] = None,
    prometheus_port: Annotated[
        str | None,
        typer.Option(
            "--prometheus-port",
            metavar="[HOST:]PORT",
            help="Serve the same text over HTTP for Prometheus to scrape (GET /metrics), on "
            "every address (or HOST's); 0: a free port, said on standard error.",
        ),
    ] = None,
    loss_warn: Annotated[
        float,
        typer.Option(
            "--loss-warn",
            metavar="PCT",
            help="Warn when an interval's capture loss (TCP holes: bytes the capture never "
            "saw, of the segments seen) is over PCT %: its figures are short.",
        ),
    ] = 1.0,
    plain: Annotated[
        bool,
        typer.Option(
            "--plain",
            help="Plain lines on a terminal too (without it, a terminal shows a table "
            "redrawn every interval; a pipe or file always gets the lines).",
        ),
    ] = False,
    client: ClientOpt = None,
    server: ServerOpt = None,
    port: PortOpt = None,
    parser: ParserOpt = backends.DEFAULT,
    debug: DebugOpt = False,
) -> None:
    """Watch a capture stream: every --interval a line per client → server pair (write
    and read rates, ops/s, WRITE latency, re-sends, the verdict's cause), alerts on
    stalls, slow COMMITs and lasting verdicts with the packets around them kept.

    Examples:

      nfstrace watch -i eth0

      tcpdump -i eth0 -U -w - port 2049 | nfstrace watch -

      nfstrace watch - --interval 1s --json-lines watch.jsonl < capture.pcap

    On a live input (-i, a pipe) time moves without packets: an interval ends on
    the clock (--clock-grace late) when nothing arrives, so a hung server's stall is said.
    End of input, Ctrl-C or SIGTERM: tcpdump stopped and waited for, a summary.
    """
    choices = _choices(locals())
    options = {
        "interval": interval, "keep": keep, "keep_bytes": keep_bytes, "stall": stall,
        "commit": commit, "alert_after": alert_after, "evidence_dir": evidence_dir,
        "on_alert": on_alert, "resend_pct": resend_alert, "interface": interface,
        "filter": bpf, "snaplen": snaplen, "prometheus": prometheus,
        "clock_grace": clock_grace, "prometheus_port": prometheus_port, "loss_warn": loss_warn,
        "plain": plain,
    }  # fmt: skip
    _watch(capture, choices, options, json_lines, debug=debug)


def _duration_ns(option: str, text: str) -> int:
    """A duration option in ns: 1ms .. 0.5s, and minutes/hours (5m, 1h)."""
    t = text.strip().lower()
    try:
        for unit, scale in (("min", 60), ("m", 60), ("h", 3600)):
            if t.endswith(unit) and not t.endswith("ms"):
                seconds = float(t[: -len(unit)]) * scale
                break
        else:
            seconds = parse_duration(t)
    except ValueError as e:
        raise UsageError(f"{option}: {e}") from None
    if seconds <= 0:
        raise UsageError(f"{option} {text}: give a duration above 0")
    return round(seconds * 1e9)


def _listen_address(text: str | None) -> tuple[str, int] | None:
    """--prometheus-port [HOST:]PORT as (host, port); every address without a HOST."""
    if text is None:
        return None
    host, _, port = text.rpartition(":")
    try:
        number = int(port)
    except ValueError:
        number = -1
    if not 0 <= number <= 65535:
        raise UsageError(f"--prometheus-port {text}: give [HOST:]PORT, PORT from 0 to 65535")
    return host.strip("[]") or "0.0.0.0", number


@_errors_handled
def _watch(
    capture: str | None,
    choices: _Choices,
    options: dict[str, Any],
    json_lines: Path | None,
) -> None:
    from nfstrace.live import Source, Tcpdump, is_live, pump, tcpdump_command
    from nfstrace.parsers.capture import STDIN, CaptureInfo
    from nfstrace.units import parse_size
    from nfstrace.watch import Watcher, WatchOptions

    interface = options["interface"]
    if (capture is None) == (interface is None):
        raise UsageError("give a CAPTURE stream (- for standard input) or -i IFACE, one of them")
    if options["snaplen"] is not None and options["snaplen"] < 1:
        raise UsageError(f"--snaplen {options['snaplen']}: give 1 or more")
    try:
        keep_bytes = parse_size(options["keep_bytes"])
    except ValueError as e:
        raise UsageError(f"--keep-bytes: {e}") from None
    if options["alert_after"] < 1:
        raise UsageError(f"--alert-after {options['alert_after']}: give 1 or more")
    if options["resend_pct"] is not None and not 0 <= options["resend_pct"] < 100:
        raise UsageError(f"--resend-alert {options['resend_pct']:g}: give a % from 0 to 100")
    grace_ns = _duration_ns("--clock-grace", options["clock_grace"])
    if not 0 <= options["loss_warn"] <= 100:
        raise UsageError(f"--loss-warn {options['loss_warn']:g}: give a % from 0 to 100")
    listen = _listen_address(options["prometheus_port"])
    wo = WatchOptions(
        interval_ns=_duration_ns("--interval", options["interval"]),
        keep_ns=_duration_ns("--keep", options["keep"]),
        keep_bytes=keep_bytes,
        stall_ns=_duration_ns("--stall-threshold", options["stall"]),
        commit_ns=_duration_ns("--commit-threshold", options["commit"]),
        alert_after=options["alert_after"],
        resend_pct=options["resend_pct"],
        evidence_dir=options["evidence_dir"],
        on_alert=options["on_alert"],
        loss_warn_pct=options["loss_warn"],
    )
    config = choices.config()
    read = [capture] if capture is not None and capture != STDIN else []
    check_outputs(read, {"--json-lines": json_lines, "--prometheus": options["prometheus"]})
    name = capture if capture is not None else f"-i {interface}"
    json_out = None
    try:
        if json_lines is not None:
            json_out = open(json_lines, "w", encoding="utf-8")  # noqa: SIM115
    except OSError as e:
        raise OutputError(f"cannot write: {e.strerror}", str(json_lines)) from None
    server = None
    if listen is not None:
        from nfstrace.prometheus import MetricsServer

        try:
            server = MetricsServer(*listen)
        except OSError as e:
            raise OutputError(
                f"cannot listen: {e.strerror or e}",
                f"--prometheus-port {options['prometheus_port']}",
            ) from None
        host, bound = server.address
        Console(stderr=True, highlight=False, soft_wrap=True).print(
            f"nfstrace: Prometheus metrics on http://{host}:{bound}/metrics", markup=False
        )
    child = None
    if interface is not None:
        err = Console(stderr=True, highlight=False, soft_wrap=True)
        child = Tcpdump(
            tcpdump_command(interface, options["filter"], options["snaplen"]),
            lambda line: err.print(f"nfstrace: {printable(line)}", markup=False),
        )
        stream = child.stdout
    else:
        try:
            stream = (
                open(sys.stdin.fileno(), "rb", buffering=0, closefd=False)  # noqa: SIM115
                if capture == STDIN
                else open(str(capture), "rb", buffering=0)  # noqa: SIM115 - closed below
            )
        except OSError as e:
            raise CaptureError(f"cannot open: {e.strerror}", capture) from None
    info = CaptureInfo(path=name)
    out = sys.stdout

    def emit(line: str) -> None:
        out.write(line + "\n")
        out.flush()

    # A terminal: a table redrawn every interval (the lines' fields), warnings
    # printed above it; the summary in lines once it stops.
    table = None
    if not options["plain"] and out.isatty() and os.environ.get("TERM") != "dumb":
        from rich.live import Live

        from nfstrace.reports.watch_view import render

        table = Live(console=Console(highlight=False), auto_refresh=False)
        screen_options: dict[str, Any] = {
            "warn": lambda line: table.console.print(line, markup=False, soft_wrap=True),
            "show": lambda screen: table.update(render(screen), refresh=True),
        }
    else:
        screen_options = {}

    def reporter(trace: Trace, path: Path) -> None:
        from nfstrace.reports.html import write_report  # only on an alert

        write_report(path, trace, trace.diagnosis)

    # Ctrl-C, SIGTERM, SIGHUP: the end of the run, not an error.  tcpdump is asked
    # to stop (it flushes its last packets, says its counts) and read to its end;
    # a stream is left at once.
    stop: list[float] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        if not stop:
            stop.append(time.monotonic())
        if child is not None and child.proc.poll() is None:
            child.proc.send_signal(signal.SIGINT)

    def stopping() -> bool:
        # (tcpdump's stream read to its end, unless tcpdump does not stop within 5 s)
        if not stop or child is None:
            return bool(stop)
        return child.proc.poll() is None and time.monotonic() - stop[0] > 5

    def kernel_dropped() -> int | None:
        # (asked every interval: SIGUSR1, answered with tcpdump's counts so far)
        return None if child is None else child.ask_counts().get("dropped by kernel")

    watcher = Watcher(
        wo,
        config,
        emit if table is None else lambda line: None,
        json_out,
        reporter,
        lambda: info.snaplen,
        options["prometheus"],
        kernel_dropped=kernel_dropped,
        publish=server.publish if server is not None else None,
        **screen_options,
    )
    live = child is not None or (stream.fileno() >= 0 and is_live(stream.fileno()))
    before = {sig: signal.signal(sig, on_signal) for sig in _STOP_SIGNALS}
    try:
        if table is not None:
            table.start()
        try:
            source = Source(
                stream,
                info,
                live,
                wall_clock=child is not None,
                grace_ns=grace_ns,
            )
            pump(source, watcher.feed, watcher.tick, stopping)
        except CaptureError as e:
            if child is None or watcher.totals.frames:
                raise
            child.stop()  # (no stream at all: tcpdump's own reason, not the reader's)
            raise CaptureError(f"{name}: {child.error()}") from e
        status = child.stop() if child is not None else 0
        watcher.finish()
        if table is not None:
            table.stop()
        for line in watcher.summary():
            emit(line)
        if child is not None:
            counts = child.counts()
            if counts:
                said = ", ".join(f"{v:,} {k}" for k, v in counts.items())
                emit(f"tcpdump: {said}")
        watcher.json_summary()
        if child is not None and status != 0 and not stop:
            raise CaptureError(f"{name}: {child.error()}")
    except BrokenPipeError:  # the reader of the lines went away (| head): stop
        return
    finally:
        if table is not None:
            table.stop()
        for sig, handler in before.items():
            signal.signal(sig, handler)
        if child is not None:
            child.stop()
        watcher.close()
        if server is not None:
            server.close()
        stream.close()
        if json_out is not None:
            json_out.close()
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    for warning in info.warnings:
        err.print(f"nfstrace: warning: {printable(warning)}", markup=False)


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def main() -> NoReturn:
    """The console entry point.

    Ends with os._exit once the output is flushed: Python's teardown would free a
    large analysis object by object (a quarter of a second after a million-packet
    capture) when the process is ending anyway.  Not under a profiler or tracer
    (cProfile, coverage): they write their results at exit.
    """
    try:
        app()
        code: object = 0
    except SystemExit as exit_:
        code = exit_.code
    if isinstance(code, str):  # SystemExit("message"): Python prints it and exits 1
        print(code, file=sys.stderr)
        code = 1
    status = code if isinstance(code, int) else 0 if code is None else 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # the reader went away (`| head`): the output is incomplete
        status = status or 1
    if sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(status)
    os._exit(status)


if __name__ == "__main__":
    sys.exit(main())
