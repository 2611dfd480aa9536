"""``pydepth laptop``: the chapter's 32.5M-parameter laptop plan, built and run once."""
from __future__ import annotations

import argparse
import json

from . import _args

_OVERRIDES = ("vocabulary_size", "model_width", "layers", "heads", "kv_heads",
              "feed_forward_width", "max_positions")


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Adds the ``laptop`` subcommand and its options."""
    p = sub.add_parser("laptop", help="run the laptop-scale decoder")
    p.add_argument("--tokens", type=_args.positive, default=None,
                   help="tokens per pass (default 512, or max positions if smaller)")
    p.add_argument("--format", choices=("json", "table"), default="table",
                   help="tables for people (default) or a JSON document")
    p.add_argument("--control", action="store_true", help="also run the same-base unscaled control")
    p.add_argument("--seed", type=_args.seed, default=4701, help="SplitMix64 seed (default 4701)")
    for name in _OVERRIDES:
        p.add_argument("--" + name.replace("_", "-"), type=_args.positive, default=None,
                       help=f"override the plan's {name} (reduced test sizes)")


def run(args: argparse.Namespace) -> int:
    """Runs ``pydepth laptop``; returns the exit code."""
    from ..laptop import plan_config, run_plan
    cfg = plan_config({k: getattr(args, k) for k in _OVERRIDES})
    tokens = args.tokens or min(512, cfg.max_positions)
    result = run_plan(cfg, tokens, seed=args.seed, control=args.control)
    if args.format == "json":
        doc = dict(result)
        doc["runs"] = [dict(r, report=r["report"].to_dict()) for r in result["runs"]]
        print(json.dumps(doc, indent=2))
        return 0
    print(f"laptop plan: {result['parameter_count']:,} parameters, {tokens} tokens, "
          f"{result['threads']} threads, seed {result['seed']}")
    print(f"build (prepare + complete): {result['build_seconds']:.2f} s")
    for r in result["runs"]:
        print()
        print(r["report"].to_table(title=f"{r['label']}: loss {r['loss']:.6f} nats"))
        print(f"forward {r['forward_seconds']:.2f} s, backward + observation "
              f"{r['backward_and_observe_seconds']:.2f} s")
    print(f"\npeak resident memory: {result['peak_rss_mib']:.0f} MiB")
    return 0
