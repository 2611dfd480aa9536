# SPDX-License-Identifier: MIT
"""Draws the figures of docs/depth-policy.md (needs the 'plot' extra; about a minute on 2 cores),
or with --table prints its table (a few minutes).
Usage: python docs/figures/depth_policy_figures.py [OUT_DIR | --table]   (default: this file's folder)"""
import pathlib
import sys

import numpy as np

import pydepth
from pydepth.plots.style import pyplot, save_figure, shade_band

DEPTHS = (1, 2, 4, 8, 16, 32, 64)
WIDTHS = (16, 64, 256)
SEEDS = range(5)
TOKENS = 16


def observe(layers, width, seed, ids):
    """(depth-scaled report, control report, the two models' site adjoints and activations) of one draw."""
    cfg = pydepth.DecoderConfig(266, width, max(1, width // 8), width * 5 // 4, layers, max(16, ids.shape[1]))
    fresh = pydepth.FreshDepthInitialization.prepare(cfg, pydepth.DepthInitializationBudget.for_config(cfg),
                                                     pydepth.SplitMix64(seed))
    control = fresh.base_model.clone()
    out = []
    for model in (fresh.complete().model, control):
        fwd = model.forward(ids[:, :-1])
        sites = list(fwd.residual_sites)
        adjoints = fwd.loss(ids[:, 1:]).backward_with_selected_adjoints(sites)
        report = pydepth.health.health_report_from_sites([np.array(s.value) for s in sites],
                                                         [np.array(g) for g in adjoints], None)
        out.append((report, [np.array(s.value) for s in sites], [np.array(g) for g in adjoints]))
    return out


def depth_figure():
    """Median over seeds of the largest A_s/A_0 and G_s/G_2L against depth, per width."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    colors = {16: "tab:blue", 64: "tab:orange", 256: "tab:green"}
    for width in WIDTHS:
        depths = [d for d in DEPTHS if width < 256 or d <= 32]
        medians = {("scaled", 0): [], ("scaled", 1): [], ("unscaled", 0): [], ("unscaled", 1): []}
        for depth in depths:
            per_seed = []
            for seed in SEEDS:
                ids = np.random.default_rng(seed).integers(0, 266, size=(1, TOKENS + 1))
                reports = [r for r, _, _ in observe(depth, width, seed, ids)]
                per_seed.append([r.activation_ratio_range[1] for r in reports]
                                + [r.adjoint_ratio_range[1] for r in reports])
            values = np.median(np.array(per_seed), axis=0)
            medians[("scaled", 0)].append(values[0])
            medians[("unscaled", 0)].append(values[1])
            medians[("scaled", 1)].append(values[2])
            medians[("unscaled", 1)].append(values[3])
        for k, ax in enumerate(axes):
            ax.plot(depths, medians[("scaled", k)], "-o", color=colors[width], label=f"width {width}, depth-scaled")
            ax.plot(depths, medians[("unscaled", k)], "--s", color=colors[width], markerfacecolor="none",
                    label=f"width {width}, unscaled control")
    for ax, name in zip(axes, ("largest $A_s/A_0$", "largest $G_s/G_{2L}$")):
        shade_band(ax, pydepth.HEALTH_BAND)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(DEPTHS)
        ax.set_xticklabels([str(d) for d in DEPTHS])
        ax.set_xlabel("blocks L")
        ax.set_ylabel(f"{name}, median over {len(SEEDS)} seeds")
        ax.grid(True, alpha=0.3)
    axes[1].legend(fontsize="small", ncol=1)
    fig.suptitle(f"Largest residual ratios at initialization, one row of {TOKENS} random tokens")
    return fig


def outlier_figure():
    """The README's former example: seed 4701, tokens 0 99 100 101, 32 blocks of width 16."""
    plt = pyplot()
    ids = np.array([[0, 99, 100, 101, 1]])
    (scaled, s_acts, s_adj), (control, c_acts, c_adj) = observe(32, 16, 4701, ids)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    sites = np.arange(len(s_acts))
    for acts, adj, style in ((s_acts, s_adj, "-"), (c_acts, c_adj, "--")):
        for pos, color in zip(range(4), ("tab:red", "tab:blue", "tab:green", "tab:purple")):
            axes[0].plot(sites, [np.sqrt(np.mean(a[0, pos] ** 2)) for a in acts], style, color=color,
                         label=(f"position {pos}" + (" (dashed: unscaled control)" if pos == 0 else ""))
                         if style == "-" else None)
            axes[1].plot(sites, [np.sqrt(np.mean(g[0, pos] ** 2)) for g in adj], style, color=color)
    axes[0].set_ylabel("residual RMS of one position")
    axes[1].set_ylabel("mean-loss adjoint RMS of one position")
    for ax in axes:
        ax.set_yscale("log")
        ax.set_xlabel("residual site (0 = input)")
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize="small")
    fig.suptitle("Seed 4701, tokens 0 99 100 101, 32 blocks of width 16: position 0's adjoint under the "
                 f"depth policy (max G ratio {scaled.adjoint_ratio_range[1]:.0f} vs "
                 f"{control.adjoint_ratio_range[1]:.0f})")
    return fig


def table():
    """Median over seeds of the largest ratios, one row of random tokens per seed, as Markdown."""
    print("| blocks | width | tokens | depth-scaled max A | control max A | depth-scaled max G | control max G |")
    print("|---|---|---|---|---|---|---|")
    for layers, width, tokens in [(8, 16, 4), (8, 16, 16), (8, 16, 64), (8, 64, 16), (8, 256, 16),
                                  (32, 16, 4), (32, 16, 16), (32, 16, 64), (32, 64, 16), (32, 256, 16),
                                  (64, 16, 4), (64, 16, 16), (64, 16, 64), (64, 64, 16), (64, 64, 64)]:
        values = []
        for seed in SEEDS:
            ids = np.random.default_rng(seed).integers(0, 266, size=(1, tokens + 1))
            reports = [r for r, _, _ in observe(layers, width, seed, ids)]
            values.append([reports[0].activation_ratio_range[1], reports[1].activation_ratio_range[1],
                           reports[0].adjoint_ratio_range[1], reports[1].adjoint_ratio_range[1]])
        cells = " | ".join(f"{v:.1f}" for v in np.median(np.array(values), axis=0))
        print(f"| {layers} | {width} | {tokens} | {cells} |")


if __name__ == "__main__":
    if sys.argv[1:] == ["--table"]:
        table()
        sys.exit(0)
    out = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(__file__).parent
    for path in save_figure(depth_figure(), out / "depth-policy-ratios.png"):
        print(f"wrote {path}")
    for path in save_figure(outlier_figure(), out / "depth-policy-position0.png"):
        print(f"wrote {path}")
