# SPDX-License-Identifier: MIT
"""Which tensors a JAX scaling or audit touches: the parameter paths the patterns select, the
depth they imply and the scheme's factors (shared by :mod:`.scaling` and :mod:`.audit`)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from ..bridge.schemes import Scheme, scheme_factors, scheme_name
from ..errors import JaxScalingSchemeError, ScalingSchemeError

__all__ = ["Selected", "select_projections", "jax_factors"]


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
