# SPDX-License-Identifier: MIT
"""Depth-scaling schemes for the PyTorch bridge: the names, factors and fits of
:mod:`pydepth.bridge.schemes` (their one owner) and the measure of a torch tensor's scale."""
from __future__ import annotations

import itertools
from typing import Sequence, Tuple

import torch

from ..bridge.schemes import (KNOWN_AS, SCHEME_ALIASES, SCHEMES, Scheme, fitting_schemes, near, scheme_factors,
                              scheme_name)

__all__ = ["SCHEMES", "SCHEME_ALIASES", "KNOWN_AS", "Scheme", "scheme_name", "scheme_factors",
           "tensor_std", "near", "fitting_schemes", "fitting_compositions"]


def tensor_std(tensor: torch.Tensor) -> float:
    """Population standard deviation of all elements, computed in float64."""
    return float(tensor.detach().to(torch.float64).std(correction=0))


def _composition_name(combo: Sequence[str]) -> str:
    if len(set(combo)) == 1:
        return combo[0] if len(combo) == 1 else f"{combo[0]} applied {len(combo)} times"
    return " then ".join(combo)


def fitting_compositions(ratios: Sequence[Tuple[int, float]], depth: int, tolerance: float,
                         repeats: int = 3) -> Tuple[str, ...]:
    """The named schemes applied one to ``repeats`` times (in any combination) whose product of
    factors every ``(layer, measured/base)`` ratio fits; a product near 1 everywhere is skipped."""
    if not ratios:
        return ()
    factors = {name: scheme_factors(name, depth) for name in SCHEMES}
    out = []
    for n in range(1, repeats + 1):
        for combo in itertools.combinations_with_replacement(SCHEMES, n):
            product = [1.0] * depth
            for name in combo:
                product = [a * b for a, b in zip(product, factors[name])]
            if all(near(f, 1.0, tolerance) for f in product):
                continue
            if all(near(r, product[layer], tolerance) for layer, r in ratios):
                out.append(_composition_name(combo))
    return tuple(out)
