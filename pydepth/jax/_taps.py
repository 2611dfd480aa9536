# SPDX-License-Identifier: MIT
"""Site taps: identities with a custom reverse rule that hand back what they saw at a residual
site as the cotangent of a zero dummy leaf travelling with the parameters.

A block's dummy has rows ``(input, mid, output)``. In sums mode (dummy ``[3, 5]``) a row's
cotangent is ``[Σx², Σg², elements, Σbranch², positions]`` over the positions the mask keeps
(every position without one; padding is selected away before squaring); in tape mode (dummy ``[3, 2, *x]``)
it is the activation and its adjoint in full. Cotangents of a shared leaf add up, so ``scan``
stacks them per layer, ``vmap`` and sharded batches sum them, and ``remat`` recomputes them.
The mid residual is the block input plus the attention submodule's output (times the block's
constant residual multiplier, when a probe trace found one); its adjoint is the cotangent of
that output (divided by the multiplier).
"""
from __future__ import annotations

import contextlib
import threading
from functools import partial
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import jax
import jax.numpy as jnp

from ..errors import SiteSpecError
from ._probe import mark
from .sites import ResidualSites

__all__ = ["ROWS", "STATS", "run_block", "run_attention", "recording_shapes", "masking", "tapping",
           "stats_dummy_shape", "tape_dummy_shape"]

ROWS = ("input", "mid", "output")
STATS = ("sum_x2", "sum_g2", "elements", "sum_branch2", "positions")
_ROW = {name: i for i, name in enumerate(ROWS)}


def stats_dummy_shape() -> Tuple[int, int]:
    """The dummy of one block in sums mode: three rows of five sums."""
    return (len(ROWS), len(STATS))


def tape_dummy_shape(site_shape: Tuple[int, ...]) -> Tuple[int, ...]:
    """The dummy of one block in tape mode: activation and adjoint of three sites."""
    return (len(ROWS), 2, *tuple(site_shape))


def _activation_and_branch(kind: str, x: Any, ctx: Any) -> Tuple[Any, Any]:
    if kind == "input":
        return x, None
    if kind == "mid":
        x_in, c = ctx
        return x_in + c * x, c * x  # mid residual = block input + c × attention output
    if ctx is None:
        return x, None
    x_in, added = ctx
    return x, x - (x_in + added)  # the feed-forward branch


@partial(jax.custom_vjp, nondiff_argnums=(0,))
def _site(kind: str, x: Any, dummy: Any, ctx: Any, valid: Any) -> Any:
    return x


def _site_fwd(kind: str, x: Any, dummy: Any, ctx: Any, valid: Any) -> Tuple[Any, Tuple[Any, Any, Any, Any]]:
    return x, (x, dummy, ctx, valid)


def _masked_square_sum(v: Any, valid: Any, dt: Any) -> Any:
    v = v.astype(dt)
    if valid is None:
        return jnp.sum(v * v)
    return jnp.sum(jnp.where(valid[..., None] > 0, v * v, jnp.zeros((), dt)))  # padding never enters, even NaN


def _sums(x: Any, act: Any, branch: Any, g: Any, valid: Any, dt: Any) -> Any:
    b2 = jnp.zeros((), dt) if branch is None else _masked_square_sum(branch, valid, dt)
    if valid is None:
        positions = jnp.asarray(float(x.size) / float(x.shape[-1]), dt)
    else:
        positions = jnp.sum((valid > 0).astype(dt))
    return jnp.stack([_masked_square_sum(act, valid, dt), _masked_square_sum(g, valid, dt),
                      positions * float(x.shape[-1]), b2, positions])


def _site_bwd(kind: str, res: Tuple[Any, Any, Any, Any], g: Any) -> Tuple[Any, Any, Any, Any]:
    x, dummy, ctx, valid = res
    act, branch = _activation_and_branch(kind, x, ctx)
    row = _ROW[kind]
    g_site = g / ctx[1] if kind == "mid" else g  # the mid residual's adjoint: a's cotangent is c times it
    if dummy.ndim == 2:  # sums mode
        stats = _sums(x, act, branch, g_site, valid, dummy.dtype)
    else:
        stats = jnp.stack([act.astype(dummy.dtype), g_site.astype(dummy.dtype)])
    ct_dummy = jnp.zeros_like(dummy).at[row].set(stats)
    zeros = partial(jax.tree_util.tree_map, jnp.zeros_like)
    return g, ct_dummy, zeros(ctx), zeros(valid)


_site.defvjp(_site_fwd, _site_bwd)


class _Frame:
    """One block call in progress: its dummy, its (tapped) input and its attention output."""

    def __init__(self, dummy: Any, x_in: Any, valid: Optional[Any]) -> None:
        self.dummy = dummy
        self.x_in = x_in
        self.valid = valid
        self.attention: Optional[Any] = None
        self.added: Optional[Any] = None


class _Stack(threading.local):
    def __init__(self) -> None:
        self.frames: List[_Frame] = []
        self.shapes: Optional[Dict[str, Tuple[int, ...]]] = None
        self.valid: Optional[Any] = None
        self.probing = False
        self.multiplier = 1.0


@contextlib.contextmanager
def tapping(*, probing: bool = False, multiplier: float = 1.0) -> Iterator[None]:
    """While active, taps emit probe markers (``probing``) or reverse rules whose mid site is the
    block input plus ``multiplier`` × the attention output."""
    previous = (_FRAMES.probing, _FRAMES.multiplier)
    _FRAMES.probing, _FRAMES.multiplier = probing, multiplier
    try:
        yield
    finally:
        _FRAMES.probing, _FRAMES.multiplier = previous


def _tap(kind: str, x: Any, dummy: Any, ctx: Any, valid: Any) -> Any:
    if _FRAMES.probing:
        return mark(x, kind)
    return _site(kind, x, dummy, ctx, valid)


@contextlib.contextmanager
def masking(valid: Optional[Any]) -> Iterator[None]:
    """Makes ``valid`` (float ``[batch, tokens]``, 1 where a position enters the RMS) the mask
    every site traced while active applies."""
    previous, _FRAMES.valid = _FRAMES.valid, valid
    try:
        yield
    finally:
        _FRAMES.valid = previous


def _valid_for(x: Any, name: str) -> Optional[Any]:
    valid = _FRAMES.valid
    if valid is None:
        return None
    if tuple(valid.shape) != tuple(x.shape[:-1]):
        raise SiteSpecError(f"block {name} sees a residual of shape {tuple(x.shape)} but the mask has shape "
                            f"{tuple(valid.shape)}: a mask needs blocks that see the whole [batch, tokens, "
                            "width] residual (a loss that maps the blocks over examples with vmap cannot be "
                            "masked; observe unpadded rows instead)")
    return valid


@contextlib.contextmanager
def recording_shapes() -> Iterator[Dict[str, Tuple[int, ...]]]:
    """Records the residual shape each block (by name) sees while active."""
    shapes: Dict[str, Tuple[int, ...]] = {}
    previous, _FRAMES.shapes = _FRAMES.shapes, shapes
    try:
        yield shapes
    finally:
        _FRAMES.shapes = previous


_FRAMES = _Stack()


_Rebuild = Callable[[Any], Tuple[Tuple[Any, ...], Dict[str, Any]]]


def _split_first(args: Tuple[Any, ...], kwargs: Dict[str, Any], what: str) -> Tuple[Any, _Rebuild]:
    """The residual argument (the first positional one, else the first array keyword) and a
    function putting a replacement back."""
    if args:
        return args[0], lambda v: ((v, *tuple(args[1:])), kwargs)
    for key, value in kwargs.items():
        if isinstance(value, jax.Array) or hasattr(value, "shape"):
            return value, lambda v, k=key: (args, {**kwargs, k: v})
    raise SiteSpecError(f"the {what} was called without an array argument; its first argument must be "
                        "the residual stream")


def _first_of(out: Any, what: str) -> Tuple[Any, Callable[[Any], Any]]:
    if isinstance(out, (tuple, list)) and out:
        return out[0], lambda v: type(out)([v, *out[1:]]) if isinstance(out, list) else (v, *tuple(out[1:]))
    if hasattr(out, "shape"):
        return out, lambda v: v
    raise SiteSpecError(f"the {what} returned {type(out).__name__}; expected an array or a tuple whose "
                        "first item is the residual stream")


def run_block(call: Callable[..., Any], dummy_for: Callable[[Any], Any], args: Tuple[Any, ...],
              kwargs: Dict[str, Any], *, attention: bool, name: str) -> Any:
    """Calls a block with its input and output tapped; ``dummy_for(x)`` gives the block's dummy."""
    x, put = _split_first(args, kwargs, f"block {name}")
    if _FRAMES.shapes is not None:
        _FRAMES.shapes.setdefault(name, tuple(x.shape))
    dummy = dummy_for(x)
    valid = _valid_for(x, name)
    x = _tap("input", x, dummy, None, valid)
    frame = _Frame(dummy, x, valid)
    _FRAMES.frames.append(frame)
    try:
        a, k = put(x)
        out = call(*a, **k)
    finally:
        _FRAMES.frames.pop()
    h, put_out = _first_of(out, f"block {name}")
    if attention and frame.attention is None:
        raise SiteSpecError(f"block {name} never called its attention submodule; name the submodule whose "
                            "output the block adds to the residual")
    if getattr(h, "shape", None) != getattr(x, "shape", None):
        raise SiteSpecError(f"block {name} maps a residual of shape {x.shape} to {getattr(h, 'shape', None)}; "
                            "a block must keep the residual's shape")
    ctx = (frame.x_in, frame.added) if attention else None
    return put_out(_tap("output", h, dummy, ctx, valid))


def run_attention(call: Callable[..., Any], args: Tuple[Any, ...], kwargs: Dict[str, Any], *, name: str) -> Any:
    """Calls a block's attention submodule with its output tapped as the mid site."""
    if not _FRAMES.frames:
        return call(*args, **kwargs)  # called outside an observed block: not a site
    frame = _FRAMES.frames[-1]
    if frame.attention is not None:
        raise SiteSpecError(f"attention submodule {name} was called twice in one block call")
    out = call(*args, **kwargs)
    a, put = _first_of(out, f"attention submodule {name}")
    if getattr(a, "shape", None) != frame.x_in.shape:
        raise SiteSpecError(f"attention submodule {name} returned shape {getattr(a, 'shape', None)}; the block "
                            f"input has {frame.x_in.shape}: name the submodule whose whole output the block "
                            "adds to the "
                            "residual (not one mapped per token inside a vmap)")
    c = _FRAMES.multiplier
    a = _tap("mid", a, frame.dummy, (frame.x_in, jnp.asarray(c, a.dtype)), frame.valid)
    frame.attention = a
    frame.added = a if c == 1.0 else c * a
    return put(a)


class ListedDummies:
    """Zero dummies kept as a list, one per block or one stacked on the layer axis (the NNX and
    Equinox adapters; Linen keeps its dummies in its variables)."""

    sites: ResidualSites
    layers: int

    def zeros(self, shape: Tuple[int, ...]) -> List[Any]:
        """Zero dummies of ``shape`` per block (stacked on the layer axis for a stacked module)."""
        if self.sites.stacked:
            full = list(shape)
            full.insert(self.sites.stack_axis, self.layers)
            return [jnp.zeros(tuple(full), dtype=float)]
        return [jnp.zeros(shape, dtype=float) for _ in range(self.layers)]

    def to_blocks(self, grads: List[Any]) -> Any:
        """The dummies' cotangents as ``[layers, ...]`` in layer order."""
        if self.sites.stacked:
            return jnp.moveaxis(grads[0], self.sites.stack_axis, 0)
        return jnp.stack(grads)
