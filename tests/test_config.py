# SPDX-License-Identifier: MIT
"""DecoderConfig validation and the checked parameter census."""
import math

import pytest
from hypothesis import given, strategies as st

from pydepth import ConfigError, DecoderConfig

NARROW = dict(vocabulary_size=266, model_width=4, heads=1, feed_forward_width=4, max_positions=4)


@pytest.mark.parametrize("layers,expected", [(1, 1188), (2, 1308), (8, 2028)])
def test_narrow_census(layers, expected):
    assert DecoderConfig(layers=layers, **NARROW).parameter_count == expected


def test_bridge_and_laptop_census():
    assert DecoderConfig(266, 16, 2, 20, 2, 16).parameter_count == 8304
    laptop = DecoderConfig(16384, 512, 8, 1536, 8, 512, kv_heads=2)
    assert laptop.parameter_count == 32_514_560


@given(st.integers(1, 300), st.sampled_from([(2, 1), (4, 1), (4, 2), (8, 2), (8, 4), (12, 3), (12, 6)]),
       st.integers(1, 9), st.integers(0, 5), st.data())
def test_census_equals_layout_sizes(vocab, wh, ff, layers, data):
    w, h = wh
    kv = data.draw(st.sampled_from([d for d in range(1, h + 1) if h % d == 0]))
    cfg = DecoderConfig(vocab, w, h, ff, layers, 4, kv_heads=kv)
    layout = cfg.parameter_layout()
    assert len(layout) == 9 * layers + 2 == cfg.parameter_tensor_count
    assert cfg.parameter_count == sum(math.prod(shape) for _, shape in layout)


@pytest.mark.parametrize("kwargs,match", [
    (dict(vocabulary_size=0), "vocabulary_size"),
    (dict(model_width=0), "model_width"),
    (dict(heads=0), "heads"),
    (dict(model_width=6, heads=4), "divisible"),
    (dict(model_width=6, heads=2), "odd"),
    (dict(feed_forward_width=0), "feed_forward_width"),
    (dict(max_positions=0), "max_positions"),
    (dict(rope_base=0.0), "rope_base"),
    (dict(rope_base=-1.0), "rope_base"),
    (dict(rope_base=float("inf")), "rope_base"),
    (dict(rope_base=float("nan")), "rope_base"),
    (dict(rms_epsilon=-1e-9), "rms_epsilon"),
    (dict(rms_epsilon=float("nan")), "rms_epsilon"),
    (dict(rms_epsilon=float("inf")), "rms_epsilon"),
    (dict(heads=2, kv_heads=3, model_width=8), "kv_heads"),
    (dict(kv_heads=0), "kv_heads"),
    (dict(layers=-1), "layers"),
    (dict(layers=1.5), "layers"),
    (dict(vocabulary_size=True), "vocabulary_size"),
    (dict(vocabulary_size=2**62, model_width=2**8, heads=1), "overflow"),
])
def test_config_errors(kwargs, match):
    base = dict(NARROW, layers=1)
    base.update(kwargs)
    with pytest.raises(ConfigError, match=match):
        DecoderConfig(**base)


def test_zero_epsilon_and_zero_layers_are_allowed():
    cfg = DecoderConfig(layers=0, rms_epsilon=0.0, **NARROW)
    assert cfg.parameter_count == 266 * 4 + 4
    assert cfg.head_width == 4 and cfg.kv_heads == 1


def test_round_trip():
    cfg = DecoderConfig(16384, 512, 8, 1536, 8, 512, kv_heads=2, rope_base=500000.0, rms_epsilon=1e-5)
    assert DecoderConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ConfigError, match="missing"):
        DecoderConfig.from_dict({"vocabulary_size": 3})
    with pytest.raises(ConfigError, match="unknown"):
        DecoderConfig.from_dict(dict(cfg.to_dict(), colour="red"))
