"""Scaling inputs: captures whose cost must grow linearly with their size.

    python3 bench/scaling.py OUTDIR [--n 40000] [--runs 1] [--results DIR]

Each case is built at N and 4N (pure bytes, no scapy: 160k-event captures in
seconds) and analysed end to end (``nfstrace analyze FILE --quiet
--no-report``) under GNU time; the figure that matters is the ratio of the two
times (linear: about 4; quadratic: about 16).  ``bench/run.py --scaling``
runs it into ``results/scaling.md``; ``tests/test_scaling.py`` (slow) checks
the ratios at a smaller N.

The cases (issue 30 item 4):

* ``tcp-events``: N/8 TCP connections of four 512-byte WRITEs each, one re-sent,
  one in two segments with a gap, one behind a zero window, one whose first
  segment was not captured (about N transport events);
* ``tiny-fragments``: N first fragments (8 bytes) of as many UDP calls whose
  other fragments never come (more than the reassembler holds at once);
* ``fragmented-datagrams``: N UDP WRITEs of 3,000 bytes in 3 IPv4 fragments,
  one xid for all, every other one missing a fragment, all answered;
* ``writing-pairs``: N/8 clients (one host pair each) writing twice over UDP
  to one of 8 servers, answered;
* ``unanswered-calls``: N UDP calls never answered (the calls remembered for
  their replies overflow: ParseLimits.pending_calls, 335,544 by default).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import struct
import subprocess
import sys
import time
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIME = Path("/usr/bin/time")
BASE_NS = 1_700_000_000 * 1_000_000_000
NFS_PORT = 2049
CLIENT, SERVER = 0x0A000001, 0x0A000002  # 10.0.0.1, 10.0.0.2
MAC = b"\x02\x00\x00\x00\x00\x0c\x02\x00\x00\x00\x00\x05\x08\x00"  # dst, src, IPv4

# ---- bytes --------------------------------------------------------------------------


def u32(*values: int) -> bytes:
    return struct.pack(f">{len(values)}I", *values)


def opaque(data: bytes) -> bytes:
    return u32(len(data)) + data + b"\0" * (-len(data) % 4)


def fhandle(seed: int) -> bytes:
    return opaque(bytes((seed * 7 + i) % 250 + 3 for i in range(32)))


def rpc_call(xid: int, proc: int, args: bytes) -> bytes:
    cred = u32(0x5EED) + opaque(b"client") + u32(1000, 100, 0)
    return u32(xid, 0, 2, 100003, 3, proc, 1, len(cred)) + cred + u32(0, 0) + args


def rpc_reply(xid: int, body: bytes) -> bytes:
    return u32(xid, 1, 0, 0, 0, 0) + body


FATTR = u32(1, 0o644, 1, 1000, 100) + bytes(16) + bytes(8) + bytes(16) + bytes(24)


def getattr_call(xid: int) -> bytes:
    return rpc_call(xid, 1, fhandle(xid))


def getattr_reply(xid: int) -> bytes:
    return rpc_reply(xid, u32(0) + FATTR)


def write_call(xid: int, offset: int, count: int, seed: int = 0) -> bytes:
    args = fhandle(seed) + struct.pack(">Q", offset) + u32(count, 0) + opaque(b"\x5a" * count)
    return rpc_call(xid, 7, args)


def write_reply(xid: int, count: int) -> bytes:
    return rpc_reply(xid, u32(0, 0, 0, count, 0) + b"verf0001")


def _sum16(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    a = array("H", data)
    if sys.byteorder == "little":
        a.byteswap()
    s = sum(a)
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def _csum(data: bytes) -> int:
    return ~_sum16(data) & 0xFFFF


def ipv4(src: int, dst: int, proto: int, body: bytes, ident: int, frag: int = 0) -> bytes:
    hdr = struct.pack(
        ">BBHHHBBHII", 0x45, 0, 20 + len(body), ident & 0xFFFF, frag, 64, proto, 0, src, dst
    )
    return hdr[:10] + struct.pack(">H", _csum(hdr)) + hdr[12:] + body


def _pseudo(src: int, dst: int, proto: int, length: int) -> bytes:
    return struct.pack(">IIBBH", src, dst, 0, proto, length)


def udp(src: int, dst: int, sport: int, dport: int, payload: bytes) -> bytes:
    seg = struct.pack(">HHHH", sport, dport, 8 + len(payload), 0) + payload
    c = _csum(_pseudo(src, dst, 17, len(seg)) + seg) or 0xFFFF
    return seg[:6] + struct.pack(">H", c) + seg[8:]


def tcp(
    src: int,
    dst: int,
    sport: int,
    dport: int,
    seq: int,
    ack: int,
    flags: int,
    payload: bytes = b"",
    window: int = 65535,
) -> bytes:
    seg = struct.pack(
        ">HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags, window, 0, 0
    )
    seg += payload
    c = _csum(_pseudo(src, dst, 6, len(seg)) + seg)
    return seg[:16] + struct.pack(">H", c) + seg[18:]


SYN, ACK, PSH = 0x02, 0x10, 0x08


class Pcap:
    """A nanosecond pcap of Ethernet frames, written as it goes."""

    def __init__(self, path: Path) -> None:
        self.f = open(path, "wb")  # noqa: SIM115 - closed by close()
        self.f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1))
        self.ident = 0

    def add(self, t_ns: int, ip: bytes) -> None:
        frame = MAC + ip
        self.f.write(
            struct.pack("<IIII", t_ns // 10**9, t_ns % 10**9, len(frame), len(frame)) + frame
        )

    def next_id(self) -> int:
        self.ident = (self.ident + 1) & 0xFFFF
        return self.ident

    def close(self) -> None:
        self.f.close()


# ---- the cases ---------------------------------------------------------------------


def _framed(msg: bytes) -> bytes:
    return u32(0x80000000 | len(msg)) + msg


def tcp_events(path: Path, n: int, one_connection: bool = False) -> None:
    """N/8 TCP connections, each a handshake and four 512-byte WRITEs, one
    re-sent, one sent in two segments 0.3 ms apart, one after the server
    advertised a zero window, one whose first segment the capture missed:
    about eight transport events per connection (N in all)."""
    p = Pcap(path)
    sseq0 = 500000

    def pkt(
        t: int,
        from_client: bool,
        cp: int,
        seq: int,
        ack: int,
        flags: int,
        data: bytes = b"",
        window: int = 65535,
    ) -> None:
        if from_client:
            seg = tcp(CLIENT, SERVER, cp, NFS_PORT, seq, ack, flags, data, window)
            p.add(t, ipv4(CLIENT, SERVER, 6, seg, p.next_id()))
        else:
            seg = tcp(SERVER, CLIENT, NFS_PORT, cp, seq, ack, flags, data, window)
            p.add(t, ipv4(SERVER, CLIENT, 6, seg, p.next_id()))

    calls = max(4, n // 2)
    per_conn = calls if one_connection else 4
    t = BASE_NS
    for c in range(calls // per_conn):
        cp = 10000 + c % 50000
        cs, ss = 1000 + c, sseq0 + c
        pkt(t, True, cp, cs, 0, SYN)
        pkt(t + 100_000, False, cp, ss, cs + 1, SYN | ACK)
        cs, ss = cs + 1, ss + 1
        pkt(t + 200_000, True, cp, cs, ss, ACK)
        for j in range(per_conn):
            k = j % 4
            i = c * per_conn + j
            t0 = t + 1_000_000 + j * 2_000_000
            xid = 0x10000000 + i
            call = _framed(write_call(xid, i * 512, 512, c))
            reply = _framed(write_reply(xid, 512))
            if k == 0:  # re-sent segment
                pkt(t0, True, cp, cs, ss, PSH | ACK, call)
                pkt(t0 + 300_000, True, cp, cs, ss, PSH | ACK, call)
            elif k == 1:  # two segments with a send gap between
                pkt(t0, True, cp, cs, ss, ACK, call[:60])
                pkt(t0 + 300_000, True, cp, cs + 60, ss, PSH | ACK, call[60:])
            elif k == 2:  # the server's zero window, then opened
                pkt(t0 - 500_000, False, cp, ss, cs, ACK, window=0)
                pkt(t0 - 200_000, False, cp, ss, cs, ACK)
                pkt(t0, True, cp, cs, ss, PSH | ACK, call)
            else:  # first segment not captured: a hole the server's ACK covers
                pkt(t0 + 100_000, True, cp, cs + 60, ss, PSH | ACK, call[60:])
            cs += len(call)
            pkt(t0 + 500_000, False, cp, ss, cs, PSH | ACK, reply)
            ss += len(reply)
            pkt(t0 + 600_000, True, cp, cs, ss, ACK)
        t += 1_000_000 + per_conn * 2_000_000
        pkt(t, True, cp, cs, ss, 0x01 | ACK)  # FIN
        pkt(t + 100_000, False, cp, ss, cs + 1, 0x01 | ACK)
        pkt(t + 200_000, True, cp, cs + 1, ss + 1, ACK)
        t += 1_000_000
    p.close()


def tcp_events_one_connection(path: Path, n: int) -> None:
    """The same on one connection."""
    tcp_events(path, n, one_connection=True)


TINY_CHUNK = 8


def tiny_fragments(path: Path, n: int) -> None:
    """N 8-byte IPv4 fragments, each the first of a UDP GETATTR call whose other
    fragments never come (a new IP id each; a new client every 65,536): past
    ParseLimits.max_ip_reassemblies held at once, each new one gives up the
    oldest."""
    p = Pcap(path)
    for i in range(n):
        client = CLIENT + 0x100 * (i >> 16)
        l4 = udp(client, SERVER, 1000, NFS_PORT, getattr_call(0x20000000 + i))
        p.add(BASE_NS + i * 10_000, ipv4(client, SERVER, 17, l4[:TINY_CHUNK], i, 0x2000))
    p.close()


FRAG_WRITE = 3000
MTU_CHUNK = 1480


def fragmented_datagrams(path: Path, n: int) -> None:
    """N UDP WRITEs of 3,000 bytes in 3 IPv4 fragments, all with one xid (a
    client re-sending one call), every other one missing its middle fragment
    (incomplete); all answered."""
    p = Pcap(path)
    for i in range(n):
        t = BASE_NS + i * 1_000_000
        xid = 0x30000000
        cport = 1000
        l4 = udp(CLIENT, SERVER, cport, NFS_PORT, write_call(xid, i * FRAG_WRITE, FRAG_WRITE))
        ident = p.next_id()
        for k, off in enumerate(range(0, len(l4), MTU_CHUNK)):
            if k == 1 and i % 2:
                continue
            more = 0x2000 if off + MTU_CHUNK < len(l4) else 0
            p.add(
                t + k * 20_000,
                ipv4(CLIENT, SERVER, 17, l4[off : off + MTU_CHUNK], ident, more | off // 8),
            )
        reply = udp(SERVER, CLIENT, NFS_PORT, cport, write_reply(xid, FRAG_WRITE))
        p.add(t + 500_000, ipv4(SERVER, CLIENT, 17, reply, p.next_id()))
    p.close()


PAIR_SERVERS = 8
PAIR_WRITE = 1024


def writing_pairs(path: Path, n: int) -> None:
    """N/8 clients, each writing twice over UDP to one of 8 servers."""
    p = Pcap(path)
    clients = max(1, n // 8)
    for i in range(clients):
        client = 0x0B000000 + i + 1
        server = 0x0A000000 + 200 + i % PAIR_SERVERS
        t = BASE_NS + i * 100_000
        for w in range(2):
            xid = 0x40000000 + 2 * i + w
            call = udp(
                client, server, 900, NFS_PORT, write_call(xid, w * PAIR_WRITE, PAIR_WRITE, i)
            )
            p.add(t + w * 2_000_000, ipv4(client, server, 17, call, p.next_id()))
            reply = udp(server, client, NFS_PORT, 900, write_reply(xid, PAIR_WRITE))
            p.add(t + w * 2_000_000 + 1_500_000, ipv4(server, client, 17, reply, p.next_id()))
    p.close()
    # frames out of time order across clients: sort them (tcpdump writes in order)
    _sort_pcap(path)


def unanswered_calls(path: Path, n: int) -> None:
    """N UDP GETATTR calls never answered (past ParseLimits.pending_calls the
    oldest remembered call is forgotten for each new one)."""
    p = Pcap(path)
    for i in range(n):
        call = udp(CLIENT, SERVER, 900, NFS_PORT, getattr_call(0x60000000 + i))
        p.add(BASE_NS + i * 20_000, ipv4(CLIENT, SERVER, 17, call, i))
    p.close()


def _records(path: Path) -> Iterator[tuple[int, bytes]]:
    data = path.read_bytes()
    pos = 24
    while pos < len(data):
        sec, nsec, incl, _ = struct.unpack_from("<IIII", data, pos)
        yield sec * 10**9 + nsec, data[pos : pos + 16 + incl]
        pos += 16 + incl


def _sort_pcap(path: Path) -> None:
    head = path.read_bytes()[:24]
    recs = sorted(_records(path), key=lambda r: r[0])
    path.write_bytes(head + b"".join(r for _, r in recs))


CASES: dict[str, Callable[[Path, int], None]] = {
    "tcp-events": tcp_events,
    "tcp-events-one-connection": tcp_events_one_connection,
    "tiny-fragments": tiny_fragments,
    "fragmented-datagrams": fragmented_datagrams,
    "writing-pairs": writing_pairs,
    "unanswered-calls": unanswered_calls,
}

# ---- measuring ---------------------------------------------------------------------


def build(outdir: Path, case: str, n: int) -> Path:
    outdir.mkdir(parents=True, exist_ok=True)
    path = outdir / f"{case}-{n}.pcap"
    if not path.exists():
        tmp = path.with_suffix(".part")
        CASES[case](tmp, n)
        tmp.rename(path)
    return path


def run_once(path: Path, env: dict[str, str] | None = None, timeout: float = 3600) -> dict:
    """One end-to-end analysis under GNU time: wall seconds, peak RSS, exit
    (past ``timeout``: stopped, its seconds the timeout, exit None)."""
    cmd = [
        str(TIME),
        "-f",
        "%e %M",
        sys.executable,
        "-m",
        "nfstrace.cli",
        "analyze",
        str(path),
        "--quiet",
        "--no-report",
    ]
    start = time.monotonic()
    try:
        r = subprocess.run(
            cmd, capture_output=True, text=True, env=env, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return {"seconds": float(timeout), "rss_kb": None, "exit": None, "timed_out": True}
    wall = time.monotonic() - start
    m = re.search(r"([\d.]+) (\d+)\s*$", r.stderr)
    return {
        "seconds": round(wall, 2),
        "rss_kb": int(m.group(2)) if m else None,
        "exit": r.returncode,
    }


def scaling(
    outdir: Path,
    n: int,
    runs: int = 1,
    cases: list[str] | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 3600,
) -> list[dict]:
    """Every case at n and 4n (the best of ``runs``), nfstrace run with ``env``
    (default: this checkout first on PYTHONPATH)."""
    if env is None:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    rows = []
    for case in cases or list(CASES):
        row: dict = {"case": case, "size": n}
        for label, size in (("n", n), ("4n", 4 * n)):
            path = build(outdir, case, size)
            results = [run_once(path, env, timeout) for _ in range(runs)]
            best = min(results, key=lambda x: x["seconds"])
            row[label] = best
        row["ratio"] = round(row["4n"]["seconds"] / max(row["n"]["seconds"], 1e-3), 2)
        rows.append(row)
        print(f"scaling: {markdown([row]).splitlines()[-1]}", file=sys.stderr, flush=True)
    return rows


def markdown(rows: list[dict]) -> str:
    out = [
        "| case | N | time at N | peak RSS at N | time at 4N | peak RSS at 4N | 4N/N |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        a, b = r["n"], r["4n"]
        out.append(
            f"| {r['case']} | {r['size']:,} | {_time(a)} | {_rss(a)} | {_time(b)} | {_rss(b)} "
            f"| {r['ratio']:.2f}{'+' if b.get('timed_out') else ''} |"
        )
    return "\n".join(out) + "\n"


def _time(run: dict) -> str:
    return f"> {run['seconds']:.0f} s" if run.get("timed_out") else f"{run['seconds']:.2f} s"


def _rss(run: dict) -> str:
    return "?" if run.get("rss_kb") is None else f"{run['rss_kb'] / 1024:.0f} MB"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--n", type=int, default=40_000)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--only", action="append", choices=list(CASES))
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--results", type=Path, help="write scaling.json and scaling.md here")
    ap.add_argument("--source", type=Path, help="the nfstrace tree to run (default: this one)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per run at most")
    args = ap.parse_args(argv)
    if args.build_only:
        for case in args.only or list(CASES):
            for size in (args.n, 4 * args.n):
                print(build(args.outdir, case, size))
        return 0
    env = None
    if args.source:
        env = dict(os.environ, PYTHONSAFEPATH="1")
        env["PYTHONPATH"] = str(args.source.resolve())
    rows = scaling(args.outdir, args.n, args.runs, args.only, env, args.timeout)
    if args.results:
        args.results.mkdir(parents=True, exist_ok=True)
        (args.results / "scaling.json").write_text(json.dumps(rows, indent=1) + "\n")
        (args.results / "scaling.md").write_text(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
