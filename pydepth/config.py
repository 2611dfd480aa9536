# SPDX-License-Identifier: MIT
"""DecoderConfig: validated decoder dimensions and the checked parameter census."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple

from ._native import _layout, _status
from ._checks import as_real, as_u64
from .errors import ConfigError


def _count(name: str, value: Any, *, allow_zero: bool = False) -> int:
    v = as_u64(name, value, ConfigError)
    if v == 0 and not allow_zero:
        raise ConfigError(f"{name} must be positive, got 0")
    return v


def _real(name: str, value: Any) -> float:
    return as_real(name, value, ConfigError)


@dataclass(frozen=True)
class DecoderConfig:
    """Dimensions of a decoder-only model; validated on construction, allocates nothing."""

    vocabulary_size: int
    model_width: int
    heads: int
    feed_forward_width: int
    layers: int
    max_positions: int
    kv_heads: int  # the constructor's None becomes heads (no grouped-query attention)
    rope_base: float = 10000.0
    rms_epsilon: float = 1e-6

    def __init__(self, vocabulary_size: int, model_width: int, heads: int,
                 feed_forward_width: int, layers: int, max_positions: int, *,
                 kv_heads: Optional[int] = None, rope_base: float = 10000.0,
                 rms_epsilon: float = 1e-6) -> None:
        # Checks follow the reference's order; kv_heads is checked right after heads.
        v = _count("vocabulary_size", vocabulary_size)
        w = _count("model_width", model_width)
        h = _count("heads", heads)
        if w % h:
            raise ConfigError(f"model_width {w} is not divisible by heads {h}")
        if (w // h) % 2:
            raise ConfigError(f"head width {w // h} (model_width {w} / heads {h}) is odd; RoPE needs pairs")
        kv = h if kv_heads is None else _count("kv_heads", kv_heads)
        if h % kv:
            raise ConfigError(f"kv_heads {kv} does not divide heads {h}")
        f = _count("feed_forward_width", feed_forward_width)
        layers_ = _count("layers", layers, allow_zero=True)
        p = _count("max_positions", max_positions)
        base = _real("rope_base", rope_base)
        if not math.isfinite(base) or base <= 0.0:
            raise ConfigError(f"rope_base must be finite and positive, got {base!r}")
        eps = _real("rms_epsilon", rms_epsilon)
        if not math.isfinite(eps) or eps < 0.0:
            raise ConfigError(f"rms_epsilon must be finite and non-negative, got {eps!r}")
        for name, val in (("vocabulary_size", v), ("model_width", w), ("heads", h),
                          ("feed_forward_width", f), ("layers", layers_), ("max_positions", p),
                          ("kv_heads", kv), ("rope_base", base), ("rms_epsilon", eps)):
            object.__setattr__(self, name, val)
        _ = self.parameter_count  # overflow is a configuration error, found now

    @property
    def head_width(self) -> int:
        """Features per attention head, model_width / heads."""
        return self.model_width // self.heads

    @property
    def kv_width(self) -> int:
        """Width of the key and value projections, kv_heads * head_width."""
        return self.kv_heads * self.head_width

    @property
    def parameter_count(self) -> int:
        """Total stored scalars, by the core's checked 64-bit arithmetic (nothing is allocated)."""
        try:
            return _layout.parameter_count(self._core_tuple())
        except _status.CoreError:
            raise ConfigError(f"the parameter count of {self.layers} blocks of width {self.model_width} "
                              f"(vocabulary {self.vocabulary_size}, feed-forward {self.feed_forward_width}) "
                              "overflows 64-bit size arithmetic") from None

    @property
    def parameter_tensor_count(self) -> int:
        """Number of parameter tensors: the core's layout tables (csrc/pd_params.h) over ``layers`` blocks."""
        return _layout.parameter_tensor_count(self._core_tuple())

    def parameter_layout(self) -> Tuple[Tuple[str, Tuple[int, ...]], ...]:
        """(name, shape) of every parameter tensor in declaration order, as the core lays them
        out (docs/numerics.md §3.1): linear weights are stored ``[in, out]``."""
        return _layout.parameter_layout(self._core_tuple())

    def _core_tuple(self) -> tuple:
        return (self.vocabulary_size, self.model_width, self.heads, self.kv_heads,
                self.feed_forward_width, self.layers, self.max_positions, self.rope_base,
                self.rms_epsilon)

    def to_dict(self) -> dict:
        """A JSON-serializable dict; from_dict(to_dict()) == self."""
        return {"vocabulary_size": self.vocabulary_size, "model_width": self.model_width,
                "heads": self.heads, "kv_heads": self.kv_heads,
                "feed_forward_width": self.feed_forward_width, "layers": self.layers,
                "max_positions": self.max_positions, "rope_base": self.rope_base,
                "rms_epsilon": self.rms_epsilon}

    def __reduce__(self) -> tuple:
        return (_from_pickle, (self.to_dict(),))

    def __setstate__(self, state: Any) -> None:
        """Pickles written with the default object state are validated like construction."""
        checked = DecoderConfig.from_dict(state)
        for name, value in checked.to_dict().items():
            object.__setattr__(self, name, value)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DecoderConfig:
        """Builds a config from to_dict() output (or a reference-trace config)."""
        if not isinstance(d, Mapping):
            raise ConfigError(f"a config must be a mapping, got {type(d).__name__}")
        required = ("vocabulary_size", "model_width", "heads", "feed_forward_width", "layers",
                    "max_positions")
        missing = [k for k in required if k not in d]
        if missing:
            raise ConfigError(f"config is missing {', '.join(missing)}")
        unknown = set(d) - set(required) - {"kv_heads", "rope_base", "rms_epsilon"}
        if unknown:
            raise ConfigError(f"config has unknown keys {sorted(unknown)}")
        return cls(*(d[k] for k in required), kv_heads=d.get("kv_heads"),
                   rope_base=d.get("rope_base", 10000.0), rms_epsilon=d.get("rms_epsilon", 1e-6))


def _from_pickle(d: Mapping[str, Any]) -> DecoderConfig:
    """Unpickling runs every check of construction (a pickle is untrusted input too)."""
    return DecoderConfig.from_dict(d)
