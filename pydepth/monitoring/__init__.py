# SPDX-License-Identifier: MIT
"""Residual health as training-logger metrics, for either bridge: the flat metric names of a
:class:`pydepth.DepthHealthReport` (:mod:`.metrics`) and the sinks they are written to
(:mod:`.sinks`: TensorBoard, W&B, MLflow, JSON lines). Imports neither torch nor JAX."""
from .metrics import SITE_METRICS, SUMMARIES, SUMMARY_METRICS, Summary, health_metrics, metric_table
from .sinks import CallableSink, JsonLinesSink, MlflowSink, TensorBoardSink, WandbSink, as_sinks

__all__ = ["health_metrics", "metric_table", "Summary", "SUMMARIES", "SUMMARY_METRICS", "SITE_METRICS",
           "TensorBoardSink", "WandbSink", "MlflowSink", "JsonLinesSink", "CallableSink", "as_sinks"]
