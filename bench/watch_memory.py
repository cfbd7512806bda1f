"""``nfstrace watch`` over a long synthetic stream: is its memory flat?

    python3 bench/watch_memory.py                    # 50M packets (hours: see --wall-limit)
    python3 bench/watch_memory.py --packets 2M --results /tmp/wm.md
    python3 bench/watch_memory.py --packets 2000 --pcap /tmp/s.pcap   # the stream as a file
    python3 bench/watch_memory.py --cpu 25k,50k,100k,200k   # the CPU of one window's analysis
    python3 bench/watch_memory.py --from-log LOG   # the RSS figures of a --verbose run's samples

A generator writes a pcap stream into ``nfstrace watch -`` through a pipe:
NFSv3 over TCP, ``--connections`` client connections (``--clients`` hosts, to
``--servers`` servers), each writing 32 KiB UNSTABLE WRITEs with a COMMIT after
every 8 and a GETATTR every 4 calls, xids advancing, replies after a varying
0.1-6 ms (COMMITs ~10 ms); one call in ``--resend-every`` sent twice (an RPC
re-send, same xid), ``--stalls`` calls spread over the run never answered
(each a stall alert: the ring written as evidence with its HTML report).
Frames are cut at ``--snaplen`` (512, as ``tcpdump -s 512``: a WRITE's data
is not captured, its length is in the headers) and stamped ``--rate`` packets
per second of capture time (10k/s: 500 intervals of 10 s in 50M packets).

The generator is pre-built frame templates per connection and kind whose
IP id, TCP sequence numbers, xid and checksums (incrementally, RFC 1624) are
patched in place: a few microseconds a packet, far below watch's cost.

The watch process's VmRSS and VmHWM (``/proc/PID/status``) are sampled every
``--sample`` seconds of wall time; printed and written to ``--results``
(default ``bench/results/watch-memory.md``): packets, capture time, wall time,
packets/s sustained, RSS after the first minute of wall time, RSS at the end,
their ratio (flat: within 10%), the medians of the second and of the last
minute's samples (a window's analysis is a transient one sample catches or
not), peak; and the samples by minute.
``tests/test_watch_memory.py`` (slow) runs a few million packets and checks
the ratio.
"""

from __future__ import annotations

import argparse
import heapq
import os
import random
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
# (bench/scaling.py: the NFSv3 message builders the scaling inputs use)
from scaling import FATTR, opaque, rpc_call, rpc_reply, u32

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "watch-memory.md"
BASE_NS = 1_700_000_000 * 1_000_000_000
NFS_PORT = 2049
WRITE_SIZE = 32 * 1024
MAC = b"\x02\x00\x00\x00\x00\x0c\x02\x00\x00\x00\x00\x05\x08\x00"  # dst, src, IPv4
ETH, IP = 14, 20
TCP_OFF = ETH + IP  # the TCP header
RPC_OFF = TCP_OFF + 20 + 4  # the RPC message (after the record mark)
PSH_ACK = 0x18
# kinds of frames
WRITE, COMMIT, GETATTR = 7, 21, 1


def _sum16(data: bytes) -> int:
    """The one's complement sum of data as 16-bit words, not folded."""
    if len(data) % 2:
        data += b"\0"
    return sum(struct.unpack(f">{len(data) // 2}H", data))


def _fold(s: int) -> int:
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def call_message(kind: int, fh: bytes) -> bytes:
    """The RPC call (xid 0: patched per packet)."""
    if kind == WRITE:
        args = fh + struct.pack(">Q", 0) + u32(WRITE_SIZE, 0) + opaque(b"\x5a" * WRITE_SIZE)
    elif kind == COMMIT:
        args = fh + struct.pack(">Q", 0) + u32(0)
    else:
        args = fh
    return rpc_call(0, kind, args)


def reply_message(kind: int) -> bytes:
    if kind == WRITE:
        body = u32(0, 0, 0, WRITE_SIZE, 0) + b"verf0001"
    elif kind == COMMIT:
        body = u32(0, 0, 0) + b"verf0001"
    else:
        body = u32(0) + FATTR
    return rpc_reply(0, body)


@dataclass
class Template:
    """One frame of a connection, its varying fields zero: the captured bytes
    (cut at the snaplen), the frame's length on the wire, and the sums of
    the fixed parts of the IP header and of the TCP pseudo-header and segment."""

    data: bytes
    wire_len: int
    ip_sum: int
    tcp_sum: int


def template(src: int, dst: int, sport: int, dport: int, msg: bytes, snaplen: int) -> Template:
    payload = u32(0x80000000 | len(msg)) + msg
    seg = struct.pack(">HHIIBBHHH", sport, dport, 0, 0, 5 << 4, PSH_ACK, 65535, 0, 0) + payload
    ip = struct.pack(">BBHHHBBHII", 0x45, 0, IP + len(seg), 0, 0x4000, 64, 6, 0, src, dst)
    frame = MAC + ip + seg
    pseudo = struct.pack(">IIBBH", src, dst, 0, 6, len(seg))
    return Template(
        data=frame[:snaplen],
        wire_len=len(frame),
        ip_sum=_sum16(ip),
        tcp_sum=_sum16(pseudo + seg),
    )


@dataclass
class Connection:
    client: int
    server: int
    port: int
    xid: int
    calls: dict[int, Template] = field(default_factory=dict)
    replies: dict[int, Template] = field(default_factory=dict)
    seq_c: int = 1000  # the client's next sequence number
    seq_s: int = 5000  # the server's
    n: int = 0  # calls made


@dataclass
class StreamFacts:
    packets: int = 0
    calls: int = 0
    resent: int = 0
    unanswered: int = 0
    last_ns: int = 0


def stream(
    out: int | object,
    packets: int,
    *,
    rate: float = 10_000,
    connections: int = 200,
    clients: int = 100,
    servers: int = 4,
    resend_every: int = 20_000,
    stalls: int = 5,
    snaplen: int = 512,
    seed: int = 35,
    progress: list[int] | None = None,
    until: float | None = None,
) -> StreamFacts:
    """Write a pcap stream of ``packets`` frames to ``out`` (a file descriptor,
    or a binary file object); returns what it holds.  ``progress[0]``: the
    frames written so far; ``until``: a time.monotonic() at which to stop
    (the stream then ends early: ``StreamFacts.packets`` says where)."""
    write = (lambda b: os.write(out, b)) if isinstance(out, int) else out.write  # type: ignore[attr-defined]
    rnd = random.Random(seed)
    conns = []
    for i in range(connections):
        client = 0x0A010000 + 1 + i % clients
        server = 0x0A020000 + 1 + i % servers
        c = Connection(client, server, 700 + i // clients, rnd.getrandbits(32))
        fh = opaque(bytes((i * 7 + k) % 250 + 3 for k in range(32)))
        for kind in (WRITE, COMMIT, GETATTR):
            c.calls[kind] = template(
                client, server, c.port, NFS_PORT, call_message(kind, fh), snaplen
            )
            c.replies[kind] = template(
                server, client, NFS_PORT, c.port, reply_message(kind), snaplen
            )
        conns.append(c)
    _write_all(write, struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, snaplen, 1))
    gap_ns = 1e9 / rate
    # about 2 frames per call: the stalls spread over the calls
    stall_at = {(k + 1) * packets // 2 // (stalls + 1) for k in range(stalls)}
    due: list[
        tuple[int, int, int, int, int]
    ] = []  # (slot, order, conn, kind, xid) of frames to come
    facts = StreamFacts()
    chunk: list[bytes] = []
    ident = 0
    order = 0
    pack_into = struct.pack_into
    hdr = struct.Struct("<IIII")
    for slot in range(packets):
        t = BASE_NS + int(slot * gap_ns)
        if due and due[0][0] <= slot:
            _, _, ci, kind, xid = heapq.heappop(due)
            c = conns[ci]
            if kind < 0:  # the call again (an RPC re-send)
                tm, reply = c.calls[-kind], False
            else:
                tm, reply = c.replies[kind], True
        else:
            ci = rnd.randrange(connections)
            c = conns[ci]
            c.n += 1
            kind = COMMIT if c.n % 9 == 0 else GETATTR if c.n % 4 == 0 else WRITE
            xid = c.xid = (c.xid + 1) & 0xFFFFFFFF
            tm, reply = c.calls[kind], False
            facts.calls += 1
            if facts.calls in stall_at:
                facts.unanswered += 1
            else:
                later = rnd.randrange(1, 64) + (100 if kind == COMMIT else 0)
                order += 1
                heapq.heappush(due, (slot + later, order, ci, kind, xid))
                if facts.calls % resend_every == 0:
                    order += 1
                    heapq.heappush(due, (slot + later // 2 or 1, order, ci, -kind, xid))
                    facts.resent += 1
        seg_payload = tm.wire_len - RPC_OFF + 4  # (the TCP payload: record mark and message)
        if reply:
            seq, ack = c.seq_s, c.seq_c
            c.seq_s = (seq + seg_payload) & 0xFFFFFFFF
        else:
            seq, ack = c.seq_c, c.seq_s
            c.seq_c = (seq + seg_payload) & 0xFFFFFFFF
        ident = (ident + 1) & 0xFFFF
        buf = bytearray(tm.data)
        pack_into(">H", buf, ETH + 4, ident)
        pack_into(">H", buf, ETH + 10, ~_fold(tm.ip_sum + ident) & 0xFFFF)
        pack_into(">II", buf, TCP_OFF + 4, seq, ack)
        pack_into(">I", buf, RPC_OFF, xid)
        # the checksum of the whole segment (of a cut one too, as a capture has it)
        s = tm.tcp_sum + (seq >> 16) + (seq & 0xFFFF) + (ack >> 16) + (ack & 0xFFFF)
        s += (xid >> 16) + (xid & 0xFFFF)
        pack_into(">H", buf, TCP_OFF + 16, ~_fold(s) & 0xFFFF)
        chunk.append(hdr.pack(t // 1_000_000_000, t % 1_000_000_000, len(buf), tm.wire_len))
        chunk.append(bytes(buf))
        if len(chunk) >= 4096:
            _write_all(write, b"".join(chunk))
            chunk.clear()
            if progress is not None:
                progress[0] = slot + 1
            if until is not None and time.monotonic() > until:
                facts.packets = slot + 1
                facts.last_ns = t
                _write_all(write, b"".join(chunk))
                return facts
        facts.last_ns = t
    facts.packets = packets
    if chunk:
        _write_all(write, b"".join(chunk))
    return facts


def _write_all(write: object, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = write(view)  # type: ignore[operator]
        view = view[n if n is not None else len(view) :]


# ---- the run -----------------------------------------------------------------------


def rss_kb(pid: int) -> tuple[int, int]:
    """VmRSS and VmHWM of a process, in kB (0, 0 when gone)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0, 0
    got = {}
    for line in text.splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            got[line[:5]] = int(line.split()[1])
    return got.get("VmRSS", 0), got.get("VmHWM", 0)


@dataclass
class Sample:
    wall_s: float
    rss_kb: int
    hwm_kb: int
    packets: int  # written to the pipe by then


def run(args: argparse.Namespace) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="nfstrace-watch-memory-"))
    cmd = [
        sys.executable,
        "-m",
        "nfstrace.cli",
        "watch",
        "-",
        "--interval",
        args.interval,
        "--keep-bytes",
        args.keep_bytes,
        "--evidence-dir",
        str(tmp / "evidence"),
        "--prometheus",
        str(tmp / "watch.prom"),
        "--json-lines",
        str(tmp / "watch.jsonl"),
        *args.watch_args,
    ]
    lines = open(tmp / "lines.txt", "wb")  # noqa: SIM115
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=lines, stderr=subprocess.STDOUT)
    assert proc.stdin is not None
    samples: list[Sample] = []
    written = [0]
    done = threading.Event()
    start = time.monotonic()

    def sampler() -> None:
        while not done.wait(args.sample if samples else 0.5):
            rss, hwm = rss_kb(proc.pid)
            if rss:
                samples.append(Sample(time.monotonic() - start, rss, hwm, written[0]))
                if args.verbose:
                    print(
                        f"  {samples[-1].wall_s:7.0f} s  {rss / 1024:8.1f} MB  "
                        f"{written[0]:,} packets",
                        flush=True,
                    )

    th = threading.Thread(target=sampler, daemon=True)
    th.start()
    fd = proc.stdin.fileno()

    facts = StreamFacts()
    try:
        facts = _stream_of(
            fd,
            args,
            progress=written,
            until=start + args.wall_limit if args.wall_limit else None,
        )
        proc.stdin.close()
    except BrokenPipeError:
        pass
    status = proc.wait()
    wall = time.monotonic() - start
    done.set()
    th.join()
    lines.close()
    out = (tmp / "lines.txt").read_text(errors="replace").splitlines()
    if not args.keep_files:  # (the lines, the JSON lines, the evidence pcaps and reports)
        shutil.rmtree(tmp)
    after_minute = next((s for s in samples if s.wall_s >= 60), samples[-1] if samples else None)
    rss = rss_figures(samples)
    end = samples[-1] if samples else None
    return {
        "status": status,
        "packets": facts.packets,
        "asked": args.packets,
        "calls": facts.calls,
        "resent": facts.resent,
        "unanswered": facts.unanswered,
        "capture_s": (facts.last_ns - BASE_NS) / 1e9,
        "wall_s": wall,
        "rss_minute_kb": after_minute.rss_kb if after_minute else 0,
        "minute_at_s": after_minute.wall_s if after_minute else 0,
        "rss_end_kb": end.rss_kb if end else 0,
        "peak_kb": max((s.hwm_kb for s in samples), default=0),
        "peak_minute_kb": after_minute.hwm_kb if after_minute else 0,
        **rss,
        "samples": samples,
        "summary": [line for line in out if not line[:2].isdigit()][-6:],
        "tmp": tmp if args.keep_files else None,
        "command": cmd,
    }


def cpu_per_window(sizes: list[int], args: argparse.Namespace) -> str:
    """The CPU one interval costs watch: ``load()`` of a window of N packets
    of this stream (process time, in this process), split into the parse and
    match (what an incremental parse would do once per packet instead of once
    per window) and the rest (the diagnosis and latency tables of the window)."""
    from nfstrace.trace import AnalysisConfig, _matched, load

    config = AnalysisConfig()
    rows = [
        "| packets in the window | parse + match s | diagnosis and tables s | load() s "
        "| µs a packet | parse + match share |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    with tempfile.TemporaryDirectory(prefix="nfstrace-watch-cpu-") as tmp:
        for n in sizes:
            path = Path(tmp) / f"w{n}.pcap"
            with open(path, "wb") as f:
                stream(f, n, rate=args.rate, connections=args.connections, clients=args.clients,
                       stalls=0, snaplen=args.snaplen)  # fmt: skip
            t0 = time.process_time()
            _matched([str(path)], config, None)
            t1 = time.process_time()
            load(str(path), config)
            t2 = time.process_time()
            parse, total = t1 - t0, t2 - t1
            rows.append(
                f"| {n:,} | {parse:.2f} | {total - parse:.2f} | {total:.2f} "
                f"| {total / n * 1e6:.0f} | {parse / total:.0%} |"
            )
            path.unlink()
    return "\n".join(rows) + "\n"


def rss_figures(samples: list[Sample]) -> dict[str, float]:
    """The medians of the RSS samples of the second minute of wall time and of
    the last minute (each window's analysis is a transient: one sample catches
    it or not, a minute's median does not depend on when it was taken)."""
    if not samples:
        return {"median_minute_kb": 0, "median_end_kb": 0}
    last = samples[-1].wall_s
    second = [s.rss_kb for s in samples if 60 <= s.wall_s < 120] or [samples[-1].rss_kb]
    end = [s.rss_kb for s in samples if s.wall_s >= last - 60]
    return {"median_minute_kb": statistics.median(second), "median_end_kb": statistics.median(end)}


def samples_from_log(path: Path) -> list[Sample]:
    """The samples a --verbose run printed ("  WALL s  RSS MB  N packets")."""
    out = []
    for line in path.read_text().splitlines():
        f = line.split()
        if len(f) == 6 and f[1] == "s" and f[3] == "MB" and f[5] == "packets":
            out.append(
                Sample(float(f[0]), round(float(f[2]) * 1024), 0, int(f[4].replace(",", "")))
            )
    return out


def minutes_table(samples: list[Sample], rows: int = 25) -> list[str]:
    """The samples by minute of wall time (every k-th minute for long runs):
    packets written by its end, median, lowest and highest RSS."""
    by: dict[int, list[Sample]] = {}
    for x in samples:
        by.setdefault(int(x.wall_s // 60), []).append(x)
    keys = sorted(by)
    step = max(1, -(-len(keys) // rows))
    picked = keys[::step] + ([keys[-1]] if keys and (len(keys) - 1) % step else [])
    out = [
        "| minute | packets written | RSS median MB | lowest | highest |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    for k in picked:
        rss = [x.rss_kb / 1024 for x in by[k]]
        out.append(
            f"| {k + 1} | {by[k][-1].packets:,} | {statistics.median(rss):,.1f} "
            f"| {min(rss):,.1f} | {max(rss):,.1f} |"
        )
    return out


def markdown(r: dict, args: argparse.Namespace) -> str:
    mb = 1024
    ratio = r["rss_end_kb"] / r["rss_minute_kb"] if r["rss_minute_kb"] else float("nan")
    rows = [
        (
            "packets",
            f"{r['packets']:,} ({r['calls']:,} calls, {r['resent']:,} re-sent, "
            f"{r['unanswered']} unanswered)"
            + (
                f"; stopped by --wall-limit, {r['asked']:,} asked"
                if r["packets"] < r["asked"]
                else ""
            ),
        ),
        (
            "capture time",
            f"{r['capture_s']:,.0f} s ({r['capture_s'] / _seconds(args.interval):,.0f} "
            f"intervals of {args.interval})",
        ),
        ("wall time", f"{r['wall_s']:,.0f} s"),
        ("packets/s sustained", f"{r['packets'] / r['wall_s']:,.0f}"),
        (
            "RSS after the first minute",
            f"{r['rss_minute_kb'] / mb:,.1f} MB (at {r['minute_at_s']:.0f} s)",
        ),
        ("RSS at the end", f"{r['rss_end_kb'] / mb:,.1f} MB"),
        ("end / first minute", f"{ratio:.3f} (flat: within 1.10)"),
        (
            "median RSS of the second minute / of the last minute",
            f"{r['median_minute_kb'] / mb:,.1f} MB / {r['median_end_kb'] / mb:,.1f} MB: "
            f"{r['median_end_kb'] / max(r['median_minute_kb'], 1):.3f}",
        ),
        ("peak RSS (VmHWM)", f"{r['peak_kb'] / mb:,.1f} MB"),
        (
            "peak at the end / peak after the first minute",
            f"{r['peak_kb'] / r['peak_minute_kb']:.3f} "
            f"(from {r['peak_minute_kb'] / mb:,.1f} MB: each window's analysis "
            "is a transient the samples catch or miss; the peaks do not depend on when)"
            if r["peak_minute_kb"]
            else "-",
        ),
        ("watch's exit status", str(r["status"])),
    ]
    out = ["| measure | value |", "| --- | --- |"]
    out += [f"| {a} | {b} |" for a, b in rows]
    out += [
        "",
        "RSS over wall time, by minute (about 25 rows):",
        "",
        *minutes_table(r["samples"]),
    ]
    out += ["", "watch's summary:", ""] + [f"    {line}" for line in r["summary"]]
    return "\n".join(out) + "\n"


def _seconds(text: str) -> float:
    t = text.strip().lower()
    for unit, scale in (("ms", 1e-3), ("s", 1.0), ("m", 60.0)):
        if t.endswith(unit):
            return float(t[: -len(unit)]) * scale
    return float(t)


def _count(text: str) -> int:
    t = text.strip().upper()
    scale = {"K": 1_000, "M": 1_000_000, "G": 1_000_000_000}.get(t[-1:], 1)
    return int(float(t[:-1] if scale > 1 else t) * scale)


def options(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--packets", type=_count, default=50_000_000, help="frames in the stream (2M, 50M)"
    )
    ap.add_argument("--rate", type=float, default=10_000, help="packets per second of capture time")
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--resend-every", type=int, default=20_000)
    ap.add_argument("--stalls", type=int, default=5, help="calls never answered")
    ap.add_argument("--snaplen", type=int, default=512)
    ap.add_argument("--interval", default="10s")
    ap.add_argument("--sample", type=float, default=5.0, help="seconds between RSS samples")
    ap.add_argument("--pcap", type=Path, help="write the stream to this file instead (no watch)")
    ap.add_argument(
        "--keep-files", action="store_true", help="keep watch's output (its directory is said)"
    )
    ap.add_argument(
        "--from-log",
        type=Path,
        metavar="LOG",
        help="instead: the RSS figures of the samples a --verbose run printed",
    )
    ap.add_argument(
        "--cpu",
        metavar="N,N,...",
        help="instead: the CPU of one window's analysis for windows of N packets",
    )
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--verbose", "-v", action="store_true", help="print the samples as they come")
    ap.add_argument(
        "--keep-bytes",
        default="256M",
        help="watch's ring: it must hold the window analysed (22 s of this stream with the "
        "default interval and stall threshold: 120 MB; watch warns when it does not)",
    )
    ap.add_argument(
        "--wall-limit", type=float, help="stop the stream after this many seconds (wall)"
    )
    ap.add_argument("watch_args", nargs="*", help="more options for watch (after --)")
    return ap.parse_args(argv)


def _stream_of(out: Any, args: argparse.Namespace, **more: Any) -> StreamFacts:
    """The stream the options describe, written to ``out``."""
    return stream(
        out,
        args.packets,
        rate=args.rate,
        connections=args.connections,
        clients=args.clients,
        resend_every=args.resend_every,
        stalls=args.stalls,
        snaplen=args.snaplen,
        **more,
    )


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    if args.pcap is not None:
        with open(args.pcap, "wb") as f:
            facts = _stream_of(f, args)
        print(f"{args.pcap}: {facts}")
        return 0
    if args.from_log:
        samples = samples_from_log(args.from_log)
        rf = rss_figures(samples)
        print(
            f"{len(samples)} samples over {samples[-1].wall_s:,.0f} s: "
            f"median RSS of the second minute {rf['median_minute_kb'] / 1024:,.1f} MB, "
            f"of the last minute {rf['median_end_kb'] / 1024:,.1f} MB "
            f"({rf['median_end_kb'] / rf['median_minute_kb']:.3f})"
        )
        print("\n".join(minutes_table(samples)))
        return 0
    if args.cpu:
        print(cpu_per_window([_count(n) for n in args.cpu.split(",")], args))
        return 0
    r = run(args)
    text = markdown(r, args)
    print(text)
    if r["tmp"] is not None:
        print(f"watch's output: {r['tmp']}")
    args.results.parent.mkdir(parents=True, exist_ok=True)
    given = " ".join(argv if argv is not None else sys.argv[1:])
    args.results.write_text(
        f"# watch memory: {r['packets']:,} packets through `nfstrace watch -`\n\n"
        f"    python3 bench/watch_memory.py {given}\n\n"
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f} at the end\n\n" + text
    )
    return 0 if r["status"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
