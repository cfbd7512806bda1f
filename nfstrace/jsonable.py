"""The JSON form of the results: one encoder for every result dataclass.

The JSON summary (``--json``), ``model --json``, ``compare --json`` and the
findings' details are data ``json.dumps`` writes as they are.  ``jsonable``
makes that data out of anything the analysis returns, the one way for all:

* a dataclass: a dict of its fields in declaration order, each encoded in
  turn (nested dataclasses too);
* a DataFrame: its rows as records (column -> value; the index left out);
* dicts keep their keys; lists, tuples and sets become lists (sets sorted);
* a missing value (None, NaN, pd.NA, NaT) and an infinite float become null:
  JSON has neither NaN nor Infinity (``json.dumps`` would write them, and
  other readers would refuse the file);
* numpy scalars become the Python value they hold.

Anything else (a Timestamp, a Timedelta, an object of no known form) is a
TypeError naming it: a value the JSON cannot carry is a bug to fix where the
value is made, not something to print as some text.

How a field shows in the JSON is declared where the field is, in its
``dataclasses.field(metadata=...)``: ``json_field(...)`` (a key of its own, a
conversion, derived values after it) or ``NOT_IN_JSON``.  No result writes its
own ``as_dict``.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd

# The dataclasses.field metadata key under which a field's JsonForm is kept.
JSON = "json"


@dataclasses.dataclass(frozen=True)
class JsonForm:
    """How one field shows in its dataclass's JSON form.

    omit: the field is left out (a working table the JSON does not repeat);
    key: its key, when not the field's name;
    convert: what the JSON holds of its value (``len``: a table's row count);
    then: what follows it, derived from the object: attribute names (a
    property, the key its name) or (key, dotted attribute) pairs.  They come
    at the field's place whether or not the field itself is shown, so the
    JSON's order stays that of the class."""

    omit: bool = False
    key: str | None = None
    convert: Callable[[Any], Any] | None = None
    then: tuple[str | tuple[str, str], ...] = ()


def json_field(
    *,
    key: str | None = None,
    convert: Callable[[Any], Any] | None = None,
    then: tuple[str | tuple[str, str], ...] = (),
    omit: bool = False,
) -> Mapping[str, Any]:
    """The metadata of a field whose JSON form is not its value under its name
    (see ``JsonForm``): ``field(metadata=json_field(convert=len))``."""
    return MappingProxyType({JSON: JsonForm(omit, key, convert, then)})


# The metadata of a field the JSON leaves out.
NOT_IN_JSON = json_field(omit=True)

_PLAIN = (str, int, bool)  # bool is an int; kept as bool by json.dumps


def jsonable(value: Any) -> Any:
    """``value`` as data ``json.dumps`` writes as strict JSON (module docstring)."""
    if value is None or isinstance(value, _PLAIN):
        return value
    if isinstance(value, float):  # numpy's float64 too
        return float(value) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {_key(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, set | frozenset):
        return [jsonable(v) for v in sorted(value)]
    if isinstance(value, pd.DataFrame):
        return [jsonable(row) for row in value.to_dict(orient="records")]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _dataclass(value)
    if isinstance(value, np.generic):
        return jsonable(value.item())
    if value is pd.NA or value is pd.NaT:
        return None
    raise TypeError(f"no JSON form for {type(value).__name__}: {value!r}")


def _key(key: Any) -> Any:
    """A dict key json.dumps takes: numpy scalars as their Python value."""
    return key.item() if isinstance(key, np.generic) else key


def _dataclass(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        form: JsonForm = f.metadata.get(JSON) or JsonForm()
        if not form.omit:
            value = getattr(obj, f.name)
            out[form.key or f.name] = jsonable(
                value if form.convert is None else form.convert(value)
            )
        for extra in form.then:
            key, attribute = (extra, extra) if isinstance(extra, str) else extra
            out[key] = jsonable(operator.attrgetter(attribute)(obj))
    return out
