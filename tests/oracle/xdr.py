"""A small XDR (RFC 4506) cursor for decoders.

It never raises on short data: a read past the end "poisons" the cursor
(``ok`` becomes False) and returns zeros, so a decoder reads its fields in a
straight line and checks ``ok`` once per message (Zeek's habit).
"""

from __future__ import annotations

import struct

_U32 = struct.Struct(">I").unpack_from
_U64 = struct.Struct(">Q").unpack_from
_I64 = struct.Struct(">q").unpack_from


class Xdr:
    __slots__ = ("buf", "end", "ok", "pos")

    def __init__(self, buf: bytes | memoryview, pos: int = 0, end: int | None = None) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else min(end, len(buf))
        self.ok = True

    def _take(self, n: int) -> int:
        """Advance by n; return the old position or -1 (and poison) if short."""
        p = self.pos
        if not self.ok or n < 0 or p + n > self.end:
            self.ok = False
            return -1
        self.pos = p + n
        return p

    def u32(self) -> int:
        p = self._take(4)
        return 0 if p < 0 else _U32(self.buf, p)[0]

    def i32(self) -> int:
        v = self.u32()
        return v - (1 << 32) if v & 0x80000000 else v

    def u64(self) -> int:
        p = self._take(8)
        return 0 if p < 0 else _U64(self.buf, p)[0]

    def i64(self) -> int:
        p = self._take(8)
        return 0 if p < 0 else _I64(self.buf, p)[0]

    def boolean(self) -> bool:
        return self.u32() != 0

    def fixed(self, n: int) -> bytes:
        """Fixed-length opaque of n bytes (padded to 4)."""
        p = self._take((n + 3) & ~3)
        return b"" if p < 0 else bytes(self.buf[p : p + n])

    def opaque(self, limit: int = 1 << 30) -> bytes:
        """Variable-length opaque; a length above limit poisons the cursor."""
        n = self.u32()
        if n > limit:
            self.ok = False
            return b""
        return self.fixed(n)

    def string(self, limit: int = 1 << 30) -> str:
        return self.opaque(limit).decode("utf-8", "replace")

    def skip(self, n: int) -> None:
        self._take((n + 3) & ~3)

    def skip_opaque(self, limit: int = 1 << 30) -> int:
        """Step over a variable-length opaque; returns its length."""
        n = self.u32()
        if n > limit:
            self.ok = False
            return 0
        self.skip(n)
        return n

    def remaining(self) -> int:
        return self.end - self.pos if self.ok else 0
