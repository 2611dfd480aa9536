# SPDX-License-Identifier: MIT
"""Sweeps of residual health over depth, width, seed, policy and the first optimizer steps.

Optional extra ``sweep`` (Dask with distributed, pyarrow)::

    from pydepth.sweep import SweepSpec, run, read_table
    spec = SweepSpec(depths=[1, 2, 4, 8], widths=[16], seeds=range(5), steps=[0])
    result = run(spec, out="runs/depth")          # local Dask cluster, one worker per core
    table = read_table("runs/depth")              # pyarrow.Table, one row per cell x step x site

The grid and its cells live in :mod:`.spec`, one cell's computation in :mod:`.cell` (its inputs
in :mod:`.draw`, its rows in :mod:`.rows`, the backends in :mod:`.core_cell` and
:mod:`.torch_cell`), the Dask runner in :mod:`.run`, the Parquet store in :mod:`.store`, a row's recomputation in
:mod:`.rerun`, figures in :mod:`.plots` and the depth check in :mod:`.presets`.
"""
from __future__ import annotations

from .cell import COLUMNS, draw_batch, run_cells
from .errors import (
                     OptimizerUnavailableError,
                     DamagedPartError, RowNotFoundError,
                     SweepDependencyError,
                     SweepError,
                     SweepResumeError,
                     SweepSpecError,
                     SweepStoreError,
)
from .rerun import RerunComparison, RerunResult, rerun_row
from .run import SweepResult, run
from .spec import POLICIES, Cell, SweepSpec, parse_int_list, parse_row_id, row_id
from .store import read_spec, read_table

__all__ = ["COLUMNS", "POLICIES", "Cell", "SweepSpec", "SweepResult", "RerunComparison", "RerunResult",
           "run", "rerun_row", "read_table", "read_spec", "run_cells", "draw_batch", "row_id",
           "parse_row_id", "parse_int_list", "SweepError", "SweepSpecError", "SweepDependencyError",
           "OptimizerUnavailableError", "SweepStoreError", "SweepResumeError", "DamagedPartError", "RowNotFoundError"]
