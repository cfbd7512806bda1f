"""Seed captures for fuzzing, and a map of the length fields inside them.

Seeds are small on purpose (a few dozen frames each) so that thousands of
mutated inputs run through the whole pipeline in a minute or two: the first
frames of several sample captures (NFSv3 over TCP with MOUNT and portmap,
NFSv4.1 full and ``-s 256``, NFSv3 over UDP with IP fragments) and crafted
captures of the pathological cases (pcapng, gzip, IPv6 fragments, split
records, out-of-order segments, mid-stream start, SLL2, ...).

``field_map(seed)`` walks a seed the way a careful reader would (independent
of nfstrace's parser) and lists where its length fields are: pcap record
lengths, pcapng block lengths, IP total lengths, TCP header lengths, record
marks, and the 4-byte words of each RPC payload (counts and opaque lengths
live there).  Mutations aim at them; bit flips and splices go anywhere.

    python -m tests.fuzz.corpus OUTDIR     # write the seeds (for atheris)
"""

from __future__ import annotations

import struct
import sys
import tempfile
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
SAMPLES = ROOT / "sample-pcaps"
REGRESSIONS = Path(__file__).resolve().parent / "regressions"

# (sample capture, first frame, frames): small windows of the real captures
SAMPLE_WINDOWS = (
    ("v3-tcp-nfscp-w1m-d0-l0.pcap", 1, 60),
    ("v3-tcp-nfscp-w64k-d2-l0.5.pcap", 30, 40),
    ("v41-tcp-nfsrs-w1m-d0-l0.pcap", 1, 30),
    ("v41-tcp-nfsrs-w1m-d0-l0.s256.pcap", 1, 60),
    ("v3-udp-py-w32k-mtu1000-d2-l0.5.pcap", 1, 40),
)
# crafted captures (tests/crafted/make_crafted.py) used as seeds
CRAFTED = (
    "three_in_one",
    "multi_fragment",
    "out_of_order",
    "lost_record_mark",
    "midstream",
    "snaplen",
    "udp_frag_v6_hbh",
    "link_sll2",
    "link_null",
    "pcap_be",
    "pcap_nano",
    "pcap_gz",
    "pcapng",
    "seq_wrap",
)

PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", False),
    b"\x4d\x3c\xb2\xa1": ("<", True),
    b"\xa1\xb2\xc3\xd4": (">", False),
    b"\xa1\xb2\x3c\x4d": (">", True),
}


def pcap_window(data: bytes, first: int, count: int) -> bytes:
    """The pcap file header and frames first..first+count-1 (1-based)."""
    e, _nano = PCAP_MAGICS[data[:4]]
    out = [data[:24]]
    pos, n = 24, 0
    while pos + 16 <= len(data) and n < first + count - 1:
        caplen = struct.unpack_from(e + "I", data, pos + 8)[0]
        n += 1
        if n >= first:
            out.append(data[pos : pos + 16 + caplen])
        pos += 16 + caplen
    return b"".join(out)


@cache
def seeds() -> dict[str, bytes]:
    """name -> bytes of every seed capture."""
    out: dict[str, bytes] = {}
    for name, first, count in SAMPLE_WINDOWS:
        out[f"{name.removesuffix('.pcap')}@{first}+{count}"] = pcap_window(
            (SAMPLES / name).read_bytes(), first, count
        )
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from crafted import make_crafted as mc
    finally:
        sys.path.pop(0)
    with tempfile.TemporaryDirectory() as tmp:
        built = mc.build_all(tmp)
        for name in CRAFTED:
            out[name] = built[name].read_bytes()
    for path in sorted(REGRESSIONS.glob("*.pcap*")):
        out[f"regression:{path.name}"] = path.read_bytes()
    return out


@dataclass
class FieldMap:
    """Offsets (in the file) of a seed's fields that mutations aim at."""

    # (offset, width) of length fields; width 1: a low nibble, 0: a high nibble
    lengths: list[tuple[int, int]] = field(default_factory=list)
    marks: list[int] = field(default_factory=list)  # offsets of RPC record marks
    words: list[int] = field(default_factory=list)  # 4-byte words of RPC payloads


def _ip_fields(fm: FieldMap, data: bytes, base: int, frame: bytes, linktype: int) -> None:
    """Length fields of one frame (Ethernet or SLL2 with IPv4/IPv6 and TCP/UDP)."""
    if linktype == 1 and len(frame) >= 14:
        off = 14
        etype = frame[12:14]
    elif linktype == 276 and len(frame) >= 20:
        off, etype = 20, frame[0:2]
    elif linktype == 0 and len(frame) >= 4:
        off, etype = 4, b"\x08\x00"
    else:
        return
    if etype == b"\x08\x00" and len(frame) >= off + 20:
        ihl = (frame[off] & 0x0F) * 4
        fm.lengths.append((base + off + 2, 2))  # IPv4 total length
        fm.lengths.append((base + off, 1))  # IPv4 header length (low nibble)
        proto, l4 = frame[off + 9], off + ihl
    elif etype == b"\x86\xdd" and len(frame) >= off + 40:
        fm.lengths.append((base + off + 4, 2))  # IPv6 payload length
        proto, l4 = frame[off + 6], off + 40
    else:
        return
    if proto == 6 and len(frame) >= l4 + 20:
        fm.lengths.append((base + l4 + 12, 0))  # TCP data offset (high nibble)
        payload = l4 + (frame[l4 + 12] >> 4) * 4
        if len(frame) >= payload + 4:
            fm.marks.append(base + payload)
    elif proto == 17 and len(frame) >= l4 + 8:
        fm.lengths.append((base + l4 + 4, 2))  # UDP length
        payload = l4 + 8
    else:
        return
    # RPC-looking bytes: a record mark 4 bytes before a call/reply signature
    body = frame[payload:]
    for sig in (b"\x00\x00\x00\x00\x00\x00\x00\x02", b"\x00\x00\x00\x01\x00\x00\x00\x00"):
        i = body.find(sig)
        while i >= 0:
            if proto == 6 and i >= 8:
                fm.marks.append(base + payload + i - 8)
            i = body.find(sig, i + 1)
    start = payload + (4 if proto == 6 else 0)
    fm.words.extend(base + p for p in range(start, len(frame) - 3, 4))


@cache
def field_map(name: str) -> FieldMap:
    data = seeds()[name]
    fm = FieldMap()
    if data[:4] in PCAP_MAGICS:
        e, _nano = PCAP_MAGICS[data[:4]]
        linktype = struct.unpack_from(e + "I", data, 20)[0]
        fm.lengths.append((16, 4))  # snaplen
        pos = 24
        while pos + 16 <= len(data):
            caplen = struct.unpack_from(e + "I", data, pos + 8)[0]
            fm.lengths += [(pos + 8, 4), (pos + 12, 4)]  # caplen, origlen
            _ip_fields(fm, data, pos + 16, data[pos + 16 : pos + 16 + caplen], linktype)
            pos += 16 + caplen
    elif data[:4] == b"\x0a\x0d\x0d\x0a":
        pos, links = 0, []
        while pos + 12 <= len(data):
            btype, blen = struct.unpack_from("<II", data, pos)
            fm.lengths += [(pos + 4, 4), (pos + blen - 4, 4)]
            if btype == 1:
                links.append(struct.unpack_from("<H", data, pos + 8)[0])
            elif btype == 6:
                iface, caplen = (
                    struct.unpack_from("<I", data, pos + 8)[0],
                    data[pos + 20 : pos + 24],
                )
                fm.lengths += [(pos + 20, 4), (pos + 24, 4)]
                n = struct.unpack("<I", caplen)[0]
                if iface < len(links):
                    _ip_fields(fm, data, pos + 28, data[pos + 28 : pos + 28 + n], links[iface])
            pos += max(blen, 12)
    return fm


def write_seeds(outdir: str | Path) -> list[Path]:
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, data in seeds().items():
        p = out / (name.replace("/", "_").replace(":", "_").replace("@", "_").replace("+", "_"))
        p.write_bytes(data)
        paths.append(p)
    return paths


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.fuzz.corpus OUTDIR")
    for p in write_seeds(sys.argv[1]):
        print(f"{p.stat().st_size:>8} {p}")
