# SPDX-License-Identifier: MIT
"""Residual health watched during training: every N optimizer steps, the residual health of the
trained model, flattened into metrics and handed to the sinks, in one of two modes.

``"separate"``: one :func:`pydepth.torch.observe_residual_health` on a held batch or on the step's
own batch after the step — eval mode, gradient checkpointing and autocast off for the probe and
restored, its hooks removed, parameter ``.grad`` untouched. ``"in-step"``: the training step's own
forward and backward are read (:class:`pydepth.torch.callbacks.in_step.StepCapture`), at almost
no cost. Wrappers (DDP, DataParallel, ``torch.compile``) are looked through, so no collective
runs; only global rank 0 observes unless ``rank_zero_only=False``.
"""
from __future__ import annotations

import numbers
from typing import Any, Dict, Optional, Sequence, Union

from torch import nn

from ...errors import ArgumentTypeError, MonitorSettingError
from ...health import DepthHealthReport
from ..architectures import ArchitectureSpec
from ..health import observe_residual_health
from .in_step import StepCapture
from .inputs import ObservedBatch, detached, observed_batch
from ...monitoring.metrics import health_metrics
from ...monitoring.sinks import as_sinks
from .record import IN_STEP, MODES, SEPARATE, ObservationRecord, outside_autocast
from .reduce import LOCAL, check_processes
from .unwrap import unwrap_model

__all__ = ["HealthMonitor", "global_rank"]

STEP = "step"  # observe the batch of the step being recorded

#: The metric prefix of each mode when none is given, so every logged value names its mode.
DEFAULT_PREFIX = {SEPARATE: "residual", IN_STEP: "residual_in_step"}


def global_rank() -> int:
    """This process's rank in the default torch.distributed group (0 when none is set up)."""
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        return int(dist.get_rank())
    return 0


def _check_every(every: Any) -> int:
    if isinstance(every, bool) or not isinstance(every, numbers.Integral):
        raise ArgumentTypeError(f"every must be an integer number of steps, got {every!r}")
    if every < 1:
        raise MonitorSettingError(f"every must be at least 1 step, got {every}")
    return int(every)


class HealthMonitor:
    """Observes ``model``'s residual health every ``every`` steps and logs flat metrics.

    ``batch`` is ``"step"`` (observe the batch passed to :meth:`step`, the one just trained on)
    or a held batch observed every time (a mapping with ``input_ids`` and optionally ``labels``
    and ``attention_mask``, a tensor of ids, an ``(input_ids, labels)`` pair or a
    :class:`pydepth.Batch`); a held batch makes observations comparable across steps and
    processes. ``sinks`` are :mod:`pydepth.monitoring.sinks` objects or callables
    ``(metrics, step)``. ``band`` and ``architecture`` go to the observation; ``prefix``
    (default ``"residual"``, or ``"residual_in_step"`` in mode ``"in-step"``, so every value names
    its mode) and ``per_site`` to :func:`pydepth.torch.callbacks.health_metrics`.

    ``mode`` is ``"separate"`` (an extra pass after the step, on the held or the step's batch) or
    ``"in-step"`` (the step's own forward and backward, ``batch="step"`` only); :attr:`last_record`
    says how each observation was made. ``processes`` (in-step only) is ``"local"`` (default: this
    process's micro-batch, no collective) or ``"all-reduce"`` (every process's micro-batch, its
    sums of squares all-reduced; every process observes, rank 0 logs unless ``rank_zero_only=False``).
    In a plain loop call :meth:`step` once per optimizer step, after ``optimizer.step()`` (in mode
    ``"in-step"`` also :meth:`begin_step` before the step's first forward)::

        monitor = HealthMonitor(model, every=50, batch=held, sinks=[TensorBoardSink(writer)])
        for batch in loader:
            ...; optimizer.step(); optimizer.zero_grad()
            monitor.step(batch)
    """

    def __init__(self, model: nn.Module, every: int = 100, batch: Any = STEP, *, sinks: Any = None,
                 band: Optional[Sequence[float]] = None,
                 architecture: Union[str, ArchitectureSpec, None] = None, prefix: Optional[str] = None,
                 per_site: bool = True, rank_zero_only: bool = True, mode: str = SEPARATE,
                 processes: str = LOCAL) -> None:
        if not isinstance(model, nn.Module):
            raise ArgumentTypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        if mode not in MODES:
            raise MonitorSettingError(f"mode must be one of {sorted(MODES)}, got {mode!r}")
        if check_processes(processes) != LOCAL and mode != IN_STEP:
            raise MonitorSettingError(f"processes={processes!r} combines the processes' micro-batches of an in-step "
                                      "observation: use mode='in-step', or observe a held batch in mode 'separate'")
        if mode == IN_STEP and not _is_step(batch):
            raise MonitorSettingError("mode 'in-step' reads the training step's own batch: pass batch='step', "
                                      "or use mode 'separate' for a held batch")
        self.model = model
        self.mode = mode
        self.every = _check_every(every)
        self.held: Optional[ObservedBatch] = None if _is_step(batch) else detached(observed_batch(batch))
        self.sinks = as_sinks(sinks)
        self.band = band
        self.architecture = architecture
        self.processes = processes
        self.capture = StepCapture(architecture, processes)
        self.prefix = DEFAULT_PREFIX[mode] if prefix is None else prefix
        self.per_site = bool(per_site)
        self.rank_zero_only = bool(rank_zero_only)
        self.steps = 0
        self.last_step: Optional[int] = None
        self.last_report: Optional[DepthHealthReport] = None
        self.last_metrics: Optional[Dict[str, float]] = None
        self.last_record: Optional[ObservationRecord] = None

    def due(self, step: int) -> bool:
        """Whether ``step`` is an observation step on this process (a positive multiple of
        ``every``, not yet observed, and rank 0 unless ``rank_zero_only=False`` or the observation is
        all-reduced, which every process takes part in)."""
        if self.rank_zero_only and self.processes == LOCAL and global_rank() != 0:
            return False
        return step > 0 and step % self.every == 0 and step != self.last_step

    def begin_step(self, step: Optional[int] = None) -> bool:
        """In mode ``"in-step"``, hooks the model's next training forward when the coming step
        (``step``, default the monitor's count plus one) is due; call it before the step's first
        forward. Returns whether it armed (always ``False`` in mode ``"separate"``)."""
        self.capture.disarm()
        coming = self.steps + 1 if step is None else int(step)
        if self.mode != IN_STEP or not self.due(coming):
            return False
        self.capture.arm(self.model)
        return True

    def step(self, batch: Any = None, *, step: Optional[int] = None) -> Optional[Dict[str, float]]:
        """Records one optimizer step (``step`` overrides the monitor's own count, e.g. a
        trainer's global step) and observes when it is due; returns the metrics logged, or
        ``None``. With ``batch="step"`` in mode ``"separate"`` the batch trained on must be passed."""
        if step is None:
            self.steps += 1
        elif isinstance(step, bool) or not isinstance(step, numbers.Integral):
            raise ArgumentTypeError(f"step must be an integer, got {step!r}")
        else:
            self.steps = int(step)
        if not self.due(self.steps):
            self.capture.disarm()
            return None
        if self.mode == IN_STEP:
            report, record = self.capture.report(self.band)
            return self._log(report, record, self.steps)
        return self.observe(batch if self.held is None else None, step=self.steps)

    def observe(self, batch: Any = None, *, step: int) -> Dict[str, float]:
        """Observes now (whatever the step and rank), logs to every sink at ``step`` and
        returns the metrics. ``batch`` overrides the held batch; it is required when the
        monitor has none."""
        source = observed_batch(batch) if batch is not None else self.held
        if source is None:
            raise MonitorSettingError(
                f"step {step} is due for observation but no batch was given: pass the step's batch "
                "(monitor.step(batch)) or hold one (HealthMonitor(..., batch=held_batch))")
        module = unwrap_model(self.model)
        with outside_autocast(module):
            report = observe_residual_health(module, source.input_ids, source.labels,
                                             attention_mask=source.attention_mask,
                                             position_ids=source.position_ids,
                                             architecture=self.architecture, band=self.band)
        precision = next((str(p.dtype).replace("torch.", "") for p in module.parameters()), "")
        record = ObservationRecord(SEPARATE, "held" if batch is None else "step", "local", None, precision)
        return self._log(report, record, step)

    def _log(self, report: DepthHealthReport, record: ObservationRecord, step: int) -> Dict[str, float]:
        metrics = health_metrics(report, prefix=self.prefix, per_site=self.per_site)
        if not (self.rank_zero_only and global_rank() != 0):  # all-reduced: every process observes, rank 0 logs
            for sink in self.sinks:
                sink.write(metrics, step)
        self.last_step, self.last_report, self.last_metrics, self.last_record = step, report, metrics, record
        return metrics

    def close(self) -> None:
        """Removes any in-step hook and closes the sinks that own what they write to (e.g. a
        JSON-lines file opened from a path)."""
        self.capture.disarm()
        for sink in self.sinks:
            close = getattr(sink, "close", None)
            if callable(close):
                close()


def _is_step(batch: Any) -> bool:
    if isinstance(batch, str) and batch != STEP:
        raise MonitorSettingError(f"batch must be {STEP!r} or a held batch, got {batch!r}")
    return isinstance(batch, str)
