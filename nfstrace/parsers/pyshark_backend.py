"""The pyshark backend (``--parser pyshark``): Wireshark's dissectors, run by
tshark, turned into the messages table.

How tshark is run (and why not through ``pyshark.FileCapture``):
FileCapture builds a Python object tree per packet from tshark's JSON/PDML,
which carries every decoded field, including the hex of every WRITE payload
(tcp.payload, tcp.reassembled.data, nfs.data: several times the capture's
size).  On a 1 MB sample that took 2.3 s against 0.5 s for one ``-T fields``
run.  So this backend uses pyshark's tshark lookup
(``pyshark.tshark.tshark.get_process_path``: its config file, then PATH) and
runs tshark once per capture with ``-T fields`` and only the fields it maps,
for every frame (times of the frames a message spans come from the same run).
Frames holding more than one RPC message (several records in one segment)
cannot be split from flat field lists, so those frames alone are dissected
again as JSON (``--no-duplicate-keys``: one subtree per message).

tshark options: two-pass (``-2``: reassembly across frames, replies named
from their calls), RPC on ports 2049 and 111 by ``-d``, on any other port by
the RPC heuristic dissectors (``--enable-heuristic rpc_tcp``/``rpc_udp``).

Several files, or files tshark cannot read (bzip2, xz), are first written as
one merged pcapng (``mergecap``, which comes with tshark).

What tshark does not expose is derived or left at its default, each listed in
``NOT_FROM_TSHARK``; tests/test_backends.py asserts every difference.
"""

from __future__ import annotations

import json
import lzma
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import pandas as pd

from nfstrace.config import ParseLimits
from nfstrace.errors import CaptureError, UsageError
from nfstrace.nfs_fields import DECODE_OK, DECODE_TRUNCATED, FIELD_NAMES, NFS_DEFAULTS
from nfstrace.parsers.capture import CaptureInfo, Progress, open_stream, read_frames
from nfstrace.parsers.stats import ParseStats
from nfstrace.parsers.tables import ROW_COLUMNS, events_frame, messages_frame
from nfstrace.protocol import nfs3, rpc
from nfstrace.protocol import nfs4 as nfs4_protocol
from nfstrace.protocol.procedures import procedure_name


class TsharkMissingError(UsageError):
    """The pyshark backend was chosen but tshark is not installed."""


class TsharkFailedError(CaptureError):
    """tshark ran but could not read the capture."""


# Which message columns tshark does not give, and what this backend puts there.
NOT_FROM_TSHARK = {
    "captured_len": "rpc_len: tshark does not say how many bytes of a message were captured",
    "truncated": "from the frames' captured vs wire lengths (tshark's [Packet size limited])",
    "body_offset": "computed from the credential and verifier lengths tshark reports",
    "nfs_decode": "'ok' when tshark dissected the NFS layer, '' otherwise",
    "acked_ns": "-1: tshark does not say which ACK covers a message's last byte",
}
# ... and the transaction columns made from those alone.
TRANSACTIONS_NOT_FROM_TSHARK = {"t_call_acked_ns": "missing (from acked_ns)"}

TSHARK_OPTIONS = (
    "-n",
    "-2",
    *(
        a
        for p in sorted(rpc.RPC_WELL_KNOWN_PORTS)
        for a in ("-d", f"tcp.port=={p},rpc", "-d", f"udp.port=={p},rpc")
    ),
    "--enable-heuristic",
    "rpc_tcp",
    "--enable-heuristic",
    "rpc_udp",
)

FRAME_FIELDS = (
    "frame.number",
    "frame.time_epoch",
    "frame.len",
    "frame.cap_len",
    "ip.src",
    "ip.dst",
    "ipv6.src",
    "ipv6.dst",
    "tcp.srcport",
    "tcp.dstport",
    "tcp.stream",
    "udp.srcport",
    "udp.dstport",
    "udp.stream",
    "udp.length",
    "tcp.segment",
    "ip.fragment",
    "ipv6.fragment",
    "rpc.fragment",
)
MESSAGE_FIELDS = (
    "rpc.xid",
    "rpc.msgtyp",
    "rpc.program",
    "rpc.programversion",
    "rpc.procedure",
    "rpc.fraglen",
    "rpc.reassembled.length",
    "rpc.auth.flavor",
    "rpc.auth.length",
    "rpc.auth.uid",
    "rpc.auth.gid",
    "rpc.auth.machinename",
    "rpc.authgss.procedure",
    "rpc.authgss.service",
    "rpc.replystat",
    "rpc.state_accept",
    "rpc.state_reject",
    "nfs.status",
    "nfs.nfsstat4",
    "nfs.opcode",
    "nfs.minorversion",
    "nfs.fhandle",
    "nfs.name",
    "nfs.offset3",
    "nfs.count3",
    "nfs.write.stable",
    "nfs.write.committed",
    "nfs.verifier",
    "nfs.read.eof",
    "nfs.offset4",
    "nfs.count4",
    "nfs.stable_how4",
    "nfs.write.data_length",
    "nfs.read.data_length",
    "nfs.verifier4",
    "nfs.eof",
    "nfs.session_id4",
    "nfs.slotid",
    "nfs.seqid",
    "nfs.pathname.component",
    "_ws.short",
)
ALL_FIELDS = FRAME_FIELDS + MESSAGE_FIELDS
# Separates the values of one field within a frame (never found inside a value).
AGGREGATOR = "\x1f"

Fields = dict[str, list[str]]


# ---- running tshark ------------------------------------------------------------------


def tshark_path() -> str:
    """tshark, found the way pyshark finds it; TsharkMissingError if absent."""
    from nfstrace.parsers.backends import TSHARK_INSTALL_HINT
    from nfstrace.parsers.backends import tshark_path as find

    path = find()
    if path is None:
        raise TsharkMissingError(
            f"the pyshark parser needs tshark, which was not found: {TSHARK_INSTALL_HINT}"
        )
    return path


def _run(cmd: list[str]) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace", check=False)
    if proc.returncode != 0:
        err = " ".join(
            line for line in proc.stderr.splitlines() if "Running as user" not in line
        ).strip()
        raise TsharkFailedError(f"tshark failed: {err or 'exit status ' + str(proc.returncode)}")
    return proc.stdout


def frame_fields(tshark: str, path: str) -> Iterator[Fields]:
    """Every frame's values of ALL_FIELDS (each field: its values in order)."""
    cmd = [tshark, *TSHARK_OPTIONS, "-r", path, "-T", "fields"]
    cmd += ["-E", "occurrence=a", "-E", f"aggregator={AGGREGATOR}", "-E", "separator=\t"]
    for name in ALL_FIELDS:
        cmd += ["-e", name]
    for line in _run(cmd).splitlines():
        values = line.split("\t")
        yield {name: v.split(AGGREGATOR) for name, v in zip(ALL_FIELDS, values, strict=False) if v}


def _leaves(node: object, out: Fields) -> None:
    """Collect the dotted-name leaves of a JSON subtree, in order."""
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, str) and "." in key:
                out.setdefault(key, []).append(value)
            elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                if "." in key:
                    out.setdefault(key, []).extend(value)
            else:
                _leaves(value, out)
    elif isinstance(node, list):
        for item in node:
            _leaves(item, out)


def split_messages(tshark: str, path: str, frames: list[int]) -> dict[int, list[Fields]]:
    """Per frame holding several RPC messages: each message's own fields."""
    if not frames:
        return {}
    wanted = ",".join(map(str, frames))
    cmd = [tshark, *TSHARK_OPTIONS, "-r", path, "-Y", f"frame.number in {{{wanted}}}"]
    cmd += ["-T", "json", "--no-duplicate-keys", "-J", "frame rpc nfs"]
    out: dict[int, list[Fields]] = {}
    for pkt in json.loads(_run(cmd) or "[]"):
        layers = pkt["_source"]["layers"]
        number = int(_first_leaf(layers.get("frame", {}), "frame.number"))
        rpcs = _as_list(layers.get("rpc"))
        nfss = _as_list(layers.get("nfs"))
        messages = []
        for r in rpcs:
            f: Fields = {}
            _leaves(r, f)
            # NFS layers follow their RPC layers in order; other programs have none
            if f.get("rpc.program", [""])[0] == str(rpc.NFS_PROGRAM) and nfss:
                _leaves(nfss.pop(0), f)
            messages.append(f)
        out[number] = messages
    return out


def _as_list(v: object) -> list:
    return v if isinstance(v, list) else [] if v is None else [v]


def _first_leaf(node: dict, name: str) -> str:
    f: Fields = {}
    _leaves(node, f)
    return f.get(name, ["0"])[0]


# ---- capture files tshark reads --------------------------------------------------------


@contextmanager
def _tshark_input(paths: list[str], tshark: str) -> Iterator[str]:
    """One file tshark can read: the capture itself, or a merged/decompressed copy."""
    with tempfile.TemporaryDirectory(prefix="nfstrace-tshark-") as tmp:
        readable = []
        for i, p in enumerate(paths):
            stream, compression = open_stream(p)
            with stream:
                if compression in ("bzip2", "xz"):  # tshark reads gzip itself
                    copy = os.path.join(tmp, f"{i}.pcap")
                    with open(copy, "wb") as out:
                        try:
                            shutil.copyfileobj(stream, out)
                        except (OSError, EOFError, lzma.LZMAError, ValueError) as e:
                            raise CaptureError(f"cannot decompress: {e}", p) from None
                    readable.append(copy)
                else:
                    readable.append(p)
        if len(readable) == 1:
            yield readable[0]
            return
        merged = os.path.join(tmp, "merged.pcapng")
        mergecap = shutil.which("mergecap") or os.path.join(os.path.dirname(tshark), "mergecap")
        _run([mergecap, "-w", merged, *readable])
        yield merged


# ---- tshark's fields -> message rows ---------------------------------------------------


def _int(f: Fields, name: str, default: int = -1, index: int = 0) -> int:
    v = f.get(name)
    if not v or len(v) <= index or v[index] == "":
        return default
    return int(v[index], 0)


def _hex(f: Fields, name: str, index: int = 0) -> str:
    v = f.get(name)
    if not v or len(v) <= index:
        return ""
    s = v[index].replace(":", "").lower()
    return s[2:] if s.startswith("0x") else s


def _pad4(n: int) -> int:
    return (n + 3) & ~3


def _body_offset(f: Fields, is_call: bool) -> int:
    lengths = [int(x) for x in f.get("rpc.auth.length", [])]
    if is_call:
        return 40 + _pad4(lengths[0]) + _pad4(lengths[1]) if len(lengths) >= 2 else -1
    if f.get("rpc.replystat", ["1"])[0] != "0" or not lengths:
        return -1
    accept = _int(f, "rpc.state_accept")
    return 24 + _pad4(lengths[0]) + (8 if accept == rpc.PROG_MISMATCH else 0)


def _nfs_fields(f: Fields, is_call: bool, prog: int, vers: int, proc: int) -> tuple:
    """NFS_FIELDS values from tshark's nfs.* fields (our decoders' meaning)."""
    out = dict(zip(FIELD_NAMES, NFS_DEFAULTS, strict=True))
    out["op"] = procedure_name(prog, vers, proc)
    if prog != rpc.NFS_PROGRAM or vers not in (2, 3, 4):
        return tuple(out.values())
    # tshark marks a dissection that ran out of captured bytes
    out["nfs_decode"] = DECODE_TRUNCATED if "_ws.short" in f else DECODE_OK
    if vers in (2, 3):
        if is_call:
            out["fh"] = _hex(f, "nfs.fhandle")
            out["name"] = f.get("nfs.name", [""])[0]
            out["offset"] = _int(f, "nfs.offset3")
            out["count"] = _int(f, "nfs.count3")
            out["stable"] = _int(f, "nfs.write.stable")
        else:
            out["nfs_status"] = _int(f, "nfs.status")
            ok = out["nfs_status"] == 0
            if ok and vers == 3 and (proc == nfs3.LOOKUP or proc in nfs3.NEW_OBJECT_PROCS):
                out["fh"] = _hex(f, "nfs.fhandle")  # the handle handed out
            out["count"] = _int(f, "nfs.count3") if ok else -1
            out["committed"] = _int(f, "nfs.write.committed") if ok else -1
            out["verifier"] = _hex(f, "nfs.verifier") if ok else ""
            if "nfs.read.eof" in f and ok:
                out["eof"] = int(f["nfs.read.eof"][0] in ("1", "True"))
        return tuple(out.values())
    if vers != 4:
        return tuple(out.values())
    ops = [int(x) for x in f.get("nfs.opcode", [])]
    if ops:
        names = nfs4_protocol.OPERATIONS
        main = nfs4_protocol.main_op(ops)
        out["op"] = (names.get(main) if main is not None else None) or f"op{main}"
        out["ops"] = " ".join(names.get(o) or f"op{o}" for o in ops)
    if nfs4_protocol.OP_SEQUENCE in ops:
        out["session"] = _hex(f, "nfs.session_id4")
        out["slot"] = _int(f, "nfs.slotid")
        out["seqid"] = _int(f, "nfs.seqid")
    # the last file handle: PUTFH's in a call, GETFH's in a reply (a reply's
    # GETATTR may list a filehandle attribute too: not ours to report)
    fhs = f.get("nfs.fhandle", [])
    if fhs and (is_call or nfs4_protocol.OP_GETFH in ops):
        out["fh"] = fhs[-1].replace(":", "").lower()
    if is_call:
        out["minor"] = _int(f, "nfs.minorversion")
        components = f.get("nfs.pathname.component", [])
        out["name"] = components[-1] if components else ""
        if nfs4_protocol.OP_WRITE in ops:
            out["offset"] = _int(f, "nfs.offset4")
            out["stable"] = _int(f, "nfs.stable_how4")
            lengths = f.get("nfs.write.data_length", [])
            out["count"] = sum(int(x) for x in lengths) if lengths else -1
        elif nfs4_protocol.OP_READ in ops or nfs4_protocol.OP_COMMIT in ops:
            out["offset"] = _int(f, "nfs.offset4")
            out["count"] = _int(f, "nfs.count4")
    else:
        statuses = f.get("nfs.nfsstat4", [])
        out["nfs_status"] = int(statuses[0]) if statuses else -1
        if len(statuses) > 1:
            out["op_status"] = " ".join(statuses[1:])
        if nfs4_protocol.OP_WRITE in ops:
            out["count"] = _int(f, "nfs.count4")
            out["committed"] = _int(f, "nfs.stable_how4")
        elif nfs4_protocol.OP_READ in ops:
            out["count"] = _int(f, "nfs.read.data_length")
            out["eof"] = _int(f, "nfs.eof")
        if nfs4_protocol.OP_WRITE in ops or nfs4_protocol.OP_COMMIT in ops:
            out["verifier"] = _hex(f, "nfs.verifier4")
    return tuple(out.values())


class _Rows:
    """Accumulates message rows; numbers connections in order of first use."""

    def __init__(self) -> None:
        self.rows: list[tuple] = []
        self.times: dict[int, int] = {}
        self.truncated_frames: set[int] = set()
        self.conns: dict[tuple[str, str], int] = {}

    def frame(self, f: Fields) -> int:
        number = int(f["frame.number"][0])
        sec, _, frac = f["frame.time_epoch"][0].partition(".")
        self.times[number] = int(sec) * 1_000_000_000 + int((frac + "000000000")[:9])
        if int(f["frame.cap_len"][0]) < int(f["frame.len"][0]):
            self.truncated_frames.add(number)
        for proto in ("tcp", "udp"):
            if f"{proto}.stream" in f:
                self.conns.setdefault((proto, f[f"{proto}.stream"][0]), len(self.conns) + 1)
        return number

    def message(self, number: int, frame: Fields, msg: Fields, first_of_frame: bool) -> None:
        if "rpc.xid" not in msg or "rpc.msgtyp" not in msg:
            return  # RPC recognised in a frame cut short: no header dissected
        is_tcp = "tcp.stream" in frame
        transport = "tcp" if is_tcp else "udp"
        if is_tcp:
            # a message reassembled from several segments is the first of its frame
            parts = (
                frame.get("tcp.segment", []) + frame.get("rpc.fragment", [])
                if first_of_frame
                else []
            )
            sport, dport = _int(frame, "tcp.srcport"), _int(frame, "tcp.dstport")
        else:
            parts = frame.get("ip.fragment") or frame.get("ipv6.fragment") or []
            sport, dport = _int(frame, "udp.srcport"), _int(frame, "udp.dstport")
        frames = sorted({int(x) for x in parts} | {number}) if parts else [number]
        conn = self.conns[(transport, frame[f"{transport}.stream"][0])]
        if "ip.src" in frame:
            family, src, dst = socket.AF_INET, frame["ip.src"][0], frame["ip.dst"][0]
        else:
            family, src, dst = socket.AF_INET6, frame["ipv6.src"][0], frame["ipv6.dst"][0]
        is_call = msg["rpc.msgtyp"][0] == "0"
        prog = _int(msg, "rpc.program")
        vers = _int(msg, "rpc.programversion")
        proc = _int(msg, "rpc.procedure")
        flavors = [int(x) for x in msg.get("rpc.auth.flavor", [])]
        flavor = flavors[0] if flavors else -1
        gss_service = ""
        if "rpc.authgss.service" in msg:
            gss_service = rpc.GSS_SERVICE_NAMES.get(int(msg["rpc.authgss.service"][0]), "")
        reply_stat = ""
        if not is_call:
            reply_stat = {"0": "accepted", "1": "denied"}.get(msg.get("rpc.replystat", [""])[0], "")
        if is_tcp:
            # a record of several fragments: tshark lists the frame of each
            fraglens = [int(x) for x in msg.get("rpc.fraglen", [])]
            rpc_len = _int(msg, "rpc.reassembled.length", sum(fraglens))
            record_frags = len(frame.get("rpc.fragment", ())) or max(len(fraglens), 1)
        else:
            rpc_len, record_frags = _int(frame, "udp.length") - 8, 1
        row = {
            "ts_first_ns": self.times[frames[0]],
            "ts_last_ns": self.times[number],
            "frame_first": frames[0],
            "frame_last": number,
            "src": socket.inet_pton(family, src),
            "sport": sport,
            "dst": socket.inet_pton(family, dst),
            "dport": dport,
            "transport": transport,
            "conn": conn,
            "xid": int(msg["rpc.xid"][0], 16),
            "msgtype": "call" if is_call else "reply",
            "prog": prog,
            "vers": vers,
            "proc": proc,
            "auth": rpc.AUTH_NAMES.get(flavor, str(flavor)) if flavor >= 0 else "",
            "auth_uid": _int(msg, "rpc.auth.uid"),
            "auth_gid": _int(msg, "rpc.auth.gid"),
            "auth_machine": msg.get("rpc.auth.machinename", [""])[0],
            "gss_proc": _int(msg, "rpc.authgss.procedure"),
            "gss_service": gss_service,
            "reply_stat": reply_stat,
            "accept_stat": _int(msg, "rpc.state_accept") if reply_stat == "accepted" else -1,
            "reject_stat": _int(msg, "rpc.state_reject") if reply_stat == "denied" else -1,
            "body_offset": _body_offset(msg, is_call),
            "rpc_len": rpc_len,
            "captured_len": rpc_len,
            "record_frags": record_frags,
            "frames": len(frames),
            "ip_frags": len(frames),
            "truncated": any(n in self.truncated_frames for n in frames),
        }
        row.update(zip(FIELD_NAMES, _nfs_fields(msg, is_call, prog, vers, proc), strict=True))
        self.rows.append(tuple(row[c] for c in ROW_COLUMNS))


def parse(
    paths: list[str],
    limits: ParseLimits | None = None,
    progress: Progress | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, ParseStats]:
    """Dissect capture files with tshark; return (messages, events, stats), the
    contract of ``nfstrace.parsers.native.parse``.  ``limits`` do not apply
    (tshark keeps its own); events are empty (tshark's TCP analysis is not mapped)."""
    tshark = tshark_path()
    stats = ParseStats(files=[CaptureInfo(path=p) for p in paths])
    for i, (p, info) in enumerate(zip(paths, stats.files, strict=True)):
        for _ in read_frames(p, i, info):  # format, link types, drops: the file's own facts
            pass
    rows = _Rows()
    with _tshark_input(paths, tshark) as path:
        frames = list(frame_fields(tshark, path))
        several = [int(f["frame.number"][0]) for f in frames if len(f.get("rpc.xid", ())) > 1]
        split = split_messages(tshark, path, several)
    for f in frames:
        number = rows.frame(f)
        if progress is not None and not number & 0x3FFF:
            progress(number, -1)  # tshark reads the files: their bytes are not counted
        if "rpc.xid" not in f:
            continue
        for i, msg in enumerate(split.get(number) or [f]):
            rows.message(number, f, msg, first_of_frame=i == 0)
    stats.frames = len(frames)
    messages = messages_frame(rows.rows)
    # Connection ids dense in order of first use by an RPC message.
    order = pd.unique(messages["conn"])
    messages["conn"] = messages["conn"].map({c: i + 1 for i, c in enumerate(order)}).astype("int64")
    stats.messages = len(messages)
    stats.calls = int((messages["msgtype"] == "call").sum())
    stats.replies = stats.messages - stats.calls
    stats.truncated_messages = int(messages["truncated"].sum())
    stats.replies_without_call_info = int(
        ((messages["msgtype"] == "reply") & (messages["prog"] < 0)).sum()
    )
    return messages, events_frame([]), stats
