# SPDX-License-Identifier: MIT
"""Equinox: the loss runs on a copy of the model whose blocks are wrapped (``eqx.tree_at``) in a
module holding the block's dummy and whose attention submodules are wrapped in a tapping
module; a stacked block's dummy is stacked like its leaves, so ``lax.scan`` slices it."""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

import equinox as eqx
import jax
import numpy as np

from ..errors import SiteSpecError
from ._taps import ListedDummies, run_attention, run_block
from .sites import ResidualSites, resolve_attribute

__all__ = ["EquinoxAdapter", "TappedBlock", "TappedAttention"]


class _Delegating(eqx.Module):
    """Attribute reads the wrapper lacks go to the wrapped module (``self.attn.num_heads``)."""

    inner: Any

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(object.__getattribute__(self, "inner"), name)


class TappedAttention(_Delegating):
    """An attention submodule whose output is tapped as its block's mid site."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return run_attention(self.inner, args, kwargs, name=type(self.inner).__name__)


class TappedBlock(_Delegating):
    """A block (or a stack of blocks) with its site dummy."""

    tap: Any
    attention: bool = eqx.field(static=True)
    name: str = eqx.field(static=True)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return run_block(self.inner, lambda x: self.tap, args, kwargs, attention=self.attention, name=self.name)


def _arrays(tree: Any) -> List[Any]:
    return [leaf for leaf in jax.tree_util.tree_leaves(tree) if eqx.is_array(leaf)]


class EquinoxAdapter(ListedDummies):
    """Instruments ``loss_fn(model, batch)`` for an Equinox model's blocks."""

    library = "equinox"

    def __init__(self, loss_fn: Callable[..., Any], model: Any, sites: ResidualSites) -> None:
        self.loss_fn = loss_fn
        self.sites = sites
        self.model = model
        self.dynamic, self.static = eqx.partition(model, eqx.is_array)
        blocks = resolve_attribute(model, sites.blocks)
        if sites.stacked:
            leaves = _arrays(blocks)
            if not isinstance(blocks, eqx.Module) or not leaves:
                raise SiteSpecError(f"{sites.blocks} is a {type(blocks).__name__}; a stacked stack is one module")
            if np.ndim(leaves[0]) <= sites.stack_axis:
                raise SiteSpecError(f"the stacked blocks' parameters have no layer axis {sites.layer_axis}")
            self.layers = int(np.shape(leaves[0])[sites.layer_axis])
        else:
            if not isinstance(blocks, (list, tuple)) or not all(isinstance(b, eqx.Module) for b in blocks):
                raise SiteSpecError(f"{sites.blocks} is not a list of Equinox modules; pass layer_axis for a "
                                    "stacked module")
            self.layers = len(blocks)
        if self.layers == 0:
            raise SiteSpecError(f"{sites.blocks} holds no block")

    def arrays(self) -> Any:
        """The traced argument: the model's arrays."""
        return self.dynamic

    def prepare(self, batch: Any) -> None:
        """Nothing to find before tracing: the blocks are attributes."""

    def _wrap(self, block: Any, dummy: Any, index: int) -> TappedBlock:
        att = self.sites.attention
        if att is not None:
            inner = resolve_attribute(block, att)
            block = eqx.tree_at(lambda b: resolve_attribute(b, att), block, TappedAttention(inner))
        return TappedBlock(block, dummy, att is not None, f"{self.sites.blocks}.{index}")

    def call(self, dynamic: Any, batch: Any, dummies: List[Any]) -> Any:
        """The loss on a copy of the model with wrapped blocks."""
        model = eqx.combine(dynamic, self.static)
        blocks = resolve_attribute(model, self.sites.blocks)
        if self.sites.stacked:
            new: Any = self._wrap(blocks, dummies[0], 0)
        else:
            new = type(blocks)(self._wrap(b, d, i) for i, (b, d) in enumerate(zip(blocks, dummies)))
        where = lambda m: resolve_attribute(m, self.sites.blocks)  # noqa: E731
        return self.loss_fn(eqx.tree_at(where, model, new), batch)

    def gains(self) -> Tuple[List[Tuple[Tuple[float, ...], ...]], Tuple[float, ...]]:
        """Per-block (attention norm, mid norm) gains and the final norm's gain, when named."""
        s = self.sites

        def gain(module: Any, layer: Optional[int]) -> Tuple[float, ...]:
            leaves = _arrays(module)
            if not leaves:
                return ()
            arr = np.asarray(leaves[0], dtype=np.float64)
            if layer is not None:
                arr = np.take(arr, layer, axis=s.layer_axis)
            return tuple(float(v) for v in arr.reshape(-1))

        blocks = resolve_attribute(self.model, s.blocks)
        rows = []
        for b in range(self.layers):
            block, layer = (blocks, b) if s.stacked else (blocks[b], None)
            rows.append(tuple(gain(resolve_attribute(block, n), layer) if n else ()
                              for n in (s.attention_norm, s.mid_norm)))
        final = gain(resolve_attribute(self.model, s.final_norm), None) if s.final_norm else ()
        return rows, final
