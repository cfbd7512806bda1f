"""Tables stacked and reordered column by column: the host-pair partitions'
messages, events (``nfstrace.parsers.parallel``) and transactions
(``nfstrace.match``) made one without holding the parts and the whole at
once; a table given its schema's types (``typed``); category columns of
strings made from codes (``categorical_from``, ``string_categorical``) and
read by them (``string_codes``); and
rows ordered by several integer columns (``lexsort``)."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
from pandas.api.types import pandas_dtype, union_categoricals

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


_dtype = functools.cache(pandas_dtype)  # (a few distinct names: "int64", "category", ...)


def typed(table: pd.DataFrame, dtypes: dict[str, str]) -> pd.DataFrame:
    """``table[list(dtypes)].astype(dtypes)``: the columns of ``dtypes`` in
    their order, selected only when the table's differ, converted only where
    their type does (a frame's selection and astype go through every column,
    each category column re-coded: some 3 ms each for the ~60 of the
    transactions, whatever their size); the table itself when nothing differs."""
    if list(table.columns) != list(dtypes):
        table = table[list(dtypes)]
    have = dict(zip(table.columns, table.dtypes, strict=True))
    wanted = {c: t for c, t in dtypes.items() if not _is(have[c], t)}
    if not wanted:
        return table
    return table.assign(**{c: table[c].astype(t) for c, t in wanted.items()})


def _is(dtype: object, name: str) -> bool:
    """Whether a column of ``dtype`` is already what ``astype(name)`` makes: a
    category column is one "category" (astype keeps its categories and codes)."""
    wanted = _dtype(name)
    if isinstance(wanted, pd.CategoricalDtype) and wanted.categories is None:
        return isinstance(dtype, pd.CategoricalDtype)
    return bool(dtype == wanted)


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


def categorical_from(names: np.ndarray, codes: np.ndarray) -> pd.Categorical:
    """``pd.Categorical(names[codes])`` for an object array of distinct strings
    ``names`` and codes into it (0 .. len(names) - 1): the categories present,
    sorted, looked up once (pandas makes every row an arrow string first: 0.1 s
    for the program column of 400k calls)."""
    names = np.asarray(names, dtype=object)
    if not len(codes) or not all(isinstance(v, str) for v in names.tolist()):
        return pd.Categorical(names[codes])
    present = np.flatnonzero(np.bincount(codes, minlength=len(names)))
    categories = sorted(set(names[present].tolist()))
    rank = {v: i for i, v in enumerate(categories)}
    recode = np.full(len(names), -1, "int64")
    recode[present] = [rank[v] for v in names[present].tolist()]
    return pd.Categorical.from_codes(recode[codes], categories=pd.Index(categories))


def string_codes(column: pd.Series, missing: object = "") -> tuple[np.ndarray, np.ndarray] | None:
    """A category column of strings as its names and codes: its categories as
    an object array with ``missing`` appended, and its codes (-1, a missing
    value, picks that last name), so that ``names[codes]`` is the column as
    objects with ``missing`` for missing values, made without a string per
    row (None: not a category column of strings)."""
    dtype = column.dtype
    if not (
        isinstance(dtype, pd.CategoricalDtype)
        and pd.api.types.is_string_dtype(dtype.categories.dtype)
    ):
        return None
    names = np.append(np.asarray(dtype.categories, dtype=object), np.array([missing], object))
    return names, column.cat.codes.to_numpy()


def string_categorical(values: np.ndarray) -> pd.Categorical:
    """``pd.Categorical(values)`` of an object array of strings: the distinct
    values found by a hash (``categorical_from``)."""
    codes, uniques = pd.factorize(values)
    if (codes < 0).any():  # (a missing value: pandas' own way)
        return pd.Categorical(values)
    return categorical_from(np.asarray(uniques, dtype=object), codes)


def lexsort(keys: tuple[np.ndarray, ...]) -> np.ndarray:
    """``np.lexsort(keys)`` of integer columns (the last the primary key), with
    neighbouring keys whose ranges fit one int64 together made one key (each
    one's offset from its least, in mixed radix: the same order): a lexsort
    costs a sort per key, and one key is a stable argsort (a merge sort, quick
    on rows nearly in order, as a capture's times and frames are)."""
    if not len(keys) or not len(keys[0]):
        return np.lexsort(keys)
    merged: list[np.ndarray] = []  # primary first
    key: np.ndarray | None = None
    size = 1
    top = np.iinfo("int64").max >> 1
    for column in reversed(keys):
        lo = int(column.min())
        span = int(column.max()) - lo + 1
        if span > top:  # (a range too wide to shift: the column as it is, alone)
            offset, span = column, top + 1
        else:
            offset = column.astype("int64") - lo
        if key is not None and size <= top // span:
            key = key * span + offset
            size *= span
        else:
            if key is not None:
                merged.append(key)
            key, size = offset, span
    assert key is not None
    merged.append(key)
    if len(merged) == 1:
        return np.argsort(merged[0], kind="stable")
    return np.lexsort(tuple(reversed(merged)))


def unique_first(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_index=True)`` of integers: the distinct values
    ascending and where each first occurs.  Of non-negative integers of a small
    range (connection ids) by a least position per value, not a sort of the rows."""
    values = np.asarray(values)
    if values.dtype.kind not in "iu" or not len(values) or int(values.min()) < 0:
        return np.unique(values, return_index=True)
    top = int(values.max())
    if top > 4 * len(values) + 4096:
        return np.unique(values, return_index=True)
    first = np.full(top + 1, len(values), "int64")
    np.minimum.at(first, values, np.arange(len(values)))
    present = np.flatnonzero(first < len(values))
    return present.astype(values.dtype), first[present]
