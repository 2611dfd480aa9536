"""Depth scaling of the residual output projections of any recognized decoder, in place, once.

The schemes the field uses differ in formula and in the tensors they touch; here the tensors
come from :mod:`.architectures` and the formula from :func:`pydepth.bridge.schemes.scheme_factors`
(shared with the JAX bridge).
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

import torch
from torch import nn

from ..bridge.schemes import SCHEMES, DepthScalingRecord, ScaledTensor, Scheme, scheme_factors, scheme_name
from ..errors import AlreadyScaledError, ScalingSchemeError
from .architectures import ArchitectureSpec, DecoderLayout, find_layout, layout_from_patterns

__all__ = ["SCHEMES", "Scheme", "scheme_factors", "scheme_name", "tensor_std", "ScaledTensor",
           "DepthScalingRecord", "apply_depth_scaling", "scaling_history"]

_MARKER = "_pydepth_depth_scaling"  # module attribute holding the records of applied scalings


def tensor_std(tensor: torch.Tensor) -> float:
    """Population standard deviation of all elements, computed in float64."""
    return float(tensor.detach().to(torch.float64).std(correction=0))


def scaling_history(module: nn.Module) -> Tuple[DepthScalingRecord, ...]:
    """The depth scalings already applied to ``module`` through :func:`apply_depth_scaling`."""
    return tuple(getattr(module, _MARKER, ()))


def resolve_layout(module: nn.Module, architecture: Union[None, str, ArchitectureSpec],
                   patterns: Optional[Sequence[str]], depth: Optional[int]) -> DecoderLayout:
    """The layout from explicit patterns when given, else from the module's structure."""
    if patterns is not None:
        if architecture is not None:
            raise ScalingSchemeError("give either architecture or patterns, not both")
        return layout_from_patterns(module, patterns, depth)
    layout = find_layout(module, architecture)
    if depth is not None and depth != layout.depth:
        raise ScalingSchemeError(f"depth {depth!r} differs from the {layout.depth} layers found in "
                                 f"the {layout.architecture} module")
    return layout


def apply_depth_scaling(module: nn.Module, *, scheme: Scheme = "1/sqrt(L)",
                        architecture: Union[None, str, ArchitectureSpec] = None,
                        patterns: Optional[Sequence[str]] = None, depth: Optional[int] = None,
                        force: bool = False) -> DepthScalingRecord:
    """Multiplies every residual output projection of ``module`` in place (under ``no_grad``)
    by its layer's factor under ``scheme`` and returns the record.

    The tensors come from the module's recognized architecture (or ``architecture=``), or from
    ``patterns`` (regular expressions whose first group captures the layer index) for other
    models; ``depth`` defaults to the layers found. Every factor is computed and checked before
    any tensor changes. A second application to the same module raises
    :class:`pydepth.AlreadyScaledError` unless ``force=True``: double scaling is the bug this
    guards against."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    if not isinstance(force, bool):
        raise TypeError(f"force must be a bool, got {force!r}")
    name = scheme_name(scheme)
    layout = resolve_layout(module, architecture, patterns, depth)
    factors = scheme_factors(scheme, layout.depth)
    history = scaling_history(module)
    if history and not force:
        last = history[-1]
        raise AlreadyScaledError(
            f"{type(module).__name__} was already depth-scaled ({last.scheme} on {len(last.tensors)} "
            f"tensors of {last.architecture}); scaling again multiplies the factors — pass force=True "
            "if that is what you want")
    for p in layout.projections:
        if not p.parameter.dtype.is_floating_point:
            raise ScalingSchemeError(f"{p.name} has dtype {p.parameter.dtype}; only floating tensors can be scaled")
    before = [tensor_std(p.parameter) for p in layout.projections]
    rows = []
    with torch.no_grad():
        for p, std in zip(layout.projections, before):
            factor = factors[p.layer]
            p.parameter.mul_(factor)
            rows.append(ScaledTensor(p.name, p.layer, p.role, factor, std, tensor_std(p.parameter)))
    record = DepthScalingRecord(layout.architecture, name, layout.depth, tuple(rows), forced=bool(history))
    object.__setattr__(module, _MARKER, history + (record,))
    return record
