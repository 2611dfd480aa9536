# SPDX-License-Identifier: MIT
"""Xavier-uniform scale: fan-based variance, standard deviation and uniform limit."""
from __future__ import annotations

from dataclasses import dataclass

from ._native import _rng, _status
from ._checks import as_u64
from ._native._translate import raise_core
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
    vals = [as_u64("fan_in", fan_in, InitializationError), as_u64("fan_out", fan_out, InitializationError)]
    try:
        return XavierScale(*_rng.xavier_scale_raw(*vals))
    except _status.CoreError as err:
        raise_core(err)
