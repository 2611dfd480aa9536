# SPDX-License-Identifier: MIT
"""The product micro-kernels alone against whole products and the machine line.

    python benchmarks/bench_ukernel.py [--paths avx512,avx2] [--kc 256] [--no-products]

A product of pydepth's blocked path (csrc/kernels/gemm.c) can run no faster than its register
kernel on operands that are already packed and in cache. bench_ukernel.c measures that kernel
alone (built here from the checkout's csrc/kernels/ukernel_*.c with the core's strict flags):
one sliver and one panel in L1, an A block of 12 slivers in L2 (packed, and read in place with
stored rows 512 and 16384 apart, as the rows kernel reads an activation). Then the installed
pydepth's products of bench_kernels.py's laptop-plan shapes at 1 thread (fastest of 7 loops).
Every figure is printed with its share of the machine's no-FMA line (bench_peak.machine_peak(),
measured before and after; the higher is used): the gap between the kernel's share and a
product's is what blocking, packing and memory cost; the gap between the kernel's share and
100% is the kernel's own.
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from typing import List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_peak import PeakError, higher_line, machine_peak  # noqa: E402

CSRC = os.path.join(os.path.dirname(HERE), "csrc")
X86 = platform.machine().lower() in ("x86_64", "amd64")
KERNEL_FILES = ["ukernel_avx512.c", "ukernel_avx2.c"] if X86 else ["ukernel_neon.c"]
# Each path's table names its small-product kernel too, so those files link in beside it.
SMALL_FILES = ["gemm_small.c", "gemm_small_avx512.c", "gemm_small_avx2.c", "transpose.c", "transpose_avx512.c",
               "transpose_avx2.c"] if X86 else ["gemm_small.c", "transpose.c"]
LINE_ISA = {"avx512": "avx512", "avx512-folded": "avx512", "avx2": "avx2", "neon": "neon",
            "baseline": "sse2" if X86 else "neon"}
# (label, slivers, lda): lda 0 is a packed A, else stored rows that far apart
CELLS: List[Tuple[str, int, int]] = [
    ("kernel, 1 sliver (L1)", 1, 0),
    ("kernel, 12 slivers (L2)", 12, 0),
    ("rows kernel, lda 512", 12, 512),
    ("rows kernel, lda 16384", 12, 16384),
]


def build(outdir: str) -> str:
    """bench_ukernel.c and the kernel files, with the core's flags (contraction off, -O3)."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise PeakError("no C compiler (cc/gcc) on PATH")
    exe = os.path.join(outdir, "bench_ukernel")
    srcs = [os.path.join(HERE, "bench_ukernel.c")]
    srcs += [os.path.join(CSRC, "kernels", f) for f in [*KERNEL_FILES, "ukernel_generic.c", *SMALL_FILES]]
    res = subprocess.run([cc, "-O3", "-ffp-contract=off", "-fno-fast-math", "-I", CSRC, "-o", exe, *srcs],
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise PeakError(f"{cc} failed: {res.stderr.strip()[:500]}")
    return exe


def kernel_rate(exe: str, path: str, kc: int, slivers: int, lda: int) -> Optional[float]:
    """GFLOP/s of one cell, None when the path is not on this CPU (the kernel would fault)."""
    res = subprocess.run([exe, path, str(kc), str(slivers), str(lda)], capture_output=True, text=True)
    return float(res.stdout) if res.returncode == 0 else None


def product_rates(repeat: int = 7) -> List[Tuple[str, float]]:
    """The installed pydepth's products of bench_kernels.SHAPES at 1 thread: (label, GFLOP/s)."""
    import numpy as np
    import pydepth
    from bench_kernels import SHAPES, operands
    from pydepth._native import _testing

    pydepth.set_num_threads(1)
    rng = np.random.default_rng(0)
    out = []
    for label, kind, m, k, n in SHAPES:
        a, b, c = operands(rng, kind, m, k, n)
        _testing.matmul(kind, a, b, c, False)
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            _testing.matmul(kind, a, b, c, False)
            best = min(best, time.perf_counter() - t0)
        out.append((label, 2.0 * m * k * n / best * 1e-9))
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Prints the kernel cells and the products, each with its share of the line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--paths", default="avx512,avx512-folded,avx2" if X86 else "neon",
                    help="paths; avx512-folded is the AVX-512 kernel with its broadcasts folded")
    ap.add_argument("--kc", type=int, default=256,
                    help="terms per tile (AVX2's and the baseline's k-block; AVX-512's is 512)")
    ap.add_argument("--no-products", action="store_true", help="only the kernels (no pydepth import)")
    args = ap.parse_args(argv)
    try:
        before = machine_peak([1])
        with tempfile.TemporaryDirectory() as tmp:
            exe = build(tmp)
            cells = {(p, label): kernel_rate(exe, p, args.kc, s, lda)
                     for p in args.paths.split(",") for label, s, lda in CELLS}
        products = [] if args.no_products else product_rates()
        line = higher_line(before, machine_peak([1]))
    except PeakError as exc:
        print(f"bench_ukernel: {exc}", file=sys.stderr)
        return 1
    print(f"CPU: {platform.processor() or platform.machine()}; kc {args.kc}; no-FMA line (mul + add, 1 thread): "
          + ", ".join(f"{i} {g:.1f}" for i, g in line["by_isa"].items() if g) + " GFLOP/s")
    print(f"{'cell':44s} {'GFLOP/s':>8s} {'of line':>8s}")
    for (p, label), g in cells.items():
        ref = line["by_isa"].get(LINE_ISA[p])
        if g is None or not ref:
            print(f"{p + ' ' + label:44s} {'-':>8s} {'not on this CPU':>8s}")
            continue
        print(f"{p + ' ' + label:44s} {g:8.1f} {g / ref:8.0%}")
    widest = line["by_isa"][line["isa"]]
    for label, g in products:
        print(f"{'product ' + label:44s} {g:8.1f} {g / widest:8.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
