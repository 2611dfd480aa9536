# SPDX-License-Identifier: MIT
"""Each rule has one owner: the core checks id ranges and the translation words them once;
the depth policy applies the depth rule; one clone, one bit formatter, one laptop config."""
import numpy as np
import pytest

import pydepth
from pydepth import Batch, DecoderConfig, DecoderModel, DepthScalePolicy, SplitMix64, TokenError


@pytest.fixture
def model():
    return DecoderModel(DecoderConfig(20, 4, 1, 4, 2, 5), SplitMix64(11))


def test_unsigned_ids_beyond_int64_are_named_exactly(model):
    tokens = np.array([[1, 2**64 - 1, 3]], dtype=np.uint64)
    with pytest.raises(TokenError, match=r"token id 18446744073709551615 at position \[0, 1\] is outside \[0, 20\)"):
        model.forward(tokens)
    fwd = model.forward(np.array([[1, 2, 3]]))
    with pytest.raises(TokenError, match=r"target id 18446744073709551615 at position \[0, 2\]"):
        fwd.loss(np.array([[1, 2, 2**64 - 1]], dtype=np.uint64))
    assert np.isfinite(fwd.loss(np.array([[1, 2, 3]])).item())  # the refusal attached no loss


def test_the_first_offending_position_is_reported(model):
    with pytest.raises(TokenError, match=r"token id 25 at position \[1, 0\]"):
        model.forward(np.array([[1, 2, 3], [25, -4, 99]]))


def test_padding_ids_are_never_range_checked_but_valid_ones_are(model):
    batch = Batch(np.array([[1, 2, 10**9]]), np.array([[2, 3, -5]]), np.array([[0, 0, -1]]))
    model.loss(batch)  # padding holds ids outside [0, V): never read
    bad = Batch(np.array([[1, 2, 3]]), np.array([[2, 20, 0]]), np.array([[0, 0, -1]]))
    fwd = model.forward(bad)  # targets are checked when the loss is attached
    with pytest.raises(TokenError, match=r"target id 20 at valid position \[0, 1\] is outside \[0, 20\)"):
        fwd.loss()


def test_clone_copies_values_and_nothing_else(model):
    model.loss(np.array([[1, 2]]), np.array([[2, 3]])).backward()
    twin = model.clone()
    assert twin is not model and twin.config == model.config
    for a, b in zip(model.parameters, twin.parameters):
        assert a.name == b.name and a is not b
        assert np.array_equal(a.value.view(np.uint64), b.value.view(np.uint64))
        assert not b.grad.any()
    first = twin.parameters[0]
    first.assign(np.zeros(first.shape))
    assert model.parameters[0].value.any()


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_policy_apply_scales_exactly_the_selected_tensors_once(layers):
    base = DecoderModel(DecoderConfig(9, 4, 1, 6, layers, 4), SplitMix64(5))
    policy = DepthScalePolicy(layers)
    before = [p.value.copy() for p in base.parameters]
    applied = policy.apply(base.parameters)
    scaled = [p.name for p in base.parameters if policy.scales(p.name)]
    expected = [] if layers == 1 else [f"blocks.{b}.{s}" for b in range(layers)
                                       for s in ("attention.output.weight", "ffn.down.weight")]
    assert scaled == expected
    for p, q, old in zip(base.parameters, applied, before):
        assert q is not p and q.name == p.name
        assert np.array_equal(p.value.view(np.uint64), old.view(np.uint64))  # originals untouched
        want = old * policy.factor if p.name in scaled else old
        assert np.array_equal(q.value.view(np.uint64), want.view(np.uint64))


def test_depth_initialization_equals_the_policy_applied_to_the_base():
    cfg = DecoderConfig(9, 4, 1, 6, 3, 4)
    fresh = pydepth.FreshDepthInitialization.prepare(
        cfg, pydepth.DepthInitializationBudget(cfg.parameter_count, 4), SplitMix64(8))
    expected = fresh.policy.apply(fresh.base_model.parameters)
    for p, q in zip(fresh.complete().model.parameters, expected):
        assert np.array_equal(p.value.view(np.uint64), q.value.view(np.uint64))


def test_one_bit_formatter_and_one_laptop_configuration():
    from pydepth._native import _bits
    from pydepth.chapter import demo, laptop, trace
    from pydepth import depth_init
    assert trace.float_bits is _bits.float_bits is depth_init.float_bits is demo.float_bits
    assert trace.hex_bits is _bits.hex_bits
    assert _bits.float_bits(1.0) == "3ff0000000000000"
    assert demo.LAPTOP_CONFIG is laptop.LAPTOP_CONFIG
    assert laptop.plan_config() == laptop.LAPTOP_CONFIG
    assert demo.laptop_plan()["parameter_count"] == 32_514_560


def test_forward_record_docs_say_which_record_is_which():
    for doc in (pydepth.ForwardRecord.__doc__, pydepth.DecoderModel.forward.__doc__,
                pydepth.DepthInitializationRecord.__doc__):
        assert "ForwardRecord" in doc or "forward" in doc
    assert "DepthInitializationRecord" in pydepth.ForwardRecord.__doc__
