"""What a capture cut short (``tcpdump -s N``) still tells about its WRITEs:
the transactions' columns the snaplen hid, inferred from the evidence that
survives any snaplen that keeps the RPC header through its procedure number
(RFC 5531 §9), each inferred value marked in the ``inferred`` column (codes
and what each sets: ``schema.INFERENCES``).  Called by ``match``.

The evidence, strongest first:

* a reply's decoded results (``reply_count``): bytes written;
* record lengths: a TCP record mark (RFC 5531 §11) or a UDP datagram's length
  gives a message's whole length however little of it was captured.  A WRITE
  call's length less its header is the data it carried (the header: what the
  client's WRITEs whose count was captured show, else ``WRITE_HEADER``); a
  reply's length tells a successful NFSv3 WRITE reply from a failed one
  (``nfs3_write_ok``), and a reply without its call from the replies of the
  connection's WRITEs;
* TCP sequence numbers: a record mark cut off by the snaplen (the next record
  began in the uncaptured part of a segment) leaves the records after it
  unread, but their bytes are still known (events ``rpc_unframed``) and, when
  they are records as long as the last one read (a client's WRITEs of one
  size), where each one began and ended (``rpc_unframed_record``).  A
  connection's client numbers its calls one by one (libnfs and the Linux
  client do, the kernel little-endian: ``protocol.xids``), so the k records
  between two calls read with xids a and b are the calls a+1 .. b-1 when
  b - a - 1 = k (else the replies without call whose xids lie between a and
  b, when there are k of them); the Linux client numbers a call when it
  starts and sends it when it gets a slot, so a reply without call to an xid
  before a, answered after the stretch began, is one of its records (the
  records then take the replies' order: ``_reordered``).  A reply
  without its call gets its call back from its record (the times of its
  first and last segment, its length; ``call_frame`` stays unknown); a record
  whose reply was not read either becomes a row of its own, answered by the
  next unread record of the connection's replies as long as that
  operation's replies there;
* NFSv4: a COMPOUND call cut in its operation list takes the operations its
  whole reply names; one cut before it names any, and whose reply does not
  name them either, is a WRITE when it carries ``WRITE_MIN_CALL_BYTES`` or
  more (no other client operation sends that much), a COMMIT when its reply
  is ``NFS4_COMMIT_SHORTER`` bytes shorter than the connection's WRITE
  replies.

Nothing is inferred where a value was captured, and nothing from a guess
alone: a row whose evidence does not fit (a stretch that is not a whole
number of records, xids that do not line up) keeps its unknowns.  Left
unknown: an inferred call's last frame, its stable_how, offset and file handle
(its TCP ACK time, ``t_call_acked_ns``, is the receiver's ACK of its record:
event ``rpc_unframed_acked``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from nfstrace.combining import categorical_from, string_codes
from nfstrace.protocol.procedures import COMMIT_OP, WRITE_OP
from nfstrace.protocol.rpc import NFS_PROGRAM
from nfstrace.protocol.tcp import SEQ_MOD
from nfstrace.protocol.xids import XID_MOD, counting, counts_little_endian, swapped_one
from nfstrace.schema import INFERENCES

# An NFSv4 COMMIT reply is this much shorter than a WRITE reply of the same
# COMPOUND shape: COMMIT4resok is the verifier (8 bytes), WRITE4resok the
# count, the committed level and the verifier (16) (RFC 8881 §18.3, §18.32).
NFS4_COMMIT_SHORTER = 8
# ... and exactly this long when it is the COMPOUND of a COMMIT alone (no
# GETATTR after it, as the Linux client sends it while its WRITEs carry one):
# the accepted reply's header with an AUTH_NONE verifier (24 bytes, RFC 5531
# §9), COMPOUND4res with an empty tag (12), SEQUENCE4resok (44, NFSv4.1+,
# RFC 8881 §18.46), PUTFH4res (8), COMMIT4resok (16); by minor version (an
# unknown one: 4.1's only -- 60 bytes answer other NFSv4.1 COMPOUNDs, lab: nfs-rs).
NFS4_COMMIT_REPLY_BYTES = {1: 24 + 12 + 44 + 8 + 16, 0: 24 + 12 + 8 + 16}
# An NFSv4 COMPOUND call at least this long whose operations were not captured
# is a WRITE: the data of no other operation a client sends comes near it
# (names, ACLs and symlink targets stay below a page).
WRITE_MIN_CALL_BYTES = 4096
# A WRITE call's bytes before its data, where no WRITE of the client showed
# both its count and its length: the RPC header through the verifier as far as
# captured (else 68: AUTH_SYS of a short host name, AUTH_NONE verifier), then
# NFSv3 a 28-byte file handle, offset, count, stable_how and the data's length;
# NFSv4 the COMPOUND header, SEQUENCE (4.1+), PUTFH of a 36-byte handle and
# WRITE's opcode, stateid, offset, stable_how and the data's length.  Off by a
# few tens of bytes per call: under 1% of an 8 KiB WRITE.
TYPICAL_BODY_OFFSET = 68
WRITE_HEADER = {
    (3, -1): 4 + 28 + 8 + 4 + 4 + 4,
    (4, 0): 12 + (4 + 4 + 36) + (4 + 16 + 8 + 4 + 4),
    (4, 1): 12 + (4 + 36) + (4 + 4 + 36) + (4 + 16 + 8 + 4 + 4),
}
# NFSv3 WRITE3resok after the RPC reply header: status, wcc_data (pre_op_attr:
# a flag and 24 bytes of attributes if set; post_op_attr: a flag and 84),
# count, committed, the verifier (RFC 1813 §3.3.7); WRITE3resfail stops after
# wcc_data.  The two sets of lengths do not meet.
_NFS3_WRITE_OK = frozenset(4 + 4 + pre + 4 + post + 16 for pre in (0, 24) for post in (0, 84))
_NFS3_WRITE_FAIL = frozenset(4 + 4 + pre + 4 + post for pre in (0, 24) for post in (0, 84))
# The column of infer()'s table with the bytes it inferred (match takes it away).
WRITE_BYTES = "_write_bytes_inferred"


def nfs3_write_ok(reply_bytes: np.ndarray, body_offset: np.ndarray) -> np.ndarray:
    """1 where an NFSv3 WRITE reply of this length (results at body_offset) is a
    success, 0 a failure, -1 unknown (offset not captured, or neither)."""
    rest = reply_bytes - body_offset
    ok = np.isin(rest, list(_NFS3_WRITE_OK))
    fail = np.isin(rest, list(_NFS3_WRITE_FAIL))
    return np.where((body_offset < 0) | ~(ok | fail), -1, np.where(ok, 1, 0))


def infer(
    tx: pd.DataFrame,
    messages: pd.DataFrame,
    call_pos: np.ndarray,
    reply_pos: np.ndarray,
    events: pd.DataFrame | None,
) -> pd.DataFrame:
    """The transactions (match's table, rows in its order; ``call_pos`` /
    ``reply_pos``: the message of each row's first call and first reply, -1
    none) with what the snaplen hid inferred (the module's docstring), the
    ``inferred`` column filled, and the bytes inferred of successful WRITEs
    whose reply's count was not captured in a column ``WRITE_BYTES`` (-1:
    none; match makes ``write_bytes`` of it); rows re-ordered by their start
    when an inferred call moved one."""
    if not len(tx):
        return tx.assign(inferred=pd.Categorical([], categories=[""]), **{WRITE_BYTES: -1})
    calls, replies = _stretches(messages, events)
    tx, call_pos, reply_pos, added = _record_rows(tx, calls, call_pos, reply_pos)
    c = _Columns(tx, messages, call_pos, reply_pos)
    c.flag("xid_sequence", added)
    steps: list[Callable[[], None]] = [
        lambda: _ops_from_reply(c),
        lambda: _calls_from_records(c, calls),
        lambda: _replies_from_records(c, replies),
        lambda: _ops_from_length(c),
        lambda: _status_from_length(c),
        lambda: _bytes_from_stretches(c, calls),
        lambda: _write_bytes(c),
    ]
    for step in steps:
        step()
        c.forget()  # (each step's columns: not all of them held at once)
    return c.table()


class _Columns:
    """The transactions' columns the inference reads (as arrays, -1 / '' where
    missing) and the values it sets, with the message facts of each row's call
    and reply and the codes of what was inferred per row."""

    def __init__(
        self, tx: pd.DataFrame, m: pd.DataFrame, call: np.ndarray, reply: np.ndarray
    ) -> None:
        self.tx = tx
        self.n = len(tx)
        self._int: dict[str, np.ndarray] = {}
        self._text: dict[str, np.ndarray] = {}
        self.sets: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # column -> (mask, values)
        self.codes = np.zeros((self.n, len(INFERENCES)), bool)

        def of(pos: np.ndarray, name: str, missing: object, dtype: str = "O") -> np.ndarray:
            """The message column ``name`` at ``pos`` (``missing`` where -1), as
            ``dtype``."""
            out = np.full(len(pos), missing, dtype=dtype)
            if len(m):
                at = pos >= 0
                out[at] = m[name].to_numpy()[pos[at]]
            return out

        # the reply's texts as names and codes (``_Coded``): compared by their
        # few names, made objects only where a step takes their values
        self.reply_ops = _Coded.at(m, "ops", reply)
        self.reply_op = _Coded.at(m, "op", reply)
        self.reply_decode = _Coded.at(m, "nfs_decode", reply)
        self.reply_body = of(reply, "body_offset", -1, "int64")
        self.reply_cut = of(reply, "truncated", False, "bool")
        self.call_body = of(call, "body_offset", -1, "int64")
        self.write_from = np.full(self.n, -1, "int64")  # inferred write bytes (-1: none)

    def int(self, name: str) -> np.ndarray:
        """Column ``name`` as int64 (-1 where missing), with the values set."""
        got = self._int.get(name)
        if got is None:
            got = self.tx[name].to_numpy("int64", na_value=-1, copy=True)
            if name in self.sets:
                mask, values = self.sets[name]
                got[mask] = values[mask].astype("int64")
            self._int[name] = got
        return got

    def text(self, name: str) -> np.ndarray:
        """Column ``name`` as objects ('' where missing), with the values set."""
        got = self._text.get(name)
        if got is None:
            # (astype(object) first: to_numpy(object, na_value="") of a category column
            # raised the peak of a 1M-packet analysis by 93 MB; a category column of
            # strings by its codes: no scan of every row's object for a missing one)
            got = _text_column(self.tx[name])
            if name in self.sets:
                mask, values = self.sets[name]
                got[mask] = values[mask]
            self._text[name] = got
        return got

    def is_text(self, name: str, value: str) -> np.ndarray:
        """``self.text(name) == value``, of a category column by its codes (the
        few names compared, not an object per row), with the values set."""
        got = self._text.get(name)
        by_codes = None if got is not None else string_codes(self.tx[name])
        if by_codes is None:
            return self.text(name) == value
        names, codes = by_codes
        out = (names == value)[codes]
        if name in self.sets:
            mask, values = self.sets[name]
            out[mask] = values[mask] == value
        return out

    def forget(self) -> None:
        """Let go of the columns read so far (read again, with the values set,
        when asked for): a column per row each, 8 bytes a row."""
        self._int.clear()
        self._text.clear()

    def set(self, name: str, mask: np.ndarray, values: object) -> None:
        """Set column ``name`` where mask (values: one, or one per row)."""
        if not mask.any():
            return
        every = np.broadcast_to(np.asarray(values, dtype=object), (self.n,))
        old = self.sets.get(name)
        if old is None:
            old = self.sets[name] = (np.zeros(self.n, bool), np.empty(self.n, dtype=object))
        old[0][mask] = True
        old[1][mask] = every[mask]
        if name in self._int:
            self._int[name][mask] = every[mask].astype("int64")
        if name in self._text:
            self._text[name][mask] = every[mask]

    def flag(self, code: str, mask: np.ndarray) -> None:
        self.codes[:, _CODE[code]] |= mask

    def flagged(self, code: str) -> np.ndarray:
        return self.codes[:, _CODE[code]]

    def is_write(self) -> np.ndarray:
        return self.is_text("op", WRITE_OP)

    def table(self) -> pd.DataFrame:
        """The transactions with the values set, the ``inferred`` column and the
        bytes inferred, in the order of their start when a call was inferred."""
        # What the inference read is read no more: freed before the table is made.
        self.forget()
        del self.reply_ops, self.reply_op, self.reply_decode, self.reply_body, self.reply_cut
        del self.call_body
        # A shallow copy: columns set below are new arrays (copy on write), the
        # others are shared with match's table rather than copied (a table's bytes).
        tx = self.tx.copy(deep=False)
        for name, (mask, values) in self.sets.items():
            dtype = tx[name].dtype
            column = tx[name].astype(object).to_numpy(copy=True)
            column[mask] = values[mask]
            # (a category column's values may be new: its categories are made again)
            typed = "category" if isinstance(dtype, pd.CategoricalDtype) else dtype
            tx[name] = pd.Series(column, index=tx.index).astype(typed)
        # each row's codes as one integer (a bit per code), each distinct set of
        # codes named once (not a string per row made and hashed)
        names = np.array(list(INFERENCES), dtype=object)
        bits = np.zeros(self.n, "int64")
        flagged = np.flatnonzero(self.codes.any(axis=1))  # (few rows, if any)
        bits[flagged] = self.codes[flagged].astype("int64") @ (1 << np.arange(len(names)))
        kinds, found = pd.factorize(bits)
        found = np.asarray(found, dtype="int64")
        texts = [" ".join(names[((k >> np.arange(len(names))) & 1) > 0]) for k in found.tolist()]
        tx["inferred"] = categorical_from(np.array(texts, dtype=object), kinds)
        tx[WRITE_BYTES] = self.write_from
        if "t_call_ns" in self.sets:  # a call inferred: rows in the order of their start
            start = tx["t_call_ns"].fillna(tx["t_reply_ns"]).fillna(0).to_numpy("int64")
            frame = tx["call_frame_first"].fillna(tx["reply_frame"]).fillna(0)
            order = np.lexsort((frame.to_numpy("int64"), start))
            if (order != np.arange(self.n)).any():
                tx = tx.iloc[order].reset_index(drop=True)
        return tx


_CODE = {name: i for i, name in enumerate(INFERENCES)}


class _Coded:
    """A text per row as names and codes (``names[codes]``): compared by the
    names, so a comparison costs a take of booleans, not one per row of objects."""

    def __init__(self, names: np.ndarray, codes: np.ndarray) -> None:
        self.names = names
        self.codes = codes

    @classmethod
    def at(cls, m: pd.DataFrame, name: str, pos: np.ndarray, missing: str = "") -> _Coded:
        """The message column ``name`` at ``pos``: ``missing`` where pos is -1,
        NaN where the message has no value."""
        column = m[name]
        if not len(m) or not isinstance(column.dtype, pd.CategoricalDtype):
            values = np.full(len(pos), missing, dtype=object)
            if len(m):
                values[pos >= 0] = column.to_numpy()[pos[pos >= 0]]
            return cls(values, np.arange(len(pos)))
        categories = np.asarray(column.cat.categories, dtype=object)
        names = np.append(categories, np.array([np.nan, missing], dtype=object))
        codes = column.cat.codes.to_numpy().astype("int64")
        codes[codes < 0] = len(categories)  # (no value: NaN)
        out = np.full(len(pos), len(categories) + 1, "int64")  # (no message: missing)
        out[pos >= 0] = codes[pos[pos >= 0]]
        return cls(names, out)

    def eq(self, value: str) -> np.ndarray:
        return (self.names == value)[self.codes]

    def values(self) -> np.ndarray:
        """The texts, an object per row."""
        return self.names[self.codes]


def _text_column(column: pd.Series) -> np.ndarray:
    """``column.astype(object).fillna("")`` as a new object array: of a category
    column of strings, its categories (and '' for a missing value) taken by its
    codes."""
    by_codes = string_codes(column)
    if by_codes is not None:
        names, codes = by_codes
        return names[codes]
    return column.astype(object).fillna("").to_numpy(object, copy=True)


# ---- the operation and its outcome ----------------------------------------------------


def _ops_from_reply(c: _Columns) -> None:
    """NFSv4 calls whose operation list the snaplen cut: the whole reply's."""
    cut = c.is_text("call_decode", "truncated") & (c.int("vers") == 4)
    cut &= (c.int("prog") == NFS_PROGRAM) & c.reply_decode.eq("ok") & ~c.reply_ops.eq("")
    take = np.zeros(c.n, bool)
    if not cut.any():
        return
    ops, rops = c.text("ops"), c.reply_ops.values()
    for i in np.flatnonzero(cut & (ops != rops)):
        mine, theirs = str(ops[i]).split(), str(rops[i]).split()
        take[i] = len(mine) < len(theirs) and theirs[: len(mine)] == mine
    c.set("ops", take, rops)
    c.set("op", take, c.reply_op.values())
    c.flag("op_reply", take)


def _ops_from_length(c: _Columns) -> None:
    """WRITEs (and NFSv4 COMMITs) whose operation the snaplen hid: NFSv4 calls
    that carried data, then replies without call as long as the connection's
    WRITE replies (or whose unread call record is as long as its WRITE calls)."""
    prog, vers, proc = c.int("prog"), c.int("vers"), c.int("proc")
    call_bytes = c.int("call_bytes")
    nfs4 = (prog == NFS_PROGRAM) & (vers == 4) & (proc == 1)
    # a whole reply names its operations: only a reply cut (or none) leaves them
    # open, of a call cut or unread (a record: its reply's first operation,
    # SEQUENCE, names nothing)
    cut_call = c.is_text("call_decode", "truncated") | c.flagged("call_record")
    unnamed = nfs4 & cut_call & ~c.reply_decode.eq("ok")
    unnamed &= ~c.flagged("op_reply")
    if unnamed.any():
        ops = c.text("ops")
        for i in np.flatnonzero(unnamed):  # (a call that names a WRITE is named)
            unnamed[i] = WRITE_OP not in str(ops[i]).split()
    big = unnamed & (call_bytes >= WRITE_MIN_CALL_BYTES) & ~c.is_text("op", WRITE_OP)
    c.set("op", big, WRITE_OP)
    c.flag("op_length", big)
    _nfs4_commits(c, unnamed & ~big)
    # replies without their call (or with a call record inferred), calls cut
    # inside their header (only the xid read): the operation not known, where
    # the capture cut the message that would have named it (a whole NFSv3 or
    # NFSv4 reply without call is decoded as far as it can be: parsers/decoders)
    cut = c.reply_cut | ((c.int("n_calls") > 0) & (c.int("prog") < 0))
    # (an NFSv4.1 reply cut after its first operation names nothing: SEQUENCE
    # opens every COMPOUND; a SEQUENCE alone is no WRITE reply's length)
    orphan = c.is_text("op", "?") | (c.is_text("op", "SEQUENCE") & c.reply_decode.eq("truncated"))
    orphan &= cut
    if not orphan.any():
        return
    reply_bytes, conn, minor = c.int("reply_bytes"), c.int("conn"), c.int("minor")
    recorded = c.flagged("call_record")
    # per connection: its WRITE replies' and calls' lengths, and one WRITE's
    # (prog, vers, proc, minor)
    known: dict[int, tuple[set[int], set[int], int]] = {}
    for i in np.flatnonzero(c.is_write() & (reply_bytes >= 0) & ~orphan):
        ref = known.setdefault(int(conn[i]), (set(), set(), int(i)))
        ref[0].add(int(reply_bytes[i]))
        if call_bytes[i] >= 0 and not recorded[i]:
            ref[1].add(int(call_bytes[i]))
    take = np.zeros(c.n, bool)
    like = np.zeros(c.n, "int64")  # the row a WRITE found takes its numbers from
    for i in np.flatnonzero(orphan):
        got = known.get(int(conn[i]))
        if got is not None and (int(reply_bytes[i]) in got[0] or int(call_bytes[i]) in got[1]):
            take[i] = True
            like[i] = got[2]
    c.set("op", take, WRITE_OP)
    for name, values in (("prog", prog), ("vers", vers), ("proc", proc), ("minor", minor)):
        c.set(name, take, values[like])
    c.set("program", take, "nfs")
    c.flag("op_length", take)


def _nfs4_commits(c: _Columns, unnamed: np.ndarray) -> None:
    """NFSv4 COMMITs whose operations the snaplen hid (``unnamed``: small
    COMPOUNDs whose call and reply were both cut in their operation lists),
    to a call sent after the connection's first WRITE: a reply exactly as
    long as a COMMIT reply the connection's replies named, else as a lone
    COMMIT's COMPOUND (NFS4_COMMIT_REPLY_BYTES), else, where the connection
    has none, NFS4_COMMIT_SHORTER bytes shorter than its WRITE replies (the
    same operations before it, COMMIT4resok's verifier instead of
    WRITE4resok's count, committed and verifier)."""
    reply_bytes, conn, t_call = c.int("reply_bytes"), c.int("conn"), c.int("t_call_ns")
    minor = c.int("minor")
    unnamed = unnamed & (reply_bytes >= 0)
    if not unnamed.any():
        return
    write = c.is_write() & (reply_bytes >= 0) & (c.int("vers") == 4)
    # COMMITs whose reply named them: where a connection has one, a COMMIT
    # reply's length there is known (a CLOSE's reply may be the other rule's
    # length: the kernel's, -s 200)
    named = c.is_text("op", COMMIT_OP) & ~unnamed & (reply_bytes >= 0)
    take = np.zeros(c.n, bool)
    for k in np.unique(conn[unnamed]):
        same = write & (conn == k)
        if not same.any():
            continue
        usual = _most_common(reply_bytes[same])
        first = t_call[same & (t_call >= 0)].min(initial=np.iinfo("int64").max)
        mine = unnamed & (conn == k) & (t_call >= first)
        seen = named & (conn == k)
        if seen.any():
            take |= mine & np.isin(reply_bytes, reply_bytes[seen])
            continue
        alone = mine & (
            ((minor != 0) & (reply_bytes == NFS4_COMMIT_REPLY_BYTES[1]))
            | ((minor == 0) & (reply_bytes == NFS4_COMMIT_REPLY_BYTES[0]))
        )
        take |= alone if alone.any() else mine & (reply_bytes == usual - NFS4_COMMIT_SHORTER)
    c.set("op", take, COMMIT_OP)
    c.flag("op_length", take)


def _most_common(values: np.ndarray) -> int:
    """The most common value (the smallest of equally common ones)."""
    got, counts = np.unique(values, return_counts=True)
    return int(got[counts == counts.max()][0])


def _status_from_length(c: _Columns) -> None:
    """Successful WRITEs whose reply's status the snaplen hid, told by its
    length: NFSv3 WRITE3resok's lengths where the reply's header was captured;
    else one of the connection's successful WRITE replies' lengths (none: its
    most common WRITE reply length; failures are rare)."""
    status, reply_bytes, conn = c.int("status"), c.int("reply_bytes"), c.int("conn")
    open_ = c.is_write() & (status < 0) & (reply_bytes >= 0) & (c.int("accept_stat") <= 0)
    if not open_.any():
        return
    shape = np.where(c.int("vers") == 3, nfs3_write_ok(reply_bytes, c.reply_body), -1)
    good = open_ & (shape == 1)
    rest = open_ & (shape < 0)
    write = c.is_write() & (reply_bytes >= 0)
    for k in np.unique(conn[rest]):
        same = write & (conn == k)
        ok = same & ((status == 0) | good)
        lengths = np.unique(reply_bytes[ok]) if ok.any() else [_most_common(reply_bytes[same])]
        good |= rest & (conn == k) & np.isin(reply_bytes, lengths)
    c.set("status", good, 0)
    c.flag("status_length", good)


# ---- bytes ----------------------------------------------------------------------------


def _header(c: _Columns) -> np.ndarray:
    """``write_headers`` of the rows as inferred so far (a call's length from
    an unread record or a stretch teaches nothing)."""
    learn = c.is_write() & ~c.flagged("call_record") & ~c.flagged("bytes_stretch")
    return write_headers(
        c.text("client"), c.text("server"), c.int("vers"), c.int("minor"),
        c.int("count"), c.int("call_bytes"), learn, c.call_body,
    )  # fmt: skip


def write_headers(
    client: np.ndarray,
    server: np.ndarray,
    vers: np.ndarray,
    minor: np.ndarray,
    count: np.ndarray,
    call_bytes: np.ndarray,
    learn: np.ndarray,
    body_offset: np.ndarray,
) -> np.ndarray:
    """Per row, a WRITE call's bytes before its data (through the data's
    length): learnt from the client's WRITEs to that server (rows ``learn``)
    whose count and length were both captured (the median), else the
    protocol's typical header (``WRITE_HEADER``) after the RPC header
    (``body_offset``, -1: not captured, ``TYPICAL_BODY_OFFSET``).  Arrays
    per row; -1 where a number is unknown."""
    body = np.where(body_offset >= 0, body_offset, TYPICAL_BODY_OFFSET)
    typical = body + WRITE_HEADER[(3, -1)]
    typical = np.where(vers == 4, body + WRITE_HEADER[(4, 1)], typical)
    typical = np.where((vers == 4) & (minor == 0), body + WRITE_HEADER[(4, 0)], typical)
    seen = learn & (count >= 0) & (call_bytes > 0)
    if not seen.any():
        return typical.astype("int64")
    key = pd.MultiIndex.from_arrays([client, server, vers])
    learnt = pd.Series(call_bytes - ((count + 3) & ~3))[seen].groupby(key[seen]).median()
    got = learnt.reindex(key).to_numpy("float64")
    return np.where(np.isnan(got), typical, np.nan_to_num(got)).astype("int64")


def _write_bytes(c: _Columns) -> None:
    """Bytes of successful WRITEs whose reply's count was not captured: the count
    the call asked, else its record's length less the header (``write_from``)."""
    count, call_bytes = c.int("count"), c.int("call_bytes")
    open_ = c.is_write() & (c.int("status") == 0) & (c.int("reply_count") < 0)
    asked = open_ & (count >= 0)
    c.write_from[asked] = count[asked]
    c.flag("bytes_count", asked)
    rest = open_ & ~asked & (call_bytes > 0)
    if rest.any():
        c.write_from[rest] = np.maximum(call_bytes - _header(c), 0)[rest]
        c.flag("bytes_length", rest & ~c.flagged("bytes_stretch"))


def _bytes_from_stretches(c: _Columns, stretches: list[_Stretch]) -> None:
    """Successful WRITEs still without a call or a count: their share of the
    unread bytes between the calls read before and after them (less the other
    unread calls there, taken as long as the connection's other calls)."""
    n_calls, conn, call_bytes = c.int("n_calls"), c.int("conn"), c.int("call_bytes")
    open_ = c.is_write() & (n_calls == 0) & (c.int("status") == 0)
    open_ &= (c.int("reply_count") < 0) & (call_bytes < 0)
    if not open_.any():
        return
    orphans = _Orphans(c.int("conn"), c.int("xid"), np.flatnonzero(n_calls == 0))
    other = (n_calls > 0) & ~c.is_write() & (call_bytes >= 0)
    usual = pd.Series(call_bytes[other] + 4).groupby(conn[other]).median()
    share = np.full(c.n, -1, "int64")
    for st in stretches:
        if st.records is not None:
            continue
        rows = orphans.between(st)
        writes = [i for i in rows if open_[i]]
        if not writes:
            continue
        rest = st.length - st.taken - (len(rows) - len(writes)) * int(usual.get(st.conn, 0))
        if rest > 0:
            share[writes] = rest // len(writes)
    mask = share > 0
    c.set("call_bytes", mask, share - 4)
    c.flag("bytes_stretch", mask)


# ---- unread records -------------------------------------------------------------------


class _Stretch:
    """An rpc_unframed stretch of one direction of a connection, between the
    messages read before (xid ``before``, -1 none) and after it (``after``);
    ``records``: its rpc_unframed_record (ts, frame, length, duration, the
    receiver's ACK of it: rpc_unframed_acked, -1 none) in order, or None (not
    split); ``prefix``: when the stretch is not a whole number of them, the
    records as long as the message before it that fit from its start (None:
    none), predicted, not read: taken only as far as the replies confirm them,
    ``taken`` their bytes; ``little``: the connection's client counts its xids
    little-endian (``protocol.xids``)."""

    __slots__ = (
        *("conn", "length", "before", "after", "after_frame"),
        *("records", "prefix", "taken", "little"),
    )

    def __init__(self, conn: int, length: int, before: int, after: int, little: bool) -> None:
        self.conn, self.length, self.before, self.after = conn, length, before, after
        self.after_frame = -1  # the first frame of the message read after it
        self.records: list[tuple[int, int, int, int, int]] | None = None
        self.prefix: list[tuple[int, int, int, int, int]] | None = None
        self.taken = 0
        self.little = little

    def counted(self, xid: int) -> int:
        """An xid of the connection as its client counts (and back: -1 stays)."""
        return swapped_one(xid) if self.little and xid >= 0 else xid


def _stretches(
    m: pd.DataFrame, events: pd.DataFrame | None
) -> tuple[list[_Stretch], list[_Stretch]]:
    """The unframed stretches of the calls' and of the replies' direction of
    each connection that carried calls, with the xids of the messages read
    around them."""
    calls_out: list[_Stretch] = []
    replies_out: list[_Stretch] = []
    if events is None or not len(events) or not len(m):
        return calls_out, replies_out
    kind = events["kind"].astype(object).to_numpy()
    pick = (kind == "rpc_unframed") | (kind == "rpc_unframed_record")
    if not pick.any():
        return calls_out, replies_out
    got = events[kind == "rpc_unframed_acked"]
    keys = zip(got["conn"].to_numpy("int64").tolist(), got["seq"].to_numpy("int64").tolist(),
               strict=True)  # fmt: skip
    acked = dict(zip(keys, got["ts_ns"].to_numpy("int64").tolist(), strict=True))
    ev = events[pick]
    is_call = (m["msgtype"] == "call").to_numpy(bool)
    conn_m = m["conn"].to_numpy("int64")
    src_m = m["src"].astype(object).to_numpy()
    clients = dict(zip(conn_m[is_call].tolist(), src_m[is_call], strict=True))
    little = _little_endian_clients(m, is_call)
    e_src = ev["src"].astype(object).to_numpy()
    e_conn = ev["conn"].to_numpy("int64").tolist()
    from_client = np.array([clients.get(k, "") == s for k, s in zip(e_conn, e_src, strict=True)])
    known = np.array([k in clients for k in e_conn], bool)
    for side, out in ((True, calls_out), (False, replies_out)):
        mine = (from_client == side) & known
        if not mine.any():
            continue
        sent = is_call if side else ~is_call
        out.extend(_side_stretches(ev[mine], m, sent, acked, little))
    return calls_out, replies_out


def _little_endian_clients(m: pd.DataFrame, is_call: np.ndarray) -> set[int]:
    """The connections whose client counts its xids little-endian (the Linux
    kernel on x86: ``protocol.xids``), from its calls in the order sent."""
    conn = m["conn"].to_numpy("int64")[is_call]
    order = np.lexsort((m["frame_first"].to_numpy("int64")[is_call], conn))
    conn, xid = conn[order], m["xid"].to_numpy("int64")[is_call][order]
    bounds = np.flatnonzero(np.diff(conn)) + 1
    return {
        int(k[0])
        for k, x in zip(np.split(conn, bounds), np.split(xid, bounds), strict=True)
        if len(k) and counts_little_endian(x)
    }


def _side_stretches(
    ev: pd.DataFrame,
    m: pd.DataFrame,
    sent: np.ndarray,
    acked: dict[tuple[int, int], int],
    little: set[int],
) -> list[_Stretch]:
    """The stretches of one direction (its events ``ev``), between the messages
    read that way (``sent``: the messages of that direction; ``acked``: the
    time of the receiver's ACK of a record by (connection, where it begins);
    ``little``: the connections whose client counts little-endian)."""
    out: list[_Stretch] = []
    conn_m = m["conn"].to_numpy("int64")[sent]
    frame_m = m["frame_first"].to_numpy("int64")[sent]
    xid_m = m["xid"].to_numpy("int64")[sent]
    order = np.lexsort((frame_m, conn_m))
    conn_m, frame_m, xid_m = conn_m[order], frame_m[order], xid_m[order]
    rows = ev.sort_values(["conn", "ts_ns", "frame"], kind="stable")
    kinds = rows["kind"].astype(object).to_numpy()
    conn, frame, ts = (rows[x].to_numpy("int64") for x in ("conn", "frame", "ts_ns"))
    seq, length, dur = (rows[x].to_numpy("int64") for x in ("seq", "length", "duration_ns"))
    # A record belongs to the stretch of its connection whose bytes hold it (by
    # sequence number, not time: a record whose first bytes came in a re-sent
    # segment begins after the records that follow it), the nearest in time of
    # those; its records in stream order.
    starts: dict[int, list[tuple[int, int, _Stretch]]] = {}  # conn -> (ts, seq, stretch)
    for j in np.flatnonzero(kinds == "rpc_unframed"):
        k = int(conn[j])
        lo, hi = np.searchsorted(conn_m, k, "left"), np.searchsorted(conn_m, k, "right")
        at = lo + int(np.searchsorted(frame_m[lo:hi], frame[j], "right"))
        before = int(xid_m[at - 1]) if at > lo else -1
        after = int(xid_m[at]) if at < hi else -1
        st = _Stretch(k, int(length[j]), before, after, k in little)
        st.after_frame = int(frame_m[at]) if at < hi else -1
        starts.setdefault(k, []).append((int(ts[j]), int(seq[j]), st))
        out.append(st)
    held: dict[int, list[tuple[int, tuple[int, int, int, int, int]]]] = {}
    for j in np.flatnonzero(kinds != "rpc_unframed"):
        k, n = int(conn[j]), int(length[j])
        where = int(seq[j])
        inside = [
            (abs(t - int(ts[j])), (where - s0) % SEQ_MOD, st)
            for t, s0, st in starts.get(k, [])
            if (where - s0) % SEQ_MOD + n <= st.length
        ]
        if not inside:
            continue  # not inside a stretch: left out
        _, offset, st = min(inside, key=lambda x: x[0])
        record = (int(ts[j]), int(frame[j]), n, int(dur[j]), acked.get((k, where), -1))
        held.setdefault(id(st), []).append((offset, record))
    for st in out:
        mine = sorted(held.get(id(st), []), key=lambda x: x[0])
        ends = np.cumsum([r[2] for _, r in mine])
        if len(mine) and ends[-1] == st.length:
            st.records = [r for _, r in mine]
        elif len(mine) and [o for o, _ in mine] == [0, *ends[:-1].tolist()]:
            st.prefix = [r for _, r in mine]  # (records one after the other from its start)
    return out


class _Orphans:
    """Rows without a call by (connection, xid), and per connection their xids
    sorted, for the xids between two calls."""

    def __init__(
        self, conn: np.ndarray, xid: np.ndarray, rows: np.ndarray, reply: np.ndarray | None = None
    ) -> None:
        # (reply: each row's reply time, -1 none: the order the server answered in)
        self.reply_at = (
            {} if reply is None else dict(zip(rows.tolist(), reply[rows].tolist(), strict=True))
        )
        conn, xid = conn[rows], xid[rows]
        self.xid_at = dict(zip(rows.tolist(), xid.tolist(), strict=True))
        keys = zip(conn.tolist(), xid.tolist(), strict=True)
        self.by_xid: dict[tuple[int, int], int] = dict(zip(keys, rows.tolist(), strict=True))
        order = np.lexsort((xid, conn))
        self.conn, self.xid, self.rows = conn[order], xid[order], rows[order]

    def between(self, st: _Stretch) -> list[int]:
        """Rows on the stretch's connection whose xids lie strictly between those
        of the calls read before and after it, in xid order from the first."""
        a, b = st.counted(st.before), st.counted(st.after)
        if a < 0 or b < 0:
            return []
        lo = np.searchsorted(self.conn, st.conn, "left")
        hi = np.searchsorted(self.conn, st.conn, "right")
        rel = (counting(self.xid[lo:hi], st.little) - a) % XID_MOD
        inside = (rel > 0) & (rel < (b - a) % XID_MOD)
        order = np.argsort(rel[inside], kind="stable")
        return self.rows[lo:hi][inside][order].tolist()

    def late(self, st: _Stretch, a: int, k: int) -> list[int]:
        """Replies without call on the stretch's connection to xids the client
        counted before a (at most k before) answered after the stretch began:
        calls numbered before a but sent after it (the Linux client numbers a
        call when it starts and sends it when it gets a slot: two racing
        calls can leave in the other order)."""
        if not st.records or not self.reply_at:
            return []
        first = st.records[0][0]
        out = []
        for d in range(1, k + 1):
            x = st.counted((a - d) % XID_MOD)
            i = self.by_xid.get((st.conn, x), -1)
            if i >= 0 and self.reply_at.get(i, -1) > first:
                out.append(x)
        return out


def _reordered(st: _Stretch, orphans: _Orphans, xids: list[int], a: int) -> list[int]:
    """``xids`` (a stretch's records numbered from a, as the client counts) with
    the calls numbered before a but sent in the stretch (``_Orphans.late``) in
    their places: the records take the replies' order, each reply the answer to
    one of them (a server answers one connection's calls in the order they
    came).  ``xids`` unchanged unless every such call has its reply."""
    k = len(xids)
    late = orphans.late(st, a, k)
    if not late:
        return xids
    chosen = late + [x for x in xids if x >= 0][: k - len(late)]
    rows = [orphans.by_xid.get((st.conn, x), -1) for x in chosen]
    if len(chosen) != k or min(rows) < 0:
        return xids
    when = [orphans.reply_at.get(i, -1) for i in rows]
    if min(when) < 0:
        return xids
    return [x for _, x in sorted(zip(when, chosen, strict=True))]


def _record_xids(st: _Stretch, orphans: _Orphans) -> tuple[list[int], bool]:
    """The xids of a call stretch's records, in order (-1: unknown), and whether
    the client's numbering is certain there (both neighbours' xids fit the
    count, or a record's xid is that of a reply without call)."""
    assert st.records is not None
    k = len(st.records)
    a, b = st.counted(st.before), st.counted(st.after)  # (counted as the client counts)
    if a >= 0 and b >= 0 and (b - a) % XID_MOD == k and st.after_frame > st.records[-1][1]:
        # the last record is the next call's own, its mark read later in a
        # re-send that began with it (a loss): the records before it are a+1 ..
        # (or one numbered before a but sent after it: _reordered)
        xids = [st.counted((a + 1 + i) % XID_MOD) for i in range(k - 1)] + [-1]
        xids = _reordered(st, orphans, xids, a)
    elif a >= 0 and (b < 0 or (b - a - 1) % XID_MOD == k):
        xids = [st.counted((a + 1 + i) % XID_MOD) for i in range(k)]
        if b < 0:
            xids = _reordered(st, orphans, xids, a)
    elif b >= 0 and a < 0:
        xids = [st.counted((b - k + i) % XID_MOD) for i in range(k)]
    else:
        rows = orphans.between(st)
        if len(rows) != k:
            return [-1] * k, False
        return [int(orphans.xid_at[i]) for i in rows], False
    sure = a >= 0 and b >= 0
    sure |= any((st.conn, x) in orphans.by_xid for x in xids)
    return xids, sure


def _record_rows(
    tx: pd.DataFrame, calls: list[_Stretch], call_pos: np.ndarray, reply_pos: np.ndarray
) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, np.ndarray]:
    """Rows for the unread call records whose reply was not read either, where
    the client's numbering gives their xids: each like the call read before
    its stretch (the records are as long as it), without a reply yet; with the
    positions extended (-1) and the mask of the rows added."""
    none = np.zeros(len(tx), bool)
    split = [st for st in calls if st.records is not None]
    if not split:
        return tx, call_pos, reply_pos, none
    n_calls = tx["n_calls"].to_numpy("int64")
    conn = tx["conn"].astype("Int64").fillna(-1).to_numpy("int64")
    xid = tx["xid"].to_numpy("int64")
    reply = tx["t_reply_ns"].astype("Int64").fillna(-1).to_numpy("int64")
    orphans = _Orphans(conn, xid, np.flatnonzero(n_calls == 0), reply)
    called = {(k, x): i for i, (k, x) in enumerate(zip(conn.tolist(), xid.tolist(), strict=True))
              if n_calls[i] > 0}  # fmt: skip
    template, new_xids = [], []
    for st in split:
        xids, sure = _record_xids(st, orphans)
        model = called.get((st.conn, st.before), called.get((st.conn, st.after), -1))
        if not sure or model < 0:
            continue
        for x, (_ts, _frame, _length, dur, _ack) in zip(xids, st.records or [], strict=True):
            if dur < -1:  # its first byte not captured: no call to show
                continue
            if x >= 0 and (st.conn, x) not in orphans.by_xid and (st.conn, x) not in called:
                template.append(model)
                new_xids.append(x)
    if not template:
        return tx, call_pos, reply_pos, none
    new = tx.iloc[template].reset_index(drop=True)
    keep = {*("client", "client_port", "server", "server_port", "transport", "conn")}
    keep |= {*("prog", "program", "vers", "proc", "op", "ops", "auth", "gss_service", "minor")}
    for name in new.columns:
        if name not in keep:
            new[name] = pd.Series([None] * len(new), dtype="object")
    new["xid"] = np.array(new_xids, "int64")
    for name in ("n_calls", "n_replies", "write_bytes", "read_bytes"):
        new[name] = 0
    new["inferred"] = ""
    both = pd.concat([tx, new], ignore_index=True)
    for name in tx.columns:  # the table's types again (categories united)
        dtype = tx[name].dtype
        if isinstance(dtype, pd.CategoricalDtype):
            both[name] = both[name].astype(object).astype("category")
        elif name == "call_times_ns":
            both[name] = both[name].astype(object)
        else:
            both[name] = both[name].astype(dtype)
    k = len(template)
    added = np.r_[none, np.ones(k, bool)]
    minus = np.full(k, -1, "int64")
    return both, np.r_[call_pos, minus], np.r_[reply_pos, minus], added


def _calls_from_records(c: _Columns, stretches: list[_Stretch]) -> None:
    """Rows without a call paired with the unread records of their connection's
    calls (the module's docstring): the call's times and length from the record."""
    n_calls, conn, xid = c.int("n_calls"), c.int("conn"), c.int("xid")
    orphans = _Orphans(conn, xid, np.flatnonzero(n_calls == 0), c.int("t_reply_ns"))
    if not orphans.by_xid:
        return
    pairs: list[tuple[int, tuple[int, int, int, int, int]]] = []
    for st in stretches:
        if st.records is None:
            continue
        xids, _ = _record_xids(st, orphans)
        for x, record in zip(xids, st.records, strict=True):
            i = orphans.by_xid.pop((st.conn, x), -1) if x >= 0 else -1
            if i >= 0:
                pairs.append((i, record))
    pairs += _confirmed_prefixes(c, stretches, orphans)
    if not pairs:
        return
    mask = np.zeros(c.n, bool)
    untimed = np.zeros(c.n, bool)  # a record whose first byte was not captured: its length
    start, end, length, frame, ack = (np.zeros(c.n, "int64") for _ in range(5))
    for i, (ts, fr, n, dur, acked) in pairs:
        # (its last byte not captured: its end taken as its first segment's time)
        (mask if dur >= -1 else untimed)[i] = True
        start[i], end[i], length[i], frame[i], ack[i] = ts, ts + max(dur, 0), n, fr, acked
    c.set("call_bytes", untimed, length - 4)
    c.flag("bytes_stretch", untimed)
    for name, values in (
        ("t_call_ns", start),
        ("t_call_last_ns", start),
        ("t_call_end_ns", end),
        ("t_call_last_end_ns", end),
        ("call_bytes", length - 4),
        ("call_frame_first", frame),
        ("n_calls", 1),
        ("call_conns", 1),
        ("call_truncated", True),
    ):
        c.set(name, mask, values)
    if "t_call_acked_ns" in c.tx:  # (the receiver's ACK of the record, where seen)
        c.set("t_call_acked_ns", mask & (ack >= 0), ack)
    _latencies(c, mask & (c.int("t_reply_ns") >= 0))
    c.flag("call_record", mask)


def _confirmed_prefixes(
    c: _Columns, stretches: list[_Stretch], orphans: _Orphans
) -> list[tuple[int, tuple[int, int, int, int, int]]]:
    """Replies without call paired with the records a stretch's prefix predicts
    (``_Stretch.prefix``), one by one from the call read before it (xid a), as
    far as the next xid the client counted, a+1, a+2 ..., is a reply without
    call to a WRITE of the count the connection's calls of that record length
    carry: a call of another length (a shorter WRITE, a GETATTR) ends
    the prefix, and what follows stays to the stretch's share
    (``_bytes_from_stretches``)."""
    conn, writes = c.int("conn"), c.is_write()
    count = np.where(c.int("count") >= 0, c.int("count"), c.int("reply_count"))
    # (a call read whose operations the snaplen cut is named a WRITE by a later
    # step: its length and its reply's count are enough here)
    sized = (c.int("n_calls") > 0) & ~c.flagged("call_record") & (count >= 0)
    count_of = {  # (connection, record length) -> a WRITE's count
        (int(k), int(n) + 4): int(x)
        for k, n, x in zip(conn[sized], c.int("call_bytes")[sized], count[sized], strict=True)
    }
    reply_count = c.int("reply_count")
    out = []
    for st in stretches:
        if not st.prefix or st.before < 0:
            continue
        want = count_of.get((st.conn, st.prefix[0][2]), -1)
        a = st.counted(st.before)
        for k, record in enumerate(st.prefix):
            x = st.counted((a + 1 + k) % XID_MOD)
            i = orphans.by_xid.get((st.conn, x), -1)
            if want < 0 or i < 0 or not writes[i] or reply_count[i] != want:
                break
            del orphans.by_xid[(st.conn, x)]
            out.append((i, record))
            st.taken += record[2]
    return out


def _latencies(c: _Columns, rows: np.ndarray) -> None:
    """The latency columns of ``rows`` from their call and reply times."""
    t_reply = c.int("t_reply_ns")
    for name, start in (
        ("latency_ns", "t_call_ns"),
        ("latency_last_ns", "t_call_last_end_ns"),
        ("srt_ns", "t_call_end_ns"),
    ):
        c.set(name, rows, t_reply - c.int(start))


def _replies_from_records(c: _Columns, stretches: list[_Stretch]) -> None:
    """Calls read (or inferred) without a reply paired with the unread records
    of their connection's replies: each record, in time order, answers the
    earliest such call sent before it whose operation's replies on the
    connection are as long as the record."""
    n_calls, n_replies = c.int("n_calls"), c.int("n_replies")
    conn, t_call = c.int("conn"), c.int("t_call_ns")
    reply_bytes = c.int("reply_bytes")
    waiting = np.flatnonzero((n_calls > 0) & (n_replies == 0) & (t_call >= 0))
    split = [st for st in stretches if st.records is not None]
    if not len(waiting) or not split:
        return
    op = c.text("op")
    answered = (n_replies > 0) & (reply_bytes >= 0)
    usual = (
        pd.DataFrame({"conn": conn[answered], "op": op[answered], "n": reply_bytes[answered]})
        .groupby(["conn", "op"])["n"]
        .agg(lambda s: _most_common(s.to_numpy("int64")))
    )
    by_conn: dict[int, list[int]] = {}
    for i in waiting[np.argsort(t_call[waiting], kind="stable")]:
        by_conn.setdefault(int(conn[i]), []).append(int(i))
    mask = np.zeros(c.n, bool)
    first, last, length = (np.zeros(c.n, "int64") for _ in range(3))
    for st in split:
        calls = by_conn.get(st.conn, [])
        assert st.records is not None
        for ts, _frame, n, dur, _ack in st.records:
            if dur < 0:  # its end time not captured
                continue
            for j, i in enumerate(calls):
                if t_call[i] >= ts:
                    break
                if usual.get((st.conn, op[i]), -1) == n - 4:
                    mask[i] = True
                    first[i], last[i], length[i] = ts, ts + dur, n - 4
                    del calls[j]
                    break
    for name, values in (
        ("t_reply_first_ns", first),
        ("t_reply_ns", last),
        ("reply_bytes", length),
        ("n_replies", 1),
    ):
        c.set(name, mask, values)
    _latencies(c, mask)
    c.flag("reply_record", mask)
