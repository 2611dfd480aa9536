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
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from torch import nn

from .._checks import as_positive_finite
from ..errors import ScalingSchemeError
from .architectures import ArchitectureSpec
from .scaling import Scheme, resolve_layout, scheme_factors, scheme_name, tensor_std

__all__ = ["VERDICTS", "AuditRow", "InitializationAudit", "audit_initialization"]

#: Verdicts, in the order they are tried for a residual output projection.
VERDICTS: Tuple[str, ...] = ("ok", "unscaled", "double-scaled", "off")


@dataclass(frozen=True)
class AuditRow:
    """One weight matrix: role (``residual-output``, ``embedding`` or ``matrix``), layer (residual
    outputs only), measured and expected standard deviation, their ratio and the verdict."""

    name: str
    role: str
    layer: Optional[int]
    measured_std: float
    expected_std: float
    ratio: float
    verdict: str

    def to_dict(self) -> Dict[str, Any]:
        """JSON-serializable form."""
        return asdict(self)


@dataclass(frozen=True)
class InitializationAudit:
    """The audit of one module under one scheme; ``rows`` in ``named_parameters()`` order."""

    architecture: str
    scheme: str
    depth: int
    base_source: str
    tolerance: float
    rows: Tuple[AuditRow, ...]

    @property
    def findings(self) -> Tuple[AuditRow, ...]:
        """Rows whose verdict is not ``ok``."""
        return tuple(r for r in self.rows if r.verdict != "ok")

    @property
    def ok(self) -> bool:
        """Whether every row's verdict is ``ok``."""
        return not self.findings

    def to_dict(self) -> Dict[str, Any]:
        """JSON-serializable form."""
        return {"architecture": self.architecture, "scheme": self.scheme, "depth": self.depth,
                "base_source": self.base_source, "tolerance": self.tolerance, "ok": self.ok,
                "rows": [r.to_dict() for r in self.rows]}

    def to_table(self) -> str:
        """A plain-text table for people."""
        from ..health import format_table
        lines = [f"initialization audit: scheme {self.scheme}, {self.architecture}, {self.depth} layers, "
                 f"base std from {self.base_source}, tolerance {self.tolerance:g} (relative)"]
        body = [(r.name, r.role, f"{r.measured_std:.6g}", f"{r.expected_std:.6g}", f"{r.ratio:.4f}",
                 r.verdict) for r in self.rows]
        lines += format_table(("tensor", "role", "measured std", "expected std", "ratio", "verdict"), body)
        counts = {v: sum(r.verdict == v for r in self.rows) for v in VERDICTS}
        lines.append("all matrices as the scheme predicts" if self.ok else
                     "FINDINGS: " + ", ".join(f"{n} {v}" for v, n in counts.items() if n and v != "ok"))
        return "\n".join(lines)


def _near(ratio: float, target: float, tolerance: float) -> bool:
    return abs(math.log(ratio / target)) <= math.log1p(tolerance)


def _verdict(ratio: float, factor: Optional[float], tolerance: float) -> str:
    if _near(ratio, 1.0, tolerance):
        return "ok"
    if factor is not None:
        if _near(ratio, 1.0 / factor, tolerance):  # measured ~ base: the factor was skipped
            return "unscaled"
        if _near(ratio, factor, tolerance):  # measured ~ base * factor**2
            return "double-scaled"
    return "off"


def _positive(name: str, value: Any) -> float:
    return as_positive_finite(name, value, ScalingSchemeError)


def audit_initialization(module: nn.Module, scheme: Scheme = "1/sqrt(L)",
                         base_std: Optional[float] = None, *,
                         architecture: Union[str, ArchitectureSpec, None] = None,
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
                             expected, ratio, _verdict(ratio, factor, tol) if ratio > 0.0 else "off"))
    return InitializationAudit(layout.architecture, name, layout.depth, source, tol, tuple(rows))
