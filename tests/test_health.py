# SPDX-License-Identifier: MIT
"""Residual health observer: reference RMS values, padding, error paths,
classification and the no-side-effect guarantee."""
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import pydepth
from pydepth import (HEALTH_BAND, Batch, DecoderConfig, DecoderModel, DepthHealthReport,
                     DepthInitializationBudget, EmptyValidityError, FreshDepthInitialization,
                     InvalidGeometryError, InvalidNormalizerError, MissingAdjointError,
                     ModelForwardMismatchError, NamedParameter, NonFiniteValueError, RatioBand,
                     SplitMix64, classify_ratio, observe_residual_health)
from pydepth.health import valid_feature_rms
from conftest import SEED, TARGETS, TOKENS, from_hex


def decode(hexes):
    return from_hex(hexes).view(np.float64)


def sequential_rms(x):
    s = 0.0
    for v in (np.asarray(x, dtype=np.float64) ** 2).reshape(-1).tolist():
        s = s + v
    return math.sqrt(s / float(np.asarray(x).size))


def initialized(cfg, seed=SEED):
    rng = SplitMix64(seed)
    fresh = FreshDepthInitialization.prepare(
        cfg, DepthInitializationBudget(cfg.parameter_count, cfg.max_positions), rng)
    control = fresh.base_model.clone()
    return fresh.complete().model, control


def observe(model, tokens=TOKENS, targets=TARGETS):
    """The observation a training step makes: its reverse pass also accumulates gradients."""
    fwd = model.forward(tokens)
    loss = fwd.loss(targets)
    return observe_residual_health(model, fwd, loss, accumulate_gradients=True)


def grad_bits(model):
    return [p.grad.view(np.uint64).copy() for p in model.parameters]


def narrow(layers=2):
    return initialized(DecoderConfig(266, 4, 1, 4, layers, 4))[0]


# ---------------------------------------------------------------- reference trace


@pytest.mark.parametrize("index", [0, 1, 2])
@pytest.mark.parametrize("variant", ["initialized", "same_base_unscaled_control"])
def test_rms_matches_reference_trace(reference_trace, index, variant):
    fx = reference_trace["fixtures"][index]
    cfg = DecoderConfig.from_dict(fx["config"])
    shape = tuple(fx["token_shape"])
    tokens = np.array(fx["tokens"]).reshape(shape)
    targets = np.array(fx["targets"]).reshape(shape)
    init, control = initialized(cfg, fx["seed"])
    model = init if variant == "initialized" else control
    trace = fx[variant]
    # the model's stored parameters are the reference's (docs/numerics.md §3)
    for p, ref in zip(model.parameters, trace["parameters"]):
        assert p.name == ref["name"]
        assert np.array_equal(p.value.reshape(-1).view(np.uint64), decode(ref["bits"]).view(np.uint64)), p.name
    model.zero_grad()
    report = observe(model, tokens, targets)
    want_a = decode(trace["site_activation_rms"])
    want_g = decode(trace["site_adjoint_rms"])
    assert len(report.sites) == len(want_a) == 2 * cfg.layers + 1
    for row, a, g in zip(report.sites, want_a, want_g):
        assert abs(row.activation_rms - a) <= 1e-13 * abs(a), row.label
        assert abs(row.adjoint_rms - g) <= 1e-13 * abs(g), row.label
    assert report.input_activation_normalizer == report.sites[0].activation_rms
    assert report.terminal_adjoint_normalizer == report.sites[-1].adjoint_rms
    assert report.valid_positions == tokens.size and report.width == cfg.model_width
    # observation's reverse pass is the ordinary one: gradients equal the reference's bits
    for p, ref in zip(model.parameters, trace["parameter_gradients"]):
        assert np.array_equal(p.grad.reshape(-1).view(np.uint64), decode(ref["bits"]).view(np.uint64)), p.name


# ---------------------------------------------------------------- side effects


@pytest.mark.parametrize("layers", [1, 2, 8])
def test_accumulating_observation_leaves_gradients_equal_to_plain_backward(layers):
    model = narrow(layers)
    twin = model.clone()
    values = [p.value.view(np.uint64).copy() for p in model.parameters]
    revisions = [p.revision for p in model.parameters]
    observe(model)
    twin.loss(TOKENS, TARGETS).backward()
    for a, b in zip(grad_bits(model), grad_bits(twin)):
        assert np.array_equal(a, b)
    assert any(np.any(g != 0) for g in grad_bits(model))
    assert [p.revision for p in model.parameters] == revisions
    for p, v in zip(model.parameters, values):
        assert np.array_equal(p.value.view(np.uint64), v)


def test_accumulating_observation_draws_nothing_and_accumulates_like_backward():
    model = narrow(2)
    twin = model.clone()
    observe(model)
    observe(model)
    twin.loss(TOKENS, TARGETS).backward()
    twin.loss(TOKENS, TARGETS).backward()
    for a, b in zip(grad_bits(model), grad_bits(twin)):
        assert np.array_equal(a, b)


# ---------------------------------------------------------------- padding


def test_padded_batch_gives_the_unpadded_report():
    cfg = DecoderConfig(266, 16, 2, 20, 2, 16)
    model, _ = initialized(cfg)
    plain = observe(model).to_dict()
    model.zero_grad()
    # one valid segment, then out-of-vocabulary padding, and a row of padding only
    tokens = np.array([[0, 99, 100, 101, -1, -1], [-1] * 6])
    targets = np.array([[99, 100, 101, 1, -1, -1], [-1] * 6])
    segments = np.array([[0, 0, 0, 0, -1, -1], [-1] * 6])
    batch = Batch(tokens, targets, segments)
    fwd = model.forward(batch)
    loss = fwd.loss()
    padded = observe_residual_health(model, fwd, loss).to_dict()
    assert padded == plain
    assert padded["valid_positions"] == 4


def test_rms_helper_skips_nan_and_inf_at_invalid_positions():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 5, 4))
    valid = np.array([[True, True, False, True, False], [False, True, True, False, False]])
    poisoned = x.copy()
    poisoned[~valid] = np.nan
    poisoned[1, 0, 2] = np.inf
    expected = sequential_rms(x[valid])
    assert valid_feature_rms(poisoned, valid) == expected
    assert valid_feature_rms(x, valid) == expected
    with pytest.raises(NonFiniteValueError, match=r"\(1, 2\)"):
        bad = x.copy()
        bad[1, 2, 3] = np.nan
        valid_feature_rms(bad, valid)


@settings(max_examples=80, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=3, max_dims=3, max_side=6),
                  elements=st.floats(-1e6, 1e6, allow_nan=False, width=64).filter(
                      lambda v: v == 0.0 or abs(v) >= 1e-100)))
def test_rms_helper_is_the_sequential_reference_formula(x):
    valid = np.ones(x.shape[:2], dtype=bool)
    got = valid_feature_rms(x, valid)
    if np.all(x == 0):
        assert got == 0.0
    else:
        assert got == sequential_rms(x)


def test_rms_helper_survives_overflow_and_underflow():
    valid = np.ones((1, 3), dtype=bool)
    big = np.full((1, 3, 4), 1e200)
    assert valid_feature_rms(big, valid) == pytest.approx(1e200, rel=1e-15)
    tiny = np.full((1, 3, 4), 3e-200)
    assert valid_feature_rms(tiny, valid) == pytest.approx(3e-200, rel=1e-15)
    mixed = np.array([[[1e300, -1e300], [1e-300, 0.0], [0.0, 0.0]]])
    assert valid_feature_rms(mixed, valid) == pytest.approx(1e300 / math.sqrt(3.0), rel=1e-15)
    assert valid_feature_rms(np.zeros((1, 3, 4)), valid) == 0.0


# ---------------------------------------------------------------- errors


def test_forward_from_another_model_refused():
    model = narrow(2)
    other = narrow(2)
    fwd = other.forward(TOKENS)
    loss = fwd.loss(TARGETS)
    with pytest.raises(ModelForwardMismatchError):
        observe_residual_health(model, fwd, loss)
    assert all(np.all(g == 0) for g in grad_bits(model) + grad_bits(other))


def test_forward_of_other_depth_refused():
    model = narrow(2)
    other = narrow(1)
    fwd = other.forward(TOKENS)
    with pytest.raises(ModelForwardMismatchError, match="2 blocks"):
        observe_residual_health(model, fwd, fwd.loss(TARGETS))


@pytest.mark.parametrize("valid, error, message", [
    (np.ones((1, 3), dtype=bool), InvalidGeometryError, r"\(1, 3\)"),
    (np.ones((4,), dtype=bool), InvalidGeometryError, r"\(4,\)"),
    (np.ones((1, 4), dtype=np.int64), InvalidGeometryError, "int64"),
    (np.zeros((1, 4), dtype=bool), EmptyValidityError, r"\(1, 4\)"),
])
def test_validity_mask_errors(valid, error, message):
    model = narrow(2)
    fwd = model.forward(TOKENS)
    loss = fwd.loss(TARGETS)
    with pytest.raises(error, match=message):
        observe_residual_health(model, fwd, loss, valid)
    assert all(np.all(g == 0) for g in grad_bits(model))


def test_mask_may_not_select_padding():
    model, _ = initialized(DecoderConfig(266, 4, 1, 4, 2, 4))
    batch = Batch(np.array([[0, 99, 100, -1]]), np.array([[99, 100, 101, -1]]), np.array([[0, 0, 0, -1]]))
    fwd = model.forward(batch)
    loss = fwd.loss()
    with pytest.raises(InvalidGeometryError, match=r"\[0, 3\]"):
        observe_residual_health(model, fwd, loss, np.ones((1, 4), dtype=bool))
    assert all(np.all(g == 0) for g in grad_bits(model))


def test_subset_mask_observes_only_those_positions():
    model = narrow(2)
    fwd = model.forward(TOKENS)
    loss = fwd.loss(TARGETS)
    mask = np.array([[True, False, True, True]])
    sites = list(fwd.residual_sites)
    values = [np.array(s.value) for s in sites]
    report = observe_residual_health(model, fwd, loss, mask)
    assert report.valid_positions == 3
    for row, v in zip(report.sites, values):
        assert row.activation_rms == sequential_rms(v[mask])


def test_loss_of_another_record_refused_before_backward():
    model = narrow(2)
    fwd = model.forward(TOKENS)
    fwd.loss(TARGETS)
    other = model.forward(TOKENS).loss(TARGETS)
    with pytest.raises(MissingAdjointError, match="site 0"):
        observe_residual_health(model, fwd, other)
    assert all(np.all(g == 0) for g in grad_bits(model))


def test_missing_adjoint_and_adjoint_geometry(monkeypatch):
    model = narrow(2)
    fwd = model.forward(TOKENS)
    loss = fwd.loss(TARGETS)
    real = pydepth.GraphValue._reverse

    def altering(change):
        """_reverse with the observer's checks seeing the adjoints after change(adjoints)."""
        def reverse(self, selected, *, decide, **kw):
            return real(self, selected, decide=lambda adjoints: decide(change(adjoints)), **kw)
        return reverse

    def drop_site_three(adjoints):
        adjoints[3] = None
        return adjoints

    monkeypatch.setattr(pydepth.GraphValue, "_reverse", altering(drop_site_three))
    with pytest.raises(MissingAdjointError, match=r"site 3 .block\.1\.after_attention"):
        observe_residual_health(model, fwd, loss)
    assert all(np.all(g == 0) for g in grad_bits(model))

    def reshape_site_one(adjoints):
        adjoints[1] = adjoints[1].reshape(-1)
        return adjoints

    monkeypatch.setattr(pydepth.GraphValue, "_reverse", altering(reshape_site_one))
    fwd = model.forward(TOKENS)
    with pytest.raises(InvalidGeometryError, match="site 1"):
        observe_residual_health(model, fwd, fwd.loss(TARGETS))
    assert all(np.all(g == 0) for g in grad_bits(model))


def _with(model, name, values):
    params = [NamedParameter(p.name, values if p.name == name else p.value) for p in model.parameters]
    return DecoderModel.from_parameters(model.config, params)


def test_zero_input_normalizer_refused_before_backward():
    model = narrow(2)
    emb = model.parameter("token_embedding.weight").snapshot()
    emb[TOKENS[0]] = 0.0
    zeroed = _with(model, "token_embedding.weight", emb)
    fwd = zeroed.forward(TOKENS)
    loss = fwd.loss(TARGETS)
    with pytest.raises(InvalidNormalizerError, match=r"A_0 is 0\.0"):
        observe_residual_health(zeroed, fwd, loss)
    assert all(np.all(g == 0) for g in grad_bits(zeroed))


def test_zero_terminal_adjoint_normalizer_refused():
    model = narrow(2)
    zeroed = _with(model, "final_norm.gain", np.zeros(4))
    fwd = zeroed.forward(TOKENS)
    with pytest.raises(InvalidNormalizerError, match="G_2L"):
        observe_residual_health(zeroed, fwd, fwd.loss(TARGETS))


def test_type_checks():
    model = narrow(2)
    fwd = model.forward(TOKENS)
    loss = fwd.loss(TARGETS)
    with pytest.raises(TypeError):
        observe_residual_health("model", fwd, loss)
    with pytest.raises(TypeError):
        observe_residual_health(model, loss, loss)
    with pytest.raises(TypeError):
        observe_residual_health(model, fwd, 1.0)


# ---------------------------------------------------------------- classification


def test_band_and_boundaries():
    assert HEALTH_BAND == (0.01, 100.0)
    assert classify_ratio(0.01) is RatioBand.WITHIN
    assert classify_ratio(100.0) is RatioBand.WITHIN
    assert classify_ratio(1) is RatioBand.WITHIN
    assert classify_ratio(np.nextafter(0.01, 0.0)) is RatioBand.BELOW
    assert classify_ratio(np.nextafter(100.0, math.inf)) is RatioBand.ABOVE
    assert classify_ratio(0.0) is RatioBand.BELOW
    assert classify_ratio(-5.0) is RatioBand.BELOW
    assert classify_ratio(101) is RatioBand.ABOVE
    assert classify_ratio(0.001) is RatioBand.BELOW
    assert classify_ratio(100.0000001) is RatioBand.ABOVE
    assert [b.value for b in RatioBand] == ["within", "below", "above"]


@pytest.mark.parametrize("x", [math.nan, math.inf, -math.inf])
def test_classify_non_finite(x):
    with pytest.raises(NonFiniteValueError):
        classify_ratio(x)


def test_classify_refuses_non_numbers():
    for x in (True, "1", None):
        with pytest.raises(TypeError):
            classify_ratio(x)


# ---------------------------------------------------------------- report


def test_report_shape_labels_and_serialization():
    model = narrow(8)
    report = observe(model)
    assert isinstance(report, DepthHealthReport)
    labels = [r.label for r in report.sites]
    assert labels[0] == "input" and len(labels) == 17
    assert labels[1] == "block.0.after_attention" and labels[2] == "block.0.after_feed_forward"
    assert labels[16] == "block.7.after_feed_forward"
    assert [r.site for r in report.sites] == list(range(17))
    for r in report.sites:
        assert r.activation_ratio == r.activation_rms / report.input_activation_normalizer
        assert r.adjoint_ratio == r.adjoint_rms / report.terminal_adjoint_normalizer
        assert r.activation_status is classify_ratio(r.activation_ratio)
    assert report.sites[0].activation_ratio == 1.0 and report.sites[-1].adjoint_ratio == 1.0
    assert len(report.branches) == 8
    assert report.branches[3].attention_norm_gain == tuple(model.parameter("blocks.3.attention_norm.gain").value)
    assert report.final_norm_gain == (1.0,) * 4
    assert report.within_band
    d = json.loads(json.dumps(report.to_dict()))
    assert d["within_band"] is True and d["sites"][5]["activation_status"] == "within"
    assert d["activation_ratio_max"] == max(r.activation_ratio for r in report.sites)
    assert d["sites"][4]["adjoint_rms"] == report.sites[4].adjoint_rms
    text = report.to_table("title")
    assert "block.7.after_feed_forward" in text and f"{report.sites[3].activation_rms:.4g}" in text


def test_within_band_false_when_a_ratio_leaves(monkeypatch):
    monkeypatch.setattr(pydepth.health, "HEALTH_BAND", (0.01, 5.0))
    report = observe(narrow(2))
    assert not report.within_band
    assert RatioBand.ABOVE in {r.activation_status for r in report.sites}
