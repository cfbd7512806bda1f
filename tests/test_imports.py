"""Only what a command needs is imported (checked in a fresh process each): the
package without pandas, the command line without the analysis and the
reports, an analysis without the HTML report (nor Parquet's writer), the
report without plotly.py."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import nfstrace

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample-pcaps" / "v3-tcp-nfscp-w1m-d0-l0.pcap"


def _imported_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys\nprint(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return set(done.stdout.split())


def test_import_nfstrace_is_light() -> None:
    mods = _imported_after("import nfstrace")
    assert not {"pandas", "numpy", "nfstrace.trace"} & mods
    mods = _imported_after("import nfstrace\nprint(nfstrace.__version__, nfstrace.load)")
    assert "nfstrace.trace" in mods  # on first use


def test_command_line_imports_no_analysis_nor_reports() -> None:
    mods = _imported_after("import nfstrace.cli")
    heavy = {m for m in mods if m.startswith(("nfstrace.analysis", "nfstrace.reports.", "plotly"))}
    assert heavy <= {"nfstrace.reports.files", "nfstrace.reports.console"}
    assert not {"nfstrace.trace", "nfstrace.comparison", "rich.progress"} & mods
    # --help and option errors answer without pandas, numpy or a parser
    assert not {"pandas", "numpy", "pyarrow", "nfstrace.parsers.native"} & mods
    assert not {m for m in mods if m.startswith("nfstrace.parsers.") and m not in LIGHT}


# What the command line's option handling may import from the parsers.
LIGHT = {"nfstrace.parsers.backends"}


def test_analysis_without_report_imports_no_plotly() -> None:
    code = (
        "from nfstrace.cli import app\n"
        f"app(['analyze', {str(SAMPLE)!r}, '--no-report', '--quiet'], standalone_mode=False)"
    )
    mods = _imported_after(code)
    assert "nfstrace.analysis.diagnosis" in mods
    assert not {m for m in mods if m.startswith(("plotly", "pyarrow.parquet"))}
    # typer >= 0.29 validates options through pydantic (pyproject pins below it)
    assert "pydantic" not in mods
    assert not {"nfstrace.reports.html", "nfstrace.reports.figures", "nfstrace.reports.png"} & mods


def test_the_html_report_imports_no_plotly(tmp_path: Path) -> None:
    """The report's figures are plotly.js specs built as dicts (reports/figures.py):
    no plotly.py (0.3 s to import, more to validate each figure)."""
    report = tmp_path / "report.html"
    code = (
        "from nfstrace.cli import app\n"
        f"app(['analyze', {str(SAMPLE)!r}, '-o', {str(report)!r}, '--quiet'], "
        "standalone_mode=False)"
    )
    mods = _imported_after(code)
    assert report.stat().st_size > 100_000 and "nfstrace.reports.figures" in mods
    assert not {m for m in mods if m == "plotly" or m.startswith(("plotly.", "_plotly_utils"))}


# Imported by an analysis only for what it does not do here: the pyshark parser
# (with asyncio and lxml), Dask, a process pool, the progress bar (not a
# terminal), the version stamp (no file written), plotly, the Parquet writer.
NOT_FOR_A_PLAIN_ANALYSIS = {
    "pyshark",
    "asyncio",
    "lxml",
    "dask",
    "distributed",
    "multiprocessing",
    "concurrent.futures.process",
    "rich.progress",
    "nfstrace.version",
    "plotly",
    "pyarrow.parquet",
}


def test_analysis_without_report_imports_only_what_it_uses() -> None:
    """``nfstrace analyze X --no-report`` (a pipe, not a terminal) in a fresh
    process imports none of NOT_FOR_A_PLAIN_ANALYSIS (pandas brings pyarrow
    itself, for its string columns: that cannot be avoided)."""
    code = (
        "from nfstrace.cli import app\n"
        f"app(['analyze', {str(SAMPLE)!r}, '--no-report'], standalone_mode=False)\n"
        "import sys\n"
        "print('MODULES', ' '.join(sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    mods = set(done.stdout.split("MODULES", 1)[1].split())
    assert "nfstrace.analysis.diagnosis" in mods  # (it did analyse)
    assert not {m for m in mods if m.split(".")[0] in NOT_FOR_A_PLAIN_ANALYSIS}
    assert not NOT_FOR_A_PLAIN_ANALYSIS & mods


def test_parser_is_found_without_pandas() -> None:
    """Whether the parser can run (the check of --parser) is known from the
    Rust extension alone, without pandas or numpy."""
    mods = _imported_after(
        "from nfstrace.parsers import backends\nassert backends.why_not('native') is None"
    )
    assert not {"pandas", "numpy", "pyshark", "nfstrace.parsers.native"} & mods
    assert "nfstrace._native" in mods


def test_parse_ahead_plans_without_numpy() -> None:
    """The parse begun ahead (``parsers.ahead``) plans its partitions on its
    thread while the main thread imports numpy and pandas: the planning imports
    neither (numpy imported there held the parse back ~0.1 s), whether it
    samples the file (a big input) or not."""
    code = (
        "from nfstrace.config import ParseLimits\n"
        "from nfstrace.parsers import partitioning\n"
        f"first = partitioning.sample([{str(SAMPLE)!r}])\n"
        "assert first.frames > 0 and sum(first.buckets) == first.frames\n"
        f"print(partitioning.plan([{str(SAMPLE)!r}], ParseLimits(), 'native', 2, 4)[0])"
    )
    mods = _imported_after(code)
    assert "nfstrace.parsers.partitioning" in mods
    assert not {"numpy", "pandas"} & mods


def test_ci_tests_the_installed_package() -> None:
    """CI (CI=true) runs the suite on the installed wheel, not the checkout's
    nfstrace/ (README's test command: pip install '.[test]', python3 -P)."""
    if os.environ.get("CI") == "true":
        from nfstrace import _native  # type: ignore[attr-defined]

        assert "site-packages" in Path(nfstrace.__file__).parts, nfstrace.__file__
        assert "site-packages" in Path(_native.__file__).parts, _native.__file__


# What the Python dissector the Rust parser was ported from defined (IP and TCP
# reassembly, the transport layer, RPC and NFS decoding): it is gone, and the
# packet path above the link layer is written once, in native/src/.
DISSECTOR_NAMES = {
    "Dissector",
    "Reassembler",
    "TcpReassembler",
    "HalfStream",
    "Collector",
    "Xdr",
    "parse_ipv4",
    "parse_ipv6",
    "decode_header",
    "decode_call",
    "decode_reply",
    "strict_call",
}


def test_nothing_imports_a_python_dissector() -> None:
    """No tests/oracle/ (the Python dissector kept as the tests' oracle until
    its checks were given other truths: tshark, dpkt, crafted captures' known
    contents, golden records); nothing imports it; no module of the package
    defines one of its layers' names."""
    assert not (ROOT / "tests" / "oracle").exists()
    found = []
    for where, top in (
        ("nfstrace", PACKAGE),
        *((d, ROOT / d) for d in ("tests", "bench", "native")),
    ):
        for path in sorted(top.rglob("*.py")):
            if "target" in path.relative_to(top).parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                if isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module]
                found += [(path.name, n) for n in names if n.split(".")[0] == "oracle"]
                if where == "nfstrace":
                    found += [(path.name, n) for n in names if n.split(".")[0] == "tests"]
                    defines = isinstance(node, ast.ClassDef | ast.FunctionDef)
                    if defines and node.name in DISSECTOR_NAMES and node.col_offset == 0:
                        found.append((path.name, node.name))
    assert not found


# The pipeline's stages, bottom up (README "Layout"): a module imports only
# from its own stage and those below, so a change to a stage cannot reach down.
# Keyed by the name under nfstrace/ (a module or a package); "__init__" is the
# package's own facade (load(), the version), above everything it re-exports.
STAGES = {
    **dict.fromkeys(
        ("config", "errors", "units", "schema", "text", "version", "nfs_fields", "protocol")
        + ("memory", "jsonable", "combining"),
        0,
    ),
    "parsers": 1,
    "_native": 1,  # the Rust parser's extension, which parsers/native.py wraps
    "match": 2,
    "inference": 2,
    "analysis": 3,
    "trace": 4,
    "comparison": 5,
    "watch": 5,
    "live": 5,
    "prometheus": 5,
    "reports": 6,
    "cli": 7,
    "__init__": 7,
}
# What the parsers return, which the stages above them may name (in types):
# their protocol numbers and names come from nfstrace.protocol instead.
PARSER_RESULTS = {("nfstrace.parsers.stats", "ParseStats")}
PARSER_RESULTS |= {
    ("nfstrace.parsers.mountstats", n) for n in ("Mountstats", "NfsMount", "OpCounters")
}
# The package the tests import (the source tree, or an installed wheel in CI)
PACKAGE = Path(nfstrace.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> list[tuple[str, str, str]]:
    """(importing module, imported nfstrace module, name or "") for every
    import in the package: at the top, in functions, under TYPE_CHECKING."""
    out: list[tuple[str, str, str]] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        here = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                out += [(here, a.name, "") for a in node.names if a.name.startswith("nfstrace")]
            elif isinstance(node, ast.ImportFrom) and node.module:
                assert node.level == 0, f"{here}: relative import"
                if node.module == "nfstrace" or node.module.startswith("nfstrace."):
                    out += [(here, node.module, a.name) for a in node.names]
    return out


def _stage(module: str, name: str = "") -> int:
    """The stage of a module, or of what ``from nfstrace import name`` takes."""
    parts = module.split(".")
    if len(parts) > 1:
        return STAGES[parts[1]]
    return STAGES[name if name in STAGES else "__init__"]


def test_every_top_level_name_has_a_stage() -> None:
    names = {p.stem for p in PACKAGE.glob("*.py")}
    names |= {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert names == set(STAGES) - {"_native"}


def test_modules_import_only_from_their_stage_and_below() -> None:
    upward = [
        (here, module, name)
        for here, module, name in _imports()
        if _stage(module, name) > _stage(here)
    ]
    assert not upward


def test_no_private_names_from_another_module() -> None:
    private = [
        (here, module, name)
        for here, module, name in _imports()
        if name.startswith("_") and not name.startswith("__")
    ]
    assert private == [("nfstrace.parsers.backends", "nfstrace", "_native")]  # the extension


def test_protocol_facts_come_from_protocol_not_from_the_parsers() -> None:
    """nfstrace.protocol stands alone; above the parsers, only trace.py and
    cli.py (which run them) import from the parsers: the matching, the
    analysis, the comparison and the reports take protocol numbers and names
    from nfstrace.protocol, and from the parsers only what they return."""
    imports = _imports()
    outside = [
        (here, module)
        for here, module, _ in imports
        if here.startswith("nfstrace.protocol") and not module.startswith("nfstrace.protocol")
    ]
    assert not outside
    users = ("nfstrace.match", "nfstrace.analysis", "nfstrace.comparison", "nfstrace.reports")
    from_parsers = {
        (module, name)
        for here, module, name in imports
        if here.startswith(users) and module.startswith("nfstrace.parsers")
    }
    assert from_parsers <= PARSER_RESULTS
