# SPDX-License-Identifier: MIT
"""Optimizer step benchmark: pydepth AdamW/SGD step versus torch.optim float64 (foreach False
and True), interleaved in one process on the same parameter sizes.

    python benchmarks/bench_optim.py [--sizes 10000,100000,1000000] [--threads 1,2] [--repeat 15]

Each size is split into 10 tensors (as a model's parameter list is). One sample is the mean of
a timeit-style loop of steps (about 20 ms); the median over --repeat samples is reported, with
the ratio pydepth / torch. Gradients are fixed random arrays, so only the update is timed.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

import pydepth
from pydepth import NamedParameter
from pydepth.optim import SGD, AdamW


def _per_step(fn, budget=0.02) -> float:
    fn()
    n, t0 = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        dt = time.perf_counter() - t0
        if dt >= budget:
            return dt / n


def _case(size: int):
    rng = np.random.default_rng(0)
    per = size // 10
    values = [rng.standard_normal(per) for _ in range(10)]
    grads = [rng.standard_normal(per) for _ in range(10)]
    params = []
    for i, (v, g) in enumerate(zip(values, grads)):
        p = NamedParameter(f"p.{i}", v)
        p._p.restore(v, g, 0)  # a fixed gradient in the C buffer
        params.append(p)
    tparams = [torch.tensor(v) for v in values]
    for t, g in zip(tparams, grads):
        t.grad = torch.tensor(g)
    return params, tparams


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    print(f"pydepth {pydepth.__version__}, torch {torch.__version__}, "
          f"kernel path {pydepth._native._runtime.kernel_path()}")
    print(f"{'optimizer':<6} {'size':>8} {'thr':>3} {'pydepth us':>11} {'torch fe=F us':>14} {'torch fe=T us':>14} "
          f"{'ratio F':>8} {'ratio T':>8}")
    for threads in (int(x) for x in args.threads.split(",")):
        pydepth.set_num_threads(threads)
        torch.set_num_threads(threads)
        for size in (int(x) for x in args.sizes.split(",")):
            for name in ("AdamW", "SGD"):
                params, tparams = _case(size)
                kw = {"lr": 1e-9} if name == "AdamW" else {"lr": 1e-9, "momentum": 0.9}
                ours = (AdamW if name == "AdamW" else SGD)(params, **kw)
                tf = getattr(torch.optim, name)(tparams, foreach=False, **kw)
                tt = getattr(torch.optim, name)([t.clone() for t in tparams], foreach=True, **kw)
                for t, g in zip(tt.param_groups[0]["params"], tparams):
                    t.grad = g.grad.clone()
                samples = {"p": [], "f": [], "t": []}
                for r in range(args.repeat):
                    order = [("p", ours.step), ("f", tf.step), ("t", tt.step)]
                    for key, fn in (order if r % 2 == 0 else order[::-1]):
                        samples[key].append(_per_step(fn))
                med = {k: statistics.median(v) * 1e6 for k, v in samples.items()}
                print(f"{name:<6} {size:>8} {threads:>3} {med['p']:>11.1f} {med['f']:>14.1f} {med['t']:>14.1f} "
                      f"{med['p'] / med['f']:>8.2f} {med['p'] / med['t']:>8.2f}")


if __name__ == "__main__":
    main()
