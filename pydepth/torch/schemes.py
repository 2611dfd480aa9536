# SPDX-License-Identifier: MIT
"""Depth-scaling schemes for the PyTorch bridge: the names, factors and fits of
:mod:`pydepth.bridge.schemes` (their one owner) and the measure of a torch tensor's scale."""
from __future__ import annotations

import torch

from ..bridge.schemes import (KNOWN_AS, SCHEME_ALIASES, SCHEMES, Scheme, fitting_schemes, near, scheme_factors,
                              scheme_name)

__all__ = ["SCHEMES", "SCHEME_ALIASES", "KNOWN_AS", "Scheme", "scheme_name", "scheme_factors",
           "tensor_std", "near", "fitting_schemes"]


def tensor_std(tensor: torch.Tensor) -> float:
    """Population standard deviation of all elements, computed in float64."""
    return float(tensor.detach().to(torch.float64).std(correction=0))
