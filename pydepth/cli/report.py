# SPDX-License-Identifier: MIT
"""``pydepth report``: one self-contained HTML page from a run's output directory."""
from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds the ``report`` subcommand and its options."""
    p = sub.add_parser("report",
                       help="one self-contained HTML page of a depth-check, sweep, train, observe or demo output",
                       description="Turns the output directory of 'pydepth depth-check', 'sweep', 'train' or "
                       "'observe --format json --output DIR/NAME.json' or 'demo --format json --output DIR/NAME.json' "
                       "into one HTML file: figures inline as SVG, "
                       "the tables, the run's specification and versions, this machine's 'verify' status and how "
                       "to read it. The page loads nothing from the network. Needs the 'plot' extra "
                       "(pip install 'pydepth[plot]'; 'sweep' too for sweep and depth-check outputs).")
    p.add_argument("directory", metavar="DIR", help="the output directory of a pydepth command")
    p.add_argument("--output", metavar="FILE", default=None,
                   help="the HTML file to write (default: DIR-report.html beside DIR)")


def run(args: argparse.Namespace) -> int:
    """Runs ``pydepth report``; returns the exit code."""
    from ..plots.style import PlotDependencyError
    from ..report import write_report
    from ..sweep.errors import SweepDependencyError
    from ._args import error
    try:
        path = write_report(args.directory, args.output)
    except (PlotDependencyError, SweepDependencyError) as err:  # a missing extra is a usage error
        error(str(err))
        return 2
    sys.stdout.write(f"wrote {path}\n")  # the command's result, so on stdout
    return 0
