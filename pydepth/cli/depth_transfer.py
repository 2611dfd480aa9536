# SPDX-License-Identifier: MIT
"""``pydepth depth-transfer``: the best learning rate across depth under each depth
parametrization, trained on Dask into a resumable store, summarized verdict first;
``--rerun DIR CELL_ID`` recomputes one stored cell bit for bit."""
from __future__ import annotations

import argparse
from typing import Any, Dict

from . import _args
from .sweep import missing_extra

# Grid options: (flag, spec field, argparse type, metavar, help).
_GRID = (
    ("--parametrizations", "parametrizations", str, "LIST", "depth parametrizations, e.g. standard,completep"),
    ("--depths", "depths", str, "LIST", "numbers of blocks, e.g. 2,4,8,16"),
    ("--lrs", "lrs", str, "LIST", "base learning rates (at least 3), e.g. 0.001,0.002,0.004"),
    ("--seeds", "seeds", str, "LIST", "initialization seeds, e.g. 0-2"),
    ("--updates", "updates", _args.positive, "N", "AdamW updates per cell"),
    ("--warmup", "warmup", _args.nonnegative, "K", "linear warmup updates before the cosine"),
    ("--model-width", "width", _args.positive, "N", "model width of every cell"),
    ("--sequence-length", "sequence_length", _args.positive, "N", "positions per row"),
    ("--batch-rows", "batch_rows", _args.positive, "N", "rows of each training batch"),
    ("--data-seed", "data_seed", _args.seed, "S", "seed of the data order (the held-out batch uses S + 1)"),
    ("--weight-decay", "weight_decay", _args.nonnegative_float, "WD", "AdamW decoupled weight decay (base)"),
)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds the ``depth-transfer`` subcommand and its options."""
    from ..sweep.transfer import PRESETS
    p = sub.add_parser("depth-transfer", help="does the best learning rate transfer across depth? (Dask)",
                       description="Trains one cell per (parametrization, depth, learning rate, seed) for a fixed "
                       "number of AdamW updates on TEXT_FILE with one data order, stores the held-out loss and "
                       "the residual health at the end in --out (Parquet, resumable), and prints, per "
                       "parametrization, the best learning rate at each depth and how far it drifts in octaves. "
                       f"Presets: {', '.join(PRESETS)} (default laptop). Needs the 'sweep' extra "
                       "('plot' too for --plot).")
    p.add_argument("text", nargs="?", metavar="TEXT_FILE",
                   help="the training text (paragraphs separated by blank lines), e.g. examples/data/corpus.txt")
    p.add_argument("--preset", default="laptop", metavar="NAME", choices=tuple(PRESETS),
                   help="the named grid the options below change (default laptop: at most 10 minutes on 2 cores)")
    for flag, field, kind, metavar, text in _GRID:
        p.add_argument(flag, dest=field, type=kind, default=None, metavar=metavar,
                       help=f"{text} (default: the preset's)")
    _args.add_band(p)
    p.add_argument("--out", metavar="DIR", help="result directory (Parquet parts, _transfer.json, _text.txt, "
                   "_summary.txt); an existing study there is resumed")
    p.add_argument("--rerun", nargs=2, metavar=("DIR", "ROW_ID"), default=None,
                   help="recompute one stored cell (its id is its row id) alone and compare it bit for bit "
                   "(exit 0 only when identical)")
    _args.add_engine(p)
    _args.add_plot(p, "the depth-transfer figure")


def _changes(args: argparse.Namespace) -> Dict[str, Any]:
    return {"band": args.band, **{field: getattr(args, field) for _, field, _, _, _ in _GRID}}


def run(args: argparse.Namespace) -> int:
    """Runs ``pydepth depth-transfer``; returns the exit code."""
    if missing_extra(plots=args.plot is not None):
        return 2
    from ..sweep.transfer import depth_transfer, rerun_transfer_cell, transfer_spec
    if args.rerun is not None:
        rerun = rerun_transfer_cell(args.rerun[0], args.rerun[1])
        print(rerun.to_table())
        return 0 if rerun.identical else 1
    if args.out is None or args.text is None:
        _args.error("depth-transfer needs TEXT_FILE and --out DIR (or --rerun DIR ROW_ID)")
        return 2
    spec = transfer_spec(args.text, args.preset, **_changes(args))
    result = depth_transfer(spec, args.text, out=args.out, scheduler=args.scheduler, workers=args.workers,
                            resume=args.resume, recompute_damaged=args.recompute_damaged, plots=False,
                            progress=not args.quiet)
    print("\n".join(result.summary))
    print()
    print(f"{result.cells_run} cells computed, {result.cells_resumed} already stored; {result.engine}; "
          f"results and _summary.txt in {result.out}")
    if args.plot is not None:
        from ..plots.transfer import save_transfer_figure
        for path in save_transfer_figure(result.points, spec, _args.in_dir(args.plot, "depth-transfer")):
            _args.note(args, f"wrote {path}")
    return 0
