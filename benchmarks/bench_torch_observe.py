# SPDX-License-Identifier: MIT
"""Cost of one residual-health observation of a GPT-2-small-sized random model against a plain
forward+backward of the same model and batch (issue 15).

    cd /tmp && python /path/to/benchmarks/bench_torch_observe.py [--repeats 7] [--tokens 64]

Builds ``GPT2LMHeadModel`` from a config (12 layers, n_embd 768, 12 heads, vocabulary 50257,
about 124M parameters; nothing is downloaded), in eval mode, and times, interleaved:

* ``forward+backward``: ``model(input_ids=ids, labels=ids).loss.backward()`` and
  ``zero_grad(set_to_none=True)`` (all parameter gradients);
* ``observe``: :func:`pydepth.torch.observe_residual_health` (hooks, 25 site tensors, the loss
  differentiated with respect to the sites only, RMS and the report in numpy).

Prints medians, the ratio, and every sample. One warm-up of each precedes the samples.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _time(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the measurement; prints a table (and JSON with --json)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=7, help="samples of each (default 7)")
    ap.add_argument("--tokens", type=int, default=64, help="sequence length (default 64)")
    ap.add_argument("--batch", type=int, default=1, help="rows (default 1)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    ap.add_argument("--json", action="store_true", help="also print the samples as JSON")
    args = ap.parse_args(argv)

    import torch
    import transformers

    import pydepth.torch as pt

    transformers.logging.set_verbosity_error()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    t0 = time.perf_counter()
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=12, n_embd=768, n_head=12))
    model.eval()
    build = time.perf_counter() - t0
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, model.config.vocab_size, (args.batch, args.tokens), generator=gen)

    def step() -> None:
        model(input_ids=ids, labels=ids).loss.backward()
        model.zero_grad(set_to_none=True)

    def observe() -> None:
        pt.observe_residual_health(model, ids)

    step(), observe()  # warm-up
    samples: Dict[str, List[float]] = {"forward+backward": [], "observe": []}
    for _ in range(args.repeats):
        samples["forward+backward"].append(_time(step))
        samples["observe"].append(_time(observe))
    med = {k: statistics.median(v) for k, v in samples.items()}
    params = sum(p.numel() for p in model.parameters())
    print(f"GPT-2-small-sized random model: 12 layers, n_embd 768, 12 heads, {params / 1e6:.1f}M parameters, "
          f"float32, eval mode; batch {args.batch} x {args.tokens} tokens; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads; built in {build:.1f} s")
    print("| what | median (ms) | samples (ms) |\n|---|---|---|")
    for k, v in samples.items():
        print(f"| {k} | {med[k] * 1e3:.1f} | {', '.join(f'{x * 1e3:.0f}' for x in v)} |")
    print(f"observe / forward+backward = {med['observe'] / med['forward+backward']:.2f}")
    if args.json:
        json.dump({"samples_s": samples, "median_s": med, "tokens": args.tokens, "batch": args.batch,
                   "threads": torch.get_num_threads()}, sys.stdout, indent=1)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
