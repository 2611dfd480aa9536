# SPDX-License-Identifier: MIT
"""build_parametrized: a native model and AdamW from a parametrization's name. The chapter row
builds today's depth-initialized model in every bit; every row's init factors, branch multipliers
and optimizer factors are the table's; a few AdamW steps train at two depths; the record names the
parametrization; bad input is refused before anything is drawn."""

import json

import numpy as np
import pytest

from pydepth import (
    DecoderConfig,
    DepthInitializationBudget,
    Fresh,
    GeneratorStateError,
    ParametrizationError,
    SplitMix64,
    ZeroDepthError,
    initialize_depth_scaled,
)
from pydepth.parametrizations import PARAMETRIZATIONS, get_parametrization, parameter_group
from pydepth.parametrizations import build_parametrized

DEPTHS = (2, 6)


def config(layers):
    return DecoderConfig(64, 16, 2, 32, layers, 8)


def bits(a):
    return np.ascontiguousarray(a, dtype=np.float64).reshape(-1).view(np.uint64)


def batch(seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 64, (2, 8)), rng.integers(0, 64, (2, 8))


@pytest.mark.parametrize("layers", (1, *DEPTHS))
def test_the_chapter_row_builds_todays_depth_initialized_model_in_every_bit(layers):
    cfg = config(layers)
    built = build_parametrized(cfg, "chapter", seed=17, lr=1e-3)
    today = initialize_depth_scaled(Fresh(cfg, DepthInitializationBudget.for_config(cfg), SplitMix64(17)))
    for p, q in zip(built.model.parameters, today.model.parameters):
        assert p.name == q.name and np.array_equal(bits(p.value), bits(q.value)), p.name
    assert built.model.branch_multipliers == (1.0,) * layers
    assert built.optimizer.factors == {}
    assert built.record.final_rng_state == today.record.final_rng_state


@pytest.mark.parametrize("name", list(PARAMETRIZATIONS))
@pytest.mark.parametrize("layers", DEPTHS)
def test_every_row_sets_the_tables_init_factors_branch_multipliers_and_optimizer_factors(name, layers):
    cfg = config(layers)
    row = get_parametrization(name)
    built = build_parametrized(cfg, name, seed=3, lr=1e-3, weight_decay=0.01, eps=1e-8)
    base = build_parametrized(cfg, "standard", seed=3, lr=1e-3).model
    for p, q in zip(built.model.parameters, base.parameters):
        parts = p.name.split(".")
        scaled = p.name.endswith(("attention.output.weight", "ffn.down.weight"))
        f = row.init_factor(layers, int(parts[1])) if scaled else 1.0
        want = q.value if f == 1.0 else q.value * f
        assert np.array_equal(bits(p.value), bits(want)), p.name
    assert built.model.branch_multipliers == (row.branch_multiplier(layers),) * layers
    for p in built.model.parameters:
        g = parameter_group(p.name)
        want = {
            "lr": row.lr_factor(layers, g),
            "eps": row.epsilon_factor(layers, g),
            "weight_decay": row.weight_decay_factor(layers, g),
        }
        got = built.optimizer.factors.get(p.name, {"lr": 1.0, "eps": 1.0, "weight_decay": 1.0})
        assert got == want, p.name
    assert built.record.parametrization == name and built.record.source == row.source


@pytest.mark.parametrize("name", ["chapter", "depth-mup", "completep", "torchtitan"])
def test_a_few_adamw_steps_lower_the_loss_at_two_depths_and_rerun_bit_for_bit(name):
    for layers in DEPTHS:
        runs = []
        for _ in range(2):
            model, opt = build_parametrized(config(layers), name, seed=5, lr=3e-3)
            losses = []
            for step in range(4):
                ids, tg = batch(step % 2)
                model.zero_grad()
                loss = model.loss(ids, tg)
                loss.backward()
                opt.step()
                losses.append(loss.item())
            runs.append((losses, [p.value.copy() for p in model.parameters]))
        assert runs[0][0][2] < runs[0][0][0], (name, layers, runs[0][0])  # the same batch, two steps later
        assert runs[0][0] == runs[1][0]
        assert all(np.array_equal(bits(a), bits(b)) for a, b in zip(runs[0][1], runs[1][1]))


def test_the_record_names_the_parametrization_and_round_trips_through_json():
    built = build_parametrized(config(6), "completep", seed=9, lr=2e-3, weight_decay=0.1)
    d = json.loads(json.dumps(built.record.to_dict()))
    assert d["parametrization"] == "completep" and d["layers"] == 6 and d["seed"] == "9"
    assert d["branch_multipliers"] == [get_parametrization("completep").branch_multiplier(6)] * 6
    assert d["group_factors"]["hidden"]["eps"] == get_parametrization("completep").epsilon_factor(6, "hidden")


@pytest.mark.parametrize(
    "name,seed,error",
    [
        ("mup", 1, ParametrizationError),
        ("chapter", -1, GeneratorStateError),
        ("chapter", 1.5, GeneratorStateError),
    ],
)
def test_bad_input_is_refused_with_a_typed_error(name, seed, error):
    with pytest.raises(error):
        build_parametrized(config(2), name, seed=seed, lr=1e-3)


def test_zero_blocks_are_refused_like_the_depth_policy():
    with pytest.raises(ZeroDepthError):
        build_parametrized(config(0), "completep", seed=1, lr=1e-3)


def test_a_checkpoint_of_a_built_model_resumes_bit_for_bit_with_multipliers_and_factors(tmp_path):
    from pydepth import checkpoint

    model, opt = build_parametrized(config(4), "completep-0.5", seed=2, lr=3e-3, weight_decay=0.01)
    for step in range(2):
        ids, tg = batch(step)
        model.zero_grad()
        model.loss(ids, tg).backward()
        opt.step()
    checkpoint.save(tmp_path / "c.safetensors", model, optimizer=opt, step=opt.step_count)
    back = checkpoint.load(tmp_path / "c.safetensors")
    model2, opt2 = back.model, back.optimizer()
    assert model2.branch_multipliers == model.branch_multipliers and opt2.factors == opt.factors
    for m, o in ((model, opt), (model2, opt2)):
        ids, tg = batch(7)
        m.zero_grad()
        m.loss(ids, tg).backward()
        o.step()
    assert all(np.array_equal(bits(p.value), bits(q.value)) for p, q in zip(model.parameters, model2.parameters))
