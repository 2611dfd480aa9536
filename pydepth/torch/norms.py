# SPDX-License-Identifier: MIT
"""What a norm module multiplies by: its gain parameter, the offset (``weight`` or
``1 + weight``, Gemma) found by running it, and whether a module is a norm at all."""
from __future__ import annotations

import math
from typing import Optional

import torch
from torch import nn

__all__ = ["gain_parameter", "effective_gain", "gain_mismatch", "is_norm", "norm_offset", "GAIN_OFFSETS"]

#: The gain offsets a norm may have: ``weight`` (0) or ``1 + weight`` (1).
GAIN_OFFSETS = (0.0, 1.0)


def gain_parameter(norm: nn.Module) -> Optional[torch.Tensor]:
    """The norm's 1-D gain (``gain`` or ``weight``), None when it has none."""
    for attr in ("gain", "weight"):
        g = getattr(norm, attr, None)
        if isinstance(g, torch.Tensor) and g.ndim == 1:
            return g
    return None


def is_norm(module: nn.Module) -> bool:
    """A module whose class name says norm and that holds a 1-D gain."""
    return "norm" in type(module).__name__.lower() and gain_parameter(module) is not None


def effective_gain(norm: nn.Module, offset: float) -> Optional[torch.Tensor]:
    """The per-feature factor ``offset + weight`` a norm multiplies by (detached, float64)."""
    g = gain_parameter(norm)
    return None if g is None else g.detach().to(torch.float64) + offset


def _seen_gain(norm: nn.Module, g: torch.Tensor) -> torch.Tensor:
    x = torch.ones(1, g.numel(), dtype=g.dtype, device=g.device)
    x[:, 1::2] = -1.0  # zero mean, unit RMS: a LayerNorm and an RMSNorm both return ~gain * x
    with torch.no_grad():
        return ((norm.forward(x) - norm.forward(-x)) * x * 0.5).to(torch.float64)[0]


def gain_mismatch(norm: nn.Module, offset: float) -> Optional[str]:
    """Why ``norm`` does not multiply by ``offset + weight`` (None when it does, or cannot be probed)."""
    g = gain_parameter(norm)
    if g is None or g.numel() % 2 or not g.dtype.is_floating_point:
        return None if offset == 0.0 else f"{type(norm).__name__} has no gain to check (gain_offset)"
    try:
        want = g.detach().to(torch.float64) + offset
        bad = [i for i, v in enumerate(want.tolist()) if not math.isfinite(v)]
        if bad:
            return f"{type(norm).__name__} has a non-finite gain ({want[bad[0]].item()!r} at feature {bad[0]})"
        seen = _seen_gain(norm, g)
    except Exception:  # a norm that needs other arguments, or has no values (meta device), cannot be run
        return None if offset == 0.0 else (f"{type(norm).__name__} could not be run to check that it "
                                           f"multiplies by {offset:g} + weight (gain_offset)")
    if bool(((seen - want).abs() <= 0.02 * (1.0 + want.abs())).all()):
        return None
    return (f"{type(norm).__name__} multiplies by {float(seen[0]):.4g} where offset {offset:g} + weight "
            f"is {float(want[0]):.4g} (gain_offset)")


def norm_offset(norm: nn.Module) -> Optional[float]:
    """The offset of :data:`GAIN_OFFSETS` the norm multiplies by (None when neither fits)."""
    for offset in GAIN_OFFSETS:
        if gain_mismatch(norm, offset) is None:
            return offset
    return None
