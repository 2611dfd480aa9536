# SPDX-License-Identifier: MIT
"""``pydepth audit``: compare every weight matrix's standard deviation with a depth scheme."""
from __future__ import annotations

import argparse

from . import _args


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds the ``audit`` subcommand and its options."""
    p = sub.add_parser("audit", help="audit a model's initialization against a depth-scaling scheme "
                       "(pydepth config, Hugging Face config or local model directory)",
                       description="Measures the standard deviation of every weight matrix of MODEL and "
                       "compares the residual output projections with what a depth-scaling scheme predicts, "
                       "one verdict per matrix. Needs the 'torch' extra (pip install 'pydepth[torch]'; "
                       "'pydepth[hf]' for Hugging Face models).")
    p.add_argument("model", metavar="MODEL",
                   help="a pydepth DecoderConfig JSON, a Hugging Face config.json, or a local Hugging Face "
                   "model directory (its weights when present; nothing is downloaded)")
    p.add_argument("--scheme", default=None,
                   choices=("1/sqrt(L)", "1/sqrt(2L)", "per-layer", "megatron", "gpt2", "torchtitan"),
                   help="depth scheme the residual outputs should follow (default: the one recorded on the "
                   "model, else the known scheme it follows, else 1/sqrt(L); GPT-2, nanoGPT and Megatron "
                   "use 1/sqrt(2L), torchtitan per-layer)")
    p.add_argument("--base-std", type=float, default=None, metavar="STD",
                   help="base standard deviation (default: Xavier for pydepth, the config's "
                   "initializer_range for Hugging Face, else the median of the other matrices)")
    p.add_argument("--tolerance", type=float, default=0.2, metavar="TOL",
                   help="relative tolerance of an 'ok' verdict (default 0.2)")
    _args.add_seed(p, "seed of a randomly initialized model (SplitMix64 for pydepth, torch for "
                   "Hugging Face configs)")
    p.add_argument("--unscaled", action="store_true",
                   help="pydepth configs: audit the plain Xavier model instead of the depth-initialized one")
    p.add_argument("--strict", action="store_true", help="exit with status 1 when any matrix is not 'ok'")
    _args.add_output(p)


def run(args: argparse.Namespace) -> int:
    """Runs ``pydepth audit``; returns the exit code."""
    from ..errors import TorchDependencyError
    from ._models import load_torch_model
    try:
        module, description = load_torch_model(args.model, seed=args.seed, depth_init=not args.unscaled)
        from ..torch import audit_initialization
    except TorchDependencyError as err:
        _args.error(str(err))
        return 2
    audit = audit_initialization(module, scheme=args.scheme, base_std=args.base_std, tolerance=args.tolerance)
    _args.emit(args, {"model": description, "seed": args.seed, "audit": audit.to_dict()},
               description + "\n" + audit.to_table())
    return 1 if args.strict and not audit.ok else 0
