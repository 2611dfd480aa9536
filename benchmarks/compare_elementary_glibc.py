# SPDX-License-Identifier: MIT
"""pydepth.elementary against the platform glibc on 10^8 inputs per function and range.

    python benchmarks/compare_elementary_glibc.py [--count 100000000] [--chunk 10000000]

The same comparison as tests/test_elementary.py (oracle: tests/glibc_oracle.py, run without
GLIBC_TUNABLES), at a size that does not belong in the test suite. Prints, per function and
range, how many results differ in any bit (NaNs included); exits 1 if any does. Meaningful on
the reference platform only (glibc >= 2.28 on x86-64 with FMA, or aarch64).
"""
from __future__ import annotations

import argparse
import importlib.util
import pathlib
import sys
import tempfile
import time

import numpy as np

from pydepth import elementary as E

ROOT = pathlib.Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("glibc_oracle", ROOT / "tests" / "glibc_oracle.py")
glibc_oracle = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(glibc_oracle)


def by_binade(rng, lo, hi, n):
    """2^e * [1, 2), e uniform in [lo, hi): every binade equally often (subnormals included)."""
    with np.errstate(under="ignore"):
        return np.ldexp(rng.uniform(1.0, 2.0, n), rng.integers(lo, hi, n))


# (function, range label, generator of (x, y or None)); the ranges of issue #12.
RANGES = [
    ("exp", "[-745, 710]", lambda r, n: (r.uniform(-745.0, 710.0, n), None)),
    ("exp", "[-60, 0]", lambda r, n: (r.uniform(-60.0, 0.0, n), None)),
    ("log", "(0, 1e300] by binade", lambda r, n: (by_binade(r, -1074, 996, n), None)),
    ("log", "(0, 1e300] uniform", lambda r, n: (r.uniform(0.0, 1e300, n), None)),
    ("log1p", "(-1, 1) uniform", lambda r, n: (r.uniform(-1.0, 1.0, n), None)),
    ("log1p", "(0, 1e300] by binade", lambda r, n: (by_binade(r, -1074, 996, n), None)),
    ("sin", "[-1e5, 1e5]", lambda r, n: (r.uniform(-1e5, 1e5, n), None)),
    ("cos", "[-1e5, 1e5]", lambda r, n: (r.uniform(-1e5, 1e5, n), None)),
    ("pow", "10000^y, y in [-1, 0]", lambda r, n: (np.full(n, 10000.0), r.uniform(-1.0, 0.0, n))),
    ("pow", "500000^y, y in [-1, 0]", lambda r, n: (np.full(n, 500000.0), r.uniform(-1.0, 0.0, n))),
    ("pow", "1000000^y, y in [-1, 0]", lambda r, n: (np.full(n, 1e6), r.uniform(-1.0, 0.0, n))),
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=100_000_000, help="inputs per function and range")
    ap.add_argument("--chunk", type=int, default=10_000_000, help="inputs per oracle call")
    ap.add_argument("--seed", type=int, default=12)
    args = ap.parse_args(argv)
    reason = glibc_oracle.platform_is_reference()
    if reason:
        print(f"warning: not the reference platform ({reason}); differences are expected",
              file=sys.stderr)
    total_bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        exe = glibc_oracle.build(pathlib.Path(tmp))
        if exe is None:
            print("no C compiler for the glibc oracle", file=sys.stderr)
            return 2
        print(f"{'function':8} {'range':26} {'inputs':>12} {'differ':>8} {'seconds':>8}")
        for k, (name, label, gen) in enumerate(RANGES):
            rng = np.random.default_rng([args.seed, k])
            bad, done, t0 = 0, 0, time.perf_counter()
            while done < args.count:
                n = min(args.chunk, args.count - done)
                x, y = gen(rng, n)
                mine = E.pow(x, y) if name == "pow" else getattr(E, name)(x)
                ref = glibc_oracle.evaluate(exe, name, x, y)
                bad += int(np.count_nonzero(mine.view(np.uint64) != ref.view(np.uint64)))
                done += n
            total_bad += bad
            print(f"{name:8} {label:26} {done:12d} {bad:8d} {time.perf_counter() - t0:8.1f}",
                  flush=True)
    return 1 if total_bad else 0


if __name__ == "__main__":
    sys.exit(main())
