"""``pydepth train``: byte-level AdamW training of a configured decoder on a text file, with a
progress bar, periodic checkpoints and residual-health observations, exact resume and Ctrl-C."""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import pathlib
import signal
import sys
import threading
import time
from typing import Any, Dict, List, Optional

from . import _args

#: Run settings stored in each checkpoint's extra["train"]; a resumed run reuses them.
_SETTINGS = ("policy", "seed", "batch", "tokens", "lr", "min_lr", "warmup", "weight_decay")
_OPTION = {"tokens": "sequence-length"}  # settings whose option has another name
#: Options a resumed run takes from its checkpoint unless given again (then the new value wins).
_RUN_OPTIONS: Dict[str, Any] = {"observe_every": 0, "checkpoint_every": 0, "plot": None}


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Adds the ``train`` subcommand and its options."""
    p = sub.add_parser("train", help="train a configured decoder on a text file (byte-level, AdamW)",
                       description="Byte-level next-token training with AdamW and a warmup+cosine "
                       "learning rate. Writes checkpoints, train.jsonl (loss per step) and "
                       "health.jsonl (residual health every --observe-every steps and at the end) into --out.")
    p.add_argument("text_file", metavar="TEXT_FILE", help="training text; paragraphs (blank-line separated) are documents")
    p.add_argument("--config", metavar="CONFIG.json", help="DecoderConfig as JSON (vocabulary_size >= 256); "
                   "required unless --resume")
    p.add_argument("--steps", type=str, metavar="N", help="train up to optimizer step N (default 200, or the "
                   "resumed run's total)")
    p.add_argument("--batch", type=_args.positive, help="rows per step (default 4)")
    p.add_argument("--sequence-length", type=_args.positive, dest="tokens", metavar="N",
                   help="positions per row (default: the config's max_positions)")
    p.add_argument("--lr", type=float, help="AdamW peak learning rate (default 3e-3)")
    p.add_argument("--min-lr", type=_args.nonnegative_float, help="final learning rate of the cosine (default lr/10)")
    p.add_argument("--warmup", type=_args.nonnegative, help="linear warmup steps (default steps/10)")
    p.add_argument("--weight-decay", type=float, help="AdamW decoupled weight decay (default 0.01)")
    p.add_argument("--seed", type=_args.seed, help="SplitMix64 seed of the initialization and the batches (default 0)")
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
    p.add_argument("--plot", metavar="PATH", help="at the end, plot loss and site ratios over steps: PATH ending "
                   "in .png, .svg or .pdf writes that file, any other PATH writes PATH.png and PATH.svg "
                   "(needs pip install 'pydepth[plot]'; a resumed run keeps its checkpoint's value)")


def _total_steps(text: Optional[str]) -> Optional[int]:
    """--steps N: one positive step count (the option shares sweep's spelling, a string)."""
    if text is None:
        return None
    try:
        v = int(text)
    except ValueError:
        raise ValueError(f"--steps must be one positive integer for train, got {text!r}") from None
    if v <= 0:
        raise ValueError(f"--steps must be positive, got {v}")
    return v


class _Progress:
    """One self-rewriting line on a terminal; a line every ~5% of the run otherwise."""

    def __init__(self, total: int, start: int) -> None:
        self.total, self.start = total, start
        self.tty = sys.stderr.isatty()
        self.every = max(1, (total - start) // 20)

    def update(self, step: int, loss: float, lr: float, tokens_per_second: float) -> None:
        done = step - self.start
        if not self.tty and done % self.every and step != self.total:
            return
        width = 24
        filled = width * step // max(1, self.total)
        line = (f"step {step:>{len(str(self.total))}}/{self.total} [{'#' * filled}{'.' * (width - filled)}] "
                f"loss {loss:.4f}  lr {lr:.2e}  {tokens_per_second:,.0f} tok/s")
        sys.stderr.write(("\r" + line) if self.tty else line + "\n")
        sys.stderr.flush()

    def close(self) -> None:
        if self.tty:
            sys.stderr.write("\n")


def _settings(args: argparse.Namespace, saved: Optional[Dict[str, Any]], config: Any) -> Dict[str, Any]:
    given = {"policy": args.policy, "seed": args.seed, "batch": args.batch, "tokens": args.tokens,
             "lr": args.lr, "min_lr": args.min_lr, "warmup": args.warmup, "weight_decay": args.weight_decay}
    if saved is not None:
        clash = [f"--{_OPTION.get(k, k).replace('_', '-')} {given[k]} (checkpoint: {saved[k]})"
                 for k in _SETTINGS if given[k] is not None and given[k] != saved[k]]
        if clash:
            raise ValueError("a resumed run keeps its settings; these differ: " + ", ".join(clash))
        return dict(saved)
    steps = _total_steps(args.steps) or 200
    lr = 3e-3 if args.lr is None else args.lr
    if not (math.isfinite(lr) and lr > 0.0):
        raise ValueError(f"--lr must be a finite positive number, got {lr!r}")
    return {"policy": args.policy or "scaled", "seed": 0 if args.seed is None else args.seed,
            "batch": args.batch or 4, "tokens": args.tokens or config.max_positions, "lr": lr,
            "min_lr": lr / 10 if args.min_lr is None else args.min_lr,
            "warmup": steps // 10 if args.warmup is None else args.warmup,
            "weight_decay": 0.01 if args.weight_decay is None else args.weight_decay}


def _trim(path: pathlib.Path, last_step: int) -> None:
    """Keeps only the log lines up to last_step (train.jsonl: steps taken) or before it
    (health.jsonl: an end observation belongs to the stopped run only; the resumed one observes
    that step again if it is a multiple of --observe-every)."""
    if not path.exists():
        return
    kept = [line for line in path.read_text().splitlines() if line and json.loads(line)["step"] <= last_step]
    path.write_text("".join(line + "\n" for line in kept))


def run(args: argparse.Namespace) -> int:
    """Runs ``pydepth train``; returns the exit code (130 after a Ctrl-C checkpoint)."""
    from .. import checkpoint
    from .._native._core import SplitMix64
    from ..depth_init import DepthInitializationBudget, Fresh, initialize_depth_scaled
    from ..model import DecoderModel
    from ..optim import AdamW, warmup_cosine
    from ..training.step import byte_documents, check_byte_config, draw_batch, observe_step, train_step
    if args.plot and _args.plot_missing():
        return 2
    text = pathlib.Path(args.text_file).read_bytes()
    digest = hashlib.sha256(text).hexdigest()
    documents = byte_documents(text)
    out = pathlib.Path(args.out if args.out is not None
                       else pathlib.Path(args.resume).parent if args.resume else "train-out")
    saved = None
    if args.resume:
        ck = checkpoint.load(args.resume)
        saved = (ck.extra or {}).get("train") if isinstance(ck.extra, dict) else None
        if not isinstance(saved, dict) or ck.optimizer_state is None or ck.rng is None or ck.step is None:
            raise ValueError(f"{args.resume} was not written by pydepth train (no run settings, optimizer, generator or step)")
        if saved.get("text_sha256") != digest:
            raise ValueError(f"{args.text_file} differs from the text the checkpoint was trained on "
                             f"(sha256 {digest[:12]}… vs {str(saved.get('text_sha256'))[:12]}…)")
        if args.config and _args.load_config(args.config) != ck.config:
            raise ValueError(f"--config {args.config} differs from the checkpoint's configuration")
        settings = _settings(args, saved, ck.config)
        model, optimizer, rng, record, step = ck.model, ck.optimizer(), ck.rng, ck.record, ck.step
        total = _total_steps(args.steps) or saved["steps"]
    else:
        if not args.config:
            raise ValueError("--config is required unless --resume is given")
        config = _args.load_config(args.config)
        settings = _settings(args, None, config)
        total = _total_steps(args.steps) or 200
        check_byte_config(config, settings["tokens"])
        rng = SplitMix64(settings["seed"])
        if settings["policy"] == "scaled":
            init = initialize_depth_scaled(Fresh(config, DepthInitializationBudget(
                config.parameter_count, config.max_positions), rng))
            model, record = init.model, init.record
        else:
            model, record = DecoderModel(config, rng), None
        schedule = warmup_cosine(settings["lr"], min(settings["warmup"], total), total,
                                 min_lr=min(settings["min_lr"], settings["lr"]))
        optimizer = AdamW(model.parameters, lr=schedule, weight_decay=settings["weight_decay"])
        step = 0
    # given options win; a resumed run keeps its checkpoint's (checkpoints before these were stored: defaults)
    options = {k: getattr(args, k) if getattr(args, k) is not None else (saved or {}).get(k, default)
               for k, default in _RUN_OPTIONS.items()}
    for k in ("observe_every", "checkpoint_every"):
        if type(options[k]) is not int or options[k] < 0:
            raise ValueError(f"{args.resume}: stored {k} must be a non-negative integer, got {options[k]!r}")
    if options["plot"] is not None and not isinstance(options["plot"], str):
        raise ValueError(f"{args.resume}: stored plot must be a path string, got {options['plot']!r}")
    if options["plot"] and not args.plot and _args.plot_missing():
        return 2
    check_byte_config(model.config, settings["tokens"])
    if total < step:
        raise ValueError(f"--steps {total} is below the checkpoint's step {step}")
    out.mkdir(parents=True, exist_ok=True)
    train_log, health_log = out / "train.jsonl", out / "health.jsonl"
    if args.resume:
        _trim(train_log, step)
        _trim(health_log, step - 1)
    else:
        for path in (train_log, health_log):
            path.write_text("")
    extra = {"train": {**settings, "steps": total, "text_sha256": digest, "text_file": os.path.basename(args.text_file),
                       **options}}

    def save(at: int) -> pathlib.Path:
        path = out / f"step-{at:06d}.safetensors"
        checkpoint.save(path, model, optimizer=optimizer, rng=rng, record=record, step=at, extra=extra)
        return path

    interrupted = []
    # Ctrl-C only marks the run; the loop stops after the current step (signals reach the main thread only)
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, lambda signum, frame: interrupted.append(signum)) if main_thread else None
    progress = _Progress(total, step)
    positions = settings["batch"] * settings["tokens"]
    first, elapsed = step, 0.0  # tokens per second over the steps of this invocation
    sys.stderr.write(f"training {model!r}, policy {settings['policy']}, {len(documents)} documents, "
                     f"{settings['batch']}x{settings['tokens']} tokens per step, steps {step}..{total}\n")
    try:
        with open(train_log, "a") as tl, open(health_log, "a") as hl:
            while step < total and not interrupted:
                observe = options["observe_every"] > 0 and step % options["observe_every"] == 0
                batch = draw_batch(documents, rng, settings["batch"], settings["tokens"])
                lr = optimizer.lr
                t0 = time.perf_counter()
                loss, report = train_step(model, optimizer, batch, observe=observe)
                seconds = time.perf_counter() - t0
                if report is not None:
                    hl.write(json.dumps({"step": step, "loss": loss, "report": report.to_dict()}) + "\n")
                    hl.flush()
                step += 1
                tl.write(json.dumps({"step": step, "loss": loss, "lr": lr, "seconds": seconds}) + "\n")
                tl.flush()
                elapsed += seconds
                progress.update(step, loss, lr, positions * (step - first) / elapsed if elapsed > 0 else math.inf)
                if options["checkpoint_every"] and step % options["checkpoint_every"] == 0 and step < total:
                    save(step)
    finally:
        if main_thread:
            signal.signal(signal.SIGINT, previous)
        progress.close()
    final = save(step)
    sys.stderr.write(f"{'interrupted; ' if interrupted else ''}wrote {final}\n")
    if options["observe_every"] > 0:  # the final parameters too, on the batch the next step would draw (a copy of the generator)
        loss, report = observe_step(model, draw_batch(documents, rng.copy(), settings["batch"], settings["tokens"]))
        with open(health_log, "a") as hl:
            hl.write(json.dumps({"step": step, "loss": loss, "report": report.to_dict()}) + "\n")
    if options["plot"]:
        from ..plots.train import plot_training
        rows, observed, title = _read(train_log), _read(health_log), _title(model, settings)
        for figure in _args.plot_paths(options["plot"], lambda target, formats: plot_training(
                rows, observed, target, formats=formats, title=title)):
            sys.stderr.write(f"wrote {figure}\n")
    return 130 if interrupted else 0


def _read(path: pathlib.Path) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def _title(model: Any, settings: Dict[str, Any]) -> str:
    c = model.config
    return (f"{c.layers} blocks, width {c.model_width}, policy {settings['policy']}, seed {settings['seed']}, "
            f"batch {settings['batch']}x{settings['tokens']}, peak lr {settings['lr']:g}")
