# SPDX-License-Identifier: MIT
"""One cell on the PyTorch side of the bridge (``backend="torch"``): the same draw and policy as
the pydepth cell, copied into pydepth's torch twin, observed by ``pydepth.torch``'s hook
observer and stepped by ``torch.optim.AdamW(foreach=False)``. Needs the ``torch`` extra.

The rows agree with the pydepth backend to rounding, not bit for bit: torch orders its sums
its own way, which is what this backend is there to show. Inside a cell torch runs on one
intra-op thread (restored afterwards): sweep cells are small, the parallelism is the workers'.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Tuple

import numpy as np

from ..errors import PydepthError
from .draw import build_model
from .errors import SweepDependencyError
from .rows import append_rows, error_row, health_rows
from .spec import Cell, SweepSpec

__all__ = ["torch_bridge", "torch_ready", "run_torch_cell"]


def torch_bridge() -> Tuple[Any, Any, Any]:
    """``(torch, pydepth.torch.to_torch, pydepth.torch.observe_residual_health)``, or
    :class:`SweepDependencyError` naming the ``torch`` extra."""
    try:
        import torch

        from ..torch import observe_residual_health, to_torch
    except ImportError as err:
        raise SweepDependencyError(
            "the torch sweep backend needs PyTorch and pydepth's torch bridge observer, the optional "
            f"'torch' extra: pip install 'pydepth[torch]' ({err})") from None
    return torch, to_torch, observe_residual_health


def torch_ready(spec: SweepSpec) -> None:
    """Refuses, before any work, a torch sweep without the ``torch`` extra."""
    torch_bridge()


def run_torch_cell(spec: SweepSpec, cell: Cell, out: Dict[str, List[Any]], *,
                   batch: Tuple[np.ndarray, np.ndarray]) -> None:
    """Runs one cell through the torch twin and appends its rows to ``out`` (the same columns
    and step loop as :func:`pydepth.sweep.cell.run_cell`)."""
    torch, _, _ = torch_bridge()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _run(spec, cell, out, batch)
    finally:
        torch.set_num_threads(threads)


def _run(spec: SweepSpec, cell: Cell, out: Dict[str, List[Any]], batch: Tuple[np.ndarray, np.ndarray]) -> None:
    torch, to_torch, observe = torch_bridge()
    t0 = time.perf_counter()
    model, factor = build_model(spec, cell)
    twin = to_torch(model)
    ids, targets = (torch.from_numpy(a) for a in batch)
    listed = set(spec.steps)
    opt = torch.optim.AdamW(twin.parameters(), lr=spec.lr, betas=tuple(spec.betas), eps=spec.eps,
                            weight_decay=spec.weight_decay, foreach=False) if spec.max_step > 0 else None
    rows: List[Dict[str, Any]] = []
    for t in range(spec.max_step + 1):
        try:
            if t in listed:
                report = observe(twin, ids, targets, band=spec.band)  # leaves .grad untouched
                with torch.no_grad():
                    loss = float(twin(ids, targets).loss.item())
                if not np.isfinite(loss):
                    raise FloatingPointError(f"loss is {loss!r}")
                rows.extend(health_rows(t, report, loss))
            if opt is not None and t < spec.max_step:
                opt.zero_grad(set_to_none=False)
                twin(ids, targets).loss.backward()
                opt.step()
        except (PydepthError, FloatingPointError) as err:
            rows.append(error_row(t, err))
            break
    append_rows(out, cell, rows, factor, model.parameter_count, time.perf_counter() - t0)
