# SPDX-License-Identifier: MIT
"""Residual health in a Hugging Face ``transformers.Trainer`` run, as a ``TrainerCallback``."""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple, Union

from torch import nn

from .._deps import require_transformers
from ..architectures import ArchitectureSpec
from .inputs import ObservedBatch, detached, observed_batch
from .monitor import STEP, HealthMonitor
from .unwrap import unwrap_model

_transformers = require_transformers()
_TrainerCallback: Any = _transformers.TrainerCallback  # a class of an untyped extra

__all__ = ["HealthTrainerCallback"]


class HealthTrainerCallback(_TrainerCallback):
    """Observes residual health every ``every`` optimizer steps of a ``Trainer`` (in
    ``on_step_end``, after the update, at ``state.global_step``) and hands the flat metrics to
    ``sinks`` (see :class:`pydepth.torch.callbacks.HealthMonitor` for ``batch``, ``sinks``,
    ``band``, ``architecture``, ``prefix``, ``per_site`` and ``rank_zero_only``).

    With ``batch="step"`` the step's own batch is observed: a forward pre-hook that only keeps a
    reference to the training inputs (training-mode calls; with gradient accumulation, the last
    micro-batch) is registered on the model in ``on_train_begin`` and removed in
    ``on_train_end``. With a held batch no hook is registered. ``trainer.model`` is unwrapped
    (DDP, DataParallel, ``torch.compile``) before observing.

        trainer = Trainer(model=model, args=args, train_dataset=data,
                          callbacks=[HealthTrainerCallback(every=50, sinks=[TensorBoardSink(writer)])])
    """

    def __init__(self, every: int = 100, batch: Any = STEP, *, sinks: Any = None,
                 band: Optional[Sequence[float]] = None,
                 architecture: Union[str, ArchitectureSpec, None] = None, prefix: str = "residual",
                 per_site: bool = True, rank_zero_only: bool = True) -> None:
        self.monitor = HealthMonitor(nn.Module(), every, batch, sinks=sinks, band=band,
                                     architecture=architecture, prefix=prefix, per_site=per_site,
                                     rank_zero_only=rank_zero_only)
        self._handle: Any = None
        self._batch: Optional[ObservedBatch] = None

    def _record(self, module: nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
        if module.training:  # the probe runs in eval mode, and so does evaluation
            self._batch = detached(observed_batch(kwargs if "input_ids" in kwargs else args[0]))

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Optional[nn.Module] = None,
                       **kwargs: Any) -> None:
        """Binds the monitor to the trained model; registers the batch-recording hook for ``batch="step"``."""
        self.monitor.model = model
        if self.monitor.held is None and self._handle is None:
            self._handle = unwrap_model(model).register_forward_pre_hook(self._record, with_kwargs=True)

    def on_step_end(self, args: Any, state: Any, control: Any, model: Optional[nn.Module] = None,
                    **kwargs: Any) -> None:
        """Observes when ``state.global_step`` is due."""
        if model is not None:
            self.monitor.model = model
        self.monitor.step(self._batch, step=int(state.global_step))

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Removes the hook and drops the recorded batch."""
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
        self._batch = None
