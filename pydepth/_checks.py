"""One integer check shared by every public constructor: exact ints in a u64 range."""
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
