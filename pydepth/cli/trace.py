"""``pydepth trace``: export one fixture in the pydepth-reference-trace-v1 schema."""
from __future__ import annotations

import argparse
import json
import sys

from . import _args


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Adds the ``trace`` subcommand and its options."""
    p = sub.add_parser("trace", help="export one fixture in the pydepth-reference-trace-v1 schema")
    p.add_argument("--config", required=True, metavar="CONFIG.json",
                   help="DecoderConfig as JSON (DecoderConfig.to_dict())")
    p.add_argument("--seed", required=True, type=_args.seed, help="SplitMix64 seed")
    p.add_argument("--tokens", required=True, type=_args.ints, help="comma-separated input ids, row-major")
    p.add_argument("--targets", required=True, type=_args.ints, help="comma-separated target ids, row-major")
    p.add_argument("--batch", type=_args.positive, default=1, help="number of rows (default 1)")
    p.add_argument("--output", metavar="FILE", help="write the JSON document here instead of stdout")
    p.add_argument("--id", default="custom", help="fixture id in the document (default 'custom')")


def run(args: argparse.Namespace) -> int:
    """Runs ``pydepth trace``; returns the exit code."""
    from ..config import DecoderConfig
    from ..trace import ENCODING, FORMAT, fixture_trace
    with open(args.config) as fh:
        cfg = DecoderConfig.from_dict(json.load(fh))
    doc = {"format": FORMAT, "encoding": ENCODING,
           "fixtures": [fixture_trace(cfg, args.seed, args.tokens, args.targets,
                                      batch=args.batch, fixture_id=args.id)]}
    text = json.dumps(doc)
    if args.output:
        with open(args.output, "w") as fh:
            fh.write(text + "\n")
    else:
        sys.stdout.write(text + "\n")
    return 0
