# SPDX-License-Identifier: MIT
"""One cell of a sweep: build, initialize, step, observe; returns plain result columns.

Runs on a Dask worker or in the caller's process alike: the inputs are a spec dict and cell
tuples, the output is a dict of Python lists, so nothing un-picklable travels either way. The
spec's backend picks, from :data:`BACKENDS`, who runs the cell: pydepth's C core
(:mod:`.core_cell`) or its torch twin (:mod:`.torch_cell`); both write the rows of :mod:`.rows`.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, NamedTuple, Sequence, Tuple

import numpy as np

from .core_cell import core_ready, optimizer_class, run_core_cell
from .draw import build_model, draw_batch
from .errors import SweepSpecError
from .rows import COLUMNS, empty_columns
from .spec import Cell, SweepSpec
from .torch_cell import run_torch_cell, torch_ready

__all__ = ["COLUMNS", "BACKENDS", "Backend", "backend", "draw_batch", "build_model", "run_cell", "run_cells",
           "optimizer_class"]


class Backend(NamedTuple):
    """Who runs a cell: ``ready(spec)`` refuses a missing dependency before any work,
    ``run(spec, cell, out, batch=...)`` appends the cell's rows."""

    ready: Callable[[SweepSpec], None]
    run: Callable[..., None]


#: spec.backend -> its Backend (the names are spec.BACKENDS).
BACKENDS: Dict[str, Backend] = {
    "pydepth": Backend(core_ready, run_core_cell),
    "torch": Backend(torch_ready, run_torch_cell),
}


def backend(spec: SweepSpec) -> Backend:
    """The Backend of ``spec.backend``."""
    return BACKENDS[spec.backend]


def run_cell(spec: SweepSpec, cell: Cell, out: Dict[str, List[Any]], *,
             batch: Tuple[np.ndarray, np.ndarray]) -> None:
    """Runs one cell and appends its rows (step x site) to the column lists ``out``.

    At every step t = 0 .. max_step: zero the gradients, forward and mean loss on the fixed
    batch, then either observe residual health (its reverse pass gives the gradients) when t is
    a listed step, or an ordinary ``loss.backward()``; then one AdamW update unless t is the
    last step. A pydepth refusal (a non-finite value; a refused update, reported at the step it
    would have produced) ends the cell with one row (site -1, NaN ratios) whose ``error`` names it.
    ``spec.backend`` picks who runs it (:data:`BACKENDS`)."""
    if cell.width not in spec.widths or cell.depth not in spec.depths or cell.seed not in spec.seeds:
        raise SweepSpecError(f"cell {cell.cell_id} is not in this sweep's grid")
    backend(spec).run(spec, cell, out, batch=batch)


def run_cells(spec_dict: Dict[str, Any], cells: Sequence[Tuple[int, int, int, str]]) -> Dict[str, List[Any]]:
    """The Dask task: runs cells ``(depth, width, seed, policy)`` of the spec ``spec_dict`` in
    order and returns their rows as column lists (plain Python values only)."""
    spec = SweepSpec.from_dict(spec_dict)
    batch = draw_batch(spec)
    out = empty_columns()
    for c in cells:
        run_cell(spec, Cell(*c), out, batch=batch)
    return out
