# SPDX-License-Identifier: MIT
"""Every vector path of the array exp (docs/numerics-elementary.md §7.3) gives the scalar pd_exp's
bits for every input, length, lane position and aliasing; the default path is the widest the CPU has.

The reference is `exp_scalar_into` (one scalar `pd_exp` call per element), which
`test_elementary.py` pins to glibc; every comparison is on bit patterns, NaNs included.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

from pydepth._native import _elementary

from conftest import EXP_PATHS as PATHS, assert_same_bits, scalar_exp

NEEDS = {"avx512-fma": "AVX-512F", "avx2-fma": "AVX2 and FMA"}


@pytest.fixture(params=PATHS[:-1])
def vector_path(request):
    """Selects one vector path for the test, skipping where this CPU or build lacks it."""
    name = request.param
    before = _elementary.exp_array_path()
    if not _elementary.force_exp_array_path(name):
        pytest.skip(f"no {name} path here: needs an x86-64 GCC/clang build on a CPU with {NEEDS[name]}")
    yield name
    assert _elementary.force_exp_array_path(before)


def array_exp(x):
    out = np.empty_like(x)
    _elementary.exp_into(x, out)
    return out


def ulps_around(values, width):
    """Every double within `width` ulps of each value (its sign kept; ±0 gives the subnormals)."""
    mid = np.abs(np.array(values, dtype=np.float64)).view(np.int64)[:, None]
    near = np.maximum(mid + np.arange(-width, width + 1), 0).view(np.float64)
    return np.where(np.signbit(np.array(values, dtype=np.float64))[:, None], -near, near).reshape(-1)


def nans():
    """Quiet and signalling NaNs of both signs, with and without payload bits."""
    bits = np.array(
        [
            0x7FF8000000000000,
            0x7FF8000000000001,
            0x7FFFFFFFFFFFFFFF,
            0x7FF0000000000001,
            0x7FF4000000000000,
            0xFFF8000000000000,
            0xFFF0000000000001,
            0xFFFFFFFFFFFFFFFF,
        ],
        dtype=np.uint64,
    )
    return bits.view(np.float64)


# Every class of §2.1 and its edges: zeros, |x| < 2^-54 and its boundary, the 512 and 1024
# boundaries of §2.2 and §2.3, the overflow threshold, the subnormal range and total underflow,
# huge magnitudes, infinities, subnormal inputs, NaNs.
EDGES = np.concatenate(
    [
        ulps_around([0.0, -0.0], 3),
        ulps_around([2.0**-54, -(2.0**-54), 2.0**-53, -(2.0**-53), 1.0, -1.0], 3),
        ulps_around([512.0, -512.0, 1024.0, -1024.0], 3),
        ulps_around([709.782712893384, 709.7827128933840, 710.0], 3),  # overflow threshold
        ulps_around([-708.3964185322641, -708.39641853226408], 3),  # results turn subnormal
        ulps_around([-745.1332191019411, -745.1332191019412, -744.44007192138126], 3),  # last subnormals
        ulps_around(
            [
                -0.6931471805599453,
                0.6931471805599453,
                1.7976931348623157e308,
                -1.7976931348623157e308,
                2.2250738585072014e-308,
                -2.2250738585072014e-308,
            ],
            2,
        ),
        np.array([-1e300, 1e300, -1e18, 1e18, -(2.0**62), np.inf, -np.inf]),
        nans(),
    ]
)


def _spread(rng, n):
    """n arguments over the whole range: any bit pattern, every binade of |x| below 2^10 with
    both signs, uniform over the finite-result range, and a softmax's shifted logits."""
    q = n // 4
    anybits = rng.integers(0, 2**64, q, dtype=np.uint64).view(np.float64)
    with np.errstate(under="ignore"):
        binades = np.ldexp(rng.uniform(1.0, 2.0, q), rng.integers(-1074, 10, q))
    binades = np.where(rng.random(q) < 0.5, -binades, binades)
    return np.concatenate([anybits, binades, rng.uniform(-746.0, 710.0, q), rng.uniform(-60.0, 0.0, n - 3 * q)])


def test_a_vector_path_equals_the_scalar_exp_on_a_million_arguments_over_the_whole_range(vector_path):
    rng = np.random.default_rng(3901)
    x = _spread(rng, 1 << 20)
    # as drawn (long runs of in-range groups) and shuffled (groups with out-of-range lanes)
    for label, xs in (("as drawn", x), ("shuffled", rng.permutation(x))):
        assert_same_bits(f"{vector_path}, {label}", array_exp(xs), scalar_exp(xs), xs)


def test_a_vector_path_equals_the_scalar_exp_on_every_edge_in_every_lane_position(vector_path):
    ordinary = np.random.default_rng(3902).uniform(-20.0, 20.0, 8 * EDGES.size + 7)
    for lane in range(8):
        # each edge alone among in-range values, at lane position `lane` of its group of eight
        x = ordinary.copy()
        x[lane + 8 * np.arange(EDGES.size)] = EDGES
        assert_same_bits(f"{vector_path}, edge alone at lane {lane}", array_exp(x), scalar_exp(x), x)
        # the edges side by side, shifted by `lane` elements
        y = np.concatenate([ordinary[:lane], EDGES])
        assert_same_bits(f"{vector_path}, edges shifted by {lane}", array_exp(y), scalar_exp(y), y)


@pytest.mark.parametrize("n", range(34))
def test_a_vector_path_handles_every_length_in_place_and_out_of_place(vector_path, n):
    rng = np.random.default_rng(3903 + n)
    pool = np.concatenate([EDGES, rng.uniform(-30.0, 5.0, EDGES.size)])
    for start in (0, 1, 3):  # the arrays' first element at different alignments
        for draw in range(4):
            buf = rng.choice(pool, start + n + 1)
            if draw == 0:
                buf = rng.uniform(-30.0, 5.0, buf.size)  # all in range: the unpatched groups
            x = buf[start : start + n]
            keep = buf.copy()
            ref = scalar_exp(x)
            # out of place, into a view with guard elements on both sides
            sentinel = np.float64(-123.25)
            out = np.full(n + 2, sentinel)
            if n:
                _elementary.exp_into(x, out[1 : n + 1])
            assert_same_bits(f"{vector_path}, n={n}, start={start}", out[1 : n + 1], ref, x)
            assert out[0] == sentinel and out[n + 1] == sentinel, "wrote outside its output"
            assert np.array_equal(buf.view(np.uint64), keep.view(np.uint64)), "changed its input"
            # in place: each element's own exp, its neighbours outside the range untouched
            if n:
                _elementary.exp_into(x, x)
            assert_same_bits(f"{vector_path} in place, n={n}, start={start}", x, ref, keep[start : start + n])
            outside = np.r_[0:start, start + n : buf.size]
            assert np.array_equal(buf[outside].view(np.uint64), keep[outside].view(np.uint64))


def _path_in_a_fresh_process(tmp_path, setting):
    env = {k: v for k, v in os.environ.items() if k != "PYDEPTH_EXP_PATH"}
    if setting is not None:
        env["PYDEPTH_EXP_PATH"] = setting
    script = "import pydepth.elementary as E; print(E.exp_array_path())"
    return subprocess.run(
        [sys.executable, "-P", "-c", script], env=env, cwd=tmp_path, check=True, capture_output=True, text=True
    ).stdout.strip()


def test_the_default_path_is_the_widest_supported_and_the_environment_names_a_narrower_one(tmp_path):
    before = _elementary.exp_array_path()
    try:
        supported = [p for p in PATHS if _elementary.force_exp_array_path(p)]
    finally:
        assert _elementary.force_exp_array_path(before)
    assert supported[-1] == "scalar"
    assert _path_in_a_fresh_process(tmp_path, None) == supported[0]
    assert _path_in_a_fresh_process(tmp_path, "no-such-path") == supported[0]
    for i, name in enumerate(PATHS):
        # a named path where the CPU has it, else the widest supported path narrower than it
        expected = next(p for p in PATHS[i:] if p in supported)
        assert _path_in_a_fresh_process(tmp_path, name) == expected
