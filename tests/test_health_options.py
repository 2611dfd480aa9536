# SPDX-License-Identifier: MIT
"""Residual health options: a caller-chosen band recorded in the report, the gradient-accumulating
observer mode, and the report builders other observers (the PyTorch bridge) call."""
import math

import numpy as np
import pytest

import pydepth
from pydepth import (HEALTH_BAND, DecoderConfig, DecoderModel, DepthInitializationBudget,
                     FreshDepthInitialization, InvalidBandError, InvalidGeometryError,
                     InvalidNormalizerError, NamedParameter, NonFiniteValueError, RatioBand,
                     SplitMix64, classify_ratio, observe_residual_health)
from pydepth.health import check_band, health_report_from_rms, health_report_from_sites

TOKENS = np.array([[0, 99, 100, 101]])
TARGETS = np.array([[99, 100, 101, 1]])


def narrow(layers=2, seed=4701):
    cfg = DecoderConfig(266, 4, 1, 4, layers, 4)
    rng = SplitMix64(seed)
    return FreshDepthInitialization.prepare(cfg, DepthInitializationBudget.for_config(cfg), rng).complete().model


def grad_bits(model):
    return [p.grad.view(np.uint64).copy() for p in model.parameters]


def same_bits(a, b):
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


def report_bits(report):
    return np.array([[r.activation_rms, r.adjoint_rms, r.activation_ratio, r.adjoint_ratio]
                     for r in report.sites]).view(np.uint64)


# ---------------------------------------------------------------- band argument


def test_classify_ratio_uses_a_given_band_inclusively():
    band = (1.0, 2.0)
    assert classify_ratio(np.nextafter(1.0, 0.0), band) is RatioBand.BELOW
    assert classify_ratio(1.0, band) is RatioBand.WITHIN
    assert classify_ratio(2.0, band=band) is RatioBand.WITHIN
    assert classify_ratio(np.nextafter(2.0, 3.0), band) is RatioBand.ABOVE
    assert classify_ratio(50.0, band) is RatioBand.ABOVE and classify_ratio(50.0) is RatioBand.WITHIN
    assert classify_ratio(0.0, (0.0, 0.0)) is RatioBand.WITHIN


@pytest.mark.parametrize("band", [(2.0, 1.0), (math.nan, 1.0), (0.0, math.inf), (-1.0, 1.0), (1.0,),
                                  (1.0, 2.0, 3.0), "ab", 5.0, (True, 2.0), ("0", 1.0)])
def test_bad_band_is_refused_naming_it(band):
    with pytest.raises(InvalidBandError) as info:
        classify_ratio(1.0, band)
    assert isinstance(info.value, pydepth.PydepthError) and isinstance(info.value, ValueError)
    assert str(info.value)


def test_default_band_is_the_chapters():
    assert check_band() == HEALTH_BAND == (0.01, 100.0)
    assert check_band(np.array([0.5, 3])) == (0.5, 3.0)


def test_observer_records_and_applies_its_band():
    model = narrow(8)
    fwd = model.forward(TOKENS)
    default = observe_residual_health(model, fwd, fwd.loss(TARGETS))
    assert default.band == HEALTH_BAND and default.to_dict()["band"] == [0.01, 100.0]
    fwd = model.forward(TOKENS)
    tight = observe_residual_health(model, fwd, fwd.loss(TARGETS), band=(0.5, 1.5))
    assert tight.band == (0.5, 1.5) and tight.to_dict()["band"] == [0.5, 1.5]
    assert "band [0.5, 1.5] inclusive" in tight.to_table()
    assert np.array_equal(report_bits(tight), report_bits(default))  # the band changes classes only
    for r in tight.sites:
        assert r.activation_status is classify_ratio(r.activation_ratio, (0.5, 1.5))
        assert r.adjoint_status is classify_ratio(r.adjoint_ratio, (0.5, 1.5))
    assert default.within_band and not tight.within_band


def test_bad_band_refused_before_the_reverse_pass():
    model = narrow(2)
    fwd = model.forward(TOKENS)
    with pytest.raises(InvalidBandError, match=r"\(5.0, 1.0\)"):
        observe_residual_health(model, fwd, fwd.loss(TARGETS), band=(5.0, 1.0))
    assert all(np.all(g == 0) for g in grad_bits(model))


# ---------------------------------------------------------------- gradients


def test_observation_accumulates_like_backward_when_asked():
    observed, plain = narrow(2), narrow(2)
    fwd = observed.forward(TOKENS)
    observe_residual_health(observed, fwd, fwd.loss(TARGETS), accumulate_gradients=True)
    plain.forward(TOKENS).loss(TARGETS).backward()
    assert same_bits(grad_bits(observed), grad_bits(plain))
    assert any(np.any(g != 0) for g in grad_bits(observed))


def test_default_observation_leaves_gradients_untouched():
    model = narrow(2)
    model.forward(TOKENS).loss(TARGETS).backward()  # non-zero gradients the caller owns
    before = grad_bits(model)
    fwd = model.forward(TOKENS)
    kept = observe_residual_health(model, fwd, fwd.loss(TARGETS))
    assert same_bits(grad_bits(model), before)
    fwd = model.forward(TOKENS)
    accumulated = observe_residual_health(model, fwd, fwd.loss(TARGETS), accumulate_gradients=True)
    assert not same_bits(grad_bits(model), before)
    assert np.array_equal(report_bits(kept), report_bits(accumulated))


def test_gradients_untouched_even_when_the_terminal_normalizer_is_refused():
    model = narrow(2)
    params = [NamedParameter(p.name, np.zeros(4) if p.name == "final_norm.gain" else p.snapshot())
              for p in model.parameters]
    zeroed = DecoderModel.from_parameters(model.config, params)
    fwd = zeroed.forward(TOKENS)
    with pytest.raises(InvalidNormalizerError, match="G_2L"):
        observe_residual_health(zeroed, fwd, fwd.loss(TARGETS), accumulate_gradients=True)
    assert all(np.all(g == 0) for g in grad_bits(zeroed))


def test_accumulate_gradients_must_be_a_bool():
    model = narrow(2)
    fwd = model.forward(TOKENS)
    with pytest.raises(TypeError, match="accumulate_gradients"):
        observe_residual_health(model, fwd, fwd.loss(TARGETS), accumulate_gradients="no")


# ---------------------------------------------------------------- report builders


def test_report_from_sites_equals_the_observer():
    model = narrow(8)
    fwd = model.forward(TOKENS)
    loss = fwd.loss(TARGETS)
    sites = list(fwd.residual_sites)
    activations = [np.array(s.value) for s in sites]
    adjoints = loss.backward_with_selected_adjoints(sites)
    built = health_report_from_sites(activations, adjoints, np.asarray(fwd.valid))
    fwd = model.forward(TOKENS)
    observed = observe_residual_health(model, fwd, fwd.loss(TARGETS))
    assert np.array_equal(report_bits(built), report_bits(observed))
    assert [r.label for r in built.sites] == [r.label for r in observed.sites]
    assert built.band == HEALTH_BAND and built.width == 4 and built.valid_positions == 4
    assert built.branches == () and built.final_norm_gain == ()


def test_report_from_sites_takes_labels_for_a_parallel_residual_layout():
    rng = np.random.default_rng(0)
    acts = [rng.standard_normal((1, 3, 5)) for _ in range(3)]
    grads = [rng.standard_normal((1, 3, 5)) for _ in range(3)]
    valid = np.array([[True, True, False]])
    labels = ["input", "block.0.output", "block.1.output"]
    report = health_report_from_sites(acts, grads, valid, labels=labels, band=(0.5, 2.0))
    assert [r.label for r in report.sites] == labels and report.valid_positions == 2
    a = [math.sqrt(sum(float(v) ** 2 for v in x[0, :2].reshape(-1)) / 10) for x in acts]
    assert report.sites[2].activation_ratio == a[2] / a[0]
    with pytest.raises(InvalidGeometryError, match="2 labels for 3 sites"):
        health_report_from_sites(acts, grads, valid, labels=labels[:2])
    every = health_report_from_sites(acts, grads)  # no mask: every position
    assert every.valid_positions == 3
    assert every.sites[1].activation_rms == health_report_from_sites(
        acts, grads, np.ones((1, 3), dtype=bool)).sites[1].activation_rms
    with pytest.raises(InvalidGeometryError, match=r"sites are \[batch, tokens, features\]"):
        health_report_from_sites([np.ones(3)], [np.ones(3)])


def test_report_builders_refuse_bad_input():
    acts = [np.ones((1, 2, 3))] * 3
    valid = np.ones((1, 2), dtype=bool)
    with pytest.raises(InvalidGeometryError, match="3 site activations and 2 adjoints"):
        health_report_from_sites(acts, acts[:2], valid)
    with pytest.raises(InvalidGeometryError, match="adjoint shape"):
        health_report_from_sites(acts, [np.ones((1, 2, 3))] * 2 + [np.ones((1, 2, 4))], valid)
    with pytest.raises(InvalidNormalizerError, match="A_0"):
        health_report_from_sites([np.zeros((1, 2, 3)), *acts[1:]], acts, valid)
    with pytest.raises(InvalidNormalizerError, match="G_2L"):
        health_report_from_rms([1.0, 2.0], [1.0, 0.0], valid_positions=1, width=1)
    with pytest.raises(NonFiniteValueError, match="site 0 adjoint RMS is nan"):
        health_report_from_rms([1.0, 2.0], [math.nan, 1.0], valid_positions=1, width=1)
    with pytest.raises(InvalidGeometryError):
        health_report_from_rms([], [], valid_positions=1, width=1)
    with pytest.raises(InvalidBandError):
        health_report_from_rms([1.0], [1.0], valid_positions=1, width=1, band=(1, 0))
