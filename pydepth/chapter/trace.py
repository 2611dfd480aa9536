# SPDX-License-Identifier: MIT
"""Export one fixture in the pydepth-reference-trace-v1 schema (bit patterns as hex)."""
from __future__ import annotations

import math
from typing import Any, Dict, Optional

import numpy as np

from .._native._bits import float_bits, hex_bits
from .._native._rng import SplitMix64
from ..config import DecoderConfig
from ..depth_init import DepthScalePolicy
from ..errors import MissingAdjointError, TokenError
from ..health import sequential_sum
from ..model import DecoderModel

__all__ = ["FORMAT", "ENCODING", "hex_bits", "float_bits", "plain_rms", "depth_factor",
           "model_trace", "fixture_trace"]

#: The format identifier every exported trace carries.
FORMAT = "pydepth-reference-trace-v1"
#: How a trace writes each value.
ENCODING = "IEEE-754 binary64 bit patterns as 16 lowercase hex digits, row-major"


def plain_rms(x: np.ndarray) -> float:
    """sqrt(sum(x*x)/n) with the sum taken sequentially in row-major order from +0.0."""
    flat = np.asarray(x, dtype=np.float64).reshape(-1)
    return math.sqrt(sequential_sum(flat * flat) / float(flat.size))


def depth_factor(layers: int) -> float:
    """The depth policy's factor 1/sqrt(layers); inf for zero layers, which the trace records
    although the policy refuses them."""
    return DepthScalePolicy(layers).factor if layers else math.inf


def _entry(name: str, value: np.ndarray) -> Dict[str, Any]:
    return {"name": name, "shape": list(value.shape), "bits": hex_bits(value)}


def model_trace(model: DecoderModel, tokens: np.ndarray, targets: np.ndarray) -> Dict[str, Any]:
    """Parameters, every forward value, site adjoints and gradients of one model."""
    model.zero_grad()
    fwd = model.forward(tokens, record=True)
    loss = fwd.loss(targets)
    forward = [_entry(name, fwd.named(name).value) for name in fwd.names()]
    forward.append({"name": "loss", "shape": [], "bits": hex_bits(loss.value)})
    sites = fwd.residual_sites
    found = loss.backward_with_selected_adjoints(list(sites))
    missing = [i for i, a in enumerate(found) if a is None]
    if missing:
        raise MissingAdjointError(f"site {missing[0]} has no completed adjoint")
    adjoints = [a for a in found if a is not None]
    out = {
        "parameters": [_entry(p.name, p.value) for p in model.parameters],
        "forward": forward,
        "site_adjoints": [_entry(f"site.{i}", a) for i, a in enumerate(adjoints)],
        "parameter_gradients": [_entry(p.name, p.grad) for p in model.parameters],
        "site_activation_rms": [float_bits(plain_rms(s.value)) for s in sites],
        "site_adjoint_rms": [float_bits(plain_rms(a)) for a in adjoints],
    }
    model.zero_grad()
    return out


def _id_array(name: str, values: Any, batch: Optional[int]) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype.kind not in "iu":
        raise TokenError(f"{name} must be integer ids, got dtype {arr.dtype}")
    if arr.ndim == 1:
        b = batch or 1
        if b <= 0 or arr.size % b:
            raise TokenError(f"{arr.size} {name} cannot be split into {b} rows")
        arr = arr.reshape(b, arr.size // b)
    return arr


def fixture_trace(cfg: DecoderConfig, seed: int, tokens: Any, targets: Any, *,
                  fixture_id: str = "custom", batch: Optional[int] = None) -> Dict[str, Any]:
    """One fixture: the same base draws as a depth-initialized model (the depth policy applied:
    selected weights times 1/sqrt(layers) when layers > 1) and as the unscaled control."""
    tok = _id_array("tokens", tokens, batch)
    tgt = _id_array("targets", targets, tok.shape[0])
    rng = SplitMix64(seed)
    initial = rng.state
    base = DecoderModel(cfg, rng)
    factor = depth_factor(cfg.layers)
    # zero blocks select nothing, so the initialized variant is then a plain copy
    initialized = (DecoderModel.from_parameters(cfg, DepthScalePolicy(cfg.layers).apply(base.parameters))
                   if cfg.layers else base.clone())
    return {
        "id": fixture_id,
        "config": cfg.to_dict(),
        "seed": int(seed),
        "initial_rng_state": str(initial),
        "final_rng_state": str(rng.state),
        "factor": float_bits(factor),
        "token_shape": list(tok.shape),
        "tokens": [int(x) for x in tok.reshape(-1)],
        "targets": [int(x) for x in tgt.reshape(-1)],
        "parameter_count": cfg.parameter_count,
        "initialized": model_trace(initialized, tok, tgt),
        "same_base_unscaled_control": model_trace(base, tok, tgt),
    }
