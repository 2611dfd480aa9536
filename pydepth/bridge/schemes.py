"""Depth-scaling schemes and the records of scaling and auditing, shared by every bridge
(PyTorch and JAX) and free of any framework import.

* ``"1/sqrt(L)"`` — this project's policy (chapter 6), the same factor as
  :class:`pydepth.DepthScalePolicy`;
* ``"1/sqrt(2L)"`` — GPT-2, nanoGPT, Megatron (two residual additions per layer);
* ``"per-layer"`` — ``1/sqrt(2(l+1))`` for layer ``l`` (0-based): torchtitan's depth init and
  OLMo's "mitchell" init;
* a callable ``(layer_index, depth) -> factor``.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from ..errors import ScalingSchemeError

__all__ = ["SCHEMES", "Scheme", "scheme_name", "scheme_factors", "ScaledTensor", "DepthScalingRecord",
           "VERDICTS", "AuditRow", "InitializationAudit", "audit_verdict"]

#: The named schemes; a callable ``(layer_index, depth) -> factor`` is accepted as well.
SCHEMES: Tuple[str, ...] = ("1/sqrt(L)", "1/sqrt(2L)", "per-layer")

Scheme = Union[str, Callable[[int, int], float]]

#: Verdicts, in the order they are tried for a residual output projection.
VERDICTS: Tuple[str, ...] = ("ok", "unscaled", "double-scaled", "off")


def scheme_name(scheme: Scheme) -> str:
    """The scheme's name (a callable's qualified name)."""
    if isinstance(scheme, str):
        if scheme not in SCHEMES:
            raise ScalingSchemeError(f"unknown scheme {scheme!r}; use one of {list(SCHEMES)} or a "
                                     "callable (layer_index, depth) -> factor")
        return scheme
    if callable(scheme):
        return f"callable {getattr(scheme, '__qualname__', type(scheme).__name__)}"
    raise ScalingSchemeError(f"scheme must be one of {list(SCHEMES)} or a callable, got {scheme!r}")


def scheme_factors(scheme: Scheme, depth: int) -> Tuple[float, ...]:
    """The factor of every layer ``0 .. depth-1`` under ``scheme``; each is checked positive and
    finite (:class:`pydepth.ScalingSchemeError` names the layer and the value otherwise)."""
    scheme_name(scheme)
    if isinstance(depth, bool) or not isinstance(depth, int) or depth <= 0:
        raise ScalingSchemeError(f"depth must be a positive integer, got {depth!r}")
    out: List[float] = []
    for layer in range(depth):
        if scheme == "1/sqrt(L)":
            f: Any = 1.0 / math.sqrt(float(depth))
        elif scheme == "1/sqrt(2L)":
            f = 1.0 / math.sqrt(2.0 * float(depth))
        elif scheme == "per-layer":
            f = 1.0 / math.sqrt(2.0 * float(layer + 1))
        else:
            f = scheme(layer, depth)  # type: ignore[operator]
        if isinstance(f, bool) or not isinstance(f, numbers.Real):
            raise ScalingSchemeError(f"scheme {scheme_name(scheme)} gave {f!r} for layer {layer}; "
                                     "a factor must be a real number")
        f = float(f)
        if not (math.isfinite(f) and f > 0.0):
            raise ScalingSchemeError(f"scheme {scheme_name(scheme)} gave factor {f!r} for layer {layer} "
                                     f"of {depth}; a factor must be positive and finite")
        out.append(f)
    return tuple(out)


@dataclass(frozen=True)
class ScaledTensor:
    """One scaled tensor: name, layer, role, factor and standard deviation before and after."""

    name: str
    layer: int
    role: str
    factor: float
    std_before: float
    std_after: float

    def to_dict(self) -> Dict[str, Any]:
        """JSON-serializable form."""
        return asdict(self)


@dataclass(frozen=True)
class DepthScalingRecord:
    """What a depth scaling did: architecture, scheme, depth and every tensor."""

    architecture: str
    scheme: str
    depth: int
    tensors: Tuple[ScaledTensor, ...]
    forced: bool = False

    def to_dict(self) -> Dict[str, Any]:
        """JSON-serializable form."""
        return {"architecture": self.architecture, "scheme": self.scheme, "depth": self.depth,
                "forced": self.forced, "tensors": [t.to_dict() for t in self.tensors]}

    def to_table(self) -> str:
        """A plain-text table for people."""
        from ..health import format_table
        head = (f"depth scaling {self.scheme} on {self.architecture}, {self.depth} layers, "
                f"{len(self.tensors)} tensors" + (" (forced repeat)" if self.forced else ""))
        body = [(t.name, t.role, str(t.layer), f"{t.factor:.6f}", f"{t.std_before:.6g}",
                 f"{t.std_after:.6g}") for t in self.tensors]
        return "\n".join([head] + format_table(("tensor", "role", "layer", "factor", "std before",
                                                  "std after"), body))


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
    """The audit of one model under one scheme; ``rows`` in the model's parameter order."""

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


def audit_verdict(ratio: float, factor: Optional[float], tolerance: float) -> str:
    """The verdict on ``measured / expected``: ``ok`` within ``tolerance`` (relative, symmetric in
    log space); for a residual output projection (``factor`` given) ``unscaled`` near
    ``1/factor`` and ``double-scaled`` near ``factor``; else ``off`` (always for ratio <= 0)."""
    if not ratio > 0.0:
        return "off"
    if _near(ratio, 1.0, tolerance):
        return "ok"
    if factor is not None:
        if _near(ratio, 1.0 / factor, tolerance):  # measured ~ base: the factor was skipped
            return "unscaled"
        if _near(ratio, factor, tolerance):  # measured ~ base * factor**2
            return "double-scaled"
    return "off"
