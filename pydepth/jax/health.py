# SPDX-License-Identifier: MIT
"""Residual health of a JAX decoder (Flax Linen, Flax NNX, Equinox), reported as pydepth's own
:class:`pydepth.DepthHealthReport`.

The model code is not edited: each block's input and output and its attention submodule's
output pass through an identity whose reverse rule hands what it saw to a zero dummy leaf
travelling with the parameters (see :mod:`._taps`). One reverse pass of the loss with respect to
the dummies only (no weight gradient) gives, per site, the sums of squared activations and
squared completed adjoints and the element count, so it works under ``jit``, ``scan``,
``remat``, ``vmap`` and with sharded batches. ``method="tape"`` returns the full tensors
instead, for unscanned models, and builds the report with the core's RMS arithmetic.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import ArgumentTypeError, SiteSpecError
from ..health import (BandLike, BranchHealthRow, DepthHealthReport, check_band, health_report_from_sites,
                      valid_feature_rms)
from ._deps import library_of, require_equinox, require_flax
from ._masks import valid_mask
from ._observer import ObserverCache, split_model
from ._probe import added_multiplier
from ._unremat import without_recompute
from ._taps import masking, recording_shapes, stats_dummy_shape, tape_dummy_shape, tapping
from .sites import ResidualSites, report_from_sums

__all__ = ["observe_residual_health", "residual_sums", "residual_tape", "SiteTape"]

LossFn = Callable[[Any, Any], Any]


def _check(loss_fn: LossFn, sites: ResidualSites) -> None:
    if not callable(loss_fn):
        raise ArgumentTypeError(f"loss_fn must be callable as loss_fn(model, batch), got {loss_fn!r}")
    if not isinstance(sites, ResidualSites):
        raise ArgumentTypeError(f"sites must be a pydepth.jax.ResidualSites, got {type(sites).__name__}")


def _adapter(loss_fn: LossFn, model: Any, sites: ResidualSites) -> Any:
    _check(loss_fn, sites)
    library = library_of(model)
    if library == "linen":
        require_flax()
        from ._linen import LinenAdapter
        return LinenAdapter(loss_fn, model, sites)
    if library == "plain":
        from .plain import PlainAdapter
        return PlainAdapter(loss_fn, model, sites)
    if library == "nnx":
        from ._nnx import NnxAdapter
        return NnxAdapter(loss_fn, model, sites)
    require_equinox()
    from ._equinox import EquinoxAdapter
    return EquinoxAdapter(loss_fn, model, sites)


def _probe(adapter: Any, arrays: Any, batch: Any, dummies: Any) -> float:
    """Checks the loss is a floating scalar and returns the blocks' residual multiplier of the
    attention output (1.0 for a plain residual; see :mod:`._probe`)."""
    with tapping(probing=True):
        closed, out = jax.make_jaxpr(lambda d: adapter.call(arrays, batch, d), return_shape=True)(dummies)
    if not hasattr(out, "shape") or out.shape != () or not jnp.issubdtype(out.dtype, jnp.floating):
        raise ArgumentTypeError(f"loss_fn must return a floating scalar (the mean loss), got {out!r}")
    attention = adapter.sites.attention
    return 1.0 if attention is None else added_multiplier(closed, attention)


def _cotangents(adapter: Any, arrays: Any, batch: Any, shape: Tuple[int, ...], valid: Optional[Any] = None,
                recompute: bool = False) -> Any:
    dummies = adapter.zeros(shape)
    with masking(valid):
        multiplier = _probe(adapter, arrays, batch, dummies)
        with tapping(multiplier=multiplier):
            def loss(d: Any) -> Any:
                return adapter.call(arrays, batch, d)
            grads = jax.grad(loss if recompute else without_recompute(loss, dummies))(dummies)
    return adapter.to_blocks(grads)


def residual_sums(loss_fn: LossFn, model: Any, batch: Any, *, sites: ResidualSites, mask: Any = None,
                  segment_ids: Any = None, recompute: bool = False) -> Any:
    """Per-block site sums ``[layers, 3, 5]`` (rows: block input, mid residual, block output;
    columns: Σx², Σg², elements, Σ branch², positions) as a JAX array.

    Traceable: call it inside your own ``jax.jit`` (next to a training step) and turn the result
    into a report with :func:`pydepth.jax.sites.report_from_sums`. Arguments as for
    :func:`observe_residual_health` (a traced mask is checked for shape only)."""
    _check_recompute(recompute)
    valid = valid_mask(mask, segment_ids)
    adapter = _adapter(loss_fn, model, sites)
    adapter.prepare(batch)
    return _cotangents(adapter, adapter.arrays(), batch, stats_dummy_shape(), valid, recompute)


def _check_recompute(recompute: Any) -> None:
    if not isinstance(recompute, bool):
        raise ArgumentTypeError(f"recompute must be a bool, got {recompute!r}")


def observe_residual_health(loss_fn: LossFn, model: Any, batch: Any, *, sites: ResidualSites,
                            band: BandLike = None, method: str = "sums", jit: bool = True, mask: Any = None,
                            segment_ids: Any = None, recompute: bool = False) -> DepthHealthReport:
    """Activation RMS and completed mean-loss adjoint RMS at every residual site of a JAX model.

    ``model`` is Flax Linen variables (``{"params": ...}``), a Flax NNX module or an Equinox
    module, and ``loss_fn(model, batch)`` returns the scalar mean loss (for Linen it calls
    ``module.apply(variables, ...)`` itself). ``sites`` (:class:`ResidualSites`) says where the
    blocks are. Sites follow pydepth's layout: the first block's input, after each attention
    addition, after each block. Every position enters the RMS unless ``mask`` (``[batch,
    tokens]``, 1 or True where a position enters, 0 for padding or an unlabelled position, as the
    torch bridge's ``attention_mask``) or ``segment_ids`` (MaxText's and Levanter's packing ids,
    0 for padding) says otherwise; the blocks must then see ``[batch, tokens, width]``. ``band`` is the
    inclusive ratio band (default the chapter's). ``method="sums"`` (default) reduces on the
    device; ``method="tape"`` (unscanned models, loss not vmapped over the batch) fetches full
    tensors and uses the core's RMS arithmetic. ``jit`` compiles the reverse pass once per
    (``loss_fn``, ``sites``, model structure), and ``jax.jit`` once per shape, dtype and
    sharding of the arrays: pass the same ``loss_fn`` object in a loop and later calls only run.
    Checkpointed regions (``nn.remat``, ``jax.checkpoint``) keep their residuals for the reverse
    pass instead of running the forward again (:mod:`._unremat`: same values, about a third less
    work, the activation memory of a model without remat); ``recompute=True`` keeps the model's
    own checkpoint policies. Nothing in ``model`` changes and no weight gradient is computed."""
    low_high = check_band(band)
    if method not in ("sums", "tape"):
        raise ArgumentTypeError(f"method must be 'sums' or 'tape', got {method!r}")
    if not isinstance(jit, bool):
        raise ArgumentTypeError(f"jit must be a bool, got {jit!r}")
    _check_recompute(recompute)
    valid = valid_mask(mask, segment_ids, concrete=True)
    if method == "tape":
        adapter = _adapter(loss_fn, model, sites)
        tape = _tape(adapter, batch, jit)
        gains, final = adapter.gains()
        return _report_from_tape(tape, sites, low_high, gains, final, valid)
    _check(loss_fn, sites)
    library = library_of(model)
    arrays, static, rebuild = split_model(library, model)
    entry = _CACHE.get((loss_fn, sites, library, static, recompute),
                       lambda: _Compiled(loss_fn, sites, rebuild, jit, recompute)) \
        if jit else _Compiled(loss_fn, sites, rebuild, jit, recompute)
    result = np.asarray(entry.fn(arrays, batch, valid), dtype=np.float64)
    gains, final = entry.gains(model, result.shape[0])
    return report_from_sums(result, attention=sites.attention is not None, band=low_high, gains=gains,
                            final_norm_gain=final)


_CACHE = ObserverCache()


class _Compiled:
    """The sums of one (loss function, sites, model structure), jitted once; the blocks a Linen
    trace found are kept for reading the norm gains."""

    def __init__(self, loss_fn: LossFn, sites: ResidualSites, rebuild: Callable[[Any], Any], jit: bool,
                 recompute: bool = False) -> None:
        self.loss_fn, self.sites, self.rebuild, self.recompute = loss_fn, sites, rebuild, recompute
        self.found: Any = None
        self.fn = jax.jit(self._sums) if jit else self._sums

    def _sums(self, arrays: Any, batch: Any, valid: Any) -> Any:
        adapter = _adapter(self.loss_fn, self.rebuild(arrays), self.sites)
        adapter.prepare(batch)
        self.found = getattr(adapter, "found", None)
        return _cotangents(adapter, adapter.arrays(), batch, stats_dummy_shape(), valid, self.recompute)

    def gains(self, model: Any, layers: int) -> Tuple[Any, Tuple[float, ...]]:
        """Per-block norm gains and the final norm's, read on the host when the sites name norms."""
        s = self.sites
        if not (s.attention_norm or s.mid_norm or s.final_norm):
            return [((), ())] * layers, ()
        adapter = _adapter(self.loss_fn, model, s)
        if self.found is not None:
            adapter.adopt(self.found)
        return adapter.gains()


@dataclass(frozen=True)
class SiteTape:
    """Full site tensors of one observation: ``activations[b]`` and ``adjoints[b]`` hold block
    ``b``'s rows (input, mid residual, output), each the residual's shape, as numpy float64."""

    activations: Tuple[np.ndarray, ...]
    adjoints: Tuple[np.ndarray, ...]


def _tape(adapter: Any, batch: Any, jit: bool) -> SiteTape:
    if adapter.sites.stacked:
        raise SiteSpecError("method='tape' needs unrolled blocks; a scanned stack is observed with "
                            "method='sums'")
    adapter.prepare(batch)
    arrays = adapter.arrays()
    with recording_shapes() as shapes:
        jax.eval_shape(lambda a: adapter.call(a, batch, adapter.zeros(stats_dummy_shape())), arrays)
    found = list(shapes.values()) or adapter.site_shapes()
    if not found or any(s != found[0] for s in found):
        raise SiteSpecError(f"the blocks saw residual shapes {found}; the tape needs one shape")

    def run(a: Any, b: Any) -> Any:
        return (_cotangents(adapter, a, b, tape_dummy_shape(found[0])),
                _cotangents(adapter, a, b, stats_dummy_shape()))

    full, sums = (np.asarray(v, dtype=np.float64) for v in (jax.jit(run) if jit else run)(arrays, batch))
    if float(sums[0, 0, 2]) != float(np.prod(found[0])):  # a vmap over the batch inside the loss
        raise SiteSpecError(f"the sites saw {int(sums[0, 0, 2])} elements in all but {int(np.prod(found[0]))} "
                            f"per call (shape {found[0]}): the loss maps the blocks over the batch, so the tape "
                            "would add examples together; use method='sums'")
    return SiteTape(tuple(full[:, :, 0]), tuple(full[:, :, 1]))


def residual_tape(loss_fn: LossFn, model: Any, batch: Any, *, sites: ResidualSites, jit: bool = True) -> SiteTape:
    """The full activation and completed adjoint of every site of an unrolled model (debugging);
    arguments as for :func:`observe_residual_health`."""
    return _tape(_adapter(loss_fn, model, sites), batch, jit)


def _report_from_tape(tape: SiteTape, sites: ResidualSites, band: Tuple[float, float], gains: Any,
                      final: Tuple[float, ...], valid: Optional[Any]) -> DepthHealthReport:
    attention = sites.attention is not None
    layers = len(tape.activations)
    rows = [(0, 0)] + [(b, r) for b in range(layers) for r in ((1, 2) if attention else (2,))]
    acts = [flat_row(tape.activations[b][r]) for b, r in rows]
    grads = [flat_row(tape.adjoints[b][r]) for b, r in rows]
    labels = None if attention else ["input"] + [f"block.{b}.output" for b in range(layers)]
    branches: Tuple[BranchHealthRow, ...] = ()
    mask = np.ones(acts[0].shape[:2], dtype=bool) if valid is None else _tape_mask(valid, acts[0].shape)
    if attention:
        branch = []
        for b in range(layers):
            x_in, mid, out = (flat_row(tape.activations[b][r]) for r in range(3))
            branch.append(BranchHealthRow(
                block=b, attention_output_rms=valid_feature_rms(mid - x_in, mask, what=f"block {b} attention output"),
                feed_forward_output_rms=valid_feature_rms(out - mid, mask, what=f"block {b} feed-forward output"),
                attention_norm_gain=gains[b][0], feed_forward_norm_gain=gains[b][1]))
        branches = tuple(branch)
    return health_report_from_sites(acts, grads, mask, band=band, labels=labels, branches=branches,
                                    final_norm_gain=final)


def _tape_mask(valid: Any, shape: Tuple[int, ...]) -> np.ndarray:
    mask = np.asarray(valid) > 0
    if mask.shape != tuple(shape[:2]):
        raise SiteSpecError(f"the mask has shape {mask.shape}; the sites are {tuple(shape)}")
    return mask


def flat_row(a: np.ndarray) -> np.ndarray:
    """A site tensor as ``[batch, tokens, features]`` (leading axes merged when not rank 3)."""
    return a if a.ndim == 3 else a.reshape((-1, 1, *a.shape[-1:]))
