# SPDX-License-Identifier: MIT
"""pydepth.jax.observe_residual_health on Flax Linen, Flax NNX and Equinox decoders, unrolled
and scanned (Linen nn.remat + nn.scan with param_scan_axis=1, NNX nnx.vmap + nnx.scan, Equinox
filter_vmap + lax.scan): the RMS of every site and of its completed adjoint equal a brute-force
reference (gradients with respect to explicit zero perturbations at each site) to 1e-12; the
tape agrees with the sums; a JAX twin of a pydepth model reports what pydepth reports; and the
refusals are typed."""
import numpy as np
import pytest
from conftest import load_helper

pytest.importorskip("jax", reason="the JAX bridge needs the 'jax' extra (jax, flax, equinox)")
pytest.importorskip("flax", reason="the JAX bridge tests need flax (the 'jax' extra)")
pytest.importorskip("equinox", reason="the JAX bridge tests need equinox (the 'jax' extra)")

import jax
import jax.numpy as jnp


M = load_helper("jax_models.py")

import pydepth  # noqa: E402
from pydepth import SiteSpecError  # noqa: E402
from pydepth.jax import ResidualSites, observe_residual_health, report_from_sums, residual_sums  # noqa: E402

TOL = 1e-12
NORMS = {"attention_norm": "attention_norm", "mid_norm": "mlp_norm", "final_norm": "final_norm"}


def structure(name, layers=2):
    """(model, loss_fn, sites, reference, perturbation shape, sites layout) of one structure."""
    scanned = name.endswith("scanned")
    eps = (layers, 3, M.B, M.T, M.W)
    if name.startswith("linen"):
        _, variables, loss_fn, reference = M.linen_model(scanned, layers)
        sites = ResidualSites("decoder" if scanned else r"layers_(\d+)", "attention",
                              layer_axis=1 if scanned else None, **NORMS)
        return variables, loss_fn, sites, reference, eps, "LS"
    if name.startswith("nnx"):
        model, loss_fn, reference = M.nnx_model(scanned, layers)
        return model, loss_fn, ResidualSites("layers", "attention", layer_axis=0 if scanned else None, **NORMS), \
            reference, eps, "LS"
    model, loss_fn, reference = M.eqx_model(scanned, layers)
    sites = ResidualSites("layers.blocks" if scanned else "layers", "attention",
                          layer_axis=0 if scanned else None, **NORMS)
    return model, loss_fn, sites, reference, (M.B, layers, 3, M.T, M.W), "BL"


def brute_force(reference, model, toks, eps_shape, layout):
    """Site RMS and adjoint RMS from explicit zero perturbations, in site order."""
    eps = jnp.zeros(eps_shape)
    adjoints, acts = jax.jit(jax.grad(lambda e: reference(model, toks, e), has_aux=True))(eps)
    if layout == "BL":  # [batch, layer, row, ...] -> [layer, row, batch, ...]
        acts, adjoints = (jnp.transpose(a, (1, 2, 0, 3, 4)) for a in (acts, adjoints))
    rows = [(0, 0)] + [(b, r) for b in range(acts.shape[0]) for r in (1, 2)]

    def rms(a):
        return float(np.sqrt(np.mean(np.square(np.asarray(a)))))
    return [rms(acts[b, r]) for b, r in rows], [rms(adjoints[b, r]) for b, r in rows]


LAYERS = 2
STRUCTURES = ["linen", "linen-scanned", "nnx", "nnx-scanned", "equinox", "equinox-scanned"]


@pytest.mark.parametrize("name", STRUCTURES)
def test_site_rms_equal_a_brute_force_perturbation_reference(name):
    model, loss_fn, sites, reference, eps, layout = structure(name)
    toks = M.tokens(1)
    report = observe_residual_health(loss_fn, model, toks, sites=sites)
    want_a, want_g = brute_force(reference, model, toks, eps, layout)
    assert isinstance(report, pydepth.DepthHealthReport)
    assert [r.label for r in report.sites] == [pydepth.health.site_label(i) for i in range(5)]
    for row, a, g in zip(report.sites, want_a, want_g):
        assert row.activation_rms == pytest.approx(a, rel=TOL, abs=0)
        assert row.adjoint_rms == pytest.approx(g, rel=TOL, abs=0)
    assert report.valid_positions == M.B * M.T and report.width == M.W
    assert report.sites[0].activation_ratio == 1.0 and report.sites[-1].adjoint_ratio == 1.0
    assert len(report.branches) == 2 and len(report.final_norm_gain) == M.W
    assert all(len(b.attention_norm_gain) == M.W for b in report.branches)


@pytest.mark.parametrize("name", ["linen", "nnx"])
def test_the_tape_gives_full_tensors_that_agree_with_the_sums(name):
    model, loss_fn, sites, reference, eps, _layout = structure(name, layers=2)
    toks = M.tokens(2)
    sums = observe_residual_health(loss_fn, model, toks, sites=sites)
    tape = observe_residual_health(loss_fn, model, toks, sites=sites, method="tape")
    for s, t in zip(sums.sites, tape.sites):
        assert t.activation_rms == pytest.approx(s.activation_rms, rel=TOL)
        assert t.adjoint_rms == pytest.approx(s.adjoint_rms, rel=TOL)
    for s, t in zip(sums.branches, tape.branches):
        assert t.feed_forward_output_rms == pytest.approx(s.feed_forward_output_rms, rel=1e-10)
    full = pydepth.jax.residual_tape(loss_fn, model, toks, sites=sites)
    assert full.activations[0].shape == (3, M.B, M.T, M.W)
    _, acts = jax.jit(lambda e: reference(model, toks, e))(jnp.zeros(eps))
    np.testing.assert_allclose(full.activations[1][2], np.asarray(acts[1, 2]), rtol=TOL, atol=0)


def test_the_tape_refuses_a_loss_that_maps_blocks_over_examples():
    model, loss_fn, sites, *_ = structure("equinox", layers=2)
    with pytest.raises(SiteSpecError, match="method='sums'"):
        observe_residual_health(loss_fn, model, M.tokens(), sites=sites, method="tape")
    scanned, loss_s, sites_s, *_ = structure("nnx-scanned", layers=2)
    with pytest.raises(SiteSpecError, match="unrolled"):
        observe_residual_health(loss_s, scanned, M.tokens(), sites=sites_s, method="tape")


def test_sums_inside_the_callers_jit_give_the_same_report():
    model, loss_fn, sites, *_ = structure("linen-scanned", layers=2)
    toks = M.tokens(3)
    step = jax.jit(lambda v, t: residual_sums(loss_fn, v, t, sites=sites))
    report = report_from_sums(np.asarray(step(model, toks)), attention=True)
    direct = observe_residual_health(loss_fn, model, toks, sites=sites)
    assert [r.adjoint_rms for r in report.sites] == pytest.approx([r.adjoint_rms for r in direct.sites], rel=TOL)


def test_observing_leaves_the_model_and_its_values_as_they_were():
    model, loss_fn, sites, *_ = structure("nnx-scanned", layers=2)
    from flax import nnx
    before = jax.tree_util.tree_map(np.asarray, nnx.state(model))
    cls = type(model.layers)
    observe_residual_health(loss_fn, model, M.tokens(), sites=sites)
    assert type(model.layers) is cls and not hasattr(model.layers, "pydepth_site_tap")
    after = jax.tree_util.tree_map(np.asarray, nnx.state(model))
    assert jax.tree_util.tree_all(jax.tree_util.tree_map(np.array_equal, before, after))
    variables, loss_l, sites_l, *_ = structure("linen", layers=2)
    observe_residual_health(loss_l, variables, M.tokens(), sites=sites_l)
    assert "pydepth_site_tap" not in variables["params"]["layers_0"]


def test_a_jax_twin_of_a_pydepth_model_reports_what_pydepth_reports():
    cfg = pydepth.DecoderConfig(17, 8, 2, 12, 3, 8)
    model = pydepth.DecoderModel(cfg, pydepth.SplitMix64(5))
    toks = np.array([[1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12]])
    targets = np.array([[2, 3, 4, 5, 6, 7], [8, 9, 10, 11, 12, 13]])
    fwd = model.forward(toks)
    want = pydepth.observe_residual_health(model, fwd, fwd.loss(targets))
    sites = ResidualSites("blocks", "attention", attention_norm="attention_norm", mid_norm="ffn_norm",
                          final_norm="final_norm")
    got = observe_residual_health(M.twin_loss, M.twin_of(model, 6), (jnp.asarray(toks), jnp.asarray(targets)),
                                  sites=sites, band=(0.5, 2.0))
    assert [r.label for r in got.sites] == [r.label for r in want.sites]
    for g, w in zip(got.sites, want.sites):
        assert g.activation_rms == pytest.approx(w.activation_rms, rel=1e-10)
        assert g.adjoint_rms == pytest.approx(w.adjoint_rms, rel=1e-10)
    for g, w in zip(got.branches, want.branches):
        assert g.attention_output_rms == pytest.approx(w.attention_output_rms, rel=1e-10)
        assert g.feed_forward_output_rms == pytest.approx(w.feed_forward_output_rms, rel=1e-10)
        assert g.attention_norm_gain == w.attention_norm_gain and g.feed_forward_norm_gain == w.feed_forward_norm_gain
    assert got.final_norm_gain == want.final_norm_gain and got.band == (0.5, 2.0)


def test_a_single_branch_block_has_input_and_output_sites_only():
    model, loss_fn, _, *_ = structure("equinox", layers=2)
    report = observe_residual_health(loss_fn, model, M.tokens(), sites=ResidualSites("layers", None))
    assert [r.label for r in report.sites] == ["input", "block.0.output", "block.1.output"]


@pytest.mark.parametrize("sites, text", [
    (ResidualSites(r"nothing_(\d+)", "attention"), "no module path matches"),
    (ResidualSites(r"layers_(\d+)", "no_such_attention"), "never called its attention"),
    (ResidualSites(r"layers_\d+", "attention", layer_axis=1), "matches 2 modules"),
])
def test_a_site_description_that_does_not_fit_linen_is_refused(sites, text):
    variables, loss_fn, *_ = structure("linen", layers=2)
    with pytest.raises(SiteSpecError, match=text):
        observe_residual_health(loss_fn, variables, M.tokens(), sites=sites)


def test_other_refusals_are_typed_and_name_the_value():
    model, loss_fn, sites, *_ = structure("equinox", layers=2)
    with pytest.raises(SiteSpecError, match="no 'stack'"):
        observe_residual_health(loss_fn, model, M.tokens(), sites=ResidualSites("stack", "attention"))
    with pytest.raises(SiteSpecError, match="layers is a list; a stacked stack is one module"):
        observe_residual_health(loss_fn, model, M.tokens(), sites=ResidualSites("layers", "attention", layer_axis=4))
    with pytest.raises(pydepth.ArgumentTypeError, match="floating scalar"):
        observe_residual_health(lambda m, t: jax.vmap(lambda x: m(x)[0])(t), model, M.tokens(), sites=sites)
    with pytest.raises(pydepth.ArgumentTypeError, match="'fast'"):
        observe_residual_health(loss_fn, model, M.tokens(), sites=sites, method="fast")
    with pytest.raises(pydepth.InvalidBandError):
        observe_residual_health(loss_fn, model, M.tokens(), sites=sites, band=(2.0, 1.0))
    with pytest.raises(pydepth.ArgumentTypeError, match="list"):
        observe_residual_health(loss_fn, [1, 2], M.tokens(), sites=sites)
    with pytest.raises(SiteSpecError, match="layer_axis"):
        ResidualSites("layers", "attention", layer_axis=-1)


def test_pydepth_imports_without_jax_and_the_bridge_names_the_extra(tmp_path):
    import subprocess
    import sys
    code = ("import sys\n"
            "sys.modules['jax'] = None\n"
            "import pydepth\n"
            "try:\n"
            "    import pydepth.jax\n"
            "except pydepth.JaxDependencyError as err:\n"
            "    assert isinstance(err, ImportError) and \"pydepth[jax]\" in str(err), err\n"
            "    print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert out.stdout.strip() == "ok", out.stderr
    plain = subprocess.run([sys.executable, "-c", "import sys, pydepth; print('jax' in sys.modules)"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert plain.stdout.strip() == "False", plain.stderr


def test_the_observation_saves_matrix_products_of_a_remat_model_instead_of_a_second_forward():
    _, variables, loss_fn, _ = M.linen_model(True, 3)  # nn.remat + nn.scan
    sites = ResidualSites("decoder", "attention", layer_axis=1)
    toks = M.tokens()

    def sums(recompute):
        return jax.jit(lambda v, t: residual_sums(loss_fn, v, t, sites=sites, recompute=recompute))

    saved, again = (np.asarray(sums(r)(variables, toks), dtype=np.float64) for r in (False, True))
    assert np.array_equal(saved.view(np.uint64), again.view(np.uint64))
    dots = [sums(r).lower(variables, toks).as_text().count("stablehlo.dot_general") for r in (False, True)]
    assert dots[0] < dots[1]  # the recomputed forward's products are gone from the reverse pass
    report = observe_residual_health(loss_fn, variables, toks, sites=sites)
    assert report.to_dict() == observe_residual_health(loss_fn, variables, toks, sites=sites,
                                                       recompute=True).to_dict()
    with pytest.raises(pydepth.ArgumentTypeError, match="recompute must be a bool"):
        observe_residual_health(loss_fn, variables, toks, sites=sites, recompute="yes")
