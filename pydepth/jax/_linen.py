# SPDX-License-Identifier: MIT
"""Flax Linen: blocks found by module path with ``nn.intercept_methods``; each block's dummy is a
parameter ``pydepth_site_tap`` inserted into a private copy of the variables at the block's
scope, so ``nn.scan`` slices it per layer like every other parameter."""
from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import SiteSpecError
from ._taps import run_attention, run_block
from .sites import ResidualSites

__all__ = ["LinenAdapter", "TAP"]

TAP = "pydepth_site_tap"

Path = Tuple[str, ...]


def _subtree(params: Any, path: Path, what: str) -> Any:
    node = params
    for name in path:
        if not hasattr(node, "keys") or name not in node:
            raise SiteSpecError(f"the params hold no {'/'.join(path)!r} ({what})")
        node = node[name]
    return node


def _with_leaf(tree: Any, path: Path, value: Any) -> Dict[str, Any]:
    out = dict(tree)
    if not path:
        out[TAP] = value
    else:
        out[path[0]] = _with_leaf(tree.get(path[0], {}), path[1:], value)
    return out


def _first_leaf(tree: Any) -> Optional[Any]:
    leaves = jax.tree_util.tree_leaves(tree)
    return leaves[0] if leaves else None


class LinenAdapter:
    """Instruments ``loss_fn(variables, batch)`` for the blocks ``sites`` describes."""

    library = "flax-linen"

    def __init__(self, loss_fn: Callable[..., Any], model: Any, sites: ResidualSites) -> None:
        import flax.linen as nn
        self.nn = nn
        self.loss_fn = loss_fn
        self.sites = sites
        self.variables = model
        self.pattern = re.compile(sites.blocks)
        self.found: List[Tuple[Path, Tuple[int, ...]]] = []
        self.layers = 0

    def arrays(self) -> Any:
        """The traced argument: the variables."""
        return self.variables

    def prepare(self, batch: Any) -> None:
        """Finds the blocks (one abstract evaluation of the loss) and the number of layers."""
        self.found = self.discover(self.variables, batch)
        self.layers = self._count(self.variables, self.found)

    def adopt(self, found: List[Tuple[Path, Tuple[int, ...]]]) -> None:
        """Takes the blocks an earlier trace of the same loss found, without tracing again."""
        self.found = found
        self.layers = self._count(self.variables, found)

    def site_shapes(self) -> List[Tuple[int, ...]]:
        """The residual shape each block saw (layer order)."""
        return [shape for _, shape in self.found]

    def _block_path(self, mod: Any) -> Optional[Path]:
        if mod.scope is None:
            return None
        path = tuple(mod.path)
        return path if self.pattern.fullmatch("/".join(path)) else None

    def _interceptor(self, dummy_for: Optional[Callable[[Any, Path, Any], Any]],
                     seen: Dict[Path, Tuple[int, ...]]) -> Callable[..., Any]:
        attention = self.sites.attention

        def intercept(next_fun: Callable[..., Any], args: Any, kwargs: Any, ctx: Any) -> Any:
            mod = ctx.module
            if mod.scope is None or ctx.method_name not in (self.sites.method, "__call__"):
                return next_fun(*args, **kwargs)
            path = self._block_path(mod) if ctx.method_name == self.sites.method else None
            if path is not None:
                x = args[0] if args else next(iter(kwargs.values()), None)
                seen.setdefault(path, tuple(getattr(x, "shape", ())))
                if dummy_for is None:
                    return next_fun(*args, **kwargs)
                return run_block(next_fun, lambda v: dummy_for(mod, path, v), args, kwargs,
                                 attention=attention is not None, name="/".join(path))
            full = tuple(mod.path)
            if (dummy_for is not None and attention is not None and full and full[-1] == attention
                    and ctx.method_name == "__call__" and self.pattern.fullmatch("/".join(full[:-1]))):
                return run_attention(next_fun, args, kwargs, name="/".join(full))
            return next_fun(*args, **kwargs)

        return intercept

    def discover(self, variables: Any, batch: Any) -> List[Tuple[Path, Tuple[int, ...]]]:
        """The block paths (in layer order) and the residual shape each saw, from one abstract
        evaluation of the loss."""
        seen: Dict[Path, Tuple[int, ...]] = {}
        with self.nn.intercept_methods(self._interceptor(None, seen)):
            jax.eval_shape(lambda v, b: self.loss_fn(v, b), variables, batch)  # a fresh function: no cached trace
        if not seen:
            raise SiteSpecError(f"no module path matches blocks {self.sites.blocks!r} in one forward")
        paths = list(seen)
        if self.sites.stacked:
            if len(paths) != 1:
                raise SiteSpecError(f"blocks {self.sites.blocks!r} matches {len(paths)} modules; a scanned "
                                    "stack is one module")
        else:
            paths.sort(key=lambda p: self._index(p, paths))
        return [(p, seen[p]) for p in paths]

    def _index(self, path: Path, paths: List[Path]) -> int:
        """An unrolled block's layer: the pattern's first group (digits), else its order of calls."""
        m = self.pattern.fullmatch("/".join(path))
        if not (m and m.groups() and m.group(1) is not None):
            return paths.index(path)
        if not m.group(1).isdigit():
            raise SiteSpecError(f"blocks {self.sites.blocks!r}: its first group captured {m.group(1)!r} in "
                                f"{'/'.join(path)!r}; it must capture the layer index only, as r'layers_(\\d+)'")
        return int(m.group(1))

    def _count(self, variables: Any, found: List[Tuple[Path, Tuple[int, ...]]]) -> int:
        """The number of layers: blocks found, or the stacked leaves' extent on the layer axis."""
        if not self.sites.stacked:
            return len(found)
        axis = self.sites.stack_axis
        leaves = jax.tree_util.tree_leaves(_subtree(variables["params"], found[0][0], "the scanned blocks"))
        if not leaves or any(np.ndim(leaf) <= axis for leaf in leaves):
            raise SiteSpecError(f"the scanned blocks' parameters have no layer axis {axis}")
        extents = sorted({int(np.shape(leaf)[axis]) for leaf in leaves})
        if len(extents) > 1:
            raise SiteSpecError(f"layer_axis {axis} is not the layer axis of the scanned blocks: their parameters "
                                f"have extents {extents} on it (shapes like {np.shape(leaves[0])}); give the "
                                "axis nn.scan stacks params on (variable_axes, MaxText's param_scan_axis)")
        return extents[0]

    def call(self, variables: Any, batch: Any, dummies: Dict[Path, Any]) -> Any:
        """The loss with every block tapped, its dummy a parameter at the block's scope."""
        params = variables["params"]
        for path, dummy in dummies.items():
            params = _with_leaf(params, path, dummy)
        merged = {**dict(variables), "params": params}

        def dummy_for(mod: Any, path: Path, x: Any) -> Any:
            value = mod.get_variable("params", TAP)
            if value is None:
                raise SiteSpecError(f"block {'/'.join(path)} has no site dummy; it ran outside the blocks found")
            return value

        with self.nn.intercept_methods(self._interceptor(dummy_for, {})):
            return self.loss_fn(merged, batch)

    def gains(self) -> Tuple[List[Tuple[Tuple[float, ...], ...]], Tuple[float, ...]]:
        """Per-block (attention norm, mid norm) gains and the final norm's gain, when named."""
        params, found, layers = self.variables["params"], self.found, self.layers
        s = self.sites

        def gain(path: Path, layer: Optional[int]) -> Tuple[float, ...]:
            leaf = _first_leaf(_subtree(params, path, "a norm"))
            arr = np.asarray(leaf, dtype=np.float64)
            if layer is not None:
                arr = np.take(arr, layer, axis=s.layer_axis)
            return tuple(float(v) for v in arr.reshape(-1))

        rows = []
        for b in range(layers):
            path, layer = (found[0][0], b) if s.stacked else (found[b][0], None)
            rows.append(tuple(gain((*path, n), layer) if n else () for n in (s.attention_norm, s.mid_norm)))
        final = gain(tuple(s.final_norm.split("/")), None) if s.final_norm else ()
        return rows, final

    def zeros(self, shape: Tuple[int, ...]) -> Dict[Path, Any]:
        """Zero dummies of ``shape`` per block (stacked on the layer axis for a scanned stack)."""
        if self.sites.stacked:
            full = list(shape)
            full.insert(self.sites.stack_axis, self.layers)
            return {self.found[0][0]: jnp.zeros(tuple(full), dtype=float)}
        return {p: jnp.zeros(shape, dtype=float) for p, _ in self.found}

    def to_blocks(self, grads: Dict[Path, Any]) -> Any:
        """The dummies' cotangents as ``[layers, ...]`` in layer order."""
        found = self.found
        if self.sites.stacked:
            return jnp.moveaxis(grads[found[0][0]], self.sites.stack_axis, 0)
        return jnp.stack([grads[p] for p, _ in found])
