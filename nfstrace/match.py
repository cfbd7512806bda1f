"""Messages -> transactions: calls matched to replies by XID.

One row per logical call.  The match key is (client address, server address,
program, xid) -- not the TCP connection: a Linux client re-sends a call with
the same xid on a new connection after a reconnect.  Calls with the same key
are one transaction re-sent (an RPC retransmission) while each follows the
previous within ``MatchConfig.xid_reuse_ns``; further apart, the xid was
reused and a new transaction starts.  A client re-sends only while it has no
reply, so a send after a reply it heard starts a new transaction too: after a
reply its TCP acknowledged, or after ``MatchConfig.max_unheard_replies``
captured replies of the same call (each can have been lost past the capture
point, as seen from the server's side, but not time after time: an xid
reused every second for a day is many calls, not one re-sent for a day).
Time alone cannot tell them apart: a client that lost a reply re-sends about
a second after it (UDP) -- as often as a busy client may reuse an xid.
A reply answers the latest send before
it in the capture (frame order: a reply stamped before its call, by a clock
stepped back, still answers it, with a negative latency) with its client,
server and xid on the reversed port pair -- its TCP connection; a MOUNT reply
on port 635 never answers an NFS call on 2049, nor a reply on one connection
a call on another -- and so the transaction of that send (a call re-sent on
a new connection is answered there); a second reply is a duplicate
(the server's duplicate request cache answering a re-sent call, or a re-sent
reply).  A reply just before the first captured send of its xid answered a
send made before the capture began: when the captured (re-)send is answered
too, it is that call's duplicate reply (``_replies_before_first_send``).
Calls without replies and replies without calls are kept.

Rows are in the order of their start -- the first packet of the first call
(a reply without its call: the reply's last packet) -- then of that packet's
frame (the capture order of equal times); the calls of one frame keep their
order.  A frame belongs to one host pair, so the transactions of host-pair
partitions merged in that order (``combine``) are those of one match.

Times (int64 ns; <NA> where absent):
- ``t_call_ns``: first packet of the first call (client-perceived start);
- ``t_call_end_ns``: last packet of the first call;
- ``t_call_last_ns`` / ``t_call_last_end_ns``: first/last packet of the last send;
- ``t_reply_first_ns`` / ``t_reply_ns``: first/last packet of the first reply;
- ``latency_ns`` = t_reply - t_call (headline, as the client waits);
- ``latency_last_ns`` = t_reply - t_call_last_end (after the last re-send);
- ``srt_ns`` = t_reply - t_call_end: tshark's ``rpc.time`` (it times a call
  from the frame where its reassembly completes).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from nfstrace.combining import categorical_from, lexsort, merged, typed, unique_first
from nfstrace.inference import WRITE_BYTES, infer
from nfstrace.protocol.rpc import program_name
from nfstrace.schema import MESSAGE_DTYPES, TRANSACTION_DTYPES


@dataclass(frozen=True)
class MatchConfig:
    # Two calls with the same key further apart than this are different
    # transactions (xid reuse), not a retransmission.  NFS over TCP re-sends
    # after 60 s by default (timeo=600), with back-off: stay well above it.
    xid_reuse_ns: int = 300 * 1_000_000_000
    # Replies of one call captured before it was sent again: past this many,
    # the next send is a new call (its xid reused).  One reply lost after the
    # capture point is common on a lossy path, four in a row are not.
    max_unheard_replies: int = 3


# message column -> transaction column, taken from the first call
_CALL_COLUMNS = {
    "src": "client",
    "sport": "client_port",
    "dst": "server",
    "dport": "server_port",
    "transport": "transport",
    "conn": "conn",
    "xid": "xid",
    "prog": "prog",
    "vers": "vers",
    "proc": "proc",
    "op": "op",
    "ops": "ops",
    "auth": "auth",
    "gss_service": "gss_service",
    "fh": "fh",
    "name": "name",
    "offset": "offset",
    "count": "count",
    "stable": "stable",
    "session": "session",
    "slot": "slot",
    "seqid": "seqid",
    "minor": "minor",
    "rpc_len": "call_bytes",
    "frame_first": "call_frame_first",
    "frame_last": "call_frame",
    "truncated": "call_truncated",
    "nfs_decode": "call_decode",
}
# message column -> transaction column, taken from the first reply
_REPLY_COLUMNS = {
    "reply_stat": "reply_stat",
    "accept_stat": "accept_stat",
    "nfs_status": "status",
    "op_status": "op_status",
    "count": "reply_count",
    "committed": "committed",
    "verifier": "verifier",
    "eof": "eof",
    "fh": "reply_fh",
    "rpc_len": "reply_bytes",
    "frame_last": "reply_frame",
    "nfs_decode": "reply_decode",
}


# The message columns match (the inference included) reads: a caller that keeps
# only some columns after the match may let go of the others before it
# (trace.match_partition, without AnalysisConfig.keep_messages).
MESSAGE_COLUMNS_READ: frozenset[str] = frozenset(
    {*_CALL_COLUMNS, *_REPLY_COLUMNS, "ts_first_ns", "ts_last_ns", "msgtype", "acked_ns"}
    | {"body_offset"}
)


def columns_from(message_column: str) -> tuple[str, ...]:
    """The transaction columns taken from a message column: the first call's,
    then the first reply's (``count`` -> ``count``, ``reply_count``)."""
    return tuple(
        names[message_column]
        for names in (_CALL_COLUMNS, _REPLY_COLUMNS)
        if message_column in names
    )


def match(
    messages: pd.DataFrame,
    config: MatchConfig | None = None,
    events: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The transactions table (columns: ``nfstrace.schema.TRANSACTION_COLUMNS``).

    Works on message positions: which call starts each transaction, which send
    is its last, which reply answers it; each output column is then one take
    from the messages table (no copy of the whole table, no string joins).
    What a snaplen hid is then inferred from the evidence left
    (``nfstrace.inference``; ``events``: the parser's, whose unread record
    stretches give calls back to replies without call).
    """
    config = config or MatchConfig()
    calls = np.flatnonzero((messages["msgtype"] == "call").to_numpy(dtype=bool))
    replies = np.flatnonzero((messages["msgtype"] == "reply").to_numpy(dtype=bool))
    src, dst = _host_codes(messages)
    groups = _group_calls(messages, calls, src, dst, config)
    rows, answers = _attach_replies(messages, groups, replies, src, dst, config)
    heard = _sends_after_heard_replies(messages, groups, answers, config)
    if len(heard):  # those sends start transactions of their own: group again
        groups = _group_calls(messages, calls, src, dst, config, heard)
        rows, _ = _attach_replies(messages, groups, replies, src, dst, config)
    del groups, answers, src, dst  # (message-long arrays: not kept while the table is made)
    tx, call, reply = _finish(messages, rows)
    tx = infer(tx, messages, call, reply, events)
    inferred = tx.pop(WRITE_BYTES).to_numpy("int64")
    tx["write_bytes"] = _write_bytes(tx, inferred)
    return typed(tx, TRANSACTION_DTYPES)


def _host_codes(messages: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """src and dst as integer codes of one vocabulary, in the strings' sort order
    (so sorting codes sorts addresses as strings would; missing sorts last)."""
    src, dst = messages["src"], messages["dst"]
    if isinstance(src.dtype, pd.CategoricalDtype) and isinstance(dst.dtype, pd.CategoricalDtype):
        # category columns: their codes mapped into the union of their categories
        hosts = pd.Index(sorted({*src.cat.categories, *dst.cat.categories}), dtype=object)

        def codes(column: pd.Series) -> np.ndarray:
            into = np.r_[hosts.get_indexer(column.cat.categories.astype(object)), len(hosts)]
            return into[column.cat.codes.to_numpy("int64")]  # code -1 (missing): the last

        return codes(src), codes(dst)
    n = len(messages)
    both, uniques = pd.factorize(pd.concat([src, dst]), sort=True)
    both = np.where(both < 0, len(uniques), both)
    return both[:n], both[n:]


@dataclass(frozen=True)
class _Groups:
    """Transactions from calls, in group order (by client, server, program, xid, time)."""

    first: np.ndarray  # message position of the first send
    last: np.ndarray  # ... of the last send
    n_calls: np.ndarray
    call_conns: np.ndarray
    call_times: np.ndarray  # object: tuple of send times when re-sent, else NaN
    of_send: np.ndarray  # per message position: the group a call message sends (-1: none)
    sends: np.ndarray  # message positions of the sends, by group, each group's in time order
    start: np.ndarray  # where each group's sends start in ``sends``


def _group_calls(
    messages: pd.DataFrame,
    calls: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    config: MatchConfig,
    new_calls: np.ndarray | None = None,
) -> _Groups:
    """Calls grouped into transactions; ``new_calls``: message positions of
    sends that start a transaction whatever came before them."""
    ts = messages["ts_first_ns"].to_numpy("int64")[calls]
    prog = messages["prog"].to_numpy("int64")[calls]
    xid = messages["xid"].to_numpy("int64")[calls]
    proc = messages["proc"].to_numpy("int64")[calls]
    s, d = src[calls], dst[calls]
    order = lexsort((ts, xid, prog, d, s))  # stable: ties keep message order
    pos = calls[order]
    s, d, prog, xid, proc, ts = s[order], d[order], prog[order], xid[order], proc[order], ts[order]
    same_key = (s[1:] == s[:-1]) & (d[1:] == d[:-1]) & (prog[1:] == prog[:-1])
    same_key &= (xid[1:] == xid[:-1]) & (proc[1:] == proc[:-1])
    near = (ts[1:] - ts[:-1]) <= config.xid_reuse_ns
    new = np.r_[True, ~(same_key & near)] if len(pos) else np.zeros(0, bool)
    if new_calls is not None and len(pos):
        new |= np.isin(pos, new_calls)
    starts = np.flatnonzero(new)
    ends = np.r_[starts[1:], len(pos)].astype("int64") if len(starts) else starts
    n_calls = ends - starts
    call_conns = np.ones(len(starts), "int64")
    call_times = np.full(len(starts), np.nan, dtype=object)
    resent = np.flatnonzero(n_calls > 1)
    if len(resent):
        # the sends of re-sent calls (contiguous per group): distinct connections,
        # and the tuple of send times (in time order)
        group = np.cumsum(new) - 1
        rows = np.flatnonzero(n_calls[group] > 1)
        group = group[rows]
        conn = messages["conn"].to_numpy("int64")[pos[rows]]
        o = np.lexsort((conn, group))
        distinct = np.r_[True, (group[o][1:] != group[o][:-1]) | (conn[o][1:] != conn[o][:-1])]
        call_conns[resent] = np.bincount(group[o][distinct], minlength=len(starts))[resent]
        times = np.split(ts[rows], np.cumsum(n_calls[resent])[:-1])
        for k, t in zip(resent, times, strict=True):  # element-wise: a list of equal-length
            call_times[k] = tuple(t)  # tuples would be taken for a 2-D array
    of_send = np.full(len(messages), -1, "int64")
    of_send[pos] = np.cumsum(new) - 1
    return _Groups(
        pos[starts], pos[ends - 1], n_calls, call_conns, call_times, of_send, pos, starts
    )


def _asof_backward(
    left_keys: tuple[np.ndarray, ...],
    left_t: np.ndarray,
    right_keys: tuple[np.ndarray, ...],
    right_t: np.ndarray,
) -> np.ndarray:
    """For each left row, the right row with equal keys and the latest time at or
    before the left row's (of equal times, the last in right order); -1 if none.
    ``pd.merge_asof(direction="backward")`` on integer arrays: both sides sorted
    by key, time and side (right first on ties; stable), then the last right
    row seen so far in that order.  The keys are made one integer per row first
    (``_key_codes``) and, where they fit, key, time and side one int64: one sort
    (a lexsort of every key was most of the match's time)."""
    n_right = len(right_t)
    keys = [np.r_[rk, lk] for rk, lk in zip(right_keys, left_keys, strict=True)]
    group = _key_codes(keys)
    del keys
    t = np.r_[right_t, left_t].astype("int64")
    side = np.r_[np.zeros(n_right, "int8"), np.ones(len(left_t), "int8")]  # right first on ties
    order = _sorted_by(group, t, side)
    is_right = order < n_right
    seen = (
        np.maximum.accumulate(np.where(is_right, np.arange(len(order)), -1))
        if len(order)
        else order
    )
    at = np.flatnonzero(~is_right)
    candidate = np.where(seen[at] >= 0, order[np.maximum(seen[at], 0)], -1)
    same = (candidate >= 0) & (group[np.maximum(candidate, 0)] == group[order[at]])
    out = np.full(len(left_t), -1, "int64")
    out[order[at] - n_right] = np.where(same, candidate, -1)
    return out


def _key_codes(keys: list[np.ndarray]) -> np.ndarray:
    """One non-negative integer per row, equal for rows equal in every key: the
    keys' offsets from their least combined in mixed radix (addresses, ports and
    an xid: a connection's keys fit one int64), the combination so far
    factorized (a hash, no sort) where the next key would overflow it."""
    n_rows = len(keys[0]) if keys else 0
    group = np.zeros(n_rows, "int64")
    if not n_rows:
        return group
    size = 1  # group < size
    top = np.iinfo("int64").max >> 1
    for key in keys:
        lo = int(key.min())
        span = int(key.max()) - lo + 1
        if span > top // size and size > 1:  # re-numbered: the distinct rows so far
            group = pd.factorize(group)[0]
            size = int(group.max()) + 1
        if span > top // size:  # (a key of a wide range: its distinct values)
            codes, uniques = pd.factorize(key)
            span = len(uniques)
        else:
            codes = key - lo
        group = group * span + codes
        size *= span
    return group


def _sorted_by(group: np.ndarray, t: np.ndarray, side: np.ndarray) -> np.ndarray:
    """``np.lexsort((side, t, group))``: as one int64 key and a stable sort when
    group, time (from its least) and side fit in 63 bits."""
    if not len(t):
        return np.zeros(0, "int64")
    lo = int(t.min())
    t_bits = max(int(t.max()) - lo, 0).bit_length()
    g_bits = max(int(group.max()), 0).bit_length()
    if g_bits + t_bits + 1 > 62:  # the rows' groups numbered 0, 1, ... (a hash)
        group = pd.factorize(group)[0]
        g_bits = max(int(group.max()), 0).bit_length()
    if g_bits + t_bits + 1 > 62:
        return np.lexsort((side, t, group))
    key = group << (t_bits + 1)
    key |= (t - lo) << 1
    key |= side
    return np.argsort(key, kind="stable")


@dataclass(frozen=True)
class _Rows:
    """The transactions in output order, as message positions (-1: none)."""

    call: np.ndarray  # first send of the call (-1: a reply without call)
    last_call: np.ndarray  # last send
    reply: np.ndarray  # the first reply (of a reply without call: itself)
    n_calls: np.ndarray
    n_replies: np.ndarray
    call_conns: np.ndarray  # -1 for replies without call
    call_times: np.ndarray


def _attach_replies(
    messages: pd.DataFrame,
    groups: _Groups,
    replies: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    config: MatchConfig,
) -> tuple[_Rows, tuple[np.ndarray, np.ndarray]]:
    """The transactions, and (replies in capture order, the group each answers
    or -1)."""
    ts_first = messages["ts_first_ns"].to_numpy("int64")
    ts_last = messages["ts_last_ns"].to_numpy("int64")
    xid = messages["xid"].to_numpy("int64")
    # Capture order, not timestamps, says which call a reply follows (as tshark
    # reads it): a clock stepped back, or interfaces merged with clocks apart,
    # stamp a reply before its call; the capture still shows it after.
    after = messages["frame_last"].to_numpy("int64")
    before = messages["frame_first"].to_numpy("int64")
    sport = messages["sport"].to_numpy("int64")
    dport = messages["dport"].to_numpy("int64")
    # replies in capture order (stable); the sends they can answer: each call
    # message, its transaction known (a re-send on a new connection after a
    # reconnect is answered there, on its own ports)
    replies = replies[np.argsort(after[replies], kind="stable")]
    sends = np.flatnonzero(groups.of_send >= 0)
    sends = sends[np.argsort(before[sends], kind="stable")]
    hit = _asof_backward(
        # the reply's client, server, their ports and xid: a reply answers a call
        # on the reversed address and port pair (its connection, for TCP)
        (dst[replies], src[replies], dport[replies], sport[replies], xid[replies]),
        after[replies],
        (src[sends], dst[sends], sport[sends], dport[sends], xid[sends]),
        before[sends],
    )
    if len(sends) == 0:  # no calls: every reply is without one
        tx = np.full(len(replies), -1, "int64")
    else:  # the transaction each reply answers (-1: none)
        tx = np.where(hit >= 0, groups.of_send[sends[np.maximum(hit, 0)]], -1)
        # A reply long after the last send answers a later, unseen call (xid reuse).
        last_send = ts_first[groups.last[tx]]
        tx[(tx >= 0) & (ts_last[replies] - last_send > config.xid_reuse_ns)] = -1

    n = len(groups.first)
    answered = tx >= 0
    answered_tx, first_of = unique_first(tx[answered])  # (group numbers: no sort)
    reply = np.full(n, -1, "int64")
    reply[answered_tx] = replies[answered][first_of]  # the first reply in capture order
    n_replies = np.bincount(tx[answered], minlength=n)
    early = _replies_before_first_send(
        messages, groups, replies, tx, reply, sends, src, dst, config
    )
    n_replies += np.bincount(early[early >= 0], minlength=n)
    orphans = replies[~answered & (early < 0)]
    k = len(orphans)
    return _Rows(
        call=np.r_[groups.first, np.full(k, -1)].astype("int64"),
        last_call=np.r_[groups.last, np.full(k, -1)].astype("int64"),
        reply=np.r_[reply, orphans].astype("int64"),
        n_calls=np.r_[groups.n_calls, np.zeros(k, "int64")],
        n_replies=np.r_[n_replies, np.ones(k, "int64")],
        call_conns=np.r_[groups.call_conns, np.full(k, -1)].astype("int64"),
        call_times=np.r_[groups.call_times, np.full(k, np.nan, dtype=object)],
    ), (replies, tx)


def _replies_before_first_send(
    messages: pd.DataFrame,
    groups: _Groups,
    replies: np.ndarray,
    tx: np.ndarray,
    reply: np.ndarray,
    sends: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    config: MatchConfig,
) -> np.ndarray:
    """Per reply (``replies``, capture order), the transaction it answered before
    the capture saw its call, else -1.  A reply that answers no captured send
    but comes just before the first captured send of its xid (same client,
    server and reversed ports, within ``MatchConfig.xid_reuse_ns``, not heard by
    the client before that send: its TCP had not acknowledged it) answered a
    send made before the capture began; the captured send is a re-send, and
    when the server answers it too that is a second, duplicate reply of the
    same call (as the server's duplicate request cache gives it) -- not a reply
    without call beside a call answered once.  Only transactions with a reply
    after their captured send take such a reply: else the earlier reply would
    be their only answer, given before the call the capture shows."""
    out = np.full(len(replies), -1, "int64")
    lone = np.flatnonzero(tx < 0)
    if not len(lone) or not len(sends):
        return out
    after = messages["frame_last"].to_numpy("int64")
    before = messages["frame_first"].to_numpy("int64")
    xid = messages["xid"].to_numpy("int64")
    sport = messages["sport"].to_numpy("int64")
    dport = messages["dport"].to_numpy("int64")
    r = replies[lone]
    # the first send after each lone reply: a backward as-of on negated frame numbers
    hit = _asof_backward(
        (dst[r], src[r], dport[r], sport[r], xid[r]),
        -after[r],
        (src[sends], dst[sends], sport[sends], dport[sends], xid[sends]),
        -before[sends],
    )
    send = sends[np.maximum(hit, 0)]
    group = groups.of_send[send]
    ts_first = messages["ts_first_ns"].to_numpy("int64")
    ts_last = messages["ts_last_ns"].to_numpy("int64")
    acked = (
        messages["acked_ns"].to_numpy("int64")
        if "acked_ns" in messages
        else np.full(len(messages), -1, "int64")
    )
    heard = (acked[r] >= 0) & (acked[r] <= ts_first[send])
    take = (
        (hit >= 0)
        & (groups.first[group] == send)
        & (ts_first[send] - ts_last[r] <= config.xid_reuse_ns)
        & (reply[group] >= 0)
        & ~heard
    )
    out[lone[take]] = group[take]
    return out


def _sends_after_heard_replies(
    messages: pd.DataFrame,
    groups: _Groups,
    answers: tuple[np.ndarray, np.ndarray],
    config: MatchConfig,
) -> np.ndarray:
    """Message positions of re-sends that cannot be re-sends: the client had
    heard a reply before them (its TCP acknowledged one), or more than
    ``max_unheard_replies`` replies were captured since the transaction began.
    Empty in the common case (no reply captured before a later send)."""
    replies, tx = answers
    after = messages["frame_last"].to_numpy("int64")
    before = messages["frame_first"].to_numpy("int64")
    answered = tx >= 0
    replies, tx = replies[answered], tx[answered]
    # only groups with a reply captured before their last send need a look
    early = after[replies] < before[groups.last[tx]]
    if not early.any():
        return np.zeros(0, "int64")
    acked = (
        messages["acked_ns"].to_numpy("int64")
        if "acked_ns" in messages
        else np.full(len(messages), -1, "int64")
    )
    ts_first = messages["ts_first_ns"].to_numpy("int64")
    replies, tx = replies[early], tx[early]
    by_group = np.argsort(tx, kind="stable")  # each group's replies, in capture order
    replies, tx = replies[by_group], tx[by_group]
    bounds = np.flatnonzero(np.r_[True, tx[1:] != tx[:-1], True])
    cuts: list[int] = []
    for a, b in itertools.pairwise(bounds):  # groups with early replies
        g = tx[a]
        sends = groups.sends[groups.start[g] : groups.start[g] + groups.n_calls[g]]
        heard = replies[a:b]
        k = 0  # replies heard so far in the current transaction
        count, was_acked = 0, False
        for send in sends[1:]:
            while k < len(heard) and after[heard[k]] < before[send]:
                count += 1
                was_acked |= 0 <= acked[heard[k]] <= ts_first[send]
                k += 1
            if was_acked or count > config.max_unheard_replies:
                cuts.append(int(send))
                count, was_acked = 0, False
    return np.asarray(cuts, "int64")


# Text columns of the transactions kept as categories (the messages' text columns
# are), each distinct value stored once: those never missing, and the reply's
# status codes and verifier (missing without a reply; read as object, fillna(""))
# (fh, name, reply_fh too: a hex handle as a string per row cost 72 bytes)
_TEXT_CATEGORIES: tuple[str, ...] = (
    *("client", "server", "op", "ops", "session", "op_status", "verifier"),
    *("fh", "name", "reply_fh"),
)

# For a reply without call, the transaction columns its own message fills.
_ORPHAN_SOURCE = {
    {"src": "server", "dst": "client", "sport": "server_port", "dport": "client_port",
     **_REPLY_COLUMNS}.get(m, m): m
    for m in MESSAGE_DTYPES
}  # fmt: skip


def reply_count_bound(tx: Any) -> np.ndarray:
    """Most bytes a WRITE or READ reply can say it moved: what its call asked
    for (``count``), and no more than the record that carried the data (the
    WRITE call's, the READ reply's); unbounded (int64 max) where neither is
    known.  ``tx``: the transactions table, or its columns by name."""
    huge = np.iinfo("int64").max

    def known(name: str) -> np.ndarray:
        values = pd.Series(tx[name]).to_numpy("int64", na_value=-1)
        return np.where(values >= 0, values, huge)

    op = pd.Series(tx["op"])

    def is_op(name: str) -> np.ndarray:
        return op.eq(name).fillna(False).to_numpy(bool)

    record = np.where(
        is_op("WRITE"), known("call_bytes"), np.where(is_op("READ"), known("reply_bytes"), huge)
    )
    return np.minimum(known("count"), record)


def _take(column: pd.Series, pos: np.ndarray, dtype: str) -> Any:
    """column[pos] as ``dtype``, missing where pos < 0."""
    if isinstance(column.dtype, pd.CategoricalDtype) and dtype == "string":
        # arrow's take of the distinct values: no Python string per row
        codes = column.cat.codes.to_numpy()[np.maximum(pos, 0)] if len(column) else pos
        codes = np.where(pos < 0, -1, codes)
        values = pa.array(list(column.cat.categories), type=pa.large_string())
        taken = values.take(pa.array(codes, mask=codes < 0))
        return pd.arrays.ArrowStringArray(pa.chunked_array([taken])).astype(dtype)
    if not isinstance(column.dtype, np.dtype):  # strings, categories: their own take
        return column.array.take(pos, allow_fill=True).astype(dtype)
    values = column.to_numpy()[np.maximum(pos, 0)] if len(column) else np.zeros(len(pos))
    missing = pos < 0
    if dtype == "boolean":
        return pd.arrays.BooleanArray(values.astype(bool), missing)
    if dtype.startswith("Int"):
        return pd.arrays.IntegerArray(values.astype(dtype.lower()), missing)
    if not missing.any():
        return values.astype(dtype)
    values = values.astype(object)
    values[missing] = None
    return pd.array(values, dtype=dtype)


def _used_only(values: pd.Categorical) -> pd.Categorical:
    """The categories present (``remove_unused_categories`` without its sort)."""
    codes = values.codes
    used = np.bincount(codes[codes >= 0], minlength=len(values.categories)) > 0
    if used.all():
        return values
    renumber = np.r_[np.cumsum(used) - 1, -1]  # code -1 (missing) stays -1
    return pd.Categorical.from_codes(renumber[codes], categories=values.categories[used])


def _where(mask: np.ndarray, theirs: Any, ours: Any) -> Any:
    """theirs where mask, else ours (two takes of the same type)."""
    if isinstance(ours, pd.Categorical):  # categories united: codes of one vocabulary
        # (typed as the messages' categories: the table's, with or without orphans)
        typed = ours.categories if len(ours.categories) else theirs.categories
        both = pd.Index(sorted({*ours.categories, *theirs.categories}), dtype=typed.dtype)
        ours, theirs = ours.set_categories(both), theirs.set_categories(both)
        return pd.Categorical.from_codes(np.where(mask, theirs.codes, ours.codes), dtype=ours.dtype)
    return pd.Series(ours).mask(mask, pd.Series(theirs)).array


def _finish(messages: pd.DataFrame, rows: _Rows) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Columns taken from the messages, derived ones computed, in ``ORDER``;
    with the message positions of each row's first call and first reply."""
    ts_first = messages["ts_first_ns"].to_numpy("int64")
    ts_last = messages["ts_last_ns"].to_numpy("int64")
    own_call = rows.call >= 0
    start = np.where(own_call, ts_first[rows.call], ts_last[rows.reply])
    frame = np.where(
        own_call,
        messages["frame_first"].to_numpy("int64")[rows.call],
        messages["frame_last"].to_numpy("int64")[rows.reply],
    )
    order = lexsort((frame, start))  # stable: calls of one frame keep their order
    del own_call, start, frame
    call, last, reply = rows.call[order], rows.last_call[order], rows.reply[order]
    orphan = call < 0
    own = np.where(orphan, reply, call)  # the message a row's call columns come from
    cols: dict[str, Any] = {}
    for m, c in _CALL_COLUMNS.items():
        source = _ORPHAN_SOURCE.get(c)
        if source == m:
            cols[c] = _take(messages[m], own, TRANSACTION_DTYPES[c])
        else:
            cols[c] = _take(messages[m], call, TRANSACTION_DTYPES[c])
            if source is not None and orphan.any():  # a reply's view of the same field
                theirs = _take(messages[source], np.where(orphan, reply, -1), TRANSACTION_DTYPES[c])
                cols[c] = _where(orphan, theirs, cols[c])
    for m, c in _REPLY_COLUMNS.items():
        cols[c] = _take(messages[m], reply, TRANSACTION_DTYPES[c])

    def padded(times: np.ndarray) -> np.ndarray:
        # a 0 after the last: position -1 (none) takes it, one take per column
        return np.append(times, np.zeros(1, times.dtype))

    def ns(values: np.ndarray, missing: np.ndarray) -> pd.arrays.IntegerArray:
        return pd.arrays.IntegerArray(values.astype("int64"), missing)

    ts_first, ts_last = padded(ts_first), padded(ts_last)
    t_call, t_call_end = ts_first[call], ts_last[call]
    t_last, t_last_end = ts_first[last], ts_last[last]
    t_reply, no_reply = ts_last[reply], reply < 0
    cols["t_reply_first_ns"] = ns(ts_first[reply], no_reply)
    acked = padded(messages["acked_ns"].to_numpy("int64"))[last] if "acked_ns" in messages else last
    cols["t_call_acked_ns"] = ns(acked, orphan | (acked < 0))
    cols["t_call_ns"], cols["t_call_end_ns"] = ns(t_call, orphan), ns(t_call_end, orphan)
    cols["t_call_last_ns"], cols["t_call_last_end_ns"] = ns(t_last, orphan), ns(t_last_end, orphan)
    cols["t_reply_ns"] = ns(t_reply, no_reply)
    cols["latency_ns"] = ns(t_reply - t_call, no_reply | orphan)
    cols["latency_last_ns"] = ns(t_reply - t_last_end, no_reply | orphan)
    cols["srt_ns"] = ns(t_reply - t_call_end, no_reply | orphan)
    cols["n_calls"] = rows.n_calls[order]
    cols["n_replies"] = rows.n_replies[order]
    cols["call_conns"] = pd.arrays.IntegerArray(
        rows.call_conns[order].astype("int32"), rows.call_conns[order] < 0
    )
    cols["call_times_ns"] = rows.call_times[order]
    # each distinct program named once (a hash: np.unique sorted every row)
    codes, progs = pd.factorize(np.asarray(cols["prog"], dtype="int64"))
    names = np.array([program_name(int(p)) for p in progs], dtype=object)
    cols["program"] = categorical_from(names, codes)  # (not a string per row)
    cols["write_bytes"] = np.zeros(len(order), "int64")  # (after the inference: _write_bytes)
    cols["read_bytes"] = _moved(cols, "READ")
    cols["inferred"] = categorical_from(np.array([""], dtype=object), np.zeros(len(order), "int64"))
    for c in _TEXT_CATEGORIES:  # categories of the values present, as astype("category") has
        cols[c] = _used_only(cols[c])
    tx = pd.DataFrame(
        {c: cols[c] for c in TRANSACTION_DTYPES}, index=pd.RangeIndex(len(order)), copy=False
    )
    return typed(tx, TRANSACTION_DTYPES), call, reply


def _moved(tx: Any, op_name: str) -> np.ndarray:
    """Bytes successful replies of ``op_name`` (WRITE / READ) say they moved; a
    reply claiming more than its call asked for or its record carried counts
    what it could have moved (quality counts such replies: reply_count_bound).
    ``tx``: the transactions table, or its columns by name."""
    ok = pd.Series(tx["status"]).eq(0).fillna(False).to_numpy(dtype=bool)
    is_op = pd.Series(tx["op"]).eq(op_name).fillna(False).to_numpy(dtype=bool)
    said = pd.Series(tx["reply_count"]).fillna(-1).to_numpy(dtype="int64")  # -1: not decoded
    counted = np.minimum(np.maximum(said, 0), reply_count_bound(tx))
    return np.where(is_op & ok, counted, 0)


def _write_bytes(tx: pd.DataFrame, inferred: np.ndarray) -> np.ndarray:
    """write_bytes: what successful WRITE replies say they wrote, else what the
    inference found (``inferred``: -1 none)."""
    said = pd.Series(tx["reply_count"]).fillna(-1).to_numpy("int64") >= 0
    return np.where(said, _moved(tx, "WRITE"), np.maximum(inferred, 0))


def combine(tables: list[pd.DataFrame], connection_ids: list[np.ndarray]) -> pd.DataFrame:
    """The transactions of host-pair partitions (``nfstrace.parsers.parallel``)
    as one match of all their messages gives them: connection ids renumbered
    (``connection_ids``: the partitions' new ids, as the parser's combine
    gives them), rows in match's order (the module's docstring).  Empties
    ``tables`` as it goes: the parts are not held beside the whole."""
    if len(tables) == 1:
        return tables.pop()
    for i, tx in enumerate(tables):
        conn = tx["conn"]
        known = conn.notna().to_numpy()
        ids = connection_ids[i][conn.fillna(0).to_numpy("int64")]
        tables[i] = tx.assign(conn=pd.arrays.IntegerArray(ids, ~known))
    # each row's start and frame, written part by part into the whole's arrays
    start = np.empty(sum(len(tx) for tx in tables), "int64")
    frame = np.empty(len(start), "int64")
    at = 0
    for tx in tables:
        call = (tx["n_calls"] > 0).to_numpy()
        rows = slice(at, at + len(tx))
        np.copyto(start[rows], tx["t_reply_ns"].to_numpy("int64", na_value=0))
        np.copyto(start[rows], tx["t_call_ns"].to_numpy("int64", na_value=0), where=call)
        np.copyto(frame[rows], tx["reply_frame"].to_numpy("int64", na_value=0))
        np.copyto(frame[rows], tx["call_frame_first"].to_numpy("int64", na_value=0), where=call)
        at += len(tx)
    # (the loops' last table let go: merged frees each part's columns as it goes,
    # and a name bound to a part would hold all of that part's until the end)
    del tx, conn, known, ids, call
    order = lexsort((frame, start))  # stable: ties within one partition keep its order
    del start, frame
    return merged(tables, TRANSACTION_DTYPES, order)
