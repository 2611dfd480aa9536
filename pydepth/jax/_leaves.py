# SPDX-License-Identifier: MIT
"""A JAX model's floating parameters by ``jax.tree_util.keystr`` name, and the model rebuilt with
some of them replaced: Linen variables (a new mapping), NNX modules (updated in place) and
Equinox modules (a new module) and plain params (new :class:`pydepth.jax.PlainParams`)."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

import jax
import jax.numpy as jnp

from ._deps import library_of

__all__ = ["named_leaves", "MARK"]

MARK = "pydepth_depth_scalings"  # the Linen params key of an earlier release's depth-scaling mark (still read)

#: library -> the name records and messages use
_LABELS = {"linen": "flax-linen", "nnx": "flax-nnx", "plain": "jax-function"}

Rebuild = Callable[[Dict[str, Any]], Any]


def _floating(leaf: Any) -> bool:
    # jnp's floating includes bfloat16 and fp8 (ml_dtypes), which numpy's inexact does not
    return hasattr(leaf, "dtype") and hasattr(leaf, "shape") and bool(jnp.issubdtype(leaf.dtype, jnp.floating))


def named_leaves(model: Any) -> Tuple[str, List[Tuple[str, Any]], Rebuild]:
    """``(library, [(name, leaf)], rebuild)``: the floating parameters in flattening order and a
    function that returns the model with the leaves named in its argument replaced."""
    library = library_of(model)
    if library == "linen":
        tree = model["params"]
    elif library == "plain":
        tree = model.params
    elif library == "nnx":
        from flax import nnx
        tree = nnx.state(model, nnx.Param)
    else:
        tree = model
    flat, treedef = jax.tree_util.tree_flatten_with_path(tree)
    names = [jax.tree_util.keystr(path) for path, _ in flat]
    leaves = [(n, leaf) for n, (_, leaf) in zip(names, flat) if _floating(leaf) and MARK not in n]

    def rebuild(new: Dict[str, Any]) -> Any:
        values = [new.get(n, leaf) for n, (_, leaf) in zip(names, flat)]
        rebuilt = jax.tree_util.tree_unflatten(treedef, values)
        if library == "linen":
            return {**dict(model), "params": rebuilt}
        if library == "nnx":
            from flax import nnx
            nnx.update(model, rebuilt)
            return model
        if library == "plain":
            from .plain import PlainParams
            return PlainParams(rebuilt)
        return rebuilt

    return _LABELS.get(library, library), leaves, rebuild
