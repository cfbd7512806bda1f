"""Crafted captures for calls and replies the capture saw only part of
(issue 16, items 7 and 8):

* ``unanswered_portmap``: two portmap GETPORT calls over UDP that are never
  answered (frames 1, 2), then nothing for 1,511 s, then an NFS GETATTR call
  and its reply (3, 4) and, 30 s later, a GETATTR that is never answered (5)
  followed 30 s after it by a GETATTR call and reply (6, 7): the first silence
  holds no call up (the portmap calls were given up long before it ended),
  the second does (30 s after a send the client is still waiting);
* ``reply_before_resend``: a GETATTR reply over UDP (frame 1) whose call was
  sent before the capture began, the client's re-send of that call 46 µs
  later (2) and the server's answer to the re-send (3): one transaction, re-sent
  before the capture, answered twice (frame 1 a duplicate reply of the xid, as
  tshark counts it); then an unrelated call and reply (4, 5).

    python tests/crafted/make_unanswered.py OUTDIR
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

PMAP_PROG, PMAP_VERS, PMAP_PORT, PMAPPROC_GETPORT = 100000, 2, 111, 3
IPPROTO_UDP = 17
SILENCE_NS = 1_511 * 1_000_000_000
WAIT_NS = 30 * 1_000_000_000
RESEND_AFTER_REPLY_NS = 46_000
RESENT_XID = 0x3101


def _udp(cap: mc.Capture, t: int, call: bool, port: int, dport: int, payload: bytes) -> None:
    ends = (mc.CLIENT, mc.SERVER, port, dport) if call else (mc.SERVER, mc.CLIENT, dport, port)
    pkt = mc.udp_pkt(*ends, payload)
    pkt.id = len(cap.frames) + 1  # each datagram its own IP id: no frame a copy of another
    cap.add(mc.eth(pkt), t)


def build_unanswered_portmap(out: Path) -> dict[str, Path]:
    cap = mc.Capture()
    t = mc.BASE_NS
    for i, port in enumerate((800, 801)):
        args = mc.u32(100232, 10, IPPROTO_UDP, 0)  # sadmind v10 over UDP: which port?
        call = mc.rpc_call(0x3001 + i, PMAPPROC_GETPORT, args, prog=PMAP_PROG, vers=PMAP_VERS)
        _udp(cap, t + i * 1_000_000, True, port, PMAP_PORT, call)
    t += SILENCE_NS
    _udp(cap, t, True, 802, mc.NFS_PORT, mc.getattr_call(0x3011))
    _udp(cap, t + 200_000, False, 802, mc.NFS_PORT, mc.getattr_reply(0x3011))
    t += WAIT_NS
    _udp(cap, t, True, 802, mc.NFS_PORT, mc.getattr_call(0x3012))  # never answered
    t += WAIT_NS
    _udp(cap, t, True, 802, mc.NFS_PORT, mc.getattr_call(0x3013))
    _udp(cap, t + 200_000, False, 802, mc.NFS_PORT, mc.getattr_reply(0x3013))
    return {"unanswered_portmap": cap.write(out / "unanswered_portmap.pcap")}


def build_reply_before_resend(out: Path) -> dict[str, Path]:
    cap = mc.Capture()
    t = mc.BASE_NS
    _udp(cap, t, False, 803, mc.NFS_PORT, mc.getattr_reply(RESENT_XID))
    _udp(cap, t + RESEND_AFTER_REPLY_NS, True, 803, mc.NFS_PORT, mc.getattr_call(RESENT_XID))
    _udp(cap, t + 300_000, False, 803, mc.NFS_PORT, mc.getattr_reply(RESENT_XID))
    _udp(cap, t + 10_000_000, True, 803, mc.NFS_PORT, mc.getattr_call(RESENT_XID + 1))
    _udp(cap, t + 10_200_000, False, 803, mc.NFS_PORT, mc.getattr_reply(RESENT_XID + 1))
    return {"reply_before_resend": cap.write(out / "reply_before_resend.pcap")}


BUILDERS = (build_unanswered_portmap, build_reply_before_resend)


def build_all(outdir: str | os.PathLike[str]) -> dict[str, Path]:
    """Write every capture into outdir; returns {name: path}."""
    return mc.run_builders(BUILDERS, outdir)


if __name__ == "__main__":
    mc.script(build_all, __file__)
