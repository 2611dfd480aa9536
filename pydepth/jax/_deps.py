# SPDX-License-Identifier: MIT
"""The one place the JAX bridge imports its optional dependencies, with the extra to install."""
from __future__ import annotations

import sys
from typing import Any

from ..errors import JaxDependencyError

_EXTRA = "pip install 'pydepth[jax]'"


def require_jax() -> Any:
    """The ``jax`` module, or :class:`JaxDependencyError` naming the ``pydepth[jax]`` extra."""
    try:
        import jax
    except ImportError as err:
        raise JaxDependencyError(f"pydepth.jax needs JAX, the optional 'jax' extra: {_EXTRA} ({err})") from None
    return jax


def require_flax() -> Any:
    """``flax`` (Linen and NNX), or :class:`JaxDependencyError` naming the extra."""
    try:
        import flax
        import flax.linen
        import flax.nnx
    except ImportError as err:
        raise JaxDependencyError(f"Flax models need flax, part of the optional 'jax' extra: {_EXTRA} ({err})") from None
    return flax


def require_equinox() -> Any:
    """``equinox``, or :class:`JaxDependencyError` naming the extra."""
    try:
        import equinox
    except ImportError as err:
        raise JaxDependencyError(f"Equinox models need equinox, part of the optional 'jax' extra: {_EXTRA} "
                                 f"({err})") from None
    return equinox


def library_of(model: Any) -> str:
    """``"linen"`` for a variables mapping, ``"nnx"`` for a Flax NNX module, ``"equinox"`` for an
    Equinox module, ``"plain"`` for :class:`pydepth.jax.PlainParams`; a model of none of these
    raises :class:`pydepth.ArgumentTypeError`."""
    from collections.abc import Mapping

    from ..errors import ArgumentTypeError
    from .plain import PlainParams
    if isinstance(model, PlainParams):
        return "plain"
    if isinstance(model, Mapping):
        if "params" not in model:
            raise ArgumentTypeError(f"Linen variables must hold a 'params' collection, got keys {sorted(model)}; "
                                    "wrap the params of a plain loss_fn(params, batch) as "
                                    "pydepth.jax.PlainParams(params)")
        return "linen"
    nnx = sys.modules.get("flax.nnx")
    if nnx is not None and isinstance(model, nnx.Module):
        return "nnx"
    eqx = sys.modules.get("equinox")
    if eqx is not None and isinstance(model, eqx.Module):
        refuse_named_arrays(model)
        return "equinox"
    raise ArgumentTypeError(f"model must be Flax Linen variables (a mapping with 'params'), a Flax NNX "
                            f"module, an Equinox module or pydepth.jax.PlainParams(params) of a plain "
                            f"loss_fn(params, batch), got {type(model).__name__}")


def _is_named_array(node: Any) -> bool:
    # by name: haliax need not import here (haliax 1.3 does not with JAX 0.10)
    kind = type(node)
    return kind.__name__ == "NamedArray" and kind.__module__.split(".")[0] == "haliax"


def refuse_named_arrays(model: Any) -> None:
    """Raises :class:`pydepth.JaxNamedArrayError` when ``model`` holds a haliax ``NamedArray``
    (a Levanter model): the bridge reads plain arrays and positional axes only."""
    import jax
    from ..errors import JaxNamedArrayError
    paths = jax.tree_util.tree_flatten_with_path(model, is_leaf=_is_named_array)[0]
    named = [jax.tree_util.keystr(p) for p, leaf in paths if _is_named_array(leaf)]
    if named:
        raise JaxNamedArrayError(f"{type(model).__name__} holds haliax NamedArrays ({named[0]} and "
                                 f"{len(named) - 1} more): pydepth.jax reads Flax and Equinox models of plain "
                                 "arrays; a Levanter/haliax model is not supported (pass the underlying arrays "
                                 "in a plain Equinox module, e.g. NamedArray.array)")
