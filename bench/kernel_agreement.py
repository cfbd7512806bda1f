"""The kernel's figures, ours and tshark's SRT, on the kvm lab's kernel-client captures.

    python3 bench/kernel_agreement.py DIR [--out bench/results/kernel_agreement] [--only REGEX]

DIR holds the lab's ``NAME.pcap`` with its ground truth ``NAME.json``
(``../shared/lab/kvm``: ``/var/tmp/kvmlab/captures``, or the small ones in
``sample-pcaps/kernel``).  For each scenario whose JSON has the guest's
``/proc/self/mountstats`` before and after (``client.mountstats.raw_before`` /
``raw_after``), the capture is analysed as ``nfstrace analyze NAME.pcap
--mountstats before.txt after.txt`` would (``nfstrace.load`` with
``DiagnosisOptions(mountstats=read_mountstats([before, after]))``), and per
mount, for WRITE and COMMIT (NFSv4: also every COMPOUND together, against
tshark's COMPOUND line), are put side by side:

* ops, transmissions and bytes sent: the kernel's (between the two copies)
  and the capture's;
* the mean RTT in ms: the kernel's, ours from the first packet of the call's
  last transmission (nfstrace's ``rtt_ms``), ours from its last packet
  (``rtt_last_ms``, as tshark's SRT) and tshark's SRT (the lab's ``tshark -z
  rpc,srt``: per procedure, so NFSv4 has only the COMPOUND line);
* the mean execute time: the kernel's and ours (first packet to reply), and
  the kernel's queue (execute - RTT, invisible in a capture);
* nfstrace's verdict (``primary``) against the injected cause (``cause.primary``).

The NFSv4 COMPOUND row compares the whole capture (tshark's line, ours) with
the kernel's counts *since the mount* (``raw_after`` alone): the capture
holds the mount's own calls (EXCHANGE_ID, CREATE_SESSION, ...), which are
before the first copy.  WRITE and COMMIT use the two copies.

Writes ``OUT.md`` (a table per scenario x operation, and the summary) and
``OUT.json`` (every figure).  Nothing in DIR is modified.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from nfstrace.analysis.diagnosis import DiagnosisOptions  # noqa: E402
from nfstrace.analysis.kernel_stats import KernelFigures, with_kernel  # noqa: E402
from nfstrace.parsers.mountstats import Mountstats, parse_mountstats, read_mountstats  # noqa: E402
from nfstrace.trace import AnalysisConfig, load  # noqa: E402

OPS = ("WRITE", "COMMIT")
COMPOUND = "COMPOUND"  # NFSv4: every operation but NULL together, as tshark's SRT line
COMPOUND_NOTE = (
    "The capture (and tshark) hold NFSv4 calls the mount's own counters do not: the umount's "
    "DESTROY_SESSION and DESTROY_CLIENTID after the second copy, and the mount's walk from "
    "the pseudo-root (LOOKUP_ROOT, SECINFO_NO_NAME, some GETATTR/LOOKUP/ACCESS), counted by "
    "another of the kernel's RPC clients: the COMPOUND counts differ by those, their RTTs "
    "are means over different calls."
)


def _num(x: Any) -> float | None:
    """A finite float, or None (JSON null; NaN / <NA> are not numbers)."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _int(x: Any) -> int | None:
    v = _num(x)
    return None if v is None else round(v)


def _weighted(rows: Any, column: str, weight: str) -> float | None:
    """sum(column * weight) / sum(weight) over the rows where column is known."""
    total = n = 0.0
    for _, r in rows.iterrows():
        v, w = _num(r[column]), _num(r[weight]) or 0.0
        if v is not None and w:
            total += v * w
            n += w
    return total / n if n else None


def _srt(doc: dict, name: str) -> dict | None:
    procs = ((doc.get("tshark") or {}).get("rpc_srt") or {}).get("procedures") or {}
    p = procs.get(name)
    if not p:
        return None
    return {"calls": p.get("calls"), "avg_ms": _ms(p.get("avg_s")), "max_ms": _ms(p.get("max_s"))}


def _ms(seconds: Any) -> float | None:
    v = _num(seconds)
    return None if v is None else v * 1e3


def _op_row(k: KernelFigures, op: str) -> dict | None:
    table = k.operations
    hit = table[table["op"] == op]
    if hit.empty:
        return None
    r = hit.iloc[0]
    return {
        "kernel_ops": _int(r["kernel_ops"]),
        "ops": _int(r["ops"]),
        "kernel_trans": _int(r["kernel_trans"]),
        "trans": _int(r["trans"]),
        "kernel_bytes_sent": _int(r["kernel_bytes_sent"]),
        "bytes_sent": _int(r["bytes_sent"]),
        "kernel_rtt_ms": _num(r["kernel_rtt_ms"]),
        "rtt_ms": _num(r["rtt_ms"]),
        "rtt_last_ms": _num(r["rtt_last_ms"]),
        "kernel_exe_ms": _num(r["kernel_exe_ms"]),
        "exe_ms": _num(r["exe_ms"]),
        "kernel_queue_ms": _num(r["kernel_queue_ms"]),
    }


def _compound_row(k: KernelFigures) -> dict:
    """Every NFSv4 operation but NULL together (tshark's COMPOUND line)."""
    t = k.operations[k.operations["op"] != "NULL"]

    def total(column: str) -> int:
        return int(sum(_int(v) or 0 for v in t[column]))

    return {
        "kernel_ops": total("kernel_ops"),
        "ops": total("ops"),
        "kernel_trans": total("kernel_trans"),
        "trans": total("trans"),
        "kernel_bytes_sent": total("kernel_bytes_sent"),
        "bytes_sent": total("bytes_sent"),
        "kernel_rtt_ms": _weighted(t, "kernel_rtt_ms", "kernel_ops"),
        "rtt_ms": _weighted(t, "rtt_ms", "ops"),
        "rtt_last_ms": _weighted(t, "rtt_last_ms", "ops"),
        "kernel_exe_ms": _weighted(t, "kernel_exe_ms", "kernel_ops"),
        "exe_ms": _weighted(t, "exe_ms", "ops"),
        "kernel_queue_ms": _weighted(t, "kernel_queue_ms", "kernel_ops"),
    }


def scenarios(directory: Path, only: str | None) -> list[tuple[str, Path, dict]]:
    """(name, capture, ground truth) of every NAME.json with mountstats before and after."""
    out = []
    for path in sorted(directory.glob("*.json")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        ms = (doc.get("client") or {}).get("mountstats") or {}
        name = doc.get("scenario") or path.stem
        pcap = directory / f"{path.stem}.pcap"
        if not (ms.get("raw_before") and ms.get("raw_after") and pcap.is_file()):
            continue
        if only and not re.search(only, name):
            continue
        out.append((name, pcap, doc))
    return out


def analyse(name: str, pcap: Path, doc: dict) -> dict:
    ms = doc["client"]["mountstats"]
    with tempfile.TemporaryDirectory(prefix="kagree-") as tmp:
        before, after = Path(tmp, "before.txt"), Path(tmp, "after.txt")
        before.write_text(ms["raw_before"])
        after.write_text(ms["raw_after"])
        mountstats = read_mountstats([str(before), str(after)])
        t0 = time.perf_counter()
        config = AnalysisConfig(diagnosis=DiagnosisOptions(mountstats=mountstats))
        trace = load(str(pcap), config)
        seconds = time.perf_counter() - t0
    d = trace.diagnosis
    mounts = d.mounts
    assert mounts is not None
    # the kernel's counts since the mount (the NFSv4 COMPOUND total: the capture holds the mount)
    since = with_kernel(mounts, Mountstats(after=parse_mountstats(ms["raw_after"])))
    since_of = {(k.client, k.server, k.vers): k for k in since.kernel}
    impairment = doc.get("impairment") or {}
    cause = doc.get("cause") or {}
    out: dict[str, Any] = {
        "scenario": name,
        "capture": pcap.name,
        "nfs_version": str(doc.get("nfs_version")),
        "server": (doc.get("server") or {}).get("software"),
        "loss_percent": _num(impairment.get("loss_percent_each_direction")) or 0.0,
        "added_rtt_ms": _num(impairment.get("added_rtt_ms")) or 0.0,
        "analysis_seconds": round(seconds, 2),
        "verdict": d.verdict.primary,
        "verdict_text": d.verdict.text,
        "injected": cause.get("primary"),
        "vs_twin": cause.get("vs_twin"),
        "unmatched_mountstats": list(mounts.unmatched),
        "mounts": [],
    }
    for k in mounts.kernel:
        m = mounts.mounts
        row = m[(m["client"] == k.client) & (m["server"] == k.server) & (m["vers"] == k.vers)]
        mount: dict[str, Any] = {
            "client": k.client,
            "server": k.server,
            "vers": k.vers,
            "mount": k.mount,
            "matched_by": k.matched_by,
            "connections": _int(row["connections"].iloc[0]) if len(row) else None,
            "missed_calls": k.missed_calls,
            "extra_calls": k.extra_calls,
            "ops": {},
        }
        for op in OPS:
            figures = _op_row(k, op)
            if figures is None:
                continue
            figures["kernel_interval"] = "between the copies"
            figures["tshark"] = _srt(doc, op) if k.vers != 4 else None
            mount["ops"][op] = figures
        if k.vers == 4:
            whole = since_of.get((k.client, k.server, k.vers), k)
            figures = _compound_row(whole)
            figures["kernel_interval"] = (
                "since the mount" if whole is not k else "between the copies"
            )
            figures["tshark"] = _srt(doc, COMPOUND)
            t = whole.operations
            figures["not_in_kernel"] = {
                str(r.op): int(r.ops_diff) for r in t[t["ops_diff"] > 0].itertuples()
            }
            mount["ops"][COMPOUND] = figures
        out["mounts"].append(mount)
    return out


# ---- the summary ---------------------------------------------------------------------


def _rows(results: list[dict]) -> list[tuple[dict, dict, str, dict]]:
    return [
        (r, m, op, f) for r in results for m in r["mounts"] for op, f in m["ops"].items()
    ]  # fmt: skip


def _spread(values: list[float]) -> dict | None:
    if not values:
        return None
    return {
        "n": len(values),
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def summary(results: list[dict]) -> dict:
    rows = _rows(results)
    equal: dict[str, dict] = {}
    for group in (*OPS, COMPOUND):
        mine = [f for _, _, op, f in rows if op == group]
        if mine:
            equal[group] = {
                what: sum(1 for f in mine if f[f"kernel_{what}"] == f[what])
                for what in ("ops", "trans", "bytes_sent")
            } | {"rows": len(mine)}
    ratios: dict[str, dict] = {}
    for ours in ("rtt_ms", "rtt_last_ms"):
        groups: dict[str, list[float]] = {}
        for r, _, op, f in rows:
            ratio = _ratio(f["kernel_rtt_ms"], f[ours])
            if ratio is None:
                continue
            loss = "loss" if r["loss_percent"] > 0 else "no loss"
            for key in (op, f"{op}, {loss}"):
                groups.setdefault(key, []).append(ratio)
        ratios[ours] = {key: _spread(v) for key, v in sorted(groups.items())}
    verdicts = [r for r in results if r["injected"] is not None]
    srt = [(f["rtt_last_ms"], f["ops"], f["tshark"]) for *_, f in rows if f["tshark"]]
    gaps = [abs(ours / t["avg_ms"] - 1) for ours, _, t in srt if ours and t["avg_ms"]]
    return {
        "tshark": {
            "rows": len(srt),
            "calls_equal": sum(1 for _, ops, t in srt if t["calls"] == ops),
            "rtt_last_vs_srt_max_rel_diff": max(gaps) if gaps else None,
        },
        "scenarios": len(results),
        "rows": len(rows),
        "equal": equal,
        "rtt_ratio_kernel_over_ours": ratios,
        "verdict_is_injected": sum(1 for r in verdicts if r["verdict"] == r["injected"]),
        "verdicts": len(verdicts),
    }


# ---- Markdown ---------------------------------------------------------------------------


def _f(v: float | None, digits: int = 1) -> str:
    return "–" if v is None else f"{v:,.{digits}f}"


def _pair(a: int | None, b: int | None) -> str:
    if a is None and b is None:
        return "–"
    mark = "" if a == b else " ≠"
    return f"{'–' if a is None else f'{a:,}'} / {'–' if b is None else f'{b:,}'}{mark}"


def _spread_text(s: dict | None) -> str:
    if s is None:
        return "–"
    return f"{s['median']:.2f} ({s['min']:.2f}–{s['max']:.2f}, n={s['n']})"


HEADER = (
    "| scenario | loss | op | ops k / ours | trans k / ours | bytes sent k / ours "
    "| RTT k | RTT ours (first) | RTT ours (last) | tshark SRT | exe k | exe ours | queue k "
    "| verdict / injected |"
)


def markdown(results: list[dict], facts: dict) -> str:
    s = summary(results)
    lines = [
        "# The kernel's figures, ours and tshark's SRT",
        "",
        f"`python3 bench/kernel_agreement.py {facts['directory']}` "
        f"(commit {facts['commit']}, {facts['date']}; {s['scenarios']} scenarios, "
        f"{facts['seconds']:.0f} s). Times are means in ms: k = the kernel's mountstats "
        "between the two copies (the NFSv4 COMPOUND row: since the mount), ours = nfstrace "
        "from the capture (RTT from the first packet of the call's last transmission, and from "
        "its last packet as tshark's SRT), tshark SRT = `tshark -z rpc,srt` per procedure "
        "(NFSv4: COMPOUND only). queue k = the kernel's execute - RTT, invisible in a capture. "
        "≠ marks a count that differs.",
        "",
        HEADER,
        "|" + "---|" * HEADER.count(" | ") + "---|",
    ]
    for r, m, op, f in _rows(results):
        t = f["tshark"] or {}
        conns = m["connections"] or 0
        label = r["scenario"] + (f" ({conns} conn.)" if conns > 1 else "")
        mark = "✓" if r["verdict"] == r["injected"] else "✗"
        lines.append(
            f"| {label} | {_f(r['loss_percent'], 0)}% | {op} "
            f"| {_pair(f['kernel_ops'], f['ops'])} | {_pair(f['kernel_trans'], f['trans'])} "
            f"| {_pair(f['kernel_bytes_sent'], f['bytes_sent'])} "
            f"| {_f(f['kernel_rtt_ms'])} | {_f(f['rtt_ms'])} | {_f(f['rtt_last_ms'])} "
            f"| {_f(t.get('avg_ms'))} | {_f(f['kernel_exe_ms'])} | {_f(f['exe_ms'])} "
            f"| {_f(f['kernel_queue_ms'])} | {r['verdict']} / {r['injected']} {mark} |"
        )
    missing = [r["scenario"] for r in results if not r["mounts"]]
    if missing:
        lines += ["", f"No mount matched mountstats: {', '.join(missing)}."]
    lines += ["", "## Summary", ""]
    for op, eq in s["equal"].items():
        n = eq["rows"]
        lines.append(
            f"- {op}: equal exactly in {eq['ops']}/{n} scenarios' ops, {eq['trans']}/{n} trans, "
            f"{eq['bytes_sent']}/{n} bytes sent." + (f" {COMPOUND_NOTE}" if op == COMPOUND else "")
        )
    ts = s["tshark"]
    gap = ts["rtt_last_vs_srt_max_rel_diff"]
    if ts["rows"] and gap is not None:
        lines.append(
            f"- tshark's SRT: its calls equal our ops in {ts['calls_equal']}/{ts['rows']} rows; "
            f"its mean and ours from the last packet differ by at most {gap:.2%}."
        )
    lines += [
        f"- Verdict = injected cause: {s['verdict_is_injected']}/{s['verdicts']} scenarios.",
        "",
        "RTT ratio kernel / ours, median (range, rows):",
        "",
        "| group | ours from the first packet | ours from the last packet |",
        "|---|---|---|",
    ]
    first = s["rtt_ratio_kernel_over_ours"]["rtt_ms"]
    last = s["rtt_ratio_kernel_over_ours"]["rtt_last_ms"]
    for key in sorted(set(first) | set(last)):
        lines.append(f"| {key} | {_spread_text(first.get(key))} | {_spread_text(last.get(key))} |")
    return "\n".join(lines) + "\n"


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out + ("+changes" if dirty else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("directory", type=Path, help="the lab's NAME.pcap + NAME.json")
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/kernel_agreement",
                    help="OUT.md and OUT.json (default: %(default)s)")  # fmt: skip
    ap.add_argument("--only", help="scenarios whose name matches this regular expression")
    args = ap.parse_args(argv)
    found = scenarios(args.directory, args.only)
    if not found:
        print(f"{args.directory}: no NAME.pcap + NAME.json with mountstats", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    results = []
    for name, pcap, doc in found:
        print(f"{name} ...", end=" ", file=sys.stderr, flush=True)
        results.append(analyse(name, pcap, doc))
        print(f"{results[-1]['analysis_seconds']:.1f} s", file=sys.stderr)
    directory = os.path.relpath(args.directory.resolve(), ROOT)
    facts = {
        "directory": directory if not directory.startswith("..") else str(args.directory),
        "commit": _commit(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "seconds": time.perf_counter() - t0,
        "load_average_end": os.getloadavg(),
    }
    text = markdown(results, facts)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".md").write_text(text)
    doc = {"facts": facts, "summary": summary(results), "scenarios": results}
    args.out.with_suffix(".json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
