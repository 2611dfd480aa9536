# SPDX-License-Identifier: MIT
"""Grouped-query attention: fewer key/value heads, each shared by a group of query heads."""
import numpy as np
import pytest

import pydepth
from pydepth import DecoderConfig, DecoderModel, NamedParameter, SplitMix64
from conftest import bits


def repeated_mha(gqa):
    """The same function with every key/value head repeated for its query-head group."""
    c = gqa.config
    mha_cfg = DecoderConfig(c.vocabulary_size, c.model_width, c.heads, c.feed_forward_width,
                            c.layers, c.max_positions, rope_base=c.rope_base, rms_epsilon=c.rms_epsilon)
    group, D = c.heads // c.kv_heads, c.head_width
    params = []
    for p in gqa.parameters:
        v = p.value
        if p.name.endswith((".key.weight", ".value.weight")):
            cols = [h // group * D + d for h in range(c.heads) for d in range(D)]
            v = v[:, cols]
        params.append(NamedParameter(p.name, v))
    return DecoderModel.from_parameters(mha_cfg, params)


def numpy_forward(model, ids):
    """An independent numpy decoder that repeats key/value heads explicitly."""
    c = model.config
    P = {p.name: np.array(p.value) for p in model.parameters}
    H, KV, D, T = c.heads, c.kv_heads, c.head_width, ids.shape[1]

    def norm(x, g):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + c.rms_epsilon) * g

    inv = c.rope_base ** (-2.0 * np.arange(D // 2) / D)
    ang = np.arange(T)[:, None] * inv[None, :]
    cos, sin = np.cos(ang), np.sin(ang)

    def rope(x):  # [B, h, T, D], adjacent pairs
        even, odd = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2], out[..., 1::2] = even * cos - odd * sin, even * sin + odd * cos
        return out

    x = P["token_embedding.weight"][ids]
    B = ids.shape[0]
    for b in range(c.layers):
        pre = f"blocks.{b}."
        an = norm(x, P[pre + "attention_norm.gain"])
        q = (an @ P[pre + "attention.query.weight"]).reshape(B, T, H, D).transpose(0, 2, 1, 3)
        k = (an @ P[pre + "attention.key.weight"]).reshape(B, T, KV, D).transpose(0, 2, 1, 3)
        v = (an @ P[pre + "attention.value.weight"]).reshape(B, T, KV, D).transpose(0, 2, 1, 3)
        k, v = np.repeat(rope(k), H // KV, axis=1), np.repeat(v, H // KV, axis=1)
        s = rope(q) @ k.transpose(0, 1, 3, 2) / np.sqrt(D)
        s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
        w = np.exp(s - s.max(-1, keepdims=True))
        w /= w.sum(-1, keepdims=True)
        o = (w @ v).transpose(0, 2, 1, 3).reshape(B, T, H * D)
        x = x + o @ P[pre + "attention.output.weight"]
        fn = norm(x, P[pre + "ffn_norm.gain"])
        g = fn @ P[pre + "ffn.gate.weight"]
        x = x + (g / (1 + np.exp(-g)) * (fn @ P[pre + "ffn.up.weight"])) @ P[pre + "ffn.down.weight"]
    return norm(x, P["final_norm.gain"]) @ P["token_embedding.weight"].T


@pytest.mark.parametrize("heads,kv", [(4, 2), (4, 1), (6, 3), (2, 2)])
def test_gqa_against_numpy(heads, kv):
    cfg = DecoderConfig(29, 4 * heads, heads, 10, 2, 7, kv_heads=kv)
    model = DecoderModel(cfg, SplitMix64(heads * 10 + kv))
    assert model.parameter("blocks.0.attention.key.weight").shape == (4 * heads, 4 * kv)
    ids = np.array([[1, 5, 9, 5, 28, 0, 3], [2, 2, 2, 7, 1, 1, 0]])
    np.testing.assert_allclose(model.forward(ids).logits.value, numpy_forward(model, ids), rtol=1e-11, atol=1e-13)


def test_gqa_equals_repeated_heads_bitwise_forward_and_grouped_gradients():
    cfg = DecoderConfig(19, 16, 4, 6, 2, 5, kv_heads=2)
    gqa = DecoderModel(cfg, SplitMix64(8))
    mha = repeated_mha(gqa)
    ids, tgt = np.array([[1, 2, 3, 1, 4]]), np.array([[2, 3, 1, 4, 0]])
    lg, lm = gqa.loss(ids, tgt), mha.loss(ids, tgt)
    assert bits(lg.value)[0] == bits(lm.value)[0]
    assert np.array_equal(bits(lg.record.logits.value), bits(lm.record.logits.value))
    lg.backward()
    lm.backward()
    for pg, pm in zip(gqa.parameters, mha.parameters):
        g = pm.grad
        if pg.name.endswith((".key.weight", ".value.weight")):  # sum the repeated heads' columns
            g = g.reshape(16, 2, 2, 4).sum(axis=2).reshape(16, 8)
        if pg.name.startswith(("final_norm", "blocks.1.ffn", "blocks.1.attention.output")):
            # upstream of every key/value product: the same operations in the same order
            assert np.array_equal(bits(pg.grad), bits(g)), pg.name
        else:  # the attention input's adjoint sums the shared heads in another order
            np.testing.assert_allclose(pg.grad, g, rtol=1e-11, atol=1e-15, err_msg=pg.name)


def test_laptop_plan_census_and_draw_order():
    assert DecoderConfig(16384, 512, 8, 1536, 8, 512, kv_heads=2).parameter_count == 32_514_560
    cfg = DecoderConfig(7, 8, 4, 3, 1, 4, kv_heads=2)
    rng = SplitMix64(3)
    model = DecoderModel(cfg, rng)
    draws = 7 * 8 + (8 * 8 + 8 * 4 + 8 * 4 + 8 * 8 + 3 * 8 * 3)
    assert rng.state == (3 + draws * 0x9E3779B97F4A7C15) % 2**64
    replay = SplitMix64(3)
    for _ in range(7 * 8 + 64):  # embedding and query
        replay.next_u64()
    key = model.parameter("blocks.0.attention.key.weight")
    u = np.array([replay.next_unit_f64() for _ in range(32)])
    assert np.array_equal(bits(key.value), bits(np.sqrt(6.0 / 12.0) * (2.0 * u - 1.0)))


def test_kv_heads_must_divide_heads():
    with pytest.raises(pydepth.ConfigError, match="kv_heads 3 does not divide heads 4"):
        DecoderConfig(10, 16, 4, 4, 1, 4, kv_heads=3)
