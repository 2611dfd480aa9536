"""Checks shared by every public entry point: exact ints in a range, plain (unmasked) arrays."""
from __future__ import annotations

import operator
from typing import Any, Type

U64_MAX = 2**64 - 1


def as_u64(name: str, value: Any, error: Type[Exception], *, minimum: int = 0,
           maximum: int = U64_MAX) -> int:
    """value as an int in [minimum, maximum]; bools, floats and strings raise error(name...)."""
    if isinstance(value, bool):
        raise error(f"{name} must be an integer, got {value!r}")
    try:
        v = operator.index(value)
    except TypeError:
        raise error(f"{name} must be an integer, got {value!r}") from None
    if v < minimum or v > maximum:
        upper = "2**64)" if maximum == U64_MAX else f"{maximum}]"
        raise error(f"{name} must be in [{minimum}, {upper}, got {v}")
    return v


def plain_array(name: str, value: Any, error: Type[Exception], **kw: Any) -> "np.ndarray":
    """np.asarray(value, **kw), refusing masked arrays (their mask would be silently dropped) and
    ragged nested sequences with error(name...)."""
    import numpy as np
    if isinstance(value, np.ma.MaskedArray):
        raise error(f"{name} is a masked array; pass plain values (the mask would be ignored)")
    try:
        return np.asarray(value, **kw)
    except (ValueError, TypeError, OverflowError) as err:
        raise error(f"{name} is not a rectangular numeric array: {err}") from None
