"""analysis.grouping's helpers against the pandas idioms they stand for."""

from __future__ import annotations

import numpy as np
import pandas as pd

from nfstrace.analysis.grouping import filled, group_indices, is_value
from nfstrace.analysis.quality import busiest_pair


def strings(values: list[str | None]) -> pd.Series:
    return pd.Series(pd.array(values, dtype="string"))


def test_is_value_as_on_python_objects() -> None:
    for column in (
        strings(["WRITE", None, "READ", "WRITE"]),
        pd.Series(["WRITE", None, "READ", "WRITE"], dtype=object),
        pd.Series(pd.Categorical(["WRITE", None, "READ", "WRITE"])),
    ):
        expected = column.astype(object).eq("WRITE").to_numpy(bool)
        assert is_value(column, "WRITE").tolist() == expected.tolist()
        assert not is_value(column, "COMMIT").any()


def test_group_indices_as_groupby() -> None:
    a = strings(["x", "y", None, "x", "y", "z", "x"])
    b = pd.Series(pd.Categorical(["1", "1", "1", "1", "2", None, "1"]))
    got = group_indices([a, b])
    want = pd.DataFrame({"a": a, "b": b}).groupby([a.astype(object), b.astype(object)]).indices
    assert list(got) == list(want)
    assert all(np.array_equal(got[k], want[k]) for k in want)
    assert all(isinstance(v, str) for key in got for v in key)
    assert group_indices([a[:0], b[:0]]) == {}
    assert group_indices([strings([None, None])]) == {}


def test_busiest_pair_as_value_counts() -> None:
    """The most calls; of ties the pair seen first; replies without call and
    missing addresses not counted."""
    tx = pd.DataFrame(
        {
            "client": strings(["c2", "c1", "c1", "c2", "c3", "c3", "c3", None]),
            "server": strings(["s", "s", "s", "s", "s", "s", "s", "s"]),
            "n_calls": [1, 1, 1, 1, 0, 0, 0, 1],
        }
    )
    calls = tx.loc[tx["n_calls"] > 0, ["client", "server"]].astype(object)
    assert busiest_pair(tx) == calls.value_counts().index[0] == ("c2", "s")
    assert busiest_pair(tx[tx["n_calls"] == 0]) is None


def test_filled_gives_a_category_its_fill() -> None:
    """A category column without the fill value gets it as a category (pandas
    2 refused the fill); one that has it, and a plain column, fill as usual."""
    ops = pd.Series(["WRITE", None, "COMMIT"], dtype="category")
    out = filled(ops)
    assert out.tolist() == ["WRITE", "", "COMMIT"]
    assert isinstance(out.dtype, pd.CategoricalDtype) and "" in out.cat.categories
    assert "" not in ops.cat.categories  # the column given is left as it was
    has = pd.Series(["", None], dtype="category")
    assert filled(has).tolist() == ["", ""] and list(filled(has).cat.categories) == [""]
    assert filled(pd.Series(["a", None], dtype=object), "-").tolist() == ["a", "-"]
