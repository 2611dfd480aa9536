"""Ratio plots for the demo and the observer (optional extra ``plot``: matplotlib).

matplotlib is imported lazily; without it :class:`PlotDependencyError` names the extra.
"""
from __future__ import annotations

import pathlib
from typing import Any, Dict, List, Optional, Sequence, Union

from .health import HEALTH_BAND

__all__ = ["PlotDependencyError", "plot_demo", "plot_report"]

PathLike = Union[str, "pathlib.Path"]


class PlotDependencyError(ImportError):
    """matplotlib, the optional ``plot`` extra, is not installed."""


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise PlotDependencyError(
            "plotting needs matplotlib, the optional 'plot' extra: pip install 'pydepth[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _panel(ax: Any, series: Sequence[tuple], key: str, ylabel: str, title: str) -> None:
    low, high = HEALTH_BAND
    ax.axhspan(low, high, color="tab:green", alpha=0.08, label=f"band [{low}, {high:g}]")
    for edge in (low, high):
        ax.axhline(edge, color="tab:green", linewidth=0.8, linestyle=":")
    for label, sites, style in series:
        xs = [s["site"] for s in sites]
        ax.plot(xs, [s[key] for s in sites], style, label=label)
    ax.set_yscale("log")
    ax.set_xlabel("residual site (0 = input; odd = after attention; even = after feed-forward)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")


def _figure(plt: Any, series: Sequence[tuple], title: str) -> Any:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    _panel(axes[0], series, "activation_ratio", "A_s / A_0", "activation RMS ratio")
    _panel(axes[1], series, "adjoint_ratio", "G_s / G_2L", "mean-loss adjoint RMS ratio")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_demo(doc: Dict[str, Any], out_dir: PathLike) -> List[pathlib.Path]:
    """For each demo fixture, activation and adjoint ratios by site, initialized vs same-base
    unscaled control, on a log axis with the band shaded; writes ``{id}-ratios.png`` and
    ``.svg`` into ``out_dir`` (created if missing) and returns the written paths."""
    plt = _pyplot()
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: List[pathlib.Path] = []
    for fx in doc["fixtures"]:
        series = [("depth-initialized", fx["initialized"]["sites"], "o-"),
                  ("same-base unscaled control", fx["same_base_unscaled_control"]["sites"], "s--")]
        fig = _figure(plt, series, f"{fx['title']} (seed {doc['seed']}, factor {fx['factor']:.6f})")
        for suffix in ("png", "svg"):
            path = out / f"{fx['id']}-ratios.{suffix}"
            fig.savefig(path)
            written.append(path)
        plt.close(fig)
    return written


def plot_report(report: Dict[str, Any], path: PathLike, title: Optional[str] = None) -> pathlib.Path:
    """Activation and adjoint ratios of one observed report (``DepthHealthReport.to_dict()``)
    on a log axis with the band shaded; the format follows the file suffix."""
    plt = _pyplot()
    fig = _figure(plt, [("observed", report["sites"], "o-")], title or "residual health")
    target = pathlib.Path(path)
    fig.savefig(target)
    plt.close(fig)
    return target
