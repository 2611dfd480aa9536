# SPDX-License-Identifier: MIT
"""A report's fields declared once: each dataclass field carries a :class:`Quantity` (its
description, unit, the name it has in sweep rows and logged metrics, its heading in a printed
table), and the dictionary, table and column forms of a report are read from those declarations."""
from __future__ import annotations

import dataclasses
import enum
import typing
from typing import Any, Dict, List, Mapping, Optional, Tuple

__all__ = ["Quantity", "quantity", "declared", "column_name", "kind_of", "plain", "as_dict", "table_cells",
           "table_header"]

_KEY = "pydepth.quantity"


@dataclasses.dataclass(frozen=True)
class Quantity:
    """What one report field holds, declared on the field itself.

    ``column`` is its name in sweep rows and metric names (default the field's own name);
    ``heading`` its column heading in ``to_table`` (``None``: not printed) with ``fmt`` the
    format spec of its value there; ``metric`` whether training loggers get it per site."""

    description: str
    unit: str = ""
    column: Optional[str] = None
    heading: Optional[str] = None
    fmt: str = ""
    metric: bool = False


def quantity(description: str, *, unit: str = "", column: Optional[str] = None, heading: Optional[str] = None,
             fmt: str = "", metric: bool = False, default: Any = dataclasses.MISSING) -> Any:
    """A dataclass field declared with its :class:`Quantity` (``default`` as in ``dataclasses.field``)."""
    meta = {_KEY: Quantity(description, unit, column, heading, fmt, metric)}
    return dataclasses.field(default=default, metadata=meta)


def declared(cls: type) -> Tuple[Tuple[str, Quantity], ...]:
    """``(field name, Quantity)`` of every declared field of the dataclass ``cls``, in field order."""
    return tuple((f.name, f.metadata[_KEY]) for f in dataclasses.fields(cls) if _KEY in f.metadata)


def column_name(name: str, q: Quantity) -> str:
    """The name a field has in rows and metrics: its declared ``column``, else its own name."""
    return q.column or name


def kind_of(cls: type, name: str) -> str:
    """The sweep column kind (``int``, ``float``, ``str``, ``bool``) of field ``name`` of ``cls``,
    read from its annotation (an enumeration is stored as its string value)."""
    hint = typing.get_type_hints(cls)[name]
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return "str"
    kinds = {bool: "bool", int: "int", float: "float", str: "str"}
    if hint not in kinds:
        raise TypeError(f"{cls.__name__}.{name} is annotated {hint!r}, which no sweep column kind stores")
    return kinds[hint]


def plain(value: Any) -> Any:
    """A field's value in JSON-serializable form: enumerations as their values, tuples as lists,
    nested reports through their own ``to_dict``."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    if dataclasses.is_dataclass(value) and hasattr(value, "to_dict"):
        return value.to_dict()
    return value


def as_dict(report: Any) -> Dict[str, Any]:
    """Every field of a report dataclass by its own name, in field order, in plain form."""
    return {f.name: plain(getattr(report, f.name)) for f in dataclasses.fields(report)}


def table_cells(cls: type, row: Mapping[str, Any]) -> List[str]:
    """The printed cells of one row of ``cls`` given in plain form (:func:`as_dict`): each field
    with a heading, formatted by its ``fmt``."""
    return [format(row[name], q.fmt) for name, q in declared(cls) if q.heading is not None]


def table_header(cls: type) -> Tuple[str, ...]:
    """The headings of the printed columns of ``cls``, in field order."""
    return tuple(q.heading for _, q in declared(cls) if q.heading is not None)
