"""One specification for two parsers: native/src/tables.rs is generated from
the Python parser's definitions (native/generate_tables.py) and must match
them; the built extension must know every event kind and anomaly Python does."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import pytest

from nfstrace.config import ParseLimits
from nfstrace.parsers import native, stats
from nfstrace.schema import EVENT_KINDS

ROOT = Path(__file__).resolve().parent.parent
GENERATOR = ROOT / "native" / "generate_tables.py"
TABLES = ROOT / "native" / "src" / "tables.rs"


def _generator():
    spec = importlib.util.spec_from_file_location("generate_tables", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tables_rs_is_generated_from_the_python_parser():
    expected = _generator().generate()
    committed = TABLES.read_text()
    if committed != expected:
        import difflib

        diff = "".join(
            list(
                difflib.unified_diff(
                    committed.splitlines(True),
                    expected.splitlines(True),
                    "native/src/tables.rs (committed)",
                    "native/src/tables.rs (generated)",
                )
            )[:60]
        )
        pytest.fail(
            "native/src/tables.rs differs from the Python definitions: run "
            "`python native/generate_tables.py` from the repository root, rebuild the "
            f"native parser and commit the result.\n{diff}"
        )


def test_tables_rs_covers_event_kinds_and_anomalies():
    text = TABLES.read_text()
    for name in [*EVENT_KINDS, *stats.ANOMALIES]:
        assert f'"{name}",' in text, name


def test_every_parse_limit_is_handed_to_rust():
    names = {f.name for f in dataclasses.fields(ParseLimits)}
    assert names <= set(native._settings(ParseLimits()))
