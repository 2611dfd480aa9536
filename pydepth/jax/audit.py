# SPDX-License-Identifier: MIT
"""Initialization audit of a JAX model: every weight tensor's measured scale against what its
initializer and a depth scheme predict, with the PyTorch bridge's rows, verdicts and scheme names
(:mod:`pydepth.bridge.schemes`, one owner).

Residual output projections are selected as in :func:`pydepth.jax.apply_depth_scaling`; a
stacked tensor gives one row per layer, and so does every other leaf of the same stack (the
leaves under the first path key of a stacked selection whose extent on ``layer_axis`` is the
stack's). Each tensor is judged against its own base (:mod:`._init_rules`):

* matrices (two or more axes per layer) by their standard deviation against, in this order, an
  explicit ``base_std`` entry for their path, the one ``base_std`` given, else the rule that fits
  more of the other matrices of the model — the library's default initializer per tensor
  (Flax ``lecun_normal``: ``1/sqrt(fan_in)``; Equinox ``Linear``) or one base for all, the
  median of their standard deviations (a model initialized with one ``normal(std)``);
* embeddings (a path with ``embed``) by their standard deviation against the nearest of the
  library's ``Embed`` default, a standard normal and the matrices' one base (an embedding is
  not depth-scaled, so any of the usual choices is as initialized);
* norm gains (one axis per layer, a path with ``norm``, ``scale``, ``gain`` or ``ln``), constant
  or not, by their RMS against 1; other one-axis tensors (biases) and constant matrices are left
  out.
"""
from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from .._checks import as_positive_finite
from ..bridge.schemes import SCHEMES, AuditRow, InitializationAudit, Scheme, audit_verdict, fitting_schemes, near
from ..errors import JaxScalingSchemeError as ScalingSchemeError
from ._init_rules import EMBEDDING_RULES, GAIN_STD, MATRIX_RULES, nearest
from ._leaves import named_leaves
from ._select import Selected, jax_factors, select_projections

__all__ = ["audit_initialization", "identify_scheme", "BaseStd"]

#: one base for every matrix, or base stds by path pattern (``re.search`` on the leaf's path)
BaseStd = Union[None, float, Mapping[str, float]]

_GAIN = re.compile(r"norm|scale|gain|(^|[^a-z])ln", re.IGNORECASE)
_FIRST_KEY = re.compile(r"^(\[[^\]]*\]|\.[^.\[]+)")


@dataclass(frozen=True)
class _Tensor:
    """One audited tensor (a layer's slice of a stacked leaf): its leaf path, row name, layer,
    role and float64 values."""

    path: str
    name: str
    layer: Optional[int]
    role: str
    values: np.ndarray

    @property
    def measured(self) -> float:
        v = self.values
        return float(np.sqrt(np.mean(v * v))) if self.role == "gain" else float(np.std(v))


def _first_key(name: str) -> str:
    m = _FIRST_KEY.match(name)
    return m.group(1) if m else name


def _layers(name: str, arr: np.ndarray, axis: Optional[int]) -> List[Tuple[str, Optional[int], np.ndarray]]:
    if axis is None:
        return [(name, None, arr)]
    return [(f"{name}[layer {b}]", b, np.take(arr, b, axis=axis)) for b in range(arr.shape[axis])]


def _tensors(leaves: List[Tuple[str, Any]], chosen: List[Selected], layer_axis: Optional[int]) -> List[_Tensor]:
    residual = {s.name: s.layer for s in chosen}
    stacked = [s for s in chosen if s.layer is None]
    roots = {_first_key(s.name) for s in stacked}
    extents = {int(np.shape(s.value)[layer_axis]) for s in stacked} if layer_axis is not None else set()
    out: List[_Tensor] = []
    for path, leaf in leaves:
        arr = np.asarray(leaf, dtype=np.float64)
        in_stack = (layer_axis is not None and _first_key(path) in roots and arr.ndim > layer_axis
                    and arr.shape[layer_axis] in extents)
        if path in residual:
            layer = residual[path]
            for name, b, v in _layers(path, arr, layer_axis if layer is None else None):
                out.append(_Tensor(path, name, layer if layer is not None else b, "residual-output", v))
            continue
        for name, _, v in _layers(path, arr, layer_axis if in_stack else None):
            if v.ndim == 1:
                if _GAIN.search(path) and np.any(v != 0.0):  # an all-zero vector is a bias or a 1+w gain
                    out.append(_Tensor(path, name, None, "gain", v))
            elif v.ndim >= 2 and np.ptp(v) > 0:  # constant tensors were not drawn at random
                out.append(_Tensor(path, name, None, "embedding" if "embed" in path.lower() else "matrix", v))
    return out


def _explicit(base_std: Mapping[str, Any], tensors: List[_Tensor]) -> List[Tuple[re.Pattern, float]]:
    out = []
    for pattern, std in base_std.items():
        if not isinstance(pattern, str):
            raise ScalingSchemeError(f"base_std keys must be path patterns (str), got {pattern!r}")
        try:
            compiled = re.compile(pattern)
        except re.error as err:
            raise ScalingSchemeError(f"base_std pattern {pattern!r} is not a regular expression: {err}") from None
        value = as_positive_finite(f"base_std[{pattern!r}]", std, ScalingSchemeError)
        if not any(compiled.search(t.path) for t in tensors):
            raise ScalingSchemeError(f"base_std pattern {pattern!r} matches no audited tensor; paths look like "
                                     f"{sorted({t.path for t in tensors})[:4]}")
        out.append((compiled, value))
    return out


class _Bases:
    """The expected base of every tensor and a sentence saying where the bases came from."""

    def __init__(self, library: str, base_std: BaseStd, tensors: List[_Tensor], tol: float) -> None:
        self.library, self.tol = library, tol
        if base_std is not None and not isinstance(base_std, Mapping):
            self.one: Optional[float] = as_positive_finite("base_std", base_std, ScalingSchemeError)
            self.per_tensor = False
            self.explicit: List[Tuple[re.Pattern, float]] = []
            source = f"base_std argument {self.one:g} per matrix"
        else:
            self.explicit = _explicit(base_std, tensors) if base_std is not None else []
            self.one, self.per_tensor, source = self._detect(tensors)
        parts = [source]
        if self.explicit:
            parts.insert(0, "base_std by path for " + ", ".join(p.pattern for p, _ in self.explicit))
        parts.append("embeddings: the nearest of " + ", ".join(n for n, _ in self._embedding_candidates((1, 1))))
        if any(t.role == "gain" for t in tensors):
            parts.append("norm gains: RMS against 1")
        self.source = "; ".join(parts)

    def _given(self, t: _Tensor) -> Optional[float]:
        return next((v for p, v in self.explicit if p.search(t.path)), None)

    def _detect(self, tensors: List[_Tensor]) -> Tuple[Optional[float], bool, str]:
        rule_name, rule = MATRIX_RULES[self.library]
        others = [t for t in tensors if t.role == "matrix" and self._given(t) is None]
        if not others:
            return None, True, f"{rule_name} per matrix (no other matrix to compare)"
        median = statistics.median(t.measured for t in others)
        by_rule = sum(near(t.measured / rule(t.values.shape, False, t.measured), 1.0, self.tol) for t in others)
        by_median = sum(near(t.measured / median, 1.0, self.tol) for t in others)
        if by_rule >= by_median:
            return None, True, (f"{rule_name} per matrix (fits {by_rule} of the other {len(others)} matrices; "
                                f"their median {median:.6g} fits {by_median})")
        return median, False, (f"median of the other {len(others)} matrices = {median:.6g} (fits {by_median}; "
                               f"{rule_name} fits {by_rule})")

    def _embedding_candidates(self, shape: Tuple[int, ...]) -> List[Tuple[str, float]]:
        name, rule = EMBEDDING_RULES[self.library]
        out = [(name, rule(shape)), ("N(0, 1)", 1.0)]
        if self.one is not None:
            out.append(("the matrices' base", self.one))
        return out

    def base(self, t: _Tensor) -> float:
        """The std (RMS for a gain) ``t`` has as initialized, before any depth factor."""
        given = self._given(t)
        if given is not None:
            return given
        if t.role == "gain":
            return GAIN_STD
        if t.role == "embedding":
            return nearest(t.measured, self._embedding_candidates(t.values.shape))[1]
        if self.per_tensor:
            return MATRIX_RULES[self.library][1](t.values.shape, t.role == "residual-output", t.measured)
        return float(self.one)  # type: ignore[arg-type]  # set whenever per_tensor is False


def audit_initialization(model: Any, scheme: Scheme = "1/sqrt(L)", base_std: BaseStd = None, *,
                         patterns: Sequence[str], depth: Optional[int] = None,
                         layer_axis: Optional[int] = None, tolerance: float = 0.2) -> InitializationAudit:
    """Compares every weight tensor of a Linen, NNX or Equinox model with what its initializer
    and ``scheme`` predict (``scheme`` a name from :data:`pydepth.bridge.schemes.SCHEMES` or a
    callable). ``base_std``: ``None`` (each tensor's base by the rules of this module's
    docstring), one float for every matrix, or ``{path pattern: std}`` for the tensors whose path
    a pattern finds (``re.search``; the first match wins; the others by the rules). A ratio
    ``measured / expected`` within ``tolerance`` is ``ok``; for a residual output projection a
    ratio near ``1/factor`` is ``unscaled`` and near ``factor`` ``double-scaled``; else ``off``.
    ``follows`` names the schemes every residual output fits (``"unscaled"`` at the base). Reads
    the model only."""
    name, _ = jax_factors(scheme, None)
    tol = as_positive_finite("tolerance", tolerance, ScalingSchemeError)
    library, leaves, _ = named_leaves(model)
    chosen, found_depth = select_projections(leaves, patterns, layer_axis, depth)
    _, factors = jax_factors(scheme, found_depth)
    tensors = _tensors(leaves, chosen, layer_axis)
    bases = _Bases(library, base_std, tensors, tol)
    rows, ratios = [], []
    for t in tensors:
        base, measured = bases.base(t), t.measured
        layer = t.layer if t.role == "residual-output" else None
        factor = factors[layer] if layer is not None else None
        expected = base * factor if factor is not None else base
        ratio = measured / expected
        if layer is not None:
            ratios.append((layer, measured / base))
        verdict = audit_verdict(ratio, factor, tol) if math.isfinite(ratio) else "off"
        rows.append(AuditRow(t.name, t.role, t.layer, measured, expected, ratio, verdict))
    return InitializationAudit(library, name, found_depth, bases.source, tol, tuple(rows),
                               follows=fitting_schemes(ratios, found_depth, tol))


def identify_scheme(model: Any, base_std: BaseStd = None, *, patterns: Sequence[str],
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
