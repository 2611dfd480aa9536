# SPDX-License-Identifier: MIT
"""The memory a training step needs, estimated from batch x sequence length x model with checked
integer arithmetic, and the budget it is checked against before anything is allocated."""
from __future__ import annotations

import os
from typing import Optional

from ..config import DecoderConfig
from .errors import TrainBudgetError

__all__ = ["step_bytes", "default_budget", "check_step_memory"]

_FALLBACK_BUDGET = 16 << 30  # when the platform does not say how much memory it has


def step_bytes(config: DecoderConfig, batch: int, tokens: int) -> int:
    """An estimate (bytes) of one step: the batch, the forward graph's values and the reverse
    pass's (per position and block: the residual stream, projections, feed-forward and attention
    rows; per position: logits and their gradient), and parameters, gradients and two AdamW slots."""
    positions = batch * tokens
    per_block = 16 * config.model_width + 4 * config.feed_forward_width + 2 * config.heads * tokens
    per_position = config.layers * per_block + 3 * config.vocabulary_size + 4 * config.model_width
    return 8 * (2 * positions * per_position + 4 * config.parameter_count + 2 * (positions + batch))


def default_budget() -> int:
    """Three quarters of the machine's physical memory (16 GiB when it cannot be read)."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return _FALLBACK_BUDGET
    return total * 3 // 4 if total > 0 else _FALLBACK_BUDGET


def check_step_memory(config: DecoderConfig, batch: int, tokens: int, budget: Optional[int] = None) -> None:
    """Raises TrainBudgetError naming batch, sequence length, the estimate and the budget when a
    step would not fit; allocates nothing."""
    limit = default_budget() if budget is None else budget
    need = step_bytes(config, batch, tokens)
    if need > limit:
        raise TrainBudgetError(f"a step of batch {batch} x sequence length {tokens} on this model "
                               f"({config.layers} blocks, width {config.model_width}, {config.parameter_count} "
                               f"parameters) needs about {need / 2**30:.3g} GiB; the memory budget is "
                               f"{limit / 2**30:.3g} GiB (lower --batch or --sequence-length)")
