# SPDX-License-Identifier: MIT
"""The array exp's last partial group (docs/numerics-elementary.md §7.3): the eight-lane loop masks
its loads and stores there, so every length 0..48 and every input class at every position of
the last two groups must give the scalar pd_exp's bits, on every path the CPU has, in place and
out of place, writing nothing past the end.
"""

import numpy as np
import pytest

from pydepth._native import _elementary

from conftest import EXP_PATHS as PATHS, assert_same_bits, scalar_exp

# §2.1's classes: in range, tiny (±0 and |x| < 2^-54), outside §2.2 (|x| >= 512, ±inf, NaN),
# and results that are subnormal or underflow to zero
CLASSES = {
    "in range": [-3.5, 0.25, -29.0, 511.0],
    "tiny": [0.0, -0.0, 2.0**-55, -(2.0**-60), 5e-324],
    "large": [512.0, -512.0, 709.0, 710.0, -800.0, 1e300],
    "inf": [np.inf, -np.inf],
    "nan": [np.nan, -np.nan, np.frombuffer(np.uint64(0x7FF0000000000001).tobytes(), np.float64)[0]],
    "subnormal result": [-709.0, -740.0, -745.0, -745.2],
}


@pytest.fixture(params=PATHS)
def path(request):
    """Every path this CPU and build have, the scalar one included."""
    before = _elementary.exp_array_path()
    if not _elementary.force_exp_array_path(request.param):
        pytest.skip(f"no {request.param} path here")
    yield request.param
    assert _elementary.force_exp_array_path(before)


@pytest.mark.parametrize("cls", sorted(CLASSES))
def test_every_length_and_tail_position_gives_the_scalar_bits(path, cls):
    rng = np.random.default_rng(4101)
    values = np.array(CLASSES[cls], dtype=np.float64)
    for n in range(49):
        for p in [None, *range(max(0, n - 16), n)]:  # no special lane, then each of the last two groups'
            x = rng.uniform(-30.0, 5.0, n)
            if p is not None:
                x[p] = values[p % values.size]
            ref = scalar_exp(x)
            out = np.full(n + 9, -123.25)  # a whole group of guards past the end
            _elementary.exp_into(x, out[:n])
            assert_same_bits(f"{path}, {cls}, n={n}, at {p}", out[:n], ref, x)
            assert np.all(out[n:] == -123.25), f"{path}, n={n}: wrote past the end"
            y = x.copy()
            _elementary.exp_into(y, y)
            assert_same_bits(f"{path} in place, {cls}, n={n}, at {p}", y, ref, x)
        # the whole row of that class
        x = values[np.arange(n) % values.size].copy()
        out = np.empty(n)
        _elementary.exp_into(x, out)
        assert_same_bits(f"{path}, all {cls}, n={n}", out, scalar_exp(x), x)
