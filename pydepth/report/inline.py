# SPDX-License-Identifier: MIT
"""The HTML a notebook shows for a result object (``_repr_html_``): the verdict, a table and,
when matplotlib is installed, the figure as inline SVG. Without matplotlib the table stands
alone; nothing here raises for a missing extra."""
from __future__ import annotations

import functools
import html
import os
import pathlib
from typing import TYPE_CHECKING, Any, Callable, List, Sequence, Tuple, Union

from .page import figure_html, table_html

if TYPE_CHECKING:
    from ..health import DepthHealthReport
    from ..sweep.summary import BandExit

__all__ = ["EXIT_HEADER", "exit_rows", "health_report_html", "sweep_store_html"]

#: The columns of the band-exit table (one row per width, policy and step).
EXIT_HEADER = ("width", "policy", "step", "first out", "seeds out", "why", "out deepest")


def exit_rows(exits: Sequence[BandExit]) -> List[Tuple[Any, ...]]:
    """The band-exit table's rows."""
    return [(e.width, e.policy, e.step, e.depth or "-", f"{e.seeds_out}/{e.seeds}", e.cause or "-",
             f"{e.deepest_seeds_out}/{e.seeds}") for e in exits]


def _figure(draw: Callable[[], Any], caption: str) -> str:
    """``draw()``'s figure as inline SVG, or nothing when matplotlib is not installed."""
    from ..plots.style import PlotDependencyError
    try:
        return figure_html(draw(), caption)
    except PlotDependencyError:
        return ""


def _depth_figure(steps: Any, width: int, band: Sequence[float]) -> Any:
    from ..sweep.plots import depth_check_figure  # imported here: it needs matplotlib
    return depth_check_figure(steps, width, band)


def _block(*parts: str) -> str:
    return "<div class=\"pydepth-result\">" + "".join(parts) + "</div>"


def health_report_html(report: DepthHealthReport) -> str:
    """A health report as HTML: the verdict, the normalizers, every site's ratios and classes,
    and the two-panel ratio figure."""
    from ..health import LEGEND
    from ..plots.health import report_figure
    lo, hi = report.band
    facts = (f"valid positions {report.valid_positions}, width {report.width}, band [{lo:g}, {hi:g}] inclusive; "
             f"A_0 = {report.input_activation_normalizer:.4g}, G_2L = {report.terminal_adjoint_normalizer:.4g}")
    rows = [(r.site, r.label, f"{r.activation_ratio:.4g}", r.activation_status.value, f"{r.adjoint_ratio:.4g}",
             r.adjoint_status.value) for r in report.sites]
    return _block(f"<p><strong>{html.escape(report.verdict())}</strong></p>",
                  f"<p>{html.escape(facts)}</p>",
                  table_html(("site", "label", "A_s/A_0", "A class", "G_s/G_2L", "G class"), rows),
                  _figure(lambda: report_figure(report), "Residual ratios by site, the band shaded."),
                  f"<p><small>{html.escape(LEGEND)}</small></p>")


def sweep_store_html(out: Union[str, os.PathLike[str]], facts: Sequence[Tuple[str, Any]]) -> str:
    """A sweep's (or depth check's) result store as HTML: the verdict, where each policy leaves
    the band, ``facts`` about the run, and the depth-check figure of each width."""
    from ..health import LEGEND
    from ..sweep.store import read_spec, read_table
    from ..sweep.summary import band_exits, cell_steps, verdict
    where = pathlib.Path(out)
    band = tuple(read_spec(where).band)
    steps = cell_steps(read_table(where))
    exits = band_exits(steps, band)
    return _block(f"<p><strong>{html.escape(verdict(exits, band))}</strong></p>",
                  table_html(EXIT_HEADER, exit_rows(exits)),
                  table_html(("field", "value"), [(k, v) for k, v in facts]),
                  "".join(_figure(functools.partial(_depth_figure, steps, width, band),
                                  f"Largest ratio over the sites by depth, width {width}.")
                          for width in sorted({cs.width for cs in steps})),
                  f"<p><small>{html.escape(LEGEND)}</small></p>")
