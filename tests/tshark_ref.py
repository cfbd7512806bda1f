"""tshark as the reference dissector: its view of the RPC messages in a capture.

Run two-pass (``-2``, needed for call/reply links) with RPC decoded on port
2049 over TCP and UDP; other RPC ports are found by tshark's heuristics.
A test that needs tshark fails (does not skip) when it is missing: CI
installs it (``apt-get install tshark``).
"""

from __future__ import annotations

import shutil
import subprocess
from functools import cache

import pandas as pd
import pytest

DECODE_AS = ["-d", "tcp.port==2049,rpc", "-d", "udp.port==2049,rpc"]


def tshark() -> str:
    path = shutil.which("tshark")
    if path is None:
        pytest.fail("tshark is required for this test: apt-get install -y tshark")
    return path


def fields(path: str, names: list[str], display_filter: str = "rpc") -> list[list[str]]:
    """Per frame, the values of each field (all occurrences, comma-joined)."""
    cmd = [tshark(), "-n", "-2", "-r", path, *DECODE_AS, "-Y", display_filter, "-T", "fields"]
    cmd += ["-E", "occurrence=a", "-E", "aggregator=,", "-E", "separator=\t"]
    for name in names:
        cmd += ["-e", name]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return [line.split("\t") for line in out.splitlines() if line]


@cache
def rpc_messages(path: str) -> pd.DataFrame:
    """One row per RPC message tshark dissected: frame (where the message's
    reassembly completed), xid, msgtype, prog, vers, proc."""
    rows = []
    names = [
        "frame.number",
        "rpc.xid",
        "rpc.msgtyp",
        "rpc.program",
        "rpc.programversion",
        "rpc.procedure",
    ]
    for frame, xids, types, progs, verss, procs in fields(path, names):
        if not xids or not types:
            continue  # RPC recognised in a frame cut by snaplen, header not dissected
        xid_l, type_l = xids.split(","), types.split(",")
        prog_l, vers_l, proc_l = progs.split(","), verss.split(","), procs.split(",")
        n = len(xid_l)
        # tshark repeats rpc.programversion (header field and a generated copy)
        if len(vers_l) == 2 * n:
            vers_l = vers_l[::2]
        assert len(type_l) == n and len(prog_l) == n and len(vers_l) == n and len(proc_l) == n, (
            f"unaligned tshark fields in frame {frame}"
        )
        for i in range(n):
            rows.append(
                (
                    int(frame),
                    int(xid_l[i], 16),
                    "call" if type_l[i] == "0" else "reply",
                    int(prog_l[i]),
                    int(vers_l[i]),
                    int(proc_l[i]),
                )
            )
    return pd.DataFrame(rows, columns=["frame", "xid", "msgtype", "prog", "vers", "proc"])
