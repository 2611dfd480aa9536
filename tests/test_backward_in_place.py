# SPDX-License-Identifier: MIT
"""A committing reverse pass writes its contributions straight into gradients known to hold
only +0.0 (fresh or zeroed) and writes the logits adjoint over the saved softmax; the bits are
those of the buffered pass, and every refusal leaves the gradients exactly as they were."""
import contextlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pydepth
from pydepth import Batch, DecoderConfig, DecoderModel, SplitMix64
from conftest import overflowing_model

CONFIGS = [DecoderConfig(20, 4, 1, 4, 1, 8), DecoderConfig(31, 8, 4, 12, 3, 16, kv_heads=2),
           DecoderConfig(266, 4, 1, 4, 8, 4)]


def grad_bits(model):
    return [p.grad.view(np.uint64).copy() for p in model.parameters]


def same_bits(a, b):
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


def all_plus_zero(model):
    return all(not np.any(p.grad.view(np.uint64)) for p in model.parameters)


def known_zero(model):
    return [p._p.grad_known_zero for p in model.parameters]


def batch(cfg, seed):
    rng = np.random.default_rng(seed)
    T = min(cfg.max_positions, 6)
    srcs = [list(rng.integers(0, cfg.vocabulary_size, size=n)) for n in (T + 1, 3, 2)]
    return Batch.pack(srcs, T)


def buffered_backward(loss):
    """The waiting-pass path, which always adds a separate contribution buffer on commit."""
    loss._reverse([], commit=False)
    loss._commit()


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"L{c.layers}")
def test_a_fresh_pass_gives_the_bits_of_the_buffered_pass(cfg):
    direct, buffered = DecoderModel(cfg, SplitMix64(5)), DecoderModel(cfg, SplitMix64(5))
    assert all(known_zero(direct))
    direct.loss(batch(cfg, 1)).backward()
    buffered_backward(buffered.loss(batch(cfg, 1)))
    assert same_bits(grad_bits(direct), grad_bits(buffered))
    assert not any(known_zero(direct)) and not any(known_zero(buffered))


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"L{c.layers}")
def test_accumulated_passes_give_the_bits_of_buffered_passes(cfg):
    direct, buffered = DecoderModel(cfg, SplitMix64(6)), DecoderModel(cfg, SplitMix64(6))
    for seed in (1, 2, 3):  # the first pass of each model after zero_grad runs in place
        direct.loss(batch(cfg, seed)).backward()
        buffered_backward(buffered.loss(batch(cfg, seed)))
    assert same_bits(grad_bits(direct), grad_bits(buffered))
    direct.zero_grad()
    buffered.zero_grad()
    assert all(known_zero(direct))
    direct.loss(batch(cfg, 4)).backward()
    buffered_backward(buffered.loss(batch(cfg, 4)))
    assert same_bits(grad_bits(direct), grad_bits(buffered))


def test_a_second_pass_over_one_graph_recomputes_the_softmax_its_first_pass_overwrote():
    cfg = CONFIGS[1]
    twice, two_graphs = DecoderModel(cfg, SplitMix64(7)), DecoderModel(cfg, SplitMix64(7))
    fwd = twice.forward(batch(cfg, 1))
    loss = fwd.loss()
    first = loss.backward_with_selected_adjoints([fwd.logits])[0]
    second = loss.backward_with_selected_adjoints([fwd.logits])[0]
    assert np.array_equal(first.view(np.uint64), second.view(np.uint64))
    for _ in range(2):
        two_graphs.loss(batch(cfg, 1)).backward()
    assert same_bits(grad_bits(twice), grad_bits(two_graphs))


def test_only_plus_zero_gradients_are_known_zero():
    model = DecoderModel(CONFIGS[0], SplitMix64(8))
    p = model.parameter("final_norm.gain")
    p._p.restore(p.snapshot(), np.full(p.size, -0.0), p.revision)  # (-0.0) + c is not 0.0 + c
    assert not p._p.grad_known_zero
    p._p.restore(p.snapshot(), np.zeros(p.size), p.revision)
    assert p._p.grad_known_zero
    p._p.restore(p.snapshot(), np.full(p.size, 1.0), p.revision)
    assert not p._p.grad_known_zero
    p._p.zero_grad()
    assert p._p.grad_known_zero


def test_restored_negative_zero_gradients_accumulate_like_the_buffered_pass():
    cfg = CONFIGS[1]
    models = [DecoderModel(cfg, SplitMix64(9)) for _ in range(2)]
    for m in models:
        for p in m.parameters:
            p._p.restore(p.snapshot().reshape(-1), np.full(p.size, -0.0), p.revision)
    models[0].loss(batch(cfg, 1)).backward()
    buffered_backward(models[1].loss(batch(cfg, 1)))
    assert same_bits(grad_bits(models[0]), grad_bits(models[1]))


def test_a_fresh_pass_refused_midway_leaves_every_gradient_plus_zero():
    model, ids, tgt = overflowing_model()
    loss = model.loss(ids, tgt)
    assert np.isfinite(loss.item())
    with pytest.raises(pydepth.NonFiniteError) as direct_err:
        loss.backward()
    assert all_plus_zero(model) and all(known_zero(model))
    with pytest.raises(pydepth.NonFiniteError) as buffered_err:
        buffered_backward(model.loss(ids, tgt))
    assert str(direct_err.value) == str(buffered_err.value)
    assert all_plus_zero(model) and all(known_zero(model))


def plain_backward(loss):
    loss.backward()


def decided_backward(loss):
    """A pass waiting in place under the lock, committed by its decide callback."""
    loss._reverse([], commit=False, decide=lambda adjoints: True)


@pytest.mark.parametrize("run", [plain_backward, decided_backward])
def test_a_refused_commit_restores_the_in_place_gradients_and_keeps_the_accumulated_ones(run):
    """The accumulated embedding gradient overflows on some pass; before that pass every other
    gradient is zeroed, so the refused pass had written those in place."""
    model = DecoderModel(DecoderConfig(20, 4, 1, 4, 1, 5), SplitMix64(11))
    ids, tgt = np.array([[1, 2, 3]]), np.array([[2, 3, 4]])
    emb = model.parameter("token_embedding.weight")
    v = emb.snapshot()
    v[7] = 4e307 * np.sign(model.forward(ids).final_norm_output.value[0][0])
    emb.assign(v)
    loss = model.loss(ids, tgt)
    for _ in range(20):
        others = [p for p in model.parameters if p is not emb]
        for p in others:
            p._p.zero_grad()
        before = grad_bits(model)
        try:
            run(loss)
        except pydepth.NonFiniteError as err:
            assert "token_embedding.weight" in str(err)
            break
    else:
        pytest.fail("the accumulated gradient never overflowed")
    assert same_bits(grad_bits(model), before)
    assert not emb._p.grad_known_zero and all(p._p.grad_known_zero for p in others)
    assert all(not np.any(p.grad.view(np.uint64)) for p in others)


def test_an_observer_refusal_keeps_fresh_gradients_plus_zero_and_known_zero():
    from pydepth.errors import InvalidNormalizerError
    from pydepth.health import observe_residual_health
    cfg = DecoderConfig(13, 4, 2, 6, 2, 8)
    model = DecoderModel(cfg, SplitMix64(3))
    gain = model.parameter("final_norm.gain")
    kept = gain.snapshot()
    gain.assign(np.zeros(gain.shape))
    tokens = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    fwd = model.forward(tokens)
    with pytest.raises(InvalidNormalizerError):
        observe_residual_health(model, fwd, fwd.loss((tokens + 1) % 13), accumulate_gradients=True)
    assert all_plus_zero(model) and all(known_zero(model))
    gain.assign(kept)
    model.loss(tokens, (tokens + 1) % 13).backward()
    fresh = DecoderModel(cfg, SplitMix64(3))
    fresh.loss(tokens, (tokens + 1) % 13).backward()
    assert same_bits(grad_bits(model), grad_bits(fresh))


def test_a_pass_decided_in_place_gives_the_bits_of_the_plain_pass():
    cfg = CONFIGS[1]
    decided, plain = DecoderModel(cfg, SplitMix64(12)), DecoderModel(cfg, SplitMix64(12))
    seen = []

    def decide(adjoints):
        # while it waits, the pass's gradients are no longer known to be +0.0
        seen.append((known_zero(decided), all_plus_zero(decided)))
        return True

    decided.loss(batch(cfg, 1))._reverse([], commit=False, decide=decide)
    plain.loss(batch(cfg, 1)).backward()
    assert same_bits(grad_bits(decided), grad_bits(plain))
    assert seen == [([False] * len(decided.parameters), False)]
    decided.loss(batch(cfg, 2))._reverse([], commit=False, decide=decide)  # accumulates: buffered
    plain.loss(batch(cfg, 2)).backward()
    assert same_bits(grad_bits(decided), grad_bits(plain))


@pytest.mark.parametrize("outcome", ["drop", "raise"])
def test_a_pass_decided_in_place_and_dropped_leaves_every_gradient_plus_zero(outcome):
    cfg = CONFIGS[1]
    model = DecoderModel(cfg, SplitMix64(13))

    def decide(adjoints):
        if outcome == "raise":
            raise KeyboardInterrupt
        return False

    loss = model.loss(batch(cfg, 1))
    with pytest.raises(KeyboardInterrupt) if outcome == "raise" else contextlib.nullcontext():
        loss._reverse([], commit=False, decide=decide)
    assert all_plus_zero(model) and all(known_zero(model))
    loss.backward()  # the lock was released and the graph is still usable
    fresh = DecoderModel(cfg, SplitMix64(13))
    fresh.loss(batch(cfg, 1)).backward()
    assert same_bits(grad_bits(model), grad_bits(fresh))


def test_decide_must_be_callable():
    cfg = CONFIGS[0]
    model = DecoderModel(cfg, SplitMix64(14))
    loss = model.loss(batch(cfg, 1))
    with pytest.raises(TypeError, match="decide must be callable"):
        loss._record._graph.backward([], [], False, 3)
    assert all_plus_zero(model) and all(known_zero(model))


def test_an_observation_that_keeps_gradients_untouched_leaves_them_known_zero():
    from pydepth.health import observe_residual_health
    cfg = CONFIGS[1]
    model = DecoderModel(cfg, SplitMix64(15))
    b = batch(cfg, 1)
    fwd = model.forward(b)
    observe_residual_health(model, fwd, fwd.loss())
    assert all_plus_zero(model) and all(known_zero(model))
    fwd = model.forward(b)
    observe_residual_health(model, fwd, fwd.loss(), accumulate_gradients=True)
    plain = DecoderModel(cfg, SplitMix64(15))
    plain.loss(b).backward()
    assert same_bits(grad_bits(model), grad_bits(plain)) and not any(known_zero(model))


INTERRUPTED_BACKWARD = """
    import os, signal, threading, time, numpy as np, pydepth as pd
    # Ctrl-C as a fresh terminal delivers it: a test run that ignores SIGINT passes that on to children
    signal.signal(signal.SIGINT, signal.default_int_handler)
    pd.set_num_threads(1)
    m = pd.DecoderModel(pd.DecoderConfig(500, 128, 4, 512, 40, 256), pd.SplitMix64(1))
    x = (np.arange(4 * 256) * 7919 % 500).reshape(4, 256)
    loss = m.loss(x, (x + 1) % 500)
    def fire():
        time.sleep(0.15)
        os.kill(os.getpid(), signal.SIGINT)
    threading.Thread(target=fire).start()
    try:
        loss.backward()
        print("completed")
    except KeyboardInterrupt:
        print("interrupted")
    zero = all(not np.any(p.grad.view(np.uint64)) for p in m.parameters)
    known = all(p._p.grad_known_zero for p in m.parameters)
    print("plus-zero", zero, known)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT delivery via os.kill is POSIX")
def test_an_interrupted_fresh_pass_leaves_every_gradient_plus_zero(tmp_path):
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(INTERRUPTED_BACKWARD)],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.split("\n")[:2]
    assert first == "interrupted", out.stdout  # the pass over 40 blocks takes about a second
    assert second == "plus-zero True True", out.stdout


def test_a_parameter_in_two_slots_gets_both_contributions():
    """A table naming one buffer twice (possible through the private _Model) keeps a separate
    contribution per slot: in place, the second slot would overwrite the first."""
    from pydepth._native import _graph
    cfg = CONFIGS[0]
    source = DecoderModel(cfg, SplitMix64(16))
    names = [p.name for p in source.parameters]
    gate, up = names.index("blocks.0.ffn.gate.weight"), names.index("blocks.0.ffn.up.weight")

    def shared_table():
        params = [p._p for p in DecoderModel(cfg, SplitMix64(16)).parameters]
        params[up] = params[gate]
        return params

    ids = np.array([[1, 2, 3, 4]], dtype=np.int64)
    targets = np.array([2, 3, 4, 5], dtype=np.int64)
    grads = []
    for commit in (True, False):
        params = shared_table()
        graph = _graph._Graph(_graph._Model(cfg._core_tuple(), params), ids)
        graph.attach_loss(targets)
        graph.backward([], [], commit)
        if not commit:
            graph.commit()
        grads.append(np.asarray(params[gate].grad_view()).view(np.uint64).copy())
    assert np.array_equal(grads[0], grads[1])
