# SPDX-License-Identifier: MIT
"""pydepth.elementary: the decoder's exp/log/log1p/sin/cos/pow equal glibc's FMA build bit for bit.

The oracle is the platform libm (tests/glibc_oracle.py), which on this reference platform is the
build the published bits came from. Every comparison is on bit patterns, NaNs included.
"""
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pytest

from conftest import native_binaries
from pydepth import elementary as E
from pydepth._native import _elementary
from pydepth.errors import ElementaryInputError, PydepthError

_spec = importlib.util.spec_from_file_location(
    "glibc_oracle", pathlib.Path(__file__).with_name("glibc_oracle.py"))
glibc_oracle = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(glibc_oracle)

IN_CI = os.environ.get("CI") == "true"
N = 1_000_000  # inputs per function per range
LIB = {"exp": E.exp, "log": E.log, "log1p": E.log1p, "sin": E.sin, "cos": E.cos}


def _unavailable(reason):
    if IN_CI:
        pytest.fail(f"CI needs the glibc oracle: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def oracle(tmp_path_factory):
    reason = glibc_oracle.platform_is_reference()
    if reason is not None:
        _unavailable(f"not the reference platform: {reason}")
    exe = glibc_oracle.build(tmp_path_factory.mktemp("oracle"))
    if exe is None:
        _unavailable("no C compiler to build the glibc oracle")
    return lambda name, x, y=None, z=None: glibc_oracle.evaluate(exe, name, x, y, z)


def assert_same_bits(label, mine, ref, x, y=None):
    mine, ref = np.asarray(mine).reshape(-1), np.asarray(ref).reshape(-1)
    bad = np.flatnonzero(mine.view(np.uint64) != ref.view(np.uint64))
    if bad.size:
        shown = [f"{label}({float(x[i]).hex()}" + (f", {float(y[i]).hex()}" if y is not None else "")
                 + f") = {float(mine[i]).hex()}, glibc {float(ref[i]).hex()}" for i in bad[:5]]
        pytest.fail(f"{bad.size} of {mine.size} differ:\n" + "\n".join(shown))


def scaled(rng, lo_exp, hi_exp, n):
    """Values 2^e * [1, 2) with e uniform in [lo_exp, hi_exp): every binade equally often."""
    with np.errstate(under="ignore"):  # the lowest binades are subnormal, on purpose
        return np.ldexp(rng.uniform(1.0, 2.0, n), rng.integers(lo_exp, hi_exp, n))


def signed(rng, v):
    return np.where(rng.random(v.size) < 0.5, -v, v)


UNARY_RANGES = {
    "exp": {
        "[-745, 710]": lambda r: r.uniform(-745.0, 710.0, N),
        "[-60, 0]": lambda r: r.uniform(-60.0, 0.0, N),
        "[-1, 1]": lambda r: r.uniform(-1.0, 1.0, N),
        "near the over/underflow limits": lambda r: np.concatenate(
            [r.uniform(-745.2, -700.0, N // 2), r.uniform(700.0, 709.8, N - N // 2)]),
    },
    "log": {
        "(0, 1e300] by binade": lambda r: scaled(r, -1074, 996, N),
        "(0, 1e300] uniform": lambda r: r.uniform(0.0, 1e300, N),
        "[0.9, 1.1]": lambda r: r.uniform(0.9, 1.1, N),
    },
    "log1p": {
        "(-1, 1)": lambda r: r.uniform(-1.0, 1.0, N),
        "(0, 1e300] by binade": lambda r: scaled(r, -1074, 996, N),
        "-1 + 2^-60 .. -1 + 2^-1": lambda r: -1.0 + scaled(r, -60, -1, N),
        "|x| < 2^-20": lambda r: signed(r, scaled(r, -80, -20, N)),
    },
    "sin": {
        "[-1e5, 1e5]": lambda r: r.uniform(-1e5, 1e5, N),
        "[-4, 4]": lambda r: r.uniform(-4.0, 4.0, N),
        "|x| up to 2^1023 by binade": lambda r: signed(r, scaled(r, -30, 1023, N)),
    },
    "cos": {
        "[-1e5, 1e5]": lambda r: r.uniform(-1e5, 1e5, N),
        "[-4, 4]": lambda r: r.uniform(-4.0, 4.0, N),
        "|x| up to 2^1023 by binade": lambda r: signed(r, scaled(r, -30, 1023, N)),
    },
}
UNARY_CASES = [(f, name) for f, ranges in UNARY_RANGES.items() for name in ranges]


@pytest.mark.parametrize("func,span", UNARY_CASES, ids=[f"{f} {s}" for f, s in UNARY_CASES])
def test_each_function_equals_glibc_on_a_million_inputs_per_range(oracle, func, span):
    rng = np.random.default_rng(UNARY_CASES.index((func, span)) + 1200)
    x = UNARY_RANGES[func][span](rng)
    assert_same_bits(func, LIB[func](x), oracle(func, x), x)


@pytest.mark.parametrize("span", list(UNARY_RANGES["exp"]))
def test_scalar_and_simd_exp_give_the_same_bits(oracle, span):
    x = UNARY_RANGES["exp"][span](np.random.default_rng(77))[: N // 4]
    scalar = np.empty_like(x)
    _elementary.exp_scalar_into(x, scalar)
    assert_same_bits("exp (scalar)", scalar, oracle("exp", x), x)
    assert_same_bits("exp (array path)", E.exp(x), scalar, x)


POW_CASES = {
    "10000^y, y in [-1, 0]": lambda r: (np.full(N, 10000.0), r.uniform(-1.0, 0.0, N)),
    "500000^y, y in [-1, 0]": lambda r: (np.full(N, 500000.0), r.uniform(-1.0, 0.0, N)),
    "1000000^y, y in [-1, 0]": lambda r: (np.full(N, 1e6), r.uniform(-1.0, 0.0, N)),
    "base in [1.5, 1e7], y in [-1, 0]": lambda r: (r.uniform(1.5, 1e7, N), r.uniform(-1.0, 0.0, N)),
    "RoPE exponents (-2j)/D, D <= 2048": lambda r: _rope_exponents(r),
    "x in (0, 10], y in [-100, 100]": lambda r: (r.uniform(0.0, 10.0, N), r.uniform(-100.0, 100.0, N)),
    "any bit patterns": lambda r: (r.integers(0, 2**64, N, dtype=np.uint64).view(np.float64),
                                   r.integers(0, 2**64, N, dtype=np.uint64).view(np.float64)),
}


def _rope_exponents(rng):
    ys = np.concatenate([(-2.0 * np.arange(d // 2)) / d for d in range(2, 2049, 2)])
    x = rng.choice([10000.0, 500000.0, 1e6, 10.0, 1e4 + 0.5], ys.size)
    return x, ys


@pytest.mark.parametrize("span", list(POW_CASES))
def test_pow_equals_glibc_for_rope_bases_and_beyond(oracle, span):
    x, y = POW_CASES[span](np.random.default_rng(list(POW_CASES).index(span) + 4100))
    assert_same_bits("pow", E.pow(x, y), oracle("pow", x, y), x, y)


def test_the_build_without_fma_instructions_gives_the_same_bits(oracle, tmp_path):
    """PYDEPTH_LIBM_FMA=0 runs the functions' other build (fma() as a library call), as CPUs
    without FMA do; PYDEPTH_EXP_PATH=scalar does the same for the array exp."""
    rng = np.random.default_rng(31)
    x = {"exp": rng.uniform(-745.0, 710.0, N // 5), "log": scaled(rng, -1074, 996, N // 5),
         "log1p": rng.uniform(-1.0, 1.0, N // 5), "sin": rng.uniform(-1e5, 1e5, N // 5),
         "cos": rng.uniform(-1e5, 1e5, N // 5), "pow": rng.uniform(-1.0, 0.0, N // 5)}
    np.savez(tmp_path / "in.npz", **x)
    script = ("import sys, numpy as np, pydepth.elementary as E\n"
              "x = np.load(sys.argv[1])\n"
              "out = {f: (E.pow(10000.0, x[f]) if f == 'pow' else getattr(E, f)(x[f])) for f in x.files}\n"
              "out['path'] = np.array(E.exp_array_path())\n"
              "np.savez(sys.argv[2], **out)\n")
    env = dict(os.environ, PYDEPTH_LIBM_FMA="0", PYDEPTH_EXP_PATH="scalar")
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "in.npz"), str(tmp_path / "out.npz")],
                   check=True, env=env, cwd=tmp_path)
    got = np.load(tmp_path / "out.npz")
    assert str(got["path"]) == "scalar"
    for f in LIB:
        assert_same_bits(f, got[f], oracle(f, x[f]), x[f])
    assert_same_bits("pow", got["pow"], oracle("pow", np.full(N // 5, 10000.0), x["pow"]),
                     np.full(N // 5, 10000.0), x["pow"])


def _fma_triples(rng, n):
    """Arguments for fma in every regime: random binades, cancellation, exact ties, any bits."""
    def binade(lo, hi, m):
        return signed(rng, scaled(rng, lo, hi, m))
    k = n // 5
    a, b = binade(-60, 60, k), binade(-60, 60, k)
    parts = [(a, b, binade(-130, 130, k))]
    a, b = binade(-1000, 1000, k), binade(-1000, 1000, k)
    parts.append((a, b, binade(-1022, 1023, k)))
    a, b = binade(-30, 30, k), binade(-30, 30, k)
    with np.errstate(all="ignore"):
        near = -(a * b) * (1.0 + binade(-60, -1, k))  # heavy cancellation
    parts.append((a, b, near))
    # exact ties: a*b + c = uh + ulp(uh)/2 exactly, with uh = a*b rounded and ul its error
    a, b = binade(-40, 40, k), binade(-40, 40, k)
    uh = a * b
    with np.errstate(all="ignore"):
        half = np.ldexp(np.where(rng.random(k) < 0.5, 1.0, -1.0), np.frexp(uh)[1] - 54)
    parts.append((a, b, half))  # the tie needs ul, added by the caller below
    bits = rng.integers(0, 2**64, (3, n - 4 * k), dtype=np.uint64).view(np.float64)
    parts.append((bits[0], bits[1], bits[2]))
    return [np.concatenate(v) for v in zip(*parts)], k


def test_the_fma_emulation_of_the_builds_without_fma_is_exact(oracle):
    a, b, c = _fma_triples(np.random.default_rng(8), N)[0]
    k = N // 5
    ties = slice(3 * k, 4 * k)  # c = ulp(uh)/2 - ul makes a*b + c an exact halfway case
    ul = oracle("fma", a[ties], b[ties], -(a[ties] * b[ties]))
    c[ties] = c[ties] - ul
    out = np.empty_like(a)
    _elementary.fma_emulated_into(a, b, c, out)
    assert_same_bits("fma", out, oracle("fma", a, b, c), a, b)


def _around(*values):
    """The values, their neighbours on both sides and the second one above."""
    v = np.array(values, dtype=np.float64)
    with np.errstate(all="ignore"):
        return np.concatenate([v, np.nextafter(v, np.inf), np.nextafter(v, -np.inf),
                               np.nextafter(np.nextafter(v, np.inf), np.inf)])


COMMON_SPECIALS = np.concatenate([
    _around(0.0, -0.0, 5e-324, -5e-324, 2.2250738585072009e-308, 2.2250738585072014e-308,
            -2.2250738585072014e-308, 1.0, -1.0, 0.5, 2.0, 2.0 ** -54, 2.0 ** -27, 2.0 ** -26,
            2.0 ** -29, 2.0 ** 53, 1.7976931348623157e308, -1.7976931348623157e308),
    np.array([np.inf, -np.inf, np.nan, -np.nan], dtype=np.float64),
])
SPECIALS = {
    "exp": _around(709.782712893384, -745.1332191019411, -745.1332191019412, -708.3964185322641,
                   -708.39641853226408, 512.0, -512.0, 1024.0, -1024.0, 0.6931471805599453,
                   -0.6931471805599453),
    "log": _around(1.0 - 2.0 ** -4, 1.0 + 0.064697265625, 0.6875, 1.375, -0.5, 1e300, 1e-300),
    "log1p": _around(0.41421356237309503, -0.2928932188134524, -0.9999999999999999, 4.0,
                     2.0 ** 52, 2.0 ** 1023, -2.0, -1e300),
    "sin": np.concatenate([_around(0.126, 0.855469, 2.426265, 105414350.0, 1e22, 1e300,
                                   np.pi, -np.pi, 3.0, 6.283185307179586),
                           np.arange(1, 20001) * (np.pi / 2),  # near the zeros of sin or cos
                           # the range boundaries as high words (bits below them zero)
                           _around(*np.array([k << 32 for k in (0x3feb6000, 0x400368fd, 0x419921fb,
                                                               0x3e500000, 0x3e400000)],
                                             dtype=np.uint64).view(np.float64))]),
}
SPECIALS["cos"] = SPECIALS["sin"]


def _ulps_around(values, width):
    """Every double within width ulps of each value, both signs."""
    mid = np.array(values, dtype=np.float64).view(np.int64)[:, None]
    x = (mid + np.arange(-width, width + 1)).reshape(-1).view(np.float64)
    return np.concatenate([x, -x])


def test_log1p_sin_and_cos_agree_with_glibc_where_their_arithmetic_changes(oracle):
    """The pairs and splits of §5.2, §6.1 and §6.5 that a neighbour-only check rarely meets."""
    rng = np.random.default_rng(61)
    far_k0 = float.fromhex("-0x1.2bec400000001p-2")  # the one far log1p argument with k = 0
    edges = [float.fromhex(h) for h in ("-0x1.2bec4p-2", "0x1.a827ap-2", "0x1p-29", "0x1p-54")]
    x = np.concatenate([_ulps_around([far_k0, 2.0 ** 53, *edges], 3000),
                        rng.uniform(-1.0, far_k0, 20000)])
    assert_same_bits("log1p", E.log1p(x), oracle("log1p", x), x)
    # sin between A1 and A2 where H0 - |x| is an odd multiple of 1/256 (a tie of the table point)
    h0 = float.fromhex("0x1.921fb54442d18p0")
    ties = h0 - (2 * np.arange(-107, 110) + 1) / 256.0
    ties = ties[(ties >= float.fromhex("0x1.b6p-1")) & (ties < float.fromhex("0x1.368fdp1"))]
    top = (np.finfo(np.float64).max.view(np.int64) - np.arange(20000)).view(np.float64)
    bounds = [float.fromhex(h) for h in ("0x1.b6p-1", "0x1.368fdp1", "0x1.921fbp26")]
    x = np.concatenate([_ulps_around(ties, 2), top, -top,  # Dekker's high half of x is 2^1024
                        _ulps_around(bounds, 3000)])
    for name in ("sin", "cos"):
        assert_same_bits(name, LIB[name](x), oracle(name, x), x)


@pytest.mark.parametrize("func", list(LIB))
def test_special_values_thresholds_and_neighbours_equal_glibc(oracle, func):
    x = np.concatenate([COMMON_SPECIALS, SPECIALS[func], -SPECIALS[func]])
    assert_same_bits(func, LIB[func](x), oracle(func, x), x)
    for v in x[:40]:  # the scalar entry gives the same value as the array entry
        assert np.float64(LIB[func](float(v))).view(np.uint64) == LIB[func](np.array([v])).view(np.uint64)[0]


def test_pow_special_pairs_equal_glibc(oracle):
    vals = np.concatenate([_around(0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 5e-324,
                                   -5e-324, 1.7976931348623157e308, 10000.0, 2.0 ** -66, 2.0 ** 63,
                                   2.0 ** 64, 1075 * 0.6931471805599453 * 2.0 ** 53, 1e-300),
                           np.array([np.inf, -np.inf, np.nan, -np.nan])])
    x, y = np.meshgrid(vals, vals)  # every pair
    x, y = x.reshape(-1), y.reshape(-1)
    assert_same_bits("pow", E.pow(x, y), oracle("pow", x, y), x, y)


# ------------------------------------------- NaN results by the rules (docs/numerics-elementary.md §10)
# Checked against the specification's rules, not the oracle, so they run on every platform and
# build; the C program tests/c/nan_check.c checks the same rules under qemu-aarch64 and wine.
NAN_STAR, QUIET_BIT, SIGN_BIT, ONE_BITS = 0xFFF8000000000000, 1 << 51, 1 << 63, 0x3FF0000000000000
NAN_INPUTS = [0x7FF8000000000000, 0xFFF8000000000000, 0x7FF8000000000123, 0xFFF8000000000456,
              0x7FF0000000000789, 0xFFF0000000000ABC]  # quiet and signalling, both signs
POW_NON_NAN = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 2.5, -2.5, np.inf, -np.inf,
               5e-324, -5e-324, 1e300, -1e300, 2.0 ** 70, -(2.0 ** 70), 2.0 ** -70, 2.0 ** 53 - 1,
               -(2.0 ** 53 - 1), 2.0 ** 53, 1.0 + 2.0 ** -52, -(1.0 - 2.0 ** -53)]
NAN_CREATORS = {"exp": [], "log": [-1.0, -1e-4, -np.inf, -5e-324, -1e300],
                "log1p": [-2.0, -np.inf, -1.0 - 2.0 ** -52, -1e300], "sin": [np.inf, -np.inf],
                "cos": [np.inf, -np.inf]}
NAN_ARGS = np.concatenate([np.array(NAN_INPUTS, dtype=np.uint64).view(np.float64), POW_NON_NAN])
POW_X, POW_Y = np.repeat(NAN_ARGS, NAN_ARGS.size), np.tile(NAN_ARGS, NAN_ARGS.size)


def _is_nan(u):
    return (u >> 52) & 0x7FF == 0x7FF and u & ((1 << 52) - 1) != 0


def _signalling(u):
    return _is_nan(u) and not u & QUIET_BIT


def _odd_integer(y):
    return bool(np.isfinite(y)) and float(y).is_integer() and abs(y) < 2.0 ** 53 and int(y) % 2 == 1


def _pow_by_the_rules(ux, uy):
    """The bits §10.1 prescribes for pow(x, y) where it speaks, else None (the result is no NaN)."""
    x, y = np.array([ux, uy], dtype=np.uint64).view(np.float64).tolist()
    if uy << 1 & (2 ** 64 - 1) == 0:
        return ux | QUIET_BIT if _signalling(ux) else ONE_BITS
    if ux == ONE_BITS:
        return uy | QUIET_BIT if _signalling(uy) else ONE_BITS
    if _is_nan(ux):
        return (ux | QUIET_BIT) & ~SIGN_BIT if not _is_nan(uy) and _odd_integer(y) else ux | QUIET_BIT
    if _is_nan(uy):
        return uy | QUIET_BIT
    if x < 0 and np.isfinite(x) and np.isfinite(y) and not float(y).is_integer():
        return NAN_STAR
    return None


def _nan_case_results(env=None):
    """pow over every pair of NAN_ARGS and each unary function on NaNs and NaN creators, run in
    this process or, with env, in a child process (the build is chosen once per process)."""
    code = ("import sys, numpy as np, pydepth.elementary as E\n"
            "a = np.load(sys.argv[1])\n"
            "out = {f: getattr(E, f)(a[f]) for f in a.files if f not in ('px', 'py')}\n"
            "out['pow'] = E.pow(a['px'], a['py'])\n"
            "np.savez(sys.argv[2], **out)\n")
    inputs = {f: np.concatenate([NAN_ARGS[:len(NAN_INPUTS)], np.array(c, dtype=np.float64)])
              for f, c in NAN_CREATORS.items()}
    if env is None:
        out = {f: getattr(E, f)(x) for f, x in inputs.items()}
        out["pow"] = E.pow(POW_X, POW_Y)
        return inputs, out
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "in.npz"), os.path.join(tmp, "out.npz")
        np.savez(src, px=POW_X, py=POW_Y, **inputs)
        subprocess.run([sys.executable, "-c", code, src, dst], check=True,
                       env=dict(os.environ, **env), cwd=tmp)
        with np.load(dst) as got:
            return inputs, {f: got[f] for f in got.files}


NAN_BUILDS = {"the build this process chose": None, "the emulated-fma build": {"PYDEPTH_LIBM_FMA": "0"}}


@pytest.mark.parametrize("build", list(NAN_BUILDS))
def test_nan_results_follow_the_rules_bit_for_bit_on_every_build(build):
    inputs, out = _nan_case_results(NAN_BUILDS[build])
    for f, x in inputs.items():  # a NaN input comes out quiet, a created NaN is NaN*
        want = [u | QUIET_BIT if _is_nan(u) else NAN_STAR for u in x.view(np.uint64).tolist()]
        assert out[f].view(np.uint64).tolist() == want, f
    checked = 0
    for ux, uy, uo in zip(POW_X.view(np.uint64).tolist(), POW_Y.view(np.uint64).tolist(),
                          out["pow"].view(np.uint64).tolist()):
        want = _pow_by_the_rules(ux, uy)
        if want is None:
            assert not _is_nan(uo), f"pow({ux:#x}, {uy:#x}) = {uo:#x}, a NaN"
        else:
            checked += 1
            assert uo == want, f"pow({ux:#x}, {uy:#x}) = {uo:#x}, the rules say {want:#x}"
    assert checked > 400  # every NaN argument against every value, and the created NaNs


def test_log_and_log1p_of_their_poles_and_minus_zero_are_infinities_not_nans():
    assert E.log(np.array([0.0, -0.0])).view(np.uint64).tolist() == [0xFFF0000000000000] * 2
    assert E.log1p(np.array([-1.0])).view(np.uint64).tolist() == [0xFFF0000000000000]


def _near_halfway(func, x):
    """The inputs whose exact result lies within 2^-10 ulp of a rounding midpoint (80-bit check)."""
    with np.errstate(all="ignore"):
        exact = getattr(np, func)(x.astype(np.longdouble))
        rounded = exact.astype(np.float64)
        ulp = np.spacing(np.abs(rounded)).astype(np.longdouble)
        frac = (exact - rounded.astype(np.longdouble)) / ulp
        keep = np.isfinite(rounded) & (np.abs(np.abs(frac) - 0.5) < 2.0 ** -10)
    return x[keep]


@pytest.mark.skipif(np.finfo(np.longdouble).nmant < 63, reason="needs 80-bit long double")
@pytest.mark.parametrize("func", list(LIB))
def test_results_near_rounding_midpoints_equal_glibc(oracle, func):
    span = {"exp": (-60.0, 0.0), "log": (1e-3, 1e3), "log1p": (-0.5, 10.0), "sin": (-1e3, 1e3),
            "cos": (-1e3, 1e3)}[func]
    x = _near_halfway(func, np.random.default_rng(9).uniform(*span, N))
    assert x.size > 500  # the selection really found hard cases
    assert_same_bits(func, LIB[func](x), oracle(func, x), x)


def test_simd_exp_matches_scalar_on_mixed_special_lanes_and_tails():
    rng = np.random.default_rng(3)
    pool = np.concatenate([COMMON_SPECIALS, SPECIALS["exp"], rng.uniform(-800, 800, 400)])
    before = _elementary.exp_array_path()
    try:
        for n in (0, 1, 3, 4, 5, 7, 8, 9, 31, 257):
            x = rng.choice(pool, n)
            assert _elementary.force_exp_array_path("scalar")
            scalar = E.exp(x)
            if _elementary.force_exp_array_path("avx2-fma"):
                assert_same_bits("exp", E.exp(x), scalar, x)
    finally:
        _elementary.force_exp_array_path(before)


def test_the_array_exp_in_place_gives_each_lane_the_exp_of_its_own_input():
    rng = np.random.default_rng(5)
    pool = np.concatenate([COMMON_SPECIALS, SPECIALS["exp"], -SPECIALS["exp"], rng.uniform(-600, 600, 64)])
    before = _elementary.exp_array_path()
    try:
        for path in ("avx2-fma", "scalar"):
            if not _elementary.force_exp_array_path(path):
                continue
            for n in (1, 2, 3, 4, 6, 8, 13, 64, 255):
                x = rng.choice(pool, n)
                apart, inplace = np.empty(n), x.copy()
                _elementary.exp_into(x, apart)
                _elementary.exp_into(inplace, inplace)
                assert_same_bits(f"exp in place ({path})", inplace, apart, x)
    finally:
        _elementary.force_exp_array_path(before)


def test_the_extensions_import_no_elementary_function_from_libm():
    nm = shutil.which("nm")
    if nm is None:
        _unavailable("nm is not installed")
    banned = {"exp", "log", "log1p", "sin", "cos", "pow", "sincos", "__exp_finite",
              "__log_finite", "__pow_finite", "expm1"}
    everything = set()
    for binary in native_binaries():
        out = subprocess.run([nm, "-D", "--undefined-only", str(binary)],
                             capture_output=True, text=True, check=True).stdout
        imported = {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}
        everything |= imported
        assert not imported & banned, f"{binary.name} imports {sorted(imported & banned)}"
    assert "malloc" in everything  # the listings really are the import tables


# ---------------------------------------------------------------------------- inputs and shapes

def test_scalars_give_float64_scalars_and_arrays_keep_their_shape():
    assert isinstance(E.exp(1.0), np.float64) and isinstance(E.pow(2, 3), np.float64)
    x = np.linspace(-3.0, 3.0, 24).reshape(2, 3, 4)
    for f in LIB.values():
        out = f(x)
        assert out.shape == x.shape and out.dtype == np.float64 and out is not x
    assert E.pow(np.ones((3, 1)), np.arange(4.0)).shape == (3, 4)
    assert E.exp(np.array([])).shape == (0,)


def test_inputs_are_never_modified_and_strided_views_work():
    x = np.linspace(-5.0, 5.0, 101)
    keep = x.copy()
    view = x[::3]
    assert_same_bits("exp", E.exp(view), E.exp(view.copy()), view)
    assert np.array_equal(x.view(np.uint64), keep.view(np.uint64))


def test_exactly_representable_integers_and_narrower_floats_are_accepted():
    assert E.exp([0, 1]).tolist() == [1.0, float(E.exp(1.0))]
    f32 = np.array([0.5, 2.0], dtype=np.float32)
    assert_same_bits("log", E.log(f32), E.log(f32.astype(np.float64)), f32)


@pytest.mark.parametrize("bad", [True, np.bool_(False), 1 + 2j, np.array([1j]), "1.0", [1.0, "a"],
                                 [[1.0], [2.0, 3.0]], [2 ** 60 + 1], np.array([None, 1.0]),
                                 np.array([1.0], dtype=np.longdouble)], ids=repr)
def test_unusable_inputs_raise_a_typed_error_naming_them(bad):
    if isinstance(bad, np.ndarray) and bad.dtype == np.longdouble and np.longdouble == np.float64:
        pytest.skip("long double is float64 here")
    with pytest.raises(ElementaryInputError) as info:
        E.exp(bad)
    assert isinstance(info.value, PydepthError)


def test_private_scalar_entries_take_floats_only():
    assert _elementary.exp_float(1.0) == E.exp(np.array([1.0]))[0]
    for bad in (1, "1", None, np.array(1.0)):
        with pytest.raises(ElementaryInputError):
            _elementary.exp_float(bad)
        with pytest.raises(ElementaryInputError):
            _elementary.pow_float(2.0, bad)


def test_pow_refuses_shapes_that_do_not_broadcast():
    with pytest.raises(ElementaryInputError, match=r"\(2,\) and \(3,\)"):
        E.pow(np.ones(2), np.ones(3))


@pytest.mark.parametrize("x,out", [
    ([1.0], np.empty(1)), (np.ones(2, dtype=np.float32), np.empty(2)), (np.ones((2, 2)), np.empty(4)),
    (np.ones(4)[::2], np.empty(2)), (np.ones(2), np.empty(3)), (np.ones(2), np.empty(2, np.float32)),
], ids=["list", "float32", "2-d", "strided", "length", "out-dtype"])
def test_private_entry_points_check_their_arrays(x, out):
    for into in (_elementary.exp_into, _elementary.exp_scalar_into, _elementary.log_into,
                 _elementary.sin_into):
        with pytest.raises(ElementaryInputError):
            into(x, out)
    with pytest.raises(ElementaryInputError):
        _elementary.pow_into(x, x, out)


def test_private_entry_points_refuse_a_read_only_output_and_leave_it_untouched():
    out = np.zeros(3)
    out.flags.writeable = False
    with pytest.raises(ElementaryInputError, match="read-only"):
        _elementary.exp_into(np.ones(3), out)
    assert not out.any()
    with pytest.raises(ElementaryInputError):
        _elementary.force_exp_array_path(b"scalar")
    assert _elementary.force_exp_array_path("no-such-path") is False
