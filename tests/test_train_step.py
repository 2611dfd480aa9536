# SPDX-License-Identifier: MIT
"""DecoderModel.train_step, a whole training step in one call: the bits of zero_grad, the
training forward, the loss, backward, item and an optimizer step, on every kernel path at one
and two threads, for token arrays and Batches; its graph planned per batch shape; refusals that
change nothing; steps from several threads that never tear."""
import gc
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import weakref

import numpy as np
import pytest

import pydepth
from pydepth import Batch, DecoderConfig, DecoderModel, SplitMix64
from pydepth.optim import SGD, AdamW, WarmupCosine
from conftest import each_path_and_thread_count, overflowing_model

CFG = DecoderConfig(61, 12, 2, 20, 2, 16)


def _tokens(seed, shape=(2, 9)):
    rng = np.random.default_rng(seed)
    return rng.integers(0, CFG.vocabulary_size, shape), rng.integers(0, CFG.vocabulary_size, shape)


def _batch(seed):
    """Two rows: two segments in the first, padding ending the second."""
    tok, tgt = _tokens(seed, (2, 8))
    seg = np.array([[0, 0, 0, 1, 1, 1, 1, 1], [2, 2, 2, 2, 2, -1, -1, -1]])
    return Batch(np.where(seg < 0, -1, tok), np.where(seg < 0, -1, tgt), seg)


OPTIMIZERS = {
    "none": lambda m: None,
    "sgd": lambda m: SGD(m.parameters, lr=0.05, momentum=0.9, weight_decay=0.01),
    "adamw": lambda m: AdamW(m.parameters, lr=WarmupCosine(0.01, warmup_steps=2, total_steps=6)),
    "adamw_factors": lambda m: AdamW(m.parameters[1:], lr=0.003, factors={"final_norm.gain": {"lr": 0.5}}),
}


def _state(model, opt=None):
    """Every bit a step may change: values, gradients, revisions, optimizer slots and count."""
    out = [p.value.view(np.uint64).copy() for p in model.parameters]
    out += [p.grad.view(np.uint64).copy() for p in model.parameters]
    out.append(np.array([p.revision for p in model.parameters], dtype=np.uint64))
    if opt is not None:
        out += [opt.slot(p.name, s).view(np.uint64).copy() for p in opt.parameters for s in opt.slot_names]
        out.append(np.array([opt.step_count], dtype=np.uint64))
    return out


def _same(a, b):
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


def _five_calls(model, tokens, targets=None, opt=None):
    model.zero_grad()
    loss = model.forward(tokens, keep="training").loss(targets)
    loss.backward()
    value = loss.item()
    if opt is not None:
        opt.step()
    return value


def _pair(kind):
    base = DecoderModel(CFG, SplitMix64(5))
    a, b = base.clone(), base.clone()  # the same revisions too
    return a, OPTIMIZERS[kind](a), b, OPTIMIZERS[kind](b)


@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
@pytest.mark.parametrize("batched", [False, True], ids=["tokens", "batch"])
def test_a_train_step_gives_the_five_call_bits_on_every_path_and_thread_count(kind, batched):
    for path, threads in each_path_and_thread_count():
        a, oa, b, ob = _pair(kind)
        for step in range(4):
            if batched:
                src, tgt = _batch(step), None
            else:
                src, tgt = _tokens(step)
            want = _five_calls(a, src, tgt, oa)
            got = b.train_step(src, tgt, optimizer=ob)
            assert type(got) is float
            assert np.float64(got).view(np.uint64) == np.float64(want).view(np.uint64), (path, threads, step)
            assert _same(_state(b, ob), _state(a, oa)), (path, threads, step)


def test_a_batch_with_explicit_targets_steps_on_those_targets():
    a, _, b, _ = _pair("none")
    batch = _batch(1)
    other = np.where(batch.valid, (batch.targets + 3) % CFG.vocabulary_size, -1)
    want = _five_calls(a, batch, other)
    assert np.float64(b.train_step(batch, other)).view(np.uint64) == np.float64(want).view(np.uint64)
    assert _same(_state(b), _state(a))


def test_alternating_shapes_replan_and_keep_the_bits_of_a_fresh_model():
    a, oa, b, ob = _pair("adamw")
    sources = [_tokens(0, (2, 9)), (_batch(1), None), _tokens(2, (3, 5)), _tokens(3, (2, 9)),
               _tokens(4, (1, 16)), (_batch(5), None), _tokens(6, (2, 9))]
    for i, (src, tgt) in enumerate(sources):
        want = _five_calls(a, src, tgt, oa)
        got = b.train_step(src, tgt, optimizer=ob)
        assert np.float64(got).view(np.uint64) == np.float64(want).view(np.uint64), i
        assert _same(_state(b, ob), _state(a, oa)), i
        assert b._plan.planned
    # a fresh model stepping the last batch alone: no earlier plan shows in its bits
    c, d = a.clone(), a.clone()
    src, tgt = sources[-1]
    assert np.float64(c.train_step(src, tgt)).view(np.uint64) == np.float64(_five_calls(d, src, tgt)).view(np.uint64)
    assert _same(_state(c), _state(d))


def _other_model_optimizer(model):
    return SGD(DecoderModel(CFG, SplitMix64(9)).parameters, lr=0.1)


REFUSALS = {
    "token out of range": (lambda m: (np.full((2, 9), CFG.vocabulary_size), _tokens(0)[1], None),
                           pydepth.errors.TokenError, str(CFG.vocabulary_size)),
    "negative target": (lambda m: (_tokens(0)[0], np.full((2, 9), -4), None), pydepth.errors.TokenError, "-4"),
    "targets of another shape": (lambda m: (_tokens(0)[0], np.zeros((3, 9), dtype=int), None),
                                 pydepth.errors.TokenError, "got 27"),
    "float tokens": (lambda m: (_tokens(0)[0] * 1.0, _tokens(0)[1], None), pydepth.errors.TokenError, "float64"),
    "no targets": (lambda m: (_tokens(0)[0], None, None), pydepth.errors.TokenError, "targets"),
    "another model's optimizer": (lambda m: (*_tokens(0), _other_model_optimizer(m)),
                                  pydepth.errors.OptimizerStateError, "not this model's"),
    "not an optimizer": (lambda m: (*_tokens(0), "sgd"), pydepth.errors.ArgumentTypeError, "str"),
    "a schedule returning a string": (lambda m: (*_tokens(0), SGD(m.parameters, lr=_BadSchedule())),
                                      pydepth.errors.InvalidHyperparameterError, "'fast'"),
}


class _BadSchedule:
    """A rate at the constructor's check, then a string."""

    def __init__(self):
        self.calls = 0

    def __call__(self, step):
        self.calls += 1
        return "fast" if self.calls > 1 else 0.1


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_a_refused_step_raises_the_typed_error_naming_the_value_and_changes_nothing(case):
    make, kind, named = REFUSALS[case]
    model = DecoderModel(CFG, SplitMix64(2))
    own = SGD(model.parameters, lr=0.1, momentum=0.5)
    model.train_step(*_tokens(7), optimizer=own)  # gradients, values and slots all non-trivial
    tokens, targets, opt = make(model)
    counts = [opt.step_count] if isinstance(opt, SGD) else []
    before = _state(model, own) + counts
    with pytest.raises(kind) as err:
        model.train_step(tokens, targets, optimizer=opt)
    assert named in str(err.value)
    after = _state(model, own) + ([opt.step_count] if isinstance(opt, SGD) else [])
    assert _same(after, before)


@pytest.mark.parametrize("case", ["token out of range", "negative target", "targets of another shape", "no targets"])
def test_a_refused_batch_raises_what_the_five_calls_raise(case):
    tokens, targets, _ = REFUSALS[case][0](None)
    a, _, b, _ = _pair("none")
    with pytest.raises(pydepth.PydepthError) as five:
        _five_calls(a, tokens, targets)
    with pytest.raises(pydepth.PydepthError) as one:
        b.train_step(tokens, targets)
    assert type(one.value) is type(five.value) and str(one.value) == str(five.value)


def test_a_non_finite_reverse_pass_is_refused_as_backward_refuses_it():
    base, ids, tgt = overflowing_model()
    a, b = base.clone(), base.clone()
    oa, ob = SGD(a.parameters, lr=0.1), SGD(b.parameters, lr=0.1)
    with pytest.raises(pydepth.NonFiniteError) as five:
        _five_calls(a, ids, tgt, oa)
    with pytest.raises(pydepth.NonFiniteError) as one:
        b.train_step(ids, tgt, optimizer=ob)
    assert str(one.value) == str(five.value)
    assert _same(_state(b, ob), _state(a, oa))
    assert all(not np.any(p.grad.view(np.uint64)) for p in b.parameters)  # every gradient +0.0
    assert ob.step_count == 0


def _overflowing_sgd(model):
    """An SGD whose next update overflows: momentum buffers near the largest float."""
    opt = SGD(model.parameters, lr=10.0, momentum=0.9)
    state = opt.state_dict()
    state["step"] = 1
    for slots in state["slots"].values():
        slots["momentum_buffer"][...] = 1e308
    opt.load_state_dict(state)
    return opt


def test_a_non_finite_forward_is_refused_with_the_forward_error_and_changes_nothing():
    a, _, b, _ = _pair("none")
    for m in (a, b):
        emb = m.parameter("token_embedding.weight")
        m.train_step(*_tokens(1))  # gradients not +0.0
        emb.assign(np.full(emb.shape, 1e300))
    before = _state(b)
    with pytest.raises(pydepth.NonFiniteError) as five:
        _five_calls(a, *_tokens(2))
    with pytest.raises(pydepth.NonFiniteError) as one:
        b.train_step(*_tokens(2))
    assert str(one.value) == str(five.value)
    assert _same(_state(b), before)


def test_a_record_taken_before_a_train_step_that_updated_the_values_is_stale_after_it():
    model = DecoderModel(CFG, SplitMix64(2))
    opt = SGD(model.parameters, lr=0.1)
    tokens, targets = _tokens(1)
    untouched = model.loss(tokens, targets)
    model.train_step(tokens, targets)  # no update: the record stays fresh
    untouched.backward()
    stale = model.loss(tokens, targets)
    model.train_step(tokens, targets, optimizer=opt)
    with pytest.raises(pydepth.errors.StaleOperandError):
        stale.backward()


def test_a_refused_update_keeps_the_step_gradients_and_changes_no_value_or_slot():
    a, _, b, _ = _pair("none")
    oa, ob = _overflowing_sgd(a), _overflowing_sgd(b)
    tokens, targets = _tokens(3)
    with pytest.raises(pydepth.errors.NonFiniteUpdateError) as five:
        _five_calls(a, tokens, targets, oa)
    with pytest.raises(pydepth.errors.NonFiniteUpdateError) as one:
        b.train_step(tokens, targets, optimizer=ob)
    assert str(one.value) == str(five.value)
    assert _same(_state(b, ob), _state(a, oa)) and ob.step_count == 1
    assert any(np.any(p.grad) for p in b.parameters)


def test_a_train_step_inside_no_grad_is_refused():
    model = DecoderModel(CFG, SplitMix64(2))
    before = _state(model)
    with pydepth.no_grad(), pytest.raises(pydepth.errors.ArgumentTypeError, match="no_grad"):
        model.train_step(*_tokens(0))
    assert _same(_state(model), before)


def test_an_optimizer_reloaded_or_copied_between_steps_steps_its_new_state():
    a, oa, b, ob = _pair("adamw")
    for step in range(2):
        _five_calls(a, *_tokens(step), oa)
        b.train_step(*_tokens(step), optimizer=ob)
    saved = oa.state_dict()
    _five_calls(a, *_tokens(5), oa)
    b.train_step(*_tokens(5), optimizer=ob)
    oa.load_state_dict(saved)
    ob.load_state_dict(saved)
    copy = pickle.loads(pickle.dumps(ob))  # a bound update never travels with the optimizer
    assert copy.step_count == ob.step_count
    for step in range(6, 8):
        _five_calls(a, *_tokens(step), oa)
        b.train_step(*_tokens(step), optimizer=ob)
        assert _same(_state(b, ob), _state(a, oa)), step


def test_concurrent_train_steps_on_one_model_run_whole_steps_in_turn():
    a, oa, b, ob = _pair("sgd")
    tokens, targets = _tokens(4)
    threads, per = 4, 6
    for _ in range(threads * per):
        _five_calls(a, tokens, targets, oa)
    errors = []

    def work():
        try:
            for _ in range(per):
                b.train_step(tokens, targets, optimizer=ob)
        except Exception as err:  # reported below; a torn step would show in the bits anyway
            errors.append(err)

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert errors == []
    assert ob.step_count == threads * per
    assert _same(_state(b, ob), _state(a, oa))


def test_the_step_plan_goes_with_the_model_and_keeps_no_optimizer_alive():
    model = DecoderModel(CFG, SplitMix64(2))
    opt = AdamW(model.parameters)
    model.train_step(*_tokens(0), optimizer=opt)
    assert model._plan.planned
    opt_gone, model_gone = weakref.ref(opt), weakref.ref(model)
    del opt
    gc.collect()
    assert opt_gone() is None
    del model
    gc.collect()
    assert model_gone() is None


INTERRUPT = """
    import os, signal, threading, time, numpy as np, pydepth as pd
    signal.signal(signal.SIGINT, signal.default_int_handler)
    pd.set_num_threads(1)
    m = pd.DecoderModel(pd.DecoderConfig(500, 128, 4, 512, 40, 256), pd.SplitMix64(1))
    x = (np.arange(4 * 256) * 7919 % 500).reshape(4, 256)
    m.train_step(x[:1, :8], x[:1, 1:9])
    before = [p.grad.copy() for p in m.parameters]
    threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    try:
        m.train_step(x, x)
        print("completed")
    except KeyboardInterrupt:
        kept = all(np.array_equal(p.grad, g) for p, g in zip(m.parameters, before))
        zero = all(not np.any(p.grad) for p in m.parameters)
        print("interrupted", kept or zero)
    print("usable", np.isfinite(m.train_step(x[:1, :8], x[:1, 1:9])))
"""


@pytest.mark.skipif(sys.platform == "win32" or not hasattr(signal, "SIGINT"), reason="SIGINT via os.kill is POSIX")
def test_ctrl_c_stops_a_train_step_with_nothing_half_committed_and_the_model_usable(tmp_path):
    out = subprocess.run([sys.executable, "-P", "-c", textwrap.dedent(INTERRUPT)], capture_output=True,
                         text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["interrupted True", "usable True"], out.stdout


# ---- the step's reset is its pass: every gradient written over, never zeroed first (issue 39)

GARBAGE = np.array([np.nan, -0.0, 1e300, -np.inf, 3.5, -np.nan], dtype=np.float64)


def _fill_gradients(model, seed):
    """Every gradient set to non-finite and signed-zero garbage, values and revision kept."""
    rng = np.random.default_rng(seed)
    for p in model.parameters:
        junk = GARBAGE[rng.integers(0, GARBAGE.size, p._p.size)]
        p._p.restore(np.ascontiguousarray(p.value).reshape(-1), junk, p.revision)
        assert not p._p.grad_known_zero


def _sparse_tokens(shape, seed):
    """Ids and targets drawn from the first 7 ids of a larger vocabulary: most rows untouched."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 7, shape), rng.integers(0, 7, shape)


def _segmented(vocabulary, seed):
    """Two rows: two segments in the first, padding ending the second."""
    rng = np.random.default_rng(seed)
    tok, tgt = rng.integers(0, vocabulary, (2, 8)), rng.integers(0, vocabulary, (2, 8))
    seg = np.array([[0, 0, 0, 1, 1, 1, 1, 1], [2, 2, 2, 2, 2, -1, -1, -1]])
    return Batch(np.where(seg < 0, -1, tok), np.where(seg < 0, -1, tgt), seg), None


# (config, batch maker): every contribution the pass writes, at every shape class that changes how
OVERWRITE_CASES = {
    "tokens": (CFG, lambda s: _tokens(s)),
    "segments and padding": (CFG, lambda s: _segmented(CFG.vocabulary_size, s)),
    "no blocks": (DecoderConfig(61, 12, 2, 20, 0, 16), lambda s: _tokens(s)),
    "grouped-query attention": (DecoderConfig(61, 16, 4, 20, 2, 16, kv_heads=2), lambda s: _tokens(s)),
    # two head row blocks of E, packed products, most of the vocabulary absent from the batch
    "wide sparse vocabulary": (
        DecoderConfig(1100, 64, 4, 96, 1, 16, kv_heads=1),
        lambda s: _sparse_tokens((2, 12), s),
    ),
    "wide sparse segmented": (DecoderConfig(1100, 64, 4, 96, 1, 16, kv_heads=2), lambda s: _segmented(7, s)),
}


@pytest.mark.parametrize("case", sorted(OVERWRITE_CASES))
def test_a_train_step_over_garbage_gradients_gives_the_five_call_bits_on_every_path(case):
    cfg, make = OVERWRITE_CASES[case]
    for path, threads in each_path_and_thread_count():
        base = DecoderModel(cfg, SplitMix64(3))
        a, b = base.clone(), base.clone()
        oa, ob = SGD(a.parameters, lr=0.05, momentum=0.9), SGD(b.parameters, lr=0.05, momentum=0.9)
        for step in range(2):
            _fill_gradients(b, step)
            src, tgt = make(step)
            want = _five_calls(a, src, tgt, oa)
            got = b.train_step(src, tgt, optimizer=ob)
            assert np.float64(got).view(np.uint64) == np.float64(want).view(np.uint64), (case, path, threads, step)
            assert _same(_state(b, ob), _state(a, oa)), (case, path, threads, step)
            assert not any(p._p.grad_known_zero for p in b.parameters)  # committed: no longer known +0.0


def test_a_backward_after_a_train_step_over_garbage_adds_to_the_step_gradients():
    a, _, b, _ = _pair("none")
    _fill_gradients(b, 1)
    tokens, targets = _tokens(1)
    _five_calls(a, tokens, targets)
    b.train_step(tokens, targets)
    for m in (a, b):  # no zero_grad: the pass must add to what the step left, as the flags say
        m.forward(*_tokens(2)[:1], keep="training").loss(_tokens(2)[1]).backward()
    assert _same(_state(b), _state(a))


def _zero_and_known(model):
    return all(not np.any(p.grad.view(np.uint64)) and p._p.grad_known_zero for p in model.parameters)


def test_a_non_finite_reverse_pass_over_garbage_leaves_every_gradient_plus_zero_then_steps_freshly():
    base, ids, tgt = overflowing_model()
    model = base.clone()
    _fill_gradients(model, 4)
    with pytest.raises(pydepth.NonFiniteError):
        model.train_step(ids, tgt)
    assert _zero_and_known(model)  # every bit +0.0, and the core knows it
    # the next step, on a batch whose pass is finite, has the bits of a fresh model's five calls
    twin = base.clone()  # the same values and revisions as the model, its gradients +0.0
    finite = base.parameter("token_embedding.weight").snapshot()
    finite[7] = 0.0
    for m in (model, twin):
        m.parameter("token_embedding.weight").assign(finite)
    ok_ids, ok_tgt = np.full((1, 48), 3), np.full((1, 48), 4)
    want = _five_calls(twin, ok_ids, ok_tgt)
    got = model.train_step(ok_ids, ok_tgt)
    assert np.float64(got).view(np.uint64) == np.float64(want).view(np.uint64)
    assert _same(_state(model), _state(twin))


def test_a_refused_batch_after_a_step_keeps_its_gradients_and_the_next_step_is_exact():
    a, oa, b, ob = _pair("adamw")
    for m, o in ((a, oa), (b, ob)):
        m.train_step(*_tokens(1), optimizer=o)
    before = _state(b, ob)
    with pytest.raises(pydepth.errors.TokenError):
        b.train_step(_tokens(2)[0], np.full((2, 9), CFG.vocabulary_size), optimizer=ob)
    assert _same(_state(b, ob), before)  # refused before the reset: nothing changed
    want = _five_calls(a, *_tokens(3), oa)
    got = b.train_step(*_tokens(3), optimizer=ob)
    assert np.float64(got).view(np.uint64) == np.float64(want).view(np.uint64)
    assert _same(_state(b, ob), _state(a, oa))


def _int64_pair(shape=(2, 9)):
    tok, tgt = _tokens(11, shape)
    return tok.astype(np.int64), tgt.astype(np.int64)


# Token and target arrays at the edge of what needs no conversion (C-contiguous int64 [B, T]
# tokens with [B, T] or [B * T] targets): each one is stepped, or refused, as the five calls do.
EDGE_ARRAYS = {
    "int64 arrays": lambda: _int64_pair(),
    "flat int64 targets": lambda: (_int64_pair()[0], _int64_pair()[1].reshape(-1)),
    "column-major tokens": lambda: (np.asfortranarray(_int64_pair()[0]), _int64_pair()[1]),
    "strided targets": lambda: (_int64_pair()[0], np.repeat(_int64_pair()[1], 2, axis=1)[:, ::2]),
    "big-endian tokens": lambda: (_int64_pair()[0].astype(">i8"), _int64_pair()[1]),
    "int32 targets": lambda: (_int64_pair()[0], _int64_pair()[1].astype(np.int32)),
    "uint64 tokens": lambda: (_int64_pair()[0].astype(np.uint64), _int64_pair()[1]),
    "an ndarray subclass": lambda: (_int64_pair()[0].view(np.matrix), _int64_pair()[1]),
    "transposed-shape int64 targets": lambda: (_int64_pair()[0], _int64_pair()[1].reshape(9, 2)),
    "column int64 targets": lambda: (_int64_pair()[0], _int64_pair()[1].reshape(18, 1)),
    "flat int64 targets out of range": lambda: (_int64_pair()[0], np.full(18, CFG.vocabulary_size)),
    "int64 tokens out of range": lambda: (np.full((2, 9), -1, dtype=np.int64), _int64_pair()[1]),
    "int64 tokens longer than max_positions": lambda: _int64_pair((1, CFG.max_positions + 1)),
    "an empty int64 batch": lambda: (np.zeros((0, 9), dtype=np.int64), np.zeros((0, 9), dtype=np.int64)),
    "empty int64 rows": lambda: (np.zeros((2, 0), dtype=np.int64), np.zeros((2, 0), dtype=np.int64)),
    "rank-1 int64 tokens": lambda: (_int64_pair()[0].reshape(-1), _int64_pair()[1].reshape(-1)),
    "rank-3 int64 tokens": lambda: (_int64_pair()[0].reshape(2, 9, 1), _int64_pair()[1]),
}


@pytest.mark.parametrize("case", sorted(EDGE_ARRAYS))
def test_arrays_at_the_edge_of_needing_no_conversion_step_or_are_refused_as_the_five_calls_do(case):
    tokens, targets = EDGE_ARRAYS[case]()
    a, _, b, _ = _pair("none")
    try:
        want = _five_calls(a, tokens, targets)
    except pydepth.PydepthError as five:
        with pytest.raises(pydepth.PydepthError) as one:
            b.train_step(tokens, targets)
        assert type(one.value) is type(five) and str(one.value) == str(five)
    else:
        got = b.train_step(tokens, targets)
        assert np.float64(got).view(np.uint64) == np.float64(want).view(np.uint64)
    assert _same(_state(b), _state(a))


# A step records every value while a full record takes at most a megabyte, else only what
# training reads (a lean record): logits of 32 x 4099 doubles alone pass that line.
LEAN_CFG = DecoderConfig(4099, 8, 2, 12, 2, 32)


@pytest.mark.parametrize("cfg, shape", [(CFG, (2, 9)), (LEAN_CFG, (1, 32))], ids=["full record", "lean record"])
def test_a_train_step_gives_the_five_call_bits_whether_its_record_is_full_or_lean(cfg, shape):
    base = DecoderModel(cfg, SplitMix64(8))
    a, b = base.clone(), base.clone()
    oa, ob = SGD(a.parameters, lr=0.05, momentum=0.9), SGD(b.parameters, lr=0.05, momentum=0.9)
    rng = np.random.default_rng(3)
    for step in range(3):
        tokens, targets = rng.integers(0, cfg.vocabulary_size, (2, *shape))
        want = _five_calls(a, tokens, targets, oa)
        got = b.train_step(tokens, targets, optimizer=ob)
        assert np.float64(got).view(np.uint64) == np.float64(want).view(np.uint64), step
        assert _same(_state(b, ob), _state(a, oa)), step
