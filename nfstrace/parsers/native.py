"""The parser: the Rust core (``native/``, the ``nfstrace._native``
extension) read through, its columns turned into the messages and events
tables (``nfstrace.schema``) and ``ParseStats``.

Rust walks the capture through the RPC header and the NFS fields and hands
back columns (numbers, and ids into tables of distinct values), every
message's NFS fields decoded there; this module names them from the one Python
truth (the procedure, NFSv4 and callback operation names and the flavour names
of ``nfstrace.protocol``).  The tests check it against tshark, dpkt,
crafted captures of known contents and golden records of its tables
(tests/test_native.py).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any, BinaryIO

import numpy as np
import pandas as pd

from nfstrace.combining import typed
from nfstrace.config import ParseLimits
from nfstrace.errors import CaptureError
from nfstrace.nfs_fields import (
    DECODE_ENCRYPTED,
    DECODE_NONE,
    DECODE_OK,
    DECODE_PARTIAL,
    DECODE_TRUNCATED,
)
from nfstrace.parsers import ahead, backends, capture
from nfstrace.parsers.capture import CaptureInfo
from nfstrace.parsers.stats import DirectionFacts, ParseStats
from nfstrace.parsers.tables import addr_text, events_frame, messages_frame
from nfstrace.protocol.nfs4 import cb_compound_names, compound_names
from nfstrace.protocol.procedures import procedure_name
from nfstrace.protocol.rpc import auth_name, gss_service_name
from nfstrace.schema import EVENT_DTYPES, MESSAGE_DTYPES

_native = backends.native_extension()

# Codes of the coded columns: native/generate_tables.py writes them into
# native/src/tables.rs for the Rust parser, which writes the columns with them
_TRANSPORT = np.array(["udp", "tcp"], dtype=object)
_MSGTYPE = np.array(["call", "reply"], dtype=object)
_REPLY_STAT = np.array(["", "accepted", "denied"], dtype=object)
_DECODE = np.array(
    [DECODE_NONE, DECODE_OK, DECODE_PARTIAL, DECODE_TRUNCATED, DECODE_ENCRYPTED], dtype=object
)
KIND_NAME, KIND_COMPOUND, KIND_CB_COMPOUND = 0, 1, 2


class _Decompressed:
    """A compressed capture for the Rust reader: calling it (re)opens the file
    and returns its ``read(n)`` over the decompressing stream, which stops
    (with the reason kept) where the compressed data is damaged, as the Python
    reader does.  The file is closed at its end, or when opened again: the Rust
    reader opens each file when its first frame is due."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.stream: BinaryIO | None = None
        self.error = ""
        self._taken = 0

    def __call__(self) -> Callable[[int], bytes]:
        self.close()
        self.stream, _ = capture.open_stream(self.path)
        self.error = ""
        return self.read

    def taken(self) -> int:
        """Bytes taken from the file on disk so far (packed)."""
        return self._taken if self.stream is None else capture.file_bytes_read(self.stream, 0)

    def read(self, n: int) -> bytes:
        if self.error or self.stream is None:
            return b""
        data, self.error = capture.read_up_to(self.stream, n, compressed=True)
        if not data:
            self.close()
        return data

    def close(self) -> None:
        if self.stream is not None:
            self._taken = capture.file_bytes_read(self.stream, 0)
            self.stream.close()
            self.stream = None


def _check_readable(path: str, limits: ParseLimits) -> None:
    """Raise the CaptureError the Python reader raises for this file, if any:
    one truth for what makes a file unusable."""
    frames = capture.read_frames(
        path, 0, CaptureInfo(path=path), limits.max_frame_bytes, capture.MIN_CHUNK
    )
    try:
        next(frames, None)
    finally:
        frames.close()


class _Strings:
    """A string column as distinct values and one id per row (Rust's form);
    made a category column (each distinct value once, a small code per row),
    never per-row objects."""

    def __init__(self, values: list[str], ids: np.ndarray) -> None:
        self.values = values
        self.ids = ids

    def category(self) -> pd.Categorical:
        """The values used, sorted (as astype("category") orders them), and
        each row's code among them."""
        used = np.flatnonzero(np.bincount(self.ids, minlength=len(self.values)))
        labels = sorted({self.values[i] for i in used})
        code = {label: k for k, label in enumerate(labels)}
        recode = np.full(len(self.values), -1, dtype=_code_dtype(len(labels)))
        recode[used] = [code[self.values[i]] for i in used]
        return pd.Categorical.from_codes(recode[self.ids], categories=labels, validate=False)


def _code_dtype(n: int) -> type[np.signedinteger]:
    """The integer type pandas gives the codes of n categories."""
    for t in (np.int8, np.int16, np.int32):
        if n < np.iinfo(t).max:
            return t
    return np.int64


def _addr_texts(raw: list[bytes]) -> list[str]:
    return [
        socket.inet_ntop(socket.AF_INET if len(a) == 4 else socket.AF_INET6, a) if a else ""
        for a in raw
    ]


def _texts(raw: list[bytes], convert: Callable[[bytes], str]) -> list[str]:
    return [convert(b) if b else "" for b in raw]


def _utf8(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def _ints(cols: dict, name: str, dtype: str) -> np.ndarray:
    return np.frombuffer(cols[name], dtype=dtype)


def _category(codes: np.ndarray, name: Callable[[int], str]) -> pd.Categorical:
    """A category column from integer codes, each distinct code named once;
    categories sorted, as astype("category") makes them."""
    inverse, values = pd.factorize(codes)  # (hashed: np.unique's sort took 0.2 s per 1M rows)
    labels = [name(int(v)) for v in values]
    order = sorted(range(len(labels)), key=labels.__getitem__)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return pd.Categorical.from_codes(rank[inverse], categories=[labels[i] for i in order])


def _named(table: np.ndarray) -> Callable[[int], str]:
    return lambda code: table[code]


# How the op and ops of a COMPOUND row are named from its operation list, by nfs_kind
_COMPOUND_NAMES: dict[int, Callable[[list[int]], tuple[str, str]]] = {
    KIND_COMPOUND: compound_names,
    KIND_CB_COMPOUND: cb_compound_names,
}


def _nfs_columns(cols: dict, tables: dict, prog, vers, proc) -> dict[str, object]:
    """The NFS_FIELDS columns."""
    kind = _ints(cols, "nfs_kind", "u1")
    n = len(kind)
    named = kind == KIND_NAME
    # op: procedure names (per distinct prog/vers/proc), then COMPOUND main ops
    op_ids = np.zeros(n, dtype=np.int64)
    op_values: list[str] = []
    if named.any():
        triples = np.stack([prog[named], vers[named], proc[named]], axis=1)
        uniq, inverse = np.unique(triples, axis=0, return_inverse=True)
        op_values = [procedure_name(int(a), int(b), int(c)) for a, b, c in uniq]
        op_ids[named] = inverse.reshape(-1)
    # COMPOUND and CB_COMPOUND: op and ops named from the row's operation list
    list_ids = _ints(cols, "ops", "u4").astype(np.int64)
    ops_ids = np.zeros(n, dtype=np.int64)
    ops_values = [""]
    for code, names_of in _COMPOUND_NAMES.items():
        rows = kind == code
        if not rows.any():
            continue
        pairs = [names_of(list(lst)) for lst in tables["op_lists"]]
        op_ids[rows] = len(op_values) + list_ids[rows]
        op_values += [p[0] for p in pairs]
        ops_ids[rows] = len(ops_values) + list_ids[rows]
        ops_values += [p[1] for p in pairs]
    statuses = [" ".join(map(str, s)) for s in tables["status_lists"]]
    return {
        "op": _Strings(op_values, op_ids),
        "ops": _Strings(ops_values, ops_ids),
        "op_status": _Strings(statuses, _ints(cols, "op_status", "u4")),
        "nfs_status": _ints(cols, "nfs_status", "i8"),
        "fh": _Strings(_texts(tables["fhs"], bytes.hex), _ints(cols, "fh", "u4")),
        "name": _Strings(_texts(tables["names"], _utf8), _ints(cols, "name", "u4")),
        "offset": _ints(cols, "offset", "i8"),
        "count": _ints(cols, "count", "i8"),
        "stable": _ints(cols, "stable", "i4"),
        "committed": _ints(cols, "committed", "i4"),
        "verifier": _Strings(_texts(tables["verifiers"], bytes.hex), _ints(cols, "verifier", "u4")),
        "eof": _ints(cols, "eof", "i4"),
        "session": _Strings(_texts(tables["sessions"], bytes.hex), _ints(cols, "session", "u4")),
        "slot": _ints(cols, "slot", "i8"),
        "seqid": _ints(cols, "seqid", "i8"),
        "minor": _ints(cols, "minor", "i4"),
        "nfs_decode": _ints(cols, "nfs_decode", "u1"),
    }


def _acked(cols: dict) -> np.ndarray:
    """messages.acked_ns: -1, then the ACK time of each row the parser saw acknowledged."""
    acked = np.full(len(_ints(cols, "ts_first_ns", "i8")), -1, "int64")
    acked[_ints(cols, "acked_row", "u8").astype("int64")] = _ints(cols, "acked_ts", "i8")
    return acked


def _messages(cols: dict, tables: dict) -> pd.DataFrame:
    if not cols["ts_first_ns"]:
        return messages_frame([])  # the empty table, typed (tables.messages_frame)
    addrs = _addr_texts(tables["addrs"])
    prog = _ints(cols, "prog", "i8")
    # vers and proc come unsigned (names are made from the real numbers); the
    # table's int32 columns wrap them (numpy's astype, here: a frame's is slower)
    vers = _ints(cols, "vers", "i8")
    proc = _ints(cols, "proc", "i8")
    data: dict[str, Any] = {
        "ts_first_ns": _ints(cols, "ts_first_ns", "i8"),
        "ts_last_ns": _ints(cols, "ts_last_ns", "i8"),
        "frame_first": _ints(cols, "frame_first", "i8"),
        "frame_last": _ints(cols, "frame_last", "i8"),
        "src": _Strings(addrs, _ints(cols, "src", "u4")),
        "sport": _ints(cols, "sport", "i4"),
        "dst": _Strings(addrs, _ints(cols, "dst", "u4")),
        "dport": _ints(cols, "dport", "i4"),
        "transport": _ints(cols, "transport", "u1"),
        "conn": _ints(cols, "conn", "i8"),
        "xid": _ints(cols, "xid", "i8"),
        "msgtype": _ints(cols, "msgtype", "u1"),
        "prog": prog,
        "vers": vers.astype(MESSAGE_DTYPES["vers"]),
        "proc": proc.astype(MESSAGE_DTYPES["proc"]),
        "auth": _ints(cols, "auth", "i8"),
        "auth_uid": _ints(cols, "auth_uid", "i8"),
        "auth_gid": _ints(cols, "auth_gid", "i8"),
        "auth_machine": _Strings(
            _texts(tables["machines"], _utf8), _ints(cols, "auth_machine", "u4")
        ),
        "gss_proc": _ints(cols, "gss_proc", "i4"),
        "gss_service": _ints(cols, "gss_service", "i8"),
        "reply_stat": _ints(cols, "reply_stat", "u1"),
        "accept_stat": _ints(cols, "accept_stat", "i4"),
        "reject_stat": _ints(cols, "reject_stat", "i4"),
        "body_offset": _ints(cols, "body_offset", "i4"),
        "rpc_len": _ints(cols, "rpc_len", "i8"),
        "captured_len": _ints(cols, "captured_len", "i8"),
        "record_frags": _ints(cols, "record_frags", "i4"),
        "frames": _ints(cols, "frames", "i4"),
        "ip_frags": _ints(cols, "ip_frags", "i4"),
        "truncated": _ints(cols, "truncated", "u1").astype(bool),
        "acked_ns": _acked(cols),
    }
    data.update(_nfs_columns(cols, tables, prog, vers, proc))
    # Rows in (ts_first_ns, frame_first) order, ties in arrival order, as the
    # reference sorts its table: permuted here, column by column, before pandas.
    order: np.ndarray | None = np.lexsort((data["frame_first"], data["ts_first_ns"]))
    if order is not None and (order == np.arange(len(order))).all():
        order = None
    for name, col in data.items():
        if isinstance(col, _Strings):
            if order is not None:
                col.ids = col.ids[order]
            data[name] = col.category()
        elif order is not None:
            data[name] = col[order]
    for name, namer in _CATEGORIES.items():  # coded columns named once per code
        data[name] = _category(data[name], namer)
    # columns as built (views of Rust's buffers where their type is the table's)
    df = pd.DataFrame(data, columns=list(MESSAGE_DTYPES), copy=False)
    return typed(df, MESSAGE_DTYPES)


# The category columns: how each code is named
_CATEGORIES: dict[str, Callable[[int], str]] = {
    "transport": _named(_TRANSPORT),
    "msgtype": _named(_MSGTYPE),
    "auth": lambda f: auth_name(f) if f >= 0 else "",
    "gss_service": lambda s: gss_service_name(s) if s >= 0 else "",
    "reply_stat": _named(_REPLY_STAT),
    "nfs_decode": _named(_DECODE),
}


def _events(cols: dict, tables: dict) -> pd.DataFrame:
    if not cols["ts_ns"]:
        return events_frame([])
    addrs = _addr_texts(tables["addrs"])
    data: dict[str, Any] = {
        "ts_ns": _ints(cols, "ts_ns", "i8"),
        "frame": _ints(cols, "frame", "i8"),
        "conn": _ints(cols, "conn", "i8"),
        "src": _Strings(addrs, _ints(cols, "src", "u4")),
        "sport": _ints(cols, "sport", "i4"),
        "dst": _Strings(addrs, _ints(cols, "dst", "u4")),
        "dport": _ints(cols, "dport", "i4"),
        "kind": _Strings(list(cols["kind_names"]), _ints(cols, "kind", "u1")),
        "seq": _ints(cols, "seq", "i8"),
        "length": _ints(cols, "length", "i8"),
        "duration_ns": _ints(cols, "duration_ns", "i8"),
    }
    order = np.lexsort((data["frame"], data["ts_ns"]))  # stable: by time, then frame
    for name, col in data.items():
        if isinstance(col, _Strings):
            col.ids = col.ids[order]
            data[name] = col.category()
        else:
            data[name] = col[order]
    df = pd.DataFrame(data, columns=list(EVENT_DTYPES), copy=False)
    return typed(df, EVENT_DTYPES)


def _direction(src: bytes, dst: bytes, f: list[int], texts: dict[bytes, str]) -> DirectionFacts:
    return DirectionFacts.of(addr_text(src, texts), addr_text(dst, texts), f)


def _stats(
    out: dict, paths: list[str], compressions: list[str], readers: list[_Decompressed | None]
) -> ParseStats:
    files = []
    for path, compression, f, reader in zip(
        paths, compressions, out["files"], readers, strict=True
    ):
        info = CaptureInfo(path=path, compression=compression)
        capture.take_facts(info, f)
        if reader is not None and reader.error:  # as capture.read_frames notes it
            info.note("decompression", info.bytes, detail=reader.error)
        info.finish()
        files.append(info)
    s = dict(out["stats"])
    texts: dict[bytes, str] = {}
    directions = [_direction(a, b, f, texts) for a, b, f in s.pop("directions")]
    return ParseStats(files=files, directions=directions, **s)


def parse(
    paths: list[str],
    limits: ParseLimits | None = None,
    progress: capture.Progress | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, ParseStats]:
    """Read capture files; return (messages, transport events, stats)."""
    limits = limits or ParseLimits()
    readers: list[_Decompressed | None] = []
    compressions: list[str] = []
    try:
        for path in paths:
            _check_readable(path, limits)
            stream, compression = capture.open_stream(path)
            stream.close()  # opened again when read: by Rust itself, or through _Decompressed
            compressions.append(compression)
            readers.append(_Decompressed(path) if compression else None)
        packed = [r for r in readers if r is not None]

        def tick(frames: int, plain: int) -> None:  # Rust counts the files it reads itself
            assert progress is not None
            progress(frames, plain + sum(r.taken() for r in packed))

        try:
            settings = ahead.native_settings(limits)
            out = ahead.take(paths, readers, settings, progress)  # begun before the imports
            if out is None:
                out = _native.parse(paths, readers, settings, progress and tick)
        except ValueError as e:  # "<file index>:<why>": not readable as a capture
            index, _, why = str(e).partition(":")
            raise CaptureError(why, paths[int(index)] if index.isdigit() else None) from None
    finally:
        for r in readers:
            if r is not None:
                r.close()
    stats = _stats(out, paths, compressions, readers)
    tables = out["tables"]
    return _messages(out["messages"], tables), _events(out["events"], tables), stats
