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
:mod:`.rerun`, figures in :mod:`.plots` and the depth check in :mod:`.presets`. The depth-transfer
study (best learning rate across depth per parametrization) is :mod:`.transfer`, with its grid in
:mod:`.transfer_spec`, its cell in :mod:`.transfer_cell` and its summary in :mod:`.transfer_summary`.
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
from .transfer import (PRESETS, TransferResult, depth_transfer, read_transfer_spec, read_transfer_table,
                       rerun_transfer_cell, transfer_spec)
from .transfer_spec import TransferCell, TransferSpec

__all__ = ["COLUMNS", "POLICIES", "Cell", "SweepSpec", "SweepResult", "RerunComparison", "RerunResult",
           "run", "rerun_row", "read_table", "read_spec", "run_cells", "draw_batch", "row_id",
           "parse_row_id", "parse_int_list", "SweepError", "SweepSpecError", "SweepDependencyError",
           "OptimizerUnavailableError", "SweepStoreError", "SweepResumeError", "DamagedPartError", "RowNotFoundError",
           "PRESETS", "TransferSpec", "TransferCell", "TransferResult", "transfer_spec", "depth_transfer",
           "read_transfer_table", "read_transfer_spec", "rerun_transfer_cell"]
