"""Depth scaling of the residual output projections of any recognized decoder, in place, once.

The schemes the field uses differ in formula and in the tensors they touch; here the tensors
come from :mod:`.architectures` and the formula from :func:`scheme_factors`:

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
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import nn

from ..errors import AlreadyScaledError, ScalingSchemeError
from .architectures import ArchitectureSpec, DecoderLayout, find_layout, layout_from_patterns

__all__ = ["SCHEMES", "Scheme", "scheme_factors", "scheme_name", "tensor_std", "ScaledTensor",
           "DepthScalingRecord", "apply_depth_scaling", "scaling_history"]

#: The named schemes; a callable ``(layer_index, depth) -> factor`` is accepted as well.
SCHEMES: Tuple[str, ...] = ("1/sqrt(L)", "1/sqrt(2L)", "per-layer")

Scheme = Union[str, Callable[[int, int], float]]

_MARKER = "_pydepth_depth_scaling"  # module attribute holding the records of applied scalings


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


def tensor_std(tensor: torch.Tensor) -> float:
    """Population standard deviation of all elements, computed in float64."""
    return float(tensor.detach().to(torch.float64).std(correction=0))


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
    """What :func:`apply_depth_scaling` did: architecture, scheme, depth and every tensor."""

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
        return "\n".join([head, *format_table(("tensor", "role", "layer", "factor", "std before",
                                                   "std after"), body)])


def scaling_history(module: nn.Module) -> Tuple[DepthScalingRecord, ...]:
    """The depth scalings already applied to ``module`` through :func:`apply_depth_scaling`."""
    return tuple(getattr(module, _MARKER, ()))


def resolve_layout(module: nn.Module, architecture: Union[str, ArchitectureSpec, None],
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
                        architecture: Union[str, ArchitectureSpec, None] = None,
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
    object.__setattr__(module, _MARKER, (*history, record))
    return record
