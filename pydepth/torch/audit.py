# SPDX-License-Identifier: MIT
"""Initialization audit: every weight tensor's measured scale against what a depth scheme
predicts, which known scheme the residual outputs follow, and a verdict that names the usual
mistakes (unscaled, double-scaled).

Expected scales: the base for ordinary tensors and ``base * factor`` for the tensors depth
scaling multiplies (:mod:`.architectures`). For matrices (2-D, and fused 3-D expert tensors)
the scale is the standard deviation and the base is ``base_std`` when given; for pydepth's twin
each matrix's Xavier-uniform ``sqrt(2 / (fan_in + fan_out))``; for a Hugging Face model its
config's ``initializer_range``; otherwise the median measured standard deviation of the other
matrices. For the post-branch norm gains of ``post``/``sandwich`` families the scale is the RMS
of the effective gain (``1 + weight`` for Gemma) and the base is 1, every family's initial gain.
"""
from __future__ import annotations

import math
import statistics
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import nn

from .._checks import as_positive_finite
from ..errors import ScalingSchemeError
from .architectures import ArchitectureSpec, DecoderLayout, ResidualProjection, resolve_layout
from .marks import recorded_scalings
from ..bridge.schemes import VERDICTS, AuditRow, InitializationAudit
from ..bridge.schemes import audit_verdict as _verdict
from .schemes import SCHEMES, Scheme, fitting_schemes, scheme_factors, scheme_name, tensor_std

__all__ = ["VERDICTS", "AuditRow", "InitializationAudit", "audit_initialization", "audit_layout",
           "projection_scale"]

def _positive(name: str, value: Any) -> float:
    return as_positive_finite(name, value, ScalingSchemeError)


def projection_scale(p: ResidualProjection) -> float:
    """A scaled tensor's scale: the standard deviation of a matrix, the RMS of a norm's effective gain."""
    if p.kind == "gain":
        g = p.parameter.detach().to(torch.float64) + p.offset
        return float(g.square().mean().sqrt())
    return tensor_std(p.parameter)


def _base(module: nn.Module, layout: DecoderLayout, base_std: Optional[float],
          measured: Dict[str, float], residual: Dict[int, ResidualProjection],
          matrices: Sequence[Tuple[str, nn.Parameter]]) -> Tuple[Callable[[Tuple[int, ...]], float], str]:
    """The base scale of a matrix (as a function of its shape) and where it came from."""
    if base_std is not None:
        base = _positive("base_std", base_std)
        return (lambda shape: base), "base_std argument"
    if layout.architecture == "pydepth-twin":
        return (lambda shape: math.sqrt(2.0 / float(shape[0] + shape[1]))), \
            "Xavier-uniform sqrt(2/(fan_in+fan_out)) per matrix"
    cfg_range = getattr(getattr(module, "config", None), "initializer_range", None)
    if isinstance(cfg_range, (int, float)) and not isinstance(cfg_range, bool):
        base = _positive("config.initializer_range", cfg_range)
        return (lambda shape: base), f"config.initializer_range = {base:g}"
    others = [measured[n] for n, p in matrices if id(p) not in residual]
    if not others:
        raise ScalingSchemeError(f"{type(module).__name__} has no matrix besides the residual "
                                 "output projections to estimate a base from; pass base_std")
    base = statistics.median(others)
    return (lambda shape: base), f"median of the other {len(others)} matrices = {base:.6g}"


def _chosen_scheme(scheme: Optional[Scheme], recorded: Sequence[Dict[str, Any]],
                   follows: Sequence[str]) -> Tuple[Scheme, str]:
    if scheme is not None:
        return scheme, "argument"
    if recorded and recorded[-1].get("scheme") in SCHEMES:
        return recorded[-1]["scheme"], "recorded"
    named = [n for n in follows if n in SCHEMES]
    if named:
        return named[0], "detected"
    return "1/sqrt(L)", "default"


def audit_initialization(module: nn.Module, scheme: Optional[Scheme] = None,
                         base_std: Optional[float] = None, *,
                         architecture: Union[str, ArchitectureSpec, None] = None,
                         patterns: Optional[Sequence[str]] = None, depth: Optional[int] = None,
                         tolerance: float = 0.2) -> InitializationAudit:
    """Compares every weight tensor's scale with ``scheme``'s prediction and names the known
    schemes the residual outputs follow.

    ``scheme`` defaults to the one recorded on the model (or its config) by
    :func:`apply_depth_scaling`, else the known scheme it follows, else ``"1/sqrt(L)"``. A ratio
    ``measured / expected`` within ``tolerance`` (relative, symmetric in log space) is ``ok``;
    for residual outputs a ratio near ``1/factor`` is ``unscaled`` and near ``factor`` is
    ``double-scaled``; anything else is ``off``. Reads the module only."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    if scheme is not None:
        scheme_name(scheme)
    tol = _positive("tolerance", tolerance)
    return audit_layout(module, resolve_layout(module, architecture, patterns, depth), scheme, base_std, tol)


def audit_layout(module: nn.Module, layout: DecoderLayout, scheme: Optional[Scheme],
                 base_std: Optional[float], tol: float) -> InitializationAudit:
    """The audit of ``module`` whose layout is already known (see :func:`audit_initialization`)."""
    residual = {id(p.parameter): p for p in layout.projections}
    embeddings = {id(m.weight) for m in module.modules()
                  if isinstance(m, nn.Embedding) or type(m).__name__ == "_Embedding"}
    tensors = [(n, p) for n, p in module.named_parameters()
               if p.dtype.is_floating_point and (p.ndim >= 2 or id(p) in residual)]
    matrices = [(n, p) for n, p in tensors if p.ndim >= 2]
    measured = {n: (projection_scale(residual[id(p)]) if id(p) in residual else tensor_std(p)) for n, p in tensors}
    base_for, source = _base(module, layout, base_std, measured, residual, matrices)
    if any(p.kind == "gain" for p in layout.projections):
        source += "; 1 for post-branch norm gains"

    def expected_base(p: nn.Parameter) -> float:
        proj = residual.get(id(p))
        return 1.0 if proj is not None and proj.kind == "gain" else base_for(tuple(p.shape))

    ratios = [(residual[id(p)].layer, measured[n] / expected_base(p)) for n, p in tensors if id(p) in residual]
    follows = fitting_schemes(ratios, layout.depth, tol)
    recorded = recorded_scalings(module, [p.parameter for p in layout.projections])
    chosen, chosen_source = _chosen_scheme(scheme, recorded, follows)
    factors = scheme_factors(chosen, layout.depth)
    rows: List[AuditRow] = []
    for n, p in tensors:
        proj = residual.get(id(p))
        factor = factors[proj.layer] if proj is not None else None
        expected = expected_base(p) * (factor if factor is not None else 1.0)
        ratio = measured[n] / expected
        role = ("residual-output" if proj is not None else "embedding" if id(p) in embeddings else "matrix")
        rows.append(AuditRow(n, role, proj.layer if proj is not None else None, measured[n],
                             expected, ratio, _verdict(ratio, factor, tol) if ratio > 0.0 else "off"))
    described = tuple(f"{r.get('scheme')} on {r.get('tensors')} tensors of {r.get('architecture')} "
                      f"({r.get('where')})" for r in recorded)
    return InitializationAudit(layout.architecture, scheme_name(chosen), layout.depth, source, tol, tuple(rows),
                               follows=follows, scheme_source=chosen_source, recorded=described)
