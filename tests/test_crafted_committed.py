"""The committed crafted captures (tests/crafted/captures/) are exactly what the
scripts that make them write today."""

from __future__ import annotations

from pathlib import Path

import pytest

try:
    from crafted import make_backends as mb
    from crafted import make_causes as mcs
    from crafted import make_crafted as mc
    from crafted import make_frames as mf
except ImportError:  # tests/ not on sys.path: import as a package
    from tests.crafted import make_backends as mb
    from tests.crafted import make_causes as mcs
    from tests.crafted import make_crafted as mc
    from tests.crafted import make_frames as mf

COMMITTED = Path(__file__).resolve().parent / "crafted" / "captures"
SCRIPTS = {"make_crafted": mc, "make_backends": mb, "make_frames": mf, "make_causes": mcs}


@pytest.mark.parametrize("script", SCRIPTS)
def test_committed_captures_are_the_scripts_output(script: str, tmp_path: Path) -> None:
    built = SCRIPTS[script].build_all(tmp_path)
    committed = COMMITTED / script
    assert sorted(p.name for p in committed.iterdir()) == sorted(p.name for p in built.values())
    for name, path in built.items():
        assert (committed / path.name).read_bytes() == path.read_bytes(), (
            f"{script} {name}: regenerate (see {COMMITTED / 'README.md'})"
        )


def test_committed_captures_are_small() -> None:
    files = [p for p in COMMITTED.rglob("*") if p.is_file() and p.name != "README.md"]
    assert len(files) == 56 and sum(p.stat().st_size for p in files) < 600_000
