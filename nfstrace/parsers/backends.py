"""The parser backends behind ``--parser {native,pyshark}``: one name, one
``parse(paths, limits, progress) -> (messages, events, stats)`` callable each.

``native``, the default, is the Rust core (the ``nfstrace._native`` extension,
built at install time: a Rust toolchain is required).  ``pyshark`` is a
cross-check through Wireshark's dissectors (tshark), an optional install
(extra ``nfstrace[pyshark]``), so its module is imported only when chosen.
``available()`` says which can run here and, for the others, why not.
"""

from __future__ import annotations

import importlib
import importlib.util
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

DEFAULT = "native"
TSHARK_INSTALL_HINT = (
    "apt-get install tshark (or dnf install wireshark-cli, brew install wireshark)"
)
# What an install without the Rust extension is told (one line)
NOT_BUILT = (
    "nfstrace's Rust extension (nfstrace._native) is not built: install a Rust "
    "toolchain (https://rustup.rs) and run pip install . again from the source tree"
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


def native_extension() -> Any:
    """The Rust extension ``nfstrace._native``; ImportError with ``NOT_BUILT``
    when the package was installed without it.  Imported here, not in
    ``nfstrace.parsers.native`` (which brings pandas): the command line checks
    its parser before anything heavy is imported."""
    try:
        from nfstrace import _native  # type: ignore[attr-defined]
    except ImportError as e:
        raise ImportError(f"{NOT_BUILT} ({e})") from None
    return _native


PARSERS: dict[str, Parser] = {
    "native": _Lazy("native", "nfstrace.parsers.native"),
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
    if name == "native":
        try:
            native_extension()
        except ImportError as e:
            return str(e)
        return None
    if name == "pyshark":
        if not importlib.util.find_spec("pyshark"):
            return "the pyshark parser needs pyshark: pip install 'nfstrace[pyshark]'"
        if tshark_path() is None:
            return f"the pyshark parser needs tshark, which was not found: {TSHARK_INSTALL_HINT}"
        return None
    raise KeyError(name)


def available() -> dict[str, str | None]:
    """Each backend's name -> None if it can run here, else why not (and how to fix it)."""
    return {name: why_not(name) for name in PARSERS}


def get(name: str) -> Parser:
    """The parse callable of a backend; UsageError for an unknown or unavailable one."""
    if name not in PARSERS:
        raise UsageError(f"unknown parser {name!r}: choose one of {', '.join(PARSERS)}")
    why = why_not(name)
    if why is not None:
        raise UsageError(why)
    return PARSERS[name]
