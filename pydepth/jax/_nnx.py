# SPDX-License-Identifier: MIT
"""Flax NNX: the loss runs on a private copy of the model (merged inside the trace) whose blocks
and attention submodules have their classes swapped for tapping subclasses; each block's dummy
is a parameter-like variable on it, so ``nnx.scan`` slices it per layer."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

import jax
import numpy as np
from flax import nnx

from ..errors import SiteSpecError
from ._taps import ListedDummies, run_attention, run_block
from .sites import ResidualSites, resolve_attribute

__all__ = ["NnxAdapter", "SiteTap"]

TAP = "pydepth_site_tap"


class SiteTap(nnx.Param):
    """The zero dummy of one block (or a stack of blocks) whose cotangent carries the site sums."""


_TAPPED: Dict[Tuple[type, str, bool], type] = {}


def _tapped_class(cls: type, role: str, attention: bool) -> type:
    """A subclass of ``cls`` whose ``__call__`` taps the block (or the attention output)."""
    key = (cls, role, attention)
    if key not in _TAPPED:
        def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
            call = cls.__call__.__get__(self)
            if role == "attention":
                return run_attention(call, args, kwargs, name=cls.__name__)
            return run_block(call, lambda x: getattr(self, TAP)[...], args, kwargs,
                             attention=attention, name=getattr(self, "_pydepth_site_name", cls.__name__))
        _TAPPED[key] = type(cls.__name__, (cls,), {"__call__": __call__, "__module__": cls.__module__,
                                                  "__qualname__": cls.__qualname__})
    return _TAPPED[key]


def _variables(module: Any) -> List[Any]:
    return [leaf for leaf in jax.tree_util.tree_leaves(nnx.state(module)) if hasattr(leaf, "shape")]


def _first_value(module: Any, what: str) -> Any:
    leaves = _variables(module)
    if not leaves:
        raise SiteSpecError(f"{what} has no parameters")
    return leaves[0]


class NnxAdapter(ListedDummies):
    """Instruments ``loss_fn(model, batch)`` for an NNX model's blocks."""

    library = "flax-nnx"

    def __init__(self, loss_fn: Callable[..., Any], model: Any, sites: ResidualSites) -> None:
        self.loss_fn = loss_fn
        self.sites = sites
        self.model = model
        self.graphdef, self.state = nnx.split(model)
        blocks = resolve_attribute(model, sites.blocks)
        if sites.stacked:
            if not isinstance(blocks, nnx.Module):
                raise SiteSpecError(f"{sites.blocks} is a {type(blocks).__name__}; a stacked stack is one module")
            leaf = _first_value(blocks, sites.blocks)
            if np.ndim(leaf) <= sites.stack_axis:
                raise SiteSpecError(f"the stacked blocks' parameters have no layer axis {sites.layer_axis}")
            self.layers = int(np.shape(leaf)[sites.layer_axis])
        else:
            if not hasattr(blocks, "__len__") or not all(isinstance(b, nnx.Module) for b in blocks):
                raise SiteSpecError(f"{sites.blocks} is not a list of NNX modules; pass layer_axis for a "
                                    "stacked module")
            self.layers = len(blocks)
        if self.layers == 0:
            raise SiteSpecError(f"{sites.blocks} holds no block")
        self.shapes: List[Tuple[int, ...]] = []

    def arrays(self) -> Any:
        """The traced argument: the model's state."""
        return self.state

    def prepare(self, batch: Any) -> None:
        """Nothing to find before tracing: the blocks are attributes."""

    def _blocks(self, model: Any) -> List[Any]:
        blocks = resolve_attribute(model, self.sites.blocks)
        return [blocks] if self.sites.stacked else list(blocks)

    def call(self, state: Any, batch: Any, dummies: List[Any]) -> Any:
        """The loss on a private, tapped copy of the model."""
        model = nnx.merge(self.graphdef, state, copy=True)
        attention = self.sites.attention
        for i, (block, dummy) in enumerate(zip(self._blocks(model), dummies)):
            if attention is not None:
                att = resolve_attribute(block, attention)
                object.__setattr__(att, "__class__", _tapped_class(type(att), "attention", False))
            object.__setattr__(block, "__class__", _tapped_class(type(block), "block", attention is not None))
            setattr(block, TAP, SiteTap(dummy))
            object.__setattr__(block, "_pydepth_site_name", f"{self.sites.blocks}.{i}")
        return self.loss_fn(model, batch)

    def gains(self) -> Tuple[List[Tuple[Tuple[float, ...], ...]], Tuple[float, ...]]:
        """Per-block (attention norm, mid norm) gains and the final norm's gain, when named."""
        s = self.sites

        def gain(module: Any, layer: Optional[int]) -> Tuple[float, ...]:
            arr = np.asarray(_first_value(module, "a norm"), dtype=np.float64)
            if layer is not None:
                arr = np.take(arr, layer, axis=s.layer_axis)
            return tuple(float(v) for v in arr.reshape(-1))

        blocks = self._blocks(self.model)
        rows = []
        for b in range(self.layers):
            block, layer = (blocks[0], b) if s.stacked else (blocks[b], None)
            rows.append(tuple(gain(resolve_attribute(block, n), layer) if n else ()
                              for n in (s.attention_norm, s.mid_norm)))
        final = gain(resolve_attribute(self.model, s.final_norm), None) if s.final_norm else ()
        return rows, final
