# SPDX-License-Identifier: MIT
"""Residual-health ratio figures for the observer, the demo and the laptop plan (optional extra
``plot``: matplotlib), drawn in the shared style of :mod:`pydepth.plots.style`.
"""
from __future__ import annotations

import pathlib
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..config import DecoderConfig
from ..health import DepthHealthReport, check_band
from .style import (PlotDependencyError, figure_title, new_figure, plot_ratios, policy_label, save_figure,
                         wrap_title)

__all__ = ["PlotDependencyError", "plot_demo", "plot_report", "report_figure", "describe_config"]

PathLike = Union[str, "pathlib.Path"]
ReportLike = Union[DepthHealthReport, Mapping[str, Any]]

_PANELS = (("activation_ratio", "activation RMS ratio  A_s / A_0", "residual activations"),
           ("adjoint_ratio", "adjoint RMS ratio  G_s / G_2L", "mean-loss adjoints (completed)"))


def describe_config(config: Union[DecoderConfig, Mapping[str, Any]]) -> str:
    """A short model name for titles: ``decoder d16 h2 ff20 V266`` (kv heads when grouped)."""
    c = config.to_dict() if isinstance(config, DecoderConfig) else dict(config)
    heads = f"h{c['heads']}" + (f"/kv{c['kv_heads']}" if c.get("kv_heads", c["heads"]) != c["heads"] else "")
    return f"decoder d{c['model_width']} {heads} ff{c['feed_forward_width']} V{c['vocabulary_size']}"


def _as_dict(report: ReportLike, what: str) -> Dict[str, Any]:
    if isinstance(report, DepthHealthReport):
        return report.to_dict()
    if isinstance(report, Mapping) and isinstance(report.get("sites"), list) and report["sites"]:
        return dict(report)
    raise TypeError(f"{what} must be a DepthHealthReport or its to_dict() form, got {type(report).__name__}")


def _depth(labels: Sequence[str]) -> int:
    return len({label.split(".")[1] for label in labels if label.startswith("block.")})


def report_figure(report: ReportLike, *, control: Optional[ReportLike] = None,
                  label: str = "depth-initialized", control_label: str = "same-base unscaled control",
                  title: Optional[str] = None, model: Optional[str] = None, seed: Optional[int] = None,
                  policy: Optional[str] = None, band: Optional[Sequence[float]] = None) -> Any:
    """The two-panel ratio figure of a report (and optionally a control overlaid) as a
    matplotlib ``Figure``, for callers who add to it before saving. ``band`` defaults to the
    band recorded in the report. See :func:`plot_report`."""
    main = _as_dict(report, "report")
    series: List[Tuple[str, Dict[str, Any]]] = [(label, main)]
    if control is not None:
        other = _as_dict(control, "control")
        if len(other["sites"]) != len(main["sites"]):
            raise ValueError(f"control has {len(other['sites'])} sites, the report {len(main['sites'])}")
        series.append((control_label, other))
    low_high = check_band(band if band is not None else main.get("band"))
    labels = [s["label"] for s in main["sites"]]
    fig, axes = new_figure(2)
    for ax, (key, ylabel, panel_title) in zip(axes, _PANELS):
        plot_ratios(ax, [(name, [s["site"] for s in d["sites"]], [s[key] for s in d["sites"]])
                         for name, d in series],
                    low_high, ylabel=ylabel, title=panel_title, n_sites=len(labels), site_labels=labels)
    fig.suptitle(wrap_title(title) if title
                 else figure_title(model=model, depth=_depth(labels), seed=seed, policy=policy))
    return fig


def plot_report(report: ReportLike, path: PathLike, *, control: Optional[ReportLike] = None,
                label: str = "depth-initialized", control_label: str = "same-base unscaled control",
                title: Optional[str] = None, model: Optional[str] = None, seed: Optional[int] = None,
                policy: Optional[str] = None, band: Optional[Sequence[float]] = None,
                formats: Optional[Sequence[str]] = None) -> List[pathlib.Path]:
    """Activation and adjoint ratios by residual site of one report (a
    :class:`~pydepth.DepthHealthReport` or its ``to_dict()``), optionally with a ``control``
    report overlaid, on log axes with the band shaded and out-of-band points marked.

    The title names ``model``, the depth (from the report), ``seed`` and ``policy`` unless
    ``title`` is given. ``path``'s suffix (``.png``, ``.svg``, ``.pdf``) picks the format; with
    ``formats=("png", "svg")`` ``path`` is a stem and one file per format is written. Returns
    the written paths."""
    fig = report_figure(report, control=control, label=label, control_label=control_label,
                        title=title, model=model, seed=seed, policy=policy, band=band)
    return save_figure(fig, path, formats)


def plot_demo(doc: Dict[str, Any], out_dir: PathLike) -> List[pathlib.Path]:
    """For each demo fixture, the initialized model's ratios with its same-base unscaled control
    overlaid; writes ``{id}-ratios.png`` and ``.svg`` into ``out_dir`` (created if missing) and
    returns the written paths."""
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: List[pathlib.Path] = []
    for fx in doc["fixtures"]:
        model = (f"{fx['title']} (d{fx['width']} h{fx['heads']} ff{fx['ff_width']} "
                 f"V{fx['vocabulary']})")
        written += plot_report(fx["initialized"], out / f"{fx['id']}-ratios",
                               control=fx["same_base_unscaled_control"], model=model, seed=doc["seed"],
                               policy=policy_label(fx["factor"]),
                               formats=("png", "svg"))
    return written
