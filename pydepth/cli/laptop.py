# SPDX-License-Identifier: MIT
"""``pydepth laptop``: the chapter's 32.5M-parameter laptop plan, built and run once."""
from __future__ import annotations

import argparse

from . import _args

_OVERRIDES = ("vocabulary_size", "model_width", "layers", "heads", "kv_heads",
              "feed_forward_width", "max_positions")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds the ``laptop`` subcommand and its options."""
    p = sub.add_parser("laptop", help="run the laptop-scale decoder (32.5M parameters, about 2 GB of memory)",
                       description="Build the chapter's laptop plan through FreshDepthInitialization "
                       "and run one forward, backward and residual-health observation, with progress "
                       "on stderr. The size options shrink the plan for quick runs.")
    p.add_argument("--sequence-length", type=_args.positive, default=None, metavar="N",
                   help="tokens per pass (default 512, or max positions if smaller)")
    _args.add_seed(p)
    p.add_argument("--control", action="store_true",
                   help="also observe the same-base unscaled control (the base draw before depth scaling)")
    _args.add_band(p)
    _args.add_output(p)
    _args.add_plot(p)
    from ..chapter.laptop import PLAN
    for name in _OVERRIDES:
        p.add_argument("--" + name.replace("_", "-"), type=_args.positive, default=None, metavar="N",
                       help=f"{name.replace('_', ' ')} (plan: {PLAN[name]}; smaller for quick runs)")


def _table(result: dict, tokens: int) -> str:
    first = result["runs"][0]
    lines = [f"{first['label']}: {first['report'].verdict()}",
             f"laptop plan: {result['parameter_count']:,} parameters, {tokens} tokens, "
             f"{result['threads']} threads, seed {result['seed']}",
             f"build (prepare + complete): {result['build_seconds']:.2f} s"]
    for r in result["runs"]:
        lines += ["", r["report"].to_table(title=f"{r['label']}: loss {r['loss']:.6f} nats"),
                  f"forward {r['forward_seconds']:.2f} s, backward + observation "
                  f"{r['backward_and_observe_seconds']:.2f} s"]
    lines += ["", f"peak resident memory: {result['peak_rss_mib']:.0f} MiB"]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Runs ``pydepth laptop``; returns the exit code."""
    from ..chapter.laptop import plan_config, run_plan
    if args.plot and _args.plot_missing():
        return 2
    cfg = plan_config({k: getattr(args, k) for k in _OVERRIDES})
    tokens = args.sequence_length or min(512, cfg.max_positions)
    result = run_plan(cfg, tokens, seed=args.seed, control=args.control, band=args.band)
    doc = dict(result)
    doc["runs"] = [dict(r, report=r["report"].to_dict()) for r in result["runs"]]
    _args.emit(args, doc, _table(result, tokens))
    if args.plot:
        from ..plots.health import describe_config, plot_report
        from ..plots.style import policy_label
        runs = result["runs"]
        record = result["record"]
        for path in _args.plot_paths(_args.in_dir(args.plot, "laptop"), lambda target, formats: plot_report(
                runs[0]["report"], target, control=runs[1]["report"] if len(runs) > 1 else None,
                model=f"laptop plan, {describe_config(cfg)}", seed=args.seed, formats=formats,
                policy=policy_label(record["factor"]))):
            _args.note(args, f"wrote {path}")
    return 0
