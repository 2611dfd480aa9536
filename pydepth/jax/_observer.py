# SPDX-License-Identifier: MIT
"""One compiled observer per model structure: a model split into its traced arrays and a static,
hashable part (NNX graph definition, Equinox static leaves), and a small cache of jitted
functions keyed by (loss function, sites, library, static part). ``jax.jit`` then keys the
compiled program by the arrays' tree structure, shapes, dtypes and shardings itself."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Hashable, Optional, Tuple

__all__ = ["split_model", "ObserverCache"]

Rebuild = Callable[[Any], Any]


def _linen(model: Any) -> Tuple[Any, Hashable, Rebuild]:
    return model, None, lambda arrays: arrays


def _nnx(model: Any) -> Tuple[Any, Hashable, Rebuild]:
    from flax import nnx
    graphdef, state = nnx.split(model)
    return state, graphdef, lambda arrays: nnx.merge(graphdef, arrays)


def _equinox(model: Any) -> Tuple[Any, Hashable, Rebuild]:
    import equinox as eqx
    import jax
    dynamic, static = eqx.partition(model, eqx.is_array)
    leaves, treedef = jax.tree_util.tree_flatten(static)
    return dynamic, (treedef, tuple(leaves)), lambda arrays: eqx.combine(arrays, static)


#: library -> how its models split into (traced arrays, static key, rebuild)
_SPLITS = {"linen": _linen, "plain": _linen,  # Linen variables and PlainParams are arrays only
           "nnx": _nnx, "equinox": _equinox}


def split_model(library: str, model: Any) -> Tuple[Any, Hashable, Rebuild]:
    """``(arrays, static key, rebuild)`` of a model: ``rebuild(arrays)`` is the model again
    (inside a trace too)."""
    return _SPLITS[library](model)


class ObserverCache:
    """Jitted functions by key, the ``size`` most recently used kept (a loss function or model
    structure that changes every call does not grow memory without bound)."""

    def __init__(self, size: int = 16) -> None:
        self.size = size
        self.entries: OrderedDict[Hashable, Any] = OrderedDict()

    def get(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """The entry of ``key``, built by ``build()`` on a miss or when the key is unhashable."""
        try:
            hash(key)
        except TypeError:
            return build()  # an unhashable static part: compiled afresh, as before caching
        entry: Optional[Any] = self.entries.get(key)
        if entry is None:
            entry = build()
            self.entries[key] = entry
            while len(self.entries) > self.size:
                self.entries.popitem(last=False)
        else:
            self.entries.move_to_end(key)
        return entry

    def clear(self) -> None:
        """Forgets every compiled observer."""
        self.entries.clear()
