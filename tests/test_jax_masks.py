# SPDX-License-Identifier: MIT
"""Padding and packing in the JAX observer: with a mask or MaxText/Levanter segment ids only the
real positions enter the RMS, equal to a brute-force reference over the same positions, in the
caller's jit and in the tape; a mask that cannot apply is refused by name."""
import numpy as np
import pytest
from conftest import load_helper, need_extra

need_extra("jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

M = load_helper("jax_models.py")

from pydepth import ArgumentTypeError, EmptyValidityError, InvalidGeometryError, SiteSpecError  # noqa: E402
from pydepth.jax import ResidualSites, observe_residual_health, report_from_sums, residual_sums  # noqa: E402

TOL = 1e-12
PADDED = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 0]])
PACKED = np.array([[1, 1, 2, 2, 0], [1, 1, 1, 3, 3]])


def masked_reference(reference, model, toks, eps_shape, valid):
    """Site and adjoint RMS over the positions ``valid`` keeps, from explicit perturbations."""
    adjoints, acts = jax.jit(jax.grad(lambda e: reference(model, toks, e), has_aux=True))(jnp.zeros(eps_shape))
    keep = np.asarray(valid) != 0
    rows = [(0, 0)] + [(b, r) for b in range(acts.shape[0]) for r in (1, 2)]

    def rms(a):
        return float(np.sqrt(np.mean(np.square(np.asarray(a)[keep]))))
    return [rms(acts[b, r]) for b, r in rows], [rms(adjoints[b, r]) for b, r in rows]


def linen(scanned):
    _, variables, loss_fn, reference = M.linen_model(scanned, 2)
    sites = ResidualSites("decoder" if scanned else r"layers_(\d+)", "attention", layer_axis=1 if scanned else None)
    return variables, loss_fn, sites, reference


@pytest.mark.parametrize("scanned, kind", [(False, "mask"), (True, "segment_ids")])
def test_a_padded_or_packed_batch_gives_the_rms_of_its_real_positions_only(scanned, kind):
    variables, loss_fn, sites, reference = linen(scanned)
    toks = M.tokens(4)
    given = PADDED if kind == "mask" else PACKED
    report = observe_residual_health(loss_fn, variables, toks, sites=sites, **{kind: jnp.asarray(given)})
    want_a, want_g = masked_reference(reference, variables, toks, (2, 3, M.B, M.T, M.W), given)
    assert report.valid_positions == int((given != 0).sum())
    for row, a, g in zip(report.sites, want_a, want_g):
        assert row.activation_rms == pytest.approx(a, rel=TOL, abs=0)
        assert row.adjoint_rms == pytest.approx(g, rel=TOL, abs=0)
    every_a, _ = masked_reference(reference, variables, toks, (2, 3, M.B, M.T, M.W), np.ones_like(given))
    assert report.sites[1].activation_rms != pytest.approx(every_a[1], rel=1e-6)  # the padding would count


def test_an_nnx_model_and_the_tape_take_the_mask_too():
    model, loss_fn, reference = M.nnx_model(False, 2)
    sites = ResidualSites("layers", "attention")
    toks = M.tokens(5)
    want_a, want_g = masked_reference(reference, model, toks, (2, 3, M.B, M.T, M.W), PADDED)
    for method in ("sums", "tape"):
        report = observe_residual_health(loss_fn, model, toks, sites=sites, mask=PADDED.astype(bool), method=method)
        assert report.valid_positions == int(PADDED.sum())
        assert [r.activation_rms for r in report.sites] == pytest.approx(want_a, rel=TOL, abs=0)
        assert [r.adjoint_rms for r in report.sites] == pytest.approx(want_g, rel=TOL, abs=0)


def test_a_mask_traced_in_the_callers_jit_gives_the_same_report():
    variables, loss_fn, sites, _ = linen(True)
    toks = M.tokens(6)
    step = jax.jit(lambda v, t, m: residual_sums(loss_fn, v, t, sites=sites, segment_ids=m))
    inside = report_from_sums(np.asarray(step(variables, toks, jnp.asarray(PACKED))), attention=True)
    direct = observe_residual_health(loss_fn, variables, toks, sites=sites, segment_ids=PACKED)
    assert [r.adjoint_rms for r in inside.sites] == [r.adjoint_rms for r in direct.sites]
    assert inside.valid_positions == direct.valid_positions == int((PACKED != 0).sum())


def test_masks_that_cannot_apply_are_refused_by_name():
    variables, loss_fn, sites, _ = linen(False)
    toks = M.tokens()
    with pytest.raises(ArgumentTypeError, match="not both"):
        observe_residual_health(loss_fn, variables, toks, sites=sites, mask=PADDED, segment_ids=PACKED)
    with pytest.raises(ArgumentTypeError, match="only 0 and 1"):
        observe_residual_health(loss_fn, variables, toks, sites=sites, mask=PACKED)
    with pytest.raises(ArgumentTypeError, match="integers"):
        observe_residual_health(loss_fn, variables, toks, sites=sites, segment_ids=PACKED.astype(float))
    with pytest.raises(InvalidGeometryError, match=r"\(10,\)"):
        observe_residual_health(loss_fn, variables, toks, sites=sites, mask=PADDED.reshape(-1))
    with pytest.raises(EmptyValidityError):
        observe_residual_health(loss_fn, variables, toks, sites=sites, mask=np.zeros_like(PADDED))
    with pytest.raises(SiteSpecError, match=r"mask has shape \(2, 4\)"):
        observe_residual_health(loss_fn, variables, toks, sites=sites, mask=PADDED[:, :4])
    model, eqx_loss, _ = M.eqx_model(False, 2)
    with pytest.raises(SiteSpecError, match="vmap"):
        observe_residual_health(eqx_loss, model, toks, sites=ResidualSites("layers", "attention"), mask=PADDED)
