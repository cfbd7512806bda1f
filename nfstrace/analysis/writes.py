"""Writes: bytes acknowledged over time, write sizes, the stable_how asked and
the committed level granted, COMMITs, write-verifier changes, and sequential
vs random offsets.

Pure functions of the transactions table (``nfstrace.schema.TRANSACTION_COLUMNS``).
A WRITE is a transaction whose ``op`` is "WRITE" (NFSv2/v3 procedure, NFSv4
the main operation of the COMPOUND); a COMMIT likewise.  Bytes written are the
``write_bytes`` of successful WRITE replies, those whose call was not captured
included (an NFSv4 COMPOUND reply names its operations: a ``-s 256`` capture
can miss the call and keep its reply); the result says how many.

Simplifications, said once:
- A successful COMMIT is taken to commit everything written before it to that
  server (the Linux client commits whole files; a COMMIT's range is reported
  in ``commits`` but not used to narrow what is at risk).
- A WRITE is "unstable" when its reply says committed = UNSTABLE; when the
  reply level was not decoded, the stable_how asked; when neither was (e.g. a
  ``-s 256`` NFSv4.1 capture), it is counted as unstable, the default of every
  common client, so data at risk is never under-reported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from nfstrace.analysis.findings import Finding
from nfstrace.analysis.latency import status_name
from nfstrace.combining import string_codes
from nfstrace.jsonable import json_field
from nfstrace.protocol.nfs3 import STABLE_NAMES, UNSTABLE
from nfstrace.protocol.procedures import COMMIT_OP, WRITE_OP
from nfstrace.text import bytes_text, seconds_text

UNKNOWN_LEVEL = "unknown"  # stable_how / committed not decoded

PROGRESS_COLUMNS: dict[str, str] = {
    "t_ns": "int64: time of the WRITE reply (its last packet)",
    "client": "str: client address",
    "server": "str: server address",
    "xid": "int64: RPC transaction id of the WRITE",
    "bytes": "int64: bytes the reply acknowledged (write_bytes)",
    "cum_bytes": "int64: bytes acknowledged so far over the whole trace, in reply order",
}

ACTIVITY_COLUMNS: dict[str, str] = {
    "client": "str: client address",
    "server": "str: server address",
    "start_ns": "int64: first packet of the pair's first WRITE call",
    "end_ns": "int64: the pair's last WRITE reply (any status)",
}

SIZE_COLUMNS: dict[str, str] = {
    "size": "int64: bytes a WRITE call asked to write (count; the reply's if not captured)",
    "writes": "int64: WRITE calls of that size",
    "share": "float: share of the WRITE calls whose size was decoded",
}

COMMIT_COLUMNS: dict[str, str] = {
    "client": "str: client address",
    "server": "str: server address",
    "xid": "int64: RPC transaction id",
    "t_call_ns": "int64: first packet of the first call",
    "t_reply_ns": "Int64: reply (<NA>: never answered in the capture)",
    "duration_ns": "Int64: call -> reply (what the client waited)",
    "offset": "Int64: offset asked (<NA> if not decoded)",
    "count": "Int64: bytes asked (0: to the end of the file; <NA> if not decoded)",
    "status": "Int64: NFS status of the reply (0 = OK)",
    "verifier": "str: write verifier of the reply (hex; '' if none)",
}

VERIFIER_CHANGE_COLUMNS: dict[str, str] = {
    "t_ns": "int64: reply carrying the new verifier",
    "client": "str: client address",
    "server": "str: server address",
    "xid": "int64: the WRITE/COMMIT whose reply carried it",
    "op": "str: WRITE or COMMIT",
    "old": "str: previous verifier (hex)",
    "new": "str: new verifier (hex)",
    "uncommitted_bytes": "int64: bytes written unstable since the last successful COMMIT "
    "before this reply: lost by the server, the client must re-send them",
}

FILE_COLUMNS: dict[str, str] = {
    "client": "str: client address",
    "server": "str: server address",
    "fh": "str: file handle (hex)",
    "name": "str: the file's name, from the LOOKUP/CREATE/OPEN reply that handed its "
    "handle out in this capture ('' if none did)",
    "writes": "int64: WRITE calls with a decoded offset and count",
    "bytes": "int64: bytes acknowledged",
    "seconds": "float: first WRITE call to last WRITE reply of the file",
    "mbit_s": "float: bytes over those seconds (10^6 bit/s; NaN when no time passed)",
    "sequential": "int64: WRITEs whose offset == previous offset + count (call order)",
    "sequential_share": "float: sequential / (writes - 1); NaN for a single WRITE",
}

# The transactions columns these analyses (writes, pace, stalls) read.
USED_COLUMNS = (
    *("client", "server", "xid", "vers", "op", "fh", "n_calls", "n_replies"),
    *("t_call_ns", "t_call_last_end_ns", "t_reply_ns", "latency_ns", "status", "offset"),
    *("count", "stable"),
    *("reply_count", "committed", "verifier", "write_bytes", "name", "reply_fh", "inferred"),
)

# A workload is called random below this share of sequential WRITEs.
RANDOM_BELOW = 0.5


def _empty(columns: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})


def prepared(transactions: pd.DataFrame) -> pd.DataFrame:
    """The transactions' ``USED_COLUMNS``, with the most used strings (client,
    server, op) as categories and an integer ``pair`` code per client/server:
    converted once here, so the analyses compare, group and merge integers.
    A reply stamped before its call (a clock stepped back: the table keeps the
    negative latency, as tshark does) is taken as answered the moment it was
    sent: no analysis sees time run backwards.  Idempotent; the analyses call
    it on entry."""
    tx = transactions
    if "pair" in tx.columns:
        return tx
    tx = tx[[c for c in USED_COLUMNS if c in tx.columns]]  # filtering copies every column
    if {"t_call_ns", "t_reply_ns", "latency_ns"} <= set(tx.columns):
        early = (tx["t_reply_ns"] < tx["t_call_ns"]).fillna(False).to_numpy(dtype=bool)
        if early.any():
            tx = tx.assign(
                t_reply_ns=tx["t_reply_ns"].mask(early, tx["t_call_ns"]),
                latency_ns=tx["latency_ns"].mask(early, 0),
            )
    columns = {c: tx[c].astype("category") for c in ("client", "server", "op")}
    client = columns["client"].cat.codes.to_numpy("int64")
    server = columns["server"].cat.codes.to_numpy("int64")
    pair = pd.factorize(client * (len(columns["server"].cat.categories) + 1) + server)[0]
    return tx.assign(**columns, pair=pair)


def _int(series: pd.Series, missing: int = -1) -> np.ndarray:
    return series.astype("Int64").fillna(missing).to_numpy(dtype="int64")


def _inferred_from(tx: pd.DataFrame, code: str) -> int:
    """Rows whose ``inferred`` codes include ``code`` (schema.INFERENCES)."""
    if "inferred" not in tx or tx.empty:
        return 0
    codes = tx["inferred"].astype(object).fillna("")
    return int(codes.map(lambda s: code in str(s).split()).sum())


def write_sizes(writes: pd.DataFrame) -> np.ndarray:
    """Bytes each WRITE asked to write; where the call's count was not captured
    (a ``-s 256`` NFSv4.1 capture), the count its reply acknowledged; where
    neither was, the bytes inferred from its record (``write_bytes``, marked in
    ``transactions.inferred``); -1 if none of these."""
    count = _int(writes["count"])
    said = np.where(count >= 0, count, _int(writes["reply_count"]))
    if "inferred" not in writes:
        return said
    inferred = _texts(writes["inferred"])[1]  # (not empty, not missing)
    written = writes["write_bytes"].to_numpy("int64")
    return np.where((said < 0) & inferred & (written > 0), written, said)


def write_progress(transactions: pd.DataFrame) -> pd.DataFrame:
    """Bytes acknowledged over time: one row per successful WRITE reply
    (``PROGRESS_COLUMNS``), in reply order."""
    return progress_with_pairs(prepared(transactions)).drop(columns="pair")


def progress_with_pairs(tx: pd.DataFrame) -> pd.DataFrame:
    """write_progress with the pair code kept (``tx`` prepared)."""
    # the rows' positions in reply order, then each column taken once (not the table twice)
    rows = np.flatnonzero(((tx["write_bytes"] > 0) & tx["t_reply_ns"].notna()).to_numpy())
    t = tx["t_reply_ns"].to_numpy("int64", na_value=0)[rows]
    order = np.argsort(t, kind="stable")
    rows = rows[order]
    nbytes = tx["write_bytes"].to_numpy(dtype="int64")[rows]
    return pd.DataFrame(
        {
            "t_ns": t[order],
            "client": tx["client"].take(rows).astype(object).to_numpy(),
            "server": tx["server"].take(rows).astype(object).to_numpy(),
            "xid": tx["xid"].to_numpy(dtype="int64")[rows],
            "bytes": nbytes,
            "cum_bytes": np.cumsum(nbytes),
            "pair": tx["pair"].to_numpy()[rows],
        }
    )


def write_activity(transactions: pd.DataFrame) -> pd.DataFrame:
    """Per client/server pair, the span of its write activity (``ACTIVITY_COLUMNS``):
    from the first WRITE call to the last WRITE reply.  Pairs whose WRITEs were
    never answered have no activity span."""
    return activity_with_pairs(prepared(transactions)).drop(columns="pair")


def activity_with_pairs(tx: pd.DataFrame) -> pd.DataFrame:
    """write_activity with the pair code kept (``tx`` prepared)."""
    w = tx[tx["op"].eq(WRITE_OP) & (tx["n_calls"] > 0)]
    if w.empty:
        return _empty({**ACTIVITY_COLUMNS, "pair": ""})
    # one pass of numpy per column (a groupby's first/min/max cost more than the
    # work on a few pairs): per pair in code order, the first known client and
    # server, the least call and greatest reply time; a pair without one of
    # them is left out (as groupby then dropna left it)
    pairs, group = np.unique(w["pair"].to_numpy("int64"), return_inverse=True)
    n = len(pairs)
    keep = np.ones(n, dtype=bool)
    columns: dict[str, np.ndarray] = {}
    for name in ("client", "server"):
        known = w[name].notna().to_numpy(bool)
        at = np.full(n, -1, dtype="int64")
        groups, first = np.unique(group[known], return_index=True)
        at[groups] = np.flatnonzero(known)[first]
        keep &= at >= 0
        columns[name] = w[name].to_numpy(dtype=object)[at]
    for name, column, pick, none in (
        ("start_ns", "t_call_ns", np.minimum, np.iinfo("int64").max),
        ("end_ns", "t_reply_ns", np.maximum, np.iinfo("int64").min),
    ):
        known = w[column].notna().to_numpy(bool)
        values = np.full(n, none, dtype="int64")
        pick.at(values, group[known], w[column].to_numpy("int64", na_value=0)[known])
        keep &= values != none
        columns[name] = values
    out = pd.DataFrame(
        {
            name: pd.Series(
                columns[name][keep], dtype=object if name in ("client", "server") else None
            )
            for name in ACTIVITY_COLUMNS
        }
    )
    out["pair"] = pairs[keep]
    return out


def _mix(levels: np.ndarray) -> dict[str, int]:
    """Counts per stable level name, in protocol order, unknown last."""
    values, counts = np.unique(levels, return_counts=True)
    by_name = dict.fromkeys([*STABLE_NAMES.values(), UNKNOWN_LEVEL], 0)
    for value, n in zip(values, counts, strict=True):
        by_name[STABLE_NAMES.get(int(value), UNKNOWN_LEVEL)] += int(n)
    return {k: v for k, v in by_name.items() if v}


def _sizes(count: np.ndarray) -> pd.DataFrame:
    known = count[count >= 0]
    if len(known) == 0:
        return _empty(SIZE_COLUMNS)
    size, n = np.unique(known, return_counts=True)
    out = pd.DataFrame({"size": size, "writes": n, "share": n / len(known)})
    return out.sort_values(["writes", "size"], ascending=[False, True], ignore_index=True)


def commit_table(tx: pd.DataFrame) -> pd.DataFrame:
    """One row per COMMIT call (``COMMIT_COLUMNS``)."""
    c = tx[tx["op"].eq(COMMIT_OP) & (tx["n_calls"] > 0)]
    offset, count = c["offset"].astype("Int64"), c["count"].astype("Int64")
    return pd.DataFrame(
        {
            "client": c["client"].astype(object),
            "server": c["server"].astype(object),
            "xid": c["xid"].astype("int64"),
            "t_call_ns": c["t_call_ns"].astype("int64"),
            "t_reply_ns": c["t_reply_ns"].astype("Int64"),
            "duration_ns": c["latency_ns"].astype("Int64"),
            "offset": offset.where(offset >= 0),
            "count": count.where(count >= 0),
            "status": c["status"].astype("Int64"),
            "verifier": c["verifier"].astype(object).fillna(""),
        }
    ).reset_index(drop=True)


def _unstable_mask(writes: pd.DataFrame) -> np.ndarray:
    committed = _int(writes["committed"])
    asked = _int(writes["stable"])
    level = np.where(committed >= 0, committed, asked)
    return (level == UNSTABLE) | (level < 0)


def _texts(column: pd.Series) -> tuple[Callable[[np.ndarray], np.ndarray], np.ndarray]:
    """``column.astype(object).fillna("")`` at some rows (a function of a row
    mask), and where it is not empty: of a category column of strings by its
    codes (no string per row made or compared)."""
    by_codes = string_codes(column)
    if by_codes is not None:
        names, codes = by_codes
        return (lambda rows: names[codes[rows]]), (names != "")[codes]
    values = column.astype(object).fillna("").to_numpy(dtype=object)
    return (lambda rows: values[rows]), values != ""


def _verifier_changes(tx: pd.DataFrame) -> pd.DataFrame:
    """Replies whose verifier differs from the pair's previous one, with the
    unstable bytes written since the last successful COMMIT before them
    (``tx`` prepared)."""
    ops = tx["op"]
    ok = tx["status"].astype("Int64").eq(0).fillna(False).to_numpy(dtype=bool)
    text, has = _texts(tx["verifier"])
    carries = (ops.eq(WRITE_OP) | ops.eq(COMMIT_OP)).to_numpy() & ok & has
    # the replies in pair, then time order (stable); a change: a reply whose
    # verifier differs from its pair's previous one (found on the arrays: most
    # captures have none, and need no table)
    pair = tx["pair"].to_numpy()[carries]
    order = np.lexsort((tx["t_reply_ns"].to_numpy("int64", na_value=0)[carries], pair))
    new = text(carries)[order]
    same = np.r_[False, pair[order][1:] == pair[order][:-1]]
    old = np.r_[np.nan, new[:-1]].astype(object)
    old[~same] = np.nan
    changed = same & (old != new)
    if not changed.any():
        return _empty(VERIFIER_CHANGE_COLUMNS)
    r = tx[carries]
    r = pd.DataFrame(
        {
            "t_ns": r["t_reply_ns"].astype("int64"),
            "client": r["client"].astype(object),
            "server": r["server"].astype(object),
            "pair": r["pair"],
            "xid": r["xid"].astype("int64"),
            "op": r["op"].astype(object),
            "new": pd.Series(text(carries), index=tx.index[carries], dtype=object),
        }
    ).iloc[order]
    r = r.reset_index(drop=True).assign(old=pd.Series(old, dtype=object))
    changes = r[changed].copy()

    # Cumulative unstable bytes per pair, in reply order.
    w = tx[ops.eq(WRITE_OP) & (tx["write_bytes"] > 0)]
    w = pd.DataFrame(
        {
            "t_ns": w["t_reply_ns"].astype("int64"),
            "pair": w["pair"],
            "unstable": np.where(_unstable_mask(w), w["write_bytes"].to_numpy("int64"), 0),
        }
    ).sort_values("t_ns", kind="stable")
    w["cum"] = w.groupby("pair", sort=False)["unstable"].cumsum()
    commits = r[r["op"].eq(COMMIT_OP)][["t_ns", "pair"]]
    # commit_ns nullable: a change without an earlier COMMIT must not turn ns into floats
    commits = commits.assign(commit_ns=commits["t_ns"].astype("Int64"))
    changes = changes.sort_values("t_ns", kind="stable")
    # unstable bytes acknowledged strictly before the change ...
    at = pd.merge_asof(changes, w, on="t_ns", by="pair", allow_exact_matches=False)
    # ... minus those acknowledged up to the last successful COMMIT before it
    at = pd.merge_asof(at, commits, on="t_ns", by="pair", allow_exact_matches=False)
    lookup = at[["commit_ns", "pair"]].dropna().astype({"commit_ns": "int64"})
    lookup = lookup.reset_index().sort_values("commit_ns", kind="stable")
    committed = pd.merge_asof(
        lookup,
        w[["t_ns", "pair", "cum"]].rename(columns={"cum": "cum_committed"}),
        left_on="commit_ns",
        right_on="t_ns",
        by="pair",
    ).set_index("index")["cum_committed"]
    uncommitted = at["cum"].fillna(0) - committed.reindex(at.index).fillna(0)
    at["uncommitted_bytes"] = uncommitted.astype("int64")
    return at[list(VERIFIER_CHANGE_COLUMNS)].reset_index(drop=True)


def file_names(tx: pd.DataFrame) -> dict[str, str]:
    """File handle (hex) -> name, from the successful replies that handed a handle
    out for a name (LOOKUP, CREATE, MKDIR, OPEN with GETFH ...); the latest wins."""
    if "reply_fh" not in tx or "name" not in tx:
        return {}
    fh_by, name_by = string_codes(tx["reply_fh"]), string_codes(tx["name"])
    if fh_by is not None and name_by is not None:
        return _file_names_by_codes(tx, fh_by, name_by)
    fh = tx["reply_fh"].astype(object).fillna("")
    name = tx["name"].astype(object).fillna("")
    ok = (fh != "") & (name != "") & tx["status"].fillna(-1).eq(0)
    named = pd.DataFrame({"fh": fh[ok], "name": name[ok], "t": tx["t_call_ns"][ok]})
    named = named.sort_values("t", kind="stable").drop_duplicates("fh", keep="last")
    return dict(zip(named["fh"].astype(str), named["name"].astype(str), strict=True))


def _file_names_by_codes(
    tx: pd.DataFrame, fh_by: tuple[np.ndarray, np.ndarray], name_by: tuple[np.ndarray, np.ndarray]
) -> dict[str, str]:
    """``file_names`` of category columns, on their codes: the rows with a handle
    and a name (neither missing nor empty) found without a string per row, in
    call time order (stable, no call time last), each handle's last kept
    (``fh_by``, ``name_by``: the two columns' ``string_codes``)."""
    (fh_names, fh_code), (name_names, name_code) = fh_by, name_by
    ok = (fh_names != "")[fh_code] & (name_names != "")[name_code]
    ok &= tx["status"].fillna(-1).eq(0).to_numpy(dtype=bool)
    rows = np.flatnonzero(ok)
    t = tx["t_call_ns"]
    no_time = t.isna().to_numpy()[rows]
    order = rows[np.lexsort((t.to_numpy("int64", na_value=0)[rows], no_time))]
    # each handle's last row (in that order), the handles in the order of those rows
    codes = fh_code[order][::-1]
    last = len(codes) - 1 - np.unique(codes, return_index=True)[1]
    kept = order[np.sort(last)]
    return dict(
        zip(fh_names[fh_code[kept]].tolist(), name_names[name_code[kept]].tolist(), strict=True)
    )


def _files(writes: pd.DataFrame, names: dict[str, str] | None = None) -> pd.DataFrame:
    """Per file handle: its name, bytes, time and rate, sequential vs random in
    call order; the files that took longest first (``writes`` prepared)."""
    offset, count = _int(writes["offset"]), write_sizes(writes)
    fh_code, fh_names = pd.factorize(writes["fh"])  # <NA>: -1
    known = (offset >= 0) & (count >= 0) & (fh_code >= 0)
    known &= fh_code != fh_names.get_indexer([""])[0]  # an empty handle is not a file
    if not known.any():
        return _empty(FILE_COLUMNS)
    # per (pair, file), in call order: rows sorted by them (stable), each group's
    # first row where the pair or the file changes; sums, min and max per group
    pair, fh = writes["pair"].to_numpy()[known], fh_code[known]
    t = writes["t_call_ns"].to_numpy(dtype="int64")[known]
    order = np.lexsort((t, fh, pair))
    pair, fh, t = pair[order], fh[order], t[order]
    start, end = offset[known][order], (offset[known] + count[known])[order]
    nbytes = writes["write_bytes"].to_numpy(dtype="int64")[known][order]
    t_reply = writes["t_reply_ns"].to_numpy("int64", na_value=-1)[known][order]
    same_file = np.r_[False, (pair[1:] == pair[:-1]) & (fh[1:] == fh[:-1])]
    sequential = same_file & (start == np.r_[-1, end[:-1]])  # (offsets are >= 0 here)
    first = np.flatnonzero(~same_file)
    writes_n = np.diff(np.r_[first, len(pair)])
    total = np.add.reduceat(nbytes, first)
    began = np.minimum.reduceat(t, first)
    last = np.maximum.reduceat(t_reply, first)
    spent = np.where(last >= 0, (last - began).astype("float64"), np.nan) / 1e9
    seconds = np.clip(spent, 0, None)
    follow = writes_n - 1
    in_sequence = np.add.reduceat(sequential.astype("int64"), first)
    labels = writes.groupby("pair", sort=True)[["client", "server"]].first()
    file_fh = np.asarray(fh_names, dtype=object)[fh[first]]
    names = names or {}
    out = pd.DataFrame(
        {
            "pair": pair[first],
            "writes": writes_n,
            "bytes": total,
            "sequential": in_sequence,
            "seconds": seconds,
            "mbit_s": total * 8 / 1e6 / np.where(seconds > 0, seconds, np.nan),
            "client": labels["client"].astype(object).reindex(pair[first]).to_numpy(),
            "server": labels["server"].astype(object).reindex(pair[first]).to_numpy(),
            "fh": file_fh,
            "sequential_share": in_sequence / np.where(follow > 0, follow, np.nan),
            "name": pd.Series([names.get(f, "") for f in file_fh], dtype=object),
        }
    )
    out = out.sort_values(
        ["seconds", "client", "server", "fh"],
        ascending=[False, True, True, True],
        na_position="last",
        ignore_index=True,
    )
    return out[list(FILE_COLUMNS)]


# Rows of a table the JSON summary lists (the most used sizes, the first
# verifier changes): a summary, not a dump; the tables keep every row.
JSON_ROWS = 20


def most_used_sizes(sizes: pd.DataFrame) -> dict[int, int]:
    """The JSON_ROWS most used WRITE sizes (``SIZE_COLUMNS``, most used first):
    size -> WRITE calls."""
    return {int(r.size): int(r.writes) for r in sizes.head(JSON_ROWS).itertuples(index=False)}


def json_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The first JSON_ROWS rows of a table."""
    return table.head(JSON_ROWS)


@dataclass(frozen=True)
class WritesResult:
    """What the trace's WRITEs and COMMITs show.

    sizes: ``SIZE_COLUMNS``; commits: ``COMMIT_COLUMNS``; verifier_changes:
    ``VERIFIER_CHANGE_COLUMNS``; files: ``FILE_COLUMNS``.  stable_asked /
    committed_granted count WRITE calls / successful WRITE replies per level
    (UNSTABLE, DATA_SYNC, FILE_SYNC, unknown).
    """

    writes: int  # WRITE calls in the capture (replies without their call not counted)
    answered: int  # of which answered
    failed: int  # answered with a non-zero NFS status
    failed_by_status: dict[str, int]
    bytes_written: int  # acknowledged by successful replies (with or without their call)
    unstable_bytes: int  # of which written unstable (need a COMMIT)
    # WRITE replies whose call was not captured, and the bytes their successful
    # ones acknowledged (counted in bytes_written; their committed level too)
    replies_without_call: int
    bytes_without_call: int = field(metadata=json_field(then=("median_size",)))
    sizes: pd.DataFrame = field(metadata=json_field(convert=most_used_sizes))
    stable_asked: dict[str, int]
    committed_granted: dict[str, int]
    commits: pd.DataFrame = field(
        metadata=json_field(convert=len, then=("commit_max_ns", "commit_total_ns"))
    )
    verifier_changes: pd.DataFrame = field(metadata=json_field(convert=json_rows))
    files: pd.DataFrame = field(metadata=json_field(convert=len))
    sequential_share: float  # over all files: sequential / WRITEs with a predecessor (NaN: none)
    # of the replies without call, those of calls whose header the snaplen cut
    # (their bytes from an unread stretch: transactions.inferred bytes_stretch)
    cut_without_call: int = 0

    @property
    def median_size(self) -> int | None:
        if self.sizes.empty:
            return None
        s = self.sizes.sort_values("size")
        cum = s["writes"].cumsum()
        return int(s["size"].to_numpy()[np.searchsorted(cum, cum.iloc[-1] / 2)])

    @property
    def commit_max_ns(self) -> int | None:
        """The slowest answered COMMIT's call-to-reply time (None: none answered)."""
        d = self.commits["duration_ns"].dropna()
        return int(d.max()) if len(d) else None

    @property
    def commit_total_ns(self) -> int:
        """The answered COMMITs' call-to-reply times summed."""
        return int(self.commits["duration_ns"].dropna().sum())

    def findings(self) -> list[Finding]:
        out: list[Finding] = []
        if self.replies_without_call:
            n = self.replies_without_call
            cut = (
                f" ({self.cut_without_call} cut by the snaplen: their bytes from the TCP "
                "sequence numbers)"
                if self.cut_without_call
                else ""
            )
            out.append(
                Finding(
                    kind="writes_without_call",
                    title=f"{n} WRITE call{'s' * (n > 1)} not captured{cut}: "
                    f"{bytes_text(self.bytes_without_call)} written counted from "
                    f"{'their replies' if n > 1 else 'its reply'}",
                    severity="warning",
                    details={
                        "replies_without_call": n,
                        "bytes_without_call": self.bytes_without_call,
                    },
                )
            )
        if len(self.verifier_changes):
            at_risk = int(self.verifier_changes["uncommitted_bytes"].sum())
            n = len(self.verifier_changes)
            out.append(
                Finding(
                    kind="verifier_change",
                    title=f"The write verifier changed {n} time{'s' * (n > 1)} (server restart): "
                    f"{bytes_text(at_risk)} written unstable and not yet committed "
                    "must be re-sent",
                    severity="problem",
                    details={
                        "changes": n,
                        "uncommitted_bytes": at_risk,
                        "times_ns": self.verifier_changes["t_ns"].astype("int64").tolist()[:20],
                    },
                )
            )
        if self.failed:
            causes = ", ".join(f"{k} ×{v}" for k, v in self.failed_by_status.items())
            out.append(
                Finding(
                    kind="write_errors",
                    title=f"{self.failed} of {self.answered} WRITE replies were errors ({causes})",
                    severity="warning",
                    details={"failed": self.failed, "by_status": self.failed_by_status},
                )
            )
        synced = sum(v for k, v in self.stable_asked.items() if k in ("DATA_SYNC", "FILE_SYNC"))
        if synced:
            out.append(
                Finding(
                    kind="stable_writes",
                    title=f"{synced} of {self.writes} WRITEs asked DATA_SYNC/FILE_SYNC: "
                    "each waits for stable storage before its reply",
                    details={"stable_asked": self.stable_asked},
                )
            )
        if len(self.commits):
            longest = self.commit_max_ns
            slowest = f", slowest {seconds_text(float(longest))}" if longest is not None else ""
            out.append(
                Finding(
                    kind="commits",
                    title=f"{len(self.commits)} COMMIT{'s' * (len(self.commits) > 1)}{slowest}",
                    details={
                        "commits": len(self.commits),
                        "max_ns": longest,
                        "total_ns": self.commit_total_ns,
                    },
                )
            )
        follow = int((self.files["writes"] - 1).clip(lower=0).sum()) if len(self.files) else 0
        if follow >= 10 and self.sequential_share < RANDOM_BELOW:
            out.append(
                Finding(
                    kind="random_writes",
                    title=f"WRITEs were mostly not sequential: {self.sequential_share:.0%} "
                    "continued where the previous one on the file ended",
                    details={"sequential_share": self.sequential_share},
                )
            )
        return out


def analyze_writes(transactions: pd.DataFrame) -> WritesResult:
    tx = prepared(transactions)
    ops = tx["op"]
    is_write = ops.eq(WRITE_OP)
    w = tx[is_write & (tx["n_calls"] > 0)]
    # replies whose call was not captured: counted in the bytes and levels granted
    # (rows selected only when there are some: each selection copies every column)
    unseen = (is_write & tx["n_calls"].eq(0) & (tx["n_replies"] > 0)).to_numpy(dtype=bool)
    orphans = tx[unseen] if unseen.any() else tx.iloc[:0]
    answered = (w["n_replies"] > 0).to_numpy()
    failing = answered & (_int(w["status"]) > 0)
    failed_by_status: dict[str, int] = {}
    if failing.any():
        failed = w[failing]
        for (st, vers), n in (
            failed.groupby([failed["status"].astype("int64"), failed["vers"].astype("int64")])
            .size()
            .items()
        ):
            name = status_name(int(st), int(vers))
            failed_by_status[name] = failed_by_status.get(name, 0) + int(n)
    ok_writes = tx[is_write & (tx["write_bytes"] > 0)]
    files = _files(w, file_names(tx))
    follow = int((files["writes"] - 1).clip(lower=0).sum()) if len(files) else 0
    seq = int(files["sequential"].sum()) if len(files) else 0
    return WritesResult(
        writes=len(w),
        answered=int(answered.sum()),
        failed=int(failing.sum()),
        failed_by_status=failed_by_status,
        bytes_written=int(ok_writes["write_bytes"].sum()),
        unstable_bytes=int(
            ok_writes["write_bytes"].to_numpy("int64")[_unstable_mask(ok_writes)].sum()
        ),
        sizes=_sizes(write_sizes(w)),
        stable_asked=_mix(_int(w["stable"])),
        committed_granted=_mix(_int(ok_writes["committed"])),
        commits=commit_table(tx),
        verifier_changes=_verifier_changes(tx),
        files=files,
        sequential_share=seq / follow if follow else float("nan"),
        replies_without_call=len(orphans),
        bytes_without_call=int(orphans["write_bytes"].sum()),
        cut_without_call=_inferred_from(orphans, "bytes_stretch"),
    )
