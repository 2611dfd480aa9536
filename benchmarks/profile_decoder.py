# SPDX-License-Identifier: MIT
"""Where pydepth's fwd_bwd time goes, for one benchmark shape.

    python benchmarks/profile_decoder.py --shape small [--threads 1] [--steps 500] [--cprofile]
        [--op fwd_bwd|fwd_bwd_calls]
    perf record -g -o pd.perf python benchmarks/profile_decoder.py --shape medium --steps 5
    perf report -i pd.perf --no-children --stdio | grep -E '^ +[0-9]' | head -20

Runs a training step as bench_decoder.py's op of that name does it: one
DecoderModel.train_step call (--op fwd_bwd, the default) or zero_grad + recorded forward
(keep="training") + loss + backward as separate calls (--op fwd_bwd_calls), `steps` times
(after two warm-up steps) and prints the mean step time, split into the Python facade's share
(cProfile tottime of Python functions) and the C core's share when --cprofile is given. Without
--cprofile it only loops, which is what an external sampler (perf, py-spy) needs.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time
from typing import Optional, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_decoder import SHAPES, _tokens


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Loops the pydepth training step of one shape, optionally under cProfile."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="small", choices=sorted(SHAPES))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--cprofile", action="store_true", help="print the top functions by own time")
    ap.add_argument("--op", default="fwd_bwd", choices=["fwd_bwd", "fwd_bwd_calls"],
                    help="the step in one call, or as the separate calls")
    args = ap.parse_args(argv)

    import pydepth
    pydepth.set_num_threads(args.threads)
    s = SHAPES[args.shape]
    cfg = pydepth.DecoderConfig(s["V"], s["W"], s["H"], s["F"], s["L"], s["P"], kv_heads=s["kv"])
    model = pydepth.DecoderModel(cfg, pydepth.SplitMix64(s.get("seed", 1)))
    x, y = _tokens(s)

    def fwd_bwd_calls() -> None:
        model.zero_grad()
        loss = model.forward(x, keep="training").loss(y)
        loss.backward()

    def fwd_bwd() -> None:
        model.train_step(x, y)

    step = {"fwd_bwd": fwd_bwd, "fwd_bwd_calls": fwd_bwd_calls}[args.op]

    for _ in range(2):
        step()
    t0 = time.perf_counter()
    if args.cprofile:
        prof = cProfile.Profile()
        prof.enable()
    for _ in range(args.steps):
        step()
    if args.cprofile:
        prof.disable()
    elapsed = time.perf_counter() - t0
    print(f"{args.shape} threads={args.threads}: {elapsed / args.steps * 1e6:.1f} µs per {args.op} step "
          f"({args.steps} steps{', under cProfile' if args.cprofile else ''})")
    if args.cprofile:
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(12)
        print(buf.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
