# SPDX-License-Identifier: MIT
"""Argument types and small helpers shared by every ``pydepth`` subcommand."""
from __future__ import annotations

import argparse
import json
import os
import math
import sys
from typing import Any, Callable, List, Optional, Sequence, Tuple

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


def log_spec(text: str) -> Any:
    """A ``--log`` spec, ``KIND[:PLACE]`` (pydepth.monitoring.targets owns the kinds)."""
    from ..errors import LogSpecError
    from ..monitoring.targets import parse_log_spec
    try:
        return parse_log_spec(text)
    except LogSpecError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


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


#: The seed the chapter initializes every fixture with, the default of every ``--seed``.
CHAPTER_SEED = 4701


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
    """Row-major values split into ``batch`` equal rows of int64 (a value beyond int64 is refused,
    named, before numpy would overflow converting it)."""
    from ..errors import TokenError
    if not values or len(values) % batch:
        raise ValueError(f"{len(values)} {name} cannot be split into {batch} equal rows")
    for i, v in enumerate(values):
        if not -2**63 <= v < 2**63:
            raise TokenError(f"{name} value {v} at position {i} is outside the int64 range of token ids")
    return np.array(values, dtype=np.int64).reshape(batch, len(values) // batch)


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


def add_engine(p: argparse.ArgumentParser) -> None:
    """The sweep engine's flags, the same on every subcommand that runs a grid of cells:
    ``--scheduler``, ``--workers``, ``--no-resume`` and ``--recompute-damaged``."""
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="Dask scheduler address (tcp://HOST:PORT), or local, threads, serial; default "
                        "$DASK_SCHEDULER_ADDRESS, else a local cluster of one worker process per core")
    p.add_argument("--workers", type=positive, default=None, metavar="N",
                   help="worker processes of the local cluster (default: one per core)")
    p.add_argument("--no-resume", dest="resume", action="store_false",
                   help="refuse a result directory that already holds results instead of resuming it")
    p.add_argument("--recompute-damaged", action="store_true",
                   help="on resume, move parts that fail verification (hash, row count, page checksums, "
                        "duplicated cells) to DIR/_damaged/ and recompute their cells, instead of refusing")


def add_output(p: argparse.ArgumentParser) -> None:
    """``--format table|json`` and ``--output FILE``, the same on every subcommand: tables for
    people by default, a JSON document when asked."""
    p.add_argument("--format", choices=("json", "table"), default="table",
                   help="tables for people (default) or a JSON document")
    p.add_argument("--output", metavar="FILE", help="write the result to FILE instead of stdout")


def add_plot(p: argparse.ArgumentParser, what: str = "the ratio plot") -> None:
    """``--plot DIR``, the same on every subcommand that draws: figures (PNG and SVG) into DIR."""
    p.add_argument("--plot", metavar="DIR", help=f"also write {what} (PNG and SVG) into DIR "
                   "(needs pip install 'pydepth[plot]')")


def add_seed(p: argparse.ArgumentParser, what: str = "SplitMix64 seed of the base initializer") -> None:
    """``--seed S``, optional everywhere, default the chapter's 4701."""
    p.add_argument("--seed", type=seed, default=CHAPTER_SEED, metavar="S",
                   help=f"{what} (default the chapter's {CHAPTER_SEED})")


def note(args: argparse.Namespace, text: str) -> None:
    """A line for people on stderr (progress, 'wrote ...'), unless ``--quiet``."""
    if not getattr(args, "quiet", False):
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


def file_error(err: OSError) -> str:
    """One form for every file error: ``PATH: reason`` (other OS errors keep their own text)."""
    if err.filename is None or not err.strerror:
        return str(err)
    return f"{err.filename}: {err.strerror[0].lower()}{err.strerror[1:]}"


def emit(args: argparse.Namespace, doc: Any, text: str) -> None:
    """Writes ``doc`` as JSON or ``text`` (per ``--format``) to ``--output`` or stdout."""
    body = (json.dumps(doc, indent=1) if args.format == "json" else text) + "\n"
    if getattr(args, "output", None):
        from .._files.atomic import write_atomically
        from ..errors import OutputFileError
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        write_atomically(args.output, lambda fh: fh.write(body.encode("utf-8")), "result file", OutputFileError)
        note(args, f"wrote {args.output}")
    else:
        sys.stdout.write(body)


def plot_paths(path: str, draw: Callable[[Any, Optional[Sequence[str]]], List[Any]]) -> List[Any]:
    """Calls ``draw(target, formats)``: a PATH ending in .png, .svg or .pdf is that file, any other
    PATH means PATH.png and PATH.svg; creates the parent directory."""
    import pathlib
    target = pathlib.Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.suffix.lower() in (".png", ".svg", ".pdf"):
        return draw(target, None)
    return draw(target, ("png", "svg"))


def in_dir(directory: str, stem: str) -> str:
    """``--plot DIR``'s figure ``stem`` (``plot_paths`` writes ``stem.png`` and ``stem.svg``)."""
    import pathlib
    return str(pathlib.Path(directory) / stem)


def inputs_and_targets(tokens: Sequence[int], targets: Optional[Sequence[int]],
                       batch_rows: int) -> Tuple[np.ndarray, np.ndarray]:
    """The input and target rows; without ``targets``, each row's tokens shifted by one (inputs all
    but the last token, targets all but the first)."""
    ids: np.ndarray = rows("tokens", tokens, batch_rows).astype(np.int64)
    if targets is not None:
        wanted: np.ndarray = rows("targets", targets, batch_rows).astype(np.int64)
        if wanted.shape != ids.shape:
            raise ValueError(f"targets shape {wanted.shape} differs from tokens shape {ids.shape}")
        return ids, wanted
    if ids.shape[1] < 2:
        raise ValueError(f"without --targets each row needs at least 2 tokens (the targets are the tokens "
                         f"shifted by one), got {ids.shape[1]}")
    return np.ascontiguousarray(ids[:, :-1]), np.ascontiguousarray(ids[:, 1:])
