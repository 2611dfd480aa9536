# SPDX-License-Identifier: MIT
"""Training a pydepth decoder: byte-level data, one optimizer step with an optional health
observation, and a whole run (:class:`TrainSettings` → :func:`run_training` → :class:`TrainResult`)."""
from .errors import (ResumeError, SettingsClashError, TrainBudgetError, TrainingError, TrainLogError,
                     TrainSettingsError)
from .run import TrainProgress, TrainResult, resume_settings, run_training
from .settings import TrainSettings
from .step import (BYTE_VOCABULARY, byte_documents, check_byte_config, draw_batch, loss_and_gradients,
                   observe_step, train_step)

__all__ = ["BYTE_VOCABULARY", "byte_documents", "check_byte_config", "draw_batch", "loss_and_gradients",
           "observe_step", "train_step", "TrainSettings", "TrainProgress", "TrainResult", "run_training",
           "resume_settings", "TrainingError", "TrainSettingsError", "SettingsClashError", "ResumeError",
           "TrainBudgetError", "TrainLogError"]
