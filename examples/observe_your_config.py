# SPDX-License-Identifier: MIT
"""Observe the residual health of your own decoder configuration, next to its same-base
unscaled control.

    python examples/observe_your_config.py                          (12 blocks, width 64)
    python examples/observe_your_config.py --layers 24 --width 32 --plot figures --json report.json
"""
import argparse
import json
import pathlib

import numpy as np

import pydepth

parser = argparse.ArgumentParser(description="Residual health of one configuration.")
parser.add_argument("--layers", type=int, default=12, help="decoder blocks (default 12)")
parser.add_argument("--width", type=int, default=64, help="model width (default 64)")
parser.add_argument("--seed", type=int, default=0, help="SplitMix64 seed (default 0)")
parser.add_argument("--plot", metavar="DIR", help="write the ratio plot into DIR (health.png and .svg; "
                    "needs pydepth[plot])")
parser.add_argument("--json", metavar="FILE", help="write both reports as JSON to FILE")
args = parser.parse_args()

cfg = pydepth.DecoderConfig(vocabulary_size=512, model_width=args.width, heads=4, kv_heads=2,
                            feed_forward_width=2 * args.width, layers=args.layers, max_positions=64)
budget = pydepth.DepthInitializationBudget.for_config(cfg)  # exactly what this config needs
fresh = pydepth.FreshDepthInitialization.prepare(cfg, budget, pydepth.SplitMix64(args.seed))
control = fresh.base_model.clone()  # the same base draw, never depth-scaled
init = fresh.complete()

ids = (np.arange(65) * 7919 + 11) % cfg.vocabulary_size  # a fixed, deterministic sequence
tokens, targets = ids[:-1].reshape(1, -1), ids[1:].reshape(1, -1)
reports = {}
for name, model in (("depth-initialized", init.model), ("same-base unscaled control", control)):
    fwd = model.forward(tokens)
    loss = fwd.loss(targets)
    # accumulate_gradients=False: observing leaves every parameter's .grad as it was
    reports[name] = pydepth.observe_residual_health(model, fwd, loss, accumulate_gradients=False)
    print(reports[name].to_table(f"{name}: mean loss {loss.item():.6f} nats") + "\n")

print(f"{cfg.parameter_count:,} parameters, factor {init.record.factor:.6f}")
for name, report in reports.items():
    lo, hi = report.activation_ratio_range
    print(f"{name:>27}: activation ratios {lo:.3f}..{hi:.3f}, adjoint ratios "
          f"{report.adjoint_ratio_range[0]:.3f}..{report.adjoint_ratio_range[1]:.3f}, "
          f"{'within' if report.within_band else 'OUTSIDE'} the band")
if args.plot:
    from pydepth.plots.health import describe_config, plot_report
    written = plot_report(reports["depth-initialized"], pathlib.Path(args.plot) / "health",
                          control=reports["same-base unscaled control"], model=describe_config(cfg), seed=args.seed,
                          policy=init.record.policy_id, formats=("png", "svg"))
    print("wrote " + ", ".join(map(str, written)))
if args.json:
    with open(args.json, "w") as fh:
        json.dump({"config": cfg.to_dict(), "record": init.record.to_dict(),
                   "reports": {k: v.to_dict() for k, v in reports.items()}}, fh, indent=1)
    print(f"wrote {args.json}")
