"""Tables stacked and reordered column by column: the host-pair partitions'
messages, events (``nfstrace.parsers.parallel``) and transactions
(``nfstrace.match``) made one without holding the parts and the whole at
once."""

from __future__ import annotations

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from nfstrace.memory import release_freed


def merged(tables: list[pd.DataFrame], dtypes: dict[str, str], order: np.ndarray) -> pd.DataFrame:
    """The tables (same columns) stacked, then rows ``order`` of the stack,
    as ``dtypes`` has them (a category: the union of the parts' categories,
    sorted).  Column by column, each dropped from ``tables`` once taken, so
    that the parts and the whole are not held at once; ``tables`` is left
    empty."""
    columns = list(tables[0].columns)
    parts = [{c: t[c] for c in columns} for t in tables]
    tables.clear()
    out = {}
    for c in columns:
        pieces = [p.pop(c) for p in parts]
        if dtypes[c] == "category":
            one = _union(pieces)
        else:
            one = pd.concat(pieces, ignore_index=True).astype(dtypes[c]).array
        del pieces
        out[c] = one.take(order)
        del one
        # the parts' columns are smaller than glibc's mmap threshold, so their
        # memory stays in its heap when freed: handed back before the next column
        release_freed()
    return pd.DataFrame(out, copy=False)


def _union(pieces: list[pd.Series]) -> pd.Categorical:
    """Categorical pieces stacked, over the union of their categories (sorted);
    a piece without categories (no rows, or none known) takes the others'
    type of category (an empty Index is untyped)."""
    cats = [x.astype("category") for x in pieces]
    typed = [x.cat.categories.dtype for x in cats if len(x.cat.categories)]
    if typed:
        empty = pd.Index([], dtype=typed[0])
        cats = [x if len(x.cat.categories) else x.cat.set_categories(empty) for x in cats]
    return union_categoricals(cats, sort_categories=True, ignore_order=True)
