# SPDX-License-Identifier: MIT
"""Compare the depth policy with its same-base unscaled control across depths: the largest
activation and adjoint ratios at each depth, from one base draw per depth.

    python examples/compare_policies.py                        (depths 1..64, a table)
    python examples/compare_policies.py --plot figures --json compare.json
"""
import argparse
import json
import pathlib

import numpy as np

import pydepth

parser = argparse.ArgumentParser(description="Depth policy vs unscaled control across depths.")
parser.add_argument("--depths", default="1,2,4,8,16,32,64", help="comma-separated depths (default 1,2,4,8,16,32,64)")
parser.add_argument("--seed", type=int, default=4701, help="SplitMix64 seed (default 4701)")
parser.add_argument("--plot", metavar="DIR", help="write max ratio against depth into DIR (compare.png and .svg; "
                    "needs pydepth[plot])")
parser.add_argument("--json", metavar="FILE", help="write the rows as JSON to FILE")
args = parser.parse_args()

ids = (np.arange(17) * 7919 + 11) % 266
tokens, targets = ids[:-1].reshape(1, -1), ids[1:].reshape(1, -1)
rows = []
for depth in (int(d) for d in args.depths.split(",")):
    cfg = pydepth.DecoderConfig(266, 16, 2, 20, depth, 16)
    fresh = pydepth.FreshDepthInitialization.prepare(
        cfg, pydepth.DepthInitializationBudget.for_config(cfg), pydepth.SplitMix64(args.seed))
    control = fresh.base_model.clone()
    init = fresh.complete()
    row = {"depth": depth, "factor": init.record.factor}
    for policy, model in (("scaled", init.model), ("unscaled", control)):
        fwd = model.forward(tokens)
        report = pydepth.observe_residual_health(model, fwd, fwd.loss(targets))
        row[policy] = {"activation_ratio_max": report.activation_ratio_range[1],
                       "adjoint_ratio_max": report.adjoint_ratio_range[1], "within_band": report.within_band}
    rows.append(row)

header = ("depth", "", "factor", "max A_s/A_0 scaled", "unscaled", "max G_s/G_2L scaled", "unscaled",
          "in band: scaled", "unscaled")
body = [(str(r["depth"]), "", f"{r['factor']:.6f}", f"{r['scaled']['activation_ratio_max']:.3f}",
         f"{r['unscaled']['activation_ratio_max']:.3f}", f"{r['scaled']['adjoint_ratio_max']:.3f}",
         f"{r['unscaled']['adjoint_ratio_max']:.3f}", "yes" if r["scaled"]["within_band"] else "NO",
         "yes" if r["unscaled"]["within_band"] else "NO") for r in rows]
print(f"bridge-width decoder (d16 h2 ff20 V266), seed {args.seed}, 16 tokens, band [0.01, 100]")
print("\n".join(pydepth.health.format_table(header, body)))

if args.plot:
    from pydepth.plots.style import (SERIES_STYLES, figure_title, mark_out_of_band, new_figure, ratio_axis,
                                    save_figure, shade_band)
    fig, axes = new_figure(2)
    depths = [r["depth"] for r in rows]
    for ax, key, label in zip(axes, ("activation_ratio_max", "adjoint_ratio_max"),
                              ("max activation ratio  A_s / A_0", "max adjoint ratio  G_s / G_last")):
        shade_band(ax, pydepth.HEALTH_BAND)
        ax.set_xscale("log", base=2)
        ax.set_xlim(depths[0] / 1.3, depths[-1] * 1.3)
        marked = 0
        for policy, style in zip(("scaled", "unscaled"), SERIES_STYLES):
            ys = [r[policy][key] for r in rows]
            ax.plot(depths, ys, label=policy, **style)
            marked += mark_out_of_band(ax, depths, ys, pydepth.HEALTH_BAND,
                                       label=None if marked else "outside the band")
        ax.set_xticks(depths, [str(d) for d in depths])
        ax.set_xlabel("depth (blocks)")
        ratio_axis(ax, label, [r[p][key] for r in rows for p in ("scaled", "unscaled")], pydepth.HEALTH_BAND)
        ax.legend(fontsize="small")
    fig.suptitle(figure_title(model="decoder d16 h2 ff20 V266", seed=args.seed,
                              policy="residual-output-init-depth-v1 vs unscaled"))
    written = save_figure(fig, pathlib.Path(args.plot) / "compare", formats=("png", "svg"))
    print("wrote " + ", ".join(map(str, written)))
if args.json:
    with open(args.json, "w") as fh:
        json.dump(rows, fh, indent=1)
    print(f"wrote {args.json}")
