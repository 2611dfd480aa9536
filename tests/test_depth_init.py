# SPDX-License-Identifier: MIT
"""Depth-scaled initialization (docs/numerics.md §3.3): policy, budget, fresh preparation and completion,
construction records, restoration and construction states."""
import dataclasses
import json
import math
import struct
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pydepth
from pydepth import (AlreadyCompletedError, BudgetExceededError, DecoderConfig, DecoderModel,
                     DepthInitError, DepthInitializationBudget, DepthInitializationRecord,
                     DepthInitializedDecoder, DepthScaleError, DepthScalePolicy, Fresh,
                     FreshDepthInitialization, Initialized, InvalidFactorError,
                     ModifiedFreshParameterError, NamedParameter, NotFreshError,
                     RecordMismatchError, Restored, SplitMix64, ZeroDepthError,
                     initialize_depth_scaled)
from conftest import SEED, TARGETS, TOKENS

NARROW = {L: DecoderConfig(266, 4, 1, 4, L, 4) for L in (1, 2, 8)}
BRIDGE = DecoderConfig(266, 16, 2, 20, 2, 16)
ROOMY = DepthInitializationBudget(10**6, 64)


def bits_of(params):
    """name -> uint64 copy of the stored values."""
    return {p.name: p.value.view(np.uint64).copy() for p in params}


def assert_bits_equal(params, before):
    assert [p.name for p in params] == list(before)
    for p in params:
        assert np.array_equal(p.value.view(np.uint64), before[p.name]), p.name


def is_selected(name):
    return name.endswith(".attention.output.weight") or name.endswith(".ffn.down.weight")


def f64bits(x):
    return struct.pack(">d", x).hex()


# ---------------------------------------------------------------- policy


@pytest.mark.parametrize("depth", [1, 2, 3, 8, 12, 2**63])
def test_policy_factor_is_one_over_sqrt_depth(depth):
    policy = DepthScalePolicy(depth)
    assert policy.depth == depth
    assert f64bits(policy.factor) == f64bits(1.0 / math.sqrt(float(depth)))
    assert policy.policy_id == "residual-output-init-depth-v1"


def test_policy_zero_depth_refused():
    with pytest.raises(ZeroDepthError, match="0"):
        DepthScalePolicy(0)


@pytest.mark.parametrize("bad", [True, False, 2.0, "2", None, -1])
def test_policy_refuses_non_integer_and_negative(bad):
    with pytest.raises(DepthScaleError, match=repr(bad) if not isinstance(bad, int) or isinstance(bad, bool) else "-1"):
        DepthScalePolicy(bad)


def test_policy_invalid_factor_for_depth_beyond_float_range():
    with pytest.raises(InvalidFactorError):
        DepthScalePolicy(10**400)


def test_policy_selects_exact_names_only():
    policy = DepthScalePolicy(3)
    assert policy.selects("blocks.0.attention.output.weight")
    assert policy.selects("blocks.2.ffn.down.weight")
    for name in ["blocks.0.attention.query.weight", "blocks.0.attention.key.weight",
                 "blocks.0.attention.value.weight", "blocks.0.ffn.gate.weight",
                 "blocks.0.ffn.up.weight", "blocks.0.attention_norm.gain", "blocks.0.ffn_norm.gain",
                 "token_embedding.weight", "final_norm.gain",
                 "x.blocks.0.attention.output.weight", "blocks.0.attention.output.weight.x",
                 "decoy.attention.output.weight", "blocks.01.ffn.down.weight",
                 "blocks.3.ffn.down.weight", "blocks.-1.ffn.down.weight", ""]:
        assert not policy.selects(name), name


# ---------------------------------------------------------------- budget


@pytest.mark.parametrize("args", [(-1, 4), (4, -1), (True, 4), (4, 1.5), ("10", 4), (2**64, 4)])
def test_budget_validates_bounds(args):
    with pytest.raises(pydepth.InvalidBudgetError):
        DepthInitializationBudget(*args)


@pytest.mark.parametrize("cfg", [NARROW[1], NARROW[2], BRIDGE])
def test_budget_edges(cfg):
    count, positions = cfg.parameter_count, cfg.max_positions
    rng = SplitMix64(SEED)
    fresh = FreshDepthInitialization.prepare(cfg, DepthInitializationBudget(count, positions), rng)
    assert fresh.base_model.parameter_count == count
    for budget, numbers in [(DepthInitializationBudget(count - 1, positions), (count, count - 1)),
                            (DepthInitializationBudget(count, positions - 1), (positions, positions - 1))]:
        rng = SplitMix64(SEED)
        with pytest.raises(BudgetExceededError) as info:
            FreshDepthInitialization.prepare(cfg, budget, rng)
        assert f"{numbers[0]} " in str(info.value) and str(numbers[1]) in str(info.value)
        assert rng.state == SEED


def test_huge_configuration_refused_before_allocation():
    cfg = DecoderConfig(2_500_000_000_000, 4, 1, 4, 2, 4)
    assert cfg.parameter_count >= 10**13
    rng = SplitMix64(SEED)
    t0 = time.perf_counter()
    with pytest.raises(BudgetExceededError) as info:
        FreshDepthInitialization.prepare(cfg, DepthInitializationBudget(8304, 16), rng)
    assert time.perf_counter() - t0 < 0.5
    assert str(cfg.parameter_count) in str(info.value) and "8304" in str(info.value)
    assert rng.state == SEED


def test_zero_layers_refused_and_rng_untouched():
    rng = SplitMix64(SEED)
    with pytest.raises(ZeroDepthError):
        FreshDepthInitialization.prepare(DecoderConfig(266, 4, 1, 4, 0, 4), ROOMY, rng)
    assert rng.state == SEED


def test_prepare_type_checks():
    with pytest.raises(TypeError):
        FreshDepthInitialization.prepare(NARROW[2], (10**6, 64), SplitMix64(1))
    with pytest.raises(TypeError):
        FreshDepthInitialization.prepare(NARROW[2], ROOMY, 1)
    with pytest.raises(TypeError):
        FreshDepthInitialization()


# ---------------------------------------------------------------- prepare / complete


def plain(cfg, seed=SEED):
    rng = SplitMix64(seed)
    model = DecoderModel(cfg, rng)
    return model, rng.state


def test_prepare_leaves_rng_untouched_and_dropping_keeps_it():
    rng = SplitMix64(SEED)
    fresh = FreshDepthInitialization.prepare(NARROW[8], ROOMY, rng)
    assert rng.state == SEED
    base, _ = plain(NARROW[8])
    assert_bits_equal(fresh.base_model.parameters, bits_of(base.parameters))
    del fresh
    assert rng.state == SEED
    assert rng.next_u64() == SplitMix64(SEED).next_u64()


def test_depth_one_is_the_base_model_itself():
    cfg = NARROW[1]
    rng = SplitMix64(SEED)
    fresh = FreshDepthInitialization.prepare(cfg, ROOMY, rng)
    base = fresh.base_model
    base_params = base.parameters
    init = fresh.complete()
    assert init.model is base
    assert all(a is b for a, b in zip(init.model.parameters, base_params))
    reference, final = plain(cfg)
    assert rng.state == final
    assert_bits_equal(init.model.parameters, bits_of(reference.parameters))
    assert init.record.transformed_tensors == 0
    assert init.record.factor == 1.0
    # forward, loss and parameter gradients equal the existing constructor's, bit for bit
    for m in (init.model, reference):
        m.zero_grad()
        m.loss(TOKENS, TARGETS).backward()
    assert f64bits(init.model.loss(TOKENS, TARGETS).item()) == f64bits(reference.loss(TOKENS, TARGETS).item())
    for a, b in zip(init.model.parameters, reference.parameters):
        assert np.array_equal(a.grad.view(np.uint64), b.grad.view(np.uint64)), a.name


@pytest.mark.parametrize("cfg", [NARROW[2], NARROW[8], BRIDGE])
def test_depth_scaled_transform_is_exact(cfg):
    rng = SplitMix64(SEED)
    fresh = FreshDepthInitialization.prepare(cfg, ROOMY, rng)
    base = fresh.base_model
    before = bits_of(base.parameters)
    revisions = [p.revision for p in base.parameters]
    init = fresh.complete()
    factor = 1.0 / math.sqrt(float(cfg.layers))
    assert f64bits(init.record.factor) == f64bits(factor)
    assert init.model is not base
    selected = 0
    for b, p in zip(base.parameters, init.model.parameters):
        assert b is not p and b.name == p.name and b.shape == p.shape
        if is_selected(p.name):
            selected += 1
            expected = np.asarray(b.value) * factor  # one rounded multiply per element
            assert np.array_equal(p.value.view(np.uint64), expected.view(np.uint64)), p.name
            assert not np.array_equal(p.value, b.value)
        else:
            assert np.array_equal(p.value.view(np.uint64), b.value.view(np.uint64)), p.name
    assert selected == init.record.transformed_tensors == 2 * cfg.layers
    # the base model is unaffected by completion
    assert_bits_equal(base.parameters, before)
    assert [p.revision for p in base.parameters] == revisions
    # the caller's generator advanced exactly like the plain constructor
    assert rng.state == plain(cfg)[1]
    assert init.record.initial_rng_state == SEED and init.record.final_rng_state == rng.state
    assert init.record.policy_id == "residual-output-init-depth-v1"
    assert init.record.base_initializer_id == "xavier-uniform-splitmix64-v1"
    assert init.record.config == cfg


@pytest.mark.parametrize("layers", [1, 2])
def test_updated_base_parameter_refused(layers):
    rng = SplitMix64(SEED)
    fresh = FreshDepthInitialization.prepare(NARROW[layers], ROOMY, rng)
    p = fresh.base_model.parameter("blocks.0.ffn.up.weight")
    p.assign(p.snapshot())  # same values, but an update all the same
    before = bits_of(fresh.base_model.parameters)
    with pytest.raises(ModifiedFreshParameterError, match=r"blocks\.0\.ffn\.up\.weight"):
        fresh.complete()
    assert rng.state == SEED
    assert_bits_equal(fresh.base_model.parameters, before)
    with pytest.raises(ModifiedFreshParameterError):  # refusal did not consume the preparation
        fresh.complete()
    assert rng.state == SEED


@pytest.mark.parametrize("layers", [1, 8])
def test_nonzero_gradient_refused_zero_gradient_allowed(layers):
    rng = SplitMix64(SEED)
    fresh = FreshDepthInitialization.prepare(NARROW[layers], ROOMY, rng)
    base = fresh.base_model
    base.loss(TOKENS, TARGETS).backward()
    before = bits_of(base.parameters)
    with pytest.raises(ModifiedFreshParameterError, match=r"token_embedding\.weight"):
        fresh.complete()
    assert rng.state == SEED
    assert_bits_equal(base.parameters, before)
    base.zero_grad()
    init = fresh.complete()
    assert rng.state == plain(NARROW[layers])[1]
    assert init.record.transformed_tensors == (0 if layers == 1 else 2 * layers)


def test_second_complete_refused():
    rng = SplitMix64(SEED)
    fresh = FreshDepthInitialization.prepare(NARROW[2], ROOMY, rng)
    init = fresh.complete()
    after = rng.state
    params = bits_of(init.model.parameters)
    base = bits_of(fresh.base_model.parameters)
    with pytest.raises(AlreadyCompletedError):
        fresh.complete()
    assert rng.state == after
    assert_bits_equal(init.model.parameters, params)
    assert_bits_equal(fresh.base_model.parameters, base)


def test_caller_generator_advanced_after_prepare_refused():
    rng = SplitMix64(SEED)
    fresh = FreshDepthInitialization.prepare(NARROW[2], ROOMY, rng)
    rng.next_u64()
    moved = rng.state
    before = bits_of(fresh.base_model.parameters)
    with pytest.raises(DepthInitError, match=str(moved)):
        fresh.complete()
    assert rng.state == moved
    assert_bits_equal(fresh.base_model.parameters, before)


# ---------------------------------------------------------------- records and restoration


def completed(cfg=NARROW[8], seed=SEED):
    return FreshDepthInitialization.prepare(cfg, ROOMY, SplitMix64(seed)).complete()


@pytest.mark.parametrize("cfg", [NARROW[1], NARROW[8], BRIDGE])
def test_record_json_round_trip(cfg):
    record = completed(cfg).record
    d = json.loads(json.dumps(record.to_dict()))
    assert isinstance(d["initial_rng_state"], str) and int(d["final_rng_state"]) == record.final_rng_state
    assert d["factor_bits"] == f64bits(record.factor)
    again = DepthInitializationRecord.from_dict(d)
    assert again == record
    assert f64bits(again.factor) == f64bits(record.factor)
    with pytest.raises(dataclasses.FrozenInstanceError):
        again.factor = 1.0


def _mutated(d, **changes):
    d = json.loads(json.dumps(d))
    for key, value in changes.items():
        if value is KeyError:
            del d[key]
        else:
            d[key] = value
    return d


@pytest.mark.parametrize("changes, error", [
    (dict(factor=0.5), RecordMismatchError),                      # factor vs its bits
    (dict(factor=0.5, factor_bits=f64bits(0.5)), RecordMismatchError),  # factor vs policy
    (dict(factor_bits="XYZ"), ValueError),
    (dict(policy_id="residual-output-init-depth-v2"), RecordMismatchError),
    (dict(base_initializer_id="normal"), RecordMismatchError),
    (dict(transformed_tensors=15), RecordMismatchError),
    (dict(transformed_tensors="16"), ValueError),
    (dict(initial_rng_state=4701), ValueError),
    (dict(initial_rng_state="-1"), ValueError),
    (dict(initial_rng_state=str(2**64)), ValueError),
    (dict(initial_rng_state="4702"), RecordMismatchError),         # states inconsistent
    (dict(final_rng_state="0x10"), ValueError),
    (dict(config=[1, 2]), ValueError),
    (dict(config={"vocabulary_size": 266}), ValueError),
    (dict(format="other"), ValueError),
    (dict(factor=KeyError), ValueError),
    (dict(extra=1), ValueError),
])
def test_record_from_dict_refuses_bad_fields(changes, error):
    good = completed().record.to_dict()
    with pytest.raises(error):
        DepthInitializationRecord.from_dict(_mutated(good, **changes))


def test_record_with_other_layers_is_inconsistent():
    d = completed().record.to_dict()
    d["config"]["layers"] = 2  # factor and counts no longer match the configuration
    with pytest.raises(RecordMismatchError):
        DepthInitializationRecord.from_dict(d)


@pytest.mark.parametrize("cfg", [NARROW[1], NARROW[8], BRIDGE])
def test_restoration_is_exact_and_never_rescales(cfg):
    init = completed(cfg)
    record = DepthInitializationRecord.from_dict(json.loads(json.dumps(init.record.to_dict())))
    before = bits_of(init.model.parameters)
    restored = DepthInitializedDecoder.from_initialized_parameters(record, list(init.model.parameters))
    assert restored.record == init.record
    assert_bits_equal(restored.model.parameters, before)
    assert_bits_equal(init.model.parameters, before)  # inputs untouched
    assert all(a is not b for a, b in zip(restored.model.parameters, init.model.parameters))
    a = restored.model.loss(TOKENS, TARGETS).item()
    b = init.model.loss(TOKENS, TARGETS).item()
    assert f64bits(a) == f64bits(b)


def test_restoration_refuses_mismatches():
    init = completed(NARROW[8])
    params = list(init.model.parameters)
    before = bits_of(params)
    record = init.record
    other = completed(NARROW[2]).record
    cases = [
        (other, params, "tensors"),
        (record, params[:-1], "tensors"),
        (record, [params[1], params[0], *params[2:]], "named"),
        (record, [*params[:2], NamedParameter("blocks.0.attention.query.weight", np.zeros((4, 2))), *params[3:]],
         "shape"),
        (dataclasses.replace(record, factor=0.5), params, "factor"),
        (dataclasses.replace(record, policy_id="other"), params, "policy"),
        (dataclasses.replace(record, base_initializer_id="other"), params, "initializer"),
        (dataclasses.replace(record, transformed_tensors=0), params, "transformed"),
        (dataclasses.replace(record, final_rng_state=record.final_rng_state + 1), params, "state"),
        (record, [*params[:3], "not a parameter", *params[4:]], "NamedParameter"),
    ]
    for rec, ps, message in cases:
        with pytest.raises(RecordMismatchError, match=message):
            DepthInitializedDecoder.from_initialized_parameters(rec, ps)
        assert_bits_equal(params, before)
    bad = [NamedParameter(p.name, p.value) for p in params]
    poisoned = bad[5].snapshot()
    poisoned[0, 0] = np.nan
    bad[5]._p.assign(poisoned.reshape(-1))
    with pytest.raises(RecordMismatchError, match="non-finite"):
        DepthInitializedDecoder.from_initialized_parameters(record, bad)
    with pytest.raises(RecordMismatchError):
        DepthInitializedDecoder.from_initialized_parameters(record.to_dict(), params)


def test_restoration_config_with_other_rope_base_is_allowed_only_if_record_says_so():
    # the record's configuration is restored as recorded, not inferred from the parameters
    cfg = DecoderConfig(266, 4, 1, 4, 2, 4, rope_base=500.0)
    init = completed(cfg)
    restored = DepthInitializedDecoder.from_initialized_parameters(init.record, init.model.parameters)
    assert restored.model.config.rope_base == 500.0


# ---------------------------------------------------------------- construction states


def test_initialize_depth_scaled_accepts_only_fresh():
    rng = SplitMix64(SEED)
    init = initialize_depth_scaled(Fresh(NARROW[8], ROOMY, rng))
    expected = completed(NARROW[8])
    assert_bits_equal(init.model.parameters, bits_of(expected.model.parameters))
    assert rng.state == expected.record.final_rng_state
    restored = DepthInitializedDecoder.from_initialized_parameters(init.record, init.model.parameters)
    for source in (Initialized(init), Restored(restored)):
        state = rng.state
        before = bits_of(source.init.model.parameters)
        with pytest.raises(NotFreshError, match=type(source).__name__):
            initialize_depth_scaled(source)
        assert rng.state == state
        assert_bits_equal(source.init.model.parameters, before)
    with pytest.raises(NotFreshError):
        initialize_depth_scaled(init)


def test_fresh_refusal_through_initialize_leaves_rng():
    rng = SplitMix64(SEED)
    with pytest.raises(BudgetExceededError):
        initialize_depth_scaled(Fresh(NARROW[8], DepthInitializationBudget(2027, 4), rng))
    assert rng.state == SEED


# ---------------------------------------------------------------- worked values


def test_worked_vector_matches_published(published_tables):
    from pydepth.chapter.demo import worked_values
    w = worked_values()
    pub = published_tables["worked_values"]
    vector = np.array(pub["vector"], dtype=np.float64)
    assert w["vector"] == pub["vector"] and w["depths"] == pub["depths"]
    for depth in pub["depths"]:
        key = str(depth)
        actual = np.array(w["selected"][key])
        assert [round(v, 6) for v in actual] == pub["selected_rounded"][key]
        expected = vector if depth == 1 else vector * (1.0 / math.sqrt(float(depth)))
        assert np.array_equal(actual.view(np.uint64), expected.view(np.uint64))
        assert w["xavier_4x4"][key]["half_bound"] == pub["xavier_4x4"][key]["half_bound"]
        assert w["xavier_4x4"][key]["variance"] == pub["xavier_4x4"][key]["variance"]
        assert math.isclose(w["xavier_4x4"][key]["half_bound_value"], math.sqrt(3 / (4 * depth)), rel_tol=1e-15)
        assert math.isclose(w["xavier_4x4"][key]["variance_value"], 1 / (4 * depth), rel_tol=1e-15)
    assert w["query_vector_unchanged"] == pub["query_vector_unchanged"]


# ---------------------------------------------------------------- property test


@st.composite
def small_configs(draw):
    width = draw(st.sampled_from([2, 4, 6, 8]))
    heads = draw(st.sampled_from([h for h in range(1, width + 1) if width % h == 0 and (width // h) % 2 == 0]))
    kv = draw(st.sampled_from([k for k in range(1, heads + 1) if heads % k == 0]))
    return DecoderConfig(draw(st.integers(1, 40)), width, heads, draw(st.integers(1, 8)),
                         draw(st.integers(1, 12)), draw(st.integers(1, 8)), kv_heads=kv)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cfg=small_configs(), seed=st.integers(0, 2**64 - 1))
def test_random_configs_consume_rng_like_plain_constructor(cfg, seed):
    rng = SplitMix64(seed)
    budget = DepthInitializationBudget(cfg.parameter_count, cfg.max_positions)
    fresh = FreshDepthInitialization.prepare(cfg, budget, rng)
    assert rng.state == seed
    base = bits_of(fresh.base_model.parameters)
    init = fresh.complete()
    reference = SplitMix64(seed)
    DecoderModel(cfg, reference)
    assert rng.state == reference.state == init.record.final_rng_state
    assert init.record.transformed_tensors == (0 if cfg.layers == 1 else 2 * cfg.layers)
    factor = 1.0 / math.sqrt(float(cfg.layers))
    for p in init.model.parameters:
        expected = base[p.name].view(np.float64)
        if is_selected(p.name) and cfg.layers > 1:
            expected = expected * factor
        assert np.array_equal(p.value.view(np.uint64), expected.view(np.uint64)), p.name
    assert DepthInitializationRecord.from_dict(json.loads(json.dumps(init.record.to_dict()))) == init.record


def test_at_32_blocks_the_depth_scaled_models_largest_adjoint_ratio_is_below_its_controls_in_every_seed():
    # the README's comparison and docs/depth-policy.md state this; one short draw can go the other way
    cfg = DecoderConfig(266, 16, 2, 20, 32, 16)
    rows = np.random.default_rng(0).integers(0, 266, size=(4, 17))
    for seed in range(5):
        fresh = FreshDepthInitialization.prepare(cfg, DepthInitializationBudget.for_config(cfg), SplitMix64(seed))
        control = fresh.base_model.clone()
        ratios = []
        for model in (fresh.complete().model, control):
            fwd = model.forward(rows[:, :-1])
            ratios.append(pydepth.observe_residual_health(model, fwd, fwd.loss(rows[:, 1:]),
                                                          accumulate_gradients=False).adjoint_ratio_range[1])
        assert ratios[0] < ratios[1], (seed, ratios)
