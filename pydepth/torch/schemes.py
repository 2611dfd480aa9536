"""Depth-scaling schemes by name: their factors, what each is known as, and which of them a set
of measured ratios follows.

* ``"1/sqrt(L)"`` — this project's policy (chapter 6), the factor of :class:`pydepth.DepthScalePolicy`;
* ``"1/sqrt(2L)"`` — GPT-2, nanoGPT and Megatron's scaled init (``σ/√(2L)``: two residual
  additions per layer); also accepted as ``"megatron"`` or ``"gpt2"``;
* ``"per-layer"`` — ``1/sqrt(2(l+1))`` for layer ``l`` (0-based): torchtitan's depth init and
  OLMo's "mitchell" init; also accepted as ``"torchtitan"``;
* a callable ``(layer_index, depth) -> factor``.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Callable, Dict, List, Sequence, Tuple, Union

import torch

from ..errors import ScalingSchemeError

__all__ = ["SCHEMES", "SCHEME_ALIASES", "KNOWN_AS", "Scheme", "scheme_name", "scheme_factors",
           "tensor_std", "near", "fitting_schemes"]

#: The named schemes; a callable ``(layer_index, depth) -> factor`` is accepted as well.
SCHEMES: Tuple[str, ...] = ("1/sqrt(L)", "1/sqrt(2L)", "per-layer")

#: Other names people use for the same schemes.
SCHEME_ALIASES: Dict[str, str] = {"megatron": "1/sqrt(2L)", "gpt2": "1/sqrt(2L)", "torchtitan": "per-layer"}

#: Who uses each scheme (for reports).
KNOWN_AS: Dict[str, str] = {
    "1/sqrt(L)": "pydepth's depth policy",
    "1/sqrt(2L)": "GPT-2, nanoGPT, Megatron's scaled init sigma/sqrt(2L)",
    "per-layer": "torchtitan's depth init, OLMo's mitchell init: 1/sqrt(2(l+1))",
}

Scheme = Union[str, Callable[[int, int], float]]

_FORMULAS: Dict[str, Callable[[int, int], float]] = {
    "1/sqrt(L)": lambda layer, depth: 1.0 / math.sqrt(float(depth)),
    "1/sqrt(2L)": lambda layer, depth: 1.0 / math.sqrt(2.0 * float(depth)),
    "per-layer": lambda layer, depth: 1.0 / math.sqrt(2.0 * float(layer + 1)),
}


def scheme_name(scheme: Scheme) -> str:
    """The scheme's canonical name (aliases resolved; a callable's qualified name)."""
    if isinstance(scheme, str):
        name = SCHEME_ALIASES.get(scheme, scheme)
        if name not in SCHEMES:
            raise ScalingSchemeError(f"unknown scheme {scheme!r}; use one of {list(SCHEMES)} (or "
                                     f"{sorted(SCHEME_ALIASES)}) or a callable (layer_index, depth) -> factor")
        return name
    if callable(scheme):
        return f"callable {getattr(scheme, '__qualname__', type(scheme).__name__)}"
    raise ScalingSchemeError(f"scheme must be one of {list(SCHEMES)} or a callable, got {scheme!r}")


def scheme_factors(scheme: Scheme, depth: int) -> Tuple[float, ...]:
    """The factor of every layer ``0 .. depth-1`` under ``scheme``; each is checked positive and
    finite (:class:`pydepth.ScalingSchemeError` names the layer and the value otherwise)."""
    name = scheme_name(scheme)
    if isinstance(depth, bool) or not isinstance(depth, int) or depth <= 0:
        raise ScalingSchemeError(f"depth must be a positive integer, got {depth!r}")
    formula = _FORMULAS.get(name) or scheme  # type: ignore[arg-type]
    out: List[float] = []
    for layer in range(depth):
        f: Any = formula(layer, depth)  # type: ignore[operator]
        if isinstance(f, bool) or not isinstance(f, numbers.Real):
            raise ScalingSchemeError(f"scheme {name} gave {f!r} for layer {layer}; a factor must be a real number")
        f = float(f)
        if not (math.isfinite(f) and f > 0.0):
            raise ScalingSchemeError(f"scheme {name} gave factor {f!r} for layer {layer} "
                                     f"of {depth}; a factor must be positive and finite")
        out.append(f)
    return tuple(out)


def tensor_std(tensor: torch.Tensor) -> float:
    """Population standard deviation of all elements, computed in float64."""
    return float(tensor.detach().to(torch.float64).std(correction=0))


def near(ratio: float, target: float, tolerance: float) -> bool:
    """Whether ``ratio`` is within ``tolerance`` of ``target`` (relative, symmetric in log space)."""
    return ratio > 0.0 and abs(math.log(ratio / target)) <= math.log1p(tolerance)


def fitting_schemes(ratios: Sequence[Tuple[int, float]], depth: int, tolerance: float) -> Tuple[str, ...]:
    """The named schemes every ``(layer, measured/base)`` ratio fits, and ``"unscaled"`` when all
    are near 1. A scheme whose factors are all near 1 (one layer) is not told apart from unscaled."""
    if not ratios:
        return ()
    out = []
    for name in SCHEMES:
        factors = scheme_factors(name, depth)
        if all(near(f, 1.0, tolerance) for f in factors):
            continue
        if all(near(r, factors[layer], tolerance) for layer, r in ratios):
            out.append(name)
    if all(near(r, 1.0, tolerance) for _, r in ratios):
        out.append("unscaled")
    return tuple(out)
