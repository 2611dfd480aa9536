# SPDX-License-Identifier: MIT
"""A training run, its one owner: a fresh or resumed byte-level AdamW run on a text, with the
checkpoint and observation cadences of its settings, JSON-lines logs, exact resume and Ctrl-C.
The command line (``pydepth train``) turns its options into settings and calls :func:`run_training`."""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import math
import os
import pathlib
import signal
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Union, cast

from .. import checkpoint as _checkpoint
from .._native import _runtime
from .._native._rng import SplitMix64
from ..checkpoint import Checkpoint
from ..config import DecoderConfig
from ..depth_init import DepthInitializationBudget, DepthInitializationRecord, Fresh, initialize_depth_scaled
from ..errors import ConfigError
from ..model import DecoderModel
from ..monitoring.sinks import as_sinks
from ..optim import AdamW, Optimizer, warmup_cosine
from . import step as _step
from .budget import check_step_memory
from .directory import claimed
from .errors import ResumeError
from .log import TrainLog
from .settings import TrainSettings

__all__ = ["TrainProgress", "TrainResult", "run_training", "resume_settings"]


@dataclasses.dataclass(frozen=True)
class TrainProgress:
    """One finished optimizer step: ``step`` updates made (of ``total``; this call started at
    ``start``), the ``loss`` before the update, its learning rate ``lr``, the ``seconds`` it took
    and the tokens per second over this call's steps so far."""

    step: int
    total: int
    start: int
    loss: float
    lr: float
    seconds: float
    tokens_per_second: float


@dataclasses.dataclass(frozen=True)
class TrainResult:
    """What a run left: its (resolved) settings, the trained model and optimizer, the generator,
    the step reached, whether Ctrl-C stopped it, the final checkpoint, the logs, and the losses
    of this call's steps in order."""

    settings: TrainSettings
    model: DecoderModel
    optimizer: Optimizer
    rng: SplitMix64
    step: int
    interrupted: bool
    checkpoint: pathlib.Path
    train_log: pathlib.Path
    health_log: pathlib.Path
    losses: List[float]
    stop_signal: Optional[int] = None  # SIGINT or SIGTERM when one stopped the run


@dataclasses.dataclass
class _State:
    settings: TrainSettings
    model: DecoderModel
    optimizer: Optimizer
    rng: SplitMix64
    record: Optional[DepthInitializationRecord]
    step: int


def resume_settings(ck: Checkpoint) -> TrainSettings:
    """The settings stored in a checkpoint written by a training run (:class:`ResumeError` when it
    holds no run settings, optimizer, generator or step; a tampered setting is refused by name)."""
    saved = ck.extra.get("train") if isinstance(ck.extra, dict) else None
    if not isinstance(saved, dict) or ck.optimizer_state is None or ck.rng is None or ck.step is None:
        raise ResumeError("the checkpoint was not written by a training run "
                          "(no run settings, optimizer, generator or step)")
    return TrainSettings.from_dict(saved)


def _fresh(settings: TrainSettings, config: Optional[DecoderConfig], budget: Optional[int]) -> _State:
    if config is None:
        raise ConfigError("a fresh run needs a DecoderConfig (only a resumed run takes its checkpoint's)")
    settings = settings.resolved(config.max_positions)
    _step.check_byte_config(config, settings.tokens)  # type: ignore[arg-type]
    check_step_memory(config, settings.batch, settings.tokens, budget)  # type: ignore[arg-type]
    rng = SplitMix64(settings.seed)
    if settings.policy == "scaled":
        init = initialize_depth_scaled(Fresh(config, DepthInitializationBudget(
            config.parameter_count, config.max_positions), rng))
        model, record = init.model, init.record
    else:
        model, record = DecoderModel(config, rng), None
    lr, total = settings.lr, settings.steps
    warmup, min_lr = cast(int, settings.warmup), cast(float, settings.min_lr)  # resolved() made them concrete
    schedule = warmup_cosine(lr, min(warmup, total), total, min_lr=min(min_lr, lr))
    optimizer = AdamW(model.parameters, lr=schedule, weight_decay=settings.weight_decay)
    return _State(settings, model, optimizer, rng, record, 0)


def _resumed(settings: TrainSettings, ck: Checkpoint, config: Optional[DecoderConfig], digest: str,
             text_name: str, budget: Optional[int]) -> _State:
    stored = resume_settings(ck)
    saved_digest = ck.extra["train"].get("text_sha256")
    if saved_digest != digest:
        raise ResumeError(f"{text_name or 'the text'} differs from the text the checkpoint was trained on "
                          f"(sha256 {digest[:12]}… vs {str(saved_digest)[:12]}…)")
    if config is not None and config != ck.config:
        raise ResumeError("the given configuration differs from the checkpoint's configuration")
    given: Dict[str, Any] = settings.to_dict()
    settings = stored.continued(given)  # refuses a run field that differs from the stored one
    _step.check_byte_config(ck.config, settings.tokens)  # type: ignore[arg-type]
    check_step_memory(ck.config, settings.batch, settings.tokens, budget)  # type: ignore[arg-type]
    if settings.steps < ck.step:  # type: ignore[operator]
        raise ResumeError(f"steps {settings.steps} is below the checkpoint's step {ck.step}")
    return _State(settings, ck.model, ck.optimizer(), ck.rng, ck.record, ck.step)  # type: ignore[arg-type]


class _Abandon(BaseException):
    """Raised by the stop handler inside a step's forward or reverse pass (not an error)."""


class _Stop:
    """Ctrl-C and SIGTERM: recorded in ``signals``; inside a step's forward and reverse passes
    (``window``, entered by train_step) the step is abandoned at once, the core stopping between
    blocks; outside it the loop stops after the step. A one-call step's window spans its update
    too: the core's final poll (``_runtime.final_polls``) closes it where the update begins."""

    def __init__(self) -> None:
        self.signals: List[int] = []
        self.open = False
        self.finals = 0  # the core's final polls when the window opened

    def __bool__(self) -> bool:
        return bool(self.signals)

    def handle(self, signum: int, frame: Any) -> None:
        self.signals.append(signum)
        if self.open and _runtime.final_polls() == self.finals:  # the one rule: abandon before any update began
            self.open = False
            raise _Abandon()

    @contextlib.contextmanager
    def window(self) -> Iterator[None]:
        self.open, self.finals = not self.signals, _runtime.final_polls()
        try:
            yield
        finally:
            self.open = False


_STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM") if hasattr(signal, n))


@contextlib.contextmanager
def _ctrl_c() -> Iterator[_Stop]:
    """Installs the stop handler for SIGINT and SIGTERM; signals reach the main thread only, so
    elsewhere nothing is installed."""
    stop = _Stop()
    main_thread = threading.current_thread() is threading.main_thread()
    previous = {s: signal.signal(s, stop.handle) for s in _STOP_SIGNALS} if main_thread else {}
    try:
        yield stop
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _train(state: _State, documents: Any, log: TrainLog, save: Callable[[int], pathlib.Path],
           interrupted: _Stop, on_progress: Optional[Callable[[TrainProgress], None]]) -> List[float]:
    """The loop: steps until the total or Ctrl-C, logging, observing and checkpointing on cadence."""
    s, losses = state.settings, []
    first, elapsed, positions = state.step, 0.0, s.batch * s.tokens  # type: ignore[operator]
    while state.step < s.steps and not interrupted:
        observe = s.observe_every > 0 and state.step % s.observe_every == 0
        before = state.rng.copy()  # an abandoned step leaves the generator where the step found it
        batch = _step.draw_batch(documents, state.rng, s.batch, s.tokens)  # type: ignore[arg-type]
        lr = state.optimizer.lr
        t0 = time.perf_counter()
        try:
            loss, report = _step.train_step(state.model, state.optimizer, batch, observe=observe,
                                            interruptible=interrupted.window())
        except _Abandon:
            state.rng = before
            break
        seconds = time.perf_counter() - t0
        if report is not None:
            log.health(state.step, loss, report)
        log.step(state.step, loss, lr, seconds)
        state.step += 1
        losses.append(loss)
        elapsed += seconds
        if on_progress is not None:
            rate = positions * (state.step - first) / elapsed if elapsed > 0 else math.inf
            on_progress(TrainProgress(state.step, s.steps, first, loss, lr, seconds, rate))
        if s.checkpoint_every and state.step % s.checkpoint_every == 0 and state.step < s.steps:
            save(state.step)
    return losses


def run_training(settings: TrainSettings, text: bytes, out: Union[str, os.PathLike[str]], *,
                 config: Optional[DecoderConfig] = None, resume: Optional[Checkpoint] = None,
                 text_name: str = "", on_progress: Optional[Callable[[TrainProgress], None]] = None,
                 on_message: Optional[Callable[[str], None]] = None,
                 memory_budget: Optional[int] = None, overwrite: bool = False, sinks: Any = None) -> TrainResult:
    """Trains on the paragraphs of ``text`` up to ``settings.steps`` and writes, into ``out``,
    checkpoints ``step-NNNNNN.safetensors`` (every ``checkpoint_every`` steps and at the end, with
    the settings in ``extra["train"]``), ``train.jsonl`` and ``health.jsonl``.

    A fresh run needs ``config``; a run resumed from ``resume`` (a checkpoint of this function)
    continues it bit for bit: the same text, its stored run settings (start from
    :func:`resume_settings`; ``steps``, ``observe_every``, ``checkpoint_every`` and ``plot`` may
    change), the logs trimmed to its step. Every refusal comes before anything is written.
    ``on_progress`` is called after every step, ``on_message`` with the start and end lines. On
    the main thread Ctrl-C or SIGTERM stops the run, checkpointed (``TrainResult.interrupted``,
    ``stop_signal``): during a step's forward or reverse pass that step is abandoned (the core
    stops between blocks; parameters, optimizer and generator stay as before it), during its
    update the step completes. A step whose estimated memory exceeds ``memory_budget`` bytes
    (default: three quarters of physical memory) is refused before anything is allocated
    (:class:`TrainBudgetError`). ``text_name`` names the text in the checkpoint and messages; a
    ``plot`` path is stored relative to ``out`` (not at all when outside it).

    ``out`` belongs to this run while it writes (a lock file with its pid and host): a second
    run into it, from another process or from inside this one's callbacks, is refused
    (:class:`RunDirectoryError`), and so is a fresh run into a directory holding another run's
    logs or checkpoints, unless ``overwrite`` moves that directory aside to ``OUT.old-TIME``.

    ``sinks`` (a sink, a callable or a sequence, as :func:`pydepth.monitoring.as_sinks` takes)
    receive every ``train.jsonl`` row as ``train/loss`` and ``train/lr`` and every ``health.jsonl``
    row as :func:`pydepth.monitoring.health_metrics`, at the rows' steps; a sink's ``open()``, if it
    has one, is called once the directory is claimed, before the first step. They stay the caller's to close."""
    sinks = as_sinks(sinks)
    documents = _step.byte_documents(text)
    digest = hashlib.sha256(text).hexdigest()
    state = (_fresh(settings, config, memory_budget) if resume is None
             else _resumed(settings, resume, config, digest, text_name, memory_budget))
    with claimed(pathlib.Path(out), resumed=resume is not None, overwrite=overwrite) as directory:
        return _run(state, documents, directory, resume is not None, digest, text_name, on_progress, on_message,
                    sinks)


def _run(state: _State, documents: Any, directory: pathlib.Path, resumed: bool, digest: str, text_name: str,
         on_progress: Optional[Callable[[TrainProgress], None]],
         on_message: Optional[Callable[[str], None]], sinks: Sequence[Any] = ()) -> TrainResult:
    s, say = state.settings, on_message or (lambda line: None)
    for sink in sinks:  # a logger opens once the directory is claimed, and before any log is touched
        if callable(getattr(sink, "open", None)):
            sink.open()
    log = TrainLog(directory, sinks)
    log.begin(state.step, resumed=resumed)
    extra = {"train": {**s.to_dict(), "plot": _inside(s.plot, directory), "text_sha256": digest,
                       "text_file": text_name}}

    def save(at: int) -> pathlib.Path:
        path = directory / f"step-{at:06d}.safetensors"
        if path.is_symlink():  # a link planted in the run's directory is replaced, not written through
            path.unlink()
        _checkpoint.save(path, state.model, optimizer=state.optimizer, rng=state.rng, record=state.record,
                         step=at, extra=extra)
        return path

    say(f"training {state.model!r}, policy {s.policy}, {len(documents)} documents, "
        f"{s.batch}x{s.tokens} tokens per step, steps {state.step}..{s.steps}")
    with log, _ctrl_c() as interrupted:
        losses = _train(state, documents, log, save, interrupted, on_progress)
    final = save(state.step)
    say(f"{'interrupted; ' if interrupted else ''}wrote {final}")
    if s.observe_every > 0:  # the final parameters, on the batch the next step would draw (a copy of the generator)
        loss, report = _step.observe_step(state.model, _step.draw_batch(
            documents, state.rng.copy(), s.batch, s.tokens))  # type: ignore[arg-type]
        with log:
            log.health(state.step, loss, report)
    return TrainResult(s, state.model, state.optimizer, state.rng, state.step, bool(interrupted), final,
                       log.train_path, log.health_path, losses,
                       interrupted.signals[0] if interrupted.signals else None)


def _inside(path: Optional[str], directory: pathlib.Path) -> Optional[str]:
    """path relative to directory when it lies inside it, else None (a checkpoint never names a
    place outside its run's directory)."""
    if path is None:
        return None
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(directory))
    return None if rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel) else rel
