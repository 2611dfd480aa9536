# SPDX-License-Identifier: MIT
"""Initialization audit of a JAX model: every weight matrix's measured standard deviation against
what a depth scheme predicts, with the PyTorch bridge's rows, verdicts and scheme names
(:mod:`pydepth.bridge.schemes`, one owner).

Residual output projections are selected as in :func:`pydepth.jax.apply_depth_scaling`; a
stacked tensor gives one row per layer. The base is ``base_std`` when given, else the median
measured standard deviation of the other matrices. Constant tensors (norm gains stacked to two
axes, zero biases) are not random draws and are left out.
"""
from __future__ import annotations

import statistics
from typing import Any, List, Optional, Sequence, Tuple, cast

import numpy as np

from .._checks import as_positive_finite
from ..bridge.schemes import SCHEMES, AuditRow, InitializationAudit, Scheme, audit_verdict
from ..errors import JaxScalingSchemeError as ScalingSchemeError
from ._leaves import named_leaves
from .scaling import jax_factors, select_projections

__all__ = ["audit_initialization", "identify_scheme"]

# (name, layer or None, role, values) of one audited matrix
_Matrix = Tuple[str, Optional[int], str, np.ndarray]


def _slices(name: str, value: Any, axis: int) -> List[Tuple[str, int, np.ndarray]]:
    arr = np.asarray(value, dtype=np.float64)
    return [(f"{name}[layer {b}]", b, np.take(arr, b, axis=axis)) for b in range(arr.shape[axis])]


def _matrices(leaves: List[Tuple[str, Any]], residual: dict, layer_axis: Optional[int]) -> List[_Matrix]:
    out: List[_Matrix] = []
    for name, leaf in leaves:
        role = "embedding" if "embed" in name.lower() else "matrix"
        if name in residual:
            layer = residual[name]
            if layer is None:
                axis = cast(int, layer_axis)  # a stacked selection exists only with a layer axis
                out += [(n, b, "residual-output", v) for n, b, v in _slices(name, leaf, axis)]
            else:
                out.append((name, layer, "residual-output", np.asarray(leaf, dtype=np.float64)))
        elif np.ndim(leaf) == 2:
            out.append((name, None, role, np.asarray(leaf, dtype=np.float64)))
        elif layer_axis is not None and np.ndim(leaf) == 3:
            out += [(n, None, role, v) for n, _, v in _slices(name, leaf, layer_axis)]
    return out


def audit_initialization(model: Any, scheme: Scheme = "1/sqrt(L)", base_std: Optional[float] = None, *,
                         patterns: Sequence[str], depth: Optional[int] = None,
                         layer_axis: Optional[int] = None, tolerance: float = 0.2) -> InitializationAudit:
    """Compares every weight matrix of a Linen, NNX or Equinox model with ``scheme``'s prediction
    (``scheme`` a name from :data:`pydepth.bridge.schemes.SCHEMES` or a callable). A ratio
    ``measured / expected`` within ``tolerance`` is ``ok``; for a residual output projection a
    ratio near ``1/factor`` is ``unscaled`` and near ``factor`` ``double-scaled``; else ``off``.
    Reads the model only."""
    name, _ = jax_factors(scheme, None)
    tol = as_positive_finite("tolerance", tolerance, ScalingSchemeError)
    library, leaves, _ = named_leaves(model)
    chosen, found_depth = select_projections(leaves, patterns, layer_axis, depth)
    _, factors = jax_factors(scheme, found_depth)
    residual = {s.name: s.layer for s in chosen}
    drawn = [m for m in _matrices(leaves, residual, layer_axis) if m[2] == "residual-output" or np.ptp(m[3]) > 0]
    matrices = drawn  # constant tensors (norm gains, zero biases) were not drawn at random
    measured = [float(np.std(v)) for _, _, _, v in matrices]
    if base_std is not None:
        base, source = as_positive_finite("base_std", base_std, ScalingSchemeError), "base_std argument"
    else:
        others = [m for (_, _, role, _), m in zip(matrices, measured) if role != "residual-output"]
        if not others:
            raise ScalingSchemeError("the model has no matrix besides the residual output projections to "
                                     "estimate a base from; pass base_std")
        base = statistics.median(others)
        source = f"median of the other {len(others)} matrices = {base:.6g}"
    rows = []
    for (n, layer, role, _), m in zip(matrices, measured):
        factor = factors[layer] if role == "residual-output" and layer is not None else None
        expected = base * factor if factor is not None else base
        ratio = m / expected
        rows.append(AuditRow(n, role, layer, m, expected, ratio, audit_verdict(ratio, factor, tol)))
    return InitializationAudit(library, name, found_depth, source, tol, tuple(rows))


def identify_scheme(model: Any, base_std: Optional[float] = None, *, patterns: Sequence[str],
                    depth: Optional[int] = None, layer_axis: Optional[int] = None,
                    tolerance: float = 0.2) -> Optional[str]:
    """The name of the first scheme in :data:`SCHEMES` under which every residual output projection
    of the model is ``ok``, or ``None`` (audit arguments as :func:`audit_initialization`)."""
    for candidate in SCHEMES:
        audit = audit_initialization(model, candidate, base_std, patterns=patterns, depth=depth,
                                     layer_axis=layer_axis, tolerance=tolerance)
        if all(r.verdict == "ok" for r in audit.rows if r.role == "residual-output"):
            return candidate
    return None
