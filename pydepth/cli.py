"""The ``pydepth`` command line: ``demo``, ``observe``, ``trace`` and ``laptop``.

Exit codes: 0 success; 1 a refused input or a failed self-check (message on stderr);
2 usage errors and a missing optional dependency (``--plot`` without matplotlib).
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, List, Optional, Sequence

import numpy as np

__all__ = ["build_parser", "main"]


def _ints(text: str) -> List[int]:
    try:
        return [int(x) for x in text.replace(" ", "").split(",") if x != ""]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _bits(text: str) -> List[bool]:
    values = _ints(text)
    bad = [v for v in values if v not in (0, 1)]
    if bad:
        raise argparse.ArgumentTypeError(f"validity flags must be 0 or 1, got {bad[0]}")
    return [bool(v) for v in values]


def _seed(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"seed must be an integer, got {text!r}") from None
    if not 0 <= v < 2**64:
        raise argparse.ArgumentTypeError(f"seed must be in [0, 2**64), got {v}")
    return v


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="pydepth", description="Depth-scaled initialization and residual health of small "
        "float64 decoders (chapter 6).")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    demo = sub.add_parser("demo", help="run the chapter's fixed example (four seeded fixtures)")
    demo.add_argument("--format", choices=("json", "table"), default="json",
                      help="JSON document (default) or tables for people")
    demo.add_argument("--plot", metavar="DIR", help="also write ratio plots (PNG and SVG) into DIR "
                      "(needs pip install 'pydepth[plot]')")

    observe = sub.add_parser("observe", help="depth-initialize a configured decoder and observe "
                             "its residual health")
    observe.add_argument("--config", required=True, metavar="CONFIG.json",
                         help="DecoderConfig as JSON (DecoderConfig.to_dict(), or {'config': {...}})")
    observe.add_argument("--seed", required=True, type=_seed, help="SplitMix64 seed")
    observe.add_argument("--tokens", required=True, type=_ints, help="comma-separated input ids, row-major")
    observe.add_argument("--targets", required=True, type=_ints, help="comma-separated target ids, row-major")
    observe.add_argument("--valid", type=_bits, help="comma-separated 0/1 validity flags, row-major; "
                         "0 marks padding (one segment per row)")
    observe.add_argument("--batch", type=_positive, default=1, help="number of rows (default 1)")
    observe.add_argument("--format", choices=("json", "table"), default="json")
    observe.add_argument("--plot", metavar="FILE", help="also write a ratio plot to FILE (.png/.svg)")

    trace = sub.add_parser("trace", help="export one fixture in the pydepth-reference-trace-v1 schema")
    trace.add_argument("--config", required=True, metavar="CONFIG.json")
    trace.add_argument("--seed", required=True, type=_seed)
    trace.add_argument("--tokens", required=True)
    trace.add_argument("--targets", required=True)
    trace.add_argument("--batch", type=_positive, default=1)
    trace.add_argument("--output", metavar="FILE", help="write here instead of stdout")
    trace.add_argument("--id", help="fixture id in the document (default 'custom')")

    laptop = sub.add_parser("laptop", help="run the laptop-scale decoder")
    laptop.add_argument("--tokens", type=_positive, default=None,
                        help="tokens per pass (default 512, or max positions if smaller)")
    laptop.add_argument("--format", choices=("json", "table"), default="table")
    laptop.add_argument("--control", action="store_true", help="also run the same-base unscaled control")
    laptop.add_argument("--seed", type=_seed, default=4701)
    for flag in ("--vocabulary-size", "--model-width", "--layers", "--heads", "--kv-heads",
                 "--feed-forward-width", "--max-positions"):
        laptop.add_argument(flag, type=_positive, default=None, help="override (reduced test sizes)")
    return parser


def _error(message: str) -> None:
    sys.stderr.write(f"pydepth: error: {message}\n")


def _emit_plot_missing(err: Exception) -> int:
    _error(str(err))
    return 2


def _run_demo(args: argparse.Namespace) -> int:
    from .demo import DemoCheckError, demo_table, demo_trace
    if args.plot:
        from .plots import PlotDependencyError, _pyplot
        try:
            _pyplot()  # fail before the work, with the extra's name
        except PlotDependencyError as err:
            return _emit_plot_missing(err)
    try:
        doc = demo_trace()
    except DemoCheckError as err:
        _error(str(err))
        return 1
    if args.format == "json":
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
    else:
        sys.stdout.write(demo_table(doc) + "\n")
    if args.plot:
        from .plots import plot_demo
        for path in plot_demo(doc, args.plot):
            sys.stderr.write(f"wrote {path}\n")
    return 0


def _load_config(path: str) -> Any:
    from .config import DecoderConfig
    with open(path) as fh:
        data = json.load(fh)
    if isinstance(data, dict) and "config" in data and isinstance(data["config"], dict):
        data = data["config"]
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return DecoderConfig.from_dict(data)


def _rows(name: str, values: Sequence[Any], batch: int) -> np.ndarray:
    if not values or len(values) % batch:
        raise ValueError(f"{len(values)} {name} cannot be split into {batch} equal rows")
    return np.array(values).reshape(batch, len(values) // batch)


def _run_observe(args: argparse.Namespace) -> int:
    from ._core import SplitMix64
    from .batch import Batch
    from .depth_init import DepthInitializationBudget, FreshDepthInitialization
    from .health import observe_residual_health
    if args.plot:
        from .plots import PlotDependencyError, _pyplot
        try:
            _pyplot()
        except PlotDependencyError as err:
            return _emit_plot_missing(err)
    cfg = _load_config(args.config)
    tokens = _rows("tokens", args.tokens, args.batch).astype(np.int64)
    targets = _rows("targets", args.targets, args.batch).astype(np.int64)
    if targets.shape != tokens.shape:
        raise ValueError(f"targets shape {targets.shape} differs from tokens shape {tokens.shape}")
    rng = SplitMix64(args.seed)
    fresh = FreshDepthInitialization.prepare(
        cfg, DepthInitializationBudget(cfg.parameter_count, cfg.max_positions), rng)
    init = fresh.complete()
    model = init.model
    if args.valid is not None:
        valid = _rows("validity flags", args.valid, args.batch).astype(bool)
        if valid.shape != tokens.shape:
            raise ValueError(f"validity shape {valid.shape} differs from tokens shape {tokens.shape}")
        rows = np.arange(tokens.shape[0])[:, None]
        source: Any = Batch(tokens, targets, np.where(valid, rows, -1))
        fwd = model.forward(source)
        loss = fwd.loss()
    else:
        fwd = model.forward(tokens)
        loss = fwd.loss(targets)
    report = observe_residual_health(model, fwd, loss)
    doc = {"config": cfg.to_dict(), "seed": args.seed, "token_shape": list(tokens.shape),
           "record": init.record.to_dict(), "loss": loss.item(), "report": report.to_dict()}
    if args.format == "json":
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
    else:
        sys.stdout.write(report.to_table(
            f"Depth-initialized decoder: {cfg.layers} blocks, width {cfg.model_width}, factor "
            f"{init.record.factor:.6f}, seed {args.seed}, mean loss {loss.item():.6f} nats") + "\n")
    if args.plot:
        from .plots import plot_report
        sys.stderr.write(f"wrote {plot_report(doc['report'], args.plot)}\n")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the command line; returns the exit code."""
    from .errors import PydepthError
    args = build_parser().parse_args(argv)
    try:
        if args.command == "demo":
            return _run_demo(args)
        if args.command == "observe":
            return _run_observe(args)
        if args.command == "trace":
            from . import trace
            return int(trace.main(args) or 0)
        if args.command == "laptop":
            from . import laptop
            return int(laptop.main(args) or 0)
    except (PydepthError, ValueError, OSError) as err:
        _error(str(err))
        return 1
    raise AssertionError(f"unhandled command {args.command!r}")  # argparse restricts choices


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
