# SPDX-License-Identifier: MIT
"""A :class:`pydepth.DepthHealthReport` as the flat ``name -> float`` metrics that training
loggers take: summaries under ``{prefix}/`` and, per site, under ``{prefix}/{site label}/``."""
from __future__ import annotations

from typing import Dict

from ...errors import ArgumentTypeError
from ...health import DepthHealthReport, RatioBand

__all__ = ["health_metrics", "SUMMARY_METRICS"]

#: The summary metrics every observation logs (after the prefix and a slash).
SUMMARY_METRICS = ("activation_ratio_max", "activation_ratio_min", "adjoint_ratio_max",
                   "adjoint_ratio_min", "out_of_band", "valid_positions")


def health_metrics(report: DepthHealthReport, *, prefix: str = "residual",
                   per_site: bool = True) -> Dict[str, float]:
    """Flat metrics of one report, every value a Python float:

    * ``{prefix}/activation_ratio_max`` and ``_min``, ``{prefix}/adjoint_ratio_max`` and ``_min``
      (over the sites);
    * ``{prefix}/out_of_band``: how many site ratios (activation and adjoint counted separately)
      lie outside the report's band;
    * ``{prefix}/valid_positions``: how many positions entered the RMS;
    * with ``per_site``, for each site ``{prefix}/{label}/activation_ratio``, ``adjoint_ratio``,
      ``activation_rms`` and ``adjoint_rms`` (labels as in the report, e.g.
      ``block.3.after_attention``)."""
    if not isinstance(report, DepthHealthReport):
        raise ArgumentTypeError(f"report must be a DepthHealthReport, got {type(report).__name__}")
    if not isinstance(prefix, str) or not prefix or prefix.endswith("/"):
        raise ArgumentTypeError(f"prefix must be a non-empty string without a trailing '/', got {prefix!r}")
    a_min, a_max = report.activation_ratio_range
    g_min, g_max = report.adjoint_ratio_range
    outside = sum((r.activation_status is not RatioBand.WITHIN) + (r.adjoint_status is not RatioBand.WITHIN)
                  for r in report.sites)
    out = {f"{prefix}/activation_ratio_max": float(a_max), f"{prefix}/activation_ratio_min": float(a_min),
           f"{prefix}/adjoint_ratio_max": float(g_max), f"{prefix}/adjoint_ratio_min": float(g_min),
           f"{prefix}/out_of_band": float(outside), f"{prefix}/valid_positions": float(report.valid_positions)}
    if per_site:
        for r in report.sites:
            for field in ("activation_ratio", "adjoint_ratio", "activation_rms", "adjoint_rms"):
                out[f"{prefix}/{r.label}/{field}"] = float(getattr(r, field))
    return out
