# SPDX-License-Identifier: MIT
"""Hyperparameters and loaded states that would wreck a model "successfully": decay factors
lr*weight_decay outside [0, 1), negative second moments, duplicate slot names."""
import json
import struct

import numpy as np
import pytest

import pydepth
from pydepth import DecoderConfig, DecoderModel, SplitMix64, checkpoint
from pydepth.optim import SGD, AdamW, warmup_cosine

CFG = DecoderConfig(40, 8, 2, 16, 2, 6)


@pytest.fixture
def model():
    return DecoderModel(CFG, SplitMix64(1))


@pytest.mark.parametrize("make", [
    lambda ps: AdamW(ps, lr=1e-3, weight_decay=1e300),
    lambda ps: SGD(ps, lr=0.1, weight_decay=1e300),
    lambda ps: AdamW(ps, lr=0.5, weight_decay=2.0),
    lambda ps: SGD(ps, lr=1.0, momentum=0.9, weight_decay=1.0),
], ids=["adamw-1e300", "sgd-1e300", "adamw-product-1", "sgd-product-1"])
def test_a_weight_decay_whose_factor_is_not_a_decay_is_refused_at_construction(model, make):
    with pytest.raises(pydepth.InvalidHyperparameterError, match=r"lr\*weight_decay must be in \[0, 1\)"):
        make(model.parameters)


def test_a_schedule_that_climbs_into_a_non_decay_is_refused_at_that_step_and_changes_nothing(model):
    opt = AdamW(model.parameters, lr=warmup_cosine(0.5, 4, 8), weight_decay=3.0)  # lr*wd: 0.375, 0.75, 1.125
    tokens = np.array([[1, 2, 3, 4]])
    for _ in range(2):
        opt.zero_grad()
        model.loss(tokens, tokens).backward()
        opt.step()
    before = [p.value.copy() for p in model.parameters]
    with pytest.raises(pydepth.InvalidHyperparameterError, match="lr\\*weight_decay"):
        opt.step()
    assert opt.step_count == 2
    assert all(np.array_equal(a.view(np.uint64), p.value.view(np.uint64)) for a, p in zip(before, model.parameters))


def test_a_state_with_a_negative_second_moment_is_refused(model):
    opt = AdamW(model.parameters)
    state = opt.state_dict()
    state["slots"]["final_norm.gain"]["exp_avg_sq"][3] = -1e-12
    with pytest.raises(pydepth.OptimizerStateError, match=r"exp_avg_sq .*negative value -1e-12 at flat index 3"):
        AdamW(model.parameters).load_state_dict(state)


def _edit(path, edit):
    blob = path.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = json.loads(header["__metadata__"]["pydepth"])
    edit(meta)
    header["__metadata__"]["pydepth"] = json.dumps(meta)
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + blob[8 + n:])


def test_a_checkpoint_naming_a_slot_twice_is_refused(tmp_path, model):
    path = tmp_path / "ck.safetensors"
    checkpoint.save(path, model, optimizer=AdamW(model.parameters))
    _edit(path, lambda m: m["optimizer"].update(slots=["exp_avg", "exp_avg", "exp_avg_sq"]))
    with pytest.raises(pydepth.CheckpointFormatError, match="distinct slot names"):
        checkpoint.load(path)


def test_a_checkpoint_with_a_huge_stored_weight_decay_is_refused(tmp_path, model):
    path = tmp_path / "ck.safetensors"
    checkpoint.save(path, model, optimizer=AdamW(model.parameters))
    _edit(path, lambda m: m["optimizer"]["hyperparameters"].update(weight_decay=1e300))
    with pytest.raises(pydepth.CheckpointError, match="weight_decay"):
        checkpoint.load(path)
