# SPDX-License-Identifier: MIT
"""A plain JAX function over a params pytree (no Flax, no Equinox), its blocks marked with
pydepth.jax.residual_block and its attention output with attention_output: the site RMS and
completed adjoint RMS equal a brute-force perturbation reference, outside an observation the
marks change nothing, parameters are scaled and audited by their pytree paths, the guard refuses a
second scaling, and the refusals are typed."""

import numpy as np
import pytest
from conftest import load_helper, need_extra

need_extra("jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

M = load_helper("jax_models.py")

import pydepth  # noqa: E402
from pydepth import ArgumentTypeError, JaxAlreadyScaledError, SiteSpecError  # noqa: E402
from pydepth.jax import PlainParams, ResidualSites, apply_depth_scaling, attention_output  # noqa: E402
from pydepth.jax import audit_initialization, observe_residual_health, residual_block, scaling_count  # noqa: E402

LAYERS = 2
TOL = 1e-12
SITES = ResidualSites(r"layer(\d+)", "attention")
PATTERNS = [r"\['layers'\]\[(\d+)\]\['(?:wo|w2)'\]"]


def init(seed=0):
    keys = iter(jax.random.split(jax.random.PRNGKey(seed), 6 * LAYERS + 1))

    def draw(*shape):
        return 0.3 * jax.random.normal(next(keys), shape, dtype=M.F64)

    layers = [
        {
            "norm1": jnp.ones(M.W, M.F64),
            "wq": draw(M.W, M.W),
            "wk": draw(M.W, M.W),
            "wv": draw(M.W, M.W),
            "wo": draw(M.W, M.W),
            "norm2": jnp.ones(M.W, M.F64),
            "wi": draw(M.W, M.FF),
            "w2": draw(M.FF, M.W),
        }
        for _ in range(LAYERS)
    ]
    return {"embed": jax.random.normal(next(keys), (M.V, M.W), dtype=M.F64), "layers": layers}


def block(p, eps, marked):
    def attention(h):
        a = M.attend(h, p["wq"], p["wk"], p["wv"], p["wo"])
        return attention_output(a) if marked else a

    return lambda x: M.block_math(
        x,
        eps,
        attention,
        lambda h: M.feed_forward(h, p["wi"], p["w2"]),
        lambda h: M.rms_norm(h, p["norm1"]),
        lambda h: M.rms_norm(h, p["norm2"]),
    )


def loss_fn(params, toks):
    x = params["embed"][toks]
    for i, p in enumerate(params["layers"]):
        x, _ = residual_block(f"layer{i}", block(p, None, True))(x)
    return M.cross_entropy(x @ params["embed"].T, toks)


def reference(params, toks, eps):
    """The same loss, unmarked, with explicit perturbations; the sites as auxiliary output."""
    x, sites = params["embed"][toks], []
    for i, p in enumerate(params["layers"]):
        x, s = block(p, eps[i], False)(x)
        sites.append(s)
    return M.cross_entropy(x @ params["embed"].T, toks), jnp.stack(sites)


def rms(a):
    return float(np.sqrt(np.mean(np.square(np.asarray(a)))))


def test_site_rms_equal_a_brute_force_perturbation_reference():
    params, toks = init(), M.tokens(1)
    report = observe_residual_health(loss_fn, PlainParams(params), toks, sites=SITES)
    adjoints, acts = jax.grad(lambda e: reference(params, toks, e), has_aux=True)(jnp.zeros((LAYERS, 3, M.B, M.T, M.W)))
    rows = [(0, 0)] + [(b, r) for b in range(LAYERS) for r in (1, 2)]
    assert len(report.sites) == len(rows) and report.width == M.W
    for row, (b, r) in zip(report.sites, rows):
        assert row.activation_rms == pytest.approx(rms(acts[b, r]), rel=TOL, abs=0)
        assert row.adjoint_rms == pytest.approx(rms(adjoints[b, r]), rel=TOL, abs=0)
    tape = observe_residual_health(loss_fn, PlainParams(params), toks, sites=SITES, method="tape")
    for s, t in zip(report.sites, tape.sites):
        assert t.activation_rms == pytest.approx(s.activation_rms, rel=TOL)


def test_the_monitor_gives_the_plain_gradient_and_the_observed_sums():
    params, toks = init(), M.tokens(1)
    monitor = pydepth.jax.JaxHealthMonitor(loss_fn, sites=SITES, every=1)
    _, grads, sums = jax.jit(monitor.value_and_grad)(PlainParams(params), toks)
    want = jax.grad(loss_fn)(params, toks)
    for g, w in zip(jax.tree_util.tree_leaves(grads), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12, atol=1e-15)
    report, observed = monitor.log(1, sums), observe_residual_health(loss_fn, PlainParams(params), toks, sites=SITES)
    for a, b in zip(report.sites, observed.sites):
        assert a.adjoint_rms == pytest.approx(b.adjoint_rms, rel=TOL)


def test_outside_an_observation_the_marks_change_nothing():
    params, toks = init(), M.tokens()
    plain = np.asarray(loss_fn(params, toks))
    want = np.asarray(reference(params, toks, jnp.zeros((LAYERS, 3, M.B, M.T, M.W)))[0])
    assert plain.view(np.uint64) == want.view(np.uint64)


def test_parameters_are_scaled_by_pytree_path_once_and_audited():
    params = init(2)
    scaled, record = apply_depth_scaling(PlainParams(params), patterns=PATTERNS)
    assert isinstance(scaled, PlainParams) and record.architecture == "jax-function"
    f = pydepth.jax.scheme_factors("1/sqrt(L)", LAYERS)
    for i in range(LAYERS):
        want = np.asarray(params["layers"][i]["wo"]) * f[i]
        got = np.asarray(scaled.params["layers"][i]["wo"])
        assert np.array_equal(got.view(np.uint64), want.view(np.uint64))
    assert np.isfinite(float(loss_fn(scaled.params, M.tokens())))
    assert scaling_count(PlainParams(jax.tree_util.tree_map(jnp.copy, scaled.params))) == 1
    with pytest.raises(JaxAlreadyScaledError):
        apply_depth_scaling(PlainParams(scaled.params), patterns=PATTERNS)
    audit = audit_initialization(scaled, patterns=PATTERNS, base_std=0.3)
    assert all(r.verdict == "ok" for r in audit.rows if r.role == "residual-output")


def test_refusals_are_typed():
    params, toks = init(), M.tokens()
    with pytest.raises(SiteSpecError, match="no residual_block name matches"):
        observe_residual_health(loss_fn, PlainParams(params), toks, sites=ResidualSites(r"block(\d+)", "attention"))
    with pytest.raises(SiteSpecError, match="unrolled"):
        observe_residual_health(loss_fn, PlainParams(params), toks, sites=ResidualSites("layer0", None, layer_axis=0))
    with pytest.raises(ArgumentTypeError, match="PlainParams"):
        observe_residual_health(loss_fn, params, toks, sites=SITES)
    with pytest.raises(ArgumentTypeError, match="non-empty string"):
        residual_block("", lambda x: x)
