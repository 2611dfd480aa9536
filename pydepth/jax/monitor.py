# SPDX-License-Identifier: MIT
"""Residual health watched while a JAX model trains: the training step's own gradient call
returns the site sums too (one forward and one backward pass, the taps' dummies differentiated
next to the parameters), and every ``every`` steps the host turns them into a report and writes
its metrics to the sinks of :mod:`pydepth.monitoring` (TensorBoard, W&B, MLflow, JSON lines).

Works in an Optax loop over Linen params, a Flax ``TrainState`` loop, an NNX loop and an
Equinox loop; imports no torch."""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence, Tuple

import jax
import numpy as np

from ..errors import ArgumentTypeError, JaxMonitorSettingError
from ..health import BandLike, DepthHealthReport, check_band
from ..monitoring import as_sinks, health_metrics
from ._masks import valid_mask
from ._taps import masking, stats_dummy_shape, tapping
from .health import _adapter, _probe
from .sites import ResidualSites, report_from_sums

__all__ = ["JaxHealthMonitor"]

Split = Tuple[Any, Callable[[Any], Any]]


def _linen(model: Any, arrays: Any) -> Split:
    return arrays["params"], lambda p: {**dict(arrays), "params": p}


def _nnx(model: Any, arrays: Any) -> Split:
    from flax import nnx
    _, params, rest = nnx.split(model, nnx.Param, ...)
    return params, lambda p: nnx.merge_state(p, rest)


def _equinox(model: Any, arrays: Any) -> Split:
    import equinox as eqx
    diff, static = eqx.partition(arrays, eqx.is_inexact_array)
    return diff, lambda p: eqx.combine(p, static)


def _plain(model: Any, arrays: Any) -> Split:
    from .plain import PlainParams
    return arrays.params, PlainParams


#: library -> (what is differentiated, how the traced arrays are rebuilt from it)
_TRAINED = {"flax-linen": _linen, "flax-nnx": _nnx, "equinox": _equinox, "jax-function": _plain}


class JaxHealthMonitor:
    """Residual health every ``every`` training steps, read from the step's own backward pass.

    Inside the jitted step, ``loss, grads, sums = monitor.value_and_grad(model, batch)`` replaces
    ``jax.value_and_grad(loss_fn)``: ``grads`` are those of Linen ``params``, of an NNX model's
    ``nnx.Param`` state, of an Equinox model's floating arrays (as ``eqx.filter_grad``) or of the
    params a :class:`pydepth.jax.PlainParams` wraps, and
    ``sums`` the ``[layers, 3, 5]`` site sums. Outside the step, ``monitor.log(step, sums)``
    builds the report and writes its metrics at steps ``every, 2·every, …`` (else does nothing
    and fetches nothing). ``loss_fn``, ``sites`` and ``mask``/``segment_ids`` are as for
    :func:`pydepth.jax.observe_residual_health`; ``band``, ``prefix`` and ``per_site`` as for
    the torch :class:`pydepth.torch.callbacks.HealthMonitor`."""

    def __init__(self, loss_fn: Callable[[Any, Any], Any], *, sites: ResidualSites, every: int,
                 sinks: Any = None, band: BandLike = None, prefix: str = "residual", per_site: bool = True) -> None:
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise JaxMonitorSettingError(f"every must be a positive integer, got {every!r}")
        if not callable(loss_fn) or not isinstance(sites, ResidualSites):
            raise ArgumentTypeError(f"loss_fn must be callable and sites a ResidualSites, got {loss_fn!r}, {sites!r}")
        self.loss_fn, self.sites, self.every = loss_fn, sites, every
        self.sinks: Sequence[Any] = as_sinks(sinks)
        self.band = check_band(band)
        self.prefix, self.per_site = prefix, per_site
        self.last: Optional[DepthHealthReport] = None

    def value_and_grad(self, model: Any, batch: Any, *, mask: Any = None, segment_ids: Any = None) -> Any:
        """``(loss, grads, sums)`` from one forward and one backward pass (traceable)."""
        valid = valid_mask(mask, segment_ids)
        adapter = _adapter(self.loss_fn, model, self.sites)
        adapter.prepare(batch)
        arrays = adapter.arrays()
        trained, rebuild = _TRAINED[adapter.library](model, arrays)
        dummies = adapter.zeros(stats_dummy_shape())
        with masking(valid):
            multiplier = _probe(adapter, arrays, batch, dummies)
            with tapping(multiplier=multiplier):
                loss, (grads, taps) = jax.value_and_grad(
                    lambda p, d: adapter.call(rebuild(p), batch, d), argnums=(0, 1))(trained, dummies)
        return loss, grads, adapter.to_blocks(taps)

    def due(self, step: int) -> bool:
        """Whether ``step`` is observed (a positive multiple of ``every``)."""
        return step > 0 and step % self.every == 0

    def log(self, step: int, sums: Any) -> Optional[DepthHealthReport]:
        """At an observed step: the report of ``sums``, its metrics written to every sink."""
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)):
            raise ArgumentTypeError(f"step must be an integer, got {step!r}")
        if not self.due(int(step)):
            return None
        report = report_from_sums(np.asarray(jax.device_get(sums), dtype=np.float64),
                                  attention=self.sites.attention is not None, band=self.band)
        metrics = health_metrics(report, prefix=self.prefix, per_site=self.per_site)
        for sink in self.sinks:
            sink.write(metrics, int(step))
        self.last = report
        return report
