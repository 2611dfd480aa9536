# SPDX-License-Identifier: MIT
"""What residual-health observation adds to a training step, in each observation mode, for a
narrow 12-layer Llama and a GPT-2-small-sized model (float32, CPU, AdamW).

    cd /tmp && python /path/to/benchmarks/bench_torch_callbacks.py [--repeats 5] [--batch 4] [--tokens 128]

Builds the models from configs (nothing is downloaded): ``LlamaForCausalLM`` with 12 layers,
width 256, 4 heads, feed-forward 688, vocabulary 2048, and ``GPT2LMHeadModel`` with 12 layers,
n_embd 768, 12 heads, vocabulary 50257 (about 124M parameters). For each, in train mode, times
interleaved samples (the order rotates every round) of

* ``unobserved step``: ``model(input_ids=ids, labels=ids).loss.backward()``, ``AdamW.step()``,
  ``zero_grad(set_to_none=True)``;
* ``in-step observed step``: the same step with ``HealthMonitor(mode="in-step")`` observing it
  (``begin_step()`` before the forward, ``step()`` after the update: the capture, the residual
  check, the float64 RMS and the flat metrics, no sink);
* ``separate observed step``: the same step followed by ``HealthMonitor.observe`` on the same
  batch (mode ``"separate"``: one more forward and a backward to the sites).

Prints the CPU (``lscpu``), the machine's no-FMA multiply-add line (``bench_peak.py``), medians
of wall-clock and of process CPU time, the ratios of each observed step to the unobserved one
and every sample. One warm-up of each
precedes the samples.
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
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

os.environ.setdefault("HF_HUB_OFFLINE", "1")

#: name -> (transformers config class, its arguments)
MODELS: Dict[str, Any] = {
    "Llama, 12 layers, width 256, vocabulary 2048": (
        "LlamaConfig", dict(num_hidden_layers=12, hidden_size=256, intermediate_size=688, num_attention_heads=4,
                            num_key_value_heads=4, vocab_size=2048, max_position_embeddings=512)),
    "GPT-2 small: 12 layers, n_embd 768, vocabulary 50257": (
        "GPT2Config", dict(n_layer=12, n_embd=768, n_head=12)),
}
KINDS = ("unobserved step", "in-step observed step", "separate observed step")


def _time(fn: Callable[[], object]) -> Tuple[float, float]:
    """(wall seconds, this process's CPU seconds) of one call: on a shared machine the CPU time
    is the steadier of the two, since waiting for a core is not counted."""
    w0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w0, time.process_time() - c0


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


def machine_line() -> str:
    """The no-FMA multiply-add peak of one thread (``bench_peak.py``), or why it is missing."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_peak import PeakError, machine_peak
    try:
        peak = machine_peak([1])
    except PeakError as exc:
        return f"machine peak not measured ({exc})"
    by = ", ".join(f"{isa} {g:.1f}" for isa, g in peak["by_isa"].items() if g)
    return f"machine peak (bench_peak.py: vector mul + add pairs, no FMA, 1 thread): {by} GFLOP/s"


def _steps(model: Any, ids: Any) -> Dict[str, Callable[[], None]]:
    import torch

    from pydepth.torch.callbacks import HealthMonitor

    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    in_step = HealthMonitor(model, every=1, mode="in-step")
    separate = HealthMonitor(model, every=1, batch={"input_ids": ids})

    def plain() -> None:
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def observed_in_step() -> None:
        in_step.begin_step()
        plain()
        in_step.step()

    def observed_separately() -> None:
        plain()
        separate.observe(step=1)

    return dict(zip(KINDS, (plain, observed_in_step, observed_separately)))


def measure(name: str, batch: int, tokens: int, repeats: int) -> Dict[str, Any]:
    """Samples (seconds) of each kind of step on one random model."""
    import torch
    import transformers

    torch.manual_seed(0)
    config_class, kwargs = MODELS[name]
    config = getattr(transformers, config_class)(**kwargs)
    model = transformers.AutoModelForCausalLM.from_config(config).train()
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, config.vocab_size, (batch, tokens), generator=gen)
    steps = _steps(model, ids)
    for fn in steps.values():  # warm-up
        fn()
    samples: Dict[str, List[float]] = {k: [] for k in KINDS}
    cpu: Dict[str, List[float]] = {k: [] for k in KINDS}
    for r in range(repeats):
        for k in KINDS[r % len(KINDS):] + KINDS[:r % len(KINDS)]:
            wall, used = _time(steps[k])
            samples[k].append(wall)
            cpu[k].append(used)
    med = {k: statistics.median(v) for k, v in samples.items()}
    cpu_med = {k: statistics.median(v) for k, v in cpu.items()}
    return {"parameters": sum(p.numel() for p in model.parameters()), "samples_s": samples, "median_s": med,
            "cpu_samples_s": cpu, "cpu_median_s": cpu_med,
            "ratios": {k: med[k] / med[KINDS[0]] for k in KINDS[1:]},
            "cpu_ratios": {k: cpu_med[k] / cpu_med[KINDS[0]] for k in KINDS[1:]}}


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the measurement for both models; prints a table (and JSON with --json)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5, help="samples of each (default 5)")
    ap.add_argument("--tokens", type=int, default=128, help="sequence length (default 128)")
    ap.add_argument("--batch", type=int, default=4, help="rows (default 4)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    ap.add_argument("--only", default="", help="measure only the models whose name contains this (e.g. 'Llama')")
    ap.add_argument("--json", action="store_true", help="also print the samples as JSON")
    args = ap.parse_args(argv)

    import torch
    import transformers
    transformers.logging.set_verbosity_error()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"CPU {cpu_name()}, {os.cpu_count()} logical CPUs, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads; float32, train mode, AdamW, batch {args.batch} x {args.tokens} tokens")
    print(machine_line(), flush=True)
    print("| model | parameters | clock | unobserved step (ms) | in-step observed (ms) | ratio | "
          "separate observed (ms) | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    results = {}
    for name in MODELS:
        if args.only not in name:
            continue
        r = measure(name, args.batch, args.tokens, args.repeats)
        results[name] = r
        for clock, med, rat in (("wall", r["median_s"], r["ratios"]), ("CPU", r["cpu_median_s"], r["cpu_ratios"])):
            print(f"| {name} | {r['parameters'] / 1e6:.1f}M | {clock} | {med[KINDS[0]] * 1e3:.0f} | "
                  f"{med[KINDS[1]] * 1e3:.0f} | {rat[KINDS[1]]:.3f} | {med[KINDS[2]] * 1e3:.0f} | "
                  f"{rat[KINDS[2]]:.3f} |", flush=True)
    for name, r in results.items():
        for clock, key in (("wall", "samples_s"), ("CPU", "cpu_samples_s")):
            for what, values in r[key].items():
                print(f"{name}, {what} {clock} samples (ms): {', '.join(f'{x * 1e3:.0f}' for x in values)}")
    if args.json:
        json.dump(results, sys.stdout, indent=1)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
