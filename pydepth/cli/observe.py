# SPDX-License-Identifier: MIT
"""``pydepth observe``: depth-initialize a configured decoder and observe its residual health."""
from __future__ import annotations

import argparse
import sys
from typing import Any, Dict, Optional

import numpy as np

from . import _args


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds the ``observe`` subcommand and its options."""
    p = sub.add_parser("observe", help="depth-initialize a configured decoder and observe "
                       "its residual health", description="Depth-initialize the decoder CONFIG.json "
                       "describes from SEED, run one forward and backward pass on the given tokens, "
                       "and report residual activation and adjoint RMS ratios at every site.")
    p.add_argument("--config", required=True, metavar="CONFIG.json",
                   help="DecoderConfig as JSON (DecoderConfig.to_dict(), or {'config': {...}}), or a "
                   "Hugging Face config.json or local model directory (observed through pydepth.torch)")
    p.add_argument("--seed", type=_args.seed, default=None,
                   help="SplitMix64 seed of the base initializer (a Hugging Face config: the torch seed of "
                   "its random initialization); required unless --config is a saved model with weights")
    p.add_argument("--tokens", required=True, type=_args.ints, metavar="IDS",
                   help="comma-separated input ids, row-major")
    p.add_argument("--targets", type=_args.ints, metavar="IDS",
                   help="comma-separated target ids, row-major (required for pydepth configs; for "
                   "Hugging Face models their labels, shifted inside the model, default the inputs)")
    p.add_argument("--valid", type=_args.bits, metavar="FLAGS",
                   help="comma-separated 0/1 validity flags, row-major; 0 marks padding (one segment per row)")
    p.add_argument("--batch", type=_args.positive, default=1, help="number of rows (default 1)")
    p.add_argument("--control", action="store_true",
                   help="also observe the same-base unscaled control (the base draw before depth scaling)")
    _args.add_band(p)
    _args.add_output(p)
    _args.add_plot(p)


def _observe(model: Any, tokens: np.ndarray, targets: np.ndarray, valid: Any, band: Any) -> Dict[str, Any]:
    from ..batch import Batch
    from ..health import observe_residual_health
    if valid is not None:
        row_ids = np.arange(tokens.shape[0])[:, None]
        fwd = model.forward(Batch(tokens, targets, np.where(valid, row_ids, -1)), keep="training")
        loss = fwd.loss()
    else:
        fwd = model.forward(tokens, keep="training")
        loss = fwd.loss(targets)
    return {"loss": loss.item(), "report": observe_residual_health(model, fwd, loss, band=band)}


def run(args: argparse.Namespace) -> int:
    """Runs ``pydepth observe``; returns the exit code."""
    from .._native._rng import SplitMix64
    from ..depth_init import DepthInitializationBudget, FreshDepthInitialization
    from . import _models, _observe_torch
    if _models.is_hf_source(args.config):
        return _observe_torch.run(args)
    if args.seed is None:
        _args.error("--seed is required for a pydepth config (the SplitMix64 seed of its initialization)")
        return 2
    if args.targets is None:
        raise ValueError("--targets is required for a pydepth config")
    if args.plot and _args.plot_missing():
        return 2
    cfg = _args.load_config(args.config)
    tokens: np.ndarray = _args.rows("tokens", args.tokens, args.batch).astype(np.int64)
    targets: np.ndarray = _args.rows("targets", args.targets, args.batch).astype(np.int64)
    if targets.shape != tokens.shape:
        raise ValueError(f"targets shape {targets.shape} differs from tokens shape {tokens.shape}")
    valid: Optional[np.ndarray] = None
    if args.valid is not None:
        valid = _args.rows("validity flags", args.valid, args.batch).astype(bool)
        if valid.shape != tokens.shape:
            raise ValueError(f"validity shape {valid.shape} differs from tokens shape {tokens.shape}")
    fresh = FreshDepthInitialization.prepare(cfg, DepthInitializationBudget.for_config(cfg), SplitMix64(args.seed))
    control_model = None
    if args.control:  # a copy of the actual base draw, before completion scales it
        control_model = fresh.base_model.clone()
    init = fresh.complete()
    observed = _observe(init.model, tokens, targets, valid, args.band)
    doc: Dict[str, Any] = {"config": cfg.to_dict(), "seed": args.seed, "token_shape": list(tokens.shape),
                           "record": init.record.to_dict(), "loss": observed["loss"],
                           "report": observed["report"].to_dict()}
    control = None
    if control_model is not None:
        control = _observe(control_model, tokens, targets, valid, args.band)
        doc["same_base_unscaled_control"] = {"loss": control["loss"], "report": control["report"].to_dict()}
    title = (f"Depth-initialized decoder: {cfg.layers} blocks, width {cfg.model_width}, factor "
             f"{init.record.factor:.6f}, seed {args.seed}, mean loss {observed['loss']:.6f} nats")
    text = observed["report"].to_table(title)
    if control is not None:
        text += "\n\n" + control["report"].to_table(
            f"Same-base unscaled control: mean loss {control['loss']:.6f} nats")
    _args.emit(args, doc, text)
    if args.plot:
        from ..plots.health import describe_config, plot_report
        from ..plots.style import policy_label
        for path in _args.plot_paths(args.plot, lambda target, formats: plot_report(
                observed["report"], target, control=None if control is None else control["report"],
                model=describe_config(cfg), seed=args.seed, formats=formats,
                policy=policy_label(init.record.factor))):
            sys.stderr.write(f"wrote {path}\n")
    return 0
