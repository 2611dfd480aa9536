# SPDX-License-Identifier: MIT
"""Cost of the alias guard (issue 11, item 10): a recorded forward checksums every parameter's
values and backward checks them again; as two separate passes over the parameters, which is what
this measures (since issue 39 the products gather the weights' terms while packing them instead,
docs/numerics-concurrency.md C5, and only the gains and selected-adjoint passes take the passes).

    python benchmarks/bench_alias_checksum.py [--shapes tiny,small,medium,large] [--repeat 15]

Per shape, interleaved in one process: the median of a full step (zero_grad + recorded forward
+ loss + backward) and the median of the two checksum passes alone; the ratio is the guard's
share of the step. T=1 rows are the worst case (the fewest tokens per parameter read).
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import pydepth
from bench_decoder import SHAPES


def _median(fn, repeat: int) -> float:
    fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="tiny,small,medium,large")
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    print(f"threads {pydepth.get_num_threads()}, repeat {args.repeat}")
    print(f"{'shape':8} {'T':>4} {'params':>10} {'step ms':>9} {'guard ms':>9} {'share':>7}")
    for name in args.shapes.split(","):
        s = SHAPES[name]
        cfg = pydepth.DecoderConfig(s["V"], s["W"], s["H"], s["F"], s["L"], s["P"], kv_heads=s["kv"])
        model = pydepth.DecoderModel(cfg, pydepth.SplitMix64(1))
        for T in sorted({s["T"], 1}):
            x = (np.arange(T + 1) * 7919 % s["V"]).reshape(1, -1)

            def step(model=model, x=x):
                model.zero_grad()
                model.loss(x[:, :-1], x[:, 1:]).backward()

            def guard(model=model):
                model._core.checksum_all()
                model._core.checksum_all()

            step_s, guard_s = _median(step, args.repeat), _median(guard, args.repeat)
            print(f"{name:8} {T:4d} {cfg.parameter_count:10d} {step_s * 1e3:9.3f} {guard_s * 1e3:9.3f} "
                  f"{guard_s / step_s:7.1%}")


if __name__ == "__main__":
    main()
