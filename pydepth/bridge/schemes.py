# SPDX-License-Identifier: MIT
"""Depth-scaling schemes by name, the records of a scaling and of an audit, and the audit's
verdict: one owner for every bridge (PyTorch and JAX), free of any framework import.

* ``"1/sqrt(L)"`` — this project's policy (chapter 6), the factor of :class:`pydepth.DepthScalePolicy`;
* ``"1/sqrt(2L)"`` — GPT-2, nanoGPT and Megatron's scaled init (``σ/√(2L)``: two residual
  additions per layer); also accepted as ``"megatron"`` or ``"gpt2"``;
* ``"per-layer"`` — ``1/sqrt(2(l+1))`` for layer ``l`` (0-based): torchtitan's depth init and
  OLMo's "mitchell" init; also accepted as ``"torchtitan"``;
* a callable ``(layer_index, depth) -> factor``.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from ..errors import ScalingSchemeError

__all__ = ["SCHEMES", "SCHEME_ALIASES", "KNOWN_AS", "Scheme", "scheme_name", "scheme_factors", "near",
           "fitting_schemes", "ScaledTensor", "DepthScalingRecord", "VERDICTS", "AuditRow",
           "InitializationAudit", "audit_verdict"]

#: The named schemes; a callable ``(layer_index, depth) -> factor`` is accepted as well.
SCHEMES: Tuple[str, ...] = ("1/sqrt(L)", "1/sqrt(2L)", "per-layer")

#: Other names people use for the same schemes.
SCHEME_ALIASES: Dict[str, str] = {"megatron": "1/sqrt(2L)", "gpt2": "1/sqrt(2L)", "torchtitan": "per-layer"}

#: Who uses each scheme (for reports).
KNOWN_AS: Dict[str, str] = {
    "1/sqrt(L)": "pydepth's depth policy",
    "1/sqrt(2L)": "GPT-2, nanoGPT, Megatron's scaled init sigma/sqrt(2L)",
    "per-layer": "torchtitan's depth init, OLMo's mitchell init: 1/sqrt(2(l+1))",
}

#: A depth-scaling scheme: a name of :data:`SCHEMES` (or of :data:`KNOWN_AS`), or a callable
#: ``(layer_index, depth) -> factor``.
Scheme = Union[str, Callable[[int, int], float]]

_FORMULAS: Dict[str, Callable[[int, int], float]] = {
    "1/sqrt(L)": lambda layer, depth: 1.0 / math.sqrt(float(depth)),
    "1/sqrt(2L)": lambda layer, depth: 1.0 / math.sqrt(2.0 * float(depth)),
    "per-layer": lambda layer, depth: 1.0 / math.sqrt(2.0 * float(layer + 1)),
}


def scheme_name(scheme: Scheme) -> str:
    """The scheme's canonical name (aliases resolved; a callable's qualified name)."""
    if isinstance(scheme, str):
        name = SCHEME_ALIASES.get(scheme, scheme)
        if name not in SCHEMES:
            raise ScalingSchemeError(f"unknown scheme {scheme!r}; use one of {list(SCHEMES)} (or "
                                     f"{sorted(SCHEME_ALIASES)}) or a callable (layer_index, depth) -> factor")
        return name
    if callable(scheme):
        return f"callable {getattr(scheme, '__qualname__', type(scheme).__name__)}"
    raise ScalingSchemeError(f"scheme must be one of {list(SCHEMES)} or a callable, got {scheme!r}")


def scheme_factors(scheme: Scheme, depth: int) -> Tuple[float, ...]:
    """The factor of every layer ``0 .. depth-1`` under ``scheme``; each is checked positive and
    finite (:class:`pydepth.ScalingSchemeError` names the layer and the value otherwise)."""
    name = scheme_name(scheme)
    if isinstance(depth, bool) or not isinstance(depth, int) or depth <= 0:
        raise ScalingSchemeError(f"depth must be a positive integer, got {depth!r}")
    formula = _FORMULAS.get(name) or scheme
    out: List[float] = []
    for layer in range(depth):
        f: Any = formula(layer, depth)  # type: ignore[operator]
        if isinstance(f, bool) or not isinstance(f, numbers.Real):
            raise ScalingSchemeError(f"scheme {name} gave {f!r} for layer {layer}; a factor must be a real number")
        f = float(f)
        if not (math.isfinite(f) and f > 0.0):
            raise ScalingSchemeError(f"scheme {name} gave factor {f!r} for layer {layer} "
                                     f"of {depth}; a factor must be positive and finite")
        out.append(f)
    return tuple(out)


def near(ratio: float, target: float, tolerance: float) -> bool:
    """Whether ``ratio`` is within ``tolerance`` of ``target`` (relative, symmetric in log space)."""
    return ratio > 0.0 and abs(math.log(ratio / target)) <= math.log1p(tolerance)


def fitting_schemes(ratios: Sequence[Tuple[int, float]], depth: int, tolerance: float) -> Tuple[str, ...]:
    """The named schemes every ``(layer, measured/base)`` ratio fits, and ``"unscaled"`` when all
    are near 1. A scheme whose factors are all near 1 (one layer) is not told apart from unscaled."""
    if not ratios:
        return ()
    out = []
    for name in SCHEMES:
        factors = scheme_factors(name, depth)
        if all(near(f, 1.0, tolerance) for f in factors):
            continue
        if all(near(r, factors[layer], tolerance) for layer, r in ratios):
            out.append(name)
    if all(near(r, 1.0, tolerance) for _, r in ratios):
        out.append("unscaled")
    return tuple(out)


@dataclass(frozen=True)
class ScaledTensor:
    """One scaled tensor: name, layer, role, factor and scale before and after (the standard
    deviation of a matrix; the RMS of the effective gain of a norm, ``kind == "gain"``)."""

    name: str
    layer: int
    role: str
    factor: float
    std_before: float
    std_after: float
    kind: str = "matrix"

    def to_dict(self) -> Dict[str, Any]:
        """JSON-serializable form."""
        return asdict(self)


@dataclass(frozen=True)
class DepthScalingRecord:
    """What :func:`apply_depth_scaling` did: architecture, scheme, depth and every tensor.
    ``residual_multipliers`` are the constants the model multiplies its branches by before adding
    them (Granite's ``residual_multiplier``; empty when every one is 1): the scheme leaves them as
    they are, so each branch adds ``multiplier * factor`` times its unscaled output."""

    architecture: str
    scheme: str
    depth: int
    tensors: Tuple[ScaledTensor, ...]
    forced: bool = False
    residual_multipliers: Tuple[float, ...] = ()

    @property
    def multiplier_note(self) -> str:
        """What the scheme did with the model's residual multipliers (empty when there are none)."""
        if not self.residual_multipliers:
            return ""
        values = ", ".join(f"{m:g}" for m in self.residual_multipliers)
        return (f"residual multiplier {values} kept as is: each branch now adds multiplier x factor x its "
                "unscaled output")

    def summary(self) -> Dict[str, Any]:
        """The short form kept in a model's config: scheme, architecture, depth, tensor count."""
        return {"scheme": self.scheme, "architecture": self.architecture, "depth": self.depth,
                "tensors": len(self.tensors), "forced": self.forced}

    def to_dict(self) -> Dict[str, Any]:
        """JSON-serializable form."""
        out = {"architecture": self.architecture, "scheme": self.scheme, "depth": self.depth,
               "forced": self.forced, "tensors": [t.to_dict() for t in self.tensors]}
        if self.residual_multipliers:
            out["residual_multipliers"] = list(self.residual_multipliers)
        return out

    def to_table(self) -> str:
        """A plain-text table for people."""
        from ..health import format_table
        head = (f"depth scaling {self.scheme} on {self.architecture}, {self.depth} layers, "
                f"{len(self.tensors)} tensors" + (" (forced repeat)" if self.forced else "")
                + (f"; {self.multiplier_note}" if self.residual_multipliers else ""))
        body = [(t.name, t.role, str(t.layer), f"{t.factor:.6f}", f"{t.std_before:.6g}",
                 f"{t.std_after:.6g}") for t in self.tensors]
        return "\n".join([head, *format_table(("tensor", "role", "layer", "factor", "scale before",
                                                   "scale after"), body)])


#: Verdicts, in the order they are tried for a residual output.
VERDICTS: Tuple[str, ...] = ("ok", "unscaled", "double-scaled", "off")


@dataclass(frozen=True)
class AuditRow:
    """One weight tensor: role (``residual-output``, ``embedding`` or ``matrix``), layer (residual
    outputs only), measured and expected scale, their ratio and the verdict."""

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
    """The audit of one module under one scheme; ``rows`` in ``named_parameters()`` order.
    ``follows`` names the known schemes every residual output fits (``"unscaled"`` when all sit
    at the base); ``scheme_source`` says where ``scheme`` came from (``argument``, ``recorded``:
    a scaling recorded on the model or its config, ``detected``: the scheme it follows, or
    ``default``); ``recorded`` lists the recorded scalings."""

    architecture: str
    scheme: str
    depth: int
    base_source: str
    tolerance: float
    rows: Tuple[AuditRow, ...]
    follows: Tuple[str, ...] = ()
    scheme_source: str = "argument"
    recorded: Tuple[str, ...] = ()

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
        return {"architecture": self.architecture, "scheme": self.scheme, "scheme_source": self.scheme_source,
                "depth": self.depth, "follows": list(self.follows), "recorded": list(self.recorded),
                "base_source": self.base_source, "tolerance": self.tolerance, "ok": self.ok,
                "rows": [r.to_dict() for r in self.rows]}

    def to_table(self) -> str:
        """A plain-text table for people."""
        from ..health import format_table
        lines = [f"initialization audit: scheme {self.scheme} ({self.scheme_source}), {self.architecture}, "
                 f"{self.depth} layers, base from {self.base_source}, tolerance {self.tolerance:g} (relative)",
                 "residual outputs follow: " + (", ".join(f"{n} ({KNOWN_AS.get(n, 'weights at the base')})"
                                                          for n in self.follows) or "no known scheme")]
        if self.recorded:
            lines.append("recorded depth scalings: " + "; ".join(self.recorded))
        body = [(r.name, r.role, f"{r.measured_std:.6g}", f"{r.expected_std:.6g}", f"{r.ratio:.4f}",
                 r.verdict) for r in self.rows]
        lines += format_table(("tensor", "role", "measured", "expected", "ratio", "verdict"), body)
        counts = {v: sum(r.verdict == v for r in self.rows) for v in VERDICTS}
        lines.append("all matrices as the scheme predicts" if self.ok else
                     "FINDINGS: " + ", ".join(f"{n} {v}" for v, n in counts.items() if n and v != "ok"))
        return "\n".join(lines)


def audit_verdict(ratio: float, factor: Optional[float], tolerance: float) -> str:
    """``ok`` near the expected scale; ``unscaled`` near base (the factor skipped);
    ``double-scaled`` near base * factor**2; else ``off``."""
    if near(ratio, 1.0, tolerance):
        return "ok"
    if factor is not None:
        if near(ratio, 1.0 / factor, tolerance):  # measured ~ base: the factor was skipped
            return "unscaled"
        if near(ratio, factor, tolerance):  # measured ~ base * factor**2
            return "double-scaled"
    return "off"
