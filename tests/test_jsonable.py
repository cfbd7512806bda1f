"""The one encoder of the JSON outputs (nfstrace.jsonable): what each kind of
value becomes, and the per-field declarations the results use instead of
writing their own as_dict."""

from __future__ import annotations

import importlib
import json
import math
import pkgutil
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pytest

import nfstrace.analysis
from nfstrace.jsonable import NOT_IN_JSON, json_field, jsonable


@dataclass(frozen=True)
class Inner:
    rate: float
    name: str = "x"


@dataclass(frozen=True)
class Outer:
    count: int
    inner: Inner
    table: pd.DataFrame = field(metadata=json_field(convert=len, then=("doubled",)))
    hidden: str = field(default="secret", metadata=NOT_IN_JSON)
    renamed: list[int] = field(default_factory=list, metadata=json_field(key="items"))
    last: str = field(
        default="", metadata=json_field(omit=True, then=(("inner_rate", "inner.rate"),))
    )

    @property
    def doubled(self) -> int:
        return 2 * self.count


def test_fields_in_order_with_their_declarations() -> None:
    """Fields in class order; nested dataclasses encoded; a conversion, a
    derived value after its field, a field left out, a key of its own, and a
    dotted attribute after a field that is itself left out."""
    obj = Outer(3, Inner(np.float64(1.5)), pd.DataFrame({"a": [1, 2]}), renamed=[np.int64(7)])
    got = jsonable(obj)
    assert list(got) == ["count", "inner", "table", "doubled", "items", "inner_rate"]
    assert got == {
        "count": 3,
        "inner": {"rate": 1.5, "name": "x"},
        "table": 2,
        "doubled": 6,
        "items": [7],
        "inner_rate": 1.5,
    }
    assert type(got["inner"]["rate"]) is float and type(got["items"][0]) is int


def test_missing_and_infinite_values_are_null() -> None:
    """JSON has no NaN or Infinity: strict readers refuse them, so every
    missing or infinite number is null, wherever it is."""
    values = [math.nan, np.float64("nan"), math.inf, -np.inf, pd.NA, pd.NaT, None]
    assert jsonable(values) == [None] * len(values)
    assert jsonable({"x": (1.0, np.float32("nan"))}) == {"x": [1.0, None]}
    json.dumps(jsonable(Inner(math.inf)), allow_nan=False)


def test_tables_are_records_and_scalars_python() -> None:
    table = pd.DataFrame(
        {
            "n": pd.array([1, None], dtype="Int64"),
            "f": [0.5, np.nan],
            "s": pd.Categorical(["a", "b"]),
            "b": [True, False],
        },
        index=[10, 20],  # left out
    )
    got = jsonable(table)
    assert got == [
        {"n": 1, "f": 0.5, "s": "a", "b": True},
        {"n": None, "f": None, "s": "b", "b": False},
    ]
    assert [type(v) for v in got[0].values()] == [int, float, str, bool]
    assert jsonable(pd.DataFrame()) == []


def test_containers_and_keys() -> None:
    assert jsonable({np.int64(3): {1, 0}}) == {3: [0, 1]}
    assert type(next(iter(jsonable({np.int64(3): 1})))) is int
    assert jsonable((np.bool_(True), "t")) == [True, "t"]


def test_a_value_with_no_json_form_is_an_error() -> None:
    """A Timestamp (or any unknown object) is not quietly turned into text."""
    with pytest.raises(TypeError, match="Timestamp"):
        jsonable({"t": pd.Timestamp(0)})
    with pytest.raises(TypeError, match="object"):
        jsonable([object()])


def test_no_result_writes_its_own_as_dict() -> None:
    """The analysis results declare their JSON form on their fields; the encoder
    is the only place that builds it."""
    path, prefix = nfstrace.analysis.__path__, "nfstrace.analysis."
    modules = [importlib.import_module(m.name) for m in pkgutil.iter_modules(path, prefix)]
    assert len(modules) > 10
    with_own = [
        f"{m.__name__}.{name}"
        for m in modules
        for name, value in vars(m).items()
        if isinstance(value, type) and value.__module__ == m.__name__ and "as_dict" in vars(value)
    ]
    assert with_own == []
