#!/usr/bin/env python3
"""Do two commits' HTML reports draw the same figures?

    python3 bench/same_figures.py --base COMMIT [--samples DIR] [--only TEXT]

Writes the HTML report (``nfstrace analyze FILE -o X.html``) of every capture
under sample-pcaps/ (recursive) with the nfstrace of COMMIT and with this
working tree (bench/same_output.py's runs and caches: its ``--html`` outputs),
then reads every figure back out of both pages: each ``Plotly.newPlot(id,
data, layout, config)`` call and the size of the div it draws into.  The
figures are compared as parsed JSON, typed arrays (``{"dtype": "f8", "bdata":
...}``) decoded to lists first, numbers equal within 1e-9 relative (so an
array written as i1 on one side and f8 on the other is no difference; NaN
equals NaN, null equals null).  The rest of the page (every figure's div cut
out) is compared byte for byte.

Prints one line per capture that differs, with each difference's path (``fig-3
layout.xaxis.range[0]: 1.0 vs 1.1``), and a summary; exit status 0 when every
figure of every report is the same, 1 otherwise.  A report written the way
plotly.py's ``to_html`` writes it and one written by nfstrace's own figure code
are compared the same way: this is the check that the two draw the same.
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import snapshot
from same_output import CACHE, ROOT, SAMPLES, _slug, run_all

REL = 1e-9
_NEW_PLOT = re.compile(r'Plotly\.newPlot\(\s*"([^"]+)",\s*')
# one figure's div: its size, the plot's div and the script drawing it
_FIGURE_DIV = re.compile(r'<div style="height:([^;]*); width:([^;]*);">.*?</script>\s*</div>', re.S)
_DTYPES = {"i1": "int8", "u1": "uint8", "i2": "int16", "u2": "uint16", "i4": "int32",
           "u4": "uint32", "f4": "float32", "f8": "float64"}  # fmt: skip


def figures(page: str) -> dict[str, dict[str, Any]]:
    """Every figure of a report page by its div id: data, layout, config and
    the size of the div it draws into."""
    decoder = json.JSONDecoder()
    out: dict[str, dict[str, Any]] = {}
    for div in _FIGURE_DIV.finditer(page):
        call = _NEW_PLOT.search(div.group(0))
        assert call, f"a figure div without Plotly.newPlot: {div.group(0)[:200]}"
        text, pos = div.group(0), call.end()
        values = []
        for _ in range(3):  # data, layout, config
            value, pos = decoder.raw_decode(text, pos)
            values.append(value)
            pos = re.compile(r"\s*,?\s*").match(text, pos).end()  # type: ignore[union-attr]
        data, layout, config = values
        out[call.group(1)] = {
            "data": decoded(data),
            "layout": decoded(layout),
            "config": config,
            "div": {"height": div.group(1), "width": div.group(2)},
        }
    return out


def rest_of_page(page: str) -> str:
    """The page with every figure's div cut out."""
    return _FIGURE_DIV.sub("<FIGURE>", page)


def decoded(value: Any) -> Any:
    """JSON with plotly.js typed arrays decoded to (nested) lists."""
    if isinstance(value, dict):
        if set(value) in ({"dtype", "bdata"}, {"dtype", "bdata", "shape"}):
            array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=_DTYPES[value["dtype"]])
            if "shape" in value:
                array = array.reshape([int(n) for n in value["shape"].split(",")])
            return array.tolist()
        return {k: decoded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decoded(v) for v in value]
    return value


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two parsed JSON values differ (numbers within REL relative; NaN
    is NaN; null is null)."""
    number = (int, float)
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}.{k}: only in base" for k in a if k not in b]
        out += [f"{path}.{k}: only in the working tree" for k in b if k not in a]
        for k in a:
            if k in b:
                out += differences(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items vs {len(b)}"]
        out = []
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            out += differences(x, y, f"{path}[{i}]")
        return out
    if (
        isinstance(a, number)
        and isinstance(b, number)
        and not isinstance(a, bool)
        and not isinstance(b, bool)
    ):
        if (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=REL, abs_tol=0.0):
            return []
        return [f"{path}: {a!r} vs {b!r}"]
    return [] if a == b and type(a) is type(b) else [f"{path}: {a!r} vs {b!r}"]


def compare(base: Path, work: Path) -> tuple[int, list[str]]:
    """(figures compared, differences) of two report pages."""
    a_page, b_page = base.read_text("utf-8"), work.read_text("utf-8")
    a, b = figures(a_page), figures(b_page)
    out = differences(a, b, "")
    if rest_of_page(a_page) != rest_of_page(b_page):
        out.append("the page outside the figures differs")
    return len(a), out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--base", required=True, help="the commit to compare the working tree with")
    ap.add_argument("--samples", type=Path, default=SAMPLES)
    ap.add_argument("--only", help="captures whose path contains this")
    ap.add_argument("--work", type=Path, help="where the working tree's outputs go")
    args = ap.parse_args()
    samples = args.samples.resolve()
    captures = sorted(samples.rglob("*.pcap")) + sorted(samples.rglob("*.pcapng"))
    if args.only:
        captures = [c for c in captures if args.only in str(c)]
    base_src, sha = snapshot(args.base, CACHE)
    suffix = "-html" + _slug(samples)
    base_out = CACHE / f"out-{sha}{suffix}"
    print(f"base {sha}: {base_src}", file=sys.stderr)
    run_all(base_src, base_out, samples, captures, True)
    work_out = args.work or CACHE / f"out-worktree-{ROOT.name}{suffix}"
    shutil.rmtree(work_out, ignore_errors=True)
    print(f"working tree: {ROOT}", file=sys.stderr)
    run_all(ROOT, work_out, samples, captures, True)
    total = reports = 0
    differ = []
    for cap in captures:
        name = str(cap.relative_to(samples)).replace("/", "__") + ".html"
        a, b = base_out / name, work_out / name
        if not a.exists() and not b.exists():
            continue  # no report (an unusable capture): the same on both sides
        if not a.exists() or not b.exists():
            where = "the working tree" if b.exists() else "base"
            differ.append((name, [f"report only in {where}"]))
            continue
        n, found = compare(a, b)
        reports, total = reports + 1, total + n
        if found:
            differ.append((name, found))
    print(
        f"{len(captures)} captures, {reports} reports, {total} figures compared: "
        f"{len(differ)} reports differ"
    )
    for name, found in differ:
        print(f"  DIFFERS: {name}: {len(found)} differences")
        for line in found[:20]:
            print(f"    {line}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
