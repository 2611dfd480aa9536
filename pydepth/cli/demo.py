# SPDX-License-Identifier: MIT
"""``pydepth demo``: the chapter's fixed example (four seeded fixtures)."""
from __future__ import annotations

import argparse

from . import _args


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds the ``demo`` subcommand and its options."""
    p = sub.add_parser("demo", help="run the chapter's fixed example (four seeded fixtures)",
                       description="Initialize the chapter's four fixed decoders (seed 4701) and "
                       "their same-base unscaled controls, check every stored transform bit for bit, "
                       "and report residual health; exits 1 when a self-check fails.")
    _args.add_output(p)
    _args.add_plot(p, "one ratio plot per fixture (control overlaid)")


def run(args: argparse.Namespace) -> int:
    """Runs ``pydepth demo``; returns the exit code."""
    from ..chapter.demo import DemoCheckError, demo_table, demo_trace
    if args.plot and _args.plot_missing():
        return 2
    try:
        doc = demo_trace()
    except DemoCheckError as err:
        _args.error(str(err))
        return 1
    _args.emit(args, doc, demo_table(doc) if args.format == "table" else "")
    if args.plot:
        from ..plots.health import plot_demo
        for path in plot_demo(doc, args.plot):
            _args.note(args, f"wrote {path}")
    return 0
