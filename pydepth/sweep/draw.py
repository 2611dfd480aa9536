# SPDX-License-Identifier: MIT
"""The inputs of every sweep cell, whichever backend runs it: the fixed batch and the cell's
model drawn by its policy."""
from __future__ import annotations

from typing import Tuple

import numpy as np

from .._native._rng import SplitMix64
from ..depth_init import DepthInitializationBudget, FreshDepthInitialization
from ..model import DecoderModel
from .errors import SweepSpecError
from .spec import Cell, SweepSpec

__all__ = ["draw_batch", "build_model"]


def draw_batch(spec: SweepSpec) -> Tuple[np.ndarray, np.ndarray]:
    """The fixed batch of every cell: ``batch_rows x (sequence_length + 1)`` ids drawn row-major
    as ``next_u64() % vocabulary_size`` from ``SplitMix64(data_seed)``; inputs are the first
    ``sequence_length`` ids of each row, targets the last ``sequence_length``."""
    rng = SplitMix64(spec.data_seed)
    n = spec.sequence_length + 1
    ids = np.array([rng.next_u64() % spec.vocabulary_size for _ in range(spec.batch_rows * n)],
                   dtype=np.int64).reshape(spec.batch_rows, n)
    return np.ascontiguousarray(ids[:, :-1]), np.ascontiguousarray(ids[:, 1:])


def build_model(spec: SweepSpec, cell: Cell) -> Tuple[DecoderModel, float]:
    """The cell's model and the factor applied to its selected tensors: one fresh draw from
    ``SplitMix64(seed)``; ``scaled`` completes pydepth's depth initialization, ``unscaled``
    keeps snapshots of the same base (the chapter's same-base control, factor 1)."""
    if cell.policy not in spec.policies:
        raise SweepSpecError(f"policy {cell.policy!r} is not in this sweep's policies {spec.policies}")
    cfg = spec.config(cell.depth, cell.width)
    budget = DepthInitializationBudget(max_parameters=cfg.parameter_count, max_positions=cfg.max_positions)
    fresh = FreshDepthInitialization.prepare(cfg, budget, SplitMix64(cell.seed))
    if cell.policy == "scaled":
        init = fresh.complete()
        return init.model, init.record.factor
    return fresh.base_model.clone(), 1.0
