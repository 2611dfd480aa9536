# SPDX-License-Identifier: MIT
"""Refusals of the public API and the command line are PydepthError subclasses naming the bad
value: huge CLI integers, deeply nested JSON, crafted checkpoint metadata, wrong argument types,
unknown optimizer slots, malformed optimizer states, ratios that overflow, a checkpoint whose
step disagrees with its optimizer's, and adjoints asked of another model's values."""
import json
import struct

import numpy as np
import pytest

from pydepth import (ArgumentTypeError, CheckpointError, CheckpointMismatchError, DecoderConfig, DecoderModel,
                     ForeignRecordError, NonFiniteValueError, OptimizerStateError, PydepthError, SplitMix64,
                     UnknownNameError, checkpoint, cli)
from pydepth.health import health_report_from_rms
from pydepth.optim import SGD, AdamW
from conftest import need_extra

CFG = DecoderConfig(64, 16, 2, 32, 2, 8)
IDS = (np.arange(2 * 9) * 7919 % 64).reshape(2, 9)
X, Y = IDS[:, :-1], IDS[:, 1:]
HUGE = str(2**64)


def bits(a):
    return np.ascontiguousarray(a, dtype=np.float64).view(np.uint64).copy()


@pytest.fixture
def model():
    return DecoderModel(CFG, SplitMix64(1))


def config_file(tmp_path):
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(CFG.to_dict()))
    return str(path)


def refused_in_one_line(capsys, argv):
    """The CLI's exit status and its one stderr line (no traceback)."""
    code = cli.main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 1 and "\n" not in err and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("option", ["--tokens", "--targets"])
def test_observe_refuses_an_id_beyond_int64_in_one_line_naming_it(tmp_path, capsys, option):
    argv = ["observe", "--config", config_file(tmp_path), "--seed", "1", "--tokens", "1", "--targets", "1"]
    argv[argv.index(option) + 1] = HUGE
    err = refused_in_one_line(capsys, argv)
    assert HUGE in err and option.lstrip("-") in err


def test_a_deeply_nested_json_model_is_refused_in_one_line(tmp_path, capsys):
    need_extra("torch")
    path = tmp_path / "nested.json"
    path.write_text("[" * 5000 + "]" * 5000)
    err = refused_in_one_line(capsys, ["audit", str(path)])
    assert str(path) in err and "nest" in err


def crafted(tmp_path, model, edit, name):
    """A saved checkpoint (model, AdamW, rng, step 0) with edit(header, meta) applied to its header."""
    path = tmp_path / "ok.safetensors"
    checkpoint.save(path, model, optimizer=AdamW(model.parameters), rng=SplitMix64(3), step=0)
    blob = path.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = json.loads(header["__metadata__"]["pydepth"])
    edit(header, meta)
    header["__metadata__"]["pydepth"] = json.dumps(meta)
    raw = json.dumps(header).encode()
    out = tmp_path / name
    out.write_bytes(struct.pack("<Q", len(raw)) + raw + blob[8 + n:])
    return out


def add_empty_tensor(header, meta):
    begin = header["final_norm.gain"]["data_offsets"][0]
    header["empty"] = {"dtype": "F64", "shape": [2**64, 0], "data_offsets": [begin, begin]}


def long_rng_state(header, meta):
    meta["rng_state"] = "1" * 5000


def disagreeing_steps(header, meta):
    meta["step"], meta["optimizer"]["step"] = 4, 2


@pytest.mark.parametrize("edit,named", [(add_empty_tensor, str(2**64)), (long_rng_state, "rng_state"),
                                        (disagreeing_steps, "step 4")])
def test_a_crafted_checkpoint_is_refused_typed_naming_the_field(tmp_path, model, edit, named):
    path = crafted(tmp_path, model, edit, f"{edit.__name__}.safetensors")
    with pytest.raises(CheckpointError) as info:
        checkpoint.load(path)
    assert named in str(info.value)


def test_a_checkpoint_whose_step_disagrees_with_its_optimizers_names_both(tmp_path, model):
    with pytest.raises(CheckpointMismatchError, match=r"step 4 .*optimizer's step 2"):
        checkpoint.load(crafted(tmp_path, model, disagreeing_steps, "steps.safetensors"))


@pytest.mark.parametrize("call", [
    lambda m, p: checkpoint.load(5),
    lambda m, p: checkpoint.save(5, m),
    lambda m, p: checkpoint.save(p, 5),
    lambda m, p: checkpoint.save(p, m, optimizer=5),
    lambda m, p: checkpoint.save(p, m, rng=5),
    lambda m, p: checkpoint.save(p, m, record=5),
    lambda m, p: AdamW(5),
    lambda m, p: AdamW([1]),
    lambda m, p: SGD(5, lr=0.1),
    lambda m, p: AdamW(m.parameters).slot(["x"], "exp_avg"),
], ids=["load-int", "save-int-path", "save-int-model", "save-optimizer", "save-rng", "save-record",
        "adamw-int", "adamw-list-of-int", "sgd-int", "slot-list"])
def test_wrong_argument_types_raise_argument_type_error(tmp_path, model, call):
    path = tmp_path / "never.safetensors"
    with pytest.raises(ArgumentTypeError):
        call(model, path)
    assert not path.exists()


@pytest.mark.parametrize("name,slot", [("nope", "exp_avg"), ("final_norm.gain", "nope")])
def test_an_unknown_optimizer_slot_is_an_unknown_name_naming_it(model, name, slot):
    with pytest.raises(UnknownNameError, match=repr(slot if name != "nope" else name)):
        AdamW(model.parameters).slot(name, slot)


@pytest.mark.parametrize("field,value", [("hyperparameters", "ab"), ("hyperparameters", [("lr", 1.0)]),
                                         ("parameters", None), ("parameters", 5)])
def test_a_malformed_optimizer_state_is_refused_and_changes_nothing(model, field, value):
    opt = AdamW(model.parameters, lr=1e-2)
    model.loss(X, Y).backward()
    opt.step()
    before = opt.state_dict()
    with pytest.raises(OptimizerStateError) as info:
        opt.load_state_dict(dict(before, **{field: value}))
    assert str(value)[:10] in str(info.value)
    after = opt.state_dict()
    assert after["step"] == before["step"] and after["hyperparameters"] == before["hyperparameters"]
    for name, slots in before["slots"].items():
        for s, a in slots.items():
            assert np.array_equal(bits(after["slots"][name][s]), bits(a))


def test_a_ratio_that_overflows_names_its_site_and_field():
    with pytest.raises(NonFiniteValueError, match=r"site 1 .*activation ratio .* is inf"):
        health_report_from_rms([1e-300, 1e300, 1.0], [1.0, 1.0, 1.0], valid_positions=1, width=4)


def test_adjoints_of_another_models_value_are_refused_and_commit_nothing(model):
    other = DecoderModel(CFG, SplitMix64(2))
    foreign = other.forward(X).residual_sites[1]
    loss = model.loss(X, Y)
    with pytest.raises(ForeignRecordError, match="another model"):
        loss.backward_with_selected_adjoints([foreign])
    assert all(not bits(p.grad).any() for p in model.parameters)
    assert all(not bits(p.grad).any() for p in other.parameters)
    assert isinstance(ForeignRecordError("x"), PydepthError)
