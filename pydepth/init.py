"""Xavier-uniform scale: fan-based variance, standard deviation and uniform limit."""
from __future__ import annotations

import operator
from dataclasses import dataclass

from . import _core
from ._translate import raise_core
from .errors import InitializationError


@dataclass(frozen=True)
class XavierScale:
    """The formula-derived scale of one [fan_in, fan_out] matrix."""

    fan_in: int
    fan_out: int
    target_variance: float
    standard_deviation: float
    uniform_limit: float


def xavier_scale(fan_in: int, fan_out: int) -> XavierScale:
    """Variance 2/(fan_in+fan_out), its square root, and limit sqrt(6/(fan_in+fan_out))."""
    vals = []
    for name, v in (("fan_in", fan_in), ("fan_out", fan_out)):
        if isinstance(v, bool):
            raise InitializationError(f"{name} must be an integer, got {v!r}")
        try:
            v = operator.index(v)
        except TypeError:
            raise InitializationError(f"{name} must be an integer, got {v!r}") from None
        if v < 0 or v >= 2**64:
            raise InitializationError(f"{name} must be in [0, 2**64), got {v}")
        vals.append(v)
    try:
        return XavierScale(*_core.xavier_scale_raw(*vals))
    except _core.CoreError as err:
        raise_core(err)
