# SPDX-License-Identifier: MIT
"""Issue 40: the step time of `pydepth train`'s loop (run_training) with its steps in one core
call (DecoderModel.train_step, the loop as it is) against the five separate calls (the loop as
it was), same build, same batches, interleaved rounds; medians of the loop's own step seconds
and of the wall time per step of a whole round.

    python benchmarks/bench_train_loop.py [--config CONFIG.json] [--steps 20] [--rounds 6] [--threads N]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import pathlib
import statistics
import tempfile
import time
from typing import Any, Dict, List

import pydepth
from pydepth.training import TrainSettings, run_training
from pydepth.training import step as step_module

ROOT = pathlib.Path(__file__).resolve().parent.parent


def five_calls(model: Any, optimizer: Any, batch: Any, *, observe: bool = False,
               interruptible: Any = None) -> Any:
    """The loop's step before it ran in one call: zero_grad, the passes inside the window, step()."""
    optimizer.zero_grad()
    with interruptible if interruptible is not None else contextlib.nullcontext():
        value, report = step_module.loss_and_gradients(model, batch, observe=observe)
    optimizer.step()
    return value, report


def one_round(variant: str, settings: TrainSettings, config: pydepth.DecoderConfig, text: bytes) -> Dict[str, Any]:
    seconds: List[float] = []
    real = step_module.train_step
    step_module.train_step = five_calls if variant == "calls" else real  # type: ignore[assignment]
    try:
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            result = run_training(settings, text, out, config=config, on_progress=lambda p: seconds.append(p.seconds))
            wall = time.perf_counter() - t0
    finally:
        step_module.train_step = real  # type: ignore[assignment]
    return {"variant": variant, "step_s": seconds, "wall_per_step_s": wall / settings.steps, "losses": result.losses}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=str(ROOT / "examples" / "data" / "byte-8block.json"))
    ap.add_argument("--text", default=str(ROOT / "examples" / "data" / "corpus.txt"))
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--batch-rows", type=int, default=4, help="the default of pydepth train")
    ap.add_argument("--sequence-length", type=int, default=None, help="default: the config's max_positions")
    ap.add_argument("--threads", type=int, default=None, help="core threads (default: pydepth's)")
    args = ap.parse_args()
    if args.threads:
        pydepth.set_num_threads(args.threads)
    config = pydepth.DecoderConfig(**json.loads(pathlib.Path(args.config).read_text()))
    text = pathlib.Path(args.text).read_bytes()
    settings = TrainSettings(steps=args.steps, batch=args.batch_rows, tokens=args.sequence_length)
    runs: Dict[str, List[Dict[str, Any]]] = {"one_call": [], "calls": []}
    one_round("one_call", settings, config, text)  # warm-up: imports, first plans, page faults
    for r in range(args.rounds):
        for variant in (("one_call", "calls") if r % 2 == 0 else ("calls", "one_call")):
            runs[variant].append(one_round(variant, settings, config, text))
    assert runs["one_call"][0]["losses"] == runs["calls"][0]["losses"], "the two loops differ"
    print(f"config {config}, batch {settings.batch} x {settings.tokens or config.max_positions}, "
          f"{args.steps} steps x {args.rounds} rounds, threads {pydepth.get_num_threads()}")
    medians = {}
    for variant, rounds in runs.items():
        steps = [s for rd in rounds for s in rd["step_s"]]
        walls = [rd["wall_per_step_s"] for rd in rounds]
        medians[variant] = statistics.median(steps)
        print(f"{variant:9s} step median {statistics.median(steps) * 1e3:8.3f} ms  "
              f"(min {min(steps) * 1e3:.3f})  wall/step median {statistics.median(walls) * 1e3:8.3f} ms")
    print(f"one_call / calls: {medians['one_call'] / medians['calls']:.3f}")


if __name__ == "__main__":
    main()
