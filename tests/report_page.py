"""What a report page carries, read back for the tests: its plotly.js copies."""

from __future__ import annotations

import base64
import gzip
import re

from nfstrace.reports.html import PACKED_PLOTLY_ID

_PACKED = re.compile(rf'<script type="application/gzip;base64" id="{PACKED_PLOTLY_ID}">([^<]*)<')


def plotly_copies(page: str) -> int:
    """Copies of plotly.js in a report: packed (gzip, base64, unpacked by the
    page) or plain; each must carry the bundle's banner."""
    packed = [gzip.decompress(base64.b64decode(m)).decode() for m in _PACKED.findall(page)]
    banner = re.compile(r"\* plotly\.js (\([^)]*\) )?v\d")
    return sum(len(banner.findall(js)) for js in packed) + len(banner.findall(page))
