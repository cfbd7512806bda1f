"""Mutations of seed captures, and the whole pipeline run on the result.

A mutation is a small tuple, so a failing example reads (and shrinks) well:

* ``("flip", pos, bit)`` one bit flipped;
* ``("truncate", n)`` the file cut after n bytes;
* ``("splice", seed, i, j)`` this file up to i, then another seed from j on;
* ``("concat", seed)`` another seed appended whole (``cat a.pcap b.pcap``);
* ``("length", k, value)`` the k-th length field (pcap/pcapng record and
  block lengths, IP total length, TCP header length, UDP length) set to value;
* ``("mark", k, value)`` the k-th RPC record mark set to value;
* ``("word", k, value)`` the k-th 4-byte word of an RPC payload set to value
  (counts, opaque lengths, credential lengths, NFSv4 op counts live there);
* ``("insert", pos, data)``, ``("delete", pos, n)``, ``("repeat", pos, n)``.

Indexes wrap around (``k % len``), so any integers are valid for any seed.
"""

from __future__ import annotations

import io
import os
import signal
import struct
import time
from pathlib import Path

from rich.console import Console

import nfstrace
from nfstrace.errors import NfstraceError
from nfstrace.reports.export import write_json
from nfstrace.reports.html import render_report
from nfstrace.reports.terminal import render_summary

from .corpus import field_map, seeds

# Values that break length fields in interesting ways
INTERESTING = (
    0,
    1,
    3,
    4,
    7,
    8,
    11,
    12,
    19,
    20,
    0x7F,
    0x80,
    0xFF,
    0x100,
    1500,
    0xFFFF,
    0x10000,
    10_000,
    262_144,
    262_145,
    0x7FFFFFFF,
    0x80000000,
    0x80000001,
    0xFFFFFFFF,
    0x80000000 | 0x04000000,  # last fragment of 64 MiB
)


def _put(data: bytearray, off: int, width: int, value: int, order: str = ">") -> None:
    if off < 0 or off + width > len(data):
        return
    mask = (1 << (8 * width)) - 1
    fmt = {1: "B", 2: "H", 4: "I"}[width]
    struct.pack_into(order + fmt, data, off, value & mask)


def apply(name: str, mutations: list[tuple]) -> bytes:
    """The seed `name` with the mutations applied in order."""
    data = bytearray(seeds()[name])
    fm = field_map(name)
    pcap_order = (
        "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1", b"\x0a\x0d\x0d\x0a") else ">"
    )
    for m in mutations:
        kind = m[0]
        n = len(data)
        if kind == "flip" and n:
            data[m[1] % n] ^= 1 << (m[2] % 8)
        elif kind == "truncate":
            del data[m[1] % (n + 1) :]
        elif kind == "splice":
            other = seeds()[m[1]]
            i = m[2] % (n + 1)
            j = m[3] % (len(other) + 1)
            data[i:] = other[j:]
        elif kind == "concat":
            data += seeds()[m[1]]
        elif kind == "length" and fm.lengths:
            off, width = fm.lengths[m[1] % len(fm.lengths)]
            # file-format fields in the file's byte order, protocol fields big-endian
            order = pcap_order if width == 4 else ">"
            if width == 1 and off < n:  # IPv4 header length: the low nibble
                data[off] = (data[off] & 0xF0) | (m[2] & 0x0F)
            elif width == 0 and off < n:  # TCP data offset: the high nibble
                data[off] = (data[off] & 0x0F) | ((m[2] & 0x0F) << 4)
            else:
                _put(data, off, width, m[2], order)
        elif kind == "mark" and fm.marks:
            _put(data, fm.marks[m[1] % len(fm.marks)], 4, m[2])
        elif kind == "word" and fm.words:
            _put(data, fm.words[m[1] % len(fm.words)], 4, m[2])
        elif kind == "insert":
            i = m[1] % (n + 1)
            data[i:i] = m[2]
        elif kind == "delete" and n:
            i = m[1] % n
            del data[i : i + m[2]]
        elif kind == "repeat" and n:
            i = m[1] % n
            data[i:i] = data[i : i + m[2]]
    return bytes(data)


class Timeout(Exception):
    pass


def _alarm(_signum: int, _frame: object) -> None:
    raise Timeout


def run_pipeline(
    data: bytes, workdir: Path, html: bool = False, limit_s: int = 30
) -> tuple[str, float]:
    """The whole pipeline on one capture: load, the terminal summary, the JSON
    (and the HTML report when asked).  Returns ("ok" | the NfstraceError class
    name, seconds).  Any other exception propagates (a bug); so does Timeout
    after limit_s seconds (a hang)."""
    path = workdir / "fuzz.pcap"
    path.write_bytes(data)
    start = time.monotonic()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(limit_s)
    try:
        trace = nfstrace.load(path)
        render_summary(trace, Console(file=io.StringIO(), width=120), full=True)
        write_json(trace, workdir / "fuzz.json")
        if html:
            render_report(trace, trace.diagnosis)
        outcome = "ok"
    except NfstraceError as e:
        outcome = type(e).__name__
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        if path.exists():
            os.unlink(path)
    return outcome, time.monotonic() - start
