"""The budget's hop clock on small crafted tables: UDP calls, a window of them in
flight, served either by a FIFO hop of a fixed rate in front of a fast server (the
replies come back on the hop's clock) or by a slow server whose service times add
up (no clock).  Seeded noise, not fitted to the thresholds: each world is the
physics of its bottleneck."""

from __future__ import annotations

import math

import numpy as np

from nfstrace.analysis.budget import _PairCalls, _reply_clock

RTT_NS = 200_000


def _pair(cs: np.ndarray, rf: np.ndarray, nbytes: np.ndarray) -> _PairCalls:
    n = len(cs)
    i64 = lambda v: np.asarray(v, "int64")  # noqa: E731
    return _PairCalls(
        op=np.full(n, "WRITE", object),
        xid=np.arange(n, dtype="int64"),
        fh=np.full(n, "", object),
        cs=i64(cs),
        ce=i64(cs) + 50_000,
        ls=i64(cs),
        le=i64(cs) + 50_000,
        rf=i64(rf),
        rl=i64(rf) + 1_000,
        answered=np.ones(n, bool),
        n_calls=np.ones(n, "int64"),
        status=np.zeros(n, "int64"),
        frame_first=np.arange(n, dtype="int64"),
        frame_last=np.arange(n, dtype="int64"),
        reply_frame=np.arange(n, dtype="int64"),
        call_bytes=i64(nbytes),
        write_bytes=i64(nbytes),
        count=i64(nbytes),
        acked=np.full(n, -1, "int64"),
        conn=np.zeros(n, "int64"),
        udp=np.ones(n, bool),
    )


def _run(service, nbytes: np.ndarray, window: int, hop: bool) -> _PairCalls:
    """A client keeping ``window`` calls in flight.  ``hop``: each call's
    ``service(k)`` is its time on a FIFO hop (then a fast server, with its own
    jitter, that does not hold the hop back); else it is the server's, FIFO."""
    rng = np.random.default_rng(7)
    n = len(nbytes)
    cs, rf = np.zeros(n), np.zeros(n)
    busy_until = 0.0
    for k in range(n):
        cs[k] = 0.0 if k < window else rf[k - window] + 30_000
        start = max(cs[k] + 50_000, busy_until)
        busy_until = start + service(k)
        after = rng.uniform(100_000, 400_000) if hop else 50_000
        rf[k] = busy_until + after + RTT_NS
    return _pair(cs, rf, nbytes)


def test_a_hop_sets_a_clock_at_its_rate() -> None:
    rate = 80e6  # bit/s
    nbytes = np.full(64, 32_896)
    got = _reply_clock(_run(lambda k: nbytes[k] * 8e9 / rate, nbytes, 3, hop=True))
    assert math.isclose(got, rate, rel_tol=0.02)


def test_a_hop_clock_follows_the_bytes() -> None:
    """Calls of different sizes: each takes its own bytes' time on the hop."""
    rate = 40e6
    nbytes = np.random.default_rng(3).choice([8_192, 16_384, 32_768], 64)
    got = _reply_clock(_run(lambda k: nbytes[k] * 8e9 / rate, nbytes, 4, hop=True))
    assert math.isclose(got, rate, rel_tol=0.02)


def test_a_slow_server_sets_no_clock() -> None:
    """Service times with a spread (a disk) add up: no clock, whatever the window."""
    rng = np.random.default_rng(5)
    times = rng.normal(5e6, 0.4e6, 64).clip(1e6)
    nbytes = np.full(64, 32_896)
    for window in (3, 8):
        assert math.isnan(_reply_clock(_run(lambda k: times[k], nbytes, window, hop=False)))


def test_a_per_call_server_is_no_byte_clock() -> None:
    """A server taking the same time for every call, whatever its size: the
    replies do not keep a clock of bytes."""
    nbytes = np.random.default_rng(3).choice([8_192, 16_384, 32_768], 64)
    assert math.isnan(_reply_clock(_run(lambda k: 3e6, nbytes, 4, hop=False)))


def test_replies_out_of_order_are_no_hop() -> None:
    rate = 80e6
    nbytes = np.full(64, 32_896)
    c = _run(lambda k: nbytes[k] * 8e9 / rate, nbytes, 3, hop=True)
    rf = c.rf.copy()
    rf[[20, 21]] = rf[[21, 20]]
    swapped = _PairCalls(**{**c.__dict__, "rf": rf})
    assert math.isnan(_reply_clock(swapped))


def test_too_few_queued_calls_say_nothing() -> None:
    rate = 80e6
    nbytes = np.full(12, 32_896)
    assert math.isnan(_reply_clock(_run(lambda k: nbytes[k] * 8e9 / rate, nbytes, 3, hop=True)))
