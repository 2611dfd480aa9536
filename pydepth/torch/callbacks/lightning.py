# SPDX-License-Identifier: MIT
"""Residual health in a Lightning run, as a ``lightning.pytorch.Callback``."""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence, Union

from torch import nn

from ...errors import ArgumentTypeError, TorchDependencyError
from ..architectures import ArchitectureSpec
from .in_step import check_observable
from .monitor import STEP, HealthMonitor
from .reduce import LOCAL
from .record import SEPARATE

try:
    from lightning.pytorch import Callback as _Callback
except ImportError:
    try:
        from pytorch_lightning import Callback as _Callback
    except ImportError as err:
        raise TorchDependencyError(
            f"the Lightning callback needs lightning: pip install lightning ({err})") from None

__all__ = ["HealthLightningCallback"]

ModuleChoice = Union[None, str, Callable[[Any], nn.Module]]


def _decoder(pl_module: Any, module: ModuleChoice) -> nn.Module:
    if callable(module):
        found = module(pl_module)
    elif isinstance(module, str):
        found = pl_module
        for part in module.split("."):
            found = getattr(found, part, None)
    else:
        inner = getattr(pl_module, "model", None)
        found = inner if isinstance(inner, nn.Module) else pl_module
    if not isinstance(found, nn.Module):
        raise ArgumentTypeError(f"module={module!r} gives a {type(found).__name__}, not a torch.nn.Module")
    return found


class HealthLightningCallback(_Callback):
    """Observes residual health every ``every`` optimizer steps of a Lightning ``Trainer`` (in
    ``on_train_batch_end``, at ``trainer.global_step``) and logs the flat metrics through the
    trainer's own loggers (``logger.log_metrics``; TensorBoard, W&B, MLflow, CSV ...) when
    ``log_to_trainer``, and to ``sinks``.

    ``module`` picks the decoder inside the LightningModule: ``None`` for its ``model``
    attribute when it has one (else the LightningModule itself), a dotted attribute path, or a
    function of the LightningModule. ``batch="step"`` observes the step's batch after
    ``inputs(batch)`` (default: the batch as is: a mapping with ``input_ids``, a tensor of ids
    or an ``(input_ids, labels)`` pair); otherwise ``batch`` is a held batch. ``mode="in-step"``
    reads the step's own forward and backward instead (its last micro-batch; the training step
    must differentiate the decoder's own loss). The decoder is checked in ``on_fit_start``, so an
    unobservable model fails before the first step with the reason, and every hook is removed
    in ``on_exception``. The other arguments are :class:`pydepth.torch.callbacks.HealthMonitor`'s."""

    def __init__(self, every: int = 100, batch: Any = STEP, *, module: ModuleChoice = None,
                 inputs: Optional[Callable[[Any], Any]] = None, sinks: Any = None,
                 log_to_trainer: bool = True, band: Optional[Sequence[float]] = None,
                 architecture: Union[str, ArchitectureSpec, None] = None, prefix: Optional[str] = None,
                 per_site: bool = True, rank_zero_only: bool = True, mode: str = SEPARATE,
                 processes: str = LOCAL) -> None:
        super().__init__()
        if inputs is not None and not callable(inputs):
            raise ArgumentTypeError(f"inputs must be a function of the batch, got {type(inputs).__name__}")
        self.monitor = HealthMonitor(nn.Module(), every, batch, sinks=sinks, band=band,
                                     architecture=architecture, prefix=prefix, per_site=per_site,
                                     rank_zero_only=rank_zero_only, mode=mode, processes=processes)
        self.module = module
        self.inputs = inputs
        self.log_to_trainer = bool(log_to_trainer)

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        """Finds and checks the decoder before the first step."""
        self.monitor.model = _decoder(pl_module, self.module)
        check_observable(self.monitor.model, self.monitor.architecture)

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        """Arms the in-step capture when the coming optimizer step is due."""
        self.monitor.model = _decoder(pl_module, self.module)
        self.monitor.begin_step(int(trainer.global_step) + 1)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        """Removes any hook the capture holds."""
        self.monitor.capture.disarm()

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        """Removes any hook the capture holds."""
        self.monitor.capture.disarm()

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        """Observes when ``trainer.global_step`` is due (once per optimizer step)."""
        step = int(trainer.global_step)
        if not self.monitor.due(step):
            return
        self.monitor.model = _decoder(pl_module, self.module)
        if self.monitor.held is None and self.inputs is not None:
            batch = self.inputs(batch)
        metrics = self.monitor.step(batch, step=step)
        if metrics is not None and self.log_to_trainer:
            for logger in trainer.loggers:
                logger.log_metrics(metrics, step=step)
