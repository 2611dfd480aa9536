# SPDX-License-Identifier: MIT
"""Every figure pydepth draws, in one shared style (extra ``plot``: matplotlib): health reports
(:mod:`.health`), training runs (:mod:`.train`), the style itself (:mod:`.style`)."""
from .health import PlotDependencyError, describe_config, plot_demo, plot_report, report_figure

__all__ = ["PlotDependencyError", "plot_demo", "plot_report", "report_figure", "describe_config"]
