# SPDX-License-Identifier: MIT
"""The one style of every pydepth figure (optional extra ``plot``: matplotlib).

Observer, demo, laptop, training and sweep plots all draw through these helpers, so a figure
reads the same everywhere: constrained layout (nothing clipped), the health band shaded on a
log ratio axis, out-of-band points marked and annotated, integer residual-site ticks labelled
by stage, and a title naming model, depth, seed and policy. matplotlib is imported lazily;
without it :class:`PlotDependencyError` names the extra.
"""
from __future__ import annotations

import math
import pathlib
import textwrap
from typing import Any, Iterable, List, Optional, Sequence, Tuple, Union

from ..errors import PydepthError

__all__ = ["PlotDependencyError", "pyplot", "new_figure", "shade_band", "ratio_axis",
           "site_tick_labels", "site_axis", "shade_spread", "plot_ratios", "mark_out_of_band", "annotate_out_of_band",
           "figure_title", "wrap_title",
           "save_figure", "texts_outside_figure", "SERIES_STYLES", "OUT_OF_BAND_COLOR"]

PathLike = Union[str, "pathlib.Path"]

#: Line styles by role, in drawing order: the observed model first, its control second.
SERIES_STYLES = ({"color": "tab:blue", "marker": "o", "linestyle": "-"},
                 {"color": "tab:gray", "marker": "s", "linestyle": "--"},
                 {"color": "tab:purple", "marker": "^", "linestyle": "-."},
                 {"color": "tab:brown", "marker": "D", "linestyle": ":"})
#: Colour of out-of-band markers and their annotations.
OUT_OF_BAND_COLOR = "tab:red"


def policy_label(factor: float) -> str:
    """The depth policy as a person reads it in a title (the record's id is for machines)."""
    return f"depth-scaled, 1/\u221aL = {factor:.6f}"
_BAND_COLOR = "tab:green"
_MAX_ANNOTATIONS = 3  # per panel: the most extreme, well separated points, so labels never pile up
_MAX_SITE_LABELS = 33  # more sites than this: every k-th stage label, ticks stay integer


class PlotDependencyError(PydepthError, ImportError):
    """matplotlib, the optional ``plot`` extra, is not installed."""


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the non-interactive Agg backend, or :class:`PlotDependencyError`."""
    try:
        import matplotlib
    except ImportError:
        raise PlotDependencyError(
            "plotting needs matplotlib, the optional 'plot' extra: pip install 'pydepth[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def new_figure(ncols: int = 1, nrows: int = 1, *,
               panel_size: Tuple[float, float] = (5.8, 4.4)) -> Tuple[Any, List[Any]]:
    """A figure with constrained layout and ``nrows x ncols`` panels (returned as a flat list)."""
    plt = pyplot()
    fig, axes = plt.subplots(nrows, ncols, figsize=(panel_size[0] * ncols, panel_size[1] * nrows),
                             layout="constrained", squeeze=False)
    return fig, [ax for row in axes for ax in row]


def shade_band(ax: Any, band: Sequence[float], *, axis: str = "y") -> None:
    """Shades the inclusive health band and draws its edges (``axis="x"`` for vertical bands)."""
    low, high = float(band[0]), float(band[1])
    span, line = (ax.axhspan, ax.axhline) if axis == "y" else (ax.axvspan, ax.axvline)
    span(max(low, 1e-300), high, color=_BAND_COLOR, alpha=0.10, zorder=0,
         label=f"health band [{low:g}, {high:g}]")
    for edge in (low, high):
        if edge > 0.0:
            line(edge, color=_BAND_COLOR, linewidth=0.9, linestyle=":", zorder=1)


def ratio_axis(ax: Any, label: str, values: Iterable[float], band: Sequence[float], *, axis: str = "y") -> None:
    """A log-scale ratio axis whose limits hold the data and the band with room for annotations."""
    finite = [v for v in values if v > 0.0 and math.isfinite(v)]
    low, high = float(band[0]), float(band[1])
    lo = min(finite + ([low] if low > 0.0 else []) or [1.0])
    hi = max([*finite, high])
    pad = (hi / lo) ** 0.12 if hi > lo else 10.0
    if axis == "y":
        ax.set_yscale("log")
        ax.set_ylim(lo / pad, hi * pad)
        ax.set_ylabel(label)
    else:
        ax.set_xscale("log")
        ax.set_xlim(lo / pad, hi * pad)
        ax.set_xlabel(label)
    ax.grid(True, which="major", alpha=0.35)


def site_tick_labels(n_sites: int, labels: Optional[Sequence[str]] = None) -> List[str]:
    """Short stage labels: ``input``, ``attn b`` (after block b's attention) and ``ffn b``
    (after its feed-forward); given report labels are shortened the same way."""
    out = []
    for i in range(n_sites):
        name = labels[i] if labels is not None else None
        if name is not None and not name.startswith("block.") and name != "input":
            out.append(name)
        elif i == 0:
            out.append("input")
        elif name is not None and name.endswith(".output"):
            out.append(f"block {name.split('.')[1]}")
        elif i % 2 == 1:
            out.append(f"attn {i // 2}")
        else:
            out.append(f"ffn {i // 2 - 1}")
    return out


def site_axis(ax: Any, n_sites: int, labels: Optional[Sequence[str]] = None, *, axis: str = "x") -> None:
    """Integer residual-site ticks labelled by stage (thinned past a couple of dozen sites) on
    the x axis, or on the y axis (``axis="y"``, e.g. the site rows of a heat map)."""
    names = site_tick_labels(n_sites, labels)
    step = max(1, math.ceil(n_sites / _MAX_SITE_LABELS))
    ticks = list(range(0, n_sites, step))
    text = [f"{i}: {names[i]}" for i in ticks]
    title = "residual site: stage after which the stream is read"
    if axis == "y":
        ax.set_yticks(ticks)
        ax.set_yticklabels(text, fontsize="small", parse_math=False)  # labels come from files: plain text
        ax.set_ylim(-0.5, n_sites - 0.5)
        ax.set_ylabel(title)
        return
    ax.set_xticks(ticks)
    ax.set_xticklabels(text, rotation=55, ha="right", rotation_mode="anchor", fontsize="small", parse_math=False)
    ax.set_xlim(-0.5, n_sites - 0.5)
    ax.set_xlabel(title)


def shade_spread(ax: Any, xs: Sequence[float], lows: Sequence[float], highs: Sequence[float], *,
                 style: int = 0, label: Optional[str] = None) -> None:
    """Shades the spread ``[lows, highs]`` of a series (e.g. over seeds) in the colour of
    :data:`SERIES_STYLES` entry ``style``, under the lines."""
    color = SERIES_STYLES[style % len(SERIES_STYLES)]["color"]
    ax.fill_between(list(xs), list(lows), list(highs), color=color, alpha=0.18, linewidth=0, zorder=2,
                    label=label)


def mark_out_of_band(ax: Any, xs: Sequence[float], ys: Sequence[float], band: Sequence[float], *,
                     label: Optional[str] = "outside the band", annotate: bool = True,
                     fmt: str = "{:.5g}", marker: str = "X", edgecolor: str = "black") -> int:
    """Marks every point outside the inclusive band (a red ``marker``, default a cross, edged in
    ``edgecolor`` so series stay apart) and (unless ``annotate`` is false) labels the most extreme
    few with :func:`annotate_out_of_band`; returns how many points lie outside."""
    low, high = float(band[0]), float(band[1])
    outside = [(x, y) for x, y in zip(xs, ys) if y < low or y > high]
    if not outside:
        return 0
    ax.scatter([p[0] for p in outside], [p[1] for p in outside], marker=marker, s=70,
               color=OUT_OF_BAND_COLOR, edgecolors=edgecolor, linewidths=1.2, zorder=5, label=label)
    if annotate:
        annotate_out_of_band(ax, outside, band, fmt=fmt)
    return len(outside)


def annotate_out_of_band(ax: Any, points: Sequence[Tuple[float, float]], band: Sequence[float], *,
                         fmt: str = "{:.5g}") -> None:
    """Labels with its value each of the most extreme out-of-band ``(x, y)`` points, at most
    three per panel and never two close together: above a point over the band, below one under
    it, centred except near an edge, where it extends inwards so it stays inside the axes."""
    low, high = float(band[0]), float(band[1])
    outside = [(x, y) for x, y in points if y < low or y > high]
    if not outside:
        return
    x0, x1 = ax.get_xlim()
    log_x = ax.get_xscale() == "log" and x0 > 0

    def frac(x: float) -> float:  # position across the axes, 0 at the left edge
        if log_x:
            return (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
        return (x - x0) / (x1 - x0) if x1 != x0 else 0.5

    def extremity(p: Tuple[float, float]) -> float:
        return math.log(p[1] / high) if p[1] > high else math.log(low / max(p[1], 1e-300))

    taken = ax.__dict__.setdefault("_pydepth_annotated", [])  # shared by every call on this panel
    for x, y in sorted(outside, key=extremity, reverse=True):
        if len(taken) >= _MAX_ANNOTATIONS:
            break
        if any(abs(frac(x) - tx) < 0.2 and (y > high) == above for tx, above in taken):
            continue  # a label nearby already tells this story; a pile of labels tells none
        taken.append((frac(x), y > high))
        f = frac(x)
        ax.annotate(fmt.format(y), (x, y), xytext=(0, 8 if y > high else -8), textcoords="offset points",
                    ha="left" if f < 0.15 else "right" if f > 0.85 else "center",
                    va="bottom" if y > high else "top",
                    fontsize="small", color=OUT_OF_BAND_COLOR, annotation_clip=True, zorder=6,
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8})


def plot_ratios(ax: Any, series: Sequence[Tuple[str, Sequence[float], Sequence[float]]],
                band: Sequence[float], *, ylabel: str, title: str, n_sites: Optional[int] = None,
                site_labels: Optional[Sequence[str]] = None) -> None:
    """One panel: each ``(label, xs, ys)`` series as a line in the house style, the band shaded,
    out-of-band points marked, a log ratio axis and (with ``n_sites``) stage-labelled site ticks."""
    shade_band(ax, band)
    if n_sites is not None:
        site_axis(ax, n_sites, site_labels)
    marked = False
    for k, (label, xs, ys) in enumerate(series):
        style = SERIES_STYLES[k % len(SERIES_STYLES)]
        ax.plot(list(xs), list(ys), label=label, markersize=5 if len(xs) <= 25 else 2.5, linewidth=1.4,
                zorder=3, **style)
        marked |= mark_out_of_band(ax, xs, ys, band, label=None if marked else "outside the band",
                                   annotate=False) > 0
    ratio_axis(ax, ylabel, [y for _, _, ys in series for y in ys], band)
    annotate_out_of_band(ax, [(x, y) for _, xs, ys in series for x, y in zip(xs, ys)], band)
    ax.set_title(title, fontsize="medium")
    ax.legend(fontsize="small", loc="best", framealpha=0.9)


def figure_title(*, model: Optional[str] = None, depth: Optional[int] = None, seed: Optional[int] = None,
                 policy: Optional[str] = None, extra: Optional[str] = None, width: int = 100) -> str:
    """``model · depth L · seed S · policy P · extra``, wrapped to ``width`` characters per line."""
    parts = [p for p in (model, None if depth is None else f"depth {depth}",
                         None if seed is None else f"seed {seed}",
                         None if policy is None else f"policy {policy}", extra) if p]
    if not parts:
        return "residual health"
    lines = [parts[0]]
    for part in parts[1:]:  # break between parts, never inside a name
        if len(lines[-1]) + 3 + len(part) > width:
            lines.append(part)
        else:
            lines[-1] += " · " + part
    return wrap_title("\n".join(lines), width)


def wrap_title(text: str, width: int = 100) -> str:
    """``text`` with every line wrapped to ``width`` characters (so a title fits its figure)."""
    return "\n".join(w for line in text.splitlines()
                     for w in textwrap.wrap(line, width, break_on_hyphens=False) or [line])


def _write_figure(fig: Any, path: pathlib.Path) -> None:
    """One figure file through the one atomic writer: a link at ``path`` is replaced, never
    written through, and a failed write leaves the old file."""
    import io

    from .._files.atomic import write_atomically
    from ..errors import OutputFileError
    buffer = io.BytesIO()
    fig.savefig(buffer, format=path.suffix.lower()[1:], dpi=150)
    data = buffer.getvalue()
    write_atomically(str(path), lambda fh: fh.write(data), "figure", OutputFileError, follow_links=False)


def save_figure(fig: Any, target: PathLike, formats: Optional[Sequence[str]] = None) -> List[pathlib.Path]:
    """Saves ``fig`` and closes it. With ``formats`` (e.g. ``("png", "svg")``), ``target`` is a
    path stem and one file per format is written; otherwise the suffix of ``target`` decides.
    A missing parent directory is created. Returns the written paths."""
    plt = pyplot()
    path = pathlib.Path(target)
    paths = [path] if formats is None else [path.with_name(f"{path.name}.{fmt}") for fmt in formats]
    try:
        for p in paths:
            if p.suffix.lower() not in (".png", ".svg", ".pdf"):
                raise ValueError(f"plot file {str(p)!r} must end in .png, .svg or .pdf")
        path.parent.mkdir(parents=True, exist_ok=True)
        for p in paths:
            _write_figure(fig, p)
    finally:
        plt.close(fig)
    return paths


def texts_outside_figure(fig: Any) -> List[str]:
    """The non-empty text artists that a draw of ``fig`` renders outside the figure (for tests).

    Only texts actually drawn count: tick labels of ticks outside the view and annotations
    clipped away are skipped, as the renderer skips them."""
    from matplotlib.text import Text
    drawn: List[Any] = []
    draw = Text.draw

    def spy(self: Any, renderer: Any) -> None:  # Annotation.draw calls Text.draw too
        draw(self, renderer)
        if self.get_visible() and self.get_text().strip():
            drawn.append(self)

    setattr(Text, "draw", spy)  # noqa: B010 (mypy refuses assigning to a method)
    try:
        fig.canvas.draw()
    finally:
        setattr(Text, "draw", draw)  # noqa: B010
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    bad = []
    for text in drawn:
        ext = text.get_window_extent(renderer)
        if ext.x0 < box.x0 - 0.5 or ext.y0 < box.y0 - 0.5 or ext.x1 > box.x1 + 0.5 or ext.y1 > box.y1 + 0.5:
            bad.append(text.get_text())
    return bad
