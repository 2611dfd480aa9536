# SPDX-License-Identifier: MIT
"""The result rows of a sweep cell, either backend's: the columns, one step's rows of a health
report, the error row that ends a refused cell, and appending them as column lists.

A row is a dict keyed by column name. The per-site columns are the declared fields of
:class:`pydepth.health.ResidualHealthRow` (their names, kinds and order), so a field added there is
a column here; the columns before and after them belong to the cell and the step."""
from __future__ import annotations

import math
from typing import Any, Dict, List, Sequence, Tuple

from .._fields import column_name, declared, kind_of
from ..health import DepthHealthReport, ResidualHealthRow
from .spec import Cell, row_id

__all__ = ["COLUMNS", "SITE_COLUMNS", "column_table", "empty_columns", "health_rows", "error_row", "append_rows"]

#: The per-site columns: ``(column, field of ResidualHealthRow, kind)`` in field order.
SITE_COLUMNS: Tuple[Tuple[str, str, str], ...] = tuple(
    (column_name(name, q), name, kind_of(ResidualHealthRow, name)) for name, q in declared(ResidualHealthRow))

_CELL_COLUMNS = (
    ("row_id", "str", "the row's stable id (cell, step and site)"),
    ("cell_id", "str", "the cell's stable id"),
    ("depth", "int", "the cell's decoder blocks"),
    ("width", "int", "the cell's model width"),
    ("seed", "uint", "the cell's seed"),
    ("policy", "str", "the cell's depth policy"),
    ("step", "int", "optimizer steps taken before the observation"))
_STEP_COLUMNS = (
    ("loss", "float", "the mean loss of the observed forward (NaN in an error row)"),
    ("within_band", "bool", "whether every site ratio of the step lies within the band"),
    ("factor", "float", "the depth factor the cell's policy applied"),
    ("parameters", "int", "the cell's parameter count"),
    ("error", "str", "empty, or the refusal that ended the cell (`ErrorClass: message`)"),
    ("wall_time_s", "float", "seconds the cell took (the only column two runs of a cell differ in)"))


def column_table() -> List[Tuple[str, str, str]]:
    """``(column, kind, meaning)`` of every result column in order; a site column's meaning is
    its field's declared description (docs/sweep-store.md shows this list)."""
    quantities = dict(declared(ResidualHealthRow))
    site = [(column, kind, f"per site: {quantities[name].description}") for column, name, kind in SITE_COLUMNS]
    return [c for c in _CELL_COLUMNS] + site + [c for c in _STEP_COLUMNS]


#: Result columns in order, with their kinds (``str``, ``int``, ``uint``, ``float``, ``bool``): the
#: cell's, the site's (:data:`SITE_COLUMNS`), then the step's. The stored Parquet schema is this
#: order (format ``pydepth-sweep-v1``, docs/sweep-store.md).
COLUMNS: Tuple[Tuple[str, str], ...] = tuple((name, kind) for name, kind, _ in column_table())

#: What a site column holds in the error row that ends a refused cell (no site was observed).
_NO_SITE = {"int": -1, "float": math.nan, "str": ""}


def empty_columns() -> Dict[str, List[Any]]:
    """One empty list per column."""
    return {name: [] for name, _ in COLUMNS}


def health_rows(t: int, report: DepthHealthReport, loss: float) -> List[Dict[str, Any]]:
    """One step's rows (one per residual site) of a health report, either backend's: the step's
    columns and every site column, read from the site's fields."""
    rows = []
    for r in report.sites:
        site = r.to_dict()
        rows.append({"step": t, **{column: site[name] for column, name, _ in SITE_COLUMNS},
                     "loss": loss, "within_band": report.within_band, "error": ""})
    return rows


def error_row(t: int, err: BaseException) -> Dict[str, Any]:
    """The one row (site -1, NaN numbers, empty labels) that ends a cell refused at step t."""
    return {"step": t, **{column: _NO_SITE[kind] for column, _, kind in SITE_COLUMNS},
            "loss": math.nan, "within_band": False, "error": f"{type(err).__name__}: {err}"}


def append_rows(out: Dict[str, List[Any]], cell: Cell, rows: Sequence[Dict[str, Any]], factor: float,
                params: int, wall: float) -> None:
    """Appends a cell's step rows to the column lists ``out``, each row completed with the
    cell's columns; a row missing a column is a KeyError, never a shifted value."""
    for row in rows:
        values = {"row_id": row_id(cell, row["step"], row["site"]), "cell_id": cell.cell_id,
                  "depth": cell.depth, "width": cell.width, "seed": cell.seed, "policy": cell.policy,
                  **row, "factor": factor, "parameters": params, "wall_time_s": wall}
        for name, _ in COLUMNS:
            out[name].append(values[name])
