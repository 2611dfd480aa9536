# SPDX-License-Identifier: MIT
"""Depth scaling of a JAX model's residual output projections, selected by name patterns over
``jax.tree_util.keystr`` paths, once per model.

The schemes and records are the PyTorch bridge's (:mod:`pydepth.bridge.schemes`, one owner). A pattern
is searched in each floating parameter's path; its first group, when present, captures the
layer index of an unrolled block's tensor; without a group the tensor is a stacked (scanned)
one whose layer axis is ``layer_axis`` and each of whose slices gets its layer's factor. Any
floating dtype is scaled (float64, float32, bfloat16, fp8): each product is numpy's float64
multiplication rounded once to the tensor's dtype (:func:`scaled_product`). The guard is the
scaled weights themselves (:mod:`._guard`): no leaf, variable or wrapper is added, so every
round trip that carries the weights carries the guard, and a repeat is refused with
:class:`pydepth.JaxAlreadyScaledError` unless ``force=True``.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, cast

import jax
import numpy as np

from ..bridge.schemes import DepthScalingRecord, ScaledTensor, Scheme
from ..errors import ArgumentTypeError, JaxAlreadyScaledError
from ._guard import Unit, recorded_count, remember, unit
from ._select import Selected, jax_factors, select_projections
from ._leaves import MARK, named_leaves
from .audit import audit_initialization

__all__ = ["apply_depth_scaling", "scaling_count", "Selected", "select_projections", "scaled_product", "MARK"]


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


def _legacy_count(model: Any, library: str) -> int:
    """The count an earlier release's Linen mark records (a zero leaf in ``params``, or before
    that an int32 ``pydepth`` collection); such marks are read, and dropped from a new scaling."""
    if library != "flax-linen":
        return 0
    mark = dict(model["params"]).get(MARK)
    if mark is not None:
        return int(np.shape(mark)[0])
    return int(np.asarray(dict(model).get("pydepth", {}).get(MARK, 0)))


def _without_legacy(model: Any, library: str) -> Any:
    if library != "flax-linen":
        return model
    rest = {k: v for k, v in dict(model).items() if k != "pydepth"}
    return {**rest, "params": {k: v for k, v in dict(model["params"]).items() if k != MARK}}


def _count(model: Any, library: str, leaves: List[Tuple[str, Any]]) -> int:
    return max(_legacy_count(model, library), recorded_count(library, dict(leaves)))


def scaling_count(model: Any) -> int:
    """How many depth scalings the model's weights carry (0 for weights never scaled in this
    process): see :mod:`pydepth.jax._guard`."""
    library, leaves, _ = named_leaves(model)
    return _count(model, library, leaves)


def _fitted_schemes(model: Any, patterns: Sequence[str], depth: int, layer_axis: Optional[int]) -> Tuple[str, ...]:
    # The guard where the in-memory samples cannot reach (a new process): the audit's per-tensor bases.
    follows = audit_initialization(model, patterns=patterns, depth=depth, layer_axis=layer_axis).follows
    return () if "unscaled" in follows else follows


def apply_depth_scaling(model: Any, *, patterns: Sequence[str], scheme: Scheme = "1/sqrt(L)",
                        depth: Optional[int] = None, layer_axis: Optional[int] = None,
                        force: bool = False) -> Tuple[Any, DepthScalingRecord]:
    """Multiplies the residual output projections ``patterns`` select by their layer's factor
    under ``scheme`` and returns ``(model, record)``: new Linen variables, the same NNX module
    updated in place, a new Equinox module of the same type, or new :class:`pydepth.jax.PlainParams`
    — each with the same tree as before. ``layer_axis`` is the layer axis of stacked tensors
    (e.g. ``param_scan_axis`` of a Linen ``nn.scan``). Every factor is checked before any value
    changes; weights that carry an earlier scaling (:func:`scaling_count`), or whose residual
    output projections the audit finds already scaled against their initializer (a scaled
    checkpoint restored in another process), are refused (:class:`pydepth.JaxAlreadyScaledError`)
    unless ``force=True``."""
    if not isinstance(force, bool):
        raise ArgumentTypeError(f"force must be a bool, got {force!r}")
    name, _ = jax_factors(scheme, None)
    library, leaves, rebuild = named_leaves(model)
    count = _count(model, library, leaves)
    if count and not force:
        raise JaxAlreadyScaledError(f"this {library} model was already depth-scaled {count} time(s); scaling "
                                    "again multiplies the factors — pass force=True if that is what you want")
    chosen, found_depth = select_projections(leaves, patterns, layer_axis, depth)
    _, factors = jax_factors(scheme, found_depth)
    fits = () if count or force else _fitted_schemes(model, patterns, found_depth, layer_axis)
    if fits:
        raise JaxAlreadyScaledError(
            f"the residual output projections of this {library} model already have the scale of "
            f"{' and '.join(fits)} against their initializer (pydepth.jax.audit_initialization): they look "
            "depth-scaled, e.g. restored from a scaled checkpoint in another process; scaling again multiplies "
            "the factors — pass force=True if the model was drawn that way on purpose")
    new: Dict[str, Any] = {}
    rows: List[ScaledTensor] = []
    units: List[Unit] = []
    for sel in chosen:
        new[sel.name], scaled_rows = _scaled(sel, factors, layer_axis)
        rows.extend(scaled_rows)
        axis = None if sel.layer is not None else layer_axis  # a stacked tensor: one unit per layer slice
        units += [unit(sel.name, new[sel.name], axis, None if axis is None else r.layer, r.factor) for r in scaled_rows]
    record = DepthScalingRecord(library, name, found_depth, tuple(rows), forced=bool(count))
    scaled = _without_legacy(rebuild(new), library)
    remember(library, count + 1, units)
    return scaled, record
