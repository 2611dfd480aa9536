# SPDX-License-Identifier: MIT
"""Which positions enter the RMS: a caller's ``mask`` (1 or True to keep) or MaxText/Levanter
``segment_ids`` (0 for padding), checked and turned into the float ``[batch, tokens]`` weights
the site taps select with."""
from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import ArgumentTypeError, EmptyValidityError, InvalidGeometryError

__all__ = ["valid_mask"]


def _concrete(what: str, value: Any) -> Optional[np.ndarray]:
    if isinstance(value, jax.core.Tracer):
        return None  # inside the caller's jit: only the shape can be checked
    try:
        return np.asarray(value)
    except (TypeError, ValueError) as err:
        raise ArgumentTypeError(f"{what} must be an array, got {type(value).__name__} ({err})") from None


def valid_mask(mask: Any, segment_ids: Any, *, concrete: bool = False) -> Optional[Any]:
    """``None`` (every position) or float ``[batch, tokens]`` with 1.0 where a position enters
    the RMS. ``mask`` must hold only 0 and 1 (or booleans), ``segment_ids`` integers (0 is
    padding); both at once, another rank, or (with ``concrete``) no valid position is refused."""
    if mask is not None and segment_ids is not None:
        raise ArgumentTypeError("pass mask or segment_ids, not both")
    what, value = ("mask", mask) if mask is not None else ("segment_ids", segment_ids)
    if value is None:
        return None
    arr = _concrete(what, value)
    if np.ndim(value) != 2:
        raise InvalidGeometryError(f"{what} must be [batch, tokens], got shape {tuple(np.shape(value))}")
    dtype = np.dtype(value.dtype) if hasattr(value, "dtype") else arr.dtype  # type: ignore[union-attr]
    if what == "segment_ids" and not (np.issubdtype(dtype, np.integer)):
        raise ArgumentTypeError(f"segment_ids must be integers (0 for padding), got dtype {dtype}")
    if arr is not None:
        if what == "mask" and not np.isin(arr, (0, 1)).all():
            raise ArgumentTypeError(f"mask must hold only 0 and 1 (or booleans), got values {np.unique(arr)[:5]}")
        if concrete and not (arr != 0).any():
            raise EmptyValidityError(f"the {what} selects no position (shape {arr.shape})")
    return (jnp.asarray(value) != 0).astype(float)  # the default float, as the site dummies
