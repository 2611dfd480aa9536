# SPDX-License-Identifier: MIT
"""``pydepth observe`` on a Hugging Face model directory or config: residual health through
:func:`pydepth.torch.observe_residual_health` (kept apart from the pydepth-config path)."""
from __future__ import annotations

import argparse

import numpy as np

from . import _args


def run(args: argparse.Namespace) -> int:
    """Observes a Hugging Face model; ``--targets`` are its labels (shifted inside the model;
    default the inputs), ``--valid`` its attention mask. Returns the exit code."""
    from ..errors import TorchDependencyError
    from ._models import load_torch_model
    if args.control:
        raise ValueError("--control needs a pydepth config (a Hugging Face model has no same-base "
                         "unscaled draw)")
    if args.plot and _args.plot_missing():
        return 2
    try:
        module, description = load_torch_model(args.config, seed=args.seed)
        from ..torch import observe_residual_health
    except TorchDependencyError as err:
        _args.error(str(err))
        return 2
    import torch
    tokens = torch.from_numpy(_args.rows("tokens", args.tokens, args.batch_rows).astype(np.int64))
    labels = mask = None
    if args.targets is not None:
        labels = torch.from_numpy(_args.rows("labels", args.targets, args.batch_rows).astype(np.int64))
    if args.valid is not None:
        mask = torch.from_numpy(_args.rows("validity flags", args.valid, args.batch_rows).astype(np.int64))
    report = observe_residual_health(module, tokens, labels, attention_mask=mask, band=args.band)
    doc = {"model": description, "seed": args.seed, "token_shape": list(tokens.shape), "report": report.to_dict()}
    _args.emit(args, doc, report.to_table(f"{description}: residual health"))
    if args.plot:
        from ..plots.health import plot_report
        for path in _args.plot_paths(_args.in_dir(args.plot, "health"), lambda target, formats: plot_report(
                report, target, model=description, seed=args.seed, formats=formats, label="observed")):
            _args.note(args, f"wrote {path}")
    return 0
