# SPDX-License-Identifier: MIT
"""The reverse pass: finite differences, accumulation, selected adjoints, stale and released graphs."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pydepth
from pydepth import DecoderConfig, DecoderModel, SplitMix64
from conftest import bits


def small_model(seed=7, layers=2, heads=2, kv_heads=None, width=8, ff=6, vocab=23, positions=6):
    cfg = DecoderConfig(vocab, width, heads, ff, layers, positions, kv_heads=kv_heads)
    return DecoderModel(cfg, SplitMix64(seed))


def batch_ids(rng, B, T, V):
    ids = rng.integers(0, V, size=(B, T))
    ids[:, -1] = ids[:, 0]  # repeated ids exercise the pre-summed gather
    return ids, rng.integers(0, V, size=(B, T))


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**32), heads=st.integers(1, 3), layers=st.integers(1, 4),
       B=st.integers(1, 3), T=st.integers(1, 5))
def test_gradients_match_central_differences(seed, heads, layers, B, T):
    rng = np.random.default_rng(seed)
    model = small_model(seed, layers=layers, heads=heads, width=2 * heads * 2, ff=5, vocab=13, positions=5)
    ids, tgt = batch_ids(rng, B, T, 13)
    loss = model.loss(ids, tgt)
    loss.backward()
    probe = model.clone()
    for p, q in zip(model.parameters, probe.parameters):
        base = p.snapshot()
        for flat in rng.choice(p.size, size=min(3, p.size), replace=False):

            def central(h, base=base, flat=flat, q=q):
                vals = []
                for sign in (1.0, -1.0):
                    v = base.copy()
                    v.flat[flat] += sign * h
                    q.assign(v)
                    vals.append(probe.loss(ids, tgt, record=False).item())
                return (vals[0] - vals[1]) / (2 * h)

            h = 1e-4 * max(1.0, abs(base.flat[flat]))
            fd = (4.0 * central(h / 2) - central(h)) / 3.0  # Richardson: O(h^4) truncation
            q.assign(base)
            g = p.grad.flat[flat]
            assert abs(fd - g) <= 1e-6 * max(abs(fd), abs(g)) + 1e-8, (p.name, flat, fd, g)


def test_gradients_accumulate_until_zero_grad():
    model = small_model()
    rng = np.random.default_rng(0)
    ids, tgt = batch_ids(rng, 2, 5, 23)
    loss = model.loss(ids, tgt)
    loss.backward()
    first = [p.grad.copy() for p in model.parameters]
    loss.backward()
    for p, g in zip(model.parameters, first):
        assert np.array_equal(bits(p.grad), bits(g + g)), p.name
    # a second graph accumulates the same way
    model.zero_grad()
    assert all(np.all(bits(p.grad) == 0) for p in model.parameters)
    model.loss(ids, tgt).backward()
    model.loss(ids, tgt).backward()
    for p, g in zip(model.parameters, first):
        assert np.array_equal(bits(p.grad), bits(g + g))


def test_selected_adjoints_leave_gradients_identical():
    model = small_model()
    rng = np.random.default_rng(1)
    ids, tgt = batch_ids(rng, 2, 4, 23)
    model.loss(ids, tgt).backward()
    plain = [p.grad.copy() for p in model.parameters]
    model.zero_grad()
    fwd = model.forward(ids)
    loss = fwd.loss(tgt)
    other = model.forward(ids)
    selected = [*fwd.residual_sites, fwd.blocks[0].attention_weights, other.embedding, fwd.logits, loss]
    adj = loss.backward_with_selected_adjoints(selected)
    for p, g in zip(model.parameters, plain):
        assert np.array_equal(bits(p.grad), bits(g))
    assert adj[len(fwd.residual_sites)] is None  # the weights' view is not in the loss graph
    assert adj[len(fwd.residual_sites) + 1] is None  # bound by identity, not by name
    assert adj[-1].shape == () and adj[-1] == 1.0
    # d(mean loss)/d(logits) = (softmax - onehot) / N
    logits = fwd.logits.value
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    onehot = np.eye(23)[tgt]
    np.testing.assert_allclose(adj[-2], (p - onehot) / ids.size, rtol=1e-12, atol=1e-15)
    # residual adjoints: the residual add hands the block output's adjoint to the FFN branch
    ffn = loss.backward_with_selected_adjoints([fwd.blocks[1].feed_forward_output, fwd.blocks[1].output])
    assert np.array_equal(bits(ffn[0]), bits(ffn[1]))


def test_every_named_value_has_an_adjoint_except_the_weights_view():
    model = small_model(layers=1, kv_heads=1)
    fwd = model.forward(np.array([[1, 2, 3, 1]]))
    loss = fwd.loss(np.array([[2, 3, 1, 0]]))
    names = fwd.names()
    adj = loss.backward_with_selected_adjoints([fwd.named(n) for n in names])
    for name, a in zip(names, adj):
        if name.endswith("attention.weights"):
            assert a is None
        else:
            assert a is not None and a.shape == fwd.named(name).shape, name
            assert np.all(np.isfinite(a))


def test_stale_operand_refused_without_touching_gradients():
    model = small_model()
    ids, tgt = batch_ids(np.random.default_rng(2), 1, 4, 23)
    loss = model.loss(ids, tgt)
    p = model.parameter("blocks.1.ffn.up.weight")
    p.assign(p.value * 0.5)
    with pytest.raises(pydepth.StaleOperandError, match=r"blocks\.1\.ffn\.up\.weight"):
        loss.backward()
    assert all(not q.grad.any() for q in model.parameters)


def test_released_graph_refuses_reuse():
    model = small_model()
    ids, tgt = batch_ids(np.random.default_rng(3), 1, 4, 23)
    loss = model.loss(ids, tgt)
    view = loss.record.logits.value
    kept = view.copy()
    loss.record.release()
    with pytest.raises(pydepth.GraphReleasedError):
        loss.backward()
    with pytest.raises(pydepth.GraphReleasedError):
        _ = loss.record.logits.value
    assert np.array_equal(view, kept)  # views taken before release stay valid


def test_a_loss_item_is_its_values_bits_and_a_released_record_refuses_it():
    # item() on a loss reads the double without a view (a training step's one read)
    model = small_model()
    ids, tgt = batch_ids(np.random.default_rng(5), 1, 4, 23)
    loss = model.loss(ids, tgt, keep="training")
    loss.backward()
    item = np.array([loss.item()], dtype=np.float64)
    assert item.view(np.uint64)[0] == loss.value.reshape(-1).view(np.uint64)[0]
    loss.record.release()
    with pytest.raises(pydepth.GraphReleasedError):
        loss.item()


def test_no_grad_and_record_false_compute_the_same_bits():
    model = small_model(layers=3)
    ids, tgt = batch_ids(np.random.default_rng(4), 2, 6, 23)
    rec = model.forward(ids)
    for fwd in (model.forward(ids, record=False), None):
        if fwd is None:
            with pydepth.no_grad():
                fwd = model.forward(ids)
                assert not pydepth.is_recording()
            assert pydepth.is_recording()
        assert not fwd.recorded
        assert np.array_equal(bits(fwd.logits.value), bits(rec.logits.value))
        for a, b in zip(fwd.residual_sites, rec.residual_sites):
            assert np.array_equal(bits(a.value), bits(b.value))
        with pytest.raises(pydepth.PydepthError, match="not kept"):
            _ = fwd.blocks[0].attention_output.value
        loss = fwd.loss(tgt)
        assert bits(loss.value)[0] == bits(model.loss(ids, tgt).value)[0]
        with pytest.raises(pydepth.AutodiffError):
            loss.backward()


def test_backward_only_from_the_loss():
    model = small_model()
    fwd = model.forward(np.array([[1, 2]]))
    with pytest.raises(pydepth.AutodiffError, match="rank-0"):
        fwd.logits.backward()
    with pytest.raises(pydepth.AutodiffError, match="no loss"):
        _ = fwd.mean_loss
    fwd.loss(np.array([[2, 3]]))
    with pytest.raises(pydepth.AutodiffError, match="already"):
        fwd.loss(np.array([[2, 3]]))
