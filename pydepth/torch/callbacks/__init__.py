# SPDX-License-Identifier: MIT
"""Residual health watched while training: a plain-loop :class:`HealthMonitor`, a Hugging Face
``TrainerCallback`` (:class:`HealthTrainerCallback`, needs transformers) and a Lightning
``Callback`` (:class:`HealthLightningCallback`, needs lightning), flat metrics of a
:class:`pydepth.DepthHealthReport`, and sinks for TensorBoard, W&B, MLflow and JSON lines.

The two trainer callbacks are imported on first use, so this package needs only torch.
"""
from __future__ import annotations

import importlib
from typing import Any

from .inputs import ObservedBatch, observed_batch
from ...monitoring.metrics import SITE_METRICS, SUMMARIES, SUMMARY_METRICS, Summary, health_metrics, metric_table
from .monitor import HealthMonitor, global_rank
from ...monitoring.sinks import CallableSink, JsonLinesSink, MlflowSink, TensorBoardSink, WandbSink
from .unwrap import unwrap_model

_LAZY = {"HealthTrainerCallback": ".hf", "HealthLightningCallback": ".lightning"}

__all__ = ["HealthMonitor", "HealthTrainerCallback", "HealthLightningCallback", "health_metrics",
           "metric_table", "Summary", "SUMMARIES", "SUMMARY_METRICS", "SITE_METRICS", "TensorBoardSink", "WandbSink",
           "MlflowSink", "JsonLinesSink",
           "CallableSink", "ObservedBatch", "observed_batch", "unwrap_model", "global_rank"]


def __getattr__(name: str) -> Any:
    """The trainer callbacks, imported from their modules when first asked for."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
