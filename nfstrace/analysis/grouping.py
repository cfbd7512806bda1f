"""Grouping rows by integer codes instead of object columns of strings.

``groupby`` on string keys factorizes and sorts every row's strings (and an
``astype(object)`` first copies them into Python objects); here each key column
is factorized once, its few distinct values sorted, and the rows get one
integer per key combination, numbered in the combinations' sort order.
Grouping by that integer gives the groups of ``groupby(keys, sort=True,
dropna=False)`` in the same order, so aggregates (sums, means, quantiles) see
the same rows in the same order and come out the same.

``row_codes`` is the unordered kind, for telling equal rows apart: hashing only,
no sort at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import pandas as pd
from pandas.api.extensions import ExtensionArray


def sorted_codes(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Codes of a column's values numbered in the values' sort order, missing last,
    and the value of each code (object array; the last one NaN, for missing)."""
    if isinstance(column.dtype, pd.CategoricalDtype) and pd.api.types.is_string_dtype(
        column.cat.categories.dtype
    ):
        # a category column: its codes ranked by its (few) categories' sort order,
        # narrow (no 8-byte code per row, no hash of the rows); the values of
        # categories not present are never looked up
        values = np.asarray(column.cat.categories, dtype=object)
        order = np.argsort(values, kind="stable")
        rank = np.empty(len(values) + 1, _narrowest(len(values)))
        rank[order] = np.arange(len(values))
        rank[-1] = len(values)  # code -1 (missing): last
        return rank[column.cat.codes.to_numpy()], np.append(values[order], np.nan)
    if (
        isinstance(column.dtype, np.dtype)
        and (column.dtype.kind == "i" or (column.dtype.kind == "u" and column.dtype.itemsize < 8))
        and len(column)
    ):
        # integers of a small range (a version, a status): their offsets from the
        # least counted, the values present ranked (no hash of the rows)
        values = column.to_numpy()
        lo, hi = int(values.min()), int(values.max())
        if hi - lo <= 4 * len(values) + 4096:
            present = np.flatnonzero(np.bincount(values - lo, minlength=hi - lo + 1))
            rank = np.zeros(hi - lo + 1, _narrowest(len(present)))
            rank[present] = np.arange(len(present))
            found = np.empty(len(present), dtype=object)
            found[:] = (present + lo).tolist()  # (Python ints, as factorize's uniques give)
            return rank[values - lo], np.append(found, np.nan)
    if pd.api.types.is_numeric_dtype(column.dtype):
        codes, uniques = pd.factorize(column, sort=True)
        values = np.asarray(uniques, dtype=object)
    else:  # strings, categories: sort the (few) distinct values, not the rows
        codes, uniques = pd.factorize(column)
        values = np.asarray(uniques, dtype=object)
        order = np.argsort(values, kind="stable")
        rank = np.empty(len(values), "int64")
        rank[order] = np.arange(len(values))
        ranked = rank[codes] if len(rank) else codes  # (no values: every row missing)
        codes, values = np.where(codes < 0, -1, ranked), values[order]
    return np.where(codes < 0, len(values), codes), np.append(values, np.nan)


def group_codes(columns: list[pd.Series]) -> tuple[np.ndarray, list[tuple]]:
    """One integer per row for the combination of ``columns`` (0, 1, ... in the
    combinations' sort order), and per column (name, codes, values)."""
    parts = [(column.name, *sorted_codes(column)) for column in columns]
    group = np.zeros(len(columns[0]), "int64")
    size = 1  # group < size
    for _, codes, values in parts:  # mixed radix, re-numbered before it could overflow
        if group.max(initial=0) >= np.iinfo("int64").max // len(values):
            group = pd.factorize(group, sort=True)[0]
            size = int(group.max(initial=0)) + 1
        group *= len(values)
        group += codes
        size *= len(values)
    if size <= 4 * len(group) + 4096:
        # few combinations possible: numbered by which occur (a count per
        # combination), as factorize(sort=True) numbers them, without its hash
        present = np.bincount(group, minlength=size) > 0
        return (np.cumsum(present) - 1)[group], parts
    return pd.factorize(group, sort=True)[0], parts


def narrow_codes(codes: np.ndarray) -> np.ndarray:
    """Codes 0, 1, ... as int16 when they fit: numpy sorts 16-bit integers by
    radix (stable, in one pass), three times quicker than int64's merge sort."""
    if len(codes) and int(codes.max()) <= np.iinfo(np.int16).max and int(codes.min()) >= 0:
        return codes.astype(np.int16)
    return codes


def _narrowest(n: int) -> str:
    """The narrowest signed integer type holding 0 .. n."""
    return next(t for t in ("int8", "int16", "int32", "int64") if n <= np.iinfo(t).max)


def group_keys(group: np.ndarray, parts: list[tuple]) -> pd.DataFrame:
    """Each group's key values (one row per group, in group order), typed as
    groupby types its keys: the values as a list, so pd.Index infers int64, str..."""
    # a row of each group (``group_codes``' groups are 0, 1, ... each present, and
    # all rows of a group have the same codes: any of them will do; no hash of
    # the rows, as drop_duplicates made: 70 bytes a row)
    at = np.zeros(int(group.max()) + 1 if len(group) else 0, "int64")
    at[group] = np.arange(len(group))
    return pd.DataFrame(
        {name: pd.Index(values[codes[at]].tolist()) for name, codes, values in parts}
    )


def row_codes(columns: Sequence[pd.Series | np.ndarray | ExtensionArray]) -> np.ndarray:
    """One integer per row, equal for rows equal in every column (missing equal
    to missing), numbered in the order the combinations first appear: what
    ``duplicated`` or a dedup needs, for the price of a hash per column."""
    group = np.zeros(len(columns[0]), "int64")
    size = 1  # group < size
    for column in columns:
        codes, n = _equal_codes(column)
        if size > np.iinfo("int64").max // n:  # mixed radix, re-numbered before it overflows
            group = pd.factorize(group)[0]
            size = int(group.max(initial=0)) + 1
        group, size = group * n + codes, size * n
    return pd.factorize(group)[0]


def _equal_codes(column: pd.Series | np.ndarray | ExtensionArray) -> tuple[np.ndarray, int]:
    """Codes 0 .. n - 1 equal where the column's values are (missing equal to
    missing), and n: a category column's own codes (missing: n - 1), an
    integer column of a small range its offsets from its least, else a hash
    (factorize).  Only which rows are equal matters (``row_codes`` numbers the
    combinations afterwards): no hash of the rows where codes are at hand."""
    if isinstance(column, pd.Series) and isinstance(column.dtype, pd.CategoricalDtype):
        codes, n = column.cat.codes.to_numpy(), len(column.cat.categories)
        return np.where(codes < 0, n, codes), n + 1
    if isinstance(column, pd.Categorical):
        codes, n = column.codes, len(column.categories)
        return np.where(codes < 0, n, codes), n + 1
    dtype = column.dtype
    if (
        isinstance(dtype, np.dtype)
        and len(column)
        and (dtype.kind in "ib" or (dtype.kind == "u" and dtype.itemsize < 8))
    ):
        values = np.asarray(column)
        lo, hi = int(values.min()), int(values.max())
        if hi - lo <= 4 * len(values) + 4096:  # (as sorted_codes: a count per value)
            return values.astype("int64") - lo, hi - lo + 1
    codes, uniques = pd.factorize(column, use_na_sentinel=False)
    return codes, max(len(uniques), 1)


def first_rows(codes: np.ndarray) -> np.ndarray:
    """Where each code of ``row_codes`` first appears (in code order): codes
    numbered in order of appearance each first appear as one more than every
    code before them."""
    top = np.maximum.accumulate(codes)
    return np.flatnonzero(np.r_[len(codes) > 0, top[1:] > top[:-1]][: len(codes)])


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` of integers (or booleans) by a sort and a compare of
    neighbours: numpy 2's ``np.unique`` hashes the values first and then sorts the
    distinct ones, three times slower on the budget's tens of thousands of
    interval bounds.  Other kinds (floats and their NaNs, objects) go to
    ``np.unique`` itself."""
    values = np.asarray(values)
    if values.dtype.kind not in "iub" or values.ndim != 1:
        return np.unique(values)
    out = np.sort(values, kind="stable")  # (a merge sort: quick on sorted runs)
    return out[np.r_[True, out[1:] != out[:-1]]] if len(out) else out


def sorted_search(
    haystack: np.ndarray, needles: np.ndarray, side: Literal["left", "right"] = "left"
) -> np.ndarray:
    """``np.searchsorted(haystack, needles, side)`` of integers, by a merge where
    both are sorted (calls and replies in time order): a stable argsort of the
    two one after the other (two sorted runs, merged in one pass), each
    needle's place in it less its own rank; twice as quick as a binary search
    per needle on 400k of each.  Else ``np.searchsorted`` itself."""
    if (
        haystack.dtype.kind not in "iu"
        or needles.dtype.kind not in "iu"
        or not (_ascending(haystack) and _ascending(needles))
    ):
        return np.searchsorted(haystack, needles, side=side)
    # ties: "right" counts the equal values of the haystack (they go first), "left" not
    if side == "right":
        order = np.argsort(np.concatenate([haystack, needles]), kind="stable")
        placed = order >= len(haystack)
    else:
        order = np.argsort(np.concatenate([needles, haystack]), kind="stable")
        placed = order < len(needles)
    return np.flatnonzero(placed) - np.arange(len(needles))


def _ascending(values: np.ndarray) -> bool:
    return bool(np.all(values[1:] >= values[:-1]))


def is_value(column: pd.Series, value: object) -> np.ndarray:
    """Rows whose value is ``value`` (missing: not), as
    ``column.astype(object).eq(value)`` says, without making every row a Python
    object first (the comparison runs on the column's own type)."""
    return column.eq(value).fillna(False).to_numpy(dtype=bool)


def group_indices(columns: list[pd.Series]) -> dict[tuple, np.ndarray]:
    """``groupby([c.astype(object) for c in columns]).indices``: per distinct key
    (a tuple of Python values, in sorted order) its row positions, ascending; rows
    with a missing value left out.  The rows are grouped by integer codes: only
    the distinct values become Python objects."""
    parts = [pd.factorize(column) for column in columns]
    keep = np.logical_and.reduce([codes >= 0 for codes, _ in parts])
    rows = np.flatnonzero(keep)
    if not len(rows):
        return {}
    group = row_codes([codes[rows] for codes, _ in parts])
    order = np.argsort(narrow_codes(group), kind="stable")
    starts = first_rows(group[order])
    values = [np.asarray(uniques, dtype=object) for _, uniques in parts]
    at = rows[order]
    keys = [tuple(v[codes[at[i]]] for v, (codes, _) in zip(values, parts, strict=True))
            for i in starts]  # fmt: skip
    found = dict(zip(keys, np.split(at, starts[1:]), strict=True))
    return {key: found[key] for key in sorted(found)}


def filled(column: pd.Series, value: str = "") -> pd.Series:
    """``column.fillna(value)``, a category column first given ``value`` as a
    category when it lacks one (pandas 2 refuses a fill with a new category)."""
    if isinstance(column.dtype, pd.CategoricalDtype) and value not in column.cat.categories:
        column = column.cat.add_categories([value])
    return column.fillna(value)


def rows_where(table: pd.DataFrame, keep: pd.Series | np.ndarray) -> pd.DataFrame:
    """``table[keep]``; when every row is kept, the table itself (a shallow
    copy: columns may be added to it, its values are the table's own).

    A boolean selection copies every column, and the usual one here (the
    transactions with a call, ``n_calls > 0``) keeps nearly every row or all of
    them: on a 5M-packet capture such copies made 0.8 GB of the analysis' peak."""
    mask = np.asarray(keep, dtype=bool)
    return table.copy(deep=False) if mask.all() else table[mask]
