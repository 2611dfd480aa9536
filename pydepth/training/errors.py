# SPDX-License-Identifier: MIT
"""Errors of a training run; each names the offending setting or value."""
from __future__ import annotations

from typing import Any, Sequence, Tuple

from ..errors import PydepthError

__all__ = ["TrainingError", "TrainSettingsError", "SettingsClashError", "ResumeError", "TrainBudgetError",
           "TrainLogError"]


class TrainingError(PydepthError):
    """A training run cannot start or resume."""


class TrainSettingsError(TrainingError, ValueError):
    """One setting of a run is invalid; ``field``, ``value`` and ``requirement`` say which and why."""

    def __init__(self, field: str, value: Any, requirement: str) -> None:
        super().__init__(f"{field} must be {requirement}, got {value!r}")
        self.field, self.value, self.requirement = field, value, requirement


class SettingsClashError(TrainingError, ValueError):
    """A resumed run was given settings that differ from those it was trained with;
    ``clashes`` holds ``(field, given, stored)`` triples."""

    def __init__(self, clashes: Sequence[Tuple[str, Any, Any]]) -> None:
        self.clashes = tuple(clashes)
        super().__init__("a resumed run keeps its settings; these differ: " + ", ".join(
            f"{f} {given} (checkpoint: {stored})" for f, given, stored in self.clashes))


class TrainBudgetError(TrainingError, ValueError):
    """A step of this batch and sequence length on this model would exceed the memory budget."""


class TrainLogError(TrainingError, ValueError):
    """A run's JSON-lines log is damaged before its last line (a torn last line is dropped)."""


class ResumeError(TrainingError, ValueError):
    """A checkpoint cannot continue this run: not written by a training run, another text, another
    configuration, or a step past the requested end."""
