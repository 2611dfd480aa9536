# SPDX-License-Identifier: MIT
"""The training plot: loss per step, and each residual site's activation and adjoint ratio over
the observed steps with the health band, in the house style of plots.style (extra ``plot``)."""
from __future__ import annotations

import pathlib
from typing import Any, Dict, List, Optional, Sequence, Union

from ..health import HEALTH_BAND
from .style import mark_out_of_band, new_figure, pyplot, ratio_axis, save_figure, shade_band, wrap_title

__all__ = ["plot_training", "training_figure"]


def _ratios(ax: Any, observations: Sequence[Dict[str, Any]], key: str, ylabel: str, title: str) -> None:
    band = observations[0]["report"].get("band", HEALTH_BAND) if observations else HEALTH_BAND
    shade_band(ax, band)
    steps = [o["step"] for o in observations]
    n_sites = len(observations[0]["report"]["sites"]) if observations else 0
    cmap = pyplot().get_cmap("viridis")
    values, marked = [], False
    for s in range(n_sites):  # one line per site, coloured from the input (dark) to the output (light)
        ys = [o["report"]["sites"][s][key] for o in observations]
        values += ys
        ax.plot(steps, ys, "-", marker=".", color=cmap(s / max(1, n_sites - 1)), linewidth=1.2, zorder=3,
                label=f"site {s}" + (" (input)" if s == 0 else " (output)" if s == n_sites - 1 else "")
                if s in (0, n_sites - 1) else None)
        marked |= mark_out_of_band(ax, steps, ys, band, label=None if marked else "outside the band") > 0
    ratio_axis(ax, ylabel, values, band)
    _step_axis(ax, steps)
    ax.set_title(title, fontsize="medium")
    ax.legend(fontsize="small", loc="best", framealpha=0.9)
    if n_sites > 1:  # every line's site, not only the two the legend names
        from matplotlib.cm import ScalarMappable
        from matplotlib.colors import Normalize
        bar = ax.figure.colorbar(ScalarMappable(norm=Normalize(0, n_sites - 1), cmap=cmap), ax=ax, pad=0.01)
        bar.set_label("residual site (0 = input)", fontsize="small")


def _step_axis(ax: Any, steps: Sequence[int]) -> None:
    """Integer step ticks (steps are counts of updates), the last observed step always shown."""
    from matplotlib.ticker import MaxNLocator
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, steps=[1, 2, 5, 10]))  # round counts: 0, 5, 10, ...
    if steps:  # a little room at both ends, so the first and last markers are drawn whole
        pad = max(0.3, 0.02 * (max(steps) - min(steps)))
        ax.set_xlim(min(steps) - pad, max(steps) + pad)
    ax.set_xlabel(_STEP_LABEL)


_STEP_LABEL = "step (parameters after this many updates)"


def training_figure(steps: Sequence[Dict[str, Any]], observations: Sequence[Dict[str, Any]], *,
                    title: Optional[str] = None) -> Any:
    """The training figure of train.jsonl rows (step, loss) and health.jsonl rows (step, loss,
    report) as a matplotlib ``Figure``, not saved. Every panel's x axis is the number of updates
    the parameters have had (integer ticks)."""
    fig, (loss_ax, act_ax, adj_ax) = new_figure(3)
    # both logs count the updates the measured parameters had; an end observation adds the final loss
    xs = [r["step"] for r in steps]
    ys = [r["loss"] for r in steps]
    if observations and (not xs or observations[-1]["step"] > xs[-1]):
        xs, ys = [*xs, observations[-1]["step"]], [*ys, observations[-1]["loss"]]
    loss_ax.plot(xs, ys, "-", color="tab:blue", linewidth=1, marker="." if len(xs) <= 50 else None)
    _step_axis(loss_ax, xs)
    loss_ax.set_ylabel("mean next-byte loss (nats)")
    loss_ax.set_title("training loss", fontsize="medium")
    loss_ax.grid(True, alpha=0.35)
    _ratios(act_ax, observations, "activation_ratio", "A_s / A_0", "activation RMS ratio per site")
    _ratios(adj_ax, observations, "adjoint_ratio", "G_s / G_2L", "mean-loss adjoint RMS ratio per site")
    if title:
        fig.suptitle(wrap_title(title, 140))
    return fig


def plot_training(steps: Sequence[Dict[str, Any]], observations: Sequence[Dict[str, Any]],
                  path: Union[str, pathlib.Path], *, formats: Optional[Sequence[str]] = None,
                  title: Optional[str] = None) -> List[pathlib.Path]:
    """Writes :func:`training_figure` to path (.png, .svg or .pdf; or path.{fmt} for each of
    formats) and returns the paths."""
    return save_figure(training_figure(steps, observations, title=title), path, formats)
