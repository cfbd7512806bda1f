#!/usr/bin/env python3
"""The benchmark: nfstrace against tshark, epam's nfstrace and a plain read of the file.

    python3 bench/run.py [--quick] [--runs N] [--inputs DIR] [--only NAME] [--results DIR]

Every tool runs on the same file in the same invocation, each run in a fresh
subprocess whose wall time and peak RSS (``os.wait4`` rusage) are recorded; the
median wall time of the runs is reported.  Inputs are cached outside the repo
(default /var/tmp/nfstrace-bench/{full,quick}); results go to bench/results/
(``--quick``: into the inputs directory, never over the committed results).
See bench/README.md for what each input is and how to read the numbers.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib.util
import json
import os
import platform
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample-pcaps"
LAB = Path(os.environ.get("NFSTRACE_LAB", ROOT.parent / "shared" / "lab"))
# 256 MiB lab runs made earlier; used (hard-linked) before asking the lab for new ones.
BIG_CAPTURES = Path(os.environ.get("NFSTRACE_BENCH_CAPTURES", "/var/tmp/caps-big"))
# Lab runs of other sizes are looked for in <BIG_CAPTURES>-<size> (e.g. /var/tmp/caps-big-2048m)
DEFAULT_CACHE = Path(os.environ.get("NFSTRACE_BENCH_DIR", "/var/tmp/nfstrace-bench"))
LAB_FILE_MB = 256

# Decode RPC on the NFS port whatever the other side's port is (nfs-cp uses 802,
# which tshark would otherwise take for TLS).
TSHARK_DECODE_AS = ("-d", "tcp.port==2049,rpc", "-d", "udp.port==2049,rpc")
EPAM_NFSTRACE = Path("/usr/bin/nfstrace")
EPAM_PACKAGE = "nfstrace"
TIME = Path("/usr/bin/time")  # GNU time: the child's peak RSS
STDOUT_KEPT = 16 << 20  # bytes of a tool's output read back (its summary tables)
EXIT_WARNINGS = 6  # nfstrace's exit status when it analysed with warnings (ExitStatus.DAMAGED)

# Targets (issue 17), for the default parser: speed relative to tshark on every
# metadata-heavy input and on every write capture of at least 1 GB; peak RSS per
# packet on the metadata-heavy inputs; full payload vs -s 256 peak RSS.
TARGET_SPEED_VS_TSHARK_METADATA = 5.0
TARGET_SPEED_VS_TSHARK_BIG_WRITES = 10.0
BIG_WRITE_BYTES = 1_000_000_000
TARGET_RSS_BYTES_PER_PACKET = 300.0
TARGET_FULL_VS_S256_RSS = 1.5
# The split-file case: the 1M-packet metadata input cut into this many files by
# `editcap -c` (as rotation cuts): nfstrace reads the directory, the other tools
# the whole file (tshark and epam's nfstrace take one file).
SPLIT_FILES = 8
# nfstrace is also run with these extra options on the metadata-heavy inputs
# (many host pairs: what --workers splits).
PARALLEL_OPTIONS = ("--workers", "2")

# The metadata-heavy input: the small RPCs at the start of a real NFSv4.1 run
# (session set-up, LOOKUP, GETATTR, OPEN, SETATTR, LAYOUTGET), replicated as new
# sessions of a few clients, each copy started this long after the previous one.
METADATA_SOURCE = SAMPLES / "v41-tcp-nfsrs-w1m-d0-l0.pcap"
METADATA_PACKETS = {"full": 1_000_000, "quick": 20_000}  # the default size
METADATA_COPY_SPACING_US = 1000
METADATA_CLIENTS = 16
METADATA_FIRST_CLIENT = 0x0A000001  # 10.0.0.1, 10.0.0.2, ...
METADATA_FIRST_PORT = 1024

RUN_TIMEOUT_S = {"full": 3600, "quick": 300}
PROFILE_INPUT = "v3-write"
PARSER_CHECK_CAPTURE = SAMPLES / "v3-tcp-nfscp-w1m-d0-l0.pcap"  # can a backend run at all?
PROFILE_TOP = 30


@dataclass(frozen=True)
class InputSpec:
    """One benchmark input: where it comes from and what the tools are asked about it."""

    name: str
    filename: str  # the lab's name (or the generated file's)
    nfs_version: int  # for tshark's rpc,srt,100003,V
    scenario: str | None = None  # lab scenario that makes it (None: generated here)
    full_payload_twin: str | None = None  # for -s 256 inputs: the same traffic, full payload
    file_mb: int = LAB_FILE_MB  # bytes the lab's client writes
    packets: int = 0  # generated metadata input: frames (0: METADATA_PACKETS by mode)
    split: int = 0  # files the input is cut into (a directory; 0: one file)

    @property
    def metadata(self) -> bool:
        return self.scenario is None

    def metadata_packets(self, mode: str) -> int:
        return (
            METADATA_PACKETS["quick"]
            if mode == "quick"
            else (self.packets or METADATA_PACKETS[mode])
        )

    def file_for(self, mode: str) -> str:
        if self.scenario is None:  # the generated metadata-heavy capture
            name = f"meta-v41-{self.metadata_packets(mode)}p-{METADATA_CLIENTS}c.pcap"
            return f"{name}.split{self.split}" if self.split else name
        if self.file_mb != LAB_FILE_MB and mode != "quick":
            return f"{self.file_mb}m-{self.filename}"
        return self.filename

    def lab_captures(self) -> Path:
        """Where existing full-size lab runs of this size are looked for."""
        if self.file_mb == LAB_FILE_MB:
            return BIG_CAPTURES
        return BIG_CAPTURES.with_name(f"{BIG_CAPTURES.name}-{self.file_mb}m")


INPUTS: tuple[InputSpec, ...] = (
    InputSpec("v3-write", "v3-tcp-nfscp-w1m-d0-l0.pcap", 3, "v3-tcp-nfscp-w1m-d0-l0"),
    InputSpec(
        "v3-write-s256", "v3-tcp-nfscp-w1m-d0-l0.s256.pcap", 3, "v3-tcp-nfscp-w1m-d0-l0", "v3-write"
    ),
    InputSpec("v41-write", "v41-tcp-nfsrs-w1m-d0-l0.pcap", 4, "v41-tcp-nfsrs-w1m-d0-l0"),
    InputSpec(
        "v41-write-s256",
        "v41-tcp-nfsrs-w1m-d0-l0.s256.pcap",
        4,
        "v41-tcp-nfsrs-w1m-d0-l0",
        "v41-write",
    ),
    InputSpec("v3-udp-write", "v3-udp-py-w32k-d0-l0.pcap", 3, "v3-udp-py-w32k-d0-l0"),
    InputSpec("v41-metadata", "", 4),
    InputSpec("v41-metadata-5m", "", 4, packets=5_000_000),
    InputSpec("v41-metadata-10m", "", 4, packets=10_000_000),
    InputSpec("v41-metadata-split", "", 4, split=SPLIT_FILES),
    # The size administrators bring (2 GiB written): fixed costs weigh less.
    InputSpec(
        "v3-write-2g", "v3-tcp-nfscp-w1m-d0-l0.pcap", 3, "v3-tcp-nfscp-w1m-d0-l0", None, 2048
    ),
    InputSpec(
        "v3-write-2g-s256",
        "v3-tcp-nfscp-w1m-d0-l0.s256.pcap",
        3,
        "v3-tcp-nfscp-w1m-d0-l0",
        "v3-write-2g",
        2048,
    ),
    InputSpec(
        "v41-write-2g", "v41-tcp-nfsrs-w1m-d0-l0.pcap", 4, "v41-tcp-nfsrs-w1m-d0-l0", None, 2048
    ),
)


# ---------------------------------------------------------------- inputs


def _link_or_copy(src: Path, dst: Path) -> None:
    tmp = dst.with_name(dst.name + ".part")
    tmp.unlink(missing_ok=True)
    try:
        os.link(src, tmp)
    except OSError:  # another filesystem
        shutil.copyfile(src, tmp)
    tmp.replace(dst)


def _make_with_lab(spec: InputSpec, cache: Path) -> None:
    """Ask the lab for a run of the scenario writing spec.file_mb MiB (one lab run at a
    time: it refuses a second; we retry a few times)."""
    script = LAB / "make-captures.sh"
    if not script.exists():
        raise SystemExit(f"bench: cannot make {spec.filename}: {script} not found")
    out = cache / ("lab" if spec.file_mb == LAB_FILE_MB else f"lab-{spec.file_mb}m")
    cmd = [str(script), str(out), "--only", f"^{re.escape(spec.scenario or '')}$"]
    cmd += ["--file-mb", str(spec.file_mb)]
    for attempt in range(6):
        print(f"bench: making {spec.filename} with the lab: {' '.join(cmd)}", file=sys.stderr)
        if subprocess.run(cmd).returncode == 0 and (out / spec.filename).exists():
            _link_or_copy(out / spec.filename, cache / spec.file_for("full"))
            return
        time.sleep(60 * (attempt + 1))  # busy lab: wait for the other run
    raise SystemExit(f"bench: the lab did not make {spec.filename}")


def ensure_input(spec: InputSpec, mode: str, cache: Path) -> Path:
    """The input's path in the cache, found, linked from existing captures or made."""
    path = cache / spec.file_for(mode)
    if path.exists():
        return path
    cache.mkdir(parents=True, exist_ok=True)
    if spec.scenario is None:
        if spec.split:
            whole = ensure_input(dataclasses.replace(spec, split=0), mode, cache)
            split_capture(whole, path, spec.split)
        else:
            replicate_small_rpcs(METADATA_SOURCE, path, spec.metadata_packets(mode))
        return path
    source_dir = SAMPLES if mode == "quick" else spec.lab_captures()
    if (source_dir / spec.filename).exists():
        _link_or_copy(source_dir / spec.filename, path)
    elif mode == "quick":
        raise SystemExit(f"bench: {spec.filename} is neither in {cache} nor in {SAMPLES}")
    else:
        _make_with_lab(spec, cache)
    return path


_PCAP_MAGIC_US = 0xA1B2C3D4
_REC = struct.Struct("<IIII")  # ts_sec, ts_usec, incl_len, orig_len (little-endian pcap)


def _pcap_records(path: Path) -> tuple[bytes, list[tuple[int, bytes]]]:
    """Global header and (ts_us, frame) records of a little-endian microsecond pcap."""
    data = path.read_bytes()
    if struct.unpack_from("<I", data)[0] != _PCAP_MAGIC_US:
        raise SystemExit(f"bench: {path}: not a little-endian microsecond pcap")
    records, pos = [], 24
    while pos + _REC.size <= len(data):
        sec, usec, incl, _orig = _REC.unpack_from(data, pos)
        pos += _REC.size
        records.append((sec * 1_000_000 + usec, data[pos : pos + incl]))
        pos += incl
    return data[:24], records


def _whole_rpc_frame(frame: bytes) -> tuple[int, int, int] | None:
    """(IP header offset, TCP header offset, payload length) of an Ethernet/IPv4/TCP
    frame whose payload is empty or exactly one last-fragment RPC record; else None."""
    if len(frame) < 34 or frame[12:14] != b"\x08\x00" or frame[23] != 6:
        return None
    ip = 14
    ip_len = struct.unpack_from(">H", frame, ip + 2)[0]
    tcp = ip + (frame[ip] & 0x0F) * 4
    payload = tcp + (frame[tcp + 12] >> 4) * 4
    length = ip + ip_len - payload
    if length < 0 or ip + ip_len > len(frame):
        return None
    if length:
        mark = struct.unpack_from(">I", frame, payload)[0]
        if mark != 0x80000000 | (length - 4):
            return None
    return ip, tcp, length


def _checksum_adjust(checksum: int, old: bytes, new: bytes) -> int:
    """Internet checksum after a 16-bit-aligned field changed from old to new
    (RFC 1624, eq. 3: HC' = ~(~HC + ~m + m'))."""
    total = ~checksum & 0xFFFF
    for i in range(0, len(old), 2):
        total += (~int.from_bytes(old[i : i + 2]) & 0xFFFF) + int.from_bytes(new[i : i + 2])
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _rewrite(buf: bytearray, at: int, new: bytes, checksums: Sequence[int]) -> None:
    """Replace the field at buf[at:] by new, adjusting the checksums at the given offsets."""
    old = bytes(buf[at : at + len(new)])
    if old == new:
        return
    buf[at : at + len(new)] = new
    for c in checksums:
        value = _checksum_adjust(int.from_bytes(buf[c : c + 2]), old, new)
        buf[c : c + 2] = value.to_bytes(2)


def replicate_small_rpcs(source: Path, out: Path, min_packets: int) -> int:
    """Write a capture of >= min_packets frames made of the source's leading small RPCs.

    The leading frames (TCP handshake, then segments each holding one whole RPC
    record) are copied as new sessions of a few clients: copy k comes from client
    10.0.0.(1 + k % clients), from its own TCP port, with the xids moved past those
    of the client's earlier copies (so no two copies share a connection or a
    client's xid), and starts k * spacing after the first.  IPv4 and TCP checksums
    are adjusted.  Returns the frames written.
    """
    header, records = _pcap_records(source)
    prefix: list[tuple[int, bytes, int, int, int]] = []
    for ts, frame in records:
        where = _whole_rpc_frame(frame)
        if where is None:
            break
        prefix.append((ts, frame, *where))
    xids = [
        int.from_bytes(f[tcp + (f[tcp + 12] >> 4) * 4 + 4 :][:4])
        for _, f, _, tcp, length in prefix
        if length
    ]
    if not xids:
        raise SystemExit(f"bench: {source} does not start with whole small RPCs")
    xid_stride = max(xids) - min(xids) + 1
    syn, syn_ip, syn_tcp = prefix[0][1], prefix[0][2], prefix[0][3]
    client_ip = syn[syn_ip + 12 : syn_ip + 16]  # the SYN's sender
    client_port = syn[syn_tcp : syn_tcp + 2]
    t0 = prefix[0][0]
    offsets = np.array([p[0] - t0 for p in prefix], dtype=np.int64)
    copies = -(-min_packets // len(prefix))
    if copies // METADATA_CLIENTS >= 65536 - METADATA_FIRST_PORT:
        raise SystemExit(f"bench: {min_packets} packets need more than {METADATA_CLIENTS} clients")
    starts = np.arange(copies, dtype=np.int64) * METADATA_COPY_SPACING_US
    times = (starts[:, None] + offsets[None, :]).ravel()
    order = np.argsort(times, kind="stable")  # copy-major layout: ties keep copy order
    tmp = out.with_name(out.name + ".part")
    with open(tmp, "wb", buffering=1 << 20) as f:
        f.write(header)
        for flat in order.tolist():
            copy, index = divmod(flat, len(prefix))
            session, client = divmod(copy, METADATA_CLIENTS)
            _, frame, ip, tcp, length = prefix[index]
            new_ip = (METADATA_FIRST_CLIENT + client).to_bytes(4)
            new_port = (METADATA_FIRST_PORT + session).to_bytes(2)
            buf = bytearray(frame)
            to_server = buf[ip + 12 : ip + 16] == client_ip
            ip_at, port_at = (ip + 12, tcp) if to_server else (ip + 16, tcp + 2)
            assert buf[ip_at : ip_at + 4] == client_ip and buf[port_at : port_at + 2] == client_port
            _rewrite(buf, ip_at, new_ip, (ip + 10, tcp + 16))  # IPv4 header, TCP pseudo-header
            _rewrite(buf, port_at, new_port, (tcp + 16,))
            if length:
                xid_at = tcp + (buf[tcp + 12] >> 4) * 4 + 4  # after the record mark
                xid = int.from_bytes(buf[xid_at : xid_at + 4]) + session * xid_stride
                _rewrite(buf, xid_at, (xid & 0xFFFFFFFF).to_bytes(4), (tcp + 16,))
            ts = t0 + int(times[flat])
            f.write(_REC.pack(ts // 1_000_000, ts % 1_000_000, len(buf), len(buf)))
            f.write(buf)
    tmp.replace(out)
    return copies * len(prefix)


def split_capture(whole: Path, out: Path, files: int) -> None:
    """``whole`` cut into ``files`` pieces of equal frame counts (editcap -c) in
    the directory ``out``, as a rotating tcpdump would cut it."""
    tmp = out.with_name(out.name + ".part")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    per_file = -(-count_packets(whole) // files)
    subprocess.run(["editcap", "-c", str(per_file), str(whole), str(tmp / whole.name)], check=True)
    tmp.replace(out)


def whole_file(path: Path) -> Path:
    """The file a split input was cut from (the tools that read one file read it)."""
    return path.with_name(path.name.rsplit(".split", 1)[0]) if path.is_dir() else path


def count_packets(path: Path) -> int:
    """Frames in a pcap (record headers only); capinfos for other formats; a
    directory: its files' sum."""
    if path.is_dir():
        return sum(count_packets(p) for p in sorted(path.iterdir()))
    with open(path, "rb") as f:
        head = f.read(24)
        if len(head) == 24 and struct.unpack_from("<I", head)[0] in (_PCAP_MAGIC_US, 0xA1B23C4D):
            frames = 0
            while rec := f.read(_REC.size):
                if len(rec) < _REC.size:
                    break
                frames += 1
                f.seek(_REC.unpack(rec)[2], os.SEEK_CUR)
            return frames
    out = subprocess.run(["capinfos", "-c", "-M", "-T", str(path)], capture_output=True, text=True)
    return int(out.stdout.splitlines()[-1].split("\t")[1])


# ---------------------------------------------------------------- tools


@dataclass(frozen=True)
class Tool:
    """A command under test: its argv for an input, and how to read the NFS calls
    it reports from its stdout (None: it does not say)."""

    name: str
    argv: Callable[[Path, InputSpec], list[str]]
    calls_seen: Callable[[str], int | None]
    version: str
    cwd: str | None = None
    env: dict[str, str] | None = None
    discard_stdout: bool = False  # to /dev/null (see measure)
    metadata_only: bool = False  # run on the metadata-heavy inputs only


@dataclass(frozen=True)
class Absent:
    name: str
    reason: str


def nfstrace_env(source: Path) -> dict[str, str]:
    """Run the nfstrace in source (this checkout, or a snapshot of a commit), not
    whatever is installed: PYTHONPATH comes before an editable install's finder.
    This checkout without its extension built in place (installed with `pip
    install .`, as README's test command and CI do) runs the installed package,
    which was built from it: its own nfstrace/ cannot run without the extension."""
    env = dict(os.environ)
    env["PYTHONSAFEPATH"] = "1"  # not the current directory first: it may be another checkout
    # Bytecode cached (outside the trees) as an installed package has it: with
    # PYTHONDONTWRITEBYTECODE=1 (a sandbox's default) each run would compile every
    # module of nfstrace from source, ~0.2 s (bench/small.py measures it).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(DEFAULT_CACHE / "pycache")
    if source.resolve() == ROOT and not any((ROOT / "nfstrace").glob("_native*.so")):
        return env
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(source), env.get("PYTHONPATH")]))
    return env


def short_sha(commit: str) -> str:
    """The commit's abbreviated hash in this checkout."""
    return subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", commit],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def snapshot(commit: str, cache: Path) -> tuple[Path, str]:
    """The nfstrace package as of a commit, exported (git archive: read-only) into the
    cache, so that a benchmark does not race with edits in the working tree; with
    this checkout's built Rust extension copied in when native/ did not change
    since (without one the snapshot cannot run: a source tree has no extension)."""
    sha = short_sha(commit)
    dest = cache / f"src-{sha}"
    if not (dest / "nfstrace" / "__init__.py").exists():
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", sha, "nfstrace"], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
        same_native = subprocess.run(
            ["git", "-C", str(ROOT), "diff", "--quiet", sha, "--", "native"]
        )
        built = sorted((ROOT / "nfstrace").glob("_native*.so"))
        if built and same_native.returncode == 0:
            shutil.copy2(built[0], dest / "nfstrace" / built[0].name)
    return dest, sha


NFSTRACE_CMD = [sys.executable, "-m", "nfstrace.cli"]

_PARSER_PROBE = """
import enum, json, sys, typing, typer
from nfstrace.cli import app


def choices(param):
    found = getattr(getattr(param, "type", None), "choices", None)  # a click.Choice
    if found:
        return [getattr(c, "value", c) for c in found]
    # newer Typer keeps the annotation instead: an Enum or a Literal
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return [m.value for m in annotation]
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    # a plain string option: the table of parsers the CLI validates it against
    return list(getattr(sys.modules["nfstrace.cli"], "PARSERS", None) or [])


command = typer.main.get_command(app)
# a group of commands or the one command (Typer may vendor its own click: no isinstance)
analyze = getattr(command, "commands", {}).get("analyze", command)
for param in analyze.params:
    if "--parser" in getattr(param, "opts", ()):
        default = getattr(param.default, "value", param.default)  # an Enum member with Typer
        print(json.dumps({"choices": choices(param), "default": default}, default=str))
        break
else:
    print(json.dumps(None))
"""


def nfstrace_parsers(env: dict[str, str]) -> tuple[str | None, list[str]]:
    """(default parser, other parsers) offered by ``nfstrace analyze --parser``;
    (None, []) while the CLI has no such option."""
    probe = subprocess.run(
        [sys.executable, "-c", _PARSER_PROBE], capture_output=True, text=True, env=env
    )
    if probe.returncode != 0:
        raise SystemExit(f"bench: cannot import nfstrace's CLI: {probe.stderr[-2000:]}")
    found = json.loads(probe.stdout)
    if not found:
        return None, []
    default = found["default"] if isinstance(found["default"], str) else None
    return default, [c for c in found["choices"] if c != default]


def tshark_srt_calls(stdout: str) -> int:
    """Calls summed over the rows of tshark's ``-z rpc,srt`` table (replied calls only)."""
    rows = re.findall(r"^\s*\d+\s+\S+\s+(\d+)\s+[\d.]+\s", stdout, re.M)
    return sum(int(n) for n in rows)


def epam_operations(stdout: str) -> int:
    """NFS operations epam's breakdown analyzer counted (the first total per protocol)."""
    total = 0
    for section in re.split(r"^NFS v", stdout, flags=re.M)[1:]:
        found = re.search(r"Total operations: (\d+)", section)
        total += int(found.group(1)) if found else 0
    return total


def _first_line(cmd: Sequence[str], env: dict[str, str] | None = None) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    except OSError:
        return ""
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr) else ""


def _epam_plugin() -> Path | None:
    listed = subprocess.run(["dpkg", "-L", EPAM_PACKAGE], capture_output=True, text=True).stdout
    for line in listed.splitlines():
        if line.endswith("/libbreakdown.so"):
            return Path(line)
    found = sorted(Path("/usr/lib").glob("**/nfstrace/libbreakdown.so"))
    return found[0] if found else None


def discover_tools(
    workdir: Path, env: dict[str, str], other_parsers: bool = True
) -> tuple[list[Tool], list[Absent]]:
    """The commands to compare; tools that are not installed are reported absent."""
    tools: list[Tool] = []
    absent: list[Absent] = []
    version = _first_line([*NFSTRACE_CMD, "--version"], env)
    default, others = nfstrace_parsers(env)
    usable = []
    if "parser: native" in version:  # the default (auto) is the native parser: run it once
        others = [p for p in others if p != "native"]
    if not other_parsers:
        absent += [
            Absent(f"nfstrace --parser {p}", "left out (--default-parser-only)") for p in others
        ]
        others = []
    for parser in others:  # a backend whose library is missing is reported, not run
        check = [
            *NFSTRACE_CMD,
            "analyze",
            str(PARSER_CHECK_CAPTURE),
            "--quiet",
            "--no-report",
            "--parser",
            parser,
        ]
        tried = measure(check, str(workdir), env, 600)
        if tried.exit_status == 0:
            usable.append(parser)
        else:
            why = (tried.stderr_tail.strip().splitlines() or ["failed"])[-1]
            absent.append(Absent(f"nfstrace --parser {parser}", why))
    variants: list[tuple[str, list[str]]] = [("nfstrace", [])]
    variants += [(f"nfstrace --parser {p}", ["--parser", p]) for p in usable]
    variants.append((f"nfstrace {' '.join(PARALLEL_OPTIONS)}", list(PARALLEL_OPTIONS)))
    for name, extra in variants:
        tools.append(
            Tool(
                name=name,
                argv=lambda p, _s, extra=extra: [
                    *NFSTRACE_CMD,
                    "analyze",
                    str(p),
                    "--quiet",
                    "--no-report",
                    *extra,
                ],
                calls_seen=lambda _out: None,  # counted once from its JSON (see nfstrace_calls)
                version=version + (f", default parser {default}" if default else ""),
                env=env,
                metadata_only=extra == list(PARALLEL_OPTIONS),
            )
        )
    tshark = shutil.which("tshark")
    if tshark:
        tools.append(
            Tool(
                name="tshark",
                argv=lambda p, s: [
                    tshark,
                    "-n",
                    "-q",
                    "-r",
                    str(whole_file(p)),
                    *TSHARK_DECODE_AS,
                    "-z",
                    f"rpc,srt,100003,{s.nfs_version}",
                ],
                calls_seen=tshark_srt_calls,
                version=_first_line([tshark, "--version"]),
            )
        )
    else:
        absent.append(Absent("tshark", "tshark not installed (apt-get install -y tshark)"))
    plugin = _epam_plugin() if EPAM_NFSTRACE.exists() else None
    epam_version = _first_line(["dpkg-query", "-W", "-f", "${Version}", EPAM_PACKAGE])
    if EPAM_NFSTRACE.exists() and plugin and epam_version:
        tools.append(
            Tool(
                name="epam-nfstrace",
                argv=lambda p, _s: [
                    str(EPAM_NFSTRACE),
                    "-m",
                    "stat",
                    "-I",
                    str(whole_file(p)),
                    "-a",
                    str(plugin),
                ],
                calls_seen=epam_operations,
                version=f"nfstrace (epam) {epam_version}",
                cwd=str(workdir),  # it writes nfstrace.log into its working directory
            )
        )
    else:
        absent.append(
            Absent(
                "epam-nfstrace",
                f"epam's nfstrace not installed ({EPAM_NFSTRACE} with libbreakdown.so from the "
                f"Debian package: apt-get install -y {EPAM_PACKAGE})",
            )
        )
    tools.append(
        Tool(
            name="read-floor",
            argv=lambda p, _s: ["cat", str(whole_file(p))],
            calls_seen=lambda _out: None,
            version=_first_line(["cat", "--version"]),
            discard_stdout=True,
        )
    )
    return tools, absent


# ---------------------------------------------------------------- measuring


@dataclass(frozen=True)
class Run:
    wall_s: float
    peak_rss_kb: int
    exit_status: int
    stdout: str
    stderr_tail: str


def measure(
    argv: list[str],
    cwd: str | None,
    env: dict[str, str] | None,
    timeout: float,
    discard_stdout: bool = False,
) -> Run:
    """Run argv once in a fresh process: wall time and the child's own peak RSS.

    Through /usr/bin/time when present: a child forked from this Python process
    inherits its peak RSS (Linux keeps the high-water mark across exec), so
    wait4's figure would never go below ours; time's child starts small.
    discard_stdout: to /dev/null (`cat FILE > /dev/null`, the read floor: a file's
    bytes written to a temporary file would time the disk, and read back here
    they once took this process to 24 GB on a 2 GiB input)."""
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.NamedTemporaryFile("r") as rss,
        open(os.devnull, "wb") as devnull,
    ):
        if TIME.exists():
            argv = [str(TIME), "-f", "%M", "-o", rss.name, *argv]
        start = time.perf_counter()
        stdout = devnull if discard_stdout else out
        proc = subprocess.Popen(argv, stdout=stdout, stderr=err, cwd=cwd, env=env)
        deadline = start + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.002)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # already reaped
        out.seek(0)
        err.seek(0)
        stderr = err.read().decode(errors="replace")
        # time's last line is %M (KiB); before it, a note if the command failed
        reported = rss.read().split()
        peak = int(reported[-1]) if reported and reported[-1].isdigit() else usage.ru_maxrss
        return Run(
            wall_s=wall,
            peak_rss_kb=peak,  # KiB
            exit_status=proc.returncode,
            stdout=out.read(STDOUT_KEPT).decode(errors="replace"),
            stderr_tail=stderr[-500:],
        )


def nfstrace_calls(
    path: Path, workdir: Path, env: dict[str, str], timeout: float
) -> dict[str, int]:
    """NFS calls our default parser saw (replied ones, comparable with tshark's SRT
    table), from one untimed run writing the JSON summary."""
    summary = workdir / "nfstrace-summary.json"
    run = measure(
        [*NFSTRACE_CMD, "analyze", str(path), "--quiet", "--no-report", "--json", str(summary)],
        None,
        env,
        timeout,
    )
    # exit 6: analysed and written, with warnings (a limit reached, damage): counted
    if run.exit_status not in (0, EXIT_WARNINGS) or not summary.exists():
        raise SystemExit(f"bench: nfstrace failed on {path}: {run.stderr_tail}")
    data = json.loads(summary.read_text())
    nfs = [row for row in data["latency"] if row["program"] == "nfs"]
    return {
        "calls": sum(row["calls"] for row in nfs),
        "replied": sum(row["replied"] for row in nfs),
        "messages": data["overview"]["messages"],
    }


def _median(values: list[float]) -> float:
    return statistics.median(values)


def bench_input(
    spec: InputSpec,
    path: Path,
    tools: list[Tool],
    runs: int,
    workdir: Path,
    timeout: float,
) -> dict:
    whole = whole_file(path)
    size = whole.stat().st_size
    packets = count_packets(path)
    measure(["cat", str(whole)], None, None, timeout, discard_stdout=True)  # warm the cache
    if path.is_dir():
        measure(["cat", *map(str, sorted(path.iterdir()))], None, None, timeout, True)
    ours = nfstrace_calls(path, workdir, tools[0].env or {}, timeout)
    tools = [t for t in tools if spec.metadata or not t.metadata_only]
    samples: dict[str, list[Run]] = {t.name: [] for t in tools}
    for _ in range(runs):  # interleaved, so a burst of load hits every tool alike
        for tool in tools:
            run = measure(tool.argv(path, spec), tool.cwd, tool.env, timeout, tool.discard_stdout)
            samples[tool.name].append(run)
    results: dict[str, dict] = {}
    calls: dict[str, int | None] = {"nfstrace": ours["replied"]}
    for tool in tools:
        done = samples[tool.name]
        wall = _median([r.wall_s for r in done])
        failed = [r for r in done if r.exit_status != 0]
        results[tool.name] = {
            "wall_s": round(wall, 4),
            "walls_s": [round(r.wall_s, 4) for r in done],
            "packets_per_s": round(packets / wall, 1),
            "mb_per_s": round(size / 1e6 / wall, 3),
            "peak_rss_mb": round(max(r.peak_rss_kb for r in done) / 1024, 1),
            "rss_bytes_per_packet": round(max(r.peak_rss_kb for r in done) * 1024 / packets, 1),
            "exit_status": failed[0].exit_status if failed else 0,
        }
        if failed:
            results[tool.name]["error"] = failed[0].stderr_tail
        seen = tool.calls_seen(done[-1].stdout)
        if seen is not None:
            calls[tool.name] = seen
    return {
        "name": spec.name,
        "file": str(path),
        "bytes": size,
        "packets": packets,
        "nfs_version": spec.nfs_version,
        "nfstrace_messages": ours["messages"],
        "nfs_calls": calls,
        "results": results,
        "speedup": speedups(results),
    }


def speedups(results: dict[str, dict]) -> dict[str, float]:
    """Speed of each nfstrace backend relative to the other tools (>1: nfstrace faster)."""
    out = {}
    for ours in (n for n in results if n.startswith("nfstrace")):
        for other in ("tshark", "epam-nfstrace", "read-floor"):
            if other in results:
                ratio = results[other]["wall_s"] / results[ours]["wall_s"]
                out[f"{ours}/{other}"] = round(ratio, 3)
    return out


def streaming_memory(inputs: list[dict]) -> list[dict]:
    """Peak RSS of the default parser, full payload vs the -s 256 twin of the same traffic."""
    by_name = {i["name"]: i for i in inputs}
    pairs = []
    for spec in INPUTS:
        twin = spec.full_payload_twin
        if twin and spec.name in by_name and twin in by_name:
            full = by_name[twin]["results"]["nfstrace"]["peak_rss_mb"]
            s256 = by_name[spec.name]["results"]["nfstrace"]["peak_rss_mb"]
            ratio = max(full, s256) / min(full, s256)
            pairs.append(
                {
                    "full": twin,
                    "s256": spec.name,
                    "rss_full_mb": full,
                    "rss_s256_mb": s256,
                    "ratio": round(ratio, 3),
                    "target": TARGET_FULL_VS_S256_RSS,
                    "met": ratio <= TARGET_FULL_VS_S256_RSS,
                }
            )
    return pairs


def targets(inputs: list[dict], memory: list[dict]) -> dict:
    """Each target of issue 17 with the inputs it is judged on (default parser)."""
    metadata = [i for i in inputs if i["name"].startswith("v41-metadata")]
    big_writes = [
        i
        for i in inputs
        if not i["name"].startswith("v41-metadata") and i["bytes"] >= BIG_WRITE_BYTES
    ]

    def vs_tshark(chosen: list[dict], target: float) -> dict:
        per = {i["name"]: i["speedup"].get("nfstrace/tshark") for i in chosen}
        known = {k: v for k, v in per.items() if v is not None}
        return {
            "target": target,
            "per_input": known,
            "met": bool(known) and min(known.values()) >= target,
        }

    per_packet = {
        i["name"]: i["results"]["nfstrace"]["rss_bytes_per_packet"]
        for i in metadata
        if i["results"]["nfstrace"]["exit_status"] in (0, EXIT_WARNINGS)  # analysed
    }
    return {
        "speed_vs_tshark_metadata": vs_tshark(metadata, TARGET_SPEED_VS_TSHARK_METADATA),
        "speed_vs_tshark_big_writes": vs_tshark(big_writes, TARGET_SPEED_VS_TSHARK_BIG_WRITES),
        "rss_bytes_per_packet_metadata": {
            "target": TARGET_RSS_BYTES_PER_PACKET,
            "per_input": per_packet,
            "failed": [i["name"] for i in metadata if i["name"] not in per_packet],
            "met": bool(per_packet)
            and len(per_packet) == len(metadata)
            and max(per_packet.values()) <= TARGET_RSS_BYTES_PER_PACKET,
        },
        "full_vs_s256_rss": {
            "target": TARGET_FULL_VS_S256_RSS,
            "met": bool(memory) and all(p["met"] for p in memory),
        },
    }


# ---------------------------------------------------------------- profile


def profile(path: Path, out_dir: Path, name: str, env: dict[str, str], timeout: float) -> dict:
    """cProfile of ``nfstrace analyze`` on one input: top entries by cumulative and
    by own time, as text in out_dir and the top few in the JSON."""
    import pstats

    stats_file = out_dir / f"profile-{name}.pstats"
    run = measure(
        [*NFSTRACE_CMD[:1], "-m", "cProfile", "-o", str(stats_file), "-m", "nfstrace.cli"]
        + ["analyze", str(path), "--quiet", "--no-report"],
        None,
        env,
        timeout,
    )
    if run.exit_status != 0:
        return {"error": run.stderr_tail}
    text_file = out_dir / f"profile-{name}.txt"
    with open(text_file, "w") as f:
        f.write(f"cProfile of: nfstrace analyze {path.name} --quiet ({run.wall_s:.2f} s with ")
        f.write("the profiler's overhead)\n")
        for key in ("cumulative", "tottime"):
            f.write(f"\n==== top {PROFILE_TOP} by {key} ====\n")
            stats = pstats.Stats(str(stats_file), stream=f)
            stats.strip_dirs().sort_stats(key).print_stats(PROFILE_TOP)
    stats = pstats.Stats(str(stats_file))
    total = stats.total_tt  # type: ignore[attr-defined]
    rows = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)  # type: ignore[attr-defined]
    top = [
        {
            "function": f"{Path(file).name}:{line}({func})",
            "calls": calls,
            "tottime_s": round(tottime, 3),
            "cumtime_s": round(cumtime, 3),
            "share_of_total": round(tottime / total, 3),
        }
        for (file, line, func), (_cc, calls, tottime, cumtime, _callers) in rows[:10]
    ]
    stats_file.unlink()
    return {
        "input": name,
        "wall_s_profiled": round(run.wall_s, 2),
        "text": text_file.name,
        "top_by_tottime": top,
    }


# ---------------------------------------------------------------- report


def working_tree_label() -> str:
    """HEAD's short hash, with "+changes" if the nfstrace package has uncommitted edits."""
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--", "nfstrace"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return f"working tree at {commit}" + (" +changes" if dirty else "")


def machine_facts() -> dict:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu or platform.processor(),
        "cores": os.cpu_count(),
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
    }


def _fmt(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "–"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = [
        f"# nfstrace benchmark ({report['mode']}, {report['runs']} run(s) per tool, median)",
        "",
        f"{report['date']} · {m['cpu']} · {m['cores']} cores · {m['memory_gb']} GB · "
        f"Python {m['python']} · nfstrace {report['nfstrace_source']}",
        "",
        f"Load average at start {report['load_average']['start']}, at end "
        f"{report['load_average']['end']}: "
        + ("**the machine was busy** (timings noisy)." if report["busy"] else "machine idle."),
        "",
        "Tools: " + "; ".join(f"`{n}`: {t['version']}" for n, t in report["tools"].items()),
    ]
    lines += [f"\n**Absent: {a['name']}**: {a['reason']}" for a in report["absent"]]
    lines += [
        "",
        "| input | packets | MB | tool | wall s | packets/s | MB/s | peak RSS MB | RSS B/packet "
        "| NFS calls |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for i in report["inputs"]:
        for name, r in i["results"].items():
            calls = i["nfs_calls"].get(name)
            flag = "" if r["exit_status"] == 0 else f" (exit {r['exit_status']})"
            lines.append(
                f"| {i['name']} | {i['packets']:,} | {i['bytes'] / 1e6:,.0f} | {name}{flag} "
                f"| {_fmt(r['wall_s'], 3)} | {r['packets_per_s']:,.0f} | {_fmt(r['mb_per_s'], 1)} "
                f"| {_fmt(r['peak_rss_mb'], 0)} | {_fmt(r.get('rss_bytes_per_packet'), 0)} "
                f"| {'' if calls is None else f'{calls:,}'} |"
            )
    lines += [
        "",
        "Speed of nfstrace relative to each tool (other's wall time / nfstrace's; >1: "
        "nfstrace faster):",
        "",
    ]
    keys = sorted({k for i in report["inputs"] for k in i["speedup"]})
    lines += ["| input | " + " | ".join(keys) + " |", "|---|" + "---:|" * len(keys)]
    for i in report["inputs"]:
        lines.append(
            f"| {i['name']} | " + " | ".join(_fmt(i["speedup"].get(k), 3) for k in keys) + " |"
        )
    lines += ["", "Streaming memory (default parser, peak RSS):", ""]
    lines += ["| traffic | full MB | -s 256 MB | ratio | ≤ 1.5 |", "|---|---:|---:|---:|---|"]
    for p in report["streaming_memory"]:
        lines.append(
            f"| {p['full']} | {p['rss_full_mb']:.0f} | {p['rss_s256_mb']:.0f} "
            f"| {p['ratio']:.2f} | {'yes' if p['met'] else 'NO'} |"
        )
    t = report["targets"]

    def said(target: dict, what: str, unit: str = "×") -> str:
        per = ", ".join(f"{k} {v:,.2f}{unit}" for k, v in target["per_input"].items())
        return (
            f"- {what}: " + ("met" if target["met"] else "**not met**") + f" ({per or 'no input'})"
        )

    rss = t["rss_bytes_per_packet_metadata"]
    lines += [
        "",
        "Targets (default parser):",
        "",
        said(
            t["speed_vs_tshark_metadata"],
            f"≥ {TARGET_SPEED_VS_TSHARK_METADATA:.0f}× tshark on every metadata-heavy input",
        ),
        said(
            t["speed_vs_tshark_big_writes"],
            f"≥ {TARGET_SPEED_VS_TSHARK_BIG_WRITES:.0f}× tshark on every write capture ≥ 1 GB",
        ),
        said(
            rss,
            f"peak RSS ≤ {TARGET_RSS_BYTES_PER_PACKET:.0f} bytes per packet on the "
            "metadata-heavy inputs",
            " B",
        )
        + (f"; failed: {', '.join(rss['failed'])}" if rss["failed"] else ""),
        "- full payload vs -s 256 peak RSS within 1.5×: "
        + ("met" if t["full_vs_s256_rss"]["met"] else "**not met**"),
    ]
    prof = report.get("profile")
    if prof and "top_by_tottime" in prof:
        lines += [
            "",
            f"Profile (cProfile, {prof['input']}, {prof['wall_s_profiled']} s profiled; "
            f"whole listing in {prof['text']}), top by own time:",
            "",
            "| function | calls | own s | cumulative s | share |",
            "|---|---:|---:|---:|---:|",
        ]
        lines += [
            f"| `{e['function']}` | {e['calls']:,} | {e['tottime_s']:.2f} | {e['cumtime_s']:.2f} "
            f"| {e['share_of_total']:.0%} |"
            for e in prof["top_by_tottime"]
        ]
    return "\n".join(lines) + "\n"


def scaling_run(args: argparse.Namespace) -> int:
    """``--scaling``: bench/scaling.py's cases at N and 4N, this checkout or --commit."""
    spec = importlib.util.spec_from_file_location("bench_scaling", ROOT / "bench" / "scaling.py")
    assert spec and spec.loader
    scaling = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = scaling
    spec.loader.exec_module(scaling)
    cache = args.inputs or DEFAULT_CACHE / "scaling"
    results_dir = args.results or ROOT / "bench" / "results"
    if args.commit:
        source, sha = snapshot(args.commit, cache)
        label = f"commit {sha}"
    else:
        source, label = ROOT, working_tree_label()
    load_start = [round(x, 2) for x in os.getloadavg()]
    rows = scaling.scaling(cache, args.scaling_n, args.runs or 1, env=nfstrace_env(source))
    load_end = [round(x, 2) for x in os.getloadavg()]
    report = {
        "format": 1,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine_facts(),
        "nfstrace_source": label,
        "load_average": {"start": load_start, "end": load_end},
        "cases": rows,
    }
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / "scaling.json").write_text(json.dumps(report, indent=1) + "\n")
    text = (
        f"# Scaling: time at N and 4N ({label}, {report['date']}, load "
        f"{load_start[0]}-{load_end[0]})\n\nLinear: about 4; quadratic: about 16.\n\n"
        + scaling.markdown(rows)
    )
    (results_dir / "scaling.md").write_text(text)
    print(text)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small inputs, 1 run: a sanity check")
    ap.add_argument("--runs", type=int, help="runs per tool and input (default 3; --quick 1)")
    ap.add_argument("--inputs", type=Path, help=f"input cache (default {DEFAULT_CACHE}/MODE)")
    ap.add_argument("--only", action="append", help="inputs whose name contains this (repeatable)")
    ap.add_argument(
        "--results",
        type=Path,
        help="output directory (default bench/results; --quick: INPUTS/results)",
    )
    ap.add_argument(
        "--commit",
        help="benchmark nfstrace as of this commit (exported into the input cache), "
        "not the working tree",
    )
    ap.add_argument("--no-profile", action="store_true", help="skip the cProfile run")
    ap.add_argument(
        "--default-parser-only",
        action="store_true",
        help="leave out the other --parser choices (the pure-Python ones take minutes per "
        "million packets)",
    )
    ap.add_argument(
        "--scaling",
        action="store_true",
        help="only the scaling cases (bench/scaling.py): each at --scaling-n and 4x that, "
        "the ratio of the times; into RESULTS/scaling.md and scaling.json",
    )
    ap.add_argument("--scaling-n", type=int, default=40_000, help="N of --scaling")
    args = ap.parse_args(argv)
    if args.scaling:
        return scaling_run(args)
    mode = "quick" if args.quick else "full"
    runs = args.runs or (1 if args.quick else 3)
    cache = args.inputs or DEFAULT_CACHE / mode
    results_dir = args.results or (cache / "results" if args.quick else ROOT / "bench" / "results")
    timeout = RUN_TIMEOUT_S[mode]
    specs = [s for s in INPUTS if not args.only or any(o in s.name for o in args.only)]
    if mode == "quick":  # small stand-ins of the 2 GiB / 5M / 10M inputs would repeat the others
        specs = [s for s in specs if s.file_mb == LAB_FILE_MB and not s.packets]
    if not specs:
        ap.error(f"--only matched no input; inputs are {', '.join(s.name for s in INPUTS)}")
    results_dir.mkdir(parents=True, exist_ok=True)
    if args.commit:
        source, sha = snapshot(args.commit, cache)
        source_label = f"commit {sha}"
    else:
        source, source_label = ROOT, working_tree_label()
    env = nfstrace_env(source)
    load_start = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="nfstrace-bench-") as tmp:
        workdir = Path(tmp)
        tools, absent = discover_tools(workdir, env, not args.default_parser_only)
        for a in absent:
            print(f"bench: {a.name} absent: {a.reason}", file=sys.stderr)
        paths = [(s, ensure_input(s, mode, cache)) for s in specs]
        inputs = []
        for spec, path in paths:
            print(f"bench: {spec.name} ({path}) ...", file=sys.stderr)
            result = bench_input(spec, path, tools, runs, workdir, timeout)
            calls = ", ".join(f"{k} {v:,}" for k, v in result["nfs_calls"].items())
            print(f"bench:   NFS calls seen (replied): {calls}", file=sys.stderr)
            inputs.append(result)
        prof = None
        profile_path = dict((s.name, p) for s, p in paths).get(PROFILE_INPUT)
        if profile_path and not args.no_profile:
            prof = profile(profile_path, results_dir, PROFILE_INPUT, env, timeout)
    memory = streaming_memory(inputs)
    load_end = [round(x, 2) for x in os.getloadavg()]
    report = {
        "format": 1,
        "mode": mode,
        "runs": runs,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine_facts(),
        "nfstrace_source": source_label,
        "load_average": {"start": load_start, "end": load_end},
        # the benchmark itself keeps about one core busy by its end
        "busy": load_start[0] > 0.5 or load_end[0] > 1.5,
        "tools": {
            t.name: {"version": t.version, "command": " ".join(t.argv(Path("FILE"), INPUTS[0]))}
            for t in tools
        },
        "absent": [{"name": a.name, "reason": a.reason} for a in absent],
        "inputs": inputs,
        "streaming_memory": memory,
        "targets": targets(inputs, memory),
        "profile": prof,
    }
    (results_dir / "benchmark.json").write_text(json.dumps(report, indent=1) + "\n")
    (results_dir / "benchmark.md").write_text(markdown(report))
    print(markdown(report))
    print(f"bench: results in {results_dir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
