# SPDX-License-Identifier: MIT
"""One cell on pydepth's C core (``backend="pydepth"``): the step loop of
:func:`pydepth.sweep.cell.run_cell` with pydepth's AdamW, bit for bit reproducible."""
from __future__ import annotations

import time
from typing import Any, Dict, List, Tuple

import numpy as np

from ..errors import PydepthError
from ..training.step import loss_and_gradients
from .draw import build_model
from .errors import OptimizerUnavailableError
from .rows import append_rows, error_row, health_rows
from .spec import Cell, SweepSpec

__all__ = ["optimizer_class", "core_ready", "run_core_cell"]


def optimizer_class() -> Any:
    """``pydepth.optim.AdamW``, or :class:`OptimizerUnavailableError` when it is missing."""
    try:
        from ..optim import AdamW
    except ImportError:
        raise OptimizerUnavailableError(
            "optimizer steps after 0 need pydepth.optim.AdamW, which this pydepth does not have; "
            "sweep steps [0] only") from None
    return AdamW


def core_ready(spec: SweepSpec) -> None:
    """Refuses, before any work, a sweep whose steps need the optimizer when it is missing."""
    if spec.max_step > 0:
        optimizer_class()


def run_core_cell(spec: SweepSpec, cell: Cell, out: Dict[str, List[Any]], *,
                  batch: Tuple[np.ndarray, np.ndarray]) -> None:
    """Runs one cell on the C core and appends its rows to ``out`` (see
    :func:`pydepth.sweep.cell.run_cell` for the step loop)."""
    t0 = time.perf_counter()
    ids, targets = batch
    model, factor = build_model(spec, cell)
    listed = set(spec.steps)
    opt = optimizer_class()(model.parameters, lr=spec.lr, betas=tuple(spec.betas), eps=spec.eps,
                            weight_decay=spec.weight_decay) if spec.max_step > 0 else None
    rows: List[Dict[str, Any]] = []
    for t in range(spec.max_step + 1):
        reached = t  # a refused update is reported at the step it could not reach
        try:
            model.zero_grad()
            loss, report = loss_and_gradients(model, ids, targets, observe=t in listed, band=spec.band)
            if report is not None:
                rows.extend(health_rows(t, report, loss))
            if opt is not None and t < spec.max_step:
                reached = t + 1
                opt.step()
        except PydepthError as err:
            rows.append(error_row(reached, err))
            break
    append_rows(out, cell, rows, factor, model.parameter_count, time.perf_counter() - t0)
