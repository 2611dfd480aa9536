"""Argument types and small helpers shared by every ``pydepth`` subcommand."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, List, Sequence

import numpy as np


def ints(text: str) -> List[int]:
    """Comma-separated integers (``"0,99,100"``)."""
    try:
        return [int(x) for x in text.replace(" ", "").split(",") if x != ""]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def bits(text: str) -> List[bool]:
    """Comma-separated 0/1 flags."""
    values = ints(text)
    bad = [v for v in values if v not in (0, 1)]
    if bad:
        raise argparse.ArgumentTypeError(f"validity flags must be 0 or 1, got {bad[0]}")
    return [bool(v) for v in values]


def seed(text: str) -> int:
    """A SplitMix64 seed in [0, 2**64)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"seed must be an integer, got {text!r}") from None
    if not 0 <= v < 2**64:
        raise argparse.ArgumentTypeError(f"seed must be in [0, 2**64), got {v}")
    return v


def positive(text: str) -> int:
    """A positive integer."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


def error(message: str) -> None:
    """Writes ``pydepth: error: message`` to stderr."""
    sys.stderr.write(f"pydepth: error: {message}\n")


def plot_missing() -> bool:
    """True (after saying so) when matplotlib is missing; checked before any work."""
    from ..plots import PlotDependencyError, _pyplot
    try:
        _pyplot()
    except PlotDependencyError as err:
        error(str(err))
        return True
    return False


def load_config(path: str) -> Any:
    """A DecoderConfig from a JSON file (``to_dict()`` form, or ``{"config": {...}}``)."""
    from ..config import DecoderConfig
    with open(path) as fh:
        data = json.load(fh)
    if isinstance(data, dict) and "config" in data and isinstance(data["config"], dict):
        data = data["config"]
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return DecoderConfig.from_dict(data)


def rows(name: str, values: Sequence[Any], batch: int) -> np.ndarray:
    """Row-major values split into ``batch`` equal rows."""
    if not values or len(values) % batch:
        raise ValueError(f"{len(values)} {name} cannot be split into {batch} equal rows")
    return np.array(values).reshape(batch, len(values) // batch)
