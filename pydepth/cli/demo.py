"""``pydepth demo``: the chapter's fixed example (four seeded fixtures)."""
from __future__ import annotations

import argparse
import json
import sys

from . import _args


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Adds the ``demo`` subcommand and its options."""
    p = sub.add_parser("demo", help="run the chapter's fixed example (four seeded fixtures)")
    p.add_argument("--format", choices=("json", "table"), default="json",
                   help="JSON document (default) or tables for people")
    p.add_argument("--plot", metavar="DIR", help="also write ratio plots (PNG and SVG) into DIR "
                   "(needs pip install 'pydepth[plot]')")


def run(args: argparse.Namespace) -> int:
    """Runs ``pydepth demo``; returns the exit code."""
    from ..demo import DemoCheckError, demo_table, demo_trace
    if args.plot and _args.plot_missing():
        return 2
    try:
        doc = demo_trace()
    except DemoCheckError as err:
        _args.error(str(err))
        return 1
    if args.format == "json":
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
    else:
        sys.stdout.write(demo_table(doc) + "\n")
    if args.plot:
        from ..plots import plot_demo
        for path in plot_demo(doc, args.plot):
            sys.stderr.write(f"wrote {path}\n")
    return 0
