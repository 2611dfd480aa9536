# SPDX-License-Identifier: MIT
"""The result rows of a sweep cell, either backend's: the columns, one step's rows of a health
report, the error row that ends a refused cell, and appending them as column lists."""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

from .spec import Cell, row_id

__all__ = ["COLUMNS", "empty_columns", "health_rows", "error_row", "append_rows"]

#: Result columns in order, with their kinds (``str``, ``int``, ``uint``, ``float``, ``bool``).
#: ``wall_time_s`` is the only column that differs between two runs of the same cell.
COLUMNS: Tuple[Tuple[str, str], ...] = (
    ("row_id", "str"), ("cell_id", "str"), ("depth", "int"), ("width", "int"), ("seed", "uint"),
    ("policy", "str"), ("step", "int"), ("site", "int"), ("site_label", "str"),
    ("activation_ratio", "float"), ("adjoint_ratio", "float"),
    ("activation_rms", "float"), ("adjoint_rms", "float"),
    ("activation_status", "str"), ("adjoint_status", "str"),
    ("loss", "float"), ("within_band", "bool"), ("factor", "float"), ("parameters", "int"),
    ("error", "str"), ("wall_time_s", "float"),
)


def empty_columns() -> Dict[str, List[Any]]:
    """One empty list per column."""
    return {name: [] for name, _ in COLUMNS}


def health_rows(t: int, report: Any, loss: float) -> List[Tuple[Any, ...]]:
    """One step's rows (one per residual site) of a health report, either backend's."""
    return [(t, r.site, r.label, r.activation_ratio, r.adjoint_ratio, r.activation_rms, r.adjoint_rms,
             r.activation_status.value, r.adjoint_status.value, loss, report.within_band, "")
            for r in report.sites]


def error_row(t: int, err: BaseException) -> Tuple[Any, ...]:
    """The one row (site -1, NaN ratios) that ends a cell refused at step t."""
    nan = float("nan")
    return (t, -1, "", nan, nan, nan, nan, "", "", nan, False, f"{type(err).__name__}: {err}")


def append_rows(out: Dict[str, List[Any]], cell: Cell, rows: Sequence[Tuple[Any, ...]], factor: float,
                params: int, wall: float) -> None:
    """Appends a cell's step rows to the column lists ``out`` in COLUMNS order."""
    for (t, site, label, ar, gr, arms, grms, ast, gst, lv, within, error) in rows:
        values = (row_id(cell, t, site), cell.cell_id, cell.depth, cell.width, cell.seed, cell.policy,
                  t, site, label, ar, gr, arms, grms, ast, gst, lv, within, factor, params, error, wall)
        for (name, _), v in zip(COLUMNS, values):
            out[name].append(v)
