# SPDX-License-Identifier: MIT
"""Parameter construction: reference draw order, names, shapes, bits and rng transactions."""
import gc

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pydepth
from pydepth import DecoderConfig, DecoderModel, NamedParameter, SplitMix64
from conftest import bits, from_hex

GOLDEN = 0x9E3779B97F4A7C15


def test_public_fixtures_parameters_bit_exact(reference_trace):
    for fx in reference_trace["fixtures"]:
        cfg = DecoderConfig.from_dict(fx["config"])
        rng = SplitMix64(fx["seed"])
        assert str(rng.state) == fx["initial_rng_state"]
        model = DecoderModel(cfg, rng)
        assert str(rng.state) == fx["final_rng_state"]
        assert model.parameter_count == fx["parameter_count"] == cfg.parameter_count
        expected = fx["same_base_unscaled_control"]["parameters"]
        assert [p.name for p in model.parameters] == [e["name"] for e in expected]
        for p, e in zip(model.parameters, expected):
            assert list(p.shape) == e["shape"]
            assert np.array_equal(bits(p.value), from_hex(e["bits"])), p.name
            assert not p.grad.any() and np.all(bits(p.grad) == 0)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**64 - 1), vocab=st.integers(1, 30), wh=st.sampled_from([(2, 1), (4, 2), (6, 3), (8, 2)]),
       ff=st.integers(1, 6), layers=st.integers(0, 4))
def test_draw_count_and_independent_xavier(seed, vocab, wh, ff, layers):
    w, h = wh
    cfg = DecoderConfig(vocab, w, h, ff, layers, 3)
    rng = SplitMix64(seed)
    model = DecoderModel(cfg, rng)
    draws = vocab * w + layers * (4 * w * w + 3 * w * ff)
    assert rng.state == (seed + draws * GOLDEN) % 2**64
    # an independent replay of the draw order in Python
    replay = SplitMix64(seed)
    for p in model.parameters:
        if len(p.shape) == 1:
            assert np.all(p.value == 1.0)
            continue
        limit = np.sqrt(6.0 / float(p.shape[0] + p.shape[1]))
        u = np.array([replay.next_unit_f64() for _ in range(p.size)])
        assert np.array_equal(bits(p.value), bits(limit * (2.0 * u - 1.0)).reshape(-1)), p.name


def test_allocation_failure_is_typed_and_leaves_rng_unchanged():
    cfg = DecoderConfig(2**50, 4, 1, 4, 1, 4)
    rng = SplitMix64(99)
    with pytest.raises(pydepth.AllocationError) as info:
        DecoderModel(cfg, rng)
    assert isinstance(info.value, MemoryError)
    assert rng.state == 99


def test_wrong_argument_types_leave_rng_unchanged():
    rng = SplitMix64(5)
    with pytest.raises(TypeError):
        DecoderModel({"vocabulary_size": 3}, rng)
    with pytest.raises(TypeError):
        DecoderModel(DecoderConfig(3, 2, 1, 1, 1, 2), 5)
    assert rng.state == 5


def test_views_are_read_only_and_keep_buffers_alive():
    model = DecoderModel(DecoderConfig(10, 4, 2, 3, 1, 4), SplitMix64(1))
    value, grad = model.parameters[1].value, model.parameters[1].grad
    assert not value.flags.writeable and not grad.flags.writeable
    with pytest.raises(ValueError):
        value[0] = 2.0
    with pytest.raises(ValueError):
        value.setflags(write=True)
    first = model.parameters[0].value
    expected = first.copy()
    assert np.shares_memory(first, model.parameters[0].value)  # a view, not a copy
    del model
    gc.collect()
    assert np.array_equal(first, expected)


def test_parameter_values_and_gradients_start_on_a_64_byte_line():
    # The products writing a gradient's rows run slower from calloc's 16-byte-off start.
    model = DecoderModel(DecoderConfig(13, 8, 2, 5, 2, 4), SplitMix64(3))
    model.train_step(np.array([[1, 2, 3]]), np.array([[2, 3, 4]]))
    for p in model.parameters:
        for view in (p.value, p.grad):
            assert view.ctypes.data % 64 == 0, p.name
            assert view.base is not None  # still the parameter's own buffer, not a copy


@pytest.mark.parametrize("name", ["", "a..b", ".a", "a.", "A", "a-b", "blocks.0.Weight", "é", "a b", 3])
def test_bad_names(name):
    with pytest.raises(pydepth.ParameterNameError):
        NamedParameter(name, np.zeros(2))


def test_named_parameter_copies_values():
    src = np.arange(6.0).reshape(2, 3)
    p = NamedParameter("layer_1.weight", src)
    src[0, 0] = 99.0
    assert p.value[0, 0] == 0.0 and p.shape == (2, 3)
    rev = p.revision
    p.assign(np.ones((2, 3)))
    assert p.revision != rev and np.all(p.value == 1.0)
    with pytest.raises(pydepth.ParameterLayoutError):
        p.assign(np.ones(6))
    with pytest.raises(pydepth.ParameterLayoutError):
        p.assign(np.full((2, 3), np.nan))
    assert np.all(p.value == 1.0)


def _copies(model):
    return [NamedParameter(p.name, p.value) for p in model.parameters]


def test_from_parameters_validates_layout_first():
    cfg = DecoderConfig(10, 4, 2, 3, 2, 4)
    model = DecoderModel(cfg, SplitMix64(3))
    ok = DecoderModel.from_parameters(cfg, _copies(model))
    assert [bits(p.value).tolist() for p in ok.parameters] == [bits(p.value).tolist() for p in model.parameters]
    params = _copies(model)
    with pytest.raises(pydepth.ParameterLayoutError, match="20 parameter tensors"):
        DecoderModel.from_parameters(cfg, params[:-1])
    swapped = params[:]
    swapped[2], swapped[3] = swapped[3], swapped[2]
    with pytest.raises(pydepth.ParameterLayoutError, match="query"):
        DecoderModel.from_parameters(cfg, swapped)
    dup = params[:]
    dup[3] = params[2]
    with pytest.raises(pydepth.ParameterNameError, match="duplicate"):
        DecoderModel.from_parameters(cfg, dup)
    bad_shape = params[:]
    bad_shape[4] = NamedParameter(params[4].name, np.zeros((4, 5)))
    with pytest.raises(pydepth.ParameterLayoutError, match="shape"):
        DecoderModel.from_parameters(cfg, bad_shape)
    nonfinite = params[:]
    v = params[0].snapshot()
    v[3, 1] = np.inf
    nonfinite[0] = NamedParameter(params[0].name, v)
    with pytest.raises(pydepth.ParameterLayoutError, match="non-finite"):
        DecoderModel.from_parameters(cfg, nonfinite)
    with pytest.raises(pydepth.ParameterLayoutError, match=r"blocks\.2\.attention_norm\.gain"):
        DecoderModel.from_parameters(DecoderConfig(10, 4, 2, 3, 3, 4), params + params[1:10])


def test_parameter_lookup():
    model = DecoderModel(DecoderConfig(10, 4, 2, 3, 1, 4), SplitMix64(3))
    assert model.parameter("blocks.0.ffn.down.weight").shape == (3, 4)
    with pytest.raises(KeyError, match="nope"):
        model.parameter("nope")
