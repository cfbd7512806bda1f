"""The critical path of a pair's writes: the chain of waits the write activity
could not have been shorter than, each with its cause.

The time budget (``budget.py``) gives every instant of the write activity to
one cause, the most specific of those at work then.  But causes overlap: while
the server works on one WRITE the round trip of another runs, and removing the
server's time would hand that instant to the round trip, not give it back.
What removing a cause gains is its time *on the critical path*: the chain of
dependencies from the first WRITE call to the last reply (Barford & Crovella's
critical-path analysis of TCP transfers, tcpeval, SIGCOMM 2000, applied to RPC
calls).

The chain is walked backwards from the last reply.  A call is entered at the
moment it released the next step of the chain (its reply, the ACK of its last
byte, or the end of its sending), and its own timeline up to that moment joins
the path: its re-send wait (``loss_recovery``), its sending (``transfer``, with
the stops inside it: a TCP silence before re-sent bytes, a full window, ACK
waits, a client pause), its last bytes queued in the path (``transfer``), the
round trip (``round_trip``), the server's work (``server``; ``commit`` for a
COMMIT, ``server_busy`` for a JUKEBOX answer), its reply (``transfer``).  Then
the walk steps to what released that call, the latest of:

- the end of the client's previous call (the client sends one call after
  another: its own pace);
- the ACK of the previous call's last byte (a sender that waits for its bytes
  to be acknowledged before the next call: TCP's window, a small send buffer);
- a reply, when the client waited for one: all its slots were taken (as many
  calls outstanding as it ever had) or nothing was outstanding (a batch or a
  COMMIT finished).

The time from that release to the call's first packet is the client's own
turnaround (``client_idle``).  Capture gaps on the path stay ``capture_gap``.

A pure function of per-call times the budget has already derived; no I/O.
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass

import numpy as np

# The causes a path segment can have: the budget's (budget.CAUSES is this tuple),
# "unknown" kept last.
PATH_CAUSES = (
    "transfer",
    "round_trip",
    "server",
    "commit",
    "loss_recovery",
    "window",
    "server_busy",
    "client_idle",
    "capture_gap",
    "unknown",
)
_CODE = {c: k for k, c in enumerate(PATH_CAUSES)}


@dataclass(frozen=True)
class CallTimes:
    """One pair's calls (every procedure), times in ns; arrays of one length.

    cs: first packet of the first send; tx_from/tx_end: the last send's first and
    last packet; loss_from..rt_from: its last bytes held back by a lost segment;
    acked: the receiver's ACK of its last byte (-1: none seen);
    rt_from..wait_from: its round trip; wait_from..rf: the server's work (cause
    ``wait_cause``); rf..rl: its reply (an unanswered call: rf = rl = when it
    was given up); conn: its connection."""

    cs: np.ndarray
    tx_from: np.ndarray
    tx_end: np.ndarray
    loss_from: np.ndarray  # its last bytes waited on a loss from here to rt_from
    acked: np.ndarray
    rt_from: np.ndarray
    wait_from: np.ndarray
    rf: np.ndarray
    rl: np.ndarray
    wait_cause: np.ndarray  # int codes into PATH_CAUSES
    conn: np.ndarray


@dataclass(frozen=True)
class Stops:
    """Stops inside a call's sending on its connection (client to server), in
    precedence order of their causes (the first listed wins an overlap)."""

    start: np.ndarray
    end: np.ndarray
    cause: np.ndarray  # int codes into PATH_CAUSES
    conn: np.ndarray
    also: np.ndarray  # a second cause that made the stop too (code; -1: none)


@dataclass(frozen=True)
class Path:
    """Nanoseconds of the critical path per cause; per cause, the time of
    segments another cause owns that this one made too (an ACK wait of a window
    a loss cut is the round trip's and the loss's: removing either removes it);
    how many calls' server (or COMMIT) waits it crosses."""

    ns: dict[str, int]
    also_ns: dict[str, int]
    also_count: dict[str, int]  # how many such segments
    server_waits: int
    steps: int
    window: int

    @property
    def total_ns(self) -> int:
        return sum(self.ns.values())


def code(cause: str) -> int:
    return _CODE[cause]


class _Segments:
    """The path's segments as they are found: (start, end, cause, also, conn)
    rows, conn the call's connection (-1: the client's, not a call's)."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, int, int, int, int]] = []

    def add(self, a: int, b: int, cause: int, also: int = -1, conn: int = -1) -> None:
        if b > a:
            self.rows.append((a, b, cause, also, conn))

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """start, end, cause, also, conn (int64 arrays)."""
        rows = np.array(self.rows, "int64").reshape(-1, 5)
        return rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3], rows[:, 4]


# A visit's parts (``_own``) in the order they join the path; the walk's
# turnaround after them.
_PARTS = ("re-send wait", "sending", "blocked", "round trip", "server", "reply")
_TURNAROUND = len(_PARTS)


def _own(
    t: CallTimes, visits: np.ndarray, sending: _SendingStops, by_conn: dict[int, Stops]
) -> tuple[tuple[np.ndarray, ...], int]:
    """The calls' own timelines the walk visited (``visits``: rows of call, a,
    b), each over its [a, b], as path segments: (step, part, sub, start, end,
    cause, also, conn) arrays, the segments of a step's parts in ``_PARTS``
    order (a sending cut by stops: several, ``sub`` in their order); and how
    many calls' server waits are on the path.  A call's parts: its re-send wait
    (``loss_recovery``), its sending with the stops in it (``_sending``), its
    last bytes behind a lost segment (``loss_recovery``, the round trip's too),
    the round trip, the server's work (its ``wait_cause``), its reply
    (``transfer``).  All calls at once; only a sending that a stop of its
    connection (or of every connection) overlaps is cut call by call."""
    step = np.arange(len(visits))
    i, a, b = visits[:, 0], visits[:, 1], visits[:, 2]
    col = {f: np.asarray(getattr(t, f), "int64")[i] for f in t.__dataclass_fields__}
    loss, transfer, rt = _CODE["loss_recovery"], _CODE["transfer"], _CODE["round_trip"]
    wait_cause = col["wait_cause"]
    fixed = (
        (0, col["cs"], col["tx_from"], loss, -1),
        (2, col["loss_from"], col["rt_from"], loss, rt),  # behind a lost segment
        (3, col["rt_from"], col["wait_from"], rt, -1),
        (4, col["wait_from"], col["rf"], None, -1),  # the server's work, its own cause
        (5, col["rf"], col["rl"], transfer, -1),
    )
    out: list[tuple[np.ndarray, ...]] = []
    served = np.zeros(len(visits), bool)
    for part, lo, hi, cause, also in fixed:
        s, e = np.maximum(lo, a), np.minimum(hi, b)
        on = np.flatnonzero(e > s)
        codes = wait_cause[on] if cause is None else np.full(len(on), cause, "int64")
        if also < 0:  # (a cause of its own: the server's wait is on the path)
            served[on] |= codes == wait_cause[on]
        out.append((step[on], np.full(len(on), part), np.zeros(len(on), "int64"), s[on], e[on],
                    codes, np.full(len(on), also, "int64"), col["conn"][on]))  # fmt: skip
    # the sending, queued: transfer where no stop overlaps it
    s, e = np.maximum(col["tx_from"], a), np.minimum(col["loss_from"], b)
    on = e > s
    cut = on & _overlaps(s, e, col["conn"], by_conn)
    plain = np.flatnonzero(on & ~cut)
    n = len(plain)
    none = np.full(n, -1, "int64")  # (no second cause; the client's, not a call's)
    out.append((step[plain], np.full(n, 1), np.zeros(n, "int64"), s[plain], e[plain],
                np.full(n, transfer, "int64"), none, none))  # fmt: skip
    for k in np.flatnonzero(cut).tolist():
        merged = sending.of(int(col["conn"][k]))
        assert merged is not None  # (a stop overlaps it)
        pieces = _Segments()
        _sending(int(s[k]), int(e[k]), merged, pieces)
        m = len(pieces.rows)
        out.append((np.full(m, k), np.full(m, 1), np.arange(m), *pieces.arrays()))
    arrays = tuple(np.concatenate([o[j] for o in out]).astype("int64") for j in range(8))
    return arrays, int(served.sum())


# Walks of at most this many calls: their timelines a call at a time (numpy's
# fixed cost per array is more than a few calls' Python).
_FEW_VISITS = 48


def _own_each(
    t: CallTimes, visits: list[tuple[int, int, int]], sending: _SendingStops
) -> tuple[tuple[np.ndarray, ...], int]:
    """``_own`` a call at a time (``t``'s arrays may be lists): the same
    segments with the same keys."""
    loss, transfer, rt = _CODE["loss_recovery"], _CODE["transfer"], _CODE["round_trip"]
    rows: list[tuple[int, int, int, int, int, int, int, int]] = []
    served = 0
    for step, (i, a, b) in enumerate(visits):
        wait_cause, conn = int(t.wait_cause[i]), int(t.conn[i])
        tx_from, loss_from, rt_from = int(t.tx_from[i]), int(t.loss_from[i]), int(t.rt_from[i])
        wait_from, rf = int(t.wait_from[i]), int(t.rf[i])
        parts = (
            (0, int(t.cs[i]), tx_from, loss, -1),
            (2, loss_from, rt_from, loss, rt),  # behind a lost segment
            (3, rt_from, wait_from, rt, -1),
            (4, wait_from, rf, wait_cause, -1),  # the server's work, its own cause
            (5, rf, int(t.rl[i]), transfer, -1),
        )
        mine = False
        for part, s, e, cause, also in parts:
            s, e = max(s, a), min(e, b)
            if e > s:
                rows.append((step, part, 0, s, e, cause, also, conn))
                mine |= also < 0 and cause == wait_cause
        served += mine
        s, e = max(tx_from, a), min(loss_from, b)  # the sending, queued (with its stops)
        if e > s:
            st = sending.of(conn)
            if st is None:
                rows.append((step, 1, 0, s, e, transfer, -1, -1))
                continue
            pieces = _Segments()
            _sending(s, e, st, pieces)
            rows += [(step, 1, sub, *row) for sub, row in enumerate(pieces.rows)]
    table = np.array(rows, "int64").reshape(-1, 8)
    return tuple(table[:, j] for j in range(8)), served


class _SendingStops:
    """The stops a call's sending on each connection can meet, merged once per
    connection (not per call): those of every connection (key -1) first, then
    its own, as ``_sending`` reads them (the first listed wins an overlap)."""

    def __init__(self, by_conn: dict[int, Stops]) -> None:
        self.by_conn = by_conn
        self.merged: dict[int, _ConnStops | None] = {}

    def of(self, conn: int) -> _ConnStops | None:
        """The stops of a call's sending on ``conn`` (None: there are none)."""
        if conn in self.merged:
            return self.merged[conn]
        both = [x for x in (self.by_conn.get(-1), self.by_conn.get(conn)) if x is not None]
        out = None
        if both:
            fields = ("start", "end", "cause", "conn", "also")
            out = _ConnStops(
                Stops(*(np.concatenate([getattr(x, f) for x in both]) for f in fields))
            )
        self.merged[conn] = out
        return out


class _ConnStops:
    """One connection's merged stops with their starts sorted and the longest
    stop's length: the stops a span [s, e) can overlap start in
    [s - longest, e), found by bisection (a call at a time, the walk's way)."""

    def __init__(self, st: Stops) -> None:
        self.st = st
        order = np.argsort(st.start, kind="stable")
        self.order = order.tolist()
        self.starts = st.start[order].tolist()
        self.ends = st.end[order].tolist()
        self.longest = max(int((st.end - st.start).max()), 0) if len(st.start) else 0
        self.cause = st.cause.tolist()
        self.also = st.also.tolist()
        self.start_l = st.start.tolist()
        self.end_l = st.end.tolist()


# More candidate stops than this for one span: the vectorised overlap test.
_FEW_STOPS = 32


def _as_lists(t: CallTimes) -> CallTimes:
    """The same times as Python lists (for the walk's one-call-at-a-time reads)."""
    return CallTimes(**{f: getattr(t, f).tolist() for f in t.__dataclass_fields__})


def call_totals(t: CallTimes, stops: Stops, which: np.ndarray) -> tuple[dict[str, int], int]:
    """The calls ``which``'s own timelines summed per cause (each call from its
    first packet to its reply, whatever ran beside it), and the sum of their
    latencies.

    The same parts as ``_own`` gives each call, counted for all calls at once;
    only a sending that a stop of its connection (or of every connection)
    overlaps is cut call by call (``_sending``).  Durations are whole
    nanoseconds, so the float sums are exact in any order."""
    which = np.asarray(which, "int64")
    ns = np.zeros(len(PATH_CAUSES))
    if len(which):
        a, b = t.cs[which], t.rl[which]
        loss, transfer = _CODE["loss_recovery"], _CODE["transfer"]
        fixed = (
            (t.cs, t.tx_from, loss, -1),  # waiting to re-send
            (t.loss_from, t.rt_from, loss, _CODE["round_trip"]),  # behind a lost segment
            (t.rt_from, t.wait_from, _CODE["round_trip"], -1),
            (t.wait_from, t.rf, None, -1),  # the server's work, its own cause
            (t.rf, t.rl, transfer, -1),  # the reply
        )
        for lo, hi, cause, also in fixed:
            d = np.maximum(np.minimum(hi[which], b) - np.maximum(lo[which], a), 0).astype(float)
            codes = t.wait_cause[which] if cause is None else np.full(len(which), cause)
            ns += np.bincount(codes, weights=d, minlength=len(PATH_CAUSES))
            if also >= 0:
                ns[also] += d.sum()
        # the sending, queued: transfer where no stop overlaps it
        s = np.maximum(t.tx_from[which], a)
        e = np.minimum(t.loss_from[which], b)
        sending = e > s
        by_conn = _by_conn(stops)
        cut = sending & _overlaps(s, e, t.conn[which], by_conn)
        plain = sending & ~cut
        ns[transfer] += (e[plain] - s[plain]).astype(float).sum()
        seg = _Segments()
        sending = _SendingStops(by_conn)
        for k in np.flatnonzero(cut):
            merged = sending.of(int(t.conn[int(which[k])]))
            assert merged is not None  # (a stop overlaps it)
            _sending(int(s[k]), int(e[k]), merged, seg)
        cut_s, cut_e, cut_cause, also_c, _ = seg.arrays()
        d = (cut_e - cut_s).astype(float)
        ns += np.bincount(cut_cause, weights=d, minlength=len(PATH_CAUSES))
        two = also_c >= 0
        ns += np.bincount(also_c[two], weights=d[two], minlength=len(PATH_CAUSES))
    latency = int((t.rl[which] - t.cs[which]).sum()) if len(which) else 0
    return {c: int(v) for c, v in zip(PATH_CAUSES, ns, strict=True)}, latency


def _overlaps(
    s: np.ndarray, e: np.ndarray, conn: np.ndarray, by_conn: dict[int, Stops]
) -> np.ndarray:
    """Whether a stop of each interval's connection, or of every connection
    (key -1), overlaps [s, e): the latest end among the stops that start
    before e lies after s."""
    out = np.zeros(len(s), bool)
    for key, st in by_conn.items():
        mine = np.ones(len(s), bool) if key == -1 else conn == key
        if not mine.any() or not len(st.start):
            continue
        order = np.argsort(st.start, kind="stable")
        starts, reach = st.start[order], np.maximum.accumulate(st.end[order])
        k = np.searchsorted(starts, e[mine], side="left")
        hit = np.zeros(int(mine.sum()), bool)
        ok = k > 0
        hit[ok] = reach[k[ok] - 1] > s[mine][ok]
        out[mine] |= hit
    return out


def _by_conn(stops: Stops) -> dict[int, Stops]:
    out: dict[int, Stops] = {}
    for conn in np.unique(stops.conn) if len(stops.conn) else []:
        m = stops.conn == conn
        out[int(conn)] = Stops(
            stops.start[m], stops.end[m], stops.cause[m], stops.conn[m], stops.also[m]
        )
    return out


def _sending(s: int, e: int, cs: _ConnStops, seg: _Segments) -> None:
    """[s, e) of a call's sending: its connection's stops where they fall (the
    first in precedence order wins), transfer elsewhere.  (A few stops are
    looked at one by one: numpy's calls cost more than they do.)"""
    lo_at = bisect.bisect_left(cs.starts, s - cs.longest)
    hi_at = bisect.bisect_left(cs.starts, e)  # the stops starting before e
    if hi_at - lo_at > _FEW_STOPS:
        st = cs.st
        _sending_many(s, e, st, np.flatnonzero((st.start < e) & (st.end > s)), seg)
        return
    ends, order = cs.ends, cs.order
    k = sorted(order[j] for j in range(lo_at, hi_at) if ends[j] > s)
    if not k:
        seg.add(s, e, _CODE["transfer"])
        return
    start, end = cs.start_l, cs.end_l
    bounds = sorted(
        {s, e, *(min(max(start[j], s), e) for j in k), *(min(max(end[j], s), e) for j in k)}
    )
    # each piece's stop: the first in precedence order whose span holds its middle
    # (the stops painted in that order over the pieces they hold, each piece once)
    mids = [lo + (hi - lo) // 2 for lo, hi in itertools.pairwise(bounds)]
    owner = [-1] * len(mids)
    for j in k:
        for at in range(bisect.bisect_left(mids, start[j]), bisect.bisect_left(mids, end[j])):
            if owner[at] < 0:
                owner[at] = j
    for (lo, hi), hit in zip(itertools.pairwise(bounds), owner, strict=True):
        if hit >= 0:
            seg.add(lo, hi, cs.cause[hit], cs.also[hit])
        else:
            seg.add(lo, hi, _CODE["transfer"])


def _sending_many(s: int, e: int, st: Stops, k: np.ndarray, seg: _Segments) -> None:
    """``_sending`` where many stops may overlap [s, e): ``k`` those that do."""
    if not len(k):
        seg.add(s, e, _CODE["transfer"])
        return
    bounds = np.unique(np.r_[s, e, np.clip(st.start[k], s, e), np.clip(st.end[k], s, e)])
    for lo, hi in itertools.pairwise(bounds):
        mid = lo + (hi - lo) // 2
        hit = k[(st.start[k] <= mid) & (st.end[k] > mid)]
        if len(hit):
            seg.add(int(lo), int(hi), int(st.cause[hit[0]]), int(st.also[hit[0]]))
        else:
            seg.add(int(lo), int(hi), _CODE["transfer"])


def critical_path(
    t: CallTimes,
    stops: Stops,
    gaps: tuple[np.ndarray, np.ndarray],
    start: int,
    end: int,
    last: int,
    hidden: int = 0,
    unread: tuple[np.ndarray, np.ndarray] | None = None,
) -> Path:
    """The critical path from ``start`` to ``end`` of a pair whose last
    WRITE/COMMIT reply is call ``last``'s (see the module docstring).
    ``unread``: spans in which the client sent calls the capture holds but could
    not read (a short snaplen's unread records): the client's turnaround there
    was its sending (``transfer``)."""
    n = len(t.cs)
    order = np.argsort(t.cs, kind="stable")
    rank = np.empty(n, "int64")
    rank[order] = np.arange(n)
    # calls outstanding just before each call started, and the most there ever were
    ends_sorted = np.sort(t.rl)
    before = np.arange(n) - np.searchsorted(ends_sorted, t.cs[order], side="right")
    outstanding = np.empty(n, "int64")
    outstanding[order] = np.maximum(before, 0)
    window = int(outstanding.max()) + 1 if n else 1
    reply_order = np.argsort(t.rl, kind="stable")
    replies = t.rl[reply_order]
    by_conn = _by_conn(stops)
    sending = _SendingStops(by_conn)

    # the walk: the calls it steps through (each one's own timeline over [a, b]
    # goes onto the path after it, all at once: _own) and its own segments, each
    # keyed by (step, part) so that the path's segments keep the walk's order
    walk = _Segments()
    keys: list[tuple[int, int]] = []

    def add(step: int, part: int, a: int, b: int, cause: int) -> None:
        if b > a:
            walk.add(a, b, cause)
            keys.append((step, part))

    client = _CODE["client_idle"]
    lt = _as_lists(t)
    rank_l, order_l, outstanding_l = rank.tolist(), order.tolist(), outstanding.tolist()
    replies_l, reply_order_l = replies.tolist(), reply_order.tolist()
    i, p = last, end
    if p > lt.rl[i]:  # the activity ended on a reply the capture missed the call of
        add(-1, 0, int(lt.rl[i]), p, _CODE["unknown"])
        p = int(lt.rl[i])
    steps = 0
    visits: list[tuple[int, int, int]] = []  # (call, a, b)
    seen = [False] * n
    while True:
        steps += 1
        seen[i] = True
        visits.append((i, max(lt.cs[i], start), p))
        p = lt.cs[i]
        if p <= start:
            break
        r = rank_l[i]
        k = order_l[r - 1] if r > 0 else -1
        # what released call i: the previous call's end or ACK, or a reply
        cand = []
        if k >= 0:
            cand.append((min(lt.tx_end[k], p), 0, k))
            if 0 <= lt.acked[k] <= p:
                cand.append((lt.acked[k], 1, k))
        if outstanding_l[i] >= window - 1 or outstanding_l[i] == 0:
            at = bisect.bisect_right(replies_l, p) - 1
            if at >= 0:
                j = reply_order_l[at]
                if j != i and not seen[j]:
                    cand.append((replies_l[at], 2, j))
        cand = [c for c in cand if not seen[c[2]]]
        if not cand:
            add(steps - 1, _TURNAROUND, start, p, client)
            break
        when, how, j = max(cand)
        when = max(when, start)
        # the client's turnaround; its first ``hidden`` ns the reply and the next
        # call travelling, where the capture point does not see the round trip
        add(steps - 1, _TURNAROUND, when, min(when + hidden, p), _CODE["round_trip"])
        add(steps - 1, _TURNAROUND + 1, min(when + hidden, p), p, client)
        p = when
        if p <= start:
            break
        i = j
        if how == 0:  # entered at the end of its sending
            p = min(p, lt.tx_end[j])
    if len(visits) > _FEW_VISITS:
        own, server_waits = _own(t, np.array(visits, "int64").reshape(-1, 3), sending, by_conn)
    else:
        own, server_waits = _own_each(lt, visits, sending)
    key = np.array(keys, "int64").reshape(-1, 2)
    walked = (key[:, 0], key[:, 1], np.zeros(len(key), "int64"), *walk.arrays())
    merged = [np.concatenate([w, o]) for w, o in zip(walked, own, strict=True)]
    in_order = np.lexsort((merged[2], merged[1], merged[0]))
    s, e, cause, also, conn = (x[in_order] for x in merged[3:])
    if unread is not None:  # (the parts keep their connections: _blocked_over reads them)
        s, e, cause, also, conn = _gaps_over(
            s, e, cause, also, conn, *unread, only=client, to="transfer"
        )
    s, e, cause, also = _blocked_over(s, e, cause, also, conn, stops)
    s, e, cause, also, _ = _gaps_over(s, e, cause, also, np.full(len(s), -1), *gaps)
    ns = np.bincount(cause, weights=(e - s).astype(float), minlength=len(PATH_CAUSES))
    two = also >= 0
    also_ns = np.bincount(also[two], weights=(e - s)[two].astype(float), minlength=len(PATH_CAUSES))
    also_n = np.bincount(also[two], minlength=len(PATH_CAUSES))
    return Path(
        ns={c: int(v) for c, v in zip(PATH_CAUSES, ns, strict=True)},
        also_ns={c: int(v) for c, v in zip(PATH_CAUSES, also_ns, strict=True)},
        also_count={c: int(v) for c, v in zip(PATH_CAUSES, also_n, strict=True)},
        server_waits=int(server_waits),
        steps=steps,
        window=window,
    )


# What a TCP silence of the client's before it re-sent lost bytes (a loss_recovery
# stop) takes over where it covers them: the stream was blocked, so nothing after
# the hole reached the server (the budget's precedence: ``_tcp_silence`` first).
_BLOCKABLE = ("client_idle", "round_trip", "server", "commit")


def _blocked_over(
    s: np.ndarray,
    e: np.ndarray,
    cause: np.ndarray,
    also: np.ndarray,
    conn: np.ndarray,
    stops: Stops,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The segments with their parts under the loss stops of their connection
    (the client's turnaround, of any) made ``loss_recovery``: a turnaround the
    client spent silent until it re-sent lost bytes waited on its retransmission
    timer, not on itself (seen at the server, a call whose first segments were
    lost starts with their re-send: the lab's nfs-rs through 1.5% loss, four 205
    ms timeouts were 'client idle', 33% of the path); a COMMIT sent behind a
    hole waits for its re-send, not for the server's flush (the same run seen
    at the client: 433 ms of 'commit' on the path, its removal 1.74x, where the
    budget and the lab's COMMITs of 2 ms say loss)."""
    lost = np.flatnonzero(stops.cause == _CODE["loss_recovery"])
    if not len(lost) or not len(s):
        return s, e, cause, also
    # (only segments some loss stop overlaps: a walk of a million calls has
    # millions of segments and a handful of stops)
    order = lost[np.argsort(stops.start[lost], kind="stable")]
    reach = np.maximum.accumulate(stops.end[order])  # the furthest end of the stops so far
    before = np.searchsorted(stops.start[order], e, side="left")  # stops starting before e
    covered = (before > 0) & (reach[np.maximum(before - 1, 0)] > s)
    held = covered & np.isin(cause, [_CODE[c] for c in _BLOCKABLE])
    keep = ~held
    parts = [(s[keep], e[keep], cause[keep], also[keep])]
    for k in np.flatnonzero(held):
        mine = lost[(stops.conn[lost] == conn[k]) | (conn[k] < 0)]
        parts.append(
            _gaps_over(
                s[k : k + 1],
                e[k : k + 1],
                cause[k : k + 1],
                also[k : k + 1],
                conn[k : k + 1],
                stops.start[mine],
                stops.end[mine],
                to="loss_recovery",
            )[:4]
        )
    return tuple(np.concatenate([p[j] for p in parts]) for j in range(4))  # type: ignore[return-value]


def _gaps_over(
    s: np.ndarray,
    e: np.ndarray,
    cause: np.ndarray,
    also: np.ndarray,
    conn: np.ndarray,
    gs: np.ndarray,
    ge: np.ndarray,
    only: int = -1,
    to: str = "capture_gap",
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Segments cut where capture gaps lie; those parts are ``capture_gap``
    (spans [gs, ge) given another cause ``to``; ``only``: in segments of that
    cause alone).  Each part keeps its segment's connection (``conn``: the
    segments' own, returned beside them as cut)."""
    if not len(gs) or not len(s):
        return s, e, cause, also, conn
    out: list[tuple[int, int, int, int, int]] = []
    gap = _CODE[to]
    for a, b, c, x, n in zip(s, e, cause, also, conn, strict=True):
        if only >= 0 and c != only:
            out.append((int(a), int(b), int(c), int(x), int(n)))
            continue
        cur = int(a)
        for g in np.flatnonzero((gs < b) & (ge > a))[np.argsort(gs[(gs < b) & (ge > a)])]:
            lo, hi = max(int(gs[g]), int(a)), min(int(ge[g]), int(b))
            if lo > cur:
                out.append((cur, lo, int(c), int(x), int(n)))
            out.append((lo, hi, gap, -1, int(n)))
            cur = max(cur, hi)
        if cur < b:
            out.append((cur, int(b), int(c), int(x), int(n)))
    arr = np.array(out, "int64").reshape(-1, 5)
    return arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3], arr[:, 4]
