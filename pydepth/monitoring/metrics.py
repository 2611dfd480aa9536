# SPDX-License-Identifier: MIT
"""A :class:`pydepth.DepthHealthReport` as the flat ``name -> float`` metrics that training
loggers take: summaries under ``{prefix}/`` and, per site, under ``{prefix}/{site label}/``.

The per-site metrics are the fields of :class:`pydepth.ResidualHealthRow` declared ``metric``
(their names and units come from the declaration), so a field added there is logged here; the
summaries are the table :data:`SUMMARIES`. :func:`metric_table` lists both, and
docs/training-health.md shows that list."""
from __future__ import annotations

from typing import Callable, Dict, List, NamedTuple, Tuple

from .._fields import column_name, declared
from ..errors import ArgumentTypeError
from ..health import DepthHealthReport, RatioBand, ResidualHealthRow

__all__ = ["health_metrics", "metric_table", "Summary", "SUMMARIES", "SUMMARY_METRICS", "SITE_METRICS"]


class Summary(NamedTuple):
    """One summary metric of a report: its name, unit, meaning and how it is read."""

    name: str
    unit: str
    description: str
    of: Callable[[DepthHealthReport], float]


def _outside(report: DepthHealthReport) -> float:
    return float(sum((r.activation_status is not RatioBand.WITHIN) + (r.adjoint_status is not RatioBand.WITHIN)
                     for r in report.sites))


#: The summary metrics every observation logs (after the prefix and a slash), in order.
SUMMARIES: Tuple[Summary, ...] = (
    Summary("activation_ratio_max", "1 (a ratio)", "largest activation RMS ratio `A_s / A_0` over the sites",
            lambda r: r.activation_ratio_range[1]),
    Summary("activation_ratio_min", "1 (a ratio)", "smallest activation RMS ratio `A_s / A_0` over the sites",
            lambda r: r.activation_ratio_range[0]),
    Summary("adjoint_ratio_max", "1 (a ratio)", "largest adjoint RMS ratio `G_s / G_2L` over the sites",
            lambda r: r.adjoint_ratio_range[1]),
    Summary("adjoint_ratio_min", "1 (a ratio)", "smallest adjoint RMS ratio `G_s / G_2L` over the sites",
            lambda r: r.adjoint_ratio_range[0]),
    Summary("out_of_band", "ratios", "how many of the 2·(sites) ratios lie outside the report's band "
            "(default `[0.01, 100]`)", _outside),
    Summary("valid_positions", "positions", "positions that entered the RMS", lambda r: r.valid_positions),
)

#: The summary metrics' names.
SUMMARY_METRICS: Tuple[str, ...] = tuple(s.name for s in SUMMARIES)

#: The per-site metrics: ``(metric name, field of ResidualHealthRow)`` for every field declared ``metric``.
SITE_METRICS: Tuple[Tuple[str, str], ...] = tuple(
    (column_name(name, q), name) for name, q in declared(ResidualHealthRow) if q.metric)


def metric_table(prefix: str = "residual") -> List[Tuple[str, str, str]]:
    """``(metric, unit, meaning)`` of every metric :func:`health_metrics` logs, summaries first,
    a per-site metric under ``{prefix}/{label}/``."""
    rows = [(f"{prefix}/{s.name}", s.unit, s.description) for s in SUMMARIES]
    quantities = dict(declared(ResidualHealthRow))
    rows += [(f"{prefix}/{{label}}/{metric}", quantities[name].unit, f"per site: {quantities[name].description}")
             for metric, name in SITE_METRICS]
    return rows


def health_metrics(report: DepthHealthReport, *, prefix: str = "residual",
                   per_site: bool = True) -> Dict[str, float]:
    """Flat metrics of one report, every value a Python float: the :data:`SUMMARIES` under
    ``{prefix}/`` and, with ``per_site``, every :data:`SITE_METRICS` of each site under
    ``{prefix}/{label}/`` (labels as in the report, e.g. ``block.3.after_attention``).
    :func:`metric_table` lists them with their units and meanings."""
    if not isinstance(report, DepthHealthReport):
        raise ArgumentTypeError(f"report must be a DepthHealthReport, got {type(report).__name__}")
    if not isinstance(prefix, str) or not prefix or prefix.endswith("/"):
        raise ArgumentTypeError(f"prefix must be a non-empty string without a trailing '/', got {prefix!r}")
    out = {f"{prefix}/{s.name}": float(s.of(report)) for s in SUMMARIES}
    if per_site:
        for r in report.sites:
            for metric, name in SITE_METRICS:
                out[f"{prefix}/{r.label}/{metric}"] = float(getattr(r, name))
    return out
