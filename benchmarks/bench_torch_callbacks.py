# SPDX-License-Identifier: MIT
"""What one training-time health observation costs, against one training step, for a
GPT-2-small-sized and a 24-layer random model (float32, CPU).

    cd /tmp && python /path/to/benchmarks/bench_torch_callbacks.py [--repeats 5] [--tokens 64] [--batch 2]

Builds ``GPT2LMHeadModel`` from configs (nothing is downloaded): 12 layers, n_embd 768, 12 heads
(GPT-2 small, about 124M parameters) and 24 layers, n_embd 1024, 16 heads (GPT-2 medium, about
355M parameters). For each, in train mode, times interleaved samples of

* ``train step``: ``model(input_ids=ids, labels=ids).loss.backward()``, then
  ``zero_grad(set_to_none=True)`` (one forward+backward of every parameter gradient);
* ``observation``: ``HealthMonitor.observe`` on the same batch, i.e. what a callback does when a
  step is due (``observe_residual_health`` on the unwrapped model, flat metrics, no sink).

Prints medians, the ratio observation / train step, every sample and the CPU (``lscpu``). One
warm-up of each precedes the samples. Observing every N steps adds ratio / N to training time.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

os.environ.setdefault("HF_HUB_OFFLINE", "1")

SIZES = {"12 layers, n_embd 768 (GPT-2 small)": dict(n_layer=12, n_embd=768, n_head=12),
         "24 layers, n_embd 1024 (GPT-2 medium)": dict(n_layer=24, n_embd=1024, n_head=16)}


def _time(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def cpu_name() -> str:
    """The CPU model from ``lscpu`` (falls back to ``platform.processor()``)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return platform.processor() or "unknown CPU"


def measure(size: Dict[str, int], batch: int, tokens: int, repeats: int) -> Dict[str, Any]:
    """Samples (seconds) of a train step and an observation of one random model."""
    import torch
    import transformers

    from pydepth.torch.callbacks import HealthMonitor

    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**size))
    model.train()
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, model.config.vocab_size, (batch, tokens), generator=gen)
    monitor = HealthMonitor(model, every=1, batch=ids)

    def step() -> None:
        model(input_ids=ids, labels=ids).loss.backward()
        model.zero_grad(set_to_none=True)

    def observe() -> None:
        monitor.observe(step=1)

    step(), observe()  # warm-up
    samples: Dict[str, List[float]] = {"train step": [], "observation": []}
    for _ in range(repeats):
        samples["train step"].append(_time(step))
        samples["observation"].append(_time(observe))
    med = {k: statistics.median(v) for k, v in samples.items()}
    return {"parameters": sum(p.numel() for p in model.parameters()), "samples_s": samples, "median_s": med,
            "ratio": med["observation"] / med["train step"]}


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the measurement for both sizes; prints a table (and JSON with --json)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5, help="samples of each (default 5)")
    ap.add_argument("--tokens", type=int, default=64, help="sequence length (default 64)")
    ap.add_argument("--batch", type=int, default=2, help="rows (default 2)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    ap.add_argument("--only", default="", help="measure only the sizes whose name contains this (e.g. '24 layers')")
    ap.add_argument("--json", action="store_true", help="also print the samples as JSON")
    args = ap.parse_args(argv)

    import torch
    import transformers
    transformers.logging.set_verbosity_error()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"CPU {cpu_name()}, {os.cpu_count()} logical CPUs, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads; float32, train mode, batch {args.batch} x {args.tokens} tokens",
          flush=True)
    print("| model | parameters | train step median (ms) | observation median (ms) | observation / step |")
    print("|---|---|---|---|---|")
    results = {}
    for name, size in SIZES.items():
        if args.only not in name:
            continue
        r = measure(size, args.batch, args.tokens, args.repeats)
        results[name] = r
        med = r["median_s"]
        print(f"| {name} | {r['parameters'] / 1e6:.1f}M | {med['train step'] * 1e3:.0f} | "
              f"{med['observation'] * 1e3:.0f} | {r['ratio']:.2f} |", flush=True)
    for name, r in results.items():
        for what, values in r["samples_s"].items():
            print(f"{name}, {what} samples (ms): {', '.join(f'{x * 1e3:.0f}' for x in values)}")
    if args.json:
        json.dump(results, sys.stdout, indent=1)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
