# SPDX-License-Identifier: MIT
"""``pydepth sweep``: residual health over a grid of depths, widths, seeds, policies and steps,
on Dask, into a Parquet result directory; ``--rerun DIR ROW_ID`` recomputes one stored row."""
from __future__ import annotations

import argparse
import sys
from typing import Any, Dict, Tuple

from . import _args

# Grid options: (flag, spec field, argparse type, metavar, help). Shared with ``depth-check``.
_GRID = (
    ("--depths", "depths", str, "LIST", "numbers of blocks, e.g. 1,2,4 or 1-8"),
    ("--widths", "widths", str, "LIST", "model widths, e.g. 16,64"),
    ("--seeds", "seeds", str, "LIST", "initialization seeds, e.g. 0-4"),
    ("--policies", "policies", str, "LIST", "scaled (pydepth's depth policy), unscaled (same-base control) or both"),
    ("--observe-at", "steps", str, "STEPS", "observe after these numbers of optimizer updates, e.g. 0,1,5,10 "
     "(AdamW on a fixed batch; 0 is the initialization)"),
    ("--sequence-length", "sequence_length", _args.positive, "N",
     "positions per row of the fixed token batch (also the models' max positions)"),
    ("--batch-rows", "batch_rows", _args.positive, "N", "rows of the fixed batch"),
    ("--vocabulary-size", "vocabulary_size", _args.positive, "N", "vocabulary size"),
    ("--head-width", "head_width", _args.positive, "N", "features per attention head (heads = width // head width)"),
    ("--ff-ratio", "ff_ratio", float, "X", "feed-forward width as a multiple of the model width"),
    ("--data-seed", "data_seed", _args.seed, "S", "seed of the fixed token batch"),
    ("--lr", "lr", float, "LR", "AdamW learning rate"),
    ("--weight-decay", "weight_decay", float, "WD", "AdamW decoupled weight decay"),
    ("--backend", "backend", str, "NAME", "pydepth (the C core) or torch (the same draw in the torch twin, "
     "observed by pydepth.torch's hooks; needs the 'torch' extra)"),
)


def spec_defaults(**preset: Any) -> Dict[str, Any]:
    """Every grid field's default: ``SweepSpec``'s own, then the ``preset``'s (depth-check's grid)."""
    import dataclasses

    from ..sweep.spec import SweepSpec
    found = {f.name: f.default for f in dataclasses.fields(SweepSpec)
             if f.init and f.default is not dataclasses.MISSING}
    return {**found, **preset}


def add_grid_options(p: argparse.ArgumentParser, defaults: Dict[str, Any], *, out_required: bool = True,
                     required: Tuple[str, ...] = ()) -> None:
    """Adds the grid and engine options shared by ``sweep`` and ``depth-check``; the help of each
    shows its default (or that it is required)."""
    for flag, field, kind, metavar, text in _GRID:
        if field in required:
            text = f"{text} (required unless SPEC.json gives it)"
        elif field in defaults:
            shown = defaults[field]
            shown = ",".join(map(str, shown)) if isinstance(shown, (tuple, list)) else shown
            text = f"{text} (default {shown})"
        p.add_argument(flag, dest=field, type=kind, default=None, metavar=metavar, help=text)
    _args.add_band(p)
    p.add_argument("--out", required=out_required, metavar="DIR",
                   help="result directory (Parquet parts, _sweep.json, _manifest.json; pandas, pyarrow, polars "
                   "and DuckDB read it as it is); an existing sweep there is resumed")
    _args.add_engine(p)
    p.add_argument("--quiet", action="store_true", help="no progress or 'wrote' lines on stderr (for logs)")
    _args.add_plot(p, "the depth-check figures")


def grid_changes(args: argparse.Namespace) -> Dict[str, Any]:
    """The spec fields given on the command line (``None`` for the others)."""
    return {"band": args.band, **{field: getattr(args, field) for _, field, _, _, _ in _GRID}}


def draw(args: argparse.Namespace, band: Any) -> None:
    """``--plot DIR``: the depth-check figures of the stored results, one 'wrote' line each."""
    from ..sweep.plots import plot_sweep
    from ..sweep.store import read_table
    from ..sweep.summary import cell_steps
    _args.note(args, f"drawing the figures into {args.plot}")
    table = read_table(args.out)
    for path in plot_sweep(table, cell_steps(table), args.plot, band):
        _args.note(args, f"wrote {path}")


def missing_extra(plots: bool) -> bool:
    """True (after saying which extra to install) when the sweep or plot extra is missing."""
    try:
        import distributed  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError as err:
        _args.error(f"this command needs the optional 'sweep' extra (Dask with distributed, pyarrow); "
                    f"{err.name or 'a module'} is missing: pip install 'pydepth[sweep]'")
        return True
    return plots and _args.plot_missing()


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds the ``sweep`` subcommand and its options."""
    p = sub.add_parser("sweep", help="residual health over depths, widths, seeds, policies and steps (Dask)",
                       description="Runs one cell per (depth, width, seed, policy), observes residual "
                       "health at the requested optimizer steps and writes one Parquet row per cell, "
                       "step and site into --out. Needs the 'sweep' extra.")
    p.add_argument("spec", nargs="?", metavar="SPEC.json",
                   help="a sweep spec (SweepSpec.to_dict() JSON); options below override its fields")
    p.add_argument("--rerun", nargs=2, metavar=("DIR", "ROW_ID"), default=None,
                   help="recompute one stored row alone and compare it bit for bit (exit 0 only when identical)")
    add_grid_options(p, spec_defaults(), out_required=False,  # --rerun needs no --out: checked in run()
                     required=("depths", "widths", "seeds"))


def run(args: argparse.Namespace) -> int:
    """Runs ``pydepth sweep``; returns the exit code."""
    if missing_extra(plots=args.plot is not None):
        return 2
    from ..sweep import SweepSpec, rerun_row
    from ..sweep import run as run_sweep
    if args.rerun is not None:
        rerun = rerun_row(args.rerun[0], args.rerun[1])
        print(rerun.to_table())
        return 0 if rerun.identical else 1
    if args.out is None:
        _args.error("sweep needs --out DIR (or --rerun DIR ROW_ID)")
        return 2
    changes = grid_changes(args)
    if args.spec is not None:
        spec = SweepSpec.from_json_file(args.spec).replace(**changes)
    else:
        missing = [f"--{k}" for k in ("depths", "widths", "seeds") if changes[k] is None]
        if missing:
            _args.error(f"without SPEC.json, sweep needs {', '.join(missing)}")
            return 2
        spec = SweepSpec.from_dict({k: v for k, v in changes.items() if v is not None})
    result = run_sweep(spec, out=args.out, scheduler=args.scheduler, resume=args.resume,
                       workers=args.workers, progress=not args.quiet, recompute_damaged=args.recompute_damaged)
    print(f"{result.cells_run} cells computed, {result.cells_resumed} already stored, "
          f"{result.cells_total} in the grid; {result.engine}; "
          f"{result.cells_per_second:.1f} cells/s; results in {result.out}")
    if args.plot is not None:
        draw(args, spec.band)
    sys.stdout.flush()
    return 0
