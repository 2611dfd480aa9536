"""Initialization audit: every weight matrix's measured standard deviation against what a depth
scheme predicts, with a verdict that names the usual mistakes (unscaled, double-scaled).

Expected standard deviations: the base for ordinary matrices and ``base * factor`` for the
residual output projections of :mod:`.architectures`. The base is ``base_std`` when given;
for pydepth's twin each matrix's Xavier-uniform ``sqrt(2 / (fan_in + fan_out))``; for a
Hugging Face model its config's ``initializer_range``; otherwise the median measured standard
deviation of the other matrices.
"""
from __future__ import annotations

import math
import statistics
from typing import Any, List, Optional, Sequence, Tuple, Union

from torch import nn

from .._checks import as_positive_finite
from ..bridge.schemes import VERDICTS, AuditRow, InitializationAudit, audit_verdict
from ..errors import ScalingSchemeError
from .architectures import ArchitectureSpec
from .scaling import Scheme, resolve_layout, scheme_factors, scheme_name, tensor_std

__all__ = ["VERDICTS", "AuditRow", "InitializationAudit", "audit_initialization"]


def _positive(name: str, value: Any) -> float:
    return as_positive_finite(name, value, ScalingSchemeError)


def audit_initialization(module: nn.Module, scheme: Scheme = "1/sqrt(L)",
                         base_std: Optional[float] = None, *,
                         architecture: Union[None, str, ArchitectureSpec] = None,
                         patterns: Optional[Sequence[str]] = None, depth: Optional[int] = None,
                         tolerance: float = 0.2) -> InitializationAudit:
    """Compares every weight matrix's standard deviation with ``scheme``'s prediction.

    A ratio ``measured / expected`` within ``tolerance`` (relative, symmetric in log space) is
    ``ok``; for residual output projections a ratio near ``1/factor`` is ``unscaled`` and near
    ``factor`` is ``double-scaled``; anything else is ``off``. Reads the module only."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    name = scheme_name(scheme)
    tol = _positive("tolerance", tolerance)
    layout = resolve_layout(module, architecture, patterns, depth)
    factors = scheme_factors(scheme, layout.depth)
    residual = {id(p.parameter): p for p in layout.projections}
    embeddings = {id(m.weight) for m in module.modules()
                  if isinstance(m, nn.Embedding) or type(m).__name__ == "_Embedding"}
    matrices = [(n, p) for n, p in module.named_parameters() if p.ndim == 2 and p.dtype.is_floating_point]
    measured = {n: tensor_std(p) for n, p in matrices}

    def base_for(shape: Tuple[int, ...]) -> float:
        return math.sqrt(2.0 / float(shape[0] + shape[1]))

    per_matrix = False
    if base_std is not None:
        base, source = _positive("base_std", base_std), "base_std argument"
    elif layout.architecture == "pydepth-twin":
        base, source, per_matrix = 0.0, "Xavier-uniform sqrt(2/(fan_in+fan_out)) per matrix", True
    elif isinstance(getattr(getattr(module, "config", None), "initializer_range", None), (int, float)):
        base = _positive("config.initializer_range", module.config.initializer_range)  # type: ignore[union-attr]
        source = f"config.initializer_range = {base:g}"
    else:
        others = [measured[n] for n, p in matrices if id(p) not in residual]
        if not others:
            raise ScalingSchemeError(f"{type(module).__name__} has no matrix besides the residual "
                                     "output projections to estimate a base from; pass base_std")
        base = statistics.median(others)
        source = f"median of the other {len(others)} matrices = {base:.6g}"
    rows: List[AuditRow] = []
    for n, p in matrices:
        proj = residual.get(id(p))
        b = base_for(tuple(p.shape)) if per_matrix else base
        factor = factors[proj.layer] if proj is not None else None
        expected = b * factor if factor is not None else b
        ratio = measured[n] / expected
        role = ("residual-output" if proj is not None else
                "embedding" if id(p) in embeddings else "matrix")
        rows.append(AuditRow(n, role, proj.layer if proj is not None else None, measured[n],
                             expected, ratio, audit_verdict(ratio, factor, tol)))
    return InitializationAudit(layout.architecture, name, layout.depth, source, tol, tuple(rows))
