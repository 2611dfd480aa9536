# SPDX-License-Identifier: MIT
"""Plain JAX functions: ``loss_fn(params, batch)`` over any params pytree, whose residual blocks
the user marks in the function itself.

``residual_block(name, fn)`` returns ``fn`` unchanged outside an observation and, inside one,
``fn`` with its input and output tapped; ``attention_output(a)`` marks the term a block adds to
its residual first (its mid site). The params go in wrapped as :class:`PlainParams` so the bridge
knows the model kind; parameters are named by ``jax.tree_util.keystr`` paths of the params, as
for the other libraries. Blocks are unrolled (each name called once per forward, e.g. a Python
loop); ``ResidualSites.blocks`` is a regular expression matched in full against the names, its
first group capturing the layer index.
"""

from __future__ import annotations

import re
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple, TypeVar

import jax

from ..errors import ArgumentTypeError, SiteSpecError
from ._taps import ListedDummies, run_attention, run_block
from .sites import ResidualSites

__all__ = ["PlainParams", "residual_block", "attention_output", "PlainAdapter"]

F = TypeVar("F", bound=Callable[..., Any])


@jax.tree_util.register_pytree_with_keys_class
class PlainParams:
    """The params pytree of a plain ``loss_fn(params, batch)``: ``observe_residual_health``,
    ``apply_depth_scaling`` and ``audit_initialization`` take it as their model and hand
    ``loss_fn`` the bare ``params``."""

    def __init__(self, params: Any) -> None:
        if isinstance(params, PlainParams):
            raise ArgumentTypeError("PlainParams wraps a params pytree, got PlainParams itself")
        self.params = params

    def tree_flatten_with_keys(self) -> Tuple[Tuple[Tuple[Any, Any], ...], None]:
        """The one child, ``params`` (paths below it are the parameter names)."""
        return ((jax.tree_util.GetAttrKey("params"), self.params),), None

    @classmethod
    def tree_unflatten(cls, aux: None, children: Any) -> PlainParams:
        """Rebuilds the wrapper around its params."""
        out = object.__new__(cls)
        out.params = children[0]
        return out

    def __repr__(self) -> str:
        return f"PlainParams({jax.tree_util.tree_structure(self.params)})"


class _Active(threading.local):
    def __init__(self) -> None:
        self.seen: Optional[Dict[str, Tuple[int, ...]]] = None  # discovery: name -> residual shape
        self.dummies: Optional[Dict[str, Any]] = None  # tapping: name -> the block's dummy
        self.attention = False


_ACTIVE = _Active()


def residual_block(name: str, fn: F) -> F:
    """``fn`` (a block mapping the residual, its first argument, to a residual of the same shape)
    as the residual block ``name``; outside an observation it is ``fn`` itself."""
    if not isinstance(name, str) or not name:
        raise ArgumentTypeError(f"a residual block's name must be a non-empty string, got {name!r}")
    if not callable(fn):
        raise ArgumentTypeError(f"residual_block({name!r}, fn): fn must be callable, got {fn!r}")

    def block(*args: Any, **kwargs: Any) -> Any:
        if _ACTIVE.seen is not None:
            x = args[0] if args else next(iter(kwargs.values()), None)
            _ACTIVE.seen.setdefault(name, tuple(getattr(x, "shape", ())))
        dummies = _ACTIVE.dummies
        if dummies is None or name not in dummies:
            return fn(*args, **kwargs)
        return run_block(fn, lambda x: dummies[name], args, kwargs, attention=_ACTIVE.attention, name=name)

    return block  # type: ignore[return-value]


def attention_output(a: Any) -> Any:
    """Marks ``a``, the first term a residual block adds to its input (the attention output), as
    the block's mid site; ``a`` itself outside an observation."""
    if _ACTIVE.dummies is None or not _ACTIVE.attention:
        return a
    return run_attention(lambda: a, (), {}, name="attention_output")


class PlainAdapter(ListedDummies):
    """Instruments a plain ``loss_fn(params, batch)`` whose blocks are marked with
    :func:`residual_block`."""

    library = "jax-function"

    def __init__(self, loss_fn: Callable[..., Any], model: PlainParams, sites: ResidualSites) -> None:
        if sites.stacked:
            raise SiteSpecError("a plain function's blocks are marked one by one (unrolled); layer_axis must be None")
        if sites.attention_norm or sites.mid_norm or sites.final_norm:
            raise SiteSpecError(
                "a plain function has no modules to read norm gains from; leave attention_norm, "
                "mid_norm and final_norm unset"
            )
        self.loss_fn, self.model, self.sites = loss_fn, model, sites
        self.pattern = re.compile(sites.blocks)
        self.found: List[Tuple[str, Tuple[int, ...]]] = []
        self.layers = 0

    def arrays(self) -> Any:
        """The traced argument: the wrapped params."""
        return self.model

    def prepare(self, batch: Any) -> None:
        """Finds the marked blocks the pattern selects (one abstract evaluation of the loss)."""
        seen: Dict[str, Tuple[int, ...]] = {}
        previous, _ACTIVE.seen = _ACTIVE.seen, seen
        try:
            jax.eval_shape(lambda p, b: self.loss_fn(p.params, b), self.model, batch)
        finally:
            _ACTIVE.seen = previous
        names = [n for n in seen if self.pattern.fullmatch(n)]
        if not names:
            raise SiteSpecError(
                f"no residual_block name matches blocks {self.sites.blocks!r}; the function marks "
                f"{sorted(seen) or 'no block'}"
            )
        names.sort(key=lambda n: self._index(n, names))
        self.found = [(n, seen[n]) for n in names]
        self.layers = len(names)

    def _index(self, name: str, names: List[str]) -> int:
        m = self.pattern.fullmatch(name)
        if not (m and m.groups() and m.group(1) is not None):
            return names.index(name)
        if not m.group(1).isdigit():
            raise SiteSpecError(
                f"blocks {self.sites.blocks!r}: its first group captured {m.group(1)!r} in {name!r}; "
                "it must capture the layer index only, as r'layer(\\d+)'"
            )
        return int(m.group(1))

    def site_shapes(self) -> List[Tuple[int, ...]]:
        """The residual shape each block saw (layer order)."""
        return [shape for _, shape in self.found]

    def call(self, arrays: PlainParams, batch: Any, dummies: List[Any]) -> Any:
        """The loss with every selected block tapped."""
        previous = (_ACTIVE.dummies, _ACTIVE.attention)
        _ACTIVE.dummies = {n: d for (n, _), d in zip(self.found, dummies)}
        _ACTIVE.attention = self.sites.attention is not None
        try:
            return self.loss_fn(arrays.params, batch)
        finally:
            _ACTIVE.dummies, _ACTIVE.attention = previous

    def gains(self) -> Tuple[List[Tuple[Tuple[float, ...], ...]], Tuple[float, ...]]:
        """No norm gains: a plain function names no norm modules."""
        return [((), ())] * self.layers, ()
