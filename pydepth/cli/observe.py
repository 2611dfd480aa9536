"""``pydepth observe``: depth-initialize a configured decoder and observe its residual health."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np

from . import _args


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Adds the ``observe`` subcommand and its options."""
    p = sub.add_parser("observe", help="depth-initialize a configured decoder and observe "
                       "its residual health")
    p.add_argument("--config", required=True, metavar="CONFIG.json",
                   help="DecoderConfig as JSON (DecoderConfig.to_dict(), or {'config': {...}})")
    p.add_argument("--seed", required=True, type=_args.seed, help="SplitMix64 seed")
    p.add_argument("--tokens", required=True, type=_args.ints, help="comma-separated input ids, row-major")
    p.add_argument("--targets", required=True, type=_args.ints, help="comma-separated target ids, row-major")
    p.add_argument("--valid", type=_args.bits, help="comma-separated 0/1 validity flags, row-major; "
                   "0 marks padding (one segment per row)")
    p.add_argument("--batch", type=_args.positive, default=1, help="number of rows (default 1)")
    p.add_argument("--format", choices=("json", "table"), default="json",
                   help="JSON document (default) or a table for people")
    p.add_argument("--plot", metavar="FILE", help="also write a ratio plot to FILE (.png/.svg)")


def run(args: argparse.Namespace) -> int:
    """Runs ``pydepth observe``; returns the exit code."""
    from .._core import SplitMix64
    from ..batch import Batch
    from ..depth_init import DepthInitializationBudget, FreshDepthInitialization
    from ..health import observe_residual_health
    if args.plot and _args.plot_missing():
        return 2
    cfg = _args.load_config(args.config)
    tokens = _args.rows("tokens", args.tokens, args.batch).astype(np.int64)
    targets = _args.rows("targets", args.targets, args.batch).astype(np.int64)
    if targets.shape != tokens.shape:
        raise ValueError(f"targets shape {targets.shape} differs from tokens shape {tokens.shape}")
    rng = SplitMix64(args.seed)
    fresh = FreshDepthInitialization.prepare(
        cfg, DepthInitializationBudget(cfg.parameter_count, cfg.max_positions), rng)
    init = fresh.complete()
    model = init.model
    if args.valid is not None:
        valid = _args.rows("validity flags", args.valid, args.batch).astype(bool)
        if valid.shape != tokens.shape:
            raise ValueError(f"validity shape {valid.shape} differs from tokens shape {tokens.shape}")
        row_ids = np.arange(tokens.shape[0])[:, None]
        source: Any = Batch(tokens, targets, np.where(valid, row_ids, -1))
        fwd = model.forward(source)
        loss = fwd.loss()
    else:
        fwd = model.forward(tokens)
        loss = fwd.loss(targets)
    report = observe_residual_health(model, fwd, loss)
    doc = {"config": cfg.to_dict(), "seed": args.seed, "token_shape": list(tokens.shape),
           "record": init.record.to_dict(), "loss": loss.item(), "report": report.to_dict()}
    if args.format == "json":
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
    else:
        sys.stdout.write(report.to_table(
            f"Depth-initialized decoder: {cfg.layers} blocks, width {cfg.model_width}, factor "
            f"{init.record.factor:.6f}, seed {args.seed}, mean loss {loss.item():.6f} nats") + "\n")
    if args.plot:
        from ..plots import plot_report
        sys.stderr.write(f"wrote {plot_report(doc['report'], args.plot)}\n")
    return 0
