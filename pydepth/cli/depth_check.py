# SPDX-License-Identifier: MIT
"""``pydepth depth-check``: the depth-check sweep preset with its figures and band summary."""
from __future__ import annotations

import argparse

from .sweep import add_grid_options, draw, grid_changes, missing_extra, spec_defaults


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds the ``depth-check`` subcommand and its options."""
    from ..sweep.presets import DEPTH_CHECK
    p = sub.add_parser("depth-check", help="where scaled and unscaled models leave the band, by depth",
                       description="Sweeps depths 1, 2, 4, ..., 64 (powers of two) x widths 16, 64 x seeds "
                       "0-4 x {scaled, unscaled} x steps {0, 1, 2, 5, 10} (every one can be changed below), "
                       "writes the results and _summary.txt into --out (and, with --plot DIR, the figures), "
                       "and prints where each policy first leaves the band. Needs the 'sweep' extra "
                       "('plot' too for --plot).")
    add_grid_options(p, spec_defaults(**DEPTH_CHECK))


def run(args: argparse.Namespace) -> int:
    """Runs ``pydepth depth-check``; returns the exit code."""
    if missing_extra(plots=args.plot is not None):
        return 2
    from ..sweep.presets import depth_check, depth_check_spec
    spec = depth_check_spec(**grid_changes(args))
    result = depth_check(spec, out=args.out, scheduler=args.scheduler, resume=args.resume,
                         workers=args.workers, plots=False, progress=not args.quiet,
                         recompute_damaged=args.recompute_damaged)
    print("\n".join(result.summary))
    print()
    print(f"{result.sweep.cells_run} cells computed, {result.sweep.cells_resumed} already stored; "
          f"{result.sweep.engine}; results and _summary.txt in {result.sweep.out}")
    if args.plot is not None:
        draw(args, spec.band)
    return 0
