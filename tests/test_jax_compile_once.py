# SPDX-License-Identifier: MIT
"""The public JAX observer compiles once per model structure and shape: in a loop over batches
and updated weights the loss function is traced only on the first call, in each library; a new
shape compiles again, and the report of a cached call equals a fresh one's."""
import pytest
from conftest import load_helper, need_extra

need_extra("jax")

import jax  # noqa: E402

M = load_helper("jax_models.py")

from pydepth.jax import ResidualSites, observe_residual_health  # noqa: E402


def counted(loss_fn):
    """The loss function and a list that grows by one each time JAX traces it."""
    traces = []

    def loss(model, batch):
        traces.append(1)
        return loss_fn(model, batch)
    return loss, traces


def models():
    _, variables, linen_loss, _ = M.linen_model(True, 2)
    nnx_model, nnx_loss, _ = M.nnx_model(True, 2)
    eqx_model, eqx_loss, _ = M.eqx_model(False, 2)
    norms = {"attention_norm": "attention_norm", "mid_norm": "mlp_norm"}
    linen_sites = ResidualSites("decoder", "attention", layer_axis=1, final_norm="final_norm", **norms)
    return [(variables, linen_loss, linen_sites),
            (nnx_model, nnx_loss, ResidualSites("layers", "attention", layer_axis=0, **norms)),
            (eqx_model, eqx_loss, ResidualSites("layers", "attention", **norms))]


@pytest.mark.parametrize("index", [0, 1, 2], ids=["linen-scanned", "nnx-scanned", "equinox"])
def test_a_loop_of_observations_traces_the_loss_on_the_first_call_only(index):
    model, loss_fn, sites = models()[index]
    loss, traces = counted(loss_fn)
    first = observe_residual_health(loss, model, M.tokens(0), sites=sites)
    after_first = len(traces)
    assert after_first > 0
    shifted = jax.tree_util.tree_map(lambda a: a * 1.0, model) if index == 0 else model
    for seed in (1, 2, 3):
        report = observe_residual_health(loss, shifted, M.tokens(seed), sites=sites)
    assert len(traces) == after_first
    again = observe_residual_health(loss, model, M.tokens(0), sites=sites)
    assert [r.adjoint_rms for r in again.sites] == [r.adjoint_rms for r in first.sites]
    assert again.branches == first.branches and report.valid_positions == M.B * M.T
    observe_residual_health(loss, model, M.tokens(0, batch=3), sites=sites)
    assert len(traces) > after_first  # a new batch shape is a new program
