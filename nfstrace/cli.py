"""Command line: thin.  Parse options, call ``load()`` and the reports; one
wrapper turns NfstraceError into a one-line message and its exit status.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from nfstrace import __version__
from nfstrace.errors import ExitStatus, NfstraceError, NoRpcTrafficError, OutputError
from nfstrace.reports.export import write_csv, write_json, write_parquet
from nfstrace.reports.terminal import render_summary
from nfstrace.trace import AnalysisConfig, Trace, load

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="NFS / ONC-RPC packet-trace analysis: where did the time go?",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"nfstrace {__version__} (parser: fast, pure Python)")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    """nfstrace reads pcap/pcapng captures of NFS traffic."""


def _errors_handled(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Map errors to one line on stderr and an exit status (httpie's habit)."""

    @wraps(fn)
    def run(*args: Any, debug: bool = False, **kwargs: Any) -> Any:
        err = Console(stderr=True, highlight=False, soft_wrap=True)
        try:
            return fn(*args, **kwargs)
        except NfstraceError as e:
            if debug:
                traceback.print_exc()
            err.print(f"nfstrace: error: {e}", markup=False)
            raise typer.Exit(int(e.exit_status)) from None
        except KeyboardInterrupt:
            err.print("nfstrace: interrupted")
            raise typer.Exit(130) from None
        except Exception as e:  # a bug: still one line unless --debug
            if debug:
                traceback.print_exc()
            err.print(
                f"nfstrace: internal error: {type(e).__name__}: {e} (run with --debug for details)",
                markup=False,
            )
            raise typer.Exit(int(ExitStatus.ERROR)) from None

    return run


def _load_with_progress(paths: list[str], config: AnalysisConfig, quiet: bool) -> Trace:
    err = Console(stderr=True)
    if quiet or not err.is_terminal:
        return load(paths, config)
    with Progress(
        SpinnerColumn(),
        TextColumn("reading {task.fields[frames]:,} frames"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task("read", frames=0)
        return load(paths, config, progress=lambda n: bar.update(task, frames=n))


@app.command()
def analyze(
    captures: Annotated[list[Path], typer.Argument(help="pcap/pcapng files (.gz/.bz2/.xz too)")],
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write the summary as JSON to this file.")
    ] = None,
    csv_out: Annotated[
        Path | None, typer.Option("--csv", help="Write the transactions table as CSV.")
    ] = None,
    parquet_out: Annotated[
        Path | None, typer.Option("--parquet", help="Write the transactions table as Parquet.")
    ] = None,
    client: Annotated[
        list[str] | None, typer.Option("--client", help="Only traffic of this client address.")
    ] = None,
    server: Annotated[
        list[str] | None, typer.Option("--server", help="Only traffic of this server address.")
    ] = None,
    port: Annotated[
        list[int] | None, typer.Option("--port", help="Only traffic to or from this port.")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
) -> None:
    """Analyse NFS/RPC traffic in one or more captures (merged in time order)."""
    config = AnalysisConfig(
        clients=tuple(client or ()), servers=tuple(server or ()), ports=tuple(port or ())
    )
    _analyze(captures, config, quiet, json_out, csv_out, parquet_out, debug=debug)


@_errors_handled
def _analyze(
    captures: list[Path],
    config: AnalysisConfig,
    quiet: bool,
    json_out: Path | None,
    csv_out: Path | None,
    parquet_out: Path | None,
) -> None:
    trace = _load_with_progress([str(p) for p in captures], config, quiet)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    for warning in trace.stats.warnings:
        err.print(f"nfstrace: warning: {warning}", markup=False)
    if trace.messages.empty:
        what = "matching the filters" if config.clients or config.servers or config.ports else ""
        raise NoRpcTrafficError(
            f"no ONC-RPC traffic {what} found in {trace.stats.frames:,} frames".replace("  ", " "),
            ", ".join(trace.paths),
        )
    out = Console(highlight=False)
    if not out.is_terminal:
        out = Console(highlight=False, width=140)  # files and pipes: no squeezed tables
    render_summary(trace, out)
    for path, writer in (
        (json_out, write_json),
        (csv_out, write_csv),
        (parquet_out, write_parquet),
    ):
        if path is not None:
            try:
                writer(trace, path)
            except OSError as e:
                raise OutputError(f"cannot write: {e.strerror}", str(path)) from None


def main() -> None:
    app()


if __name__ == "__main__":
    sys.exit(main())
