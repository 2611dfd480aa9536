# SPDX-License-Identifier: MIT
"""Model state dicts, and pickle / deepcopy that reproduce every bit (values, gradients,
revisions, generator states, optimizer slots) and keep shared identity."""
import copy
import pickle

import numpy as np
import pytest

import pydepth
from pydepth import (DecoderConfig, DecoderModel, DepthInitializationBudget, Fresh, NamedParameter,
                     SplitMix64, initialize_depth_scaled, observe_residual_health)
from pydepth.optim import SGD, AdamW, warmup_cosine

CFG = DecoderConfig(48, 8, 2, 16, 2, 6, kv_heads=1, rope_base=500.0, rms_epsilon=1e-5)
IDS = np.array([[1, 5, 9, 3, 2, 7], [4, 4, 0, 47, 8, 1]])
TG = np.array([[5, 9, 3, 2, 7, 0], [4, 0, 47, 8, 1, 2]])

COPIES = [pytest.param(lambda x: pickle.loads(pickle.dumps(x)), id="pickle"),
          pytest.param(copy.deepcopy, id="deepcopy")]


def bits(a):
    return np.ascontiguousarray(a, dtype=np.float64).view(np.uint64)


def trained(steps=2, seed=3):
    model = DecoderModel(CFG, SplitMix64(seed))
    opt = AdamW(model.parameters, lr=warmup_cosine(1e-2, 1, 10))
    for _ in range(steps):
        opt.zero_grad()
        model.loss(IDS, TG).backward()
        opt.step()
    model.loss(IDS, TG).backward()  # leave a non-zero gradient behind
    return model, opt


def same_parameters(a, b):
    assert [p.name for p in a.parameters] == [p.name for p in b.parameters]
    for p, q in zip(a.parameters, b.parameters):
        assert p is not q
        assert np.array_equal(bits(p.value), bits(q.value))
        assert np.array_equal(bits(p.grad), bits(q.grad))
        assert p.revision == q.revision


@pytest.mark.parametrize("dup", COPIES)
def test_splitmix64_copies_resume_the_exact_stream_independently(dup):
    rng = SplitMix64(2**64 - 5)
    rng.next_u64()
    twin = dup(rng)
    assert twin == rng and twin is not rng
    assert [twin.next_u64() for _ in range(3)] == [rng.next_u64() for _ in range(3)]
    twin.next_u64()
    assert twin.state != rng.state


@pytest.mark.parametrize("dup", COPIES)
def test_decoder_config_copies_are_equal_including_optional_fields(dup):
    twin = dup(CFG)
    assert twin == CFG and twin.kv_heads == 1 and twin.rope_base == 500.0 and twin.rms_epsilon == 1e-5


@pytest.mark.parametrize("dup", COPIES)
def test_decoder_model_copies_values_gradients_revisions_and_forward_bits(dup):
    model, _ = trained()
    twin = dup(model)
    same_parameters(model, twin)
    assert np.array_equal(bits(twin.forward(IDS).logits.value), bits(model.forward(IDS).logits.value))
    twin.parameters[0].assign(np.zeros(twin.parameters[0].shape))  # independent storage
    assert np.any(model.parameters[0].value != 0)


@pytest.mark.parametrize("dup", COPIES)
def test_model_and_optimizer_copied_together_share_parameters_and_train_identically(dup):
    model, opt = trained()
    model2, opt2 = dup((model, opt))
    assert all(p is q for p, q in zip(opt2.parameters, model2.parameters))
    assert opt2.step_count == opt.step_count and opt2.hyperparameters() == opt.hyperparameters()
    for m, o in ((model, opt), (model2, opt2)):
        for _ in range(2):
            o.zero_grad()
            m.loss(IDS, TG).backward()
            o.step()
    same_parameters(model, model2)
    for p in model.parameters:
        for s in opt.slot_names:
            assert np.array_equal(bits(opt.slot(p.name, s)), bits(opt2.slot(p.name, s)))


@pytest.mark.parametrize("dup", COPIES)
def test_sgd_with_momentum_copies_exactly(dup):
    model = DecoderModel(CFG, SplitMix64(1))
    opt = SGD(model.parameters, lr=0.1, momentum=0.9)
    model.loss(IDS, TG).backward()
    opt.step()
    _, opt2 = dup((model, opt))
    for p in model.parameters:
        assert np.array_equal(bits(opt.slot(p.name, "momentum_buffer")), bits(opt2.slot(p.name, "momentum_buffer")))


@pytest.mark.parametrize("dup", COPIES)
def test_depth_initialized_decoder_and_its_record_copy_exactly(dup):
    init = initialize_depth_scaled(Fresh(CFG, DepthInitializationBudget(10**6, 64), SplitMix64(7)))
    twin = dup(init)
    assert twin.record == init.record and dup(init.record) == init.record
    same_parameters(init.model, twin.model)


@pytest.mark.parametrize("dup", COPIES)
def test_health_reports_copy_exactly(dup):
    model = DecoderModel(CFG, SplitMix64(2))
    fwd = model.forward(IDS)
    report = observe_residual_health(model, fwd, fwd.loss(TG))
    assert dup(report) == report


def test_forward_records_refuse_pickling_with_a_clear_error():
    fwd = DecoderModel(CFG, SplitMix64(2)).forward(IDS)
    with pytest.raises(TypeError, match="recorded graph"):
        pickle.dumps(fwd)
    with pytest.raises(TypeError, match="recorded graph"):
        copy.deepcopy(fwd)


def test_named_parameters_and_state_dict_follow_the_layout_and_copy():
    model = DecoderModel(CFG, SplitMix64(4))
    names = [n for n, _ in CFG.parameter_layout()]
    assert [n for n, _ in model.named_parameters()] == names
    assert all(p is model.parameter(n) for n, p in model.named_parameters())
    state = model.state_dict()
    assert list(state) == names
    state["final_norm.gain"][0] = 42.0
    assert model.parameter("final_norm.gain").value[0] != 42.0


def test_from_state_dict_accepts_any_order_and_reproduces_the_model():
    model = DecoderModel(CFG, SplitMix64(4))
    state = dict(reversed(list(model.state_dict().items())))
    twin = DecoderModel.from_state_dict(CFG, state)
    assert np.array_equal(bits(twin.forward(IDS).logits.value), bits(model.forward(IDS).logits.value))


def test_load_state_dict_assigns_every_entry_and_advances_revisions():
    model = DecoderModel(CFG, SplitMix64(4))
    other = DecoderModel(CFG, SplitMix64(5))
    revisions = [p.revision for p in model.parameters]
    assert model.load_state_dict(other.state_dict()) == ((), ())
    for p, q, r in zip(model.parameters, other.parameters, revisions):
        assert np.array_equal(bits(p.value), bits(q.value)) and p.revision == r + 1


@pytest.mark.parametrize("corrupt,match", [
    (lambda d: d.pop("blocks.1.ffn.up.weight"), r"missing \['blocks.1.ffn.up.weight'\]"),
    (lambda d: d.update({"blocks.2.ffn.up.weight": np.zeros((8, 16))}), r"unexpected \['blocks.2.ffn.up.weight'\]"),
    (lambda d: d.update({"final_norm.gain": np.zeros(9)}), r"final_norm.gain: expected shape \(8,\), got \(9,\)"),
    (lambda d: d["blocks.0.attention.key.weight"].__setitem__((1, 2), np.inf), "non-finite value inf at flat index 6"),
    (lambda d: d.update({"final_norm.gain": np.array(["a"] * 8)}), "needs real numbers"),
])
def test_a_bad_state_dict_is_refused_naming_the_entry_and_changes_nothing(corrupt, match):
    model = DecoderModel(CFG, SplitMix64(4))
    state = DecoderModel(CFG, SplitMix64(5)).state_dict()
    corrupt(state)
    before = {n: bits(a).copy() for n, a in model.state_dict().items()}
    revisions = [p.revision for p in model.parameters]
    with pytest.raises(pydepth.StateDictError, match=match):
        model.load_state_dict(state)
    assert all(np.array_equal(before[p.name], bits(p.value)) for p in model.parameters)
    assert [p.revision for p in model.parameters] == revisions
    with pytest.raises(pydepth.StateDictError, match=match):
        DecoderModel.from_state_dict(CFG, state)


def test_non_strict_loading_reports_what_it_left_out():
    model = DecoderModel(CFG, SplitMix64(4))
    state = DecoderModel(CFG, SplitMix64(5)).state_dict()
    state.pop("final_norm.gain")
    state["head.bias"] = np.zeros(3)
    result = model.load_state_dict(state, strict=False)
    assert result.missing == ("final_norm.gain",) and result.unexpected == ("head.bias",)
    assert model.parameter("final_norm.gain").revision == 0
    assert np.array_equal(model.parameter("token_embedding.weight").value, state["token_embedding.weight"])


def test_named_parameter_pickles_with_its_name_values_and_gradient():
    p = NamedParameter("a.b", np.arange(6.0).reshape(2, 3))
    q = pickle.loads(pickle.dumps(p))
    assert q.name == "a.b" and q.shape == (2, 3) and q.revision == p.revision
    assert np.array_equal(bits(q.value), bits(p.value))
