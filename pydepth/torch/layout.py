# SPDX-License-Identifier: MIT
"""What a decoder layout is: the layers, the residual sites' modules, and the tensors depth
scaling multiplies (found by :mod:`.structural` or read from a spec by :mod:`.architectures`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from torch import nn

__all__ = ["ResidualProjection", "DecoderLayout"]


@dataclass(frozen=True)
class ResidualProjection:
    """One tensor depth scaling multiplies: its layer, role and parameter. ``kind`` is
    ``"matrix"`` (a projection's weight, 2-D or fused 3-D experts) or ``"gain"`` (a post-branch
    norm's weight, whose effective gain is ``offset + weight``)."""

    layer: int
    role: str  # "attention-output" or "feed-forward-output" (or "pattern ...")
    name: str  # parameter name in module.named_parameters()
    parameter: nn.Parameter
    kind: str = "matrix"
    offset: float = 0.0


@dataclass(frozen=True)
class DecoderLayout:
    """What :func:`find_layout` found in one module. ``layers`` is empty when the layout came
    from name patterns (enough for scaling and audits, not for observing health).
    ``attention_added``/``feed_forward_added`` are the modules whose outputs are added to the
    residual stream (the post-branch norm when there is one, else the output projection), times
    ``attention_multipliers``/``feed_forward_multipliers`` (empty: 1). ``unscalable`` says why depth
    scaling has no tensors to multiply in a layout that can still be observed."""

    architecture: str
    depth: int
    projections: Tuple[ResidualProjection, ...]
    layers: Tuple[nn.Module, ...] = ()
    layer_paths: Tuple[str, ...] = ()
    attention_outputs: Tuple[nn.Module, ...] = ()
    feed_forward_outputs: Tuple[nn.Module, ...] = ()
    attention_norms: Tuple[Optional[nn.Module], ...] = ()
    feed_forward_norms: Tuple[Optional[nn.Module], ...] = ()
    mid_norms: Tuple[Optional[nn.Module], ...] = ()
    final_norm: Optional[nn.Module] = None
    parallel_residual: bool = False
    norm_placement: str = "pre"
    gain_offset: float = 0.0
    attention_added: Tuple[nn.Module, ...] = ()
    feed_forward_added: Tuple[nn.Module, ...] = ()
    attention_multipliers: Tuple[float, ...] = ()
    feed_forward_multipliers: Tuple[float, ...] = ()
    unscalable: Optional[str] = None

    @property
    def projection_names(self) -> Tuple[str, ...]:
        """Parameter names of the tensors depth scaling multiplies, in layer order."""
        return tuple(p.name for p in self.projections)
