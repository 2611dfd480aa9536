# SPDX-License-Identifier: MIT
"""Recomputing one stored row alone and comparing it bit for bit with what was stored."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, List, Tuple, Union

from .._native._bits import float_bits
from .cell import run_cell
from .draw import draw_batch
from .errors import RowNotFoundError
from .rows import COLUMNS
from .spec import parse_row_id
from .store import pyarrow_modules, read_spec, read_table

__all__ = ["RerunComparison", "RerunResult", "rerun_row"]

PathLike = Union[str, "os.PathLike[str]"]

#: Columns that a rerun does not compare: the wall time is a measurement, not a result.
UNCOMPARED = ("wall_time_s",)


def _bits(v: Any) -> Any:
    if isinstance(v, float):
        return float_bits(v)  # NaN payloads and signed zeros compare exactly
    return v


def _show(v: Any) -> str:
    if isinstance(v, float):
        text = repr(v) if math.isfinite(v) else str(v)
        return f"{text} (0x{float_bits(v)})"
    return repr(v)


@dataclass(frozen=True)
class RerunComparison:
    """One column of the row: stored and recomputed values and whether their bits agree."""

    column: str
    stored: Any
    recomputed: Any
    identical: bool
    compared: bool = True


@dataclass(frozen=True)
class RerunResult:
    """The comparison of one stored row with its recomputation."""

    row_id: str
    comparisons: Tuple[RerunComparison, ...]

    @property
    def identical(self) -> bool:
        """Whether every compared value is bit-identical."""
        return all(c.identical for c in self.comparisons)

    def to_table(self) -> str:
        """The comparison as text for people."""
        lines = [f"row {self.row_id}: recomputed alone"]
        w = max(len(c.column) for c in self.comparisons)
        for c in self.comparisons:
            mark = ("==" if c.identical else "!=") if c.compared else "  (measurement, not compared)"
            if c.compared:
                lines.append(f"  {c.column:<{w}}  {_show(c.stored)} {mark} {_show(c.recomputed)}")
            else:
                lines.append(f"  {c.column:<{w}}  {_show(c.stored)} -> {_show(c.recomputed)}{mark}")
        lines.append("every stored value is bit-identical" if self.identical
                     else "MISMATCH: " + ", ".join(c.column for c in self.comparisons if not c.identical))
        return "\n".join(lines)


def rerun_row(out: PathLike, row_id: str) -> RerunResult:
    """Recomputes the cell of ``row_id`` alone (in this process, from the spec stored in
    ``out``) and compares every stored value of that row bit for bit (``wall_time_s`` is
    reported, not compared). :class:`RowNotFoundError` if ``out`` has no such row."""
    pa, _ = pyarrow_modules()
    spec = read_spec(out)
    cell, _, _ = parse_row_id(row_id)  # a malformed id is refused before any reading
    table = read_table(out)
    import pyarrow.compute as pc
    hits = table.filter(pc.equal(table.column("row_id"), pa.scalar(row_id)))
    if hits.num_rows != 1:
        raise RowNotFoundError(f"{out} holds {hits.num_rows} rows with id {row_id!r}")
    stored = {n: hits.column(n)[0].as_py() for n, _ in COLUMNS}
    fresh = {n: [] for n, _ in COLUMNS}  # type: ignore[var-annotated]
    run_cell(spec, cell, fresh, batch=draw_batch(spec))
    where = [i for i, r in enumerate(fresh["row_id"]) if r == row_id]
    comparisons: List[RerunComparison] = []
    for name, _ in COLUMNS:
        new = fresh[name][where[0]] if where else None
        same = name in UNCOMPARED or (bool(where) and _bits(new) == _bits(stored[name]))
        comparisons.append(RerunComparison(name, stored[name], new, same, name not in UNCOMPARED))
    return RerunResult(row_id, tuple(comparisons))
