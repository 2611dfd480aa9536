# SPDX-License-Identifier: MIT
"""Packed and padded batches: occurrence-local positions, no leakage, valid-target loss."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pydepth import Batch, DecoderConfig, DecoderModel, SplitMix64, TokenError
from conftest import bits

V, P = 31, 6


@pytest.fixture(scope="module")
def model():
    return DecoderModel(DecoderConfig(V, 8, 2, 6, 2, P, kv_heads=1), SplitMix64(5))


def assert_segment_matches_alone(model, fwd, row, start, n, src):
    alone = model.forward(np.asarray(src[:-1]).reshape(1, -1))
    alone.loss(np.asarray(src[1:]).reshape(1, -1))
    sl = slice(start, start + n)
    for packed, single in zip(fwd.residual_sites, alone.residual_sites):
        assert np.array_equal(bits(packed.value[row, sl]), bits(single.value[0]))
    assert np.array_equal(bits(fwd.logits.value[row, sl]), bits(alone.logits.value[0]))
    assert np.array_equal(bits(fwd.per_target_nll[row, sl]), bits(alone.per_target_nll[0]))
    for b_p, b_a in zip(fwd.blocks, alone.blocks):
        w = b_p.attention_weights.value[row]
        assert np.array_equal(bits(w[:, sl, sl]), bits(b_a.attention_weights.value[0]))
        outside = w[:, sl, :].copy()
        outside[:, :, sl] = 0.0
        assert not outside.any()  # nothing outside the segment is attended


sources_strategy = st.lists(st.lists(st.integers(0, V - 1), min_size=2, max_size=P + 1), min_size=1, max_size=5)


@settings(max_examples=20, deadline=None)
@given(sources=sources_strategy, extra=st.integers(0, 4), pad=st.sampled_from([-1, -7, 10**9]))
def test_packing_invariance(model, sources, extra, pad):
    row_length = max(len(s) - 1 for s in sources) + extra
    batch = Batch.pack(sources, row_length, pad_id=pad)
    fwd = model.forward(batch)
    fwd.loss()
    segs = batch.segments()
    assert len(segs) == len(sources)
    for (row, start, n), src in zip(segs, sources):
        assert n == len(src) - 1
        assert list(batch.positions[row, start:start + n]) == list(range(n))
        assert_segment_matches_alone(model, fwd, row, start, n, src)
    # padding contributes nothing and is never looked up
    assert not fwd.per_target_nll[~batch.valid].any()
    assert not fwd.embedding.value[~batch.valid].any()


def test_valid_target_mean_loss(model):
    sources = [[1, 2, 3, 4], [5, 6, 7], [8, 9]]
    batch = Batch.pack(sources, 4)
    fwd = model.forward(batch)
    loss = fwd.loss()
    nll = fwd.per_target_nll
    total = 0.0
    for v in nll[batch.valid].tolist():  # row-major order over valid targets
        total = total + v
    assert loss.item() == total / 6.0


def test_single_full_segment_equals_plain_run(model):
    src = [3, 1, 4, 1, 5, 9, 2]
    batch = Batch.pack([src], 6)
    plain = model.loss(np.array([src[:-1]]), np.array([src[1:]]))
    packed = model.loss(batch)
    assert bits(plain.value)[0] == bits(packed.value)[0]


def test_padding_gives_bit_identical_gradients(model):
    src = [3, 1, 4, 1, 5]
    model.zero_grad()
    model.loss(np.array([src[:-1]]), np.array([src[1:]])).backward()
    alone = [p.grad.copy() for p in model.parameters]
    model.zero_grad()
    tok = np.array([[3, 1, 4, 1, -1, -1], [-1] * 6])
    tgt = np.array([[1, 4, 1, 5, -1, -1], [-1] * 6])
    seg = np.array([[0, 0, 0, 0, -1, -1], [-1] * 6])  # an all-padding row too
    model.loss(Batch(tok, tgt, seg)).backward()
    for p, g in zip(model.parameters, alone):
        assert np.array_equal(bits(p.grad), bits(g)), p.name
    model.zero_grad()


def test_several_segments_give_count_weighted_gradients(model):
    """Bound tested: |packed - sum_s (n_s/N) g_s| <= 1e-12 * max|g| (rounding only)."""
    sources = [[1, 2, 3, 4, 5], [6, 7, 8], [9, 10, 11, 12]]
    combo = None
    N = sum(len(s) - 1 for s in sources)
    for src in sources:
        model.zero_grad()
        model.loss(np.array([src[:-1]]), np.array([src[1:]])).backward()
        part = [p.grad * ((len(src) - 1) / N) for p in model.parameters]
        combo = part if combo is None else [a + b for a, b in zip(combo, part)]
    model.zero_grad()
    model.loss(Batch.pack(sources, 7)).backward()
    for p, g in zip(model.parameters, combo):
        scale = max(np.abs(g).max(), 1e-300)
        assert np.abs(p.grad - g).max() <= 1e-12 * scale, p.name
    model.zero_grad()


def test_explicit_batch_layout():
    tok = np.array([[5, 6, 7, 8, 0], [1, 2, -1, 3, 4]])
    tgt = np.array([[6, 7, 8, 9, 1], [2, 3, -1, 4, 5]])
    seg = np.array([[0, 0, 1, 1, 1], [2, 2, -1, 3, 3]])
    b = Batch(tok, tgt, seg)
    assert b.positions.tolist() == [[0, 1, 0, 1, 2], [0, 1, 0, 0, 1]]
    assert b.valid.tolist() == [[True] * 5, [True, True, False, True, True]]
    assert b.segments() == ((0, 0, 2), (0, 2, 3), (1, 0, 2), (1, 3, 2))


@pytest.mark.parametrize("tok,tgt,seg,match", [
    ([[1, 2], [3, 4]], [[1, 2], [3, 4]], [[0, 0], [0, 1]], "crosses a row end"),
    ([[1, 2, 3]], [[1, 2, 3]], [[0, 1, 0]], "not contiguous"),
    ([[1, -1, 3]], [[1, 2, 3]], [[0, 0, 0]], r"padding id -1 at valid position \[0, 1\]"),
    ([[1, 2, 3]], [[1, -2, 3]], [[0, 0, 0]], r"target id -2 at valid position \[0, 1\]"),
    ([[1, 2, 3]], [[1, 2, 3]], [[0, -2, 0]], "segment id -2"),
    ([[1, 2]], [[1, 2]], [[-1, -1]], "no valid position"),
    ([[1, 2]], [[1, 2, 3]], [[0, 0]], "share one shape"),
    ([[1.0, 2.0]], [[1, 2]], [[0, 0]], "integer"),
])
def test_batch_errors(tok, tgt, seg, match):
    with pytest.raises(TokenError, match=match):
        Batch(np.array(tok), np.array(tgt), np.array(seg))


def test_model_level_batch_errors(model):
    with pytest.raises(TokenError, match="longer than max_positions"):
        model.forward(Batch.pack([list(range(P + 2))], P + 1))
    with pytest.raises(TokenError, match=r"target id 40 at valid position"):
        model.loss(Batch(np.array([[1, 2]]), np.array([[2, 40]]), np.array([[0, 0]])))
    with pytest.raises(TokenError, match=r"token id 31 at valid position"):
        model.forward(Batch(np.array([[1, 31]]), np.array([[2, 3]]), np.array([[0, 0]])))
    with pytest.raises(TokenError, match="at least 2"):
        Batch.pack([[1]], 4)
    with pytest.raises(TokenError, match="longer than row_length"):
        Batch.pack([[1, 2, 3, 4]], 2)


def test_rows_may_be_longer_than_max_positions(model):
    sources = [[1, 2, 3, 4, 5, 6, 7]] * 3  # 3 segments of 6 positions in one row of 18
    batch = Batch.pack(sources, 18)
    fwd = model.forward(batch)
    fwd.loss()
    for (row, start, n), src in zip(batch.segments(), sources):
        assert_segment_matches_alone(model, fwd, row, start, n, src)
