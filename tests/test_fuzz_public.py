"""Hypothesis fuzz over the public entry points: every call returns finite results or raises a
PydepthError, never crashes, and a refusal leaves the caller's state (generators, parameter
values, gradients and revisions) untouched (issue 11).

Bounded for CI by PYDEPTH_FUZZ_EXAMPLES (default 40 per entry point, about 10 s in all); the
longer run in tests/README.md raises it."""
import math
import os

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

import pydepth
from pydepth import (Batch, DecoderConfig, DecoderModel, DepthInitializationBudget,
                     DepthInitializationRecord, NamedParameter, PydepthError, SplitMix64)

EXAMPLES = int(os.environ.get("PYDEPTH_FUZZ_EXAMPLES", "40"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=not os.environ.get("PYDEPTH_FUZZ_RANDOM"),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

CFG = DecoderConfig(13, 4, 2, 6, 2, 8, kv_heads=1)
MODEL = DecoderModel(CFG, SplitMix64(3))

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 20), st.integers(-2**70, 2**70),
    st.sampled_from([2**63, 2**64, -2**63 - 1, 10**7]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=3), st.binary(max_size=2),
    st.complex_numbers(max_magnitude=5))
small_int_arrays = st.builds(
    lambda dt, shape, fill: np.full(shape, fill).astype(dt) if fill is not None else np.zeros(shape, dt),
    st.sampled_from([np.int64, np.int32, np.uint64, np.uint8, np.float64, np.bool_, np.complex128, object]),
    st.sampled_from([(), (0,), (3,), (2, 3), (1, 8), (2, 9), (0, 3), (1, 2, 3)]),
    st.one_of(st.none(), st.integers(-2, 14), st.just(2**63 - 1)))
ids_like = st.one_of(
    small_int_arrays, scalars,
    st.lists(st.lists(st.integers(-2, 14), min_size=0, max_size=9), min_size=0, max_size=3),
    st.builds(lambda a: np.ma.masked_array(a, a > 5), st.just(np.arange(6).reshape(2, 3))))
hostile = st.one_of(scalars, ids_like, st.dictionaries(st.text(max_size=8), scalars, max_size=3))


def state(model=MODEL):
    """Everything a refusal must leave unchanged."""
    return [(p.revision, p.value.view(np.uint64).tobytes(), p.grad.view(np.uint64).tobytes())
            for p in model.parameters]


def finite(x):
    if isinstance(x, float):
        return math.isfinite(x)
    if isinstance(x, np.ndarray):
        return bool(np.isfinite(x).all())
    return True


def call(fn, *args, **kw):
    """fn(...) or the PydepthError it raised; anything else fails the test."""
    try:
        return fn(*args, **kw)
    except PydepthError as err:
        assert str(err), f"{type(err).__name__} without a message"
        return err


@FUZZ
@given(seed=hostile)
def test_generators(seed):
    out = call(SplitMix64, seed)
    if not isinstance(out, PydepthError):
        assert out.state == seed
    call(SplitMix64.from_state, seed)


@FUZZ
@given(args=st.lists(st.one_of(st.integers(1, 8), scalars), min_size=6, max_size=6),
       kv=st.one_of(st.none(), st.integers(1, 4), scalars), base=st.one_of(st.just(1e4), scalars),
       eps=st.one_of(st.just(1e-6), scalars))
def test_config(args, kv, base, eps):
    out = call(DecoderConfig, *args, kv_heads=kv, rope_base=base, rms_epsilon=eps)
    if not isinstance(out, PydepthError):
        assert DecoderConfig.from_dict(out.to_dict()) == out
    call(DecoderConfig.from_dict, dict(zip(["vocabulary_size", "model_width", "heads",
                                            "feed_forward_width", "layers", "max_positions"], args)))
    call(DecoderConfig.from_dict, args)


@FUZZ
@given(name=st.one_of(st.just("w"), scalars), values=st.one_of(ids_like, scalars),
       new=st.one_of(ids_like, scalars))
def test_parameters(name, values, new):
    p = call(NamedParameter, name, values)
    if isinstance(p, PydepthError):
        return
    assert finite(p.value)
    before = (p.revision, p.value.tobytes())
    if isinstance(call(p.assign, new), PydepthError):
        assert (p.revision, p.value.tobytes()) == before


@FUZZ
@given(tokens=ids_like, targets=st.one_of(st.none(), ids_like),
       record=st.one_of(st.none(), st.booleans(), scalars))
def test_forward_loss_backward(tokens, targets, record):
    MODEL.zero_grad()
    before = state()
    fwd = call(MODEL.forward, tokens, record=record)
    if isinstance(fwd, PydepthError):
        assert state() == before
        return
    assert finite(fwd.logits.value)
    loss = call(fwd.loss, targets)
    if isinstance(loss, PydepthError):
        assert state() == before
        return
    assert finite(loss.item()) and finite(fwd.per_target_nll)
    out = call(loss.backward)
    if isinstance(out, PydepthError):
        assert state() == before
    else:
        assert all(finite(p.grad) for p in MODEL.parameters)
    fwd.release()


@FUZZ
@given(sources=st.one_of(scalars, st.lists(st.one_of(ids_like, st.lists(st.integers(-2, 14), max_size=6)),
                                           max_size=4)),
       row_length=st.one_of(st.integers(1, 10), scalars), pad_id=st.one_of(st.just(-1), scalars))
def test_batches(sources, row_length, pad_id):
    b = call(Batch.pack, sources, row_length, pad_id)
    if isinstance(b, PydepthError):
        return
    before = state()
    fwd = call(MODEL.forward, b)
    if isinstance(fwd, PydepthError):
        assert state() == before
        return
    loss = call(fwd.loss)
    if not isinstance(loss, PydepthError):
        assert finite(loss.item())


@FUZZ
@given(tokens=ids_like, targets=ids_like, segments=ids_like)
def test_batch_constructor(tokens, targets, segments):
    call(Batch, tokens, targets, segments)


def _record_dict():
    fresh = pydepth.Fresh(CFG, DepthInitializationBudget(10**6, 64), SplitMix64(1))
    return pydepth.initialize_depth_scaled(fresh).record.to_dict()


RECORD = _record_dict()


@FUZZ
@given(key=st.sampled_from([*sorted(RECORD), "extra"]), value=hostile,
       budget=st.lists(st.one_of(st.integers(0, 10**6), scalars), min_size=2, max_size=2),
       seed=st.integers(0, 2**64 - 1))
def test_records_budgets_and_depth_init(key, value, budget, seed):
    call(DepthInitializationRecord.from_dict, dict(RECORD, **{key: value}))
    call(DepthInitializationRecord.from_dict, value)
    b = call(DepthInitializationBudget, *budget)
    if isinstance(b, PydepthError):
        return
    rng = SplitMix64(seed)
    out = call(pydepth.initialize_depth_scaled, pydepth.Fresh(CFG, b, rng))
    if isinstance(out, PydepthError):
        assert rng.state == seed
    call(pydepth.initialize_depth_scaled, value)


@FUZZ
@given(valid=st.one_of(st.none(), ids_like, st.just(np.ones((2, 3), bool)), st.just(np.zeros((2, 3), bool))))
def test_health_observation(valid):
    MODEL.zero_grad()
    tokens = np.array([[1, 2, 3], [4, 5, 6]])
    fwd = MODEL.forward(tokens)
    loss = fwd.loss((tokens + 1) % 13)
    before = state()
    out = call(pydepth.observe_residual_health, MODEL, fwd, loss, valid)
    if isinstance(out, PydepthError):
        assert state() == before
    call(pydepth.classify_ratio, valid)


@FUZZ
@given(a=hostile, b=hostile)
def test_scalar_entry_points(a, b):
    call(pydepth.xavier_scale, a, b)
    old = pydepth.get_num_threads()
    try:
        call(pydepth.set_num_threads, a)
    finally:
        pydepth.set_num_threads(old)
    call(pydepth.DepthScalePolicy, a)


@FUZZ
@given(key=st.sampled_from([*sorted(MODEL.state_dict()), "extra.weight"]), value=st.one_of(ids_like, scalars),
       strict=st.one_of(st.booleans(), scalars))
def test_state_dicts(key, value, strict):
    model = MODEL.clone()
    before = state(model)
    out = call(model.load_state_dict, dict(MODEL.state_dict(), **{key: value}), strict)
    if isinstance(out, PydepthError):
        assert state(model) == before
    call(DecoderModel.from_state_dict, CFG, {key: value})
    call(DecoderModel.from_state_dict, value, MODEL.state_dict())


@FUZZ
@given(kind=st.sampled_from(["SGD", "AdamW"]), lr=st.one_of(st.just(1e-2), scalars),
       other=st.one_of(st.just(0.0), scalars), grad_scale=st.sampled_from([1.0, 1e300, 0.0]))
def test_optimizers(kind, lr, other, grad_scale):
    model = MODEL.clone()
    tokens = np.array([[1, 2, 3], [4, 5, 6]])
    model.loss(tokens, (tokens + 1) % 13).backward()
    cls = getattr(pydepth.optim, kind)
    opt = call(cls, model.parameters, lr, weight_decay=other)
    if isinstance(opt, PydepthError):
        return
    if grad_scale != 1.0:  # huge or zero gradients: the step either stays finite or is refused
        for p in model.parameters:
            p.assign(p.value * grad_scale if grad_scale else p.value)
    before = state(model)
    if isinstance(call(opt.step), PydepthError):
        assert state(model) == before
    else:
        assert all(finite(p.value) for p in model.parameters)


CORRUPTIONS = st.one_of(
    st.binary(max_size=64),
    st.tuples(st.integers(0, 400), st.binary(min_size=1, max_size=8)),  # overwrite bytes at an offset
    st.integers(0, 400))  # truncate at an offset


@settings(FUZZ, max_examples=max(10, EXAMPLES // 2))
@given(corruption=CORRUPTIONS)
def test_checkpoints(tmp_path_factory, corruption):
    path = tmp_path_factory.mktemp("ckpt") / "model.pd"
    pydepth.checkpoint.save(path, MODEL, rng=SplitMix64(5), step=3)
    data = bytearray(path.read_bytes())
    if isinstance(corruption, bytes):
        data = bytearray(corruption)
    elif isinstance(corruption, tuple):
        at, patch = corruption
        data[at:at + len(patch)] = patch
    else:
        del data[corruption:]
    path.write_bytes(bytes(data))
    out = call(pydepth.checkpoint.load, path)
    if not isinstance(out, PydepthError):
        assert all(finite(p.value) for p in out.model.parameters)
