"""The parser backends behind ``--parser {auto,native,fast,dpkt,pyshark}``: one
name, one ``parse(paths, limits, progress) -> (messages, events, stats)``
callable each, all with the contract of ``nfstrace.parsers.frame_loop.parse``.

``native`` is the Rust port of ``fast`` (the ``nfstrace._native`` extension,
built at install time when cargo is there); ``auto``, the default, is native
when it is importable, else fast (pure Python, the readable reference).

dpkt and pyshark are optional installs (extras ``nfstrace[dpkt]``,
``nfstrace[pyshark]``), so their modules are imported only when chosen.
``available()`` says which can run here and, for the others, why not.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from nfstrace.errors import UsageError

if TYPE_CHECKING:  # the parsers (pandas, pyarrow) are imported when one is used
    import pandas as pd

    from nfstrace.config import ParseLimits
    from nfstrace.parsers.capture import Progress
    from nfstrace.parsers.stats import ParseStats

    Parser = Callable[
        [list[str], ParseLimits | None, Progress | None],
        tuple[pd.DataFrame, pd.DataFrame, ParseStats],
    ]

DEFAULT = "auto"
TSHARK_INSTALL_HINT = (
    "apt-get install tshark (or dnf install wireshark-cli, brew install wireshark)"
)


class _Lazy:
    """A backend's ``parse``, its module imported on first use (the command
    line's --help and option checks need only the names)."""

    def __init__(self, name: str, module: str) -> None:
        self.name, self.module = name, module
        self.__doc__ = f"``{module}.parse``, imported on first use."

    def __call__(
        self,
        paths: list[str],
        limits: ParseLimits | None = None,
        progress: Progress | None = None,
    ) -> tuple[pd.DataFrame, pd.DataFrame, ParseStats]:
        why = why_not(self.name)
        if why is not None:
            raise UsageError(why)
        return importlib.import_module(self.module).parse(paths, limits, progress)


def native_extension() -> tuple[Any, str]:
    """The Rust extension ``nfstrace._native`` and "", or None and why it is not
    there (not built, or hidden by ``NFSTRACE_NO_NATIVE=1``).  Imported here, not
    in ``nfstrace.parsers.native`` (which brings pandas): the command line
    checks its parser before anything heavy is imported."""
    try:
        if os.environ.get("NFSTRACE_NO_NATIVE"):
            raise ImportError("disabled by NFSTRACE_NO_NATIVE")
        from nfstrace import _native  # type: ignore[attr-defined]

        return _native, ""
    except ImportError as e:  # built without a Rust toolchain, or disabled
        return None, str(e)


def _native_error() -> str | None:
    """None when the native parser is built and not hidden, else why not."""
    extension, error = native_extension()
    return None if extension is not None else error


def auto_choice() -> str:
    """The backend ``auto`` stands for here."""
    return "native" if _native_error() is None else "fast"


def _auto(
    paths: list[str],
    limits: ParseLimits | None = None,
    progress: Progress | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, ParseStats]:
    """The native parser when it is built, else the pure-Python one."""
    return PARSERS[auto_choice()](paths, limits, progress)


PARSERS: dict[str, Parser] = {
    "auto": _auto,
    "native": _Lazy("native", "nfstrace.parsers.native"),
    "fast": _Lazy("fast", "nfstrace.parsers.frame_loop"),
    "dpkt": _Lazy("dpkt", "nfstrace.parsers.dpkt_backend"),
    "pyshark": _Lazy("pyshark", "nfstrace.parsers.pyshark_backend"),
}


def tshark_path() -> str | None:
    """Where tshark is (pyshark's own lookup: its config file, then PATH)."""
    try:
        from pyshark.tshark.tshark import TSharkNotFoundException, get_process_path
    except ImportError:
        return shutil.which("tshark")
    try:
        return get_process_path()
    except TSharkNotFoundException:
        return None


def why_not(name: str) -> str | None:
    """None if the backend ``name`` can run here, else why not (and how to fix it).
    Only that backend is looked at: pyshark (and the asyncio, lxml it brings) is
    imported only when it is the one asked about."""
    if name in ("auto", "fast"):
        return None
    if name == "native":
        error = _native_error()
        if error is None:
            return None
        return (
            "the native parser was not built (a Rust toolchain at install time builds it: "
            f"https://rustup.rs, then pip install again): {error}"
        )
    if name == "dpkt":
        if importlib.util.find_spec("dpkt"):
            return None
        return "the dpkt parser needs dpkt: pip install 'nfstrace[dpkt]'"
    if name == "pyshark":
        if not importlib.util.find_spec("pyshark"):
            return "the pyshark parser needs pyshark: pip install 'nfstrace[pyshark]'"
        if tshark_path() is None:
            return f"the pyshark parser needs tshark, which was not found: {TSHARK_INSTALL_HINT}"
        return None
    raise KeyError(name)


def available() -> dict[str, str | None]:
    """Each backend's name -> None if it can run here, else why not (and how to fix it)."""
    return {name: why_not(name) for name in ("auto", "fast", "native", "dpkt", "pyshark")}


def get(name: str) -> Parser:
    """The parse callable of a backend; UsageError for an unknown or unavailable one."""
    if name not in PARSERS:
        raise UsageError(f"unknown parser {name!r}: choose one of {', '.join(PARSERS)}")
    why = why_not(name)
    if why is not None:
        raise UsageError(why)
    return PARSERS[name]
