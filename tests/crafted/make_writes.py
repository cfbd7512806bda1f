"""Write tiny crafted NFSv3 write workloads with known stalls, pace and verifiers.

    python tests/crafted/make_writes.py OUTDIR

or ``build_all(outdir) -> {name: path}`` from the tests.  Built on the packet
helpers of make_crafted.py; every frame carries an explicit timestamp
(``at(us)``: microseconds after BASE_NS) so the tests can compute each
expected interval.  Each scenario's numbers are module constants the tests
import.
"""

from __future__ import annotations

import os
import struct
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from scapy.layers.inet import IP, TCP

from nfstrace.schema import TRANSACTION_DTYPES

try:
    from crafted import make_crafted as mc
except ImportError:  # run as a script or imported as a package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from crafted import make_crafted as mc

WRITE, COMMIT = 7, 21
UNSTABLE, FILE_SYNC = 0, 2
JUKEBOX = 10008
BLOCK = 4096  # bytes per WRITE (one TCP segment)
LATENCY_US = 200  # WRITE call -> reply
TURN_US = 50  # reply -> next call
VERF_A, VERF_B = b"verfAAAA", b"verfBBBB"
FH_SEED = 7


def at(us: int) -> int:
    """Timestamp (ns) `us` microseconds after the capture's base time."""
    return mc.BASE_NS + us * 1_000


# ---- NFSv3 WRITE / COMMIT bytes ---------------------------------------------------


def write_call(xid: int, offset: int, count: int = BLOCK, stable: int = UNSTABLE) -> bytes:
    args = mc.fhandle(FH_SEED) + struct.pack(">Q", offset) + mc.u32(count, stable)
    return mc.rpc_call(xid, WRITE, args + mc.opaque(b"\x5a" * count))


def write_reply(
    xid: int, count: int = BLOCK, committed: int = UNSTABLE, verf: bytes = VERF_A, status: int = 0
) -> bytes:
    if status:
        return mc.rpc_reply(xid, mc.u32(status, 0, 0))  # status, empty wcc_data
    return mc.rpc_reply(xid, mc.u32(0, 0, 0, count, committed) + verf)


def commit_call(xid: int) -> bytes:
    return mc.rpc_call(xid, COMMIT, mc.fhandle(FH_SEED) + struct.pack(">Q", 0) + mc.u32(0))


def commit_reply(xid: int, verf: bytes = VERF_A) -> bytes:
    return mc.rpc_reply(xid, mc.u32(0, 0, 0) + verf)


# ---- a TCP connection with timed segments ---------------------------------------------


class Conn(mc.TcpConn):
    """TcpConn whose segments carry explicit times; RPCs are record-marked."""

    def __init__(self, cap: mc.Capture, start_us: int, cport: int = 870) -> None:
        super().__init__(cap, cport=cport)
        for i, (from_client, flags, seq, ack) in enumerate(
            (
                (True, "S", self.cisn, 0),
                (False, "SA", self.sisn, self.cisn + 1),
                (True, "A", self.cnext, self.snext),
            )
        ):
            self.cap.add(self.pkt(from_client, flags, seq, ack), at(start_us + i))

    def rpc(self, from_client: bool, msg: bytes, us: int) -> None:
        payload = mc.record(msg)
        seq = self.cnext if from_client else self.snext
        if from_client:
            self.cnext += len(payload)
        else:
            self.snext += len(payload)
        ack = self.snext if from_client else self.cnext
        self.cap.add(self.pkt(from_client, "PA", seq, ack, payload), at(us))

    def call(self, msg: bytes, us: int) -> None:
        self.rpc(True, msg, us)

    def reply(self, msg: bytes, us: int) -> None:
        self.rpc(False, msg, us)

    def server_window(self, window: int, us: int) -> None:
        """A pure ACK from the server advertising `window`."""
        seg = TCP(
            sport=self.sport,
            dport=self.cport,
            seq=self.snext % 2**32,
            ack=self.cnext % 2**32,
            flags="A",
            window=window,
        )
        self.cap.add(self.link(IP(src=self.server, dst=self.client) / seg), at(us))


def sequential_writes(conn: Conn, xid: int, block: int, n: int, us: int) -> tuple[int, int, int]:
    """n WRITEs one at a time from block number `block`, the first called at
    `us`; returns (next xid, next block, time of the last reply)."""
    reply_us = us
    for i in range(n):
        call_us = us + i * (LATENCY_US + TURN_US)
        reply_us = call_us + LATENCY_US
        conn.call(write_call(xid + i, (block + i) * BLOCK), call_us)
        conn.reply(write_reply(xid + i), reply_us)
    return xid + n, block + n, reply_us


# ---- the scenarios -----------------------------------------------------------------
# Each writes 20 WRITEs around one event; times in µs after BASE_NS.

T0 = 100  # first WRITE call (the handshake takes frames at 0, 1, 2 µs)
BEFORE = 10  # WRITEs before the event
AFTER = 10  # WRITEs after it


COMMIT_XID = 0xC000
COMMIT_US = 2_000_000  # the COMMIT's call -> reply time


def build_commit_stall(out: Path) -> dict[str, Path]:
    # 10 WRITEs, a COMMIT answered after 2 s (the next WRITE waits for it), 10 WRITEs.
    cap = mc.Capture()
    c = Conn(cap, 0)
    xid, block, last = sequential_writes(c, 0x1000, 0, BEFORE, T0)
    commit_at = last + TURN_US
    c.call(commit_call(COMMIT_XID), commit_at)
    c.reply(commit_reply(COMMIT_XID), commit_at + COMMIT_US)
    sequential_writes(c, xid, block, AFTER, commit_at + COMMIT_US + TURN_US)
    return {"commit_stall": cap.write(out / "commit_stall.pcap")}


JUKEBOX_XID = 0xD000
BACKOFF_US = 1_000_000  # the client's wait after the JUKEBOX reply


def build_jukebox(out: Path) -> dict[str, Path]:
    # 10 WRITEs; the 11th answered NFS3ERR_JUKEBOX; retried (new xid, same
    # offset) 1 s later; 10 more WRITEs.
    cap = mc.Capture()
    c = Conn(cap, 0)
    xid, block, last = sequential_writes(c, 0x1000, 0, BEFORE, T0)
    call_at = last + TURN_US
    c.call(write_call(JUKEBOX_XID, block * BLOCK), call_at)
    c.reply(write_reply(JUKEBOX_XID, status=JUKEBOX), call_at + LATENCY_US)
    sequential_writes(c, xid, block, AFTER, call_at + LATENCY_US + BACKOFF_US)
    return {"jukebox": cap.write(out / "jukebox.pcap")}


IDLE_US = 1_000_000  # the application's pause, nothing in flight


def build_client_idle(out: Path) -> dict[str, Path]:
    # 10 WRITEs, 1 s with nothing sent, 10 WRITEs: all sequential in offset.
    cap = mc.Capture()
    c = Conn(cap, 0)
    xid, block, last = sequential_writes(c, 0x1000, 0, BEFORE, T0)
    sequential_writes(c, xid, block, AFTER, last + IDLE_US)
    return {"client_idle": cap.write(out / "client_idle.pcap")}


ZERO_WINDOW_US = 800_000  # the server's window stays closed this long


def build_zero_window(out: Path) -> dict[str, Path]:
    # 10 WRITEs; the 11th is called, the server advertises a zero window 100 µs
    # later, opens it 0.8 s later and replies; 9 more WRITEs.
    cap = mc.Capture()
    c = Conn(cap, 0)
    xid, block, last = sequential_writes(c, 0x1000, 0, BEFORE, T0)
    call_at = last + TURN_US
    c.call(write_call(xid, block * BLOCK), call_at)
    c.server_window(0, call_at + 100)
    c.server_window(65535, call_at + 100 + ZERO_WINDOW_US)
    reply_at = call_at + 200 + ZERO_WINDOW_US
    c.reply(write_reply(xid), reply_at)
    sequential_writes(c, xid + 1, block + 1, AFTER - 1, reply_at + TURN_US)
    return {"zero_window": cap.write(out / "zero_window.pcap")}


RETRANS_XID = 0xE000
RETRANS_TIMEOUT_US = 1_100_000  # NFS over UDP's default timeo
UDP_BLOCK = 1024  # fits one datagram


def build_retransmission(out: Path) -> dict[str, Path]:
    # NFSv3 over UDP: 10 WRITEs; the 11th gets no reply, is re-sent with the
    # same xid 1.1 s later and answered; 10 more WRITEs.
    cap = mc.Capture()
    cport = 871

    def call(msg: bytes, us: int) -> None:
        cap.add(mc.eth(mc.udp_pkt(mc.CLIENT, mc.SERVER, cport, mc.NFS_PORT, msg)), at(us))

    def reply(msg: bytes, us: int) -> None:
        cap.add(mc.eth(mc.udp_pkt(mc.SERVER, mc.CLIENT, mc.NFS_PORT, cport, msg)), at(us))

    us = T0
    for i in range(BEFORE + 1 + AFTER):
        xid = RETRANS_XID if i == BEFORE else 0x1000 + i
        msg = write_call(xid, i * UDP_BLOCK, UDP_BLOCK)
        call(msg, us)
        if i == BEFORE:
            us += RETRANS_TIMEOUT_US
            call(msg, us)
        reply(write_reply(xid, UDP_BLOCK), us + LATENCY_US)
        us += LATENCY_US + TURN_US
    return {"retransmission": cap.write(out / "retransmission.pcap")}


VERIFIER_COMMIT1, VERIFIER_COMMIT2, VERIFIER_COMMIT3 = 0xF001, 0xF002, 0xF003
FILE_SYNC_WRITE = 7  # the one WRITE (of 6..10) asked FILE_SYNC: not at risk
VERIFIER_AT_RISK = 4 * BLOCK  # WRITEs 6..10 unstable, less the FILE_SYNC one


def build_verifier_change(out: Path) -> dict[str, Path]:
    # WRITEs 1..5 (verifier A), COMMIT (A); WRITEs 6..10 (A; number 7 asked and
    # granted FILE_SYNC); COMMIT answered with verifier B: the server restarted
    # and lost WRITEs 6, 8, 9, 10.  The client re-sends 6..10 (B) and commits (B).
    cap = mc.Capture()
    c = Conn(cap, 0)
    us = T0

    def write(xid: int, block: int, verf: bytes, stable: int = UNSTABLE) -> None:
        nonlocal us
        c.call(write_call(xid, block * BLOCK, stable=stable), us)
        c.reply(write_reply(xid, committed=stable, verf=verf), us + LATENCY_US)
        us += LATENCY_US + TURN_US

    def commit(xid: int, verf: bytes) -> None:
        nonlocal us
        c.call(commit_call(xid), us)
        c.reply(commit_reply(xid, verf), us + LATENCY_US)
        us += LATENCY_US + TURN_US

    for n in range(1, 6):
        write(0x1000 + n, n - 1, VERF_A)
    commit(VERIFIER_COMMIT1, VERF_A)
    for n in range(6, 11):
        write(0x1000 + n, n - 1, VERF_A, FILE_SYNC if n == FILE_SYNC_WRITE else UNSTABLE)
    commit(VERIFIER_COMMIT2, VERF_B)
    for n in range(6, 11):
        write(0x2000 + n, n - 1, VERF_B)
    commit(VERIFIER_COMMIT3, VERF_B)
    return {"verifier_change": cap.write(out / "verifier_change.pcap")}


WINDOW = 4  # WRITEs sent back to back per batch
BATCH_GAP_US = 10  # between the calls of a batch
WINDOW_LATENCY_US = 300
WINDOW_BATCHES = 3
# Block numbers in call order: batch 2 backwards, so 6 of 11 WRITEs continue the previous one
# (0-1-2-3 and 8-9-10-11).
WINDOW_BLOCKS = (0, 1, 2, 3, 7, 6, 5, 4, 8, 9, 10, 11)
WINDOW_SEQUENTIAL = 6


def build_window(out: Path) -> dict[str, Path]:
    # 3 batches of 4 WRITEs: calls 10 µs apart, each answered 300 µs after its
    # call; the next batch 50 µs after the last reply.  Per batch: 10 µs at 1,
    # 2 and 3 outstanding, 270 µs at 4, 10 µs at 3, 2, 1; then 50 µs at 0.
    cap = mc.Capture()
    c = Conn(cap, 0)
    us = T0
    xid = 0x1000
    for b in range(WINDOW_BATCHES):
        calls = [us + i * BATCH_GAP_US for i in range(WINDOW)]
        blocks = WINDOW_BLOCKS[b * WINDOW : (b + 1) * WINDOW]
        for i, (t, block) in enumerate(zip(calls, blocks, strict=True)):
            c.call(write_call(xid + i, block * BLOCK), t)
        for i, t in enumerate(calls):
            c.reply(write_reply(xid + i), t + WINDOW_LATENCY_US)
        xid += WINDOW
        us = calls[-1] + WINDOW_LATENCY_US + TURN_US
    return {"window": cap.write(out / "window.pcap")}


# ---- transactions tables without a capture ----------------------------------------------


def transactions_table(rows: Sequence[dict]) -> pd.DataFrame:
    """A transactions table (``nfstrace.schema`` columns and dtypes) from partial
    rows: t_call_ns, t_reply_ns (None: no reply), op, and any other column.
    Defaults: CLIENT -> SERVER, xid = row number, one call, latency and
    write_bytes derived (a WRITE's count when its status is 0)."""
    out = []
    for i, row in enumerate(rows):
        r = {"client": mc.CLIENT, "server": mc.SERVER, "xid": i, "prog": 100003, "vers": 3}
        r |= {"n_calls": 1, "read_bytes": 0, "proc": 0, "status": None}
        r |= row
        replied = r.get("t_reply_ns") is not None
        r.setdefault("n_replies", int(replied))
        if replied:
            r["status"] = 0 if r["status"] is None else r["status"]
            r["latency_ns"] = r["t_reply_ns"] - r["t_call_ns"]
        ok_write = r["op"] == "WRITE" and replied and r["status"] == 0
        r.setdefault("reply_count", r.get("count") if ok_write else None)
        r.setdefault("write_bytes", r.get("count", 0) if ok_write else 0)
        out.append(r)
    table = pd.DataFrame(out)
    for col, dtype in TRANSACTION_DTYPES.items():
        if col not in table:
            table[col] = pd.NA
        table[col] = table[col].astype(dtype)
    return table[list(TRANSACTION_DTYPES)]


def synthetic_writes(
    n: int, commit_every: int = 3200, commit_ns: int = 2_000_000_000, resend_every: int = 1000
) -> pd.DataFrame:
    """n sequential 32 KiB WRITEs at the study's pace (call->reply 360 µs,
    reply->next call 34 µs), a COMMIT of `commit_ns` after every
    `commit_every` WRITEs, every `resend_every`-th WRITE re-sent after 1.1 s:
    a large table built column-wise, for timing the analyses."""
    block, c2r, turn, timeout = 32768, 360_000, 34_000, 1_100_000_000
    resent = (np.arange(n) % resend_every) == resend_every - 1
    commit_after = (np.arange(n) % commit_every) == commit_every - 1
    cycle = c2r + turn + np.where(resent, timeout, 0) + np.where(commit_after, commit_ns, 0)
    t_call = mc.BASE_NS + np.r_[0, np.cumsum(cycle)[:-1]]
    t_reply = t_call + c2r + np.where(resent, timeout, 0)
    commits = np.flatnonzero(commit_after)
    c_call = t_reply[commits] + turn // 2
    c_reply = c_call + commit_ns - turn
    m = len(commits)
    op = np.r_[np.full(n, "WRITE", dtype=object), np.full(m, "COMMIT", dtype=object)]
    columns = {
        "client": mc.CLIENT,
        "server": mc.SERVER,
        "xid": np.arange(n + m),
        "prog": 100003,
        "vers": 3,
        "proc": np.where(op == "WRITE", WRITE, COMMIT),
        "op": op,
        "t_call_ns": np.r_[t_call, c_call],
        "t_call_last_ns": np.r_[np.where(resent, t_call + timeout, t_call), c_call],
        "t_reply_ns": np.r_[t_reply, c_reply],
        "latency_ns": np.r_[t_reply - t_call, c_reply - c_call],
        "n_calls": np.r_[np.where(resent, 2, 1), np.ones(m, "int64")],
        "n_replies": 1,
        "status": 0,
        "fh": "0a0b",
        "offset": np.r_[np.arange(n) * block, np.zeros(m, "int64")],
        "count": np.r_[np.full(n, block), np.zeros(m, "int64")],
        "stable": np.r_[np.full(n, UNSTABLE), np.full(m, -1)],
        "reply_count": np.r_[np.full(n, block), np.full(m, -1)],
        "committed": np.r_[np.full(n, UNSTABLE), np.full(m, -1)],
        "verifier": VERF_A.hex(),
        "write_bytes": np.r_[np.full(n, block), np.zeros(m, "int64")],
        "read_bytes": 0,
    }
    table = pd.DataFrame(columns)
    for col, dtype in TRANSACTION_DTYPES.items():
        if col not in table:
            table[col] = pd.NA
        table[col] = table[col].astype(dtype)
    table = table[list(TRANSACTION_DTYPES)]
    return table.sort_values("t_call_ns", kind="stable", ignore_index=True)


BUILDERS = (
    build_commit_stall,
    build_jukebox,
    build_client_idle,
    build_zero_window,
    build_retransmission,
    build_verifier_change,
    build_window,
)


def build_all(outdir: str | os.PathLike[str]) -> dict[str, Path]:
    """Write every scenario into outdir; returns {name: path}."""
    return mc.run_builders(BUILDERS, outdir)


if __name__ == "__main__":
    mc.script(build_all, __file__)
