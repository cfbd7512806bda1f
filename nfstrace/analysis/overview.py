"""The headline facts of a trace: who talked, which versions, how many
transactions of each kind, and how fast data was written and read.
A pure function of the tables; the terminal and JSON reports render it.

The write throughput, one figure everywhere (terminal, HTML, Markdown, JSON,
the verdict, ``compare``): ``write_activity``, the bytes acknowledged by
successful WRITE replies over the write activity of the time budget (first
packet of the first WRITE call to the last WRITE or COMMIT reply, per
client/server pair, the pairs' times summed).  ``Overview.write`` is a second
figure, named for what it measures wherever it is shown: the WRITE calls' own
span (first WRITE call to last WRITE reply, without the COMMIT after).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from nfstrace.analysis.grouping import is_value
from nfstrace.text import count

# What the seconds of each throughput measure, in the words shown beside it.
WRITE_ACTIVITY_SPAN = "of write activity (first WRITE call to last WRITE or COMMIT reply)"
WRITE_ACTIVITY_PAIRS_SPAN = (
    "of write activity (each client/server pair's first WRITE call to its last WRITE or "
    "COMMIT reply, summed over {pairs} pairs)"
)
CALLS_SPAN = {
    "write_bytes": "(first WRITE call to last WRITE reply)",
    "read_bytes": "(first READ call to last READ reply)",
}


@dataclass(frozen=True)
class Throughput:
    bytes: int
    transactions: int
    seconds: float  # the span below
    mbytes_per_s: float  # 10^6 bytes per second
    mbits_per_s: float
    span: str = ""  # what ``seconds`` measures, in words ('of write activity (...)')


@dataclass(frozen=True)
class Overview:
    start_ns: int
    end_ns: int
    clients: list[str]
    servers: list[str]
    nfs_versions: list[str]  # "3", "4.1", ...
    transports: list[str]
    messages: int
    transactions: int
    answered: int
    calls_without_reply: int
    replies_without_call: int
    retransmitted_calls: int  # transactions whose call was re-sent
    call_resends: int  # extra sends in all
    duplicate_replies: int
    errors: int
    write: Throughput | None
    read: Throughput | None

    def counts_text(self) -> str:
        """'12 transactions (23 RPC messages): 11 answered, 1 call without reply,
        0 replies without call, 0 errors'."""
        return (
            f"{count(self.transactions, 'transaction')} "
            f"({count(self.messages, 'RPC message')}): {self.answered:,} answered, "
            f"{count(self.calls_without_reply, 'call without reply', 'calls without reply')}, "
            f"{count(self.replies_without_call, 'reply without call', 'replies without call')}, "
            f"{count(self.errors, 'error')}"
        )

    def repeats_text(self) -> str:
        """'1 call re-sent (2 extra sends), 0 duplicate replies'."""
        return (
            f"{count(self.retransmitted_calls, 'call')} re-sent "
            f"({count(self.call_resends, 'extra send')}), "
            f"{count(self.duplicate_replies, 'duplicate reply', 'duplicate replies')}"
        )


def throughput_text(t: Throughput, what: str = "RPC") -> str:
    """'1.234 MB in 12 WRITEs over 0.500 s of write activity (...): 2.47 MB/s
    (19.7 Mbit/s)': ``what`` names the RPCs, the span says what the seconds
    measure.  Without a time span (one RPC, or all at one instant) there is no
    rate to give."""
    head = f"{t.bytes / 1e6:,.3f} MB in {count(t.transactions, what)}"
    if not t.seconds > 0:
        return f"{head}, all at one instant: no rate"
    span = f" {t.span}" if t.span else ""
    return (
        f"{head} over {t.seconds:.3f} s{span}: {t.mbytes_per_s:,.2f} MB/s "
        f"({t.mbits_per_s:,.1f} Mbit/s)"
    )


def throughput(tx: pd.DataFrame, column: str) -> Throughput | None:
    """``column`` (write_bytes, read_bytes) over the calls' own span: the first
    call of the transactions carrying it to their last reply (``CALLS_SPAN``)."""
    done = (tx[column] > 0).to_numpy()  # (the three columns' rows, not the table's)
    if not done.any():
        return None
    total = int(tx[column][done].sum())
    # a reply without its call (or a call without reply) still marks the span
    call, reply = tx["t_call_ns"][done], tx["t_reply_ns"][done]
    start = call.fillna(reply).min()
    end = reply.fillna(call).max()
    seconds = (int(end) - int(start)) / 1e9 if pd.notna(start) and pd.notna(end) else 0.0
    rate = total / seconds if seconds > 0 else float("nan")
    calls = int(done.sum())
    return Throughput(total, calls, seconds, rate / 1e6, rate * 8 / 1e6, CALLS_SPAN[column])


def write_activity(pairs: pd.DataFrame | None) -> Throughput | None:
    """THE write throughput: the bytes acknowledged by successful WRITE replies
    over the write activity, from the time budget's pairs (``budget.pairs``:
    bytes, writes, elapsed_ns per client/server pair; several pairs: their bytes
    and their times summed, as the verdict states it).  None without WRITE
    activity.  Its WRITEs: the calls and the replies whose calls were not
    captured (``writes_unseen``), whose bytes ``bytes`` holds."""
    if pairs is None or pairs.empty:
        return None
    total = int(pairs["bytes"].sum())
    seconds = int(pairs["elapsed_ns"].sum()) / 1e9
    rate = total / seconds if seconds > 0 else float("nan")
    span = (
        WRITE_ACTIVITY_SPAN
        if len(pairs) == 1
        else WRITE_ACTIVITY_PAIRS_SPAN.format(pairs=f"{len(pairs):,}")
    )
    writes = int(pairs["writes"].sum() + pairs["writes_unseen"].sum())
    return Throughput(total, writes, seconds, rate / 1e6, rate * 8 / 1e6, span)


def _nfs_versions(tx: pd.DataFrame) -> list[str]:
    nfs = (tx["prog"] == 100003).to_numpy(dtype=bool)
    vers = tx["vers"].to_numpy()
    minor = tx["minor"].to_numpy("int64", na_value=-1)
    if vers.dtype.kind in "iu" and nfs.any():
        # the (version, minor) pairs present, by a count per pair (their ranges
        # are small): not a copy of the rows and a drop_duplicates' hash of them
        v, m = vers[nfs].astype("int64"), minor[nfs]
        del vers, minor
        v_lo, m_lo = int(v.min()), int(m.min())
        v_n, m_n = int(v.max()) - v_lo + 1, int(m.max()) - m_lo + 1
        if v_n * m_n <= 1 << 20:
            v -= v_lo
            v *= m_n
            v += m - m_lo
            del m
            pairs = np.flatnonzero(np.bincount(v, minlength=v_n * m_n))
            return sorted(
                {
                    f"4.{mi}" if ve == 4 and mi >= 0 else str(ve)
                    for ve, mi in zip(
                        (pairs // m_n + v_lo).tolist(), (pairs % m_n + m_lo).tolist(), strict=True
                    )
                }
            )
    return _nfs_versions_of(tx)


def _nfs_versions_of(tx: pd.DataFrame) -> list[str]:
    nfs = tx.loc[tx["prog"] == 100003, ["vers", "minor"]]
    pairs = nfs.assign(minor=nfs["minor"].fillna(-1)).drop_duplicates()  # a few distinct
    versions = set()
    for vers, minor in zip(pairs["vers"], pairs["minor"], strict=True):
        versions.add(f"4.{int(minor)}" if vers == 4 and minor >= 0 else str(int(vers)))
    return sorted(versions)


def overview(messages: pd.DataFrame, tx: pd.DataFrame) -> Overview:
    # the counts on the columns' arrays (a Series operation costs more than the work)
    calls, replies = tx["n_calls"].to_numpy("int64"), tx["n_replies"].to_numpy("int64")
    has_call = calls > 0
    answered = has_call & (replies > 0)
    # (each column compared, then let go: not all of them held as int64 at once)
    errors = tx["status"].to_numpy("int64", na_value=0) > 0
    errors |= tx["accept_stat"].to_numpy("int64", na_value=0) != 0
    errors |= is_value(tx["reply_stat"], "denied")
    errors &= answered
    return Overview(
        start_ns=int(messages["ts_first_ns"].min()) if len(messages) else 0,
        end_ns=int(messages["ts_last_ns"].max()) if len(messages) else 0,
        clients=sorted(tx.loc[has_call, "client"].dropna().unique().tolist()),
        servers=sorted(tx["server"].dropna().unique().tolist()),
        nfs_versions=_nfs_versions(tx),
        transports=sorted(str(t) for t in messages["transport"].unique()),
        messages=len(messages),
        transactions=int(has_call.sum()),
        answered=int(answered.sum()),
        calls_without_reply=int((has_call & (replies == 0)).sum()),
        replies_without_call=int((~has_call).sum()),
        retransmitted_calls=int((calls > 1).sum()),
        call_resends=int(np.clip(calls - 1, 0, None).sum()),
        duplicate_replies=int(np.clip(replies - 1, 0, None).sum()),
        errors=int(errors.sum()),
        write=throughput(tx, "write_bytes"),
        read=throughput(tx, "read_bytes"),
    )
