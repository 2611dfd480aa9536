# SPDX-License-Identifier: MIT
"""JAX bridge refusals that name the fix: scaling errors are JaxBridgeErrors (and still
ScalingSchemeErrors), a Linen blocks pattern whose group captures more than the layer index and
a layer_axis that is not the scan's are refused as SiteSpecErrors naming what was found."""
import pytest
from conftest import load_helper, need_extra

need_extra("jax")

M = load_helper("jax_models.py")

from pydepth import JaxBridgeError, JaxScalingSchemeError, ScalingSchemeError, SiteSpecError  # noqa: E402
from pydepth.jax import ResidualSites, apply_depth_scaling, audit_initialization, observe_residual_health  # noqa: E402


def test_scaling_and_audit_refusals_are_jax_bridge_errors():
    _, variables, _, _ = M.linen_model(False, 2)
    for call in (lambda: apply_depth_scaling(variables, patterns=["nothing"]),
                 lambda: apply_depth_scaling(variables, patterns=[r"\['layers_(\d+)'\]\['wo'\]"], scheme="1/L"),
                 lambda: audit_initialization(variables, "1/sqrt(L)", patterns=[r"\['layers_(\d+)'\]\['wo'\]"],
                                              tolerance=-1.0)):
        with pytest.raises(JaxScalingSchemeError) as err:
            call()
        assert isinstance(err.value, JaxBridgeError) and isinstance(err.value, ScalingSchemeError)


def test_a_blocks_group_that_captures_more_than_the_index_is_refused_by_name():
    _, variables, loss_fn, _ = M.linen_model(False, 2)
    with pytest.raises(SiteSpecError, match="captured 'layers_0'"):
        observe_residual_health(loss_fn, variables, M.tokens(), sites=ResidualSites(r"(layers_\d+)", "attention"))


def test_a_layer_axis_that_is_not_the_scans_is_refused_with_the_extents_found():
    _, variables, loss_fn, _ = M.linen_model(True, 2)
    with pytest.raises(SiteSpecError, match=r"layer_axis 0 is not the layer axis .* extents \["):
        observe_residual_health(loss_fn, variables, M.tokens(), sites=ResidualSites("decoder", "attention",
                                                                                    layer_axis=0))


def test_a_haliax_named_array_parameter_is_refused_by_name():
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    from pydepth import JaxNamedArrayError

    # haliax 1.3 does not import with the supported JAX: a stand-in of the same module and name
    class NamedArray:
        def __init__(self, array, axes):
            self.array, self.axes = array, axes

    NamedArray.__module__ = "haliax.core"
    jax.tree_util.register_pytree_node(NamedArray, lambda n: ((n.array,), n.axes),
                                       lambda axes, children: NamedArray(children[0], axes))

    class Levanterish(eqx.Module):
        weight: NamedArray

        def __call__(self, x):
            return x @ self.weight.array

    model = Levanterish(NamedArray(jnp.ones((3, 3)), ("embed", "mlp")))
    loss_fn = lambda m, b: jnp.mean(m(b) ** 2)  # noqa: E731
    for call in (lambda: observe_residual_health(loss_fn, model, jnp.ones((2, 3)), sites=ResidualSites("x", None)),
                 lambda: apply_depth_scaling(model, patterns=[r"weight"]),
                 lambda: audit_initialization(model, patterns=[r"weight"])):
        with pytest.raises(JaxNamedArrayError, match=r"NamedArrays \(\.weight"):
            call()
