# SPDX-License-Identifier: MIT
"""Argument types and small helpers shared by every ``pydepth`` subcommand."""
from __future__ import annotations

import argparse
import json
import os
import math
import sys
from typing import Any, Callable, List, Optional, Sequence

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


_DIGITS = 40  # longer than any integer an option takes: refused before int() reads it


def _short(text: str, what: str) -> str:
    if len(text.strip()) > _DIGITS:
        raise argparse.ArgumentTypeError(f"expected {what}, got a {len(text.strip())}-character number")
    return text


def seed(text: str) -> int:
    """A SplitMix64 seed in [0, 2**64)."""
    try:
        v = int(_short(text, "a seed in [0, 2**64)"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"seed must be an integer, got {text!r}") from None
    if not 0 <= v < 2**64:
        raise argparse.ArgumentTypeError(f"seed must be in [0, 2**64), got {v}")
    return v


def _integer(text: str, low: int, what: str) -> int:
    try:
        v = int(_short(text, what))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if v < low:
        raise argparse.ArgumentTypeError(f"expected {what}, got {v}")
    return v


def positive(text: str) -> int:
    """A positive integer."""
    return _integer(text, 1, "a positive integer")


def nonnegative(text: str) -> int:
    """A non-negative integer."""
    return _integer(text, 0, "a non-negative integer")


def nonnegative_float(text: str) -> float:
    """A finite non-negative number."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(v) or v < 0.0:
        raise argparse.ArgumentTypeError(f"expected a finite non-negative number, got {text!r}")
    return v


def error(message: str) -> None:
    """Writes ``pydepth: error: message`` to stderr."""
    sys.stderr.write(f"pydepth: error: {message}\n")


def plot_missing() -> bool:
    """True (after saying so) when matplotlib is missing; checked before any work."""
    from ..plots.style import PlotDependencyError, pyplot
    try:
        pyplot()
    except PlotDependencyError as err:
        error(str(err))
        return True
    return False


def load_config(path: str) -> Any:
    """A DecoderConfig from a JSON file (``to_dict()`` form, or ``{"config": {...}}``)."""
    from ..config import DecoderConfig
    from ..errors import ConfigError
    from .._files.reading import read_json
    data = read_json(path, "configuration", ConfigError)
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


def band(text: str) -> Any:
    """``LOW,HIGH``: an inclusive health band (checked like the API's ``band=``)."""
    from ..errors import InvalidBandError
    from ..health import check_band
    try:
        return check_band([float(x) for x in text.split(",")])
    except (ValueError, InvalidBandError) as err:
        raise argparse.ArgumentTypeError(
            f"--band expects LOW,HIGH with 0 <= LOW <= HIGH, got {text!r} ({err})") from None


def add_band(p: argparse.ArgumentParser) -> None:
    """``--band LOW,HIGH`` (default the chapter's 0.01,100)."""
    p.add_argument("--band", type=band, default=None, metavar="LOW,HIGH",
                   help="inclusive band the ratios are classified in (default the chapter's 0.01,100); "
                   "recorded in the report")


def add_output(p: argparse.ArgumentParser) -> None:
    """``--format table|json`` and ``--output FILE``, the same on every subcommand: tables for
    people by default, a JSON document when asked."""
    p.add_argument("--format", choices=("json", "table"), default="table",
                   help="tables for people (default) or a JSON document")
    p.add_argument("--output", metavar="FILE", help="write the result to FILE instead of stdout")


def add_plot(p: argparse.ArgumentParser) -> None:
    """``--plot PATH`` for subcommands that draw one figure."""
    p.add_argument("--plot", metavar="PATH", help="also write the ratio plot: PATH ending in .png, "
                   ".svg or .pdf writes that file, any other PATH writes PATH.png and PATH.svg "
                   "(needs pip install 'pydepth[plot]')")


def emit(args: argparse.Namespace, doc: Any, text: str) -> None:
    """Writes ``doc`` as JSON or ``text`` (per ``--format``) to ``--output`` or stdout."""
    body = (json.dumps(doc, indent=1) if args.format == "json" else text) + "\n"
    if getattr(args, "output", None):
        from .._files.atomic import write_atomically
        from ..errors import OutputFileError
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        write_atomically(args.output, lambda fh: fh.write(body.encode("utf-8")), "result file", OutputFileError)
        sys.stderr.write(f"wrote {args.output}\n")
    else:
        sys.stdout.write(body)


def plot_paths(path: str, draw: Callable[[Any, Optional[Sequence[str]]], List[Any]]) -> List[Any]:
    """Calls ``draw(target, formats)`` for ``--plot PATH`` (see :func:`add_plot`); creates the
    parent directory."""
    import pathlib
    target = pathlib.Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.suffix.lower() in (".png", ".svg", ".pdf"):
        return draw(target, None)
    return draw(target, ("png", "svg"))
