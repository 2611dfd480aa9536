# SPDX-License-Identifier: MIT
"""Figures of a sweep in the style of a coordinate check (optional extra ``plot``).

- ``depth-check-w{width}.png|svg``: for each observed step (columns), the largest activation
  ratio and the largest adjoint ratio over the sites (rows) against depth on a log2 axis; one
  line per policy (median over seeds) with the seed range shaded, the band shaded, and every
  seed's out-of-band value marked.
- ``sites-d{depth}-w{width}.png|svg``: per-site heat map of the deepest model, policies by
  ratio, steps by site, coloured by log10 of the median ratio over seeds (the colour scale
  ends at the band's edges) with out-of-band cells marked.
"""
from __future__ import annotations

import math
import pathlib
from typing import Any, Dict, List, Sequence, Tuple, Union

import numpy as np

from ..plots.style import OUT_OF_BAND_COLOR, mark_out_of_band, pyplot, ratio_axis, save_figure, shade_band
from .summary import CellStep

__all__ = ["depth_check_figure", "site_heatmap_figure", "plot_depth_check", "plot_site_heatmap", "plot_sweep"]

PathLike = Union[str, "pathlib.Path"]

# the house's observed-model and control styles: pydepth's policy first, the unscaled control second
# (colour, marker, line, out-of-band marker, z-order): the scaled line stays on top where both coincide
_STYLE = {"scaled": ("tab:blue", "o", "-", "X", 4), "unscaled": ("tab:gray", "s", "--", "D", 3)}
_RATIOS = (("activation_max", "max over sites of $A_s/A_0$"),
           ("adjoint_max", "max over sites of $G_s/G_{2L}$"))


def _seed_spread(ax: Any, rows: Sequence[CellStep], policy: str, step: int, key: str,
                 depths: Sequence[int]) -> None:
    """One policy's median over seeds against depth, its seed range shaded."""
    color, marker, line, _, z = _STYLE[policy]
    med, lo, hi, xs = [], [], [], []
    for d in depths:
        vals = [getattr(cs, key) for cs in rows if cs.policy == policy and cs.step == step and cs.depth == d]
        vals = [v for v in vals if not math.isnan(v)]
        if not vals:
            continue
        xs.append(d)
        med.append(float(np.median(vals)))
        lo.append(min(vals))
        hi.append(max(vals))
    if xs:
        ax.fill_between(xs, lo, hi, color=color, alpha=0.2, linewidth=0)
        hollow = {"markerfacecolor": "none"} if policy == "unscaled" else {}
        ax.plot(xs, med, line, marker=marker, color=color, markersize=5 if hollow else 4, linewidth=1.4,
                zorder=z, **hollow)


def _depth_panel(ax: Any, rows: Sequence[CellStep], step: int, key: str, label: str, policies: Sequence[str],
                 band: Sequence[float], *, first_column: bool, top: bool) -> None:
    """One panel: one ratio at one step against depth, every policy, the band and the out-of-band seeds."""
    depths = sorted({cs.depth for cs in rows})
    shade_band(ax, band)
    for policy in policies:
        _seed_spread(ax, rows, policy, step, key, depths)
    ax.set_xscale("log", base=2)
    for policy in policies:  # every seed's out-of-band value, over the lines
        pts = [(cs.depth, getattr(cs, key)) for cs in rows if cs.policy == policy and cs.step == step
               and not math.isnan(getattr(cs, key))]
        if pts:
            mark_out_of_band(ax, [p[0] for p in pts], [p[1] for p in pts], band, label=None, annotate=False,
                             marker=_STYLE[policy][3], edgecolor=_STYLE[policy][0])
    row_values = [getattr(cs, key) for cs in rows if not math.isnan(getattr(cs, key))]
    ratio_axis(ax, label if first_column else "", row_values, band)  # one range per row: panels compare
    ax.set_xticks(depths)
    ax.set_xticklabels([str(d) for d in depths])
    if top:
        ax.set_title(f"step {step}")
    else:
        ax.set_xlabel("depth (blocks, log2)")
    if first_column:
        ax.set_ylabel(label)


def _depth_legend(fig: Any, policies: Sequence[str], band: Sequence[float], n_steps: int) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    low, high = band
    handles: List[Any] = [Line2D([], [], color=_STYLE[p][0], marker=_STYLE[p][1], linestyle=_STYLE[p][2],
                      markerfacecolor="none" if p == "unscaled" else _STYLE[p][0],
                      label=f"{p} (median; shaded: seed range)") for p in policies]
    handles += [Patch(color="tab:green", alpha=0.25, label=f"band [{low:g}, {high:g}]")]
    handles += [Line2D([], [], color=OUT_OF_BAND_COLOR, marker=_STYLE[p][3], markeredgecolor=_STYLE[p][0],
                       markeredgewidth=1.2, markersize=8, linestyle="", label=f"{p}: a seed outside the band")
                for p in policies]
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 3) if n_steps > 2 else 2,
               fontsize="small")


def depth_check_figure(steps: Sequence[CellStep], width: int, band: Sequence[float]) -> Any:
    """The depth-check figure of one width (a matplotlib Figure, not yet saved): a column per
    observed step, a row per ratio (:data:`_RATIOS`), one panel each."""
    plt = pyplot()
    rows = [cs for cs in steps if cs.width == width]
    step_list = sorted({cs.step for cs in rows})
    policies = [p for p in _STYLE if any(cs.policy == p for cs in rows)]
    fig, axes = plt.subplots(len(_RATIOS), len(step_list), figsize=(max(8.0, 3.1 * len(step_list) + 1.2), 6.6),
                             squeeze=False, sharex=True, sharey="row", layout="constrained")
    for j, step in enumerate(step_list):
        for i, (key, label) in enumerate(_RATIOS):
            _depth_panel(axes[i][j], rows, step, key, label, policies, band, first_column=j == 0, top=i == 0)
    _depth_legend(fig, policies, band, len(step_list))
    seeds = len({cs.seed for cs in rows})
    fig.suptitle(f"Depth check, width {width}: largest residual ratios against depth ({seeds} seeds)")
    return fig


def plot_depth_check(steps: Sequence[CellStep], out_dir: PathLike, width: int,
                     band: Sequence[float]) -> List[pathlib.Path]:
    """Writes ``depth-check-w{width}.png`` and ``.svg`` into ``out_dir``; returns the paths."""
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return save_figure(depth_check_figure(steps, width, band), out / f"depth-check-w{width}", ("png", "svg"))


def _site_table(rows: Sequence[Dict[str, Any]], policy: str, key: str, steps: Sequence[int],
                n_sites: int) -> np.ndarray:
    grid = np.full((len(steps), n_sites), np.nan)
    buckets: Dict[Tuple[int, int], List[float]] = {}
    for r in rows:
        if r["policy"] == policy and r["site"] >= 0:
            buckets.setdefault((r["step"], r["site"]), []).append(r[key])
    for (step, site), vals in buckets.items():
        grid[steps.index(step), site] = float(np.median(vals))
    return grid


def site_heatmap_figure(table: Any, depth: int, width: int, band: Sequence[float]) -> Any:
    """The per-site heat map of the ``depth``-block models of ``width`` (a Figure, not saved)."""
    plt = pyplot()
    import pyarrow.compute as pc
    sel = table.filter(pc.and_(pc.equal(table.column("depth"), depth), pc.equal(table.column("width"), width)))
    rows = sel.select(["policy", "seed", "step", "site", "activation_ratio", "adjoint_ratio"]).to_pylist()
    steps = sorted({r["step"] for r in rows})
    policies = [p for p in _STYLE if any(r["policy"] == p for r in rows)]
    seeds = len({r["seed"] for r in rows})
    n_sites = 2 * depth + 1
    low, high = band
    fig, axes = plt.subplots(len(policies), 2, figsize=(12, 1.2 + 1.5 * len(policies) * max(1, len(steps)) / 2.5),
                             squeeze=False, layout="constrained")
    image = None
    for i, policy in enumerate(policies):
        for j, key in enumerate(("activation_ratio", "adjoint_ratio")):
            ax = axes[i][j]
            grid = _site_table(rows, policy, key, steps, n_sites)
            with np.errstate(divide="ignore", invalid="ignore"):
                logs = np.log10(grid)
            image = ax.imshow(logs, aspect="auto", cmap="coolwarm", vmin=math.log10(max(low, 1e-300)),
                              vmax=math.log10(max(high, 1e-300)),
                              interpolation="nearest", origin="upper",
                              extent=(-0.5, n_sites - 0.5, len(steps) - 0.5, -0.5))
            ys, xs = np.nonzero((grid < low) | (grid > high))
            if ys.size:  # large enough to read on a cell, outlined so it shows on any colour
                ax.scatter(xs, ys, marker="X", color="black", edgecolors="white", s=90, linewidths=1.0)
            ax.set_yticks(range(len(steps)))
            ax.set_yticklabels([str(s) for s in steps])
            ax.set_xticks(sorted({*range(0, n_sites, 2 * max(1, math.ceil(depth / 8))), n_sites - 1}))
            ax.set_ylabel("step")
            name = "$A_s/A_0$" if key == "activation_ratio" else "$G_s/G_{2L}$"
            ax.set_title(f"{policy}: {name}")
            if i == len(policies) - 1:
                ax.set_xlabel("residual site (0 = input; odd = after attention; even = after feed-forward)")
    if image is not None:
        bar = fig.colorbar(image, ax=axes, extend="both", shrink=0.9)
        bar.set_label("log10 of the median ratio")
    fig.suptitle(f"Residual ratios per site, depth {depth}, width {width}: median over {seeds} seeds; "
                 f"x = outside the band [{low}, {high:g}]")
    return fig


def plot_site_heatmap(table: Any, out_dir: PathLike, depth: int, width: int,
                      band: Sequence[float]) -> List[pathlib.Path]:
    """Writes ``sites-d{depth}-w{width}.png`` and ``.svg`` into ``out_dir``; returns the paths."""
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return save_figure(site_heatmap_figure(table, depth, width, band), out / f"sites-d{depth}-w{width}",
                       ("png", "svg"))


def plot_sweep(table: Any, steps: Sequence[CellStep], out_dir: PathLike,
               band: Sequence[float]) -> List[pathlib.Path]:
    """Every figure of a sweep: the depth check per width and the heat map of the deepest
    model per width, against the sweep's ``band``. Returns the written paths."""
    paths: List[pathlib.Path] = []
    widths = sorted({cs.width for cs in steps})
    for w in widths:
        paths += plot_depth_check(steps, out_dir, w, band)
        deepest = max(cs.depth for cs in steps if cs.width == w)
        paths += plot_site_heatmap(table, out_dir, deepest, w, band)
    return paths
