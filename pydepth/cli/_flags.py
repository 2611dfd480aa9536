# SPDX-License-Identifier: MIT
"""One meaning per option name: the table every ``pydepth`` subcommand's options follow, and the
retired spellings, refused with the name that replaced them."""
from __future__ import annotations

import argparse
from typing import Any, Dict, Optional, Sequence, Tuple

#: Option -> (metavar, meaning). A subcommand that takes the option takes it with this meaning
#: (and this metavar); a test walks every parser against the table.
FLAGS: Dict[str, Tuple[Optional[str], str]] = {
    "--out": ("DIR", "directory the command writes its results into"),
    "--output": ("FILE", "file the command's one document is written to (instead of stdout)"),
    "--format": (None, "table for people or a JSON document"),
    "--plot": ("DIR", "directory the figures (PNG and SVG) are written into"),
    "--quiet": (None, "no progress or 'wrote' lines on stderr"),
    "--overwrite": (None, "a fresh run into a directory holding another run moves that run aside first"),
    "--seed": ("S", "SplitMix64 (or torch) seed of the initialization; default the chapter's 4701"),
    "--seeds": ("LIST", "initialization seeds of a grid"),
    "--data-seed": ("S", "seed of a sweep's fixed token batch"),
    "--config": ("CONFIG.json", "the model's configuration file"),
    "--tokens": ("IDS", "comma-separated input token ids, row-major"),
    "--targets": ("IDS", "comma-separated target ids, row-major; default the tokens shifted by one"),
    "--valid": ("FLAGS", "comma-separated 0/1 validity flags, row-major"),
    "--batch-rows": ("N", "rows of a batch"),
    "--sequence-length": ("N", "positions per row"),
    "--updates": ("N", "train until N optimizer updates have been applied"),
    "--observe-at": ("STEPS", "observe after these numbers of optimizer updates"),
    "--observe-every": ("K", "observe every K optimizer updates"),
    "--checkpoint-every": ("K", "checkpoint every K optimizer updates"),
    "--log": ("SPEC", "also log metrics to a logger: tensorboard:DIR, wandb[:DIR], mlflow:URI (repeatable)"),
    "--band": ("LOW,HIGH", "inclusive band the ratios are classified in"),
    "--control": (None, "also observe the same-base unscaled control"),
    "--policy": (None, "one initialization policy: scaled or unscaled"),
    "--policies": ("LIST", "initialization policies of a grid"),
    "--depths": ("LIST", "numbers of blocks of a grid"),
    "--parametrizations": ("LIST", "depth parametrizations of a grid (pydepth.parametrizations)"),
    "--lrs": ("LIST", "base learning rates of a grid"),
    "--preset": ("NAME", "a named grid whose values the other options change"),
    "--widths": ("LIST", "model widths of a grid"),
    "--lr": ("LR", "AdamW (peak) learning rate"),
    "--min-lr": ("LR", "final learning rate of the cosine"),
    "--warmup": ("K", "linear warmup updates"),
    "--weight-decay": ("WD", "AdamW decoupled weight decay"),
    "--resume": ("CHECKPOINT", "continue exactly from this checkpoint"),
    "--no-resume": (None, "refuse a result directory that already holds results"),
    "--recompute-damaged": (None, "recompute the cells of damaged parts on resume"),
    "--rerun": ("DIR ROW_ID", "recompute one stored row and compare it bit for bit"),
    "--scheduler": ("ADDRESS", "Dask scheduler"),
    "--workers": ("N", "worker processes of a local cluster"),
    "--threads": ("N", "worker threads of the C core"),
    "--backend": ("NAME", "pydepth or torch"),
    "--vocabulary-size": ("N", "vocabulary size"),
    "--head-width": ("N", "features per attention head"),
    "--ff-ratio": ("X", "feed-forward width as a multiple of the model width"),
    "--model-width": ("N", "model width"),
    "--layers": ("N", "number of blocks"),
    "--heads": ("N", "attention heads"),
    "--kv-heads": ("N", "key/value heads"),
    "--feed-forward-width": ("N", "feed-forward width"),
    "--max-positions": ("N", "maximum positions"),
    "--fixtures": ("TRACE.json", "a reference trace file"),
    "--id": ("ID", "fixture id in the trace document"),
    "--scheme": (None, "depth-scaling scheme"),
    "--base-std": ("STD", "base standard deviation"),
    "--tolerance": ("TOL", "relative tolerance of an 'ok' verdict"),
    "--unscaled": (None, "use the plain base draw"),
    "--strict": (None, "exit 1 when any matrix is not 'ok'"),
}

#: (subcommand or None for every one, retired option) -> what replaced it.
RETIRED: Dict[Tuple[Optional[str], str], str] = {
    (None, "--batch"): "--batch-rows",
    ("train", "--steps"): "--updates",
    ("sweep", "--steps"): "--observe-at",
    ("depth-check", "--steps"): "--observe-at",
    ("report", "--out"): "--output",
    ("depth-check", "--no-plot"): "--plot DIR (figures are drawn only when asked)",
    ("laptop", "--tokens"): "--sequence-length",
}


class _Retired(argparse.Action):
    """A hidden option that refuses itself, naming its replacement."""

    def __init__(self, option_strings: Sequence[str], dest: str, replacement: str = "", **kwargs: Any) -> None:
        self.replacement = replacement
        super().__init__(option_strings, dest, nargs="?", help=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: Optional[str] = None) -> None:
        parser.exit(2, f"{parser.prog}: error: {option_string} is retired; use {self.replacement}\n")


def add_retired(name: str, p: argparse.ArgumentParser) -> None:
    """Adds the retired spellings that apply to subcommand ``name`` and that it does not use."""
    taken = set(p._option_string_actions)
    for (command, old), new in RETIRED.items():
        applies = command == name or (command is None and new.split()[0] in taken)
        if applies and old not in taken:
            p.add_argument(old, action=_Retired, replacement=new, dest=argparse.SUPPRESS, default=argparse.SUPPRESS)
