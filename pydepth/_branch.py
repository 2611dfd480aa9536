# SPDX-License-Identifier: MIT
"""The residual-branch multipliers a model is built with (docs/numerics.md §5.9): checked once, stored per block."""

from __future__ import annotations

import math
from typing import Any, Optional, Tuple

from .errors import ParametrizationError


def branch_tuple(layers: int, value: Any) -> Optional[Tuple[float, ...]]:
    """``value`` (None, one real number for every block, or one per block) as a tuple of
    ``layers`` floats, or None when every multiplier is 1.0 (the model then has none). A value
    that is not a positive finite real number raises :class:`ParametrizationError` naming the block."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        values: Tuple[Any, ...] = (value,) * layers
    else:
        try:
            values = tuple(value)
        except TypeError:
            raise ParametrizationError(
                f"branch multipliers must be a real number or one per block, got {value!r:.80}"
            ) from None
    if len(values) != layers:
        raise ParametrizationError(f"branch multipliers: {len(values)} given for a decoder of {layers} blocks")
    out = []
    for b, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ParametrizationError(f"branch multiplier of block {b} must be a real number, got {v!r:.80}")
        f = float(v)
        if not (math.isfinite(f) and f > 0.0):
            raise ParametrizationError(f"branch multiplier of block {b} must be positive and finite, got {f!r}")
        out.append(f)
    return None if all(f == 1.0 for f in out) else tuple(out)
