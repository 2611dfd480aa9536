# SPDX-License-Identifier: MIT
"""Bad input raises a typed error naming the value and position, and mutates nothing."""
import numpy as np
import pytest

import pydepth
from pydepth import DecoderConfig, DecoderModel, SplitMix64, TokenError


@pytest.fixture
def model():
    return DecoderModel(DecoderConfig(20, 4, 1, 4, 2, 5), SplitMix64(11))


def snapshot(model):
    return [(p.value.copy().view(np.uint64), p.grad.copy().view(np.uint64), p.revision) for p in model.parameters]


def unchanged(model, before):
    after = snapshot(model)
    return all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) and a[2] == b[2]
               for a, b in zip(before, after))


@pytest.mark.parametrize("tokens,match", [
    (np.array([[1, 2, 20]]), r"token id 20 at position \[0, 2\]"),
    (np.array([[1, -3, 2]]), r"token id -3 at position \[0, 1\]"),
    (np.array([[1.0, 2.0]]), "integer"),
    (np.array([[1.5, 2.0]]), "integer"),
    (np.array([1, 2, 3]), "rank 2"),
    (np.zeros((1, 2, 3), dtype=int), "rank 2"),
    (np.zeros((0, 3), dtype=int), "batch is 0"),
    (np.zeros((2, 0), dtype=int), "sequence length is 0"),
    (np.zeros((1, 6), dtype=int), "exceeds max_positions 5"),
    (np.array([["a", "b"]]), "integer"),
])
def test_bad_tokens(model, tokens, match):
    before = snapshot(model)
    with pytest.raises(TokenError, match=match):
        model.forward(tokens)
    assert unchanged(model, before)


@pytest.mark.parametrize("targets,match", [
    (np.array([[1, 2]]), "expected 3 targets"),
    (np.array([[1, 2, 25]]), r"target id 25 at position \[0, 2\]"),
    (np.array([[1, -1, 2]]), r"target id -1 at position \[0, 1\]"),
    (np.array([[1.0, 2.0, 3.0]]), "integer"),
    (np.array([[1], [2], [3]]), "shape"),
])
def test_bad_targets(model, targets, match):
    before = snapshot(model)
    with pytest.raises(TokenError, match=match):
        model.loss(np.array([[1, 2, 3]]), targets)
    assert unchanged(model, before)


def test_non_finite_forward_is_refused(model):
    emb = model.parameter("token_embedding.weight")
    v = emb.snapshot()
    v[3] = 1e200  # squares overflow in the attention norm's mean square
    emb.assign(v)
    before = snapshot(model)
    with pytest.raises(pydepth.NonFiniteError, match=r"blocks\.0\.attention_norm"):
        model.forward(np.array([[1, 3]]))
    assert unchanged(model, before)


def test_zero_mean_square_with_zero_epsilon_is_refused():
    cfg = DecoderConfig(5, 2, 1, 2, 1, 3, rms_epsilon=0.0)
    params = [pydepth.NamedParameter(n, np.zeros(s)) if n == "token_embedding.weight"
              else pydepth.NamedParameter(n, np.ones(s)) for n, s in cfg.parameter_layout()]
    model = DecoderModel.from_parameters(cfg, params)
    with pytest.raises(pydepth.NonFiniteError, match="mean square 0"):
        model.forward(np.array([[0, 1]]))


def test_non_finite_gradient_update_changes_no_gradient():
    """An unused class with a huge embedding row keeps the forward finite, but its gradients
    grow with every accumulated pass until an update overflows: that pass is refused whole."""
    model = DecoderModel(DecoderConfig(20, 4, 1, 4, 1, 5), SplitMix64(11))
    ids, tgt = np.array([[1, 2, 3]]), np.array([[2, 3, 4]])
    emb = model.parameter("token_embedding.weight")
    v = emb.snapshot()
    fo = model.forward(ids).final_norm_output.value[0]
    v[7] = 4e307 * np.sign(fo[0])
    emb.assign(v)
    loss = model.loss(ids, tgt)
    assert np.isfinite(loss.item())
    for _ in range(20):
        before = snapshot(model)
        try:
            loss.backward()
        except pydepth.NonFiniteError as err:
            assert "gradient of" in str(err)
            assert unchanged(model, before)
            break
        assert all(np.all(np.isfinite(p.grad)) for p in model.parameters)
    else:
        pytest.fail("the accumulated gradient never overflowed")


def test_the_first_non_finite_value_is_named_alike_on_every_kernel_path():
    """The finiteness scan runs in the path's vector width; the refusal names the same first
    offending element on every path, and a value past the last full vector is found too."""
    from pydepth._native import _runtime
    model = DecoderModel(DecoderConfig(13, 6, 3, 5, 1, 8), SplitMix64(4))
    wq = model.parameter("blocks.0.attention.query.weight")
    v = wq.snapshot()
    v[:, 4:] = 1e308  # the last two query columns overflow, the first four stay finite
    wq.assign(v)
    old, messages = _runtime.kernel_path(), {}
    try:
        for path in ("baseline", "avx2", "avx512", "neon"):
            if _runtime.force_kernel_path(path):
                with pytest.raises(pydepth.NonFiniteError) as err:
                    model.forward(np.array([[1, 5, 9]]))
                messages[path] = str(err.value)
    finally:
        _runtime.force_kernel_path(old)
    assert len(set(messages.values())) == 1, messages
    assert "query_heads at flat index 4" in messages["baseline"], messages
    # one token: 6 query values, fewer than one AVX-512 vector; only the last overflows
    v[:, 4] = 0.0
    v[:, 5] = 1e308
    wq.assign(v)
    try:
        for path in messages:
            assert _runtime.force_kernel_path(path)
            with pytest.raises(pydepth.NonFiniteError, match="query_heads at flat index 5"):
                model.forward(np.array([[2]]))
    finally:
        _runtime.force_kernel_path(old)
