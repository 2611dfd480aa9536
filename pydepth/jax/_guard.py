# SPDX-License-Identifier: MIT
"""The depth-scaling guard of the JAX bridge: the scaled weights themselves, not an extra leaf.

Every scaling remembers (in this process) a strided sample of each tensor it scaled — one unit
per unrolled tensor, one per layer slice of a stacked one — with the factor applied. A model is
taken as scaled by an earlier call when every remembered unit is present with its shape (a unit
of zeros says nothing: zeros scaled are zeros), at least one is not zeros, and each is either
bit for bit the scaled sample (any round trip that carries the weights: ``jax.grad``
pytrees, ``TrainState``, ``flax.serialization``, orbax restores into fresh or abstract trees,
``nnx.split/merge/update``, Equinox serialisation into a fresh model) or a trained descendant of
it (same direction, cosine ≥ 0.9, and norm within 20 %), and no unit is the unscaled original
(its norm exactly ``1/factor`` times the scaled one). No leaf, variable or wrapper is added, so a
scaled model has the same tree as a fresh one and every restore into a fresh structure works.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Any, Deque, Dict, List, Optional, Tuple

import jax.numpy as jnp
import numpy as np

from ..bridge.schemes import near

__all__ = ["Unit", "remember", "recorded_count", "forget_all"]

_SAMPLE = 1024  # elements kept per unit: enough to tell two initializations apart
_COSINE = 0.9  # a trained descendant still points the way the scaled weights did
_DRIFT = 0.2  # relative norm change training may bring before the guard lets go
_EXACT = 1e-3  # |log(norm ratio × factor)| below this is the unscaled original (bf16 rounding included)
_KEEP = 64  # scalings remembered; the oldest is forgotten first


@dataclass(frozen=True)
class Unit:
    """One scaled tensor (``layer`` None) or one layer slice of a stacked tensor (its ``axis``
    and ``layer``), with its shape, the factor applied and a sample of the scaled values."""

    name: str
    axis: Optional[int]
    layer: Optional[int]
    shape: Tuple[int, ...]
    factor: float
    sample: np.ndarray


@dataclass(frozen=True)
class _Scaling:
    library: str
    count: int
    units: Tuple[Unit, ...]


_REMEMBERED: Deque[_Scaling] = deque(maxlen=_KEEP)


def sample_of(value: Any, axis: Optional[int], layer: Optional[int]) -> np.ndarray:
    """A strided sample (on the device, then fetched) of a tensor or of one layer slice of it."""
    x = jnp.asarray(value)
    if axis is not None:
        x = jnp.take(x, layer, axis=axis)
    flat = jnp.ravel(x)
    return np.asarray(flat[:: max(1, int(flat.size) // _SAMPLE)])


def unit(name: str, value: Any, axis: Optional[int], layer: Optional[int], factor: float) -> Unit:
    """The unit of a scaled tensor ``value`` (its layer slice when ``axis`` is given)."""
    return Unit(name, axis, layer, tuple(np.shape(value)), float(factor), sample_of(value, axis, layer))


def remember(library: str, count: int, units: List[Unit]) -> None:
    """Records that these units are the weights after the ``count``-th scaling."""
    _REMEMBERED.append(_Scaling(library, count, tuple(units)))


def forget_all() -> None:
    """Forgets every scaling (tests, or a process that reuses weights on purpose)."""
    _REMEMBERED.clear()


_Samples = Dict[Tuple[str, Optional[int], Optional[int]], np.ndarray]


def _verdict(u: Unit, now: np.ndarray) -> Optional[bool]:
    """True: ``now`` (the model's sample at the unit) carries this scaled unit; False: it does
    not; None: says nothing (zeros)."""
    a: np.ndarray = now.astype(np.float64)
    b: np.ndarray = u.sample.astype(np.float64)
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 or nb == 0.0 or not (math.isfinite(na) and math.isfinite(nb)):
        return None  # zeros (scaled or not) carry no scale to tell by
    if now.dtype == u.sample.dtype and now.tobytes() == u.sample.tobytes():
        return True
    if float(np.dot(a, b)) / (na * nb) < _COSINE:
        return False
    if abs(math.log(u.factor)) > _EXACT and abs(math.log(na / nb * u.factor)) <= _EXACT:
        return False  # the very weights before this scaling
    return near(na / nb, 1.0, _DRIFT)


def _carries(scaling: _Scaling, leaves: Dict[str, Any], samples: _Samples) -> bool:
    seen = False
    for u in scaling.units:
        leaf = leaves.get(u.name)
        if leaf is None or tuple(np.shape(leaf)) != u.shape:
            return False
        key = (u.name, u.axis, u.layer)
        if key not in samples:  # one fetch per unit however many scalings are compared
            samples[key] = sample_of(leaf, u.axis, u.layer)
        verdict = _verdict(u, samples[key])
        if verdict is False:
            return False
        seen = seen or verdict is True
    return seen


def recorded_count(library: str, leaves: Dict[str, Any]) -> int:
    """How many scalings the weights in ``leaves`` (floating leaves by path name) carry: the
    count of the latest remembered scaling they are (or descend from), else 0."""
    found = 0
    samples: _Samples = {}
    for scaling in _REMEMBERED:
        if scaling.library == library and scaling.count > found and _carries(scaling, leaves, samples):
            found = scaling.count
    return found
