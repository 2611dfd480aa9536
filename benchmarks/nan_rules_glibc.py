# SPDX-License-Identifier: MIT
"""Measure the NaN results of the platform glibc, the source of docs/numerics-elementary.md §10.

    python benchmarks/nan_rules_glibc.py [--pydepth]

Feeds NaNs of every kind (quiet and signalling, both signs, with and without payload) and the
inputs that create a NaN to exp, log, log1p, sin, cos and, over every pair of NaNs and special
values, to pow, through tests/glibc_oracle.py; classifies each NaN result by the rules of §10
and prints the counts. With --pydepth, also compares pydepth.elementary bit for bit (every NaN
result of glibc, on the build this process runs: set PYDEPTH_LIBM_FMA=0 for the other one).
Exits 1 if a result breaks the rules or pydepth differs. Meaningful on x86-64 glibc only.
"""
from __future__ import annotations

import argparse
import collections
import importlib.util
import pathlib
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("glibc_oracle", ROOT / "tests" / "glibc_oracle.py")
glibc_oracle = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(glibc_oracle)

CREATED = 0xFFF8000000000000
QUIET_BIT = 1 << 51
NANS = [0x7FF8000000000000, 0xFFF8000000000000, 0x7FF8000000000123, 0xFFF8000000000456,
        0x7FF0000000000789, 0xFFF0000000000ABC]
VALUES = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 2.5, -2.5, np.inf, -np.inf,
          5e-324, -5e-324, 1e300, -1e300, 2.0 ** 70, -(2.0 ** 70), 2.0 ** -70]
CREATORS = {"exp": [], "log": [-1.0, -1e-4, -np.inf, -5e-324], "log1p": [-2.0, -np.inf, -1.0 - 2e-16],
            "sin": [np.inf, -np.inf], "cos": [np.inf, -np.inf]}


def as_float(bits: list) -> np.ndarray:
    """Doubles with the given bit patterns."""
    return np.array(bits, dtype=np.uint64).view(np.float64)


def is_nan(u: int) -> bool:
    """Whether pattern u is a NaN."""
    return (u >> 52) & 0x7FF == 0x7FF and u & ((1 << 52) - 1) != 0


def odd_integer(y: float) -> bool:
    """Whether y is an odd integer."""
    return bool(np.isfinite(y)) and float(y).is_integer() and abs(y) < 2.0 ** 53 and int(y) % 2 == 1


def pow_rule(ux: int, uy: int, y: float) -> str:
    """The §10 rule a NaN result of pow(x, y) must follow, and its expected bits."""
    if is_nan(ux):
        if not is_nan(uy) and odd_integer(y):
            return "x NaN, y odd: quiet(x), sign cleared"
        return "x NaN: quiet(x)"
    if is_nan(uy):
        return "y NaN: quiet(y)"
    return "created"


def expected_pow(rule: str, ux: int, uy: int) -> int:
    """The bits rule gives for pow(x, y)."""
    if rule == "created":
        return CREATED
    if rule.startswith("y NaN"):
        return uy | QUIET_BIT
    if "sign cleared" in rule:
        return (ux | QUIET_BIT) & ~(1 << 63)
    return ux | QUIET_BIT


def main() -> int:
    """Measure, classify and print; 1 if any result breaks the rules."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pydepth", action="store_true", help="also compare pydepth.elementary")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        exe = glibc_oracle.build(pathlib.Path(tmp))
        if exe is None:
            print("no C compiler")
            return 1
        counts, broken, checks = collections.Counter(), 0, []
        for name, creators in CREATORS.items():
            x = np.concatenate([as_float(NANS), np.array(creators, dtype=np.float64)])
            out = glibc_oracle.evaluate(exe, name, x).view(np.uint64)
            for ux, uo in zip(x.view(np.uint64).tolist(), out.tolist()):
                rule = "quiet(x)" if is_nan(ux) else "created"
                want = ux | QUIET_BIT if is_nan(ux) else CREATED
                counts[(name, rule)] += 1
                broken += uo != want
            checks.append((name, x, None, out))
        vals = np.concatenate([as_float(NANS), np.array(VALUES)])
        xs, ys = np.repeat(vals, vals.size), np.tile(vals, vals.size)
        out = glibc_oracle.evaluate(exe, "pow", xs, ys).view(np.uint64)
        nan_rows = [i for i, u in enumerate(out.tolist()) if is_nan(u)]
        for i in nan_rows:
            ux, uy = int(xs.view(np.uint64)[i]), int(ys.view(np.uint64)[i])
            rule = pow_rule(ux, uy, float(ys[i]))
            counts[("pow", rule)] += 1
            broken += int(out[i]) != expected_pow(rule, ux, uy)
        checks.append(("pow", xs[nan_rows], ys[nan_rows], out[nan_rows]))
    for (name, rule), n in sorted(counts.items()):
        print(f"{name:6s} {rule:40s} {n:4d}")
    print(f"results breaking the rules of §10: {broken}")
    if args.pydepth:
        from pydepth import elementary as E
        for name, x, y, want in checks:
            got = (E.pow(x, y) if y is not None else getattr(E, name)(x)).view(np.uint64)
            diff = int(np.count_nonzero(got != want))
            broken += diff
            print(f"pydepth {name:6s} {x.size:4d} NaN results, {diff} differ in any bit")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
