"""The parser's tables as typed DataFrames: message rows (tuples in
``ROW_COLUMNS`` order) into the messages table, event tuples into the events
table (``nfstrace.schema`` lists both); every backend builds them here."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from nfstrace.nfs_fields import FIELD_NAMES as NFS_FIELD_NAMES
from nfstrace.schema import EVENT_DTYPES, MESSAGE_DTYPES


class RpcHeader(NamedTuple):
    """A decoded RPC header: the messages-table columns of that name
    (``nfstrace.schema.MESSAGE_COLUMNS``); -1 / "" where not known.  For a
    reply, prog/vers/proc are -1 here: the matched call gives them."""

    xid: int
    msgtype: str  # "call" or "reply"
    prog: int
    vers: int
    proc: int
    auth: str  # credential flavour (calls) or verifier flavour (replies)
    auth_uid: int
    auth_gid: int
    auth_machine: str
    gss_proc: int
    gss_service: str
    reply_stat: str  # replies: "accepted" / "denied"
    accept_stat: int
    reject_stat: int
    body_offset: int  # where the procedure's arguments/results begin (-1: not captured)


HEADER_FIELDS: tuple[str, ...] = RpcHeader._fields


def addr_text(raw: bytes, cache: dict[bytes, str]) -> str:
    """An address's text (IPv4 or IPv6 by its length), remembered in cache."""
    s = cache.get(raw)
    if s is None:
        s = cache[raw] = socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, raw)
    return s


ROW_COLUMNS = (
    ("ts_first_ns", "ts_last_ns", "frame_first", "frame_last", "src", "sport", "dst", "dport")
    + ("transport", "conn")
    + HEADER_FIELDS
    + ("rpc_len", "captured_len", "record_frags", "frames", "ip_frags", "truncated")
    + NFS_FIELD_NAMES
)


class Event(NamedTuple):
    """One row of the events table (``nfstrace.schema.EVENT_COLUMNS``), as the
    parser records it: addresses still as bytes."""

    ts_ns: int
    frame: int
    conn: int
    src: bytes
    sport: int
    dst: bytes
    dport: int
    kind: str  # one of schema.EVENT_KINDS
    seq: int
    length: int
    duration_ns: int = 0


assert Event._fields == tuple(EVENT_DTYPES)

# Columns filled once the message is made (its ACK comes later); -1 until then.
LATE_COLUMNS = ("acked_ns",)
assert set(ROW_COLUMNS) | set(LATE_COLUMNS) == set(MESSAGE_DTYPES)


def rows_frame(rows: list[tuple]) -> pd.DataFrame:
    """Message rows as a typed DataFrame (MESSAGE_DTYPES), in arrival order."""
    cache: dict[bytes, str] = {}
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(ROW_COLUMNS)
    data: dict[str, Any] = dict(zip(ROW_COLUMNS, columns, strict=True))
    for name in ("src", "dst"):
        data[name] = [addr_text(a, cache) for a in data[name]]
    df = pd.DataFrame(data, columns=list(MESSAGE_DTYPES))
    for name in LATE_COLUMNS:
        df[name] = -1
    return df.astype(MESSAGE_DTYPES)


def messages_frame(
    rows: list[tuple],
    chunks: Sequence[pd.DataFrame] = (),
    acked: Sequence[tuple[int, int]] = (),
) -> pd.DataFrame:
    """The messages table from typed chunks (``rows_frame``) and the rows after
    them; ``acked``: (row, acked_ns) of the messages whose ACK was seen."""
    df = rows_frame(rows)
    if chunks:  # chunks' categories differ: concat gives object columns, made categories again
        df = pd.concat([*chunks, df], ignore_index=True).astype(MESSAGE_DTYPES)
    if len(acked):
        pos, ts = np.array(acked, dtype="int64").T
        column = df["acked_ns"].to_numpy(copy=True)
        column[pos] = ts
        df["acked_ns"] = column
    return df.sort_values(["ts_first_ns", "frame_first"], kind="stable", ignore_index=True)


def events_frame(events: Sequence[Event]) -> pd.DataFrame:
    """The events table (columns: ``nfstrace.schema.EVENT_COLUMNS``), in time order."""
    if not len(events):  # (typed empty columns: half the time of an astype of untyped ones)
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in EVENT_DTYPES.items()})
    cache: dict[bytes, str] = {b"": ""}
    df = pd.DataFrame(list(events), columns=list(Event._fields))
    if len(df):
        df["src"] = [addr_text(a, cache) for a in df["src"]]
        df["dst"] = [addr_text(a, cache) for a in df["dst"]]
    df = df.astype(EVENT_DTYPES)
    return df.sort_values(["ts_ns", "frame"], kind="stable", ignore_index=True)
