# SPDX-License-Identifier: MIT
"""Errors of the sweep package; each names the offending value."""
from __future__ import annotations

from ..errors import PydepthError

__all__ = ["SweepError", "SweepSpecError", "SweepDependencyError", "OptimizerUnavailableError",
           "SweepStoreError", "SweepResumeError", "DamagedPartError", "RowNotFoundError"]


class SweepError(PydepthError):
    """A sweep cannot run, resume or be read."""


class SweepSpecError(SweepError, ValueError):
    """A sweep grid or option is invalid."""


class SweepDependencyError(SweepError, ImportError):
    """Dask with distributed or pyarrow, the optional ``sweep`` extra, is not installed."""


class OptimizerUnavailableError(SweepError):
    """Steps after 0 need ``pydepth.optim.AdamW``, which this installation does not have."""


class SweepStoreError(SweepError, OSError):
    """A result directory or Parquet file is missing, foreign or inconsistent."""


class SweepResumeError(SweepStoreError):
    """A result directory holds a different sweep, or results while resume is off."""


class DamagedPartError(SweepStoreError):
    """A stored part is corrupted, shorter than recorded, a duplicate of another part's cells,
    or missing; ``part`` is its path. Resume can recompute it when asked (``recompute_damaged``)."""

    def __init__(self, part: str, message: str) -> None:
        super().__init__(message)
        self.part = part

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class RowNotFoundError(SweepStoreError, KeyError):
    """No stored row has this row id."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""
