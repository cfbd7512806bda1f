"""Crafted captures for the issue's edge cases that make_crafted.py does not
already build (the others are listed in tests/test_backends.py):

* ``mirror``: every frame of a TCP and a UDP exchange captured twice, 2 µs
  apart (a mirror/SPAN port delivering each frame twice);
* ``xid_reuse``: the same xid used by the same procedure twice, far apart in
  time (longer than ``MatchConfig.xid_reuse_ns``): two transactions.

    python tests/crafted/make_backends.py OUTDIR
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

try:
    from crafted import make_crafted as mc
except ImportError:  # run as a script (python tests/crafted/THIS.py OUTDIR) or as a package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from crafted import make_crafted as mc

MIRROR_DELAY_NS = 2_000
MIRROR_TCP_XID, MIRROR_UDP_XID = 0x2101, 0x2102
MIRROR_TCP_PORT, MIRROR_UDP_PORT = 41400, 970
XID_REUSE_XID, XID_REUSE_PORT = 0x2201, 971
XID_REUSE_GAP_NS = 400 * 1_000_000_000  # > MatchConfig.xid_reuse_ns (300 s)


def build_mirror(out: Path) -> dict[str, Path]:
    # Original frames: TCP handshake (1-3), GETATTR call (4), reply (5); UDP
    # GETATTR call (6) and reply (7); original n at ts(2n - 1), its copy 2 µs later.
    orig = mc.Capture()
    c = mc.TcpConn(orig, cport=MIRROR_TCP_PORT)
    c.handshake()
    c.client_send(mc.record(mc.getattr_call(MIRROR_TCP_XID)))
    c.server_send(mc.record(mc.getattr_reply(MIRROR_TCP_XID)))
    udp = (mc.CLIENT, mc.SERVER, MIRROR_UDP_PORT, mc.NFS_PORT)
    orig.add(mc.eth(mc.udp_pkt(*udp, mc.getattr_call(MIRROR_UDP_XID))))
    back = (mc.SERVER, mc.CLIENT, mc.NFS_PORT, MIRROR_UDP_PORT)
    orig.add(mc.eth(mc.udp_pkt(*back, mc.getattr_reply(MIRROR_UDP_XID))))
    cap = mc.Capture()
    for n, (_t, data, wire) in enumerate(orig.frames, start=1):
        t = mc.ts(2 * n - 1)
        cap.frames += [(t, data, wire), (t + MIRROR_DELAY_NS, data, wire)]
    return {"mirror": cap.write(out / "mirror.pcap")}


def build_xid_reuse(out: Path) -> dict[str, Path]:
    # UDP GETATTR xid X (frame 1) and reply (2); 400 s later GETATTR xid X
    # again (3) and its reply (4).
    cap = mc.Capture()
    call = (mc.CLIENT, mc.SERVER, XID_REUSE_PORT, mc.NFS_PORT)
    reply = (mc.SERVER, mc.CLIENT, mc.NFS_PORT, XID_REUSE_PORT)
    for i in range(2):
        t = mc.BASE_NS + i * XID_REUSE_GAP_NS
        cap.add(mc.eth(mc.udp_pkt(*call, mc.getattr_call(XID_REUSE_XID))), t)
        cap.add(mc.eth(mc.udp_pkt(*reply, mc.getattr_reply(XID_REUSE_XID))), t + 50_000)
    return {"xid_reuse": cap.write(out / "xid_reuse.pcap")}


BUILDERS = (build_mirror, build_xid_reuse)


def build_all(outdir: str | os.PathLike[str]) -> dict[str, Path]:
    """Write every capture into outdir; returns {name: path}."""
    return mc.run_builders(BUILDERS, outdir)


if __name__ == "__main__":
    mc.script(build_all, __file__)
