# SPDX-License-Identifier: MIT
"""Hypothesis fuzz over the public entry points: every call returns finite results or raises a
PydepthError, never crashes, and a refusal leaves the caller's state (generators, parameter
values, gradients and revisions) untouched (issue 11).

Bounded for CI by PYDEPTH_FUZZ_EXAMPLES (default 40 per entry point, about 10 s in all); the
longer run in tests/README.md raises it."""
import math
import os

import numpy as np
from conftest import need_extra
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


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.sampled_from([0, 1, 10**9, 2**64, -1]),
              st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8)
META_PLACES = st.sampled_from([
    ("config",), ("config", "layers"), ("config", "vocabulary_size"), ("config", "model_width"),
    ("config", "heads"), ("config", "rope_base"), ("record",), ("rng_state",), ("step",), ("optimizer",),
    ("optimizer", "step"), ("optimizer", "slots"), ("optimizer", "hyperparameters"),
    ("optimizer", "hyperparameters", "weight_decay"), ("optimizer", "hyperparameters", "lr"), ("extra",),
    ("checkpoint_format",), ("numerics_contract",), ("pydepth_version",)])


def _deep(depth):
    return "[" * depth + "]" * depth


@settings(FUZZ, max_examples=max(10, EXAMPLES // 2))
@given(place=META_PLACES, value=st.one_of(json_values, st.integers(1, 4000).map(lambda d: ("deep", d)),
                                          st.integers(3, 9).map(lambda k: ("size", 10**k))))
def test_crafted_checkpoint_metadata(tmp_path_factory, place, value):
    """Metadata edited anywhere (types, sizes up to 10^9 layers, nesting): loads or a PydepthError."""
    import json
    import struct
    import time
    path = tmp_path_factory.mktemp("ckpt") / "model.safetensors"
    model = DecoderModel(CFG, SplitMix64(1))
    pydepth.checkpoint.save(path, model, optimizer=pydepth.optim.AdamW(model.parameters), rng=SplitMix64(5), step=3)
    blob = path.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = json.loads(header["__metadata__"]["pydepth"])
    target = meta
    for key in place[:-1]:
        target = target[key] if isinstance(target.get(key), dict) else target.setdefault(key, {})
    marker = "\x00DEEP\x00"
    if isinstance(value, tuple) and value[0] == "size":
        target[place[-1]] = value[1]
    else:
        target[place[-1]] = marker if isinstance(value, tuple) else value
    text = json.dumps(meta)
    if isinstance(value, tuple) and value[0] == "deep":
        text = text.replace(json.dumps(marker), _deep(value[1]))
    header["__metadata__"]["pydepth"] = text
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + blob[8 + n:])
    t0 = time.perf_counter()
    out = call(pydepth.checkpoint.load, path)
    assert time.perf_counter() - t0 < 5.0, "a refusal must be bounded by the file, not by the claim"
    if not isinstance(out, PydepthError):
        assert all(finite(p.value) for p in out.model.parameters)


_STORE = {}


def _stored_sweep():
    """A small result directory of several parts, built once (the reference for every edit)."""
    if not _STORE:
        import importlib
        import tempfile
        from pydepth.sweep import SweepSpec, read_table, run
        runmod = importlib.import_module("pydepth.sweep.run")
        spec = SweepSpec(depths=[1, 2], widths=[4], seeds=[0], policies=["scaled"], sequence_length=4)
        out = os.path.join(tempfile.mkdtemp(prefix="pydepth-fuzz-"), "ref")
        saved, runmod.MIN_TASK_SECONDS = runmod.MIN_TASK_SECONDS, 0.0  # one part per cell
        try:
            run(spec, out=out, scheduler="serial", progress=False)
        finally:
            runmod.MIN_TASK_SECONDS = saved
        _STORE.update(out=out, spec=spec, table=read_table(out))
    return _STORE


PART_EDITS = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(1, 64)),
    st.tuples(st.just("truncate"), st.integers(0, 10**6)),
    st.tuples(st.just("copy"), st.integers(0, 9)),
    st.tuples(st.just("append"), st.binary(min_size=1, max_size=16)),
    st.tuples(st.just("manifest"), json_values))


@settings(FUZZ, max_examples=max(8, EXAMPLES // 4))
@given(edit=PART_EDITS, unlist=st.booleans())
def test_crafted_store_parts(tmp_path_factory, edit, unlist):
    """A stored part flipped, truncated, copied or extended, or the manifest replaced, with or
    without the part's manifest entry: reads and resume give the reference rows or a PydepthError."""
    need_extra("sweep")
    import json
    import shutil
    from pydepth.sweep import read_table
    from pydepth.sweep.store import part_files, prepare_directory
    ref = _stored_sweep()
    out = tmp_path_factory.mktemp("store") / "run"
    shutil.copytree(ref["out"], out)
    part = part_files(out)[0]
    data = bytearray(part.read_bytes())
    kind = edit[0]
    if kind == "flip":
        at = edit[1] % len(data)
        data[at:at + edit[2]] = bytes(b ^ 0xA5 for b in data[at:at + edit[2]])
    elif kind == "truncate":
        del data[edit[1] % len(data):]
    elif kind == "copy":
        shutil.copy(part, part.with_name(f"part-{edit[1]:016d}.parquet"))
    elif kind == "append":
        data += edit[1]
    part.write_bytes(bytes(data))
    manifest = out / "_manifest.json"
    if kind == "manifest":
        manifest.write_text(json.dumps(edit[1]))
    elif unlist:
        doc = json.loads(manifest.read_text())
        doc["parts"].pop(part.name, None)
        manifest.write_text(json.dumps(doc))
    table = call(read_table, out)
    if not isinstance(table, PydepthError) and kind != "manifest" and not unlist:
        assert table.drop(["wall_time_s"]).equals(ref["table"].drop(["wall_time_s"]))  # the hash vouches for it
    call(prepare_directory, out, ref["spec"], resume=True)
