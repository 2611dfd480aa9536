# SPDX-License-Identifier: MIT
"""``pydepth train``: byte-level AdamW training of a configured decoder on a text file, with a
progress bar, periodic checkpoints and residual-health observations, exact resume and Ctrl-C."""
from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import sys
import time
from typing import TYPE_CHECKING, Any, Dict, Optional

from . import _args
from .._files.reading import read_bytes
from ..monitoring.targets import check_targets, open_targets

if TYPE_CHECKING:
    from ..checkpoint import Checkpoint
    from ..training import TrainProgress, TrainResult, TrainSettings

# settings whose option has another name
_OPTION = {"tokens": "sequence-length", "batch": "batch-rows", "steps": "updates"}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds the ``train`` subcommand and its options."""
    p = sub.add_parser("train", help="train a configured decoder on a text file (byte-level, AdamW)",
                       description="Byte-level next-token training with AdamW and a warmup+cosine "
                       "learning rate. Writes checkpoints, train.jsonl (loss per step) and "
                       "health.jsonl (residual health every --observe-every steps and at the end) into --out.")
    p.add_argument("text_file", metavar="TEXT_FILE",
                   help="training text; paragraphs (blank-line separated) are documents")
    p.add_argument("--config", metavar="CONFIG.json", help="DecoderConfig as JSON (vocabulary_size >= 256); "
                   "required unless --resume")
    p.add_argument("--updates", type=_args.positive, metavar="N", help="train until N optimizer updates have "
                   "been applied (default 200, or the resumed run's total)")
    p.add_argument("--batch-rows", type=_args.positive, metavar="N", help="rows per update (default 4)")
    p.add_argument("--sequence-length", type=_args.positive, dest="tokens", metavar="N",
                   help="positions per row (default: the config's max_positions)")
    p.add_argument("--lr", type=float, metavar="LR", help="AdamW peak learning rate (default 3e-3)")
    p.add_argument("--min-lr", type=_args.nonnegative_float, metavar="LR",
                   help="final learning rate of the cosine (default lr/10)")
    p.add_argument("--warmup", type=_args.nonnegative, metavar="K", help="linear warmup updates (default updates/10)")
    p.add_argument("--weight-decay", type=float, metavar="WD", help="AdamW decoupled weight decay (default 0.01)")
    p.add_argument("--seed", type=_args.seed, metavar="S", help="SplitMix64 seed of the initialization and the "
                   f"batches (default the chapter's {_args.CHAPTER_SEED}, or the resumed run's)")
    p.add_argument("--policy", choices=("scaled", "unscaled"), help="depth-scaled initialization (default) or "
                   "the same base draw unscaled")
    p.add_argument("--checkpoint-every", type=_args.nonnegative, metavar="K",
                   help="write a checkpoint every K steps (default 0: only the final one; "
                   "a resumed run keeps its checkpoint's value)")
    p.add_argument("--observe-every", type=_args.nonnegative, metavar="K",
                   help="observe residual health every K steps from step 0, and the final parameters "
                   "(default 0: never; a resumed run keeps its checkpoint's value)")
    p.add_argument("--out", metavar="DIR", help="output directory (default train-out; "
                   "a resumed run: the checkpoint's directory)")
    p.add_argument("--resume", metavar="CHECKPOINT", help="continue exactly from a checkpoint of this command, "
                   "with its settings, --observe-every, --checkpoint-every and --plot")
    p.add_argument("--overwrite", action="store_true", help="a fresh run into a directory holding another run "
                   "moves that directory aside to DIR.old-TIME instead of refusing")
    p.add_argument("--plot", metavar="DIR", help="at the end, plot loss and site ratios over updates into "
                   "DIR/train.png and DIR/train.svg (needs pip install 'pydepth[plot]'; a resumed run keeps "
                   "its checkpoint's value)")
    p.add_argument("--log", action="append", type=_args.log_spec, metavar="SPEC", default=[],
                   help="also log loss, learning rate and residual health at the train.jsonl and health.jsonl "
                   "steps to: tensorboard:DIR (event files), wandb[:DIR] (an offline W&B run, default in --out), "
                   "mlflow:URI (a tracking URI: sqlite:///FILE.db or a server); jsonl (train.jsonl and "
                   "health.jsonl) always on; repeatable; needs pip install 'pydepth[train]'; not stored for --resume")


def clock(seconds: float) -> str:
    """``m:ss`` (or ``h:mm:ss``) for a progress line."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class _Progress:
    """One self-rewriting line on a terminal; a line every ~5% of the run otherwise (none with
    ``quiet``). A message ends the open line first. Time left is estimated from this call's
    updates so far."""

    def __init__(self, quiet: bool = False) -> None:
        self.tty = sys.stderr.isatty()
        self.quiet = quiet
        self.every = 0
        self.open = False
        self.started = time.perf_counter()

    def update(self, p: TrainProgress) -> None:
        self.every = self.every or max(1, (p.total - p.start) // 20)
        if self.quiet or (not self.tty and (p.step - p.start) % self.every and p.step != p.total):
            return
        width = 24
        filled = width * p.step // max(1, p.total)
        elapsed = time.perf_counter() - self.started
        left = elapsed / max(1, p.step - p.start) * (p.total - p.step)
        line = (f"update {p.step:>{len(str(p.total))}}/{p.total} [{'#' * filled}{'.' * (width - filled)}] "
                f"loss {p.loss:.4f}  lr {p.lr:.2e}  {p.tokens_per_second:,.0f} tok/s  "
                f"elapsed {clock(elapsed)}  left {clock(left)}")
        sys.stderr.write(("\r" + line) if self.tty else line + "\n")
        sys.stderr.flush()
        self.open = self.tty

    def message(self, text: str) -> None:
        if not self.every:  # the run's start line: loggers opened before it (W&B takes seconds) are not training time
            self.started = time.perf_counter()
        self.close()
        if not self.quiet:
            sys.stderr.write(text + "\n")

    def close(self) -> None:
        if self.open:
            sys.stderr.write("\n")
            self.open = False


def _option(field: str) -> str:
    return "--" + _OPTION.get(field, field).replace("_", "-")


def _settings(args: argparse.Namespace, ck: Optional[Checkpoint]) -> TrainSettings:
    """The run's settings: the options given (defaults for the rest), or for --resume the
    checkpoint's, with --steps, --observe-every, --checkpoint-every and --plot given again winning."""
    from ..training import SettingsClashError, TrainingError, TrainSettings, TrainSettingsError, resume_settings
    given: Dict[str, Any] = {
        "policy": args.policy, "seed": args.seed, "batch": args.batch_rows, "tokens": args.tokens, "lr": args.lr,
        "min_lr": args.min_lr, "warmup": args.warmup, "weight_decay": args.weight_decay,
        "steps": args.updates, "observe_every": args.observe_every,
        "checkpoint_every": args.checkpoint_every,
        "plot": None if args.plot is None else _args.in_dir(args.plot, "train")}
    stored = None
    if ck is not None:
        try:
            stored = resume_settings(ck)
        except TrainingError as err:  # the checkpoint is at fault, not an option
            raise ValueError(f"{args.resume}: {err}") from None
    try:
        if stored is None:
            fresh = {k: v for k, v in given.items() if v is not None}
            return TrainSettings(**{"seed": _args.CHAPTER_SEED, **fresh})
        return stored.continued(given)
    except SettingsClashError as err:
        raise ValueError("a resumed run keeps its settings; these differ: " + ", ".join(
            f"{_option(f)} {g} (checkpoint: {s})" for f, g, s in err.clashes)) from None
    except TrainSettingsError as err:  # named as the option that carried it
        raise ValueError(f"{_option(err.field)} must be {err.requirement}, got {err.value!r}") from None


def run(args: argparse.Namespace) -> int:
    """Runs ``pydepth train``; returns the exit code (130 after a Ctrl-C checkpoint, 143 after SIGTERM's)."""
    from .. import checkpoint
    from ..training import run_training
    if args.plot and _args.plot_missing():
        return 2
    if not args.config and not args.resume:
        raise ValueError("--config is required unless --resume is given")
    check_targets(args.log)  # a missing logger package is named before anything is read or written
    text = read_bytes(args.text_file, "training text")
    ck = checkpoint.load(args.resume) if args.resume else None
    settings = _settings(args, ck)
    if settings.plot and not args.plot and _args.plot_missing():
        return 2
    out = pathlib.Path(args.out if args.out is not None
                       else pathlib.Path(args.resume).parent if args.resume else "train-out")
    if ck is not None and args.plot is None and settings.plot:  # a stored plot is inside the run's directory
        settings = dataclasses.replace(settings, plot=str(out / settings.plot))
    progress = _Progress(args.quiet)
    sinks = open_targets(args.log, str(out), settings.to_dict())
    started = time.perf_counter()
    try:
        result = run_training(settings, text, out, config=_args.load_config(args.config) if args.config else None,
                              resume=ck, text_name=os.path.basename(args.text_file),
                              on_progress=progress.update, on_message=progress.message,
                              overwrite=args.overwrite, sinks=sinks)
    finally:
        progress.close()
        for sink in sinks:
            sink.close()
    if result.settings.plot:
        _plot(result, args)
    sys.stdout.write(_summary(result, time.perf_counter() - started) + "\n")
    return 128 + (result.stop_signal or 2) if result.interrupted else 0  # 130 Ctrl-C, 143 SIGTERM


def _summary(result: TrainResult, seconds: float) -> str:
    """The one line a person reads at the end: where the run stands and where its checkpoint is."""
    state = f"interrupted at step {result.step}" if result.interrupted else f"trained to step {result.step}"
    loss = f", last loss {result.losses[-1]:.4f} nats" if result.losses else ""
    return (f"{state} of {result.settings.steps} ({len(result.losses)} steps in {seconds:.1f} s{loss}); "
            f"checkpoint {result.checkpoint}")


def _plot(result: TrainResult, args: argparse.Namespace) -> None:
    from ..plots.train import plot_training
    from ..training.log import read_log
    rows, observed, title = read_log(result.train_log), read_log(result.health_log), _title(result)
    for figure in _args.plot_paths(result.settings.plot, lambda target, formats: plot_training(  # type: ignore[arg-type]
            rows, observed, target, formats=formats, title=title)):
        _args.note(args, f"wrote {figure}")


def _title(result: TrainResult) -> str:
    c, s = result.model.config, result.settings
    return (f"{c.layers} blocks, width {c.model_width}, policy {s.policy}, seed {s.seed}, "
            f"batch {s.batch}x{s.tokens}, peak lr {s.lr:g}")
