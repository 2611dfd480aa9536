# SPDX-License-Identifier: MIT
"""``pydepth observe``: depth-initialize a configured decoder and observe its residual health."""
from __future__ import annotations

import argparse
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
    _args.add_seed(p, "SplitMix64 seed of the base initializer (a Hugging Face config: the torch seed of "
                   "its random initialization; unused for a saved model with weights)")
    p.add_argument("--tokens", required=True, type=_args.ints, metavar="IDS",
                   help="comma-separated input ids, row-major")
    p.add_argument("--targets", type=_args.ints, metavar="IDS",
                   help="comma-separated target ids, row-major (default: each row's tokens shifted by one, "
                   "the inputs being all but the last; for Hugging Face models their labels, shifted inside "
                   "the model, default the inputs)")
    p.add_argument("--valid", type=_args.bits, metavar="FLAGS",
                   help="comma-separated 0/1 validity flags, row-major; 0 marks padding (one segment per row)")
    p.add_argument("--batch-rows", type=_args.positive, default=1, metavar="N",
                   help="number of rows the ids are split into (default 1)")
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
    if args.plot and _args.plot_missing():
        return 2
    cfg = _args.load_config(args.config)
    tokens, targets = _args.inputs_and_targets(args.tokens, args.targets, args.batch_rows)
    valid: Optional[np.ndarray] = None
    if args.valid is not None:
        valid = _args.rows("validity flags", args.valid, args.batch_rows).astype(bool)
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
        for path in _args.plot_paths(_args.in_dir(args.plot, "health"), lambda target, formats: plot_report(
                observed["report"], target, control=None if control is None else control["report"],
                model=describe_config(cfg), seed=args.seed, formats=formats,
                policy=policy_label(init.record.factor))):
            _args.note(args, f"wrote {path}")
    return 0
