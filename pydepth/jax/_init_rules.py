# SPDX-License-Identifier: MIT
"""The standard deviation a JAX library's default initializer gives a tensor: one table for the
audit (:mod:`.audit`), by library and role.

* Flax Linen and NNX ``Dense``, ``DenseGeneral``, ``nnx.Linear``: ``lecun_normal``, i.e.
  ``variance_scaling(1, "fan_in", "truncated_normal")`` — std ``1/sqrt(fan_in)`` (the truncated
  normal is rescaled to that std). A kernel lays its input axes first: a residual output
  projection (whose last axis is the model width) has fan-in the product of all axes but the
  last; another kernel of three or more axes (``DenseGeneral`` to heads, ``[width, heads, head]``)
  has fan-in the product of its leading axes up to one of the splits, the split nearest to the
  measured std (which split a ``DenseGeneral`` used is not in its variables).
* Flax ``Embed`` (Linen and NNX): ``variance_scaling(1, "fan_in", "normal", out_axis=0)`` — std
  ``1/sqrt(features)``.
* Equinox ``nn.Linear``: uniform on ``±1/sqrt(in_features)`` — std ``1/sqrt(3 in_features)``; the
  weight is ``[out, in]``, so the fan-in is the last axis. Equinox ``nn.Embedding``: a standard
  normal, std 1.
* Norm gains (every library's ``RMSNorm``/``LayerNorm`` scale): 1, judged by their RMS.
"""
from __future__ import annotations

import math
from typing import Callable, Dict, Sequence, Tuple

__all__ = ["MATRIX_RULES", "EMBEDDING_RULES", "GAIN_STD", "fan_in_splits", "nearest"]

#: the scale every library's norm gains start at
GAIN_STD = 1.0

Shape = Tuple[int, ...]


def fan_in_splits(shape: Shape) -> Tuple[int, ...]:
    """The fan-ins of a kernel whose input axes come first: the product of the leading 1, 2, ...
    axes (all but the last at most)."""
    return tuple(math.prod(shape[:k]) for k in range(1, len(shape)))


def _lecun(shape: Shape, residual: bool, measured: float) -> float:
    if residual or len(shape) == 2:
        return 1.0 / math.sqrt(float(math.prod(shape[:-1])))
    candidates = [1.0 / math.sqrt(float(f)) for f in fan_in_splits(shape)]
    return min(candidates, key=lambda s: abs(math.log(measured / s)) if measured > 0.0 else s)


def _equinox_linear(shape: Shape, residual: bool, measured: float) -> float:
    return 1.0 / math.sqrt(3.0 * float(shape[-1]))


#: library -> (rule name, std of a matrix from its per-layer shape, residual role and measured std)
MATRIX_RULES: Dict[str, Tuple[str, Callable[[Shape, bool, float], float]]] = {
    "flax-linen": ("Flax lecun_normal 1/sqrt(fan_in)", _lecun),
    "flax-nnx": ("Flax lecun_normal 1/sqrt(fan_in)", _lecun),
    "equinox": ("Equinox Linear U(+-1/sqrt(fan_in)): 1/sqrt(3 fan_in)", _equinox_linear),
    # a plain function has no initializer of record: the common fan-in rule, or else the median
    "jax-function": ("1/sqrt(fan_in)", _lecun),
}

#: library -> (rule name, std of an embedding from its shape)
EMBEDDING_RULES: Dict[str, Tuple[str, Callable[[Shape], float]]] = {
    "flax-linen": ("Flax Embed 1/sqrt(features)", lambda shape: 1.0 / math.sqrt(float(shape[-1]))),
    "flax-nnx": ("Flax Embed 1/sqrt(features)", lambda shape: 1.0 / math.sqrt(float(shape[-1]))),
    "equinox": ("Equinox Embedding N(0, 1)", lambda shape: 1.0),
    "jax-function": ("jax.random.normal N(0, 1)", lambda shape: 1.0),
}


def nearest(measured: float, candidates: Sequence[Tuple[str, float]]) -> Tuple[str, float]:
    """The ``(name, std)`` candidate nearest to ``measured`` in log space (the first on a tie)."""
    if not measured > 0.0:
        return candidates[0]
    return min(candidates, key=lambda c: abs(math.log(measured / c[1])))
