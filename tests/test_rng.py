# SPDX-License-Identifier: MIT
"""SplitMix64 against an independent Python transcription of docs/numerics.md §2.1."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import pydepth

GOLDEN = 0x9E3779B97F4A7C15
MASK = 2**64 - 1


def reference_draws(seed, n):
    state, out = seed, []
    for _ in range(n):
        state = (state + GOLDEN) & MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        out.append(z ^ (z >> 31))
    return out


def test_seed_zero_test_vector():
    rng = pydepth.SplitMix64(0)
    got = [rng.next_u64() for _ in range(4)]
    assert got == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F, 0xF88BB8A8724C81EC]


@pytest.mark.parametrize("seed", [0, 1, 17, 42, 4701, 2**63, 2**64 - 1])
def test_first_draws_match_reference(seed):
    rng = pydepth.SplitMix64(seed)
    assert rng.state == seed
    assert [rng.next_u64() for _ in range(8)] == reference_draws(seed, 8)
    assert rng.state == (seed + 8 * GOLDEN) & MASK


@given(st.integers(0, MASK), st.integers(0, 50))
def test_state_after_n_draws(seed, n):
    rng = pydepth.SplitMix64(seed)
    for _ in range(n):
        rng.next_unit_f64()
    assert rng.state == (seed + n * GOLDEN) & MASK


@given(st.integers(0, MASK))
def test_unit_float_is_top_53_bits(seed):
    a, b = pydepth.SplitMix64(seed), pydepth.SplitMix64(seed)
    u = a.next_unit_f64()
    z = b.next_u64()
    assert np.float64(u).view(np.uint64) == np.float64((z >> 11) * 2.0**-53).view(np.uint64)
    assert 0.0 <= u < 1.0


def test_state_round_trip_and_copy():
    rng = pydepth.SplitMix64(123)
    rng.next_u64()
    resumed = pydepth.SplitMix64.from_state(rng.state)
    clone = rng.copy()
    clone.next_u64()
    assert [resumed.next_u64() for _ in range(3)] == [rng.next_u64() for _ in range(3)]
    assert clone.state != rng.state  # copies are independent


@pytest.mark.parametrize("bad", [-1, 2**64, 1.5, "3", None, True])
def test_bad_seeds_are_refused(bad):
    with pytest.raises((ValueError, TypeError)):
        pydepth.SplitMix64(bad)


def test_xavier_test_vector():
    """docs/numerics.md §2.2: seed 17, one [2, 2] matrix (drawn through a 2-token, width-2 model's
    embedding, which is exactly one Xavier [V, W] = [2, 2] matrix)."""
    cfg = pydepth.DecoderConfig(2, 2, 1, 1, 0, 1)
    model = pydepth.DecoderModel(cfg, pydepth.SplitMix64(17))
    bits = [format(int(x), "016x") for x in model.parameters[0].value.reshape(-1).view(np.uint64)]
    assert bits == ["3f744760bbbfc4e2", "bfd10508068942ad", "bfdae98b1d44f6ae", "bfe5a45c1710f8d8"]


@pytest.mark.parametrize("fan_in,fan_out", [(4, 4), (266, 4), (16, 20), (512, 1536), (1, 1)])
def test_xavier_scale(fan_in, fan_out):
    s = pydepth.xavier_scale(fan_in, fan_out)
    assert (s.fan_in, s.fan_out) == (fan_in, fan_out)
    assert s.target_variance == 2.0 / float(fan_in + fan_out)
    assert s.standard_deviation == np.sqrt(s.target_variance)
    assert s.uniform_limit == np.sqrt(6.0 / float(fan_in + fan_out))


@pytest.mark.parametrize("fan_in,fan_out,msg", [(0, 4, "fan_in"), (4, 0, "fan_out"),
                                                (2**64 - 1, 1, "overflow"), (-1, 2, "fan_in"),
                                                (1.0, 2, "fan_in")])
def test_xavier_scale_errors(fan_in, fan_out, msg):
    with pytest.raises(pydepth.InitializationError, match=msg):
        pydepth.xavier_scale(fan_in, fan_out)
