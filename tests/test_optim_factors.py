# SPDX-License-Identifier: MIT
"""Per-parameter learning-rate, epsilon and weight-decay factors (docs/numerics-optimizers.md,
per-parameter factors): the documented order with each parameter's own scaled hyperparameters bit
for bit, the same bits as one optimizer per group, agreement with torch parameter groups, state
that carries the factors, and typed refusals that change nothing."""

import pickle

import numpy as np
import pytest

from pydepth import DecoderConfig, DecoderModel, InvalidHyperparameterError, SplitMix64
from pydepth.optim import SGD, AdamW
from conftest import load_helper, need_extra

_contract = load_helper("optim_contract.py")
adamw_contract = _contract.adamw_contract

CFG = DecoderConfig(64, 16, 2, 32, 2, 8)


def bits(a):
    return np.ascontiguousarray(a, dtype=np.float64).view(np.uint64)


def accumulate(model, seed=0):
    rng = np.random.default_rng(seed)
    ids, tg = (rng.integers(0, CFG.vocabulary_size, (2, CFG.max_positions)) for _ in range(2))
    model.zero_grad()
    model.loss(ids, tg).backward()






def depth_factors(model):
    """A CompleteP-like split: hidden matrices and block norms scaled, the rest not."""
    out = {}
    for p in model.parameters:
        if p.name.startswith("blocks.") and p.name.endswith(".weight"):
            out[p.name] = {"lr": 0.5**0.5, "eps": 0.25, "weight_decay": 3.0}
        elif p.name.startswith("blocks."):
            out[p.name] = {"lr": 0.7}
    return out


def test_adamw_with_factors_follows_the_documented_order_per_parameter_bit_for_bit():
    model = DecoderModel(CFG, SplitMix64(3))
    factors = depth_factors(model)
    lr, b1, b2, eps, wd = 1e-2, 0.9, 0.999, 1e-8, 0.1
    opt = AdamW(model.parameters, lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd, factors=factors)
    ref = {p.name: (p.snapshot(), np.zeros(p.shape), np.zeros(p.shape)) for p in model.parameters}
    for t in range(1, 4):
        accumulate(model, seed=t)
        grads = {p.name: p.grad.copy() for p in model.parameters}
        opt.step()
        for p in model.parameters:
            f = {"lr": 1.0, "eps": 1.0, "weight_decay": 1.0, **factors.get(p.name, {})}
            ref[p.name] = adamw_contract(
                *ref[p.name][:1],
                grads[p.name],
                *ref[p.name][1:],
                t,
                lr * f["lr"],
                b1,
                b2,
                eps * f["eps"],
                wd * f["weight_decay"],
            )
            assert np.array_equal(bits(p.value), bits(ref[p.name][0])), (t, p.name)
            assert np.array_equal(bits(opt.slot(p.name, "exp_avg_sq")), bits(ref[p.name][2]))


@pytest.mark.parametrize("kind", ["AdamW", "SGD"])
def test_factors_give_the_bits_of_one_optimizer_per_group(kind):
    one, split = DecoderModel(CFG, SplitMix64(4)), DecoderModel(CFG, SplitMix64(4))
    make = {
        "AdamW": lambda ps, f, lr, wd, eps=1e-8: AdamW(ps, lr=lr, eps=eps, weight_decay=wd, factors=f),
        "SGD": lambda ps, f, lr, wd, eps=None: SGD(ps, lr=lr, momentum=0.9, weight_decay=wd, factors=f),
    }[kind]
    fields = ("lr", "weight_decay") if kind == "SGD" else ("lr", "eps", "weight_decay")
    factors = {n: {k: v for k, v in row.items() if k in fields} for n, row in depth_factors(one).items()}
    opt = make(one.parameters, factors, 0.05, 0.01)
    groups = {}
    for p in split.parameters:
        row = factors.get(p.name, {})
        key = tuple(row.get(k, 1.0) for k in fields)
        groups.setdefault(key, []).append(p)
    opts = []
    for key, params in groups.items():
        f = dict(zip(fields, key))
        opts.append(
            make(
                params, None, 0.05 * f["lr"], 0.01 * f["weight_decay"], *([1e-8 * f["eps"]] if kind == "AdamW" else [])
            )
        )
    for t in range(3):
        for model in (one, split):
            accumulate(model, seed=t)
        opt.step()
        for o in opts:
            o.step()
    for a, b in zip(one.parameters, split.parameters):
        assert np.array_equal(bits(a.value), bits(b.value)), a.name
    assert len(groups) == 3


@pytest.mark.parametrize("kind", ["AdamW", "SGD"])
def test_factors_agree_with_torch_parameter_groups_like_the_unfactored_optimizers(kind):
    need_extra("torch")
    import torch

    model = DecoderModel(CFG, SplitMix64(5))
    fields = ("lr", "weight_decay") if kind == "SGD" else ("lr", "eps", "weight_decay")
    factors = {n: {k: v for k, v in row.items() if k in fields} for n, row in depth_factors(model).items()}
    hp = dict(lr=1e-2, weight_decay=0.1, **({"eps": 1e-8} if kind == "AdamW" else {"momentum": 0.9}))
    opt = (AdamW if kind == "AdamW" else SGD)(model.parameters, factors=factors, **hp)
    tparams = [torch.tensor(p.snapshot(), dtype=torch.float64) for p in model.parameters]
    groups = []
    for p, t in zip(model.parameters, tparams):
        row = factors.get(p.name, {})
        groups.append({"params": [t], **{k: hp[k] * row.get(k, 1.0) for k in fields}})
    topt = getattr(torch.optim, kind)(groups, foreach=False, **hp)
    for g, p in zip(topt.param_groups, model.parameters):
        want = opt._tensor_hparams(opt.lr, p.name)
        assert [bits(np.float64(g[k])) for k in fields] == [
            bits(np.float64(want[opt._fields.index(k)])) for k in fields
        ]
    for s in range(10):
        accumulate(model, seed=s)
        for p, t in zip(model.parameters, tparams):
            t.grad = torch.tensor(p.grad.copy())
        opt.step()
        topt.step()
    worst = max(
        float(np.max(np.abs(p.value - t.numpy())) / np.max(np.abs(t.numpy())))
        for p, t in zip(model.parameters, tparams)
    )
    assert worst <= 1e-13  # the tolerance of test_optim.py's torch agreement (FMA in torch's kernels)


def test_state_dict_carries_the_factors_and_a_resumed_run_continues_bit_for_bit():
    a, b = DecoderModel(CFG, SplitMix64(6)), DecoderModel(CFG, SplitMix64(6))
    factors = depth_factors(a)
    opt_a = AdamW(a.parameters, lr=1e-2, factors=factors)
    for s in range(2):
        accumulate(a, seed=s)
        opt_a.step()
    state = opt_a.state_dict()
    full = {n: {"lr": 1.0, "eps": 1.0, "weight_decay": 1.0, **row} for n, row in factors.items()}
    assert state["hyperparameters"]["factors"] == opt_a.factors == full
    b.load_state_dict(a.state_dict())
    opt_b = AdamW(b.parameters, lr=1e-2)
    opt_b.load_state_dict(pickle.loads(pickle.dumps(state)))
    assert opt_b.factors == full
    for model, opt in ((a, opt_a), (b, opt_b)):
        accumulate(model, seed=9)
        opt.step()
    assert all(np.array_equal(bits(p.value), bits(q.value)) for p, q in zip(a.parameters, b.parameters))


def test_factors_of_one_are_no_factors_and_leave_the_state_as_before():
    model = DecoderModel(CFG, SplitMix64(7))
    opt = AdamW(model.parameters, factors={p.name: {"lr": 1.0} for p in model.parameters})
    assert opt.factors == {} and "factors" not in opt.state_dict()["hyperparameters"]


@pytest.mark.parametrize(
    "factors,match",
    [
        ({"nope": {"lr": 2.0}}, "not a parameter"),
        ({"final_norm.gain": {"momentum": 2.0}}, "final_norm.gain"),
        ({"final_norm.gain": {"lr": -1.0}}, "finite and >= 0"),
        ({"final_norm.gain": {"lr": float("nan")}}, "finite and >= 0"),
        ({"final_norm.gain": {"weight_decay": 1e6}}, "lr\\*weight_decay"),
        ([("final_norm.gain", 2.0)], "factors must map"),
    ],
)
def test_bad_factors_are_refused_naming_the_parameter(factors, match):
    model = DecoderModel(CFG, SplitMix64(8))
    before = [p.snapshot() for p in model.parameters]
    with pytest.raises(InvalidHyperparameterError, match=match):
        AdamW(model.parameters, lr=1e-2, weight_decay=0.1, factors=factors)
    assert all(np.array_equal(bits(a), bits(p.value)) for a, p in zip(before, model.parameters))
