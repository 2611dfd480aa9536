# SPDX-License-Identifier: MIT
"""safetensors checkpoints: exact round trips, exact resume, atomic writes, typed refusals of
every kind of bad file."""
import json
import os
import struct

import numpy as np
import pytest
import safetensors
import safetensors.numpy

import pydepth
from pydepth import (DecoderConfig, DecoderModel, DepthInitializationBudget, Fresh, SplitMix64,
                     initialize_depth_scaled)
from pydepth import checkpoint
from pydepth.optim import SGD, AdamW, warmup_cosine

CFG = DecoderConfig(40, 8, 2, 16, 2, 6)


def bits(a):
    return np.ascontiguousarray(a, dtype=np.float64).view(np.uint64)


def sample(rng, cfg=CFG, B=2):
    """A batch drawn from the generator, so resuming must restore it too."""
    T = cfg.max_positions
    flat = [rng.next_u64() % cfg.vocabulary_size for _ in range(B * (T + 1))]
    arr = np.array(flat, dtype=np.int64).reshape(B, T + 1)
    return arr[:, :-1], arr[:, 1:]


def train(model, opt, rng, steps):
    for _ in range(steps):
        ids, tg = sample(rng)
        opt.zero_grad()
        model.loss(ids, tg).backward()
        opt.step()


def setup(seed=5):
    init = initialize_depth_scaled(Fresh(CFG, DepthInitializationBudget(10**6, 64), SplitMix64(seed)))
    opt = AdamW(init.model.parameters, lr=warmup_cosine(1e-2, 2, 10), weight_decay=0.05)
    return init, opt, SplitMix64(seed + 100)


def assert_same(model_a, opt_a, rng_a, model_b, opt_b, rng_b):
    for p, q in zip(model_a.parameters, model_b.parameters):
        assert p.name == q.name and np.array_equal(bits(p.value), bits(q.value)), p.name
        for s in opt_a.slot_names:
            assert np.array_equal(bits(opt_a.slot(p.name, s)), bits(opt_b.slot(q.name, s))), (p.name, s)
    assert opt_a.step_count == opt_b.step_count
    assert rng_a.state == rng_b.state


def test_round_trip_restores_every_part_exactly(tmp_path):
    init, opt, rng = setup()
    train(init.model, opt, rng, 3)
    path = tmp_path / "ck.safetensors"
    checkpoint.save(path, init, optimizer=opt, rng=rng, step=3, extra={"note": "hello", "seen": [1, 2]})
    ck = checkpoint.load(path)
    assert ck.record == init.record and ck.step == 3 and ck.extra == {"note": "hello", "seen": [1, 2]}
    assert ck.rng == rng and ck.config == CFG
    assert ck.contract_version == checkpoint.NUMERICS_CONTRACT_VERSION
    assert ck.pydepth_version == pydepth.__version__
    opt2 = ck.optimizer()
    assert opt2.hyperparameters() == opt.hyperparameters()
    assert_same(init.model, opt, rng, ck.model, opt2, ck.rng)


def test_file_is_plain_safetensors_with_pt_format_and_pydepth_metadata(tmp_path):
    model = DecoderModel(CFG, SplitMix64(1))
    opt = SGD(model.parameters, lr=0.1, momentum=0.9)
    path = tmp_path / "ck.safetensors"
    checkpoint.save(path, model, optimizer=opt)
    with safetensors.safe_open(str(path), framework="np") as f:
        meta = f.metadata()
        keys = set(f.keys())
    assert set(meta) == {"pydepth"}  # one entry: safetensors orders several differently in each process
    info = json.loads(meta["pydepth"])
    assert info["config"] == CFG.to_dict() and info["optimizer"]["optimizer"] == "SGD"
    assert info["numerics_contract"] == checkpoint.NUMERICS_CONTRACT_VERSION
    names = [n for n, _ in CFG.parameter_layout()]
    assert keys == set(names) | {f"optimizer.{n}.momentum_buffer" for n in names}
    loaded = safetensors.numpy.load_file(str(path))
    assert all(loaded[n].dtype == np.float64 for n in keys)


@pytest.mark.parametrize("n,k", [(5, 2), (4, 1)])
def test_resume_is_exact(tmp_path, n, k):
    init, opt, rng = setup()
    train(init.model, opt, rng, n)

    init2, opt2, rng2 = setup()
    train(init2.model, opt2, rng2, k)
    path = tmp_path / "mid.safetensors"
    checkpoint.save(path, init2, optimizer=opt2, rng=rng2, step=k)
    del init2, opt2, rng2
    ck = checkpoint.load(path)
    opt3 = ck.optimizer()
    train(ck.model, opt3, ck.rng, n - k)
    assert_same(init.model, opt, rng, ck.model, opt3, ck.rng)


def test_a_failed_write_leaves_the_previous_file_and_no_temporary(tmp_path, monkeypatch):
    model = DecoderModel(CFG, SplitMix64(1))
    path = tmp_path / "ck.safetensors"
    checkpoint.save(path, model, step=1)
    before = path.read_bytes()

    def crash(src, dst):
        raise OSError("disk vanished")
    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk vanished"):
        checkpoint.save(path, model, step=2)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck.safetensors"]


def test_unsavable_inputs_are_refused_before_writing(tmp_path):
    model = DecoderModel(CFG, SplitMix64(1))
    other = DecoderModel(CFG, SplitMix64(2))
    path = tmp_path / "ck.safetensors"
    with pytest.raises(pydepth.CheckpointMismatchError, match="exactly this model's parameters"):
        checkpoint.save(path, model, optimizer=AdamW(other.parameters))
    with pytest.raises(pydepth.CheckpointError, match="not plain JSON"):
        checkpoint.save(path, model, extra={"x": object()})
    with pytest.raises(pydepth.CheckpointError, match="step"):
        checkpoint.save(path, model, step=-1)
    with pytest.raises(pydepth.CheckpointError, match="has no to_dict"):
        checkpoint.save(path, model, optimizer=SGD(model.parameters, lr=lambda step: 0.1))
    assert not path.exists()


# ---- bad files

def _parts(path):
    tensors = dict(safetensors.numpy.load_file(str(path)))
    with safetensors.safe_open(str(path), framework="np") as f:
        meta = f.metadata()
    return tensors, meta, json.loads(meta["pydepth"])


def _rewrite(path, tensors, meta, info=None):
    if info is not None:
        meta = dict(meta, pydepth=json.dumps(info))
    safetensors.numpy.save_file(tensors, str(path), metadata=meta)


@pytest.fixture
def saved(tmp_path):
    init, opt, rng = setup()
    train(init.model, opt, rng, 1)
    path = tmp_path / "ck.safetensors"
    checkpoint.save(path, init, optimizer=opt, rng=rng, step=1)
    return path


@pytest.mark.parametrize("cut", [0, 5, 8, 40, -1, -100])
def test_truncated_files_are_refused(saved, cut):
    data = saved.read_bytes()
    saved.write_bytes(data[:cut] if cut >= 0 else data[:len(data) + cut])
    with pytest.raises(pydepth.CheckpointFormatError, match=r"truncated|header|safetensors"):
        checkpoint.load(saved)


@pytest.mark.parametrize("delta", [-3, 7, 2**40])
def test_a_wrong_header_length_is_refused(saved, delta):
    data = bytearray(saved.read_bytes())
    (n,) = struct.unpack("<Q", data[:8])
    data[:8] = struct.pack("<Q", n + delta)
    saved.write_bytes(bytes(data))
    with pytest.raises(pydepth.CheckpointFormatError, match=r"header|safetensors"):
        checkpoint.load(saved)


def _edit_info(key, value):
    def edit(tensors, meta, info):
        info[key] = value
        return tensors, meta, info
    return edit


def _drop(name):
    def edit(tensors, meta, info):
        del tensors[name]
        return tensors, meta, info
    return edit


def _retype(name, arr_fn):
    def edit(tensors, meta, info):
        tensors[name] = arr_fn(tensors[name])
        return tensors, meta, info
    return edit


def _meta(text):
    def edit(tensors, meta, info):
        return tensors, dict(meta, pydepth=text), None
    return edit


BAD = [
    ("non-JSON metadata", _meta("{not json"), pydepth.CheckpointFormatError, "not JSON"),
    ("metadata not an object", _meta("[1, 2]"), pydepth.CheckpointFormatError, "JSON object"),
    ("no pydepth entry", lambda t, m, i: (t, {"format": "pt"}, None),
     pydepth.CheckpointFormatError, "no 'pydepth' entry"),
    ("missing key", lambda t, m, i: (t, m, {k: v for k, v in i.items() if k != "step"}),
     pydepth.CheckpointFormatError, "missing \\['step'\\]"),
    ("bad config", _edit_info("config", {"vocabulary_size": 0}), pydepth.CheckpointFormatError, "config is invalid"),
    ("bad rng", _edit_info("rng_state", "-4"), pydepth.CheckpointFormatError, "rng_state"),
    ("bad step", _edit_info("step", 1.5), pydepth.CheckpointFormatError, "step"),
    ("bad record", _edit_info("record", {"format": "nope"}), pydepth.CheckpointFormatError, "record is invalid"),
    ("missing tensor", _drop("blocks.1.ffn.down.weight"),
     pydepth.CheckpointFormatError, "'blocks.1.ffn.down.weight' is missing"),
    ("float32 tensor", _retype("final_norm.gain", lambda a: a.astype(np.float32)),
     pydepth.CheckpointFormatError, "dtype float32"),
    ("wrong shape", _retype("final_norm.gain", lambda a: np.zeros(9)),
     pydepth.CheckpointMismatchError, "shape \\(9,\\)"),
    ("non-finite", _retype("final_norm.gain", lambda a: np.full_like(a, np.nan)),
     pydepth.CheckpointFormatError, "non-finite"),
    ("stray tensor", lambda t, m, i: ({**t, "extra.weight": np.zeros(2)}, m, i), pydepth.CheckpointFormatError,
     "unexpected tensors"),
    ("missing slot", _drop("optimizer.final_norm.gain.exp_avg"),
     pydepth.CheckpointFormatError, "'optimizer.final_norm.gain.exp_avg' is missing"),
    ("slot shape", _retype("optimizer.final_norm.gain.exp_avg_sq", lambda a: np.zeros(3)),
     pydepth.CheckpointFormatError, "float64 of shape"),
    ("newer contract", _edit_info("numerics_contract", checkpoint.NUMERICS_CONTRACT_VERSION + 1),
     pydepth.CheckpointVersionError, "numerics_contract"),
    ("newer format", _edit_info("checkpoint_format", checkpoint.CHECKPOINT_FORMAT + 1),
     pydepth.CheckpointVersionError, "checkpoint_format"),
]


@pytest.mark.parametrize("edit,error,match", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_files_are_refused_with_a_typed_error(saved, edit, error, match):
    tensors, meta, info = edit(*_parts(saved))
    _rewrite(saved, tensors, meta, info)
    with pytest.raises(error, match=match):
        checkpoint.load(saved)


def test_a_config_that_does_not_match_the_tensors_is_refused(saved):
    tensors, meta, info = _parts(saved)
    info["config"]["feed_forward_width"] = 12
    info["record"] = None  # the record would disagree first; here the tensors must
    _rewrite(saved, tensors, meta, info)
    with pytest.raises(pydepth.CheckpointMismatchError, match=r"the config .* needs"):
        checkpoint.load(saved)


def test_a_record_for_another_config_is_refused(tmp_path):
    init, _, _ = setup()
    other = DecoderModel(DecoderConfig(40, 8, 2, 16, 3, 6), SplitMix64(1))
    path = tmp_path / "ck.safetensors"
    checkpoint.save(path, other)
    tensors, meta, info = _parts(path)
    info["record"] = init.record.to_dict()
    _rewrite(path, tensors, meta, info)
    with pytest.raises(pydepth.CheckpointMismatchError, match="record's configuration"):
        checkpoint.load(path)


def test_optimizer_metadata_that_does_not_load_is_refused(saved):
    tensors, meta, info = _parts(saved)
    info["optimizer"]["hyperparameters"]["betas"] = [0.9, 1.5]
    _rewrite(saved, tensors, meta, info)
    with pytest.raises(pydepth.CheckpointMismatchError, match="beta2 must be in"):
        checkpoint.load(saved)


def test_a_checkpoint_without_optimizer_has_none_and_refuses_to_build_one(tmp_path):
    path = tmp_path / "m.safetensors"
    checkpoint.save(path, DecoderModel(CFG, SplitMix64(1)))
    ck = checkpoint.load(path)
    assert ck.optimizer_state is None and ck.rng is None and ck.record is None and ck.step is None
    with pytest.raises(pydepth.CheckpointError, match="no optimizer state"):
        ck.optimizer()
