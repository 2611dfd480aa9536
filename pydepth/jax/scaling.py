# SPDX-License-Identifier: MIT
"""Depth scaling of a JAX model's residual output projections, selected by name patterns over
``jax.tree_util.keystr`` paths, once per model.

The schemes and records are the PyTorch bridge's (:mod:`pydepth.bridge.schemes`, one owner). A pattern
is searched in each floating parameter's path; its first group, when present, captures the
layer index of an unrolled block's tensor; without a group the tensor is a stacked (scanned)
one whose layer axis is ``layer_axis`` and each of whose slices gets its layer's factor. Any
floating dtype is scaled (float64, float32, bfloat16, fp8): each product is numpy's float64
multiplication rounded once to the tensor's dtype (:func:`scaled_product`). A mark travels
with the model — a zero float leaf ``pydepth_depth_scalings`` in Linen ``params`` whose length
is the count (so ``jax.grad`` over the variables, a Flax ``TrainState``, optimizers with weight
decay and checkpoints of the params carry it), a ``DepthScalingMark``
variable on an NNX module, a ``DepthScaledModule`` wrapper around an Equinox module — and a
repeat is refused with :class:`pydepth.JaxAlreadyScaledError` unless ``force=True``.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, cast

import jax
import jax.numpy as jnp
import numpy as np

from ..bridge.schemes import DepthScalingRecord, ScaledTensor, Scheme, scheme_factors, scheme_name
from ..errors import ArgumentTypeError, JaxAlreadyScaledError, JaxScalingSchemeError, ScalingSchemeError
from ._leaves import MARK, named_leaves

__all__ = ["apply_depth_scaling", "scaling_count", "Selected", "select_projections", "depth_scaled_class",
           "scaled_product", "MARK"]



@dataclass(frozen=True)
class Selected:
    """One selected tensor: its path name, its layer (``None`` for a stacked tensor) and value."""

    name: str
    layer: Optional[int]
    value: Any


def select_projections(leaves: List[Tuple[str, Any]], patterns: Sequence[str], layer_axis: Optional[int],
                       depth: Optional[int]) -> Tuple[List[Selected], int]:
    """The tensors the patterns select and the depth (given, or found: the largest layer index
    plus one, or a stacked tensor's extent on ``layer_axis``)."""
    if isinstance(patterns, str) or not patterns:
        raise JaxScalingSchemeError(f"patterns must be a non-empty sequence of regular expressions, got {patterns!r}")
    try:
        compiled = [re.compile(p) for p in patterns]
    except (re.error, TypeError) as err:
        raise JaxScalingSchemeError(f"patterns {list(patterns)!r} are not regular expressions: {err}") from None
    chosen: List[Selected] = []
    extents = []
    for name, leaf in leaves:
        match = next((m for m in (c.search(name) for c in compiled) if m), None)
        if match is None:
            continue
        if match.groups() and match.group(1) is not None:
            if not match.group(1).isdigit():
                raise JaxScalingSchemeError(f"pattern {match.re.pattern!r} captured {match.group(1)!r} in {name}; its "
                                            "first group must capture the layer index (use (?:...) for other groups)")
            chosen.append(Selected(name, int(match.group(1)), leaf))
            extents.append(int(match.group(1)) + 1)
            continue
        if layer_axis is None or np.ndim(leaf) <= layer_axis:
            raise JaxScalingSchemeError(f"{name} matches without a layer group, so it must be a stacked tensor "
                                     f"with layer axis {layer_axis!r}; its shape is {np.shape(leaf)}")
        chosen.append(Selected(name, None, leaf))
        extents.append(int(np.shape(leaf)[layer_axis]))
    if not chosen:
        raise JaxScalingSchemeError(f"no parameter path matches {list(patterns)!r}; paths look like "
                                 f"{[n for n, _ in leaves[:3]]}")
    found = max(extents)
    if depth is None:
        return chosen, found
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < found:
        raise JaxScalingSchemeError(f"depth {depth!r} is below the {found} layers the patterns select")
    return chosen, depth


def jax_factors(scheme: Scheme, depth: Optional[int]) -> Tuple[str, Tuple[float, ...]]:
    """The scheme's name and (for a ``depth``) its factors, a refusal raised as
    :class:`pydepth.JaxScalingSchemeError`."""
    try:
        return scheme_name(scheme), (() if depth is None else scheme_factors(scheme, depth))
    except ScalingSchemeError as err:
        if isinstance(err, JaxScalingSchemeError):
            raise
        raise JaxScalingSchemeError(str(err)) from None


def _std(value: Any) -> float:
    return float(np.std(np.asarray(value, dtype=np.float64)))


def scaled_product(value: Any, factors: Any) -> Any:
    """``value × factors`` by the rule of every dtype: numpy's float64 product (exact rounding of
    the true product to float64), rounded once to ``value``'s dtype (round to nearest even,
    ml_dtypes' conversion for bfloat16 and fp8; nothing more for float64), on the host, then put
    back with ``value``'s sharding."""
    wide = np.asarray(value).astype(np.float64) * np.asarray(factors, dtype=np.float64)
    new = wide.astype(np.dtype(value.dtype))
    if isinstance(value, jax.Array):
        return jax.device_put(new, value.sharding)
    return new


def _scaled(sel: Selected, factors: Tuple[float, ...], layer_axis: Optional[int]) -> Tuple[Any, List[ScaledTensor]]:
    if sel.layer is not None:
        f = factors[sel.layer]
        new = scaled_product(sel.value, f)
        return new, [ScaledTensor(sel.name, sel.layer, "residual-output", f, _std(sel.value), _std(new))]
    axis = cast(int, layer_axis)  # a stacked selection exists only with a layer axis
    extent = int(np.shape(sel.value)[axis])
    shape = [1] * np.ndim(sel.value)
    shape[axis] = extent
    new = scaled_product(sel.value, np.array(factors[:extent], dtype=np.float64).reshape(shape))
    rows = [ScaledTensor(f"{sel.name}[layer {b}]", b, "residual-output", factors[b],
                         _std(np.take(np.asarray(sel.value), b, axis=layer_axis)),
                         _std(np.take(np.asarray(new), b, axis=layer_axis))) for b in range(extent)]
    return new, rows


class _Marks:
    """Reading and writing the mark, per library."""

    @staticmethod
    def count(model: Any, library: str) -> int:
        if library == "flax-linen":
            mark = dict(model["params"]).get(MARK)
            if mark is not None:
                return int(np.shape(mark)[0])
            return int(np.asarray(dict(model).get("pydepth", {}).get(MARK, 0)))  # the earlier int32 collection
        if library == "flax-nnx":
            mark = getattr(model, MARK, None)
            return int(np.asarray(mark[...])) if mark is not None else 0
        return len(model.history) if _wrapped(model) else 0

    @staticmethod
    def put(model: Any, library: str, count: int, record: DepthScalingRecord, history: Tuple[Any, ...]) -> Any:
        if library == "flax-linen":
            # zeros whose length is the count: a float leaf jax.grad takes, that optimizers and weight
            # decay leave at zero, inside params so TrainState(params=...) and checkpoints carry it
            rest = {k: v for k, v in dict(model).items() if k != "pydepth"}
            return {**rest, "params": {**dict(model["params"]), MARK: jnp.zeros((count,), dtype=jnp.float32)}}
        if library == "flax-nnx":
            setattr(model, MARK, _nnx_mark()(jnp.asarray(count, dtype=jnp.int32)))
            return model
        return depth_scaled_class()(model, (*history, record))


def scaling_count(model: Any) -> int:
    """How many depth scalings the model's mark records (0 for an unmarked model)."""
    library, _, _ = named_leaves(model.inner if _wrapped(model) else model)
    return _Marks.count(model, library)


def apply_depth_scaling(model: Any, *, patterns: Sequence[str], scheme: Scheme = "1/sqrt(L)",
                        depth: Optional[int] = None, layer_axis: Optional[int] = None,
                        force: bool = False) -> Tuple[Any, DepthScalingRecord]:
    """Multiplies the residual output projections ``patterns`` select by their layer's factor
    under ``scheme`` and returns ``(model, record)``: new Linen variables (with the mark in
    ``params``), the same NNX module updated in place, or a new Equinox module
    wrapped in ``DepthScaledModule`` (:func:`depth_scaled_class`). ``layer_axis`` is the layer axis of
    stacked tensors (e.g.
    ``param_scan_axis`` of a Linen ``nn.scan``). Every factor is checked before any value
    changes; a marked model is refused (:class:`pydepth.JaxAlreadyScaledError`) unless
    ``force=True``."""
    if not isinstance(force, bool):
        raise ArgumentTypeError(f"force must be a bool, got {force!r}")
    name, _ = jax_factors(scheme, None)
    history: Tuple[Any, ...] = model.history if _wrapped(model) else ()
    inner = model.inner if _wrapped(model) else model
    library, leaves, rebuild = named_leaves(inner)
    count = _Marks.count(model, library)
    if count and not force:
        raise JaxAlreadyScaledError(f"this {library} model was already depth-scaled {count} time(s); scaling "
                                    "again multiplies the factors — pass force=True if that is what you want")
    chosen, found_depth = select_projections(leaves, patterns, layer_axis, depth)
    _, factors = jax_factors(scheme, found_depth)
    new: Dict[str, Any] = {}
    rows: List[ScaledTensor] = []
    for sel in chosen:
        new[sel.name], scaled_rows = _scaled(sel, factors, layer_axis)
        rows.extend(scaled_rows)
    record = DepthScalingRecord(library, name, found_depth, tuple(rows), forced=bool(count))
    return _Marks.put(rebuild(new), library, count + 1, record, history), record


def _nnx_mark() -> type:
    from flax import nnx
    global _NNX_MARK
    if _NNX_MARK is None:
        class DepthScalingMark(nnx.Variable):
            """How many depth scalings were applied to this NNX module (travels with its state)."""
        _NNX_MARK = DepthScalingMark
    return _NNX_MARK


_NNX_MARK: Optional[type] = None


_WRAPPER: Optional[type] = None


def _wrapped(model: Any) -> bool:
    return "equinox" in sys.modules and isinstance(model, depth_scaled_class())


def depth_scaled_class() -> type:
    """The Equinox wrapper that marks a depth-scaled module (needs equinox)."""
    global _WRAPPER
    if _WRAPPER is None:
        _WRAPPER = _equinox_wrapper()
    return _WRAPPER


def _equinox_wrapper() -> type:
    import equinox as eqx

    class DepthScaledModule(eqx.Module):
        """An Equinox module after depth scaling: calls and attribute reads go to ``inner``;
        ``history`` holds the records of the scalings applied."""

        inner: Any
        history: Tuple[Any, ...] = eqx.field(static=True)

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return self.inner(*args, **kwargs)

        def __getattr__(self, attr: str) -> Any:
            if attr.startswith("__"):
                raise AttributeError(attr)
            return getattr(object.__getattribute__(self, "inner"), attr)

    return DepthScaledModule
