# SPDX-License-Identifier: MIT
"""Depth scaling of the residual outputs of any recognized decoder, in place, once.

The schemes the field uses differ in formula and in the tensors they touch; here the tensors
come from :mod:`.architectures` and the formula from :mod:`.schemes` (``"1/sqrt(L)"``,
``"1/sqrt(2L)"`` alias ``"megatron"``, ``"per-layer"`` alias ``"torchtitan"``, or a callable
``(layer_index, depth) -> factor``). For pre-norm layers the tensors are the output
projections' weights (every expert's, fused 3-D tensors included); where a norm follows each
branch (``post``, ``sandwich``: OLMo2, Gemma2, Gemma3) that norm sets the scale of what the
branch adds, so its effective gain is scaled instead.

A repeat is refused: the scaling is recorded on the module, on each scaled parameter and in a
Hugging Face config (:mod:`.marks`, so ``save_pretrained``/``from_pretrained`` keep it), and
weights that already follow a scaled scheme (a copy loaded with ``load_state_dict``, a stock
GPT-2) are caught by the audit.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

import torch
from torch import nn

from ..errors import AlreadyScaledError, ArchitectureError, ArgumentTypeError, ScalingSchemeError
from .architectures import ArchitectureSpec, DecoderLayout, ResidualProjection, resolve_layout
from .audit import audit_layout, projection_scale
from .marks import config_records, leave_mark, module_records, recorded_scalings
from ..bridge.schemes import DepthScalingRecord, ScaledTensor
from .schemes import SCHEMES, Scheme, fitting_compositions, scheme_factors, scheme_name, tensor_std

__all__ = ["SCHEMES", "Scheme", "scheme_factors", "scheme_name", "tensor_std", "ScaledTensor",
           "DepthScalingRecord", "apply_depth_scaling", "scaling_history", "resolve_layout"]


def scaling_history(module: nn.Module) -> Tuple[DepthScalingRecord, ...]:
    """The depth scalings applied to this module object through :func:`apply_depth_scaling`."""
    return module_records(module)


def _previous(module: nn.Module, layout: DecoderLayout) -> Optional[str]:
    """Why ``module`` looks depth-scaled already (None when nothing says so)."""
    recorded = recorded_scalings(module, [p.parameter for p in layout.projections])
    if recorded:
        last = recorded[-1]
        return (f"was already depth-scaled ({last.get('scheme')} on {last.get('tensors')} tensors of "
                f"{last.get('architecture')}, recorded on the {last.get('where')})")
    if layout.architecture == "patterns" or not layout.projections:
        return None
    try:  # measured / base for every residual output: a scheme of factor 1 expects the base
        audit = audit_layout(module, layout, _unit, None, 0.2)
    except ScalingSchemeError:  # no base to compare with: nothing to say
        return None
    ratios = [(r.layer, r.ratio) for r in audit.rows if r.role == "residual-output" and r.layer is not None]
    follows = fitting_compositions(ratios, layout.depth, 0.2)
    if follows:
        return (f"has residual outputs that already follow {follows[0]} (audit_initialization; e.g. a stock "
                "initialization that scales them, or scaled weights loaded with load_state_dict)")
    return None


def _unit(layer: int, depth: int) -> float:
    """The factor-1 scheme: the audit's expected scale is then the base itself."""
    return 1.0


def _multiply(p: ResidualProjection, factor: float) -> None:
    if p.kind == "gain" and p.offset:  # the effective gain offset + w becomes factor * (offset + w)
        p.parameter.add_(p.offset).mul_(factor).sub_(p.offset)
    else:
        p.parameter.mul_(factor)


def apply_depth_scaling(module: nn.Module, *, scheme: Scheme = "1/sqrt(L)",
                        architecture: Union[str, ArchitectureSpec, None] = None,
                        patterns: Optional[Sequence[str]] = None, depth: Optional[int] = None,
                        force: bool = False) -> DepthScalingRecord:
    """Multiplies every residual output of ``module`` in place (under ``no_grad``) by its layer's
    factor under ``scheme`` and returns the record.

    The tensors come from the module's recognized architecture (or ``architecture=``), or from
    ``patterns`` (regular expressions whose first group captures the layer index) for other
    models; ``depth`` defaults to the layers found. Every factor is computed and checked before
    any tensor changes. A repeat raises :class:`pydepth.AlreadyScaledError` unless
    ``force=True``: a scaling recorded on the module, its parameters or its config, or weights
    that already follow a scaled scheme by the audit. Double scaling is the bug this guards against."""
    check_module_and_force(module, force)
    name = scheme_name(scheme)
    layout = scalable_layout(module, architecture, patterns, depth, "depth-scaled")
    return scale_layout(module, layout, scheme, name, force)


def check_module_and_force(module: nn.Module, force: bool) -> None:
    """The argument checks every in-place scaling of a torch module makes first."""
    if not isinstance(module, nn.Module):
        raise ArgumentTypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    if not isinstance(force, bool):
        raise ArgumentTypeError(f"force must be a bool, got {force!r:.80}")


def scalable_layout(module: nn.Module, architecture: Union[str, ArchitectureSpec, None],
                    patterns: Optional[Sequence[str]], depth: Optional[int], what: str) -> DecoderLayout:
    """The module's decoder layout, refused with :class:`pydepth.ArchitectureError` when its
    residual outputs cannot be scaled (``what`` says what was asked: depth-scaled, parametrized)."""
    layout = resolve_layout(module, architecture, patterns, depth)
    if layout.unscalable:
        raise ArchitectureError(f"{type(module).__name__} is observed as {layout.architecture} but cannot be "
                                f"{what}: {layout.unscalable}")
    return layout


def scale_layout(module: nn.Module, layout: DecoderLayout, scheme: Scheme, name: str,
                 force: bool) -> DepthScalingRecord:
    """:func:`apply_depth_scaling` on a layout already resolved and found scalable."""
    factors = scheme_factors(scheme, layout.depth)
    for p in layout.projections:
        if not p.parameter.dtype.is_floating_point:
            raise ScalingSchemeError(f"{p.name} has dtype {p.parameter.dtype}; only floating tensors can be scaled")
    previous = _previous(module, layout)
    if previous is not None and not force:
        raise AlreadyScaledError(f"{type(module).__name__} {previous}; scaling again multiplies the factors — "
                                 "pass force=True if that is what you want")
    earlier = config_records(module, [p.parameter for p in layout.projections])
    before = [projection_scale(p) for p in layout.projections]
    rows = []
    with torch.no_grad():
        for p, scale in zip(layout.projections, before):
            factor = factors[p.layer]
            _multiply(p, factor)
            rows.append(ScaledTensor(p.name, p.layer, p.role, factor, scale, projection_scale(p), p.kind))
    multipliers = tuple(dict.fromkeys(m for m in (*layout.attention_multipliers, *layout.feed_forward_multipliers)
                                      if m != 1.0))
    record = DepthScalingRecord(layout.architecture, name, layout.depth, tuple(rows), forced=previous is not None,
                                residual_multipliers=multipliers)
    leave_mark(module, [p.parameter for p in layout.projections], record, earlier)
    return record
