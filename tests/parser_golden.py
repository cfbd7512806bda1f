"""The parser's golden records: what the Rust parser's tables were, byte for
byte, on every capture tests/test_native.py reads (samples, crafted edge cases,
damaged and mutated captures, past the limits), kept in tests/golden/parser/.

A record holds, per table (messages, events), its row count, a SHA-256 of its
exact content (each column's name, dtype, categories and values) and, to say
*what* changed when the hash does, per-column sums (numbers) or value counts
(labels); and the ParseStats, every field (paths without their directory),
with a hash of the whole.  They were first written from tables equal to the
Python dissector's the Rust parser was ported from (the differential oracle
that tests/test_native.py compared it with until it was removed), so they keep
that regression check without a second dissector.

After a deliberate change of the parser's output, regenerate and review the diff:

    NFSTRACE_UPDATE_GOLDEN=1 python3 -m pytest -q tests/test_native.py
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

GOLDEN = Path(__file__).resolve().parent / "golden" / "parser"
UPDATE = bool(os.environ.get("NFSTRACE_UPDATE_GOLDEN"))
TOP = 5  # value counts kept per label column


def _jsonable(value: object) -> object:
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    return value


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


def table_hash(df: pd.DataFrame) -> str:
    """SHA-256 of a table's exact content: index kind and length, then each
    column's name, dtype, categories (in order) and values."""
    h = hashlib.sha256()
    h.update(f"{type(df.index).__name__} {len(df)}\n".encode())
    for name in df.columns:
        col = df[name]
        h.update(f"{name} {col.dtype}\n".encode())
        if isinstance(col.dtype, pd.CategoricalDtype):
            h.update(json.dumps(_jsonable(list(col.cat.categories))).encode())
            h.update(col.cat.codes.to_numpy().astype("<i8").tobytes())
        elif col.dtype == object:
            h.update(json.dumps(_jsonable(col.tolist())).encode())
        else:
            h.update(col.to_numpy().tobytes())
    return h.hexdigest()[:32]


def _column(col: pd.Series) -> str:
    """One line saying what a column holds: its sum (numbers), or its count of
    distinct values and the most frequent ones (labels)."""
    if isinstance(col.dtype, pd.CategoricalDtype) or col.dtype == object:
        counts = col.astype(object).value_counts(dropna=False)
        top = sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))[:TOP]
        shown = ", ".join(f"{str(v) or repr('')} ×{n}" for v, n in top)
        return f"{len(counts)} distinct: {shown}"
    return f"sum {sum(col.tolist())}"  # Python ints: no int64 overflow


def table_record(df: pd.DataFrame) -> dict:
    return {
        "rows": len(df),
        "hash": table_hash(df),
        "columns": {str(name): _column(df[name]) for name in df.columns},
    }


def stats_record(stats: object, dirs: list[str]) -> dict:
    """ParseStats as JSON, the capture files' directories taken out of paths
    (a temporary directory differs from run to run); long lists (the
    per-direction facts, connection_frames) as their length and hash."""

    def strip(value: object) -> object:
        if isinstance(value, str):
            for d in dirs:
                value = value.replace(d + os.sep, "")
            return value
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items()}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    assert dataclasses.is_dataclass(stats)
    out = strip(_jsonable(dataclasses.asdict(stats)))  # type: ignore[arg-type]
    assert isinstance(out, dict)
    out["warnings"] = strip(list(stats.warnings))  # type: ignore[attr-defined]
    whole = _sha(json.dumps(out, sort_keys=True).encode())
    for name in ("directions", "connection_frames"):
        items = out[name]
        out[name] = {"len": len(items), "hash": _sha(json.dumps(items, sort_keys=True).encode())}
    out["hash"] = whole
    return out


def record(result: tuple, paths: list[Path]) -> dict:
    """The golden record of a parse result (messages, events, stats) of paths."""
    messages, events, stats = result
    dirs = sorted({str(Path(p).parent) for p in paths}, key=len, reverse=True)
    return {
        "messages": table_record(messages),
        "events": table_record(events),
        "stats": stats_record(stats, dirs),
    }


def digest(rec: dict) -> str:
    """One hash of a whole record (the mutated captures' golden: one per capture)."""
    return _sha(json.dumps(rec, sort_keys=True).encode())


def path_of(key: str) -> Path:
    return GOLDEN / f"{key}.json"


def check(key: str, rec: dict) -> None:
    """Compare a record with tests/golden/parser/KEY.json (write it under
    NFSTRACE_UPDATE_GOLDEN=1); on a difference, say which parts differ."""
    path = path_of(key)
    text = json.dumps(rec, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"no golden record {path}: run with NFSTRACE_UPDATE_GOLDEN=1"
    want = json.loads(path.read_text(encoding="utf-8"))
    got = json.loads(text)
    if got == want:
        return
    diffs = list(_differences(want, got, key))
    raise AssertionError(
        f"the parser's output on {key} differs from its golden record ({path}):\n  "
        + "\n  ".join(diffs[:20])
    )


def _differences(want: object, got: object, where: str):
    if isinstance(want, dict) and isinstance(got, dict):
        for k in sorted(set(want) | set(got)):
            yield from _differences(want.get(k), got.get(k), f"{where}.{k}")
    elif want != got:
        yield f"{where}: golden {want!r}, now {got!r}"
