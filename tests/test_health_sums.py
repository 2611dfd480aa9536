# SPDX-License-Identifier: MIT
"""The residual-health RMS whose sums of squares run in the core (``valid_feature_rms_many``, the
skin's ``_health.sums_of_squares``) has the bits of numerics.md §9 written out in numpy here —
one left-to-right float64 sum per array, also when arrays are summed side by side, read from
float32 in place, scaled first, or sent to the scaled path by a tiny or huge value."""
import math

import numpy as np
import pytest

from pydepth import InvalidGeometryError, NonFiniteValueError
from pydepth._native import _health
from pydepth.health import valid_feature_rms, valid_feature_rms_many

SAFE = 2.0 ** -511


def contract_rms(values, valid, scale=1.0):
    """§9 independently: float64 values (times scale), valid positions, sequential sums; divided
    by the largest magnitude first when a square could overflow or underflow."""
    x = np.asarray(values, dtype=np.float64)[valid].reshape(-1)
    if scale != 1.0:
        x = x * scale
    n = x.size
    big = float(np.abs(x).max())
    if big == 0.0:
        return 0.0
    nonzero = np.abs(x)[x != 0.0]
    if float(nonzero.min()) >= SAFE and big <= math.sqrt(np.finfo(np.float64).max / n):
        return math.sqrt((0.0 + float(np.add.accumulate(x * x)[-1])) / float(n))
    with np.errstate(under="ignore"):
        y = x / big
        return big * math.sqrt((0.0 + float(np.add.accumulate(y * y)[-1])) / float(n))


def bits(values):
    return np.array(values, dtype=np.float64).view(np.uint64).tolist()


def arrays(rng, count, shape, dtype):
    return [(rng.standard_normal(shape) * 10.0 ** rng.integers(-6, 6)).astype(dtype) for _ in range(count)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("scale", [1.0, 1.0 / 3.0, -2.5])
def test_side_by_side_sums_have_the_bits_of_one_sequential_sum_per_array(dtype, scale):
    rng = np.random.default_rng(7)
    valid = rng.random((3, 17)) > 0.3
    values = arrays(rng, 19, (3, 17, 13), dtype)  # 19: two full groups of lanes and a short one
    got = valid_feature_rms_many(values, valid, what=[f"a{i}" for i in range(19)], scale=scale)
    assert bits(got) == bits([contract_rms(v, valid, scale) for v in values])
    assert bits(got[:1]) == bits([valid_feature_rms(values[0] * np.float64(scale) if scale != 1.0 else values[0],
                                                    valid)])


def test_mixed_element_types_and_edge_values_keep_the_contracts_bits():
    rng = np.random.default_rng(11)
    valid = np.ones((2, 5), dtype=bool)
    valid[1, 4] = False
    base = rng.standard_normal((2, 5, 4))
    tiny = base.copy()
    tiny[0, 0, 0] = 1e-200  # a square that underflows: the scaled path
    huge = base.copy()
    huge[1, 1, 1] = 1e160  # a square that overflows: the scaled path
    zeros = np.zeros((2, 5, 4))
    some_zero = base.copy()
    some_zero[0, 1] = 0.0
    masked_nan = base.copy()
    masked_nan[1, 4] = np.nan  # an invalid position: never read
    values = [base.astype(np.float32), tiny, huge, zeros, some_zero.astype(np.float32), masked_nan, base]
    got = valid_feature_rms_many(values, valid, what=[str(i) for i in range(len(values))])
    assert bits(got) == bits([contract_rms(v, valid) for v in values])
    tiny32 = valid_feature_rms_many([base.astype(np.float32)], valid, what=["t"], scale=2.0 ** -400)
    assert bits(tiny32) == bits([contract_rms(base.astype(np.float32), valid, 2.0 ** -400)])


def test_a_non_finite_valid_value_is_refused_with_its_array_and_position():
    valid = np.ones((2, 3), dtype=bool)
    values = [np.ones((2, 3, 2), dtype=np.float32), np.ones((2, 3, 2), dtype=np.float32)]
    values[1][1, 2, 0] = np.inf
    with pytest.raises(NonFiniteValueError, match=r"site 1 holds non-finite value inf at valid position \(1, 2\)"):
        valid_feature_rms_many(values, valid, what=["site 0", "site 1"])
    with pytest.raises(NonFiniteValueError, match="overflow holds non-finite value inf"):
        valid_feature_rms_many([np.full((2, 3, 2), 3e38, dtype=np.float32)], valid, what=["overflow"], scale=1e300)


def test_the_skin_refuses_arrays_it_cannot_read_in_place():
    valid = np.ones(4, dtype=bool)
    good = np.ones((4, 3), dtype=np.float32)
    with pytest.raises(InvalidGeometryError, match="array 1 must be a 2-d C-contiguous"):
        _health.sums_of_squares([good, np.ones((4, 3), dtype=np.float16)], [1.0, 1.0], valid, 1.0)
    with pytest.raises(InvalidGeometryError, match=r"array 1 has shape \(4, 2\)"):
        _health.sums_of_squares([good, np.ones((4, 2))], [1.0, 1.0], valid, 1.0)
    with pytest.raises(InvalidGeometryError, match="1-d C-contiguous boolean"):
        _health.sums_of_squares([good], [1.0], valid.astype(np.uint8), 1.0)
    with pytest.raises(InvalidGeometryError, match="2 arrays and 1 scales"):
        _health.sums_of_squares([good, good], [1.0], valid, 1.0)
