# SPDX-License-Identifier: MIT
"""`pydepth laptop`: the chapter's 32.5M-parameter laptop plan, built and run once."""
from __future__ import annotations

import sys
import time
from typing import Any, Dict, Optional, Sequence, TextIO, Tuple

import numpy as np

from .._native._rng import SplitMix64
from .._native._memory import peak_rss_mb
from ..config import DecoderConfig
from ..depth_init import DepthInitializationBudget, FreshDepthInitialization
from ..health import check_band, observe_residual_health
from ..model import DecoderModel
from ..threads import get_num_threads

#: The chapter's laptop-scale decoder: 32,514,560 parameters.
LAPTOP_CONFIG = DecoderConfig(vocabulary_size=16384, model_width=512, heads=8, feed_forward_width=1536,
                              layers=8, max_positions=512, kv_heads=2)
#: The same configuration as a dict (DecoderConfig.to_dict()).
PLAN = LAPTOP_CONFIG.to_dict()


def plan_config(overrides: Optional[Dict[str, Any]] = None) -> DecoderConfig:
    """The laptop plan's configuration, with optional overrides for reduced sizes."""
    d = dict(PLAN)
    d.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return DecoderConfig.from_dict(d)


def deterministic_batch(cfg: DecoderConfig, tokens: int) -> Tuple[np.ndarray, np.ndarray]:
    """One row of `tokens` positions: ids (7919*i + 11) mod V, targets shifted by one."""
    if tokens < 1 or tokens > cfg.max_positions:
        raise ValueError(f"tokens per pass must be in [1, {cfg.max_positions}] (the plan's max positions), "
                         f"got {tokens}")
    ids = (np.arange(tokens + 1, dtype=np.int64) * 7919 + 11) % cfg.vocabulary_size
    return ids[:-1].reshape(1, -1), ids[1:].reshape(1, -1)


class _Progress:
    def __init__(self, out: TextIO) -> None:
        self.t0 = time.perf_counter()
        self.out = out

    def __call__(self, message: str) -> None:
        self.out.write(f"[{time.perf_counter() - self.t0:7.2f}s] {message}\n")
        self.out.flush()


def _run(model: DecoderModel, ids: np.ndarray, targets: np.ndarray, label: str, say: _Progress,
         band: Optional[Sequence[float]]) -> Dict[str, Any]:
    say(f"{label}: forward ({ids.shape[1]} tokens)")
    t0 = time.perf_counter()
    fwd = model.forward(ids, keep="training")  # a training step's memory; the same bits
    loss = fwd.loss(targets)
    t1 = time.perf_counter()
    say(f"{label}: loss {loss.item():.6f} nats; backward and residual health")
    report = observe_residual_health(model, fwd, loss, band=band)
    t2 = time.perf_counter()
    return {"label": label, "loss": loss.item(), "forward_seconds": t1 - t0,
            "backward_and_observe_seconds": t2 - t1, "report": report}


def run_plan(cfg: DecoderConfig, tokens: int, *, seed: int = 4701, control: bool = False,
             progress: Optional[TextIO] = None, band: Optional[Sequence[float]] = None) -> Dict[str, Any]:
    """Prepares and completes the plan through FreshDepthInitialization, then runs one
    forward+backward with residual health (and the same-base unscaled control if asked),
    classified in ``band`` (default the chapter's)."""
    band = check_band(band)
    say = _Progress(progress or sys.stderr)
    ids, targets = deterministic_batch(cfg, tokens)
    rng = SplitMix64(seed)
    budget = DepthInitializationBudget.for_config(cfg)
    say(f"preparing base model: {cfg.parameter_count:,} parameters, {get_num_threads()} threads")
    t0 = time.perf_counter()
    fresh = FreshDepthInitialization.prepare(cfg, budget, rng)
    control_model = fresh.base_model.clone() if control else None
    init = fresh.complete()
    del fresh
    build_seconds = time.perf_counter() - t0
    say(f"initialized with factor {init.record.factor:.6f} ({init.record.transformed_tensors} tensors scaled)")
    runs = [_run(init.model, ids, targets, "initialized", say, band)]
    if control_model is not None:
        runs.append(_run(control_model, ids, targets, "same_base_unscaled_control", say, band))
    say("done")
    return {"config": cfg.to_dict(), "parameter_count": cfg.parameter_count, "tokens": tokens,
            "seed": seed, "threads": get_num_threads(), "build_seconds": build_seconds,
            "record": init.record.to_dict(), "runs": runs, "peak_rss_mib": peak_rss_mb()}
