# SPDX-License-Identifier: MIT
"""Times pydepth's matmul kernels against numpy `@` and one laptop-shape forward+backward.

    python benchmarks/bench_kernels.py [--threads 1 2] [--repeat 5] [--model] [--no-kernels]

For a fair numpy comparison run it with OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset
(see benchmarks/KERNELS.md). numpy's thread count is set to match via threadpoolctl when
installed, else via OPENBLAS_NUM_THREADS, which must be set before numpy loads, so each
thread count runs in its own subprocess.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

M = 512
# (label, kind, M, K, N): forward products and the backward products they imply.
SHAPES = [
    ("fwd q/o      X@W  512x512", "nn", M, 512, 512),
    ("fwd k/v      X@W  512x128", "nn", M, 512, 128),
    ("fwd gate/up  X@W  512x1536", "nn", M, 512, 1536),
    ("fwd down     X@W  1536x512", "nn", M, 1536, 512),
    ("fwd head   X@E^T  512x16384", "nt", M, 512, 16384),
    ("bwd dX q/o  U@W^T 512x512", "nt", M, 512, 512),
    ("bwd dX k/v  U@W^T 128x512", "nt", M, 128, 512),
    ("bwd dX down U@W^T 512x1536", "nt", M, 512, 1536),
    ("bwd dX g/u  U@W^T 1536x512", "nt", M, 1536, 512),
    ("bwd head dfo U@E 16384x512", "nn", M, 16384, 512),
    ("bwd dW q/o  X^T@U 512x512 (T=256)", "tn", 512, 256, 512),
    ("bwd dW g/u  X^T@U 512x1536 (T=256)", "tn", 512, 256, 1536),
    ("bwd dW down X^T@U 1536x512 (T=256)", "tn", 1536, 256, 512),
    ("bwd dE    U^T@X 16384x512 (T=256)", "tn", 16384, 256, 512),
]


def _median_time(fn, repeat):
    fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def numpy_blas_info(np):
    try:
        import threadpoolctl
        return "; ".join(f"{i.get('internal_api')} {i.get('version')} core={i.get('architecture')} "
                         f"threads={i.get('num_threads')}"
                         for i in threadpoolctl.threadpool_info() if i.get("user_api") == "blas")
    except ImportError:
        pass
    try:  # numpy wheels bundle scipy-openblas in numpy.libs; ask it for its core name
        import ctypes
        import glob
        libdir = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
        for path in glob.glob(os.path.join(libdir, "libscipy_openblas*.so*")):
            lib = ctypes.CDLL(path)
            core = lib.scipy_openblas_get_corename64_
            core.restype = ctypes.c_char_p
            threads = lib.scipy_openblas_get_num_threads64_
            return f"scipy-openblas core={core().decode()} threads={threads()}"
    except Exception as exc:
        return f"unknown ({exc})"
    return "unknown"


def operands(rng, kind, m, k, n):
    """A, B and an output C of one product of SHAPES' kind ("nn", "nt", "tn") and sizes."""
    import numpy as np
    a = rng.standard_normal((k, m) if kind == "tn" else (m, k))
    b = rng.standard_normal((n, k) if kind == "nt" else (k, n))
    return a, b, np.empty((m, n))


def run_kernels(threads, repeat):
    import numpy as np
    import pydepth
    from pydepth._native import _runtime, _testing
    pydepth.set_num_threads(threads)
    try:
        import threadpoolctl
        threadpoolctl.threadpool_limits(threads, user_api="blas")
    except ImportError:
        pass
    print(f"## threads={threads}  pydepth path={_runtime.kernel_path()}  numpy BLAS: {numpy_blas_info(np)}")
    print(f"{'product':38s} {'kind':4s} {'pd ms':>9s} {'pd GF/s':>8s} {'np ms':>9s} {'np GF/s':>8s} {'ratio':>6s}")
    rng = np.random.default_rng(0)
    rows = []
    for label, kind, m, k, n in SHAPES:
        a, b, c = operands(rng, kind, m, k, n)
        if kind == "nn":
            npf = lambda a=a, b=b: a @ b  # noqa: E731
        elif kind == "nt":
            npf = lambda a=a, b=b: a @ b.T  # noqa: E731
        else:
            npf = lambda a=a, b=b: a.T @ b  # noqa: E731
        tp = _median_time(lambda kind=kind, a=a, b=b, c=c: _testing.matmul(kind, a, b, c, False), repeat)
        tn = _median_time(npf, repeat)
        gf = 2.0 * m * k * n / 1e9
        rows.append(dict(label=label, kind=kind, threads=threads, pd_s=tp, np_s=tn,
                         pd_gflops=gf / tp, np_gflops=gf / tn))
        print(f"{label:38s} {kind:4s} {tp*1e3:9.2f} {gf/tp:8.2f} {tn*1e3:9.2f} {gf/tn:8.2f} {tn/tp:6.2f}")
    tot_p = sum(r["pd_s"] for r in rows)
    tot_n = sum(r["np_s"] for r in rows)
    print(f"{'total':38s} {'':4s} {tot_p*1e3:9.2f} {'':8s} {tot_n*1e3:9.2f} {'':8s} {tot_n/tot_p:6.2f}")
    return rows


def run_model(threads, repeat):
    import numpy as np
    import pydepth as pd
    pd.set_num_threads(threads)
    cfg = pd.DecoderConfig(16384, 512, 8, 1536, 2, 256, kv_heads=2)
    model = pd.DecoderModel(cfg, pd.SplitMix64(7))
    B, T = 2, 256
    rng = np.random.default_rng(1)
    toks = rng.integers(0, 16384, size=(B, T))
    tgts = rng.integers(0, 16384, size=(B, T))
    ts = {"forward": [], "loss": [], "backward": []}
    for _ in range(repeat):
        t0 = time.perf_counter()
        fwd = model.forward(toks)
        t1 = time.perf_counter()
        loss = fwd.loss(tgts)
        t2 = time.perf_counter()
        loss.backward()
        t3 = time.perf_counter()
        ts["forward"].append(t1 - t0)
        ts["loss"].append(t2 - t1)
        ts["backward"].append(t3 - t2)
        fwd.release()
    med = {k: statistics.median(v) for k, v in ts.items()}
    total = sum(med.values())
    print(f"## model V=16384 W=512 H=8 KV=2 F=1536 L=2 B={B} T={T} threads={threads} "
          f"path={pd._native._runtime.kernel_path()}: forward {med['forward']:.3f} s, loss {med['loss']:.3f} s, "
          f"backward {med['backward']:.3f} s, total {total:.3f} s (median of {repeat})")
    return dict(threads=threads, **med, total=total)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--model", action="store_true", help="also time forward+backward")
    ap.add_argument("--model-repeat", type=int, default=3)
    ap.add_argument("--no-kernels", action="store_true")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        out = {}
        if not args.no_kernels:
            out["kernels"] = run_kernels(args.child, args.repeat)
        if args.model:
            out["model"] = run_model(args.child, args.model_repeat)
        print("JSON " + json.dumps(out))
        return
    for t in args.threads:
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(t))
        cmd = [sys.executable, __file__, "--child", str(t), "--repeat", str(args.repeat),
               "--model-repeat", str(args.model_repeat)]
        if args.model:
            cmd.append("--model")
        if args.no_kernels:
            cmd.append("--no-kernels")
        res = subprocess.run(cmd, env=env, capture_output=True, text=True)
        sys.stdout.write("".join(line + "\n" for line in res.stdout.splitlines() if not line.startswith("JSON ")))
        sys.stderr.write(res.stderr)
        print()


if __name__ == "__main__":
    main()
