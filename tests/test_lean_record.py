# SPDX-License-Identifier: MIT
"""forward(keep="training") keeps only what a training step reads (the reverse pass and the
residual-health observer): the loss, every gradient, every adjoint and the health report are the
bits of a record that keeps everything, every value it keeps is the same bits, and every value it
did not keep is refused by name with a typed error."""
import contextlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pydepth
from pydepth import Batch, DecoderConfig, DecoderModel, SplitMix64
from pydepth._native import _layout, _nodes
from pydepth.errors import ArgumentTypeError, StaleOperandError, ValueNotKeptError
from pydepth.training.step import loss_and_gradients

CONFIGS = [DecoderConfig(20, 4, 1, 4, 1, 8), DecoderConfig(31, 8, 4, 12, 3, 16, kv_heads=2),
           DecoderConfig(266, 4, 1, 4, 8, 4), DecoderConfig(40, 16, 4, 24, 2, 32, kv_heads=1)]
IDS = [f"V{c.vocabulary_size}-W{c.model_width}-L{c.layers}" for c in CONFIGS]


def packed(cfg, seed):
    """Rows of several segments and padding, so masks and segment starts are exercised."""
    rng = np.random.default_rng(seed)
    T = min(cfg.max_positions, 7)
    srcs = [list(rng.integers(0, cfg.vocabulary_size, size=n)) for n in (T + 1, 3, 2, 5)]
    return Batch.pack(srcs, T)


def bits(a):
    return np.ascontiguousarray(a).view(np.uint64)


def grad_bits(model):
    return [bits(p.grad).copy() for p in model.parameters]


def same(xs, ys):
    return len(xs) == len(ys) and all(np.array_equal(x, y) for x, y in zip(xs, ys))


@contextlib.contextmanager
def threads(n):
    old = pydepth.get_num_threads()
    pydepth.set_num_threads(n)
    try:
        yield
    finally:
        pydepth.set_num_threads(old)


def twins(cfg):
    return DecoderModel(cfg, SplitMix64(11)), DecoderModel(cfg, SplitMix64(11))


@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("cfg", CONFIGS, ids=IDS)
def test_a_lean_record_gives_the_loss_gradients_and_adjoints_of_a_full_record(cfg, n_threads):
    full_model, lean_model = twins(cfg)
    with threads(n_threads):
        full = full_model.forward(packed(cfg, 3))
        lean = lean_model.forward(packed(cfg, 3), keep="training")
        full_loss, lean_loss = full.loss(), lean.loss()
        names = full.names()
        full_adj = full_loss.backward_with_selected_adjoints([full.named(n) for n in names])
        lean_adj = lean_loss.backward_with_selected_adjoints([lean.named(n) for n in names])
    assert bits(lean_loss.value) == bits(full_loss.value)
    assert np.array_equal(bits(lean.per_target_nll), bits(full.per_target_nll))
    assert same(grad_bits(lean_model), grad_bits(full_model))
    assert sum(a is not None for a in full_adj) > len(names) // 2
    for name, a, b in zip(names, full_adj, lean_adj):
        assert (a is None) == (b is None), name
        assert a is None or np.array_equal(bits(a), bits(b)), name


@pytest.mark.parametrize("cfg", CONFIGS, ids=IDS)
def test_every_value_a_lean_record_keeps_has_the_full_records_bits_and_the_rest_are_refused(cfg):
    full_model, lean_model = twins(cfg)
    full, lean = full_model.forward(packed(cfg, 4)), lean_model.forward(packed(cfg, 4), keep="training")
    full.loss()
    lean.loss()
    refused = []
    for name in full.names():
        value = lean.named(name)
        assert value.shape == full.named(name).shape, name  # the shape of a value not kept is known
        try:
            kept = value.value
        except ValueNotKeptError as err:
            assert name in str(err) and "keep='all'" in str(err)
            refused.append(name)
            continue
        assert np.array_equal(bits(kept), bits(full.named(name).value)), name
    block, whole = _nodes.BLOCK_KIND, _nodes.GLOBAL_KIND
    spare = {k for k in range(len(_layout.NODE_KINDS)) if k not in _layout.KEPT_LEAN}
    expected = [n for n in full.names()
                if (whole.get(n) if n in whole else block[n.split(".", 2)[2]]) in spare]
    assert refused == expected
    assert "logits" in refused and "blocks.0.attention.weights" not in refused
    assert lean.keeps == "training" and full.keeps == "all" and lean.recorded


@pytest.mark.parametrize("cfg", CONFIGS[:3], ids=IDS[:3])
def test_a_second_reverse_pass_over_a_lean_record_gives_the_full_records_bits(cfg):
    full_model, lean_model = twins(cfg)
    full_loss = full_model.loss(packed(cfg, 5))
    lean_loss = lean_model.loss(packed(cfg, 5), keep="training")
    for _ in range(3):  # each pass after the first makes the logits and probabilities again
        full_loss.backward()
        lean_loss.backward()
        assert same(grad_bits(lean_model), grad_bits(full_model))


def test_a_waiting_pass_then_a_committed_one_on_a_lean_record_match_a_full_record():
    cfg = CONFIGS[1]
    full_model, lean_model = twins(cfg)
    full_loss = full_model.loss(packed(cfg, 6))
    lean_loss = lean_model.loss(packed(cfg, 6), keep="training")
    for loss in (full_loss, lean_loss):
        loss._reverse([], commit=False)
        loss._discard()
        loss.backward()
    assert same(grad_bits(lean_model), grad_bits(full_model))


def test_a_lean_record_refuses_a_pass_after_a_parameter_changed_and_keeps_the_gradients():
    cfg = CONFIGS[1]
    model = DecoderModel(cfg, SplitMix64(2))
    loss = model.loss(packed(cfg, 7), keep="training")
    loss.backward()
    before = grad_bits(model)
    p = model.parameters[0]
    p.assign(p.value + 1.0)
    with pytest.raises(StaleOperandError):
        loss.backward()
    assert same(grad_bits(model), before)


@pytest.mark.parametrize("keep", ["everything", "", "ALL", 1, None, b"training"])
def test_keep_must_name_a_mode(keep):
    cfg = CONFIGS[0]
    model = DecoderModel(cfg, SplitMix64(1))
    with pytest.raises(ArgumentTypeError, match="keep"):
        model.forward(packed(cfg, 1), keep=keep)
    with pytest.raises(ArgumentTypeError, match="keep"):
        model.loss(packed(cfg, 1), keep=keep)


def test_keep_reverse_is_refused_where_nothing_is_recorded():
    cfg = CONFIGS[0]
    model = DecoderModel(cfg, SplitMix64(1))
    with pytest.raises(ArgumentTypeError, match="record=False"):
        model.forward(packed(cfg, 1), record=False, keep="training")
    with pydepth.no_grad(), pytest.raises(ArgumentTypeError, match="no_grad"):
        model.forward(packed(cfg, 1), keep="training")
    unrecorded = model.forward(packed(cfg, 1), record=False)
    assert unrecorded.keeps == "sites"
    with pytest.raises(ValueNotKeptError, match="record=False"):
        _ = unrecorded.named("blocks.0.ffn.up").value


@pytest.mark.parametrize("cfg", CONFIGS, ids=IDS)
def test_the_health_observer_gives_a_training_record_the_full_records_report_and_gradients(cfg):
    full_model, lean_model = twins(cfg)
    reports = []
    for model, keep in ((full_model, "all"), (lean_model, "training")):
        fwd = model.forward(packed(cfg, 2), keep=keep)
        reports.append(pydepth.observe_residual_health(model, fwd, fwd.loss(), accumulate_gradients=True).to_dict())
    assert reports[0] == reports[1]  # floats compared exactly: the same bits
    assert same(grad_bits(lean_model), grad_bits(full_model))


@pytest.mark.parametrize("observe", [False, True])
def test_a_training_steps_gradients_do_not_depend_on_what_its_forward_keeps(observe):
    cfg = CONFIGS[1]
    stepped, reference = twins(cfg)
    value, report = loss_and_gradients(stepped, packed(cfg, 8), observe=observe)
    ref_loss = reference.loss(packed(cfg, 8))
    ref_loss.backward()
    assert bits(np.float64(value)) == bits(np.float64(ref_loss.item()))
    assert same(grad_bits(stepped), grad_bits(reference))
    assert (report is not None) == observe


@settings(max_examples=25, deadline=None)
@given(heads=st.sampled_from([(1, 1), (2, 1), (2, 2), (4, 2)]), head_width=st.sampled_from([2, 4]),
       ffn=st.integers(1, 12), layers=st.integers(1, 4), vocabulary=st.integers(2, 40),
       seed=st.integers(0, 2**32 - 1), rows=st.integers(1, 3), length=st.integers(1, 6))
def test_random_models_and_batches_give_a_training_record_the_full_records_gradients(
        heads, head_width, ffn, layers, vocabulary, seed, rows, length):
    h, kv = heads
    cfg = DecoderConfig(vocabulary, h * head_width, h, ffn, layers, 8, kv_heads=kv)
    full_model, lean_model = DecoderModel(cfg, SplitMix64(seed)), DecoderModel(cfg, SplitMix64(seed))
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocabulary, size=(rows, length + 1))
    losses = []
    for model, keep in ((full_model, "all"), (lean_model, "training")):
        loss = model.loss(ids[:, :-1], ids[:, 1:], keep=keep)
        loss.backward()
        losses.append(bits(loss.value))
    assert losses[0] == losses[1]
    assert same(grad_bits(lean_model), grad_bits(full_model))
