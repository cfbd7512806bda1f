"""Hand-built RPC bodies through the Rust parser: each call (and its reply) is
written as a UDP datagram of a crafted capture (tests/crafted/make_crafted.py)
and parsed by nfstrace's parser; the message rows' NFS fields that differ from
their defaults (nfstrace/nfs_fields.py) are what the body decoded to."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd

from nfstrace.nfs_fields import NFS_DEFAULTS, NFS_FIELDS
from nfstrace.parsers import native

try:
    from crafted import make_crafted as mc
except ImportError:  # pragma: no cover - run from the repository root
    from tests.crafted import make_crafted as mc

# Ethernet, IPv4 and UDP headers, then the call header of make_crafted.rpc_call
CALL_BODY_AT = 14 + 20 + 8 + mc.CALL_HDR_LEN
CB_PROG = 0x40000001  # an NFSv4 callback program (rpc.CALLBACK_RANGE)


def row_fields(row: pd.Series) -> dict:
    """A message row's NFS fields that differ from their defaults."""
    out = {}
    for name, default in zip(NFS_FIELDS, NFS_DEFAULTS, strict=True):
        value = row[name]
        value = str(value) if isinstance(default, str) else int(value)
        if value != default:
            out[name] = value
    return out


def parse(
    call: bytes,
    reply: bytes | None = None,
    *,
    proc: int = 1,
    prog: int = mc.NFS_PROG,
    vers: int = 4,
    body_captured: int | None = None,
) -> tuple[dict, dict | None]:
    """The decoded fields of a call whose arguments are ``call`` and of its reply
    (results ``reply``: the body after the accepted reply's header).  With
    ``body_captured``, the capture's snaplen keeps only that many bytes of the
    call's arguments (the reply is then not sent)."""
    xid = 0x4E46
    snaplen = 65535 if body_captured is None else CALL_BODY_AT + body_captured
    cap = mc.Capture(snaplen=snaplen)
    cap.add(
        mc.eth(
            mc.udp_pkt(mc.CLIENT, mc.SERVER, 900, 2049, mc.rpc_call(xid, proc, call, prog, vers))
        )
    )
    if reply is not None and body_captured is None:
        cap.add(mc.eth(mc.udp_pkt(mc.SERVER, mc.CLIENT, 2049, 900, mc.rpc_reply(xid, reply))))
    with tempfile.TemporaryDirectory() as tmp:
        path = cap.write(Path(tmp) / "msg.pcap")
        messages = native.parse([str(path)])[0]
    assert list(messages.xid) == [xid] * len(messages), "one call and its reply"
    rows = [row_fields(r) for _, r in messages.iterrows()]
    assert rows and messages.msgtype.iloc[0] == "call"
    return rows[0], rows[1] if len(rows) > 1 else None
