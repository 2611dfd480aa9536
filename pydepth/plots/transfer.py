# SPDX-License-Identifier: MIT
"""The depth-transfer figure, the one the depth-parametrization papers print: held-out loss
against learning rate, one curve per depth, one panel per parametrization; beside each, the
residual-health ratios at each depth's best learning rate (extra ``plot``)."""
from __future__ import annotations

import math
import pathlib
from typing import Any, Dict, List, Sequence, Tuple, Union

from ..parametrizations import PARAMETRIZATIONS
from .style import mark_out_of_band, new_figure, pyplot, ratio_axis, save_figure, shade_band, wrap_title

__all__ = ["transfer_figure", "save_transfer_figure"]

PathLike = Union[str, "pathlib.Path"]
_PANELS_PER_ROW = 2  # pairs (loss, health) per row of the figure


def _title(name: str) -> str:
    row = PARAMETRIZATIONS.get(name)
    return row.title if row is not None else name


def _loss_panel(ax: Any, name: str, points: Sequence[Any], found: Dict[Tuple[str, int], Any], colors: Any,
                depths: Sequence[int]) -> List[float]:
    shown: List[float] = []
    for k, depth in enumerate(depths):
        pts = sorted((p for p in points if p.parametrization == name and p.depth == depth), key=lambda p: p.lr)
        xs = [p.lr for p in pts if math.isfinite(p.loss)]
        ys = [p.loss for p in pts if math.isfinite(p.loss)]
        color = colors(k / max(1, len(depths) - 1))
        ax.plot(xs, ys, "-o", color=color, markersize=3.5, linewidth=1.3, label=f"L = {depth}", zorder=3)
        shown += ys
        opt = found.get((name, depth))
        if opt is not None and math.isfinite(opt.log2_lr):  # the refined optimum, a tick on its curve
            ax.axvline(opt.lr, color=color, linewidth=0.8, linestyle=":", zorder=2)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("base learning rate")
    ax.set_ylabel("held-out loss (nats/byte)")
    ax.set_title(wrap_title(_title(name), 46), fontsize="medium")
    ax.grid(True, which="major", alpha=0.35)
    return shown


def _health_panel(ax: Any, name: str, found: Dict[Tuple[str, int], Any], depths: Sequence[int],
                  band: Sequence[float]) -> None:
    shade_band(ax, band)
    opts = [found[(name, d)] for d in depths if (name, d) in found]
    xs = [o.depth for o in opts]
    values: List[float] = []
    for key, label, marker in (("activation_ratio_max", "max A_s/A_0", "o"),
                               ("adjoint_ratio_max", "max G_s/G_2L", "s")):
        ys = [getattr(o, key) for o in opts]
        ax.plot(xs, ys, "-", marker=marker, markersize=4, linewidth=1.2, label=label, zorder=3)
        mark_out_of_band(ax, xs, ys, band, label=None, annotate=False)
        values += ys
    ratio_axis(ax, "ratio at the best lr (end)", values, band)
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(depths))
    ax.set_xticklabels([str(d) for d in depths])
    ax.set_xlabel("depth L")
    ax.set_title("residual health", fontsize="medium")
    ax.legend(fontsize="x-small", loc="best", framealpha=0.9)


def transfer_figure(points: Sequence[Any], spec: Any) -> Any:
    """The figure of a study's curves (:func:`pydepth.sweep.transfer_summary.curves`)."""
    from ..sweep.transfer_summary import optima
    names = list(dict.fromkeys(p.parametrization for p in points)) or list(spec.parametrizations)
    depths = sorted({p.depth for p in points}) or list(spec.depths)
    found = {(o.parametrization, o.depth): o for o in optima(points)}
    rows = max(1, math.ceil(len(names) / _PANELS_PER_ROW))
    fig, axes = new_figure(2 * _PANELS_PER_ROW, rows, panel_size=(4.2, 3.4))
    colors = pyplot().get_cmap("viridis")
    for k, name in enumerate(names):
        loss_ax, health_ax = axes[2 * k], axes[2 * k + 1]
        _loss_panel(loss_ax, name, points, found, colors, depths)
        loss_ax.legend(fontsize="x-small", loc="best", framealpha=0.9, title="depth", title_fontsize="x-small")
        _health_panel(health_ax, name, found, depths, spec.band)
    for ax in axes[2 * len(names):]:
        ax.set_visible(False)
    fig.suptitle(wrap_title(f"Depth transfer: held-out loss after {spec.updates} AdamW updates against the base "
                            f"learning rate (width {spec.width}, seeds {len(spec.seeds)}); dotted lines mark "
                            "each depth's refined optimum", 120), fontsize="medium")
    return fig


def save_transfer_figure(points: Sequence[Any], spec: Any, target: PathLike) -> List[pathlib.Path]:
    """Writes the figure as ``target.png`` and ``target.svg``; returns the paths."""
    return save_figure(transfer_figure(points, spec), target, ("png", "svg"))
