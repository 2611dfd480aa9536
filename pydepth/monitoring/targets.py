# SPDX-License-Identifier: MIT
"""Where ``pydepth train --log SPEC`` sends its metrics: a spec ``KIND[:PLACE]`` names a row of
:data:`KINDS` (``jsonl``, ``tensorboard:DIR``, ``wandb[:DIR]``, ``mlflow:URI``). Each package is
imported when the spec is checked, before anything is read or written, and each logger is opened
once the run's directory is claimed, so a refused run writes nothing anywhere."""

from __future__ import annotations

import importlib
import os
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence

from ..errors import LogSpecError, LogTargetError, SinkDependencyError
from .sinks import MlflowSink, TensorBoardSink, WandbSink

__all__ = ["LogTarget", "KINDS", "parse_log_spec", "check_targets", "open_targets", "TargetSink"]

#: The extra that brings every logger package.
EXTRA = "train"


class LogTarget(NamedTuple):
    """One parsed ``--log`` spec: the kind (a key of :data:`KINDS`) and its place (``None``: the default)."""

    kind: str
    place: Optional[str]


class _Kind(NamedTuple):
    package: Optional[str]  # the module imported before training starts (None: nothing to import)
    place: str  # "required", "optional" or "none"
    what: str  # the place's meaning, for messages and help
    opener: Optional[Callable[[Optional[str], str, Mapping[str, Any]], Any]]
    directory: bool = False  # the place is a directory: one that exists as a file is refused up front


def _tensorboard(place: Optional[str], run_dir: str, config: Mapping[str, Any]) -> Any:
    from tensorboard.summary import Writer

    writer = Writer(place)
    return TensorBoardSink(writer), writer.close


def _wandb(place: Optional[str], run_dir: str, config: Mapping[str, Any]) -> Any:
    import wandb

    where = place if place is not None else run_dir
    os.makedirs(where, exist_ok=True)
    run = wandb.init(
        mode="offline",
        dir=where,
        project="pydepth",
        config=dict(config),
        reinit="create_new",
        settings=wandb.Settings(console="off", silent=True),
    )
    return WandbSink(run), run.finish


def _mlflow(place: Optional[str], run_dir: str, config: Mapping[str, Any]) -> Any:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=place)
    experiment = client.get_experiment_by_name("pydepth")
    experiment_id = experiment.experiment_id if experiment is not None else client.create_experiment("pydepth")
    run = client.create_run(experiment_id, tags={"mlflow.runName": os.path.basename(os.path.abspath(run_dir))})
    client.log_batch(run.info.run_id, params=_mlflow_params(client, config))
    return MlflowSink(run.info.run_id, client=client), lambda: client.set_terminated(run.info.run_id)


def _mlflow_params(client: Any, config: Mapping[str, Any]) -> List[Any]:
    from mlflow.entities import Param

    return [Param(k, str(v)) for k, v in sorted(config.items())]


#: Every ``--log`` kind: the package it needs, whether it takes a place, and how it is opened.
KINDS: Dict[str, _Kind] = {
    "jsonl": _Kind(None, "none", "train.jsonl and health.jsonl in the run directory, always written", None),
    "tensorboard": _Kind("tensorboard", "required", "the directory of the event files", _tensorboard, True),
    "wandb": _Kind("wandb", "optional", "the directory of the offline run (default: the run directory)", _wandb, True),
    "mlflow": _Kind(
        "mlflow", "required", "the tracking URI (sqlite:///FILE.db for a local store, or a server)", _mlflow
    ),
}


def parse_log_spec(spec: str) -> LogTarget:
    """``KIND[:PLACE]`` as a :class:`LogTarget`; an unknown kind, a missing or unwanted place is
    refused with :class:`pydepth.errors.LogSpecError` naming the spec."""
    if not isinstance(spec, str):
        raise LogSpecError(f"a --log spec must be a string, got {type(spec).__name__}")
    kind, sep, place = spec.partition(":")
    row = KINDS.get(kind)
    if row is None:
        raise LogSpecError(
            f"--log {spec!r}: unknown logger {kind!r}; one of "
            + ", ".join(
                f"{k}:PLACE" if r.place == "required" else f"{k}[:PLACE]" if r.place == "optional" else k
                for k, r in KINDS.items()
            )
        )
    if row.place == "none" and sep:
        raise LogSpecError(f"--log {spec!r}: {kind} takes no place ({row.what})")
    if row.place == "required" and not place:
        raise LogSpecError(f"--log {spec!r}: {kind} needs a place, {kind}:PLACE ({row.what})")
    if sep and not place:
        raise LogSpecError(f"--log {spec!r}: the place after ':' is empty")
    return LogTarget(kind, place or None)


def check_targets(targets: Sequence[LogTarget]) -> None:
    """Imports each target's package and checks a directory place is not a file, before any file
    is written: :class:`pydepth.errors.SinkDependencyError` names the extra of a missing package."""
    for target in targets:
        row = KINDS[target.kind]
        if row.package is not None:
            try:
                importlib.import_module(row.package)
            except ImportError as err:
                raise SinkDependencyError(
                    f"--log {target.kind} needs the {row.package} package "
                    f"({err.name or row.package} is missing): pip install "
                    f"'pydepth[{EXTRA}]' or pip install {row.package}"
                ) from None
        if (
            row.directory
            and target.place is not None
            and os.path.exists(target.place)
            and not os.path.isdir(target.place)
        ):
            raise LogSpecError(f"--log {target.kind}:{target.place}: {target.place} exists and is not a directory")


class TargetSink:
    """A sink whose logger is opened by :meth:`open` (a training run calls it once its directory
    is claimed, before the first step, so a refused run opens none) and closed by :meth:`close`."""

    def __init__(self, target: LogTarget, run_dir: str, config: Mapping[str, Any]) -> None:
        self.target, self.run_dir, self.config = target, run_dir, dict(config)
        self._sink: Any = None
        self._close: Optional[Callable[[], Any]] = None

    def open(self) -> None:
        """Opens the logger (once); any failure of the logger's package is a :class:`LogTargetError`."""
        if self._sink is not None:
            return
        opener = KINDS[self.target.kind].opener
        assert opener is not None  # jsonl targets make no TargetSink
        try:
            self._sink, self._close = opener(self.target.place, self.run_dir, self.config)
        except Exception as err:  # the logger's own errors are many and untyped; named here with the spec
            raise LogTargetError(
                f"--log {self.target.kind}{':' + self.target.place if self.target.place else ''}: "
                f"cannot open the logger: {type(err).__name__}: {str(err)[:300]}"
            ) from None

    def write(self, metrics: Mapping[str, float], step: int) -> None:
        """Writes through the logger (opening it first if no one did)."""
        self.open()
        self._sink.write(metrics, step)

    def close(self) -> None:
        """Flushes and closes the logger if it was opened."""
        if self._close is not None:
            close, self._close, self._sink = self._close, None, None
            close()


def open_targets(targets: Sequence[LogTarget], run_dir: str, config: Mapping[str, Any]) -> List[TargetSink]:
    """One :class:`TargetSink` per target that is not ``jsonl`` (the JSON-lines logs are always written)."""
    return [TargetSink(t, run_dir, config) for t in targets if KINDS[t.kind].opener is not None]
