"""Write crafted captures whose slow writes have one known cause the lab cannot
make: the failures the diagnosis issue lists, each as a capture.

    python tests/crafted/make_causes.py OUTDIR

or ``build_all(outdir) -> {name: path}`` from the tests.  NFSv3 over TCP with
explicit times on every frame (``at(us)``), data in large segments (as a
client that captures with TSO/GSO on sees them) and cut to a 256-byte snaplen,
so the captures stay small.  Each scenario's numbers are module constants the
tests import.

- ``silence_99s``: 99 s with no packet in either direction; the client's xids
  jump by 52,000 across it; the call before it is never answered in the capture
  and a reply comes after it whose call was not captured: the capture missed
  traffic (the writes went on), not a server that took 99 s.
- ``two_mounts``: one client, two servers (mounts): 32 KiB WRITEs to one run
  fine; 512 KiB WRITEs to the other stop part-way through 17 calls for 155-197
  ms with every byte acknowledged and the window open (the application paused);
  that server answers 4.6 ms after each call's last byte.
- ``missed_calls_s256``: a ``-s 256`` capture of 16 WRITEs of 1 MiB of which 11
  calls were not captured (their replies were): the capture's limits lead.
- ``timeout_server`` / ``timeout_client``: 512 KiB WRITEs one at a time, two of
  which stop before their last segment for 210 ms with every byte seen
  acknowledged: at the server, a tail the network lost, re-sent on the client's
  retransmission timer; at the client, its own pause.
- ``tail_resent``: 64 KiB WRITEs one at a time seen at the client; one call's
  short last segment is lost past the capture point and re-sent on the
  client's retransmission timer (207 ms): the loss's time, not the server's.
"""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

from scapy.layers.inet import IP, TCP
from scapy.packet import Raw

try:
    from crafted import make_crafted as mc
except ImportError:  # run as a script or imported as a package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from crafted import make_crafted as mc

WRITE, COMMIT = 7, 21
SNAPLEN = 256
RTT_US = 100  # the network round trip (the handshake shows it)
SEGMENT = 45 * 1448  # a TSO burst as the sending host's capture shows it
VERF = b"verfAAAA"


def at(us: float) -> int:
    """Timestamp (ns) `us` microseconds after the capture's base time."""
    return mc.BASE_NS + round(us * 1_000)


def write_call(xid: int, fh: int, offset: int, count: int) -> bytes:
    args = mc.fhandle(fh) + struct.pack(">Q", offset) + mc.u32(count, 0)
    return mc.rpc_call(xid, WRITE, args + mc.opaque(b"\x5a" * count))


def write_reply(xid: int, count: int) -> bytes:
    return mc.rpc_reply(xid, mc.u32(0, 0, 0, count, 0) + VERF)


def commit_call(xid: int, fh: int) -> bytes:
    return mc.rpc_call(xid, COMMIT, mc.fhandle(fh) + struct.pack(">Q", 0) + mc.u32(0))


def commit_reply(xid: int) -> bytes:
    return mc.rpc_reply(xid, mc.u32(0, 0, 0) + VERF)


class Flow:
    """One TCP connection, both directions, every frame at an explicit time.

    ``send`` puts a record-marked RPC on the wire in SEGMENT-sized pieces;
    ``ack`` is a pure ACK of everything received so far; ``skip`` advances a
    direction's sequence numbers over bytes the capture never saw."""

    def __init__(
        self,
        cap: mc.Capture,
        client: str,
        server: str,
        cport: int,
        us: float,
        rtt_us: float = RTT_US,
        server_side: bool = False,
    ) -> None:
        self.cap, self.client, self.server, self.cport = cap, client, server, cport
        self.cnext, self.snext = 1_001, 500_001
        # window scale 7 both ways: 8 MiB windows, never full here; the handshake
        # as seen at the client (SYN-ACK a round trip after the SYN) or, with
        # server_side, at the server (the client's ACK a round trip after its SYN-ACK)
        syn_ack = us + (1 if server_side else rtt_us)
        self._frame(True, "S", 1_000, 0, b"", us, [("MSS", 1460), ("WScale", 7)])
        self._frame(False, "SA", 500_000, 1_001, b"", syn_ack, [("MSS", 1460), ("WScale", 7)])
        self._frame(True, "A", 1_001, 500_001, b"", us + rtt_us + 1)

    def _frame(
        self,
        from_client: bool,
        flags: str,
        seq: int,
        ack: int,
        data: bytes,
        us: float,
        options: list | None = None,
    ) -> None:
        src, dst = (self.client, self.server) if from_client else (self.server, self.client)
        sp, dp = (self.cport, mc.NFS_PORT) if from_client else (mc.NFS_PORT, self.cport)
        seg = TCP(
            sport=sp,
            dport=dp,
            seq=seq % 2**32,
            ack=ack % 2**32,
            flags=flags,
            window=65535,
            options=options or [],
        )
        ip = IP(src=src, dst=dst) / seg
        self.cap.add(mc.eth(ip / Raw(data) if data else ip), at(us))

    def send(
        self,
        from_client: bool,
        msg: bytes,
        us: float,
        spacing_us: float = 0.0,
        ack: int | None = None,
    ) -> list[float]:
        """The record in segments `spacing_us` apart from `us`; their times.  A
        server's segments acknowledge everything the client sent so far, or
        `ack` (what had reached the server when it sent them)."""
        payload = mc.record(msg)
        times = []
        for i in range(0, len(payload), SEGMENT):
            t = us + len(times) * spacing_us
            piece = payload[i : i + SEGMENT]
            if from_client:
                self._frame(True, "PA", self.cnext, self.snext, piece, t)
                self.cnext += len(piece)
            else:
                self._frame(False, "PA", self.snext, self.cnext if ack is None else ack, piece, t)
                self.snext += len(piece)
            times.append(t)
        return times

    def ack(self, from_client: bool, us: float, ack: int | None = None) -> None:
        if from_client:
            self._frame(True, "A", self.cnext, self.snext, b"", us)
        else:
            self._frame(False, "A", self.snext, self.cnext if ack is None else ack, b"", us)

    def skip(self, from_client: bool, nbytes: int) -> None:
        if from_client:
            self.cnext += nbytes
        else:
            self.snext += nbytes


def pieces(count: int) -> int:
    return -(-len(mc.record(write_call(0, 1, 0, count))) // SEGMENT)


# ---- 1. 99 s the capture missed --------------------------------------------------------

SILENCE_WRITES = 20  # before and after the silence
SILENCE_COUNT = 8192
SILENCE_US = 99_000_000  # no packet in either direction
SILENCE_XID_JUMP = 52_000  # calls the client made meanwhile
SILENCE_WRITE_US = 400  # call -> reply of each WRITE
SILENCE_TURN_US = 50


def build_silence_99s(out: Path) -> dict[str, Path]:
    cap = mc.Capture(snaplen=SNAPLEN)
    f = Flow(cap, mc.CLIENT, mc.SERVER, 870, 0)
    xid, offset, us = 0x1000, 0, 100.0

    def one_write() -> None:
        nonlocal xid, offset, us
        f.send(True, write_call(xid, 1, offset, SILENCE_COUNT), us)
        f.send(False, write_reply(xid, SILENCE_COUNT), us + SILENCE_WRITE_US)
        xid += 1
        offset += SILENCE_COUNT
        us += SILENCE_WRITE_US + SILENCE_TURN_US

    for _ in range(SILENCE_WRITES):
        one_write()
    # a call whose reply the capture missed, then nothing for 99 s
    f.send(True, write_call(xid, 1, offset, SILENCE_COUNT), us)
    lost_call = len(mc.record(write_call(xid, 1, offset, SILENCE_COUNT)))
    last_seen = us
    # meanwhile: SILENCE_XID_JUMP calls and their replies, never captured
    reply_len = len(mc.record(write_reply(xid, SILENCE_COUNT)))
    f.skip(True, (SILENCE_XID_JUMP - 1) * lost_call)
    f.skip(False, SILENCE_XID_JUMP * reply_len)
    xid += SILENCE_XID_JUMP
    offset += SILENCE_XID_JUMP * SILENCE_COUNT
    us = last_seen + SILENCE_US
    # the capture resumes: a reply whose call it missed, then the writes go on
    f.send(False, write_reply(xid - 1, SILENCE_COUNT), us)
    us += SILENCE_TURN_US
    for _ in range(SILENCE_WRITES):
        one_write()
    f.send(True, commit_call(xid, 1), us)
    f.send(False, commit_reply(xid), us + 1_000)
    return {"silence_99s": cap.write(out / "silence_99s.pcap")}


# ---- 2. two mounts, one of them paused by its application ------------------------------

MOUNT_SMALL_SERVER, MOUNT_BIG_SERVER = mc.SERVER, "10.0.0.3"
MOUNT_SMALL, MOUNT_BIG = 32 * 1024, 512 * 1024
MOUNT_SMALL_WRITES, MOUNT_BIG_WRITES = 64, 24
MOUNT_PAUSED = 17  # big calls with a pause part-way through
MOUNT_PAUSES_MS = [155 + (197 - 155) * i // (MOUNT_PAUSED - 1) for i in range(MOUNT_PAUSED)]
MOUNT_REPLY_US = 4_600  # after the call's last byte
MOUNT_SEGMENT_US = 50  # between a call's segments (1.3 Gbit/s)
MOUNT_ACK_US = 30  # the server ACKs each segment this long after it
MOUNT_SMALL_REPLY_US = 130  # call -> reply: a round trip and 30 µs at the server
MOUNT_SMALL_TURN_US = 20  # reply -> the next call


def build_two_mounts(out: Path) -> dict[str, Path]:
    cap = mc.Capture(snaplen=SNAPLEN)
    small = Flow(cap, mc.CLIENT, MOUNT_SMALL_SERVER, 870, 0)
    big = Flow(cap, mc.CLIENT, MOUNT_BIG_SERVER, 871, 10)
    # The two mounts' frames interleave: gather them, then play them in time
    # order (a pure ACK acknowledges what was sent before it).
    actions: list[tuple[float, int, tuple]] = []

    def add(t: float, *action: object) -> None:
        actions.append((t, len(actions), action))

    # the small mount: one WRITE at a time, answered after 130 µs, 20 µs turnaround
    us = 100.0
    for i in range(MOUNT_SMALL_WRITES):
        add(us, small, True, write_call(0x1000 + i, 1, i * MOUNT_SMALL, MOUNT_SMALL))
        add(us + MOUNT_SMALL_REPLY_US, small, False, write_reply(0x1000 + i, MOUNT_SMALL))
        us += MOUNT_SMALL_REPLY_US + MOUNT_SMALL_TURN_US
    # the big mount: one WRITE at a time, every piece acknowledged; 17 of the calls
    # stop half-way (everything sent so far acknowledged) for 155-197 ms
    n = pieces(MOUNT_BIG)
    us = 200.0
    for i in range(MOUNT_BIG_WRITES):
        pause = MOUNT_PAUSES_MS[i] * 1_000 if i < MOUNT_PAUSED else 0
        times = [us + k * MOUNT_SEGMENT_US + (pause if k >= n // 2 else 0) for k in range(n)]
        payload = mc.record(write_call(0x2000 + i, 2, i * MOUNT_BIG, MOUNT_BIG))
        for k, t in enumerate(times):
            add(t, big, True, payload[k * SEGMENT : (k + 1) * SEGMENT], "piece")
            add(t + MOUNT_ACK_US, big, False, b"", "ack")
        reply_at = times[-1] + MOUNT_REPLY_US
        add(reply_at, big, False, write_reply(0x2000 + i, MOUNT_BIG))
        us = reply_at + 100
    for t, _, (flow, from_client, data, *how) in sorted(actions, key=lambda a: a[:2]):
        if how == ["piece"]:
            flow._frame(True, "PA", flow.cnext, flow.snext, data, t)
            flow.cnext += len(data)
        elif how == ["ack"]:
            flow.ack(from_client, t)
        else:
            flow.send(from_client, data, t)
    return {"two_mounts": cap.write(out / "two_mounts.pcap")}


# ---- 3. a -s 256 capture that missed most WRITE calls ----------------------------------

MISSED_WRITES = 16
MISSED = (1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14)  # calls the capture did not record
MISSED_COUNT = 1024 * 1024
MISSED_SEGMENT_US = 60
MISSED_REPLY_US = 1_500


def build_missed_calls_s256(out: Path) -> dict[str, Path]:
    cap = mc.Capture(snaplen=SNAPLEN)
    f = Flow(cap, mc.CLIENT, mc.SERVER, 870, 0)
    us = 100.0
    n = pieces(MISSED_COUNT)
    for i in range(MISSED_WRITES):
        msg = write_call(0x3000 + i, 1, i * MISSED_COUNT, MISSED_COUNT)
        last = us + (n - 1) * MISSED_SEGMENT_US
        if i in MISSED:  # the capture dropped the call's frames; the server's ACK shows them
            f.skip(True, len(mc.record(msg)))
            f.ack(False, last + 30)
        else:
            f.send(True, msg, us, MISSED_SEGMENT_US)
        f.send(False, write_reply(0x3000 + i, MISSED_COUNT), last + MISSED_REPLY_US)
        us = last + MISSED_REPLY_US + 100
    f.send(True, commit_call(0x3000 + MISSED_WRITES, 1), us)
    f.send(False, commit_reply(0x3000 + MISSED_WRITES), us + 2_000)
    return {"missed_calls_s256": cap.write(out / "missed_calls_s256.pcap")}


# ---- 4. two clients, one server, each WRITE waiting on the server -----------------------

CLIENTS = (mc.CLIENT, "10.0.0.4", "10.0.0.5")
CLIENT_WRITES = 20
CLIENT_COUNT = 32 * 1024
CLIENT_SERVER_US = 2_000  # the server's time per WRITE, after the call's last byte
CLIENT_SLOW_US = 20_000  # ... for the third client's WRITEs: the pair that suffers
CLIENT_TURN_US = 20


def build_two_clients(out: Path) -> dict[str, Path]:
    """Two clients (and a third, slow one in ``three_clients``) writing to one
    server at once, one WRITE at a time each: a server-side capture's everyday
    case."""
    made = {}
    for name, clients in (("two_clients", CLIENTS[:2]), ("three_clients", CLIENTS)):
        cap = mc.Capture(snaplen=SNAPLEN)
        actions: list[tuple[float, int, Flow, bool, bytes]] = []
        for k, client in enumerate(clients):
            flow = Flow(cap, client, mc.SERVER, 870 + k, k * 7)
            server_us = CLIENT_SLOW_US if k == 2 else CLIENT_SERVER_US
            us = 100.0 + k * 13
            for i in range(CLIENT_WRITES):
                xid = 0x4000 + 0x100 * k + i
                actions.append(
                    (
                        us,
                        len(actions),
                        flow,
                        True,
                        write_call(xid, 1, i * CLIENT_COUNT, CLIENT_COUNT),
                    )
                )
                actions.append(
                    (us + server_us, len(actions), flow, False, write_reply(xid, CLIENT_COUNT))
                )
                us += server_us + CLIENT_TURN_US
            xid = 0x4000 + 0x100 * k + CLIENT_WRITES
            actions.append((us, len(actions), flow, True, commit_call(xid, 1)))
            actions.append((us + 300, len(actions), flow, False, commit_reply(xid)))
        for t, _, flow, from_client, msg in sorted(actions, key=lambda a: a[:2]):
            flow.send(from_client, msg, t)
        made[name] = cap.write(out / f"{name}.pcap")
    return made


# ---- 5. a slow server behind a round trip: each hides the other -----------------------

OVERLAP_WRITES = 60
OVERLAP_COUNT = 64 * 1024
OVERLAP_RTT_US = 3_000  # the round trip the client's next call waits on (its ACK)
OVERLAP_SERVER_US = 4_000  # the server's time per WRITE, one at a time
OVERLAP_SEND_US = 300  # a call's sending
OVERLAP_TURN_US = 50  # the client's next call after the ACK


def build_server_and_round_trip(out: Path) -> dict[str, Path]:
    """An ACK-clocked client (each WRITE once the last one's bytes are
    acknowledged, as nfs-rs over NFSv4.1 sends) to a server that takes 4 ms per
    WRITE, one at a time, over a 3 ms round trip: WRITEs queue at the server
    while the round trips go on.  Without the round trip the server still takes
    4 ms each; without the slow server the client still waits a round trip each:
    fixing either alone gains little, both a lot."""
    cap = mc.Capture(snaplen=SNAPLEN)
    f = Flow(cap, mc.CLIENT, mc.SERVER, 870, 0, rtt_us=OVERLAP_RTT_US)
    size = len(mc.record(write_call(0, 1, 0, OVERLAP_COUNT)))
    # (time seen at the client, order, from the client, message, bytes acknowledged)
    actions: list[tuple[float, int, bool, bytes, int]] = []
    us, server_free, sent = 10_000.0, 0.0, f.cnext
    arrivals: list[tuple[float, int]] = []  # (when the server had them, bytes so far)
    for i in range(OVERLAP_WRITES):
        xid = 0x5000 + i
        actions.append(
            (us, len(actions), True, write_call(xid, 1, i * OVERLAP_COUNT, OVERLAP_COUNT), 0)
        )
        sent += size
        arrived = us + OVERLAP_SEND_US + OVERLAP_RTT_US / 2
        arrivals.append((arrived, sent))
        acked = arrived + OVERLAP_RTT_US / 2  # the server's TCP ACK reaches the client
        actions.append((acked, len(actions), False, b"", sent))
        done = max(arrived, server_free) + OVERLAP_SERVER_US
        server_free = done
        actions.append(
            (done + OVERLAP_RTT_US / 2, len(actions), False, write_reply(xid, OVERLAP_COUNT), -1)
        )
        us = acked + OVERLAP_TURN_US
    last = max(a[0] for a in actions)
    xid = 0x5000 + OVERLAP_WRITES
    actions.append((last + 100, len(actions), True, commit_call(xid, 1), 0))
    arrivals.append((last + 100 + OVERLAP_RTT_US / 2, sent + len(mc.record(commit_call(xid, 1)))))
    actions.append((last + 100 + OVERLAP_RTT_US + 500, len(actions), False, commit_reply(xid), -1))
    spacing = OVERLAP_SEND_US / max(pieces(OVERLAP_COUNT) - 1, 1)
    for t, _, from_client, msg, _ack in sorted(actions, key=lambda a: a[:2]):
        if from_client:
            f.send(True, msg, t, spacing)
            continue
        # the server acknowledges what had reached it when its frame left (a half
        # round trip before the client sees it)
        left = t - OVERLAP_RTT_US / 2
        had = max((n for when, n in arrivals if when <= left), default=1_001)
        if msg:
            f.send(False, msg, t, ack=had)
        else:
            f.ack(False, t, had)
    return {"server_and_round_trip": cap.write(out / "server_and_round_trip.pcap")}


# ---- 6. a tail segment lost before a capture at the server ---------------------------

TIMEOUT_WRITES = 8
TIMEOUT_COUNT = 512 * 1024
TIMED_OUT = (2, 5)  # calls whose tail the network lost: the client re-sent it on its timer
TIMEOUT_MS = 210  # the client's retransmission timeout (Linux: at least 200 ms)
TIMEOUT_SEGMENT_US = 50  # between a call's segments
TIMEOUT_REPLY_US = 300  # after the call's last byte


def build_timeout(out: Path) -> dict[str, Path]:
    """One WRITE of 512 KiB at a time; of two calls the network lost the last
    segments before the capture point, so a capture at the server sees the
    client stop part-way through with every byte it saw acknowledged, for a
    retransmission timeout, then the rest (``timeout_server``).  The same
    frames with a client's handshake (``timeout_client``): there a stop with
    everything acknowledged is the client's own pause."""
    paths = {}
    for side in ("server", "client"):
        cap = mc.Capture(snaplen=SNAPLEN)
        f = Flow(cap, mc.CLIENT, mc.SERVER, 870, 0, server_side=side == "server")
        n = pieces(TIMEOUT_COUNT)
        us = 1_000.0
        for i in range(TIMEOUT_WRITES):
            stop = TIMEOUT_MS * 1_000 if i in TIMED_OUT else 0
            payload = mc.record(write_call(0x6000 + i, 1, i * TIMEOUT_COUNT, TIMEOUT_COUNT))
            t = us
            for k in range(n):
                t = us + k * TIMEOUT_SEGMENT_US + (stop if k == n - 1 else 0)
                f._frame(True, "PA", f.cnext, f.snext, payload[k * SEGMENT : (k + 1) * SEGMENT], t)
                f.cnext += len(payload[k * SEGMENT : (k + 1) * SEGMENT])
                f.ack(False, t + 20)
            f.send(False, write_reply(0x6000 + i, TIMEOUT_COUNT), t + TIMEOUT_REPLY_US)
            us = t + TIMEOUT_REPLY_US + 100
        paths[f"timeout_{side}"] = cap.write(out / f"timeout_{side}.pcap")
    return paths


TAIL_WRITES = 96  # (a 50 ms stretch of them: the path's pace the loss removal keeps)
TAIL_COUNT = 64 * 1024
TAIL_LOST = 4  # the call whose last (short) segment the network lost
TAIL_RTO_MS = 207  # the client's retransmission timeout (Linux: at least 200 ms)
TAIL_SEGMENT_US = 500  # between a call's TSO burst and its short tail
TAIL_SERVER_US = 300  # the server's time for a WRITE, after the ACK of its last byte


def build_tail_resent(out: Path) -> dict[str, Path]:
    """WRITEs of 64 KiB one at a time, seen at the client: a TSO burst and a
    short tail each.
    The last, short segment of one call is lost after the capture point: the
    server acknowledges all of the call but that segment, the client re-sends
    it on its retransmission timer, then the server answers.  The ACK of all
    but a call's last segment is what the parser takes for the call's (a
    receiver may hold the ACK of a short last segment), so the 207 ms looked
    like the server's time (``tail_resent``)."""
    cap = mc.Capture(snaplen=SNAPLEN)
    f = Flow(cap, mc.CLIENT, mc.SERVER, 871, 0)
    us = 1_000.0
    for i in range(TAIL_WRITES):
        payload = mc.record(write_call(0x7000 + i, 1, i * TAIL_COUNT, TAIL_COUNT))
        pieces_ = [payload[:SEGMENT], payload[SEGMENT:]]
        assert 0 < len(pieces_[-1]) < 1448
        t = us
        for k, piece in enumerate(pieces_):
            t = us + k * TAIL_SEGMENT_US
            f._frame(True, "PA", f.cnext, f.snext, piece, t)
            f.cnext += len(piece)
        if i == TAIL_LOST:  # all but the last segment arrive; it is re-sent on the timer
            f.ack(False, t + RTT_US, ack=f.cnext - len(pieces_[-1]))
            t += TAIL_RTO_MS * 1_000
            f._frame(True, "PA", f.cnext - len(pieces_[-1]), f.snext, pieces_[-1], t)
        f.ack(False, t + RTT_US)
        f.send(False, write_reply(0x7000 + i, TAIL_COUNT), t + RTT_US + TAIL_SERVER_US)
        us = t + RTT_US + TAIL_SERVER_US + 100
    return {"tail_resent": cap.write(out / "tail_resent.pcap")}


BUILDERS = (
    build_silence_99s,
    build_two_mounts,
    build_missed_calls_s256,
    build_two_clients,
    build_server_and_round_trip,
    build_timeout,
    build_tail_resent,
)


def build_all(outdir: str | os.PathLike[str]) -> dict[str, Path]:
    """Write every scenario into outdir; returns {name: path}."""
    return mc.run_builders(BUILDERS, outdir)


if __name__ == "__main__":
    mc.script(build_all, __file__)
