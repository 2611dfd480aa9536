# SPDX-License-Identifier: MIT
"""Optimizers: the documented per-element order bit for bit, agreement with torch.optim in float64,
thread-count invariance, all-or-nothing refusal, revisions, schedules and optimizer state."""
import math

import numpy as np
import pytest

import pydepth
from pydepth import DecoderConfig, DecoderModel, SplitMix64
from pydepth.optim import SGD, AdamW, WarmupCosine, warmup_cosine
from conftest import kernel_paths, load_helper, need_extra

_contract = load_helper("optim_contract.py")
adamw_contract = _contract.adamw_contract
sgd_contract = _contract.sgd_contract

CFG = DecoderConfig(64, 16, 2, 32, 2, 8)


def bits(a):
    return np.ascontiguousarray(a, dtype=np.float64).view(np.uint64)


def batch(seed=0, cfg=CFG, B=2):
    rng = np.random.default_rng(seed)
    T = cfg.max_positions
    return rng.integers(0, cfg.vocabulary_size, (B, T)), rng.integers(0, cfg.vocabulary_size, (B, T))


def accumulate(model, seed=0):
    ids, tg = batch(seed, model.config)
    model.zero_grad()
    model.loss(ids, tg).backward()


def state_bits(model, opt):
    out = {p.name: bits(p.value).copy() for p in model.parameters}
    for p in model.parameters:
        for s in opt.slot_names:
            out[f"{p.name}.{s}"] = bits(opt.slot(p.name, s)).copy()
    return out








@pytest.mark.parametrize("hp", [dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1),
                                dict(lr=3e-3, betas=(0.3, 0.95), eps=1e-6, weight_decay=0.0)])
def test_adamw_follows_the_documented_operation_order_bit_for_bit(hp):
    model = DecoderModel(CFG, SplitMix64(3))
    opt = AdamW(model.parameters, **hp)
    b1, b2 = hp["betas"]
    ref = {p.name: (p.snapshot(), np.zeros(p.shape), np.zeros(p.shape)) for p in model.parameters}
    for t in range(1, 5):
        accumulate(model, seed=t)
        grads = {p.name: p.grad.copy() for p in model.parameters}
        opt.step()
        for p in model.parameters:
            pv, m, v = ref[p.name]
            ref[p.name] = adamw_contract(pv, grads[p.name], m, v, t, hp["lr"], b1, b2, hp["eps"], hp["weight_decay"])
            assert np.array_equal(bits(p.value), bits(ref[p.name][0])), (t, p.name)
            assert np.array_equal(bits(opt.slot(p.name, "exp_avg")), bits(ref[p.name][1]))
            assert np.array_equal(bits(opt.slot(p.name, "exp_avg_sq")), bits(ref[p.name][2]))
            # the model keeps working on the updated values
    assert opt.step_count == 4


@pytest.mark.parametrize("momentum,wd", [(0.0, 0.0), (0.9, 0.0), (0.5, 0.01)])
def test_sgd_follows_the_documented_operation_order_bit_for_bit(momentum, wd):
    model = DecoderModel(CFG, SplitMix64(4))
    opt = SGD(model.parameters, lr=0.05, momentum=momentum, weight_decay=wd)
    assert opt.slot_names == (("momentum_buffer",) if momentum else ())
    ref = {p.name: (p.snapshot(), np.zeros(p.shape)) for p in model.parameters}
    for t in range(1, 4):
        accumulate(model, seed=t)
        grads = {p.name: p.grad.copy() for p in model.parameters}
        opt.step()
        for p in model.parameters:
            ref[p.name] = sgd_contract(*ref[p.name][:1], grads[p.name], ref[p.name][1], t, 0.05, momentum, wd)
            assert np.array_equal(bits(p.value), bits(ref[p.name][0])), (t, p.name)
            if momentum:
                assert np.array_equal(bits(opt.slot(p.name, "momentum_buffer")), bits(ref[p.name][1]))


def _torch():
    need_extra("torch")
    import torch
    return torch


def _max_relative(model, tparams):
    return max(float(np.max(np.abs(p.value - t.detach().numpy())) / np.max(np.abs(t.detach().numpy())))
               for p, t in zip(model.parameters, tparams))


@pytest.mark.parametrize("name,hp", [
    ("AdamW", dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)),
    ("AdamW", dict(lr=1e-3, betas=(0.8, 0.99), eps=1e-10, weight_decay=0.0)),
    ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.01)),
    ("SGD", dict(lr=0.1)),
])
def test_parameters_agree_with_torch_optim_foreach_false_within_1e_13_after_10_steps(name, hp):
    torch = _torch()
    model = DecoderModel(CFG, SplitMix64(5))
    tparams = [torch.tensor(p.snapshot(), dtype=torch.float64) for p in model.parameters]
    opt = getattr(pydepth.optim, name)(model.parameters, **hp)
    topt = getattr(torch.optim, name)(tparams, foreach=False, **hp)
    for s in range(10):
        accumulate(model, seed=s)
        for p, t in zip(model.parameters, tparams):
            t.grad = torch.tensor(p.grad.copy())
        opt.step()
        topt.step()
    assert _max_relative(model, tparams) <= 1e-13


def test_training_is_bit_identical_for_every_thread_count_and_kernel_path():
    cfg = DecoderConfig(512, 32, 2, 64, 1, 8)  # the embedding spans several update chunks
    before, path = pydepth.get_num_threads(), pydepth._native._runtime.kernel_path()
    paths = kernel_paths()
    results = []
    try:
        for n, p in [(1, path), (2, path), (3, path)] + [(2, p) for p in paths]:
            pydepth.set_num_threads(n)
            assert pydepth._native._runtime.force_kernel_path(p)
            model = DecoderModel(cfg, SplitMix64(9))
            opt = AdamW(model.parameters, lr=1e-2)
            for s in range(3):
                accumulate(model, seed=s)
                opt.step()
            results.append(state_bits(model, opt))
    finally:
        pydepth.set_num_threads(before)
        pydepth._native._runtime.force_kernel_path(path)
    for other in results[1:]:
        assert all(np.array_equal(results[0][k], other[k]) for k in results[0])


def test_step_advances_every_revision_so_older_graphs_are_stale():
    model = DecoderModel(CFG, SplitMix64(1))
    opt = SGD(model.parameters, lr=0.1)
    ids, tg = batch()
    loss = model.loss(ids, tg)
    revisions = [p.revision for p in model.parameters]
    opt.step()  # zero gradients still count as an update of the values
    assert [p.revision for p in model.parameters] == [r + 1 for r in revisions]
    with pytest.raises(pydepth.StaleOperandError):
        loss.backward()


def test_zero_grad_resets_every_gradient():
    model = DecoderModel(CFG, SplitMix64(1))
    opt = AdamW(model.parameters)
    accumulate(model)
    assert any(np.any(p.grad != 0) for p in model.parameters)
    opt.zero_grad()
    assert all(np.all(bits(p.grad) == 0) for p in model.parameters)


def _overflow_setup(model):
    """A late tensor's element at the largest double, pushed further by its own gradient."""
    accumulate(model)
    target = model.parameters[-2]
    g = target.grad.reshape(-1)
    i = int(np.argmax(np.abs(g)))
    assert g[i] != 0
    v = target.snapshot().reshape(-1)
    v[i] = -np.sign(g[i]) * np.finfo(np.float64).max
    target.assign(v.reshape(target.shape))
    return target, i, abs(float(g[i]))


@pytest.mark.parametrize("name", ["SGD", "AdamW"])
def test_a_non_finite_update_is_refused_whole(name):
    model = DecoderModel(CFG, SplitMix64(2))
    target, i, g = _overflow_setup(model)
    # every other update stays finite, so a partial commit would show in the earlier tensors
    if name == "SGD":
        opt = SGD(model.parameters, lr=1e300 / g, momentum=0.9)
    else:
        opt = AdamW(model.parameters, lr=1e300, weight_decay=0.0)
    before = state_bits(model, opt)
    revisions = [p.revision for p in model.parameters]
    with pytest.raises(pydepth.NonFiniteUpdateError,
                       match=f"step 1 refused: {target.name} value would become -?inf at flat index {i}"):
        opt.step()
    after = state_bits(model, opt)
    assert all(np.array_equal(before[k], after[k]) for k in before)
    assert [p.revision for p in model.parameters] == revisions
    assert opt.step_count == 0


@pytest.mark.parametrize("make,match", [
    (lambda ps: AdamW(ps, lr=-1.0), "lr must be finite and non-negative, got -1.0"),
    (lambda ps: AdamW(ps, betas=(0.9, 1.0)), "beta2 must be in \\[0, 1\\), got 1.0"),
    (lambda ps: AdamW(ps, betas=(-0.1, 0.9)), "beta1 must be in \\[0, 1\\), got -0.1"),
    (lambda ps: AdamW(ps, eps=float("nan")), "eps must be finite and non-negative, got nan"),
    (lambda ps: AdamW(ps, weight_decay=float("inf")), "weight_decay must be finite"),
    (lambda ps: AdamW(ps, betas=0.9), "betas must be a pair"),
    (lambda ps: AdamW(ps, lr=True), "lr must be a real number"),
    (lambda ps: SGD(ps, lr=0.1, momentum=-0.5), "momentum must be finite and non-negative, got -0.5"),
    (lambda ps: SGD(ps, lr="0.1"), "lr must be a real number"),
])
def test_invalid_hyperparameters_are_refused_naming_the_value(make, match):
    model = DecoderModel(CFG, SplitMix64(1))
    with pytest.raises(pydepth.InvalidHyperparameterError, match=match):
        make(model.parameters)


def test_parameter_lists_must_be_non_empty_unique_named_parameters():
    model = DecoderModel(CFG, SplitMix64(1))
    with pytest.raises(pydepth.OptimizerStateError, match="empty"):
        AdamW([])
    with pytest.raises(pydepth.OptimizerStateError, match="appears twice"):
        AdamW([model.parameters[0], model.parameters[0]])
    with pytest.raises(TypeError, match="NamedParameter"):
        AdamW([np.zeros(3)])
    with pytest.raises(TypeError, match=r"model\.parameters"):
        AdamW(model)


def test_warmup_cosine_rises_linearly_then_falls_to_min_lr():
    s = warmup_cosine(1e-2, warmup_steps=4, total_steps=12, min_lr=1e-4)
    assert [s(k) for k in range(4)] == [1e-2 * (k + 1) / 4 for k in range(4)]
    assert s(4) == 1e-2
    decay = [s(k) for k in range(4, 13)]
    assert all(a > b for a, b in zip(decay, decay[1:]))
    assert s(8) == pytest.approx(1e-4 + (1e-2 - 1e-4) / 2, rel=1e-15)
    assert s(12) == s(100) == 1e-4
    assert WarmupCosine(**{k: v for k, v in s.to_dict().items() if k != "schedule"}) == s
    with pytest.raises(pydepth.InvalidHyperparameterError, match="total_steps"):
        warmup_cosine(1e-2, 10, 5)
    with pytest.raises(pydepth.InvalidHyperparameterError, match="min_lr"):
        warmup_cosine(1e-2, 1, 5, min_lr=1.0)


@pytest.mark.parametrize("peak, warmup, total, min_lr", [(3e-3, 2, 20, 0.0), (1e-2, 0, 7, 1e-4),
                                                         (0.1, 5, 1000, 3e-5), (6e-4, 100, 300, 6e-5)])
def test_warmup_cosine_is_the_formula_with_pydepths_own_cos_bit_for_bit(peak, warmup, total, min_lr, monkeypatch):
    from pydepth import elementary

    def formula(s):
        if s < warmup:
            return peak * (s + 1) / warmup
        if s >= total:
            return min_lr
        cosine = float(elementary.cos(math.pi * ((s - warmup) / (total - warmup))))
        return min_lr + (peak - min_lr) * 0.5 * (1.0 + cosine)

    def platform_cos(x):
        raise AssertionError("the schedule must not use the platform libm's math.cos")
    monkeypatch.setattr(math, "cos", platform_cos)
    schedule = warmup_cosine(peak, warmup, total, min_lr=min_lr)
    steps = sorted(set(range(min(total + 2, 60))) | set(range(warmup, total + 2, max(1, total // 97))))
    got = np.array([schedule(s) for s in steps])
    assert all(type(schedule(s)) is float for s in steps[:3])
    assert np.array_equal(got.view(np.uint64), np.array([formula(s) for s in steps]).view(np.uint64))


def test_a_schedule_sets_each_steps_rate_and_a_bad_rate_refuses_the_step():
    model = DecoderModel(CFG, SplitMix64(1))
    sched = warmup_cosine(0.1, 2, 4)
    opt = SGD(model.parameters, lr=sched)
    assert opt.lr == sched(0) == 0.05
    opt.step()
    assert opt.lr == sched(1)
    rates = iter([0.1, float("nan")])
    model2 = DecoderModel(CFG, SplitMix64(1))
    opt2 = SGD(model2.parameters, lr=lambda step: next(rates))
    before = {p.name: bits(p.value).copy() for p in model2.parameters}
    with pytest.raises(pydepth.InvalidHyperparameterError, match="lr must be finite and non-negative, got nan"):
        opt2.step()
    assert opt2.step_count == 0
    assert all(np.array_equal(before[p.name], bits(p.value)) for p in model2.parameters)


def test_state_dict_round_trip_continues_bit_for_bit():
    a = DecoderModel(CFG, SplitMix64(6))
    opt_a = AdamW(a.parameters, lr=warmup_cosine(1e-2, 2, 8))
    for s in range(3):
        accumulate(a, seed=s)
        opt_a.step()
    state = opt_a.state_dict()
    b = DecoderModel.from_parameters(CFG, [pydepth.NamedParameter(p.name, p.snapshot()) for p in a.parameters])
    opt_b = AdamW(b.parameters, lr=0.5, betas=(0.5, 0.5))
    opt_b.load_state_dict(state)
    assert opt_b.step_count == 3 and opt_b.hyperparameters() == opt_a.hyperparameters()
    for s in range(3, 6):
        for m, o in ((a, opt_a), (b, opt_b)):
            accumulate(m, seed=s)
            o.step()
    sa, sb = state_bits(a, opt_a), state_bits(b, opt_b)
    assert all(np.array_equal(sa[k], sb[k]) for k in sa)
    state["slots"]["final_norm.gain"]["exp_avg"][0] = 123.0  # a copy, not the live slot
    assert opt_a.slot("final_norm.gain", "exp_avg")[0] != 123.0


@pytest.mark.parametrize("corrupt,match", [
    (lambda s: s.update(optimizer="SGD"), "cannot load into AdamW"),
    (lambda s: s["parameters"].pop(), "covers parameters"),
    (lambda s: s["slots"]["final_norm.gain"].pop("exp_avg"), "must be exactly"),
    (lambda s: s["slots"]["final_norm.gain"].update(exp_avg=np.zeros(3)), "float64 of shape"),
    (lambda s: s["slots"]["final_norm.gain"].update(exp_avg=np.zeros(16, np.float32)), "float64 of shape"),
    (lambda s: s["slots"]["final_norm.gain"]["exp_avg_sq"].__setitem__(2, np.nan),
     "non-finite value nan at flat index 2"),
    (lambda s: s["slots"].update(extra={}), "unknown parameters"),
    (lambda s: s.update(step=-1), "step must be non-negative"),
    (lambda s: s.pop("hyperparameters"), "missing hyperparameters"),
])
def test_a_bad_optimizer_state_is_refused_and_changes_nothing(corrupt, match):
    model = DecoderModel(CFG, SplitMix64(6))
    opt = AdamW(model.parameters)
    accumulate(model)
    opt.step()
    state = opt.state_dict()
    corrupt(state)
    before = opt.state_dict()
    with pytest.raises(pydepth.OptimizerStateError, match=match):
        opt.load_state_dict(state)
    after = opt.state_dict()
    assert after["step"] == before["step"] and after["hyperparameters"] == before["hyperparameters"]
    for name, slots in before["slots"].items():
        for s, arr in slots.items():
            assert np.array_equal(bits(arr), bits(after["slots"][name][s]))


def test_the_private_step_entry_checks_its_buffers():
    model = DecoderModel(CFG, SplitMix64(1))
    raw = [p._p for p in model.parameters]
    with pytest.raises(pydepth._native._status.CoreError):
        pydepth._native._optim.optim_step("adamw", raw, [(np.zeros(1), np.zeros(1))] * len(raw),
                                 (1e-3, 0.9, 0.999, 1e-8, 0.0), 1)
    with pytest.raises(pydepth._native._status.CoreError):
        pydepth._native._optim.optim_step("adamw", raw, [()] * len(raw), (1e-3, 0.9, 0.999, 1e-8, 0.0), 1)
    with pytest.raises(pydepth._native._status.CoreError):
        pydepth._native._optim.optim_step("sgd", raw, [()] * len(raw), (1e-3, 0.0, 0.0), 0)
    with pytest.raises(TypeError):
        pydepth._native._optim.optim_step("sgd", [np.zeros(3)], [()], (1e-3, 0.0, 0.0), 1)
    shared = [np.zeros(p.size) for p in raw]
    with pytest.raises(pydepth._native._status.CoreError):  # one buffer as both moments would alias
        pydepth._native._optim.optim_step("adamw", raw, [(b, b) for b in shared], (1e-3, 0.9, 0.999, 1e-8, 0.0), 1)
    assert all(p.revision == 0 for p in model.parameters)
