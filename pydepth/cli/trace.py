# SPDX-License-Identifier: MIT
"""``pydepth trace``: export one fixture in the pydepth-reference-trace-v1 schema."""
from __future__ import annotations

import argparse
import json
import sys

from . import _args


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds the ``trace`` subcommand and its options."""
    p = sub.add_parser("trace", help="export one fixture in the pydepth-reference-trace-v1 schema",
                       description="Export every value of one initialized decoder and its control "
                       "(parameters, forward values, adjoints, gradients) as hexadecimal float64 bits.")
    p.add_argument("--config", required=True, metavar="CONFIG.json",
                   help="DecoderConfig as JSON (DecoderConfig.to_dict(), or {'config': {...}})")
    _args.add_seed(p)
    p.add_argument("--tokens", required=True, type=_args.ints, metavar="IDS",
                   help="comma-separated input ids, row-major")
    p.add_argument("--targets", type=_args.ints, metavar="IDS",
                   help="comma-separated target ids, row-major (default: each row's tokens shifted by one, "
                   "the inputs being all but the last)")
    p.add_argument("--batch-rows", type=_args.positive, default=1, metavar="N",
                   help="number of rows the ids are split into (default 1)")
    p.add_argument("--output", metavar="FILE", help="write the JSON document to FILE instead of stdout")
    p.add_argument("--id", default="custom", metavar="ID", help="fixture id in the document (default 'custom')")


def run(args: argparse.Namespace) -> int:
    """Runs ``pydepth trace``; returns the exit code."""
    from ..chapter.trace import ENCODING, FORMAT, fixture_trace
    cfg = _args.load_config(args.config)
    tokens, targets = _args.inputs_and_targets(args.tokens, args.targets, args.batch_rows)
    doc = {"format": FORMAT, "encoding": ENCODING,
           "fixtures": [fixture_trace(cfg, args.seed, tokens.ravel().tolist(), targets.ravel().tolist(),
                                      batch=args.batch_rows, fixture_id=args.id)]}
    text = json.dumps(doc)
    if args.output:
        from .._files.atomic import write_atomically
        from ..errors import OutputFileError
        write_atomically(args.output, lambda fh: fh.write((text + "\n").encode("utf-8")), "trace", OutputFileError)
        _args.note(args, f"wrote {args.output}")
    else:
        sys.stdout.write(text + "\n")
    return 0
