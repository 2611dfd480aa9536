# SPDX-License-Identifier: MIT
"""Where flat health metrics go: the loggers people train with, each through its own API
(TensorBoard's ``SummaryWriter.add_scalar``, W&B's ``run.log``, MLflow's ``log_metrics``), and
JSON lines, one object per observation. A sink is anything with ``write(metrics, step)``; a
plain callable ``(metrics, step)`` is accepted too."""
from __future__ import annotations

import json
import math
import os
import time
from typing import IO, Any, Callable, Mapping, Optional, Sequence, Union

from ..errors import ArgumentTypeError, SinkDependencyError

__all__ = ["TensorBoardSink", "WandbSink", "MlflowSink", "JsonLinesSink", "CallableSink", "as_sinks"]

Metrics = Mapping[str, float]


class TensorBoardSink:
    """Writes every metric as a scalar of a TensorBoard writer, tagged by its name at ``step``:
    anything with ``add_scalar(tag, value, step)`` (torch's ``SummaryWriter``, tensorboardX, or
    ``tensorboard.summary.Writer`` from the tensorboard package alone, without torch). The writer
    stays the caller's: flush or close it as usual."""

    def __init__(self, writer: Any) -> None:
        if not callable(getattr(writer, "add_scalar", None)):
            raise ArgumentTypeError(f"writer must have add_scalar (a SummaryWriter), got {type(writer).__name__}")
        self.writer = writer

    def write(self, metrics: Metrics, step: int) -> None:
        """Adds one scalar per metric."""
        for name, value in metrics.items():
            self.writer.add_scalar(name, value, step)  # positional: the step's keyword differs per writer


class WandbSink:
    """Logs the metrics to a Weights & Biases run with ``run.log(metrics, step=step)``: the
    run given, else the active ``wandb.run`` at write time. W&B needs steps that never go
    back within a run; the callbacks pass the trainer's optimizer step."""

    def __init__(self, run: Any = None) -> None:
        if run is not None and not callable(getattr(run, "log", None)):
            raise ArgumentTypeError(f"run must be a wandb Run (with log), got {type(run).__name__}")
        self.run = run

    def write(self, metrics: Metrics, step: int) -> None:
        """One ``run.log`` call for all metrics of the observation."""
        run = self.run
        if run is None:
            try:
                import wandb
            except ImportError as err:
                raise SinkDependencyError(f"WandbSink needs wandb: pip install wandb ({err})") from None
            run = wandb.run
            if run is None:
                raise ArgumentTypeError("WandbSink has no run: call wandb.init() first or pass run=")
        run.log(dict(metrics), step=step)


class MlflowSink:
    """Logs the metrics to MLflow with ``mlflow.log_metrics(metrics, step=step)``: into run
    ``run_id`` when given, else into the active run (MLflow starts one if none is active). With
    ``client`` (an ``MlflowClient``, which carries its own tracking URI) and ``run_id``, through
    ``client.log_batch`` instead, leaving MLflow's process-wide active run and URI alone."""

    def __init__(self, run_id: Optional[str] = None, client: Any = None) -> None:
        if run_id is not None and not isinstance(run_id, str):
            raise ArgumentTypeError(f"run_id must be a string, got {type(run_id).__name__}")
        if client is not None and (run_id is None or not callable(getattr(client, "log_batch", None))):
            raise ArgumentTypeError(f"client must be an MlflowClient (with log_batch) given with run_id, got "
                                    f"{type(client).__name__} and run_id {run_id!r}")
        self.run_id = run_id
        self.client = client

    def write(self, metrics: Metrics, step: int) -> None:
        """One batched ``log_metrics`` (or ``log_batch``) call for all metrics of the observation."""
        if self.client is not None:
            from mlflow.entities import Metric
            stamp = int(time.time() * 1000)
            self.client.log_batch(self.run_id, metrics=[Metric(k, float(v), stamp, step) for k, v in metrics.items()])
            return
        try:
            import mlflow
        except ImportError as err:
            raise SinkDependencyError(f"MlflowSink needs mlflow: pip install mlflow ({err})") from None
        extra = {} if self.run_id is None else {"run_id": self.run_id}
        mlflow.log_metrics(dict(metrics), step=step, **extra)


def _json_number(value: float) -> Union[float, str]:
    return value if math.isfinite(value) else repr(value)  # JSON has no NaN or infinity


class JsonLinesSink:
    """Appends one JSON object per observation, ``{"step": step, name: value, ...}``, to a file
    and flushes it, so a crashed run keeps every observation written before the crash. A path
    is opened for appending at the first write (a process that never observes creates no file)
    and closed by :meth:`close`; an open text stream is written to and left open."""

    def __init__(self, target: Union[str, os.PathLike[str], IO[str]]) -> None:
        self._path: Optional[str] = None
        self._file: Optional[IO[str]] = None
        if isinstance(target, (str, os.PathLike)):
            self._path = os.fspath(target)
        elif callable(getattr(target, "write", None)):
            self._file = target
        else:
            raise ArgumentTypeError(f"target must be a path or a text stream, got {type(target).__name__}")

    def write(self, metrics: Metrics, step: int) -> None:
        """Writes and flushes one line."""
        row = {"step": int(step), **{k: _json_number(float(v)) for k, v in metrics.items()}}
        if self._file is None or (self._path is not None and self._file.closed):
            self._file = open(self._path, "a", encoding="utf-8")  # type: ignore[arg-type]  # noqa: SIM115 -- kept open across writes, closed by close()
        self._file.write(json.dumps(row) + "\n")
        self._file.flush()

    def close(self) -> None:
        """Closes the file when this sink opened it (a later write reopens it for appending)."""
        if self._path is not None and self._file is not None and not self._file.closed:
            self._file.close()


class CallableSink:
    """Adapts a function ``fn(metrics, step)`` to a sink."""

    def __init__(self, fn: Callable[[Metrics, int], Any]) -> None:
        self.fn = fn

    def write(self, metrics: Metrics, step: int) -> None:
        """Calls the function."""
        self.fn(metrics, step)


def as_sinks(sinks: Any) -> Sequence[Any]:
    """A tuple of sinks from one sink, a callable, or a sequence of either (``None``: none).
    Anything without ``write`` that is not callable raises :class:`pydepth.ArgumentTypeError`."""
    if sinks is None:
        return ()
    items = list(sinks) if isinstance(sinks, (list, tuple)) else [sinks]
    out = []
    for s in items:
        if callable(getattr(s, "write", None)):
            out.append(s)
        elif callable(s):
            out.append(CallableSink(s))
        else:
            raise ArgumentTypeError(f"a sink needs write(metrics, step) or must be callable, got {type(s).__name__}")
    return tuple(out)
