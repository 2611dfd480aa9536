# SPDX-License-Identifier: MIT
"""Residual health in a Hugging Face ``transformers.Trainer`` run, as a ``TrainerCallback``."""
from __future__ import annotations

import inspect
import warnings
from typing import Any, Dict, Optional, Sequence, Tuple, Union

from torch import nn

from ...errors import MonitorSettingError
from .._deps import require_transformers
from ..architectures import ArchitectureSpec
from .in_step import check_observable
from .inputs import ObservedBatch, detached, observed_batch
from .monitor import STEP, HealthMonitor
from .oneshot import OneForward
from .reduce import LOCAL
from .record import IN_STEP, SEPARATE
from .unwrap import unwrap_model

_transformers = require_transformers()
_TrainerCallback: Any = _transformers.TrainerCallback  # a class of an untyped extra

__all__ = ["HealthTrainerCallback"]

_HOST_FRAMES = 12  # Trainer.train -> _inner_training_loop -> CallbackHandler -> call_event -> us, with room


def _host_trainer(callback: Any) -> Any:
    """The ``Trainer`` whose callback handler is calling ``callback`` now (found on the call
    stack: the handler passes no trainer to callbacks), or ``None``."""
    frame = inspect.currentframe()
    try:
        for _ in range(_HOST_FRAMES):
            if frame is None:
                return None
            owner = frame.f_locals.get("self")
            handler = getattr(owner, "callback_handler", None)
            if callable(getattr(owner, "log", None)) and any(c is callback for c in getattr(handler, "callbacks", ())):
                return owner
            frame = frame.f_back
        return None
    finally:
        del frame


class HealthTrainerCallback(_TrainerCallback):
    """Observes residual health every ``every`` optimizer steps of a ``Trainer`` (in
    ``on_step_end``, after the update, at ``state.global_step``) and logs the flat metrics.

    Without ``sinks`` the values go through the Trainer's own ``log`` (so every integration
    ``report_to`` names receives them, and ``state.log_history`` holds them); with ``sinks``
    they go to the sinks only. ``mode="in-step"`` reads the step's own forward and backward
    (its first micro-batch); ``mode="separate"`` observes again after the update, on the held
    batch or, with ``batch="step"``, on the step's first micro-batch (kept by a forward pre-hook
    that lives for that one forward). The model is checked in ``on_train_begin`` (and here when
    ``model`` is given), so an unobservable model fails before the first step with the reason.
    No hook outlives the forward it was registered for, also when training raises. The other
    arguments are :class:`pydepth.torch.callbacks.HealthMonitor`'s.

        trainer = Trainer(model=model, args=TrainingArguments(..., report_to=["tensorboard"]),
                          train_dataset=data, callbacks=[HealthTrainerCallback(every=50, mode="in-step")])
    """

    def __init__(self, every: int = 100, batch: Any = STEP, *, sinks: Any = None,
                 band: Optional[Sequence[float]] = None,
                 architecture: Union[str, ArchitectureSpec, None] = None, prefix: Optional[str] = None,
                 per_site: bool = True, rank_zero_only: bool = True, mode: str = SEPARATE,
                 model: Optional[nn.Module] = None, processes: str = LOCAL) -> None:
        self.monitor = HealthMonitor(nn.Module(), every, batch, sinks=sinks, band=band,
                                     architecture=architecture, prefix=prefix, per_site=per_site,
                                     rank_zero_only=rank_zero_only, mode=mode, processes=processes)
        if model is not None:
            check_observable(model, architecture)
            self.monitor.model = model
        self._recorder = OneForward()
        self._batch: Optional[ObservedBatch] = None
        self._trainer: Any = None

    def _record(self, module: nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
        self._batch = detached(observed_batch(kwargs if "input_ids" in kwargs else args[0]))

    def _disarm(self) -> None:
        self._recorder.remove()
        self.monitor.capture.disarm()
        self._batch = None

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Optional[nn.Module] = None,
                       **kwargs: Any) -> None:
        """Checks and binds the trained model, and finds where the values are logged."""
        self._disarm()
        if model is None:
            raise MonitorSettingError("the Trainer passed no model to on_train_begin: nothing to observe")
        check_observable(model, self.monitor.architecture)
        self.monitor.model = model
        self._trainer = None if self.monitor.sinks else _host_trainer(self)
        if self._trainer is None and not self.monitor.sinks:
            warnings.warn("HealthTrainerCallback has no sinks and found no Trainer to log through: observations "
                          "are kept in callback.monitor.last_metrics only", RuntimeWarning, stacklevel=2)

    def on_step_begin(self, args: Any, state: Any, control: Any, model: Optional[nn.Module] = None,
                      **kwargs: Any) -> None:
        """Arms the in-step capture, or the step-batch recorder, when the coming step is due."""
        self._disarm()
        coming = int(state.global_step) + 1
        if model is not None:
            self.monitor.model = model
        if self.monitor.mode == IN_STEP:
            self.monitor.begin_step(coming)
        elif self.monitor.held is None and self.monitor.due(coming):
            self._recorder.arm(unwrap_model(self.monitor.model), self._record)

    def on_step_end(self, args: Any, state: Any, control: Any, model: Optional[nn.Module] = None,
                    **kwargs: Any) -> None:
        """Observes when ``state.global_step`` is due and logs the values."""
        if model is not None:
            self.monitor.model = model
        try:
            metrics = self.monitor.step(self._batch, step=int(state.global_step))
        finally:
            self._disarm()
        if metrics is not None and self._trainer is not None:
            self._trainer.log(dict(metrics))

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Removes any hook and drops the recorded batch."""
        self._disarm()
        self._trainer = None
