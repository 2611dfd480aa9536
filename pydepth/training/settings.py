# SPDX-License-Identifier: MIT
"""The settings of a training run: one frozen value, checked once on construction, written to and
read from a checkpoint's ``extra["train"]`` and built by the command line from its options."""
from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from .errors import SettingsClashError, TrainSettingsError

__all__ = ["TrainSettings", "POLICIES", "RUN_FIELDS", "RECORD_KEYS"]

#: Initialization policies: depth-scaled, or the same base draw unscaled.
POLICIES = ("scaled", "unscaled")
#: Settings that define the trajectory; a resumed run keeps them.
RUN_FIELDS = ("policy", "seed", "batch", "tokens", "lr", "min_lr", "warmup", "weight_decay")
#: Keys a checkpoint stores beside the settings to identify the text (not settings themselves).
RECORD_KEYS = ("text_sha256", "text_file")


def _integer(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _real(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


#: field -> (accepts the value, what it must be): the one place each setting is checked.
_CHECKS: Dict[str, Tuple[Callable[[Any], bool], str]] = {
    "policy": (lambda v: isinstance(v, str) and v in POLICIES, "one of 'scaled', 'unscaled'"),
    "seed": (lambda v: _integer(v) and 0 <= v < 2**64, "an integer in [0, 2**64)"),
    "batch": (lambda v: _integer(v) and v > 0, "a positive integer"),
    "tokens": (lambda v: v is None or (_integer(v) and v > 0), "a positive integer (or None: max_positions)"),
    "lr": (lambda v: _real(v) and v > 0, "a finite positive number"),
    "min_lr": (lambda v: v is None or (_real(v) and v >= 0), "finite and non-negative (or None: lr / 10)"),
    "warmup": (lambda v: v is None or (_integer(v) and v >= 0), "a non-negative integer (or None: steps // 10)"),
    "weight_decay": (lambda v: _real(v) and v >= 0, "finite and non-negative"),
    "steps": (lambda v: _integer(v) and v > 0, "a positive integer"),
    "observe_every": (lambda v: _integer(v) and v >= 0, "a non-negative integer"),
    "checkpoint_every": (lambda v: _integer(v) and v >= 0, "a non-negative integer"),
    "plot": (lambda v: v is None or isinstance(v, str), "a path string or None"),
}


@dataclasses.dataclass(frozen=True)
class TrainSettings:
    """How a byte-level AdamW run trains (warmup then cosine learning rate).

    ``policy`` depth-scaled or unscaled initialization from ``SplitMix64(seed)``, which then draws
    the batches; ``batch`` rows of ``tokens`` positions per step (None: the config's
    ``max_positions``); peak ``lr``, final ``min_lr`` (None: lr / 10), ``warmup`` steps (None:
    steps // 10), AdamW ``weight_decay``; train up to optimizer step ``steps``; observe residual
    health every ``observe_every`` steps from step 0 and at the end (0: never); a checkpoint every
    ``checkpoint_every`` steps (0: only the final one); ``plot`` the figure the command line
    draws at the end (None: none). Invalid values raise :class:`TrainSettingsError` naming the field."""

    policy: str = "scaled"
    seed: int = 0
    batch: int = 4
    tokens: Optional[int] = None
    lr: float = 3e-3
    min_lr: Optional[float] = None
    warmup: Optional[int] = None
    weight_decay: float = 0.01
    steps: int = 200
    observe_every: int = 0
    checkpoint_every: int = 0
    plot: Optional[str] = None

    def __post_init__(self) -> None:
        for name, (accepts, requirement) in _CHECKS.items():
            value = getattr(self, name)
            if not accepts(value):
                raise TrainSettingsError(name, value, requirement)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrainSettings:
        """Settings from ``to_dict()`` form (a checkpoint's ``extra["train"]``: its text keys are
        skipped, and missing keys take their defaults); an unknown key is refused, every value is
        checked as the command line's option is, and a stored ``plot`` must be a relative path
        inside the run's directory (it is read relative to that directory)."""
        if not isinstance(data, Mapping):
            raise TrainSettingsError("settings", data, "a mapping of setting names to values")
        unknown = [k for k in data if k not in _CHECKS and k not in RECORD_KEYS]
        if unknown:
            raise TrainSettingsError(str(unknown[0])[:80], data[unknown[0]], f"one of the settings {list(_CHECKS)}")
        settings = cls(**{k: v for k, v in data.items() if k in _CHECKS})
        if settings.plot is not None and not _inside_directory(settings.plot):
            raise TrainSettingsError("plot", settings.plot, "a relative path inside the run's directory "
                                     "(no leading '/', drive or '..')")
        return settings

    def to_dict(self) -> Dict[str, Any]:
        """The settings as a JSON-ready dict (field order)."""
        return dataclasses.asdict(self)

    def resolved(self, max_positions: int) -> TrainSettings:
        """The same settings with ``tokens``, ``min_lr`` and ``warmup`` made concrete."""
        return dataclasses.replace(
            self, tokens=max_positions if self.tokens is None else self.tokens,
            min_lr=self.lr / 10 if self.min_lr is None else self.min_lr,
            warmup=self.steps // 10 if self.warmup is None else self.warmup)

    def continued(self, given: Mapping[str, Any]) -> TrainSettings:
        """These (stored) settings for a resumed run: a run field given (not None) must equal the
        stored one (else :class:`SettingsClashError`); ``steps``, ``observe_every``,
        ``checkpoint_every`` and ``plot`` given replace the stored ones."""
        unknown = [k for k in given if k not in _CHECKS]
        if unknown:
            raise TrainSettingsError(str(unknown[0]), given[unknown[0]], f"one of the settings {list(_CHECKS)}")
        clashes = [(k, given[k], getattr(self, k)) for k in RUN_FIELDS
                   if given.get(k) is not None and given[k] != getattr(self, k)]
        if clashes:
            raise SettingsClashError(clashes)
        return dataclasses.replace(self, **{k: v for k, v in given.items()
                                            if k not in RUN_FIELDS and v is not None})


def _inside_directory(path: str) -> bool:
    """Whether path, read relative to a directory, stays inside it."""
    if not path or "\x00" in path or os.path.isabs(path) or os.path.splitdrive(path)[0]:
        return False
    parts = path.replace("\\", "/").split("/")
    return ".." not in parts and path not in (".", "./")
