# SPDX-License-Identifier: MIT
"""The JSON-lines logs of a run directory: ``train.jsonl`` (one line per optimizer update: the loss
it was taken on, the learning rate, the seconds it took) and ``health.jsonl`` (one line per residual
health observation), trimmed on resume to the steps the checkpoint had taken. In both, ``step`` is
the number of updates the parameters had had when the logged loss or health was measured."""
from __future__ import annotations

import json
import os
import pathlib
import warnings
from typing import IO, Any, Dict, List, Optional, Sequence

from .._files.atomic import write_bytes
from .._files.reading import read_bytes
from ..health import DepthHealthReport
from ..monitoring.metrics import health_metrics
from ..monitoring.sinks import as_sinks
from .errors import TrainLogError

__all__ = ["TrainLog", "read_log"]


def _records(path: pathlib.Path) -> List[Any]:
    """(line, record) pairs of a log; a torn last line (a crash or a full disk mid-append) is
    dropped with a warning, a damaged earlier line is a TrainLogError naming it."""
    path = pathlib.Path(path)
    text = read_bytes(path, "training log", TrainLogError, inside=path.parent).decode("utf-8", errors="replace")
    lines = [line for line in text.splitlines() if line]
    out = []
    for i, line in enumerate(lines):
        try:
            record = json.loads(line)
            if not isinstance(record, dict) or type(record.get("step")) is not int:
                raise ValueError("no integer step")
        except (ValueError, RecursionError):
            if i == len(lines) - 1:
                warnings.warn(f"{path}: dropped a torn last line ({line[:40]!r}); the run resumes before it",
                              stacklevel=3)
                break
            raise TrainLogError(f"{path}: line {i + 1} is not a log record: {line[:60]!r}") from None
        out.append((line, record))
    return out


def read_log(path: pathlib.Path) -> List[Dict[str, Any]]:
    """The records of a JSON-lines log, in order (a torn last line dropped with a warning)."""
    return [record for _, record in _records(path)]


def _trim(path: pathlib.Path, last_step: int) -> None:
    """Keeps only the lines whose step is at most last_step (a torn last line is dropped); the
    log is replaced atomically, a link in its place replaced rather than written through."""
    kept = [line for line, record in _records(path) if record["step"] <= last_step] \
        if os.path.lexists(path) else []
    write_bytes(path, "".join(line + "\n" for line in kept).encode(), "training log", TrainLogError)


def _append(path: pathlib.Path) -> IO[str]:
    """The log opened for appending; a link put in its place since begin() is refused, not followed."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    try:
        return os.fdopen(os.open(path, flags, 0o666), "a")
    except OSError as err:
        raise TrainLogError(f"{path}: cannot append to the training log: {err.strerror}") from None


class TrainLog:
    """The two logs of a run directory, appended to (and flushed) line by line while open, and
    the same records as flat metrics to ``sinks`` at the same steps: ``train/loss`` and
    ``train/lr`` per update, the health metrics of ``pydepth.monitoring`` per observation."""

    def __init__(self, directory: pathlib.Path, sinks: Sequence[Any] = ()) -> None:
        self.train_path = pathlib.Path(directory) / "train.jsonl"
        self.health_path = pathlib.Path(directory) / "health.jsonl"
        self.sinks = as_sinks(list(sinks))
        self._train: Optional[IO[str]] = None
        self._health: Optional[IO[str]] = None

    def begin(self, step: int, resumed: bool) -> None:
        """Empties both logs for a fresh run; for a run resumed at ``step`` keeps the steps taken
        and the observations before it (an end observation at ``step`` belonged to the stopped
        run; the resumed one observes that step again if its cadence says so)."""
        if resumed:
            _trim(self.train_path, step - 1)
            _trim(self.health_path, step - 1)
        else:
            for path in (self.train_path, self.health_path):
                write_bytes(path, b"", "training log", TrainLogError)

    def __enter__(self) -> TrainLog:
        self._train = _append(self.train_path)
        try:
            self._health = _append(self.health_path)
        except TrainLogError:
            self._train.close()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        for fh in (self._train, self._health):
            if fh is not None:
                fh.close()
        self._train = self._health = None

    def step(self, step: int, loss: float, lr: float, seconds: float) -> None:
        """One optimizer update, taken on ``loss`` of the parameters after ``step`` updates."""
        _write(self._train, {"step": step, "loss": loss, "lr": lr, "seconds": seconds})
        for sink in self.sinks:
            sink.write({"train/loss": loss, "train/lr": lr}, step)

    def health(self, step: int, loss: float, report: DepthHealthReport) -> None:
        """One observation of the parameters after ``step`` updates."""
        _write(self._health, {"step": step, "loss": loss, "report": report.to_dict()})
        if self.sinks:
            metrics = health_metrics(report)
            for sink in self.sinks:
                sink.write(metrics, step)


def _write(fh: Optional[IO[str]], record: Dict[str, Any]) -> None:
    if fh is None:
        raise RuntimeError("the training log is written only while it is open (use it as a context manager)")
    fh.write(json.dumps(record) + "\n")
    fh.flush()
