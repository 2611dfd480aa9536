# SPDX-License-Identifier: MIT
"""``pydepth depth-check``: the depth-check sweep preset with its figures and band summary."""
from __future__ import annotations

import argparse

from .sweep import add_grid_options, grid_changes, missing_extra, spec_defaults


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds the ``depth-check`` subcommand and its options."""
    from ..sweep.presets import DEPTH_CHECK
    p = sub.add_parser("depth-check", help="where scaled and unscaled models leave the band, by depth",
                       description="Sweeps depths 1, 2, 4, ..., 64 (powers of two) x widths 16, 64 x seeds "
                       "0-4 x {scaled, unscaled} x steps {0, 1, 2, 5, 10} (every one can be changed below), "
                       "writes the results and summary.txt into --out and the figures (PNG and SVG) "
                       "into --out/figures, and prints where each policy first leaves the band. Needs "
                       "the 'sweep' and 'plot' extras.")
    add_grid_options(p, spec_defaults(**DEPTH_CHECK))
    p.add_argument("--no-plot", dest="plot", action="store_false", help="skip the figures")


def run(args: argparse.Namespace) -> int:
    """Runs ``pydepth depth-check``; returns the exit code."""
    if missing_extra(plots=args.plot):
        return 2
    from ..sweep.presets import depth_check, depth_check_spec
    spec = depth_check_spec(**grid_changes(args))
    result = depth_check(spec, out=args.out, scheduler=args.scheduler, resume=args.resume,
                         workers=args.workers, plots=args.plot, progress=not args.quiet,
                         recompute_damaged=args.recompute_damaged)
    print("\n".join(result.summary))
    print()
    print(f"{result.sweep.cells_run} cells computed, {result.sweep.cells_resumed} already stored; "
          f"{result.sweep.engine}; results and summary.txt in {result.sweep.out}")
    for path in result.figures:
        print(f"wrote {path}")
    return 0
