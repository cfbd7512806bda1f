"""One declaration of the facts the Rust parser shares with Python:
native/src/tables.rs and nfs4_steps.rs are generated from nfstrace/'s
definitions (native/generate_tables.py) and must match them; the built
extension must know every event kind and anomaly Python does."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from pathlib import Path

import pytest

from nfstrace.config import ParseLimits
from nfstrace.parsers import ahead, stats
from nfstrace.protocol import nfs4 as nfs4_protocol
from nfstrace.protocol import nfs4_steps as nfs4
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


def test_tables_rs_is_generated_from_the_python_definitions():
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


# applied to the inputs before either parser reads them (capture.regular_files),
# or folded into another (max_pending_calls: ParseLimits.pending_calls)
BEFORE_THE_PARSER = {"max_spool_bytes", "max_pending_call_bytes"}


def test_every_parse_limit_is_handed_to_rust():
    names = {f.name for f in dataclasses.fields(ParseLimits)} - BEFORE_THE_PARSER
    assert names <= set(ahead.native_settings(ParseLimits()))


STEPS = ROOT / "native" / "src" / "nfs4_steps.rs"
NFS4_RS = ROOT / "native" / "src" / "nfs4.rs"


def test_nfs4_steps_rs_is_generated_from_the_python_tables():
    assert STEPS.read_text() == _generator().generate_steps(), (
        "native/src/nfs4_steps.rs differs from protocol/nfs4_steps.py's tables: run "
        "`python native/generate_tables.py` from the repository root, rebuild the "
        "native parser and commit the result."
    )


def _arms(text: str, fn: str) -> list[str]:
    """The patterns of the match arms of the generated function fn."""
    body = text.split(f"pub(super) fn {fn}<'a>(", 1)[1].split("\n}\n", 1)[0]
    return re.findall(r"^ {8}(\S.*?) =>", body, re.M)


def test_every_python_step_is_a_generated_arm():
    """One arm per key of nfs4.ARGS / RESULTS / ERROR_RESULTS, no other (but the
    default), so the Rust dispatch is exactly the Python tables'."""
    text = STEPS.read_text()
    op = {code: f"OP_{name}" for code, name in nfs4_protocol.OPERATIONS.items()}
    assert _arms(text, "args_step") == [op[k] for k in nfs4.ARGS] + ["_"]
    assert _arms(text, "results_step") == [op[k] for k in nfs4.RESULTS] + ["_"]
    errors = [f"({op[o]}, {nfs4_protocol.STATUS_NAMES[s]})" for o, s in nfs4.ERROR_RESULTS]
    assert _arms(text, "error_results_step") == errors + ["_"]
    any_status = " | ".join(op[k] for k in sorted(nfs4.ANY_STATUS_RESULTS))
    assert f"matches!(op, {any_status})" in text
    cb = {code: f"OP_{name}" for code, name in nfs4_protocol.CB_OPERATIONS.items()}
    assert _arms(text, "cb_args_step") == [cb[k] for k in nfs4.CB_ARGS] + ["_"]
    assert _arms(text, "cb_results_step") == [cb[k] for k in nfs4.CB_RESULTS] + ["_"]


def test_the_named_steps_switch_on_the_python_names():
    """Every union discriminant the named steps switch on (and the item sizes
    the steps skip) is a constant of its protocol/nfs4.py name and value in
    tables.rs, nfs4.rs uses each, and its named steps compare or match no bare
    number."""
    text = TABLES.read_text()
    names = [*nfs4.UNION_DISCRIMINANTS, *_generator().NFS4_SIZES]
    taken = {name: getattr(nfs4_protocol, name) for name in names}
    assert {"NF4LNK", "CLAIM_DELEG_PREV_FH", "OPEN_DELEGATE_NONE_EXT"} <= taken.keys()
    rust = NFS4_RS.read_text()
    unused = [n for n in nfs4.UNION_DISCRIMINANTS if not re.search(rf"\b{n}\b", rust)]
    assert unused == []
    for name, value in taken.items():
        assert re.search(rf"^pub const {name}: \w+ = {value:_};$", text, re.M) or re.search(
            rf"^pub const {name}: \w+ = {value};$", text, re.M
        ), name
    bare = re.findall(r"(?:[=!]= \d+\b|^\s+\d+(?: \| \d+)* =>|[>< ] \d+ ?[|)]|> \d+$)", rust, re.M)
    assert bare == [], bare


def test_a_named_step_without_a_rust_primitive_stops_the_generation():
    gen = _generator()
    primitives = gen.rust_primitives(NFS4_RS.read_text())
    assert {"fattr", "open_args", "open_delegation"} <= primitives
    with pytest.raises(gen.MissingPrimitive, match="open_delegation"):
        gen.generate_steps(primitives - {"open_delegation"})
