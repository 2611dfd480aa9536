# SPDX-License-Identifier: MIT
"""Checks shared by every public entry point: exact ints in a range, real and positive finite
numbers, plain (unmasked) arrays. Each refusal raises the caller's error type naming the value."""
from __future__ import annotations

import math
import numbers
import operator
from typing import TYPE_CHECKING, Any, Optional, Tuple, Type

if TYPE_CHECKING:
    import numpy as np

U64_MAX = 2**64 - 1


def as_int(name: str, value: Any, error: Type[Exception], *, minimum: int = 0,
           maximum: Optional[int] = None) -> int:
    """value as an exact int >= minimum (and <= maximum when given); bools, floats and strings
    raise error(name...)."""
    if isinstance(value, bool):
        raise error(f"{name} must be an integer, got {value!r}")
    try:
        v = operator.index(value)
    except TypeError:
        raise error(f"{name} must be an integer, got {value!r}") from None
    if maximum is None and v < minimum:
        raise error(f"{name} must be non-negative, got {v}" if minimum == 0 else
                    f"{name} must be at least {minimum}, got {v}")
    if maximum is not None and (v < minimum or v > maximum):
        upper = "2**64)" if maximum == U64_MAX else f"{maximum}]"
        raise error(f"{name} must be in [{minimum}, {upper}, got {v}")
    return v


def as_u64(name: str, value: Any, error: Type[Exception], *, minimum: int = 0,
           maximum: int = U64_MAX) -> int:
    """value as an int in [minimum, maximum]; bools, floats and strings raise error(name...)."""
    return as_int(name, value, error, minimum=minimum, maximum=maximum)


def as_real(name: str, value: Any, error: Type[Exception], *, what: str = "a real number") -> float:
    """value (a real number, not a bool) as a float; anything else raises error(name...)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise error(f"{name} must be {what}, got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        raise error(f"{name} must be {what}, got {value!r}") from None


def as_positive_finite(name: str, value: Any, error: Type[Exception]) -> float:
    """value as a float that is finite and > 0; anything else raises error(name...)."""
    v = as_real(name, value, error, what="a positive finite number")
    if not (math.isfinite(v) and v > 0.0):
        raise error(f"{name} must be a positive finite number, got {value!r}")
    return v


def plain_array(name: str, value: Any, error: Type[Exception], **kw: Any) -> np.ndarray:
    """np.asarray(value, **kw), refusing masked arrays (their mask would be silently dropped) and
    ragged nested sequences with error(name...)."""
    import numpy as np
    if isinstance(value, np.ma.MaskedArray):
        raise error(f"{name} is a masked array; pass plain values (the mask would be ignored)")
    try:
        return np.asarray(value, **kw)
    except (ValueError, TypeError, OverflowError) as err:
        raise error(f"{name} is not a rectangular numeric array: {err}") from None


def branch_tuple(layers: int, value: Any, error: Type[Exception]) -> Optional[Tuple[float, ...]]:
    """``value`` (None, one real number for every block, or one per block) as a tuple of
    ``layers`` floats, or None when every multiplier is 1.0 (the model then has none). A value
    that is not a positive finite real number raises ``error`` naming the block
    (the residual-branch multipliers of docs/numerics.md §5.9)."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        values: Tuple[Any, ...] = (value,) * layers
    else:
        try:
            values = tuple(value)
        except TypeError:
            raise error(
                f"branch multipliers must be a real number or one per block, got {value!r:.80}"
            ) from None
    if len(values) != layers:
        raise error(f"branch multipliers: {len(values)} given for a decoder of {layers} blocks")
    out = []
    for b, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise error(f"branch multiplier of block {b} must be a real number, got {v!r:.80}")
        f = float(v)
        if not (math.isfinite(f) and f > 0.0):
            raise error(f"branch multiplier of block {b} must be positive and finite, got {f!r}")
        out.append(f)
    return None if all(f == 1.0 for f in out) else tuple(out)
