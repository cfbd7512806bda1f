"""What the user tells the latency model (``analysis/model.py``): values to
use instead of estimates (``--rtt``, ``--link-rate``, ``--disk-rate``,
``--block``) and what-if changes (``--what-if rtt=+5ms,outstanding=16``),
parsed from their text.  Apart from the model so that the command line reads
its options without importing the model's arithmetic."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from nfstrace.units import NUMBER, parse_duration, parse_rate, parse_size


@dataclass(frozen=True)
class ModelOverrides:
    """Values the user gives instead of estimates (None: estimate from the trace)."""

    rtt_s: float | None = None  # round trip; T_prop = rtt / 2
    link_rate_bps: float | None = None
    disk_rate_Bps: float | None = None
    block_bytes: int | None = None


def overrides_from_options(
    rtt: str | None = None,
    link_rate: str | None = None,
    disk_rate: str | None = None,
    block: str | None = None,
) -> ModelOverrides:
    """``--rtt``, ``--link-rate``, ``--disk-rate``, ``--block`` strings -> ModelOverrides."""
    return ModelOverrides(
        rtt_s=None if rtt is None else parse_duration(rtt),
        link_rate_bps=None if link_rate is None else parse_rate(link_rate),
        disk_rate_Bps=None if disk_rate is None else parse_rate(disk_rate) / 8,
        block_bytes=None if block is None else parse_size(block),
    )


@dataclass(frozen=True)
class WhatIf:
    """One what-if spec: each change None when not asked for.

    rtt: absolute round trip (rtt_s) or a change of it (rtt_delta_s, '+5ms' / '-1ms')
    or a factor (rtt_factor, '2x'); link/disk: absolute rate or factor; outstanding: WRITEs
    in flight; block_bytes: block size.
    """

    spec: str
    rtt_s: float | None = None
    rtt_delta_s: float | None = None
    rtt_factor: float | None = None
    link_rate_bps: float | None = None
    link_factor: float | None = None
    disk_rate_Bps: float | None = None
    disk_factor: float | None = None
    outstanding: float | None = None
    block_bytes: int | None = None


def _factor(value: str) -> float | None:
    m = re.fullmatch(NUMBER + r"\s*[x×]", value.strip().lower())
    if not m:
        return None
    k = float(m.group(1))
    if k <= 0:
        raise ValueError(f"a factor must be positive: {value!r}")
    return k


def parse_what_if(spec: str) -> WhatIf:
    """'rtt=+5ms', 'rtt=10ms', 'link=10G', 'disk=2x', 'outstanding=16', 'block=1M', or
    several joined by commas ('rtt=+5ms,outstanding=16') -> WhatIf."""
    changes: dict[str, Any] = {}
    for part in spec.split(","):
        key, sep, value = part.partition("=")
        key, value = key.strip().lower(), value.strip()
        if not sep or not value:
            raise ValueError(f"what-if {part!r}: expected name=value, e.g. rtt=+5ms")
        try:
            factor = _factor(value)
            if key == "rtt":
                if factor is not None:
                    changes["rtt_factor"] = factor
                elif value[0] in "+-":
                    sign = -1.0 if value[0] == "-" else 1.0
                    changes["rtt_delta_s"] = sign * parse_duration(value[1:])
                else:
                    changes["rtt_s"] = parse_duration(value)
            elif key == "link":
                if factor is not None:
                    changes["link_factor"] = factor
                else:
                    changes["link_rate_bps"] = parse_rate(value)
            elif key == "disk":
                if factor is not None:
                    changes["disk_factor"] = factor
                else:
                    changes["disk_rate_Bps"] = parse_rate(value) / 8
            elif key == "outstanding":
                n = float(value)
                if not n >= 1:
                    raise ValueError("outstanding must be at least 1")
                changes["outstanding"] = n
            elif key == "block":
                changes["block_bytes"] = parse_size(value)
            else:
                raise ValueError("known names: rtt, link, disk, outstanding, block")
        except ValueError as e:
            raise ValueError(f"what-if {part.strip()!r}: {e}") from None
    return WhatIf(spec=spec, **changes)
