# SPDX-License-Identifier: MIT
"""Residual health read from a training step's own forward and backward: the residual sites and
branch outputs are captured during the step's training forward (hooks that keep references, one
forward only) and their adjoints during the caller's own ``backward()`` (tensor hooks), so the
observation adds no forward or backward of its own.

The adjoints the step's backward carries are those of the step's objective, e.g.
``scaler.scale(loss / accumulation)``: the gradient arriving at the model's loss tensor is read
too and divided out, and a loss summed over ``num_items_in_batch`` (Hugging Face's accumulation)
is brought back to the micro-batch's mean, so the values are the mean-loss adjoints the
separate observation computes on the same batch and weights.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np
import torch
from torch import nn

from ...batch import Batch
from ...errors import MissingAdjointError, MonitorSettingError, PydepthError, UnsupportedModuleError
from ...health import DepthHealthReport
from ..architectures import ArchitectureSpec, DecoderLayout, find_layout
from ..health import (SiteProbe, _accepts, _Capture, _check_residual_sums, _loss, _refuse_unobservable, _request,
                      probe_sites, report_from_probe)
from .oneshot import OneForward
from .record import IN_STEP, ObservationRecord, autocast_dtype
from .reduce import LOCAL, allreduced_report, check_processes, require_group, share_failure
from .unwrap import unwrap_model

__all__ = ["StepCapture", "check_observable"]


def check_observable(model: nn.Module, architecture: Union[str, ArchitectureSpec, None] = None) -> DecoderLayout:
    """The layout of the module a run trains (wrappers looked through), or the reason it cannot be
    observed, raised now (:class:`pydepth.ArchitectureError`, :class:`pydepth.UnsupportedModuleError`)."""
    module = unwrap_model(model)
    _refuse_unobservable(module)
    return find_layout(module, architecture)


def _inputs(module: nn.Module, layout: DecoderLayout, args: Tuple[Any, ...],
            kwargs: Dict[str, Any]) -> Tuple[Any, Any, Any, bool]:
    """(input ids, labels, attention mask, labels shifted inside) of a training call."""
    ids = kwargs.get("input_ids", kwargs.get("tokens", args[0] if args else None))
    labels = kwargs.get("labels", kwargs.get("targets", args[1] if len(args) > 1 else None))
    hf = layout.architecture != "pydepth-twin" and _accepts(module, "input_ids") and _accepts(module, "labels")
    return ids, labels, kwargs.get("attention_mask") if hf else None, hf


def _raw_loss(out: Any, checked: torch.Tensor) -> torch.Tensor:
    """The loss tensor the caller differentiates (``_loss`` returns a reshaped view of it)."""
    items = [getattr(out, "loss", None)] + (list(out) if isinstance(out, (tuple, list)) else [out])
    for item in items:
        if isinstance(item, torch.Tensor) and item.numel() == 1 and item.data_ptr() == checked.data_ptr():
            return item
    return checked


class StepCapture:
    """Captures one training forward's residual sites and the adjoints its backward sends them.

    :meth:`arm` before the step's first forward; the next training-mode forward of the model is
    captured (evaluation calls are skipped) and every hook on the model is gone when it returns or
    raises; :meth:`report` after the backward. ``processes`` (a key of
    :data:`pydepth.torch.callbacks.reduce.PROCESSES`, default ``"local"``) says whose micro-batches
    the values cover; with ``"all-reduce"`` every process must call :meth:`report` for the step."""

    def __init__(self, architecture: Union[str, ArchitectureSpec, None] = None, processes: str = LOCAL) -> None:
        self.architecture = architecture
        self.processes = check_processes(processes)
        self._hooks = OneForward()
        self._layout: Optional[Tuple[nn.Module, DecoderLayout]] = None
        self._checked: Optional[nn.Module] = None
        self._reset()

    def _reset(self) -> None:
        self._capture: Optional[_Capture] = None
        self._call: Optional[Tuple[nn.Module, Tuple[Any, ...], Dict[str, Any]]] = None
        self._sites: List[torch.Tensor] = []
        self._grads: Dict[int, torch.Tensor] = {}
        self._loss_grad: Optional[torch.Tensor] = None
        self._error: Optional[PydepthError] = None
        self._autocast: Optional[str] = None

    @property
    def armed(self) -> bool:
        """Whether hooks wait for the next training forward."""
        return self._hooks.armed

    def arm(self, model: nn.Module) -> None:
        """Hooks ``model``'s next training-mode forward (wrappers looked through)."""
        module = unwrap_model(model)
        if self._layout is None or self._layout[0] is not module:
            self._layout = (module, check_observable(module, self.architecture))
        self._reset()
        self._hooks.arm(module, self._before, self._after)

    def disarm(self) -> None:
        """Removes every hook and drops what was captured."""
        if self._capture is not None:
            self._capture.remove()
        self._hooks.remove()
        self._reset()

    def _before(self, module: nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
        assert self._layout is not None
        layout = self._layout[1]
        self._capture = _Capture(layout)
        self._capture.install()
        first = layout.layers[0] if layout.layers else layout.final_norm
        device = next((p.device.type for p in module.parameters()), "cpu")

        def precision(m: nn.Module, a: Tuple[Any, ...]) -> None:
            self._autocast = autocast_dtype(device)  # inside any forward wrapper that turns autocast on
        assert first is not None
        self._capture.handles.append(first.register_forward_pre_hook(precision))
        self._call = (module, args, kwargs)

    def _after(self, module: nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> None:
        capture = self._capture
        assert capture is not None and self._layout is not None
        capture.remove()
        layout = self._layout[1]
        expected = layout.depth + 1 if layout.parallel_residual else 2 * layout.depth + 1
        try:
            if capture.duplicate is not None or sorted(capture.sites) != list(range(expected)):
                raise UnsupportedModuleError(
                    f"captured residual sites {sorted(capture.sites)} (site {capture.duplicate} twice) in the "
                    f"training forward of {type(module).__name__}; expected 0..{expected - 1}")
            loss = _raw_loss(out, _loss(out, module))
            self._sites = [capture.sites[i] for i in range(expected)]
            for i, site in enumerate(self._sites):
                if not site.requires_grad:
                    raise MissingAdjointError(
                        f"site {i} of the training forward does not require grad (reentrant gradient "
                        "checkpointing runs layers without autograd): use the separate observation")
                site.register_hook(lambda g, i=i: self._grads.__setitem__(i, g))
            loss.register_hook(lambda g: setattr(self, "_loss_grad", g))
        except PydepthError as err:
            self._error = err  # raised by report(): a hook must not break the training step

    def _check_structure(self, module: nn.Module, layout: DecoderLayout) -> None:
        """Each site is the previous one plus the branches in between: on the captured tensors, or,
        when dropout sits between a branch and its addition, on one eval-mode probe of the batch."""
        if not any(isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0 and m.training for m in module.modules()):
            _check_residual_sums(layout, self._sites, self._capture.branches if self._capture else {}, module)
            return
        assert self._call is not None
        ids, labels, mask, _ = _inputs(module, layout, self._call[1], self._call[2])
        probe_sites(module, ids, labels, attention_mask=mask, architecture=self.architecture,
                    position_ids=self._call[2].get("position_ids"))

    def _valid_and_factor(self) -> Tuple[np.ndarray, float]:
        assert self._call is not None and self._layout is not None
        module, args, kwargs = self._call
        ids, labels, mask, shifted = _inputs(module, self._layout[1], args, kwargs)
        if isinstance(ids, Batch):
            return np.array(ids.valid), 1.0
        if self._layout[1].architecture == "pydepth-twin":
            return np.ones(tuple(np.shape(ids)), dtype=bool), 1.0
        req = _request(module, ids, labels, mask, shifted)
        items = kwargs.get("num_items_in_batch")
        if items is None:
            return req.observed.numpy(), 1.0
        lab = req.labels[:, 1:] if shifted else req.labels
        return req.observed.numpy(), float(items) / float((lab != -100).sum())

    def report(self, band: Any = None) -> Tuple[DepthHealthReport, ObservationRecord]:
        """The report of the captured micro-batch and how it was made; raises
        :class:`pydepth.MonitorSettingError` when nothing was captured and
        :class:`pydepth.MissingAdjointError` when the backward did not reach every site."""
        try:
            return self._report(band)
        finally:
            self.disarm()

    def _report(self, band: Any) -> Tuple[DepthHealthReport, ObservationRecord]:
        if self.processes == LOCAL:
            probe, record = self._probe()
            return report_from_probe(probe, band), record
        require_group()
        try:
            probe, record = self._probe()
        except PydepthError as err:
            share_failure(err, 0)  # the other processes learn of it instead of waiting; raises err
            raise
        return allreduced_report(probe, band), record

    def _probe(self) -> Tuple[SiteProbe, ObservationRecord]:
        """The captured micro-batch's probe and its record, or the reason there is none."""
        if self._error is not None:
            raise self._error
        if self._call is None or self._layout is None:
            raise MonitorSettingError(
                "in-step observation captured no training forward: arm it before the step's forward "
                "(monitor.begin_step()), with the model in training mode")
        if self._loss_grad is None:
            raise MissingAdjointError(
                "the step's backward did not pass through the model's own loss (out.loss): in-step "
                "observation reads the adjoints of that loss; call backward() on it (scaled or divided as you like)")
        missing = [i for i in range(len(self._sites)) if i not in self._grads]
        if missing:
            raise MissingAdjointError(f"the step's backward did not reach residual sites {missing}")
        module, layout = self._call[0], self._layout[1]
        if self._checked is not module:  # the structure is the model's: checked on its first observation
            self._check_structure(module, layout)
            self._checked = module
        valid, factor = self._valid_and_factor()
        g = float(self._loss_grad.detach().to(torch.float64))
        if g == 0.0 or not np.isfinite(g):
            raise MissingAdjointError(f"the gradient reaching the model's loss is {g!r}: no adjoint can be unscaled")
        unscale = factor / g  # exact when both are powers of two, one rounding otherwise
        adjoints = tuple(self._grads[i].detach() for i in range(len(self._sites)))  # unscaled in the sums
        probe = SiteProbe(layout, tuple(s.detach() for s in self._sites), adjoints, valid,
                          self._capture.branches if self._capture else {}, adjoint_scale=unscale)
        record = ObservationRecord(IN_STEP, "micro-batch", self.processes, self._autocast,
                                   str(self._sites[0].dtype).replace("torch.", ""), g, factor)
        return probe, record
