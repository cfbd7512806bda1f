"""Quantities as a user types them: durations, rates and sizes -> numbers.
The command line's options and the model's what-ifs read them here; every
parser says what it accepts in its error."""

from __future__ import annotations

import re

_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}
_DECIMAL = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_BINARY = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
NUMBER = r"(\d+(?:\.\d*)?|\.\d+)"


def parse_duration(text: str) -> float:
    """'1ms', '250us', '250µs', '0.5s', '100ns' -> seconds.  The unit is required:
    a bare '200' could mean 200 ms as easily as 200 s."""
    m = re.fullmatch(NUMBER + r"\s*(ns|us|µs|ms|s)", text.strip().lower())
    if not m:
        if re.fullmatch(NUMBER, text.strip()):
            n = text.strip()
            raise ValueError(f"a duration needs a unit: {n}ms or {n}s, not {text!r}")
        raise ValueError(f"not a duration: {text!r} (examples: 1ms, 250us, 0.5s)")
    return float(m.group(1)) * _DURATION_UNITS[m.group(2)]


def parse_rate(text: str) -> float:
    """A rate -> bits per second.

    Decimal prefixes (k, M, G, T = 10^3..10^12).  Bits: '10G', '10Gbit/s', '100Mbps',
    '1e9' is not accepted (write 1G).  Bytes when a capital B follows the prefix:
    '200MB/s', '1.5GB/s', '500 MBps' (x8).
    """
    m = re.fullmatch(
        NUMBER + r"\s*([kKmMgGtT]?)(B|b|bit|bits)?(?:/s|ps)?", text.strip().replace(" ", "")
    )
    if not m:
        raise ValueError(f"not a rate: {text!r} (examples: 10G, 100Mbit/s, 200MB/s)")
    value = float(m.group(1)) * _DECIMAL[m.group(2).lower()]
    value *= 8 if m.group(3) == "B" else 1
    if value <= 0:
        raise ValueError(f"a rate must be positive: {text!r}")
    return value


def parse_size(text: str) -> int:
    """A block size -> bytes.  K/M/G and KiB/MiB/GiB are binary ('64K' = 65536,
    '1M' = 1048576); kB/MB/GB are decimal ('1MB' = 10^6); a bare number is bytes."""
    m = re.fullmatch(NUMBER + r"\s*(?:([kKmMgG])(iB|B|)|(B?))", text.strip())
    if not m:
        raise ValueError(f"not a size: {text!r} (examples: 8192, 64K, 1M, 1MiB)")
    prefix, kind = (m.group(2) or "").lower(), m.group(3) or ""
    scale = _DECIMAL[prefix] if kind == "B" else _BINARY[prefix]
    size = float(m.group(1)) * scale
    if size < 1 or size != int(size):
        raise ValueError(f"a size must be a whole, positive number of bytes: {text!r}")
    return int(size)
