# SPDX-License-Identifier: MIT
"""pydepth.jax.apply_depth_scaling and audit_initialization on Flax Linen variables, NNX modules
and Equinox modules, unrolled and scanned: exactly the selected tensors (each stacked layer
slice with its own factor) become numpy's float64 product, the scaled model keeps its type and tree, a
repeat is refused in each library unless forced, and the audit names the scheme."""
import numpy as np
import pytest
from conftest import load_helper

pytest.importorskip("jax", reason="the JAX bridge needs the 'jax' extra (jax, flax, equinox)")
pytest.importorskip("flax", reason="the JAX bridge tests need flax (the 'jax' extra)")
pytest.importorskip("equinox", reason="the JAX bridge tests need equinox (the 'jax' extra)")

import jax
import jax.numpy as jnp

import pydepth
from pydepth import AlreadyScaledError, JaxAlreadyScaledError, ScalingSchemeError
from pydepth.jax import (apply_depth_scaling, audit_initialization, identify_scheme,
                         scaling_count, scheme_factors)


M = load_helper("jax_models.py")
LAYERS = 2


def case(name):
    """(model, patterns, layer_axis, flat values by keystr name)."""
    scanned = name.endswith("scanned")
    if name.startswith("linen"):
        model = M.linen_model(scanned, LAYERS)[1]
        pats = ([r"\['decoder'\]\['(?:attention'\]\['out|wo)'\]"] if scanned else
                [r"\['layers_(\d+)'\]\['attention'\]\['out'\]", r"\['layers_(\d+)'\]\['wo'\]"])
        return model, pats, 1 if scanned else None
    if name.startswith("nnx"):
        from flax import nnx
        model = nnx.clone(M.nnx_model(scanned, LAYERS)[0])  # scaling changes an NNX module in place
        pats = ([r"\['layers'\]\['(?:attention'\]\['out|wo)'\]\['kernel'\]"] if scanned else
                [r"\['layers'\]\[(\d+)\]\['(?:attention'\]\['out|wo)'\]\['kernel'\]"])
        return model, pats, 0 if scanned else None
    model = M.eqx_model(scanned, LAYERS)[0]
    pats = [r"\.layers\.blocks\.(?:attention\.wo|wo)$"] if scanned else [r"\.layers\[(\d+)\]\.(?:attention\.wo|wo)$"]
    return model, pats, 0 if scanned else None


def flat(model):
    from pydepth.jax._leaves import named_leaves
    return {n: np.array(v) for n, v in named_leaves(model)[1]}


STRUCTURES = ["linen", "linen-scanned", "nnx", "nnx-scanned", "equinox", "equinox-scanned"]


@pytest.mark.parametrize("name", STRUCTURES)
def test_exactly_the_selected_tensors_become_numpys_float64_product_once(name):
    model, pats, axis = case(name)
    before = flat(model)
    scaled, record = apply_depth_scaling(model, patterns=pats, scheme="per-layer", layer_axis=axis)
    after = flat(scaled)
    factors = scheme_factors("per-layer", LAYERS)
    assert record.depth == LAYERS and record.scheme == "per-layer" and len(record.tensors) == 2 * LAYERS
    assert sorted({t.factor for t in record.tensors}) == sorted(set(factors))
    selected = {t.name.split("[layer")[0] for t in record.tensors}
    assert len(selected) == (2 if axis is not None else 2 * LAYERS)
    for n, old in before.items():
        new = after[n]
        if n not in selected:
            assert np.array_equal(new.view(np.uint64), old.view(np.uint64)), n
            continue
        if axis is None:
            want = old * factors[int(next(t.layer for t in record.tensors if t.name == n))]
        else:
            shape = [1] * old.ndim
            shape[axis] = LAYERS
            want = old * np.array(factors).reshape(shape)
        assert new.dtype == np.float64 and np.array_equal(new.view(np.uint64), want.view(np.uint64)), n
    assert scaling_count(scaled) == 1
    assert scaling_count(model) == (1 if name.startswith("nnx") else 0)  # NNX in place; the others return a copy


@pytest.mark.parametrize("name", ["linen-scanned", "nnx", "equinox-scanned"])
def test_a_repeat_is_refused_in_each_library_unless_forced(name):
    model, pats, axis = case(name)
    scaled, _ = apply_depth_scaling(model, patterns=pats, layer_axis=axis)
    once = flat(scaled)
    with pytest.raises(JaxAlreadyScaledError, match="force=True") as err:
        apply_depth_scaling(scaled, patterns=pats, layer_axis=axis)
    assert isinstance(err.value, AlreadyScaledError) and isinstance(err.value, pydepth.JaxBridgeError)
    assert all(np.array_equal(v.view(np.uint64), once[n].view(np.uint64)) for n, v in flat(scaled).items())
    twice, record = apply_depth_scaling(scaled, patterns=pats, layer_axis=axis, force=True)
    assert record.forced and scaling_count(twice) == 2


def test_scaled_linen_variables_keep_their_tree_and_apply_still_runs():
    _module, variables, loss_fn, _ = M.linen_model(True, LAYERS)
    scaled, _ = apply_depth_scaling(variables, patterns=case("linen-scanned")[1], layer_axis=1)
    assert jax.tree_util.tree_structure(scaled) == jax.tree_util.tree_structure(variables)
    assert np.isfinite(float(jax.jit(loss_fn)(scaled, M.tokens())))


def test_a_scaled_equinox_module_is_the_models_own_type_and_runs():
    model, pats, axis = case("equinox-scanned")
    scaled, _ = apply_depth_scaling(model, patterns=pats, layer_axis=axis)
    toks = M.tokens()[0]
    assert type(scaled) is type(model)
    assert jax.tree_util.tree_structure(scaled) == jax.tree_util.tree_structure(model)
    assert scaled(toks)[0].shape == model(toks)[0].shape


def test_refusals_are_typed_and_leave_the_model_as_it_was():
    model, pats, _axis = case("nnx")
    before = flat(model)
    with pytest.raises(ScalingSchemeError, match="no parameter path matches"):
        apply_depth_scaling(model, patterns=[r"nothing"])
    with pytest.raises(ScalingSchemeError, match="layer axis"):
        apply_depth_scaling(model, patterns=[r"\['layers'\]\[\d+\]\['wo'\]"])
    with pytest.raises(ScalingSchemeError, match="gave factor"):
        apply_depth_scaling(model, patterns=pats, scheme=lambda layer, depth: -1.0)
    with pytest.raises(ScalingSchemeError, match="below"):
        apply_depth_scaling(model, patterns=pats, depth=1)
    with pytest.raises(ScalingSchemeError, match="unknown scheme"):
        apply_depth_scaling(model, patterns=pats, scheme="1/L")
    assert scaling_count(model) == 0
    assert all(np.array_equal(v.view(np.uint64), before[n].view(np.uint64)) for n, v in flat(model).items())


def _even(shape, std):
    """A matrix of +std and -std in equal numbers: standard deviation exactly std."""
    signs = np.where(np.arange(int(np.prod(shape))) % 2 == 0, 1.0, -1.0).reshape(shape)
    return jnp.asarray(signs * std)


@pytest.mark.parametrize("scheme", ["1/sqrt(L)", "1/sqrt(2L)", "per-layer"])
def test_the_audit_recognizes_the_scheme_by_name(scheme):
    import equinox as eqx
    model, pats, axis = case("equinox-scanned")
    leaves = [lambda m: m.layers.blocks.wo, lambda m: m.layers.blocks.attention.wo]
    model = eqx.tree_at(lambda m: [f(m) for f in leaves], model, [_even(f(model).shape, 0.3) for f in leaves])
    base = audit_initialization(model, scheme, 0.3, patterns=pats, layer_axis=axis, tolerance=0.01)
    assert {r.verdict for r in base.rows if r.role == "residual-output"} == {"unscaled"}
    scaled, _ = apply_depth_scaling(model, patterns=pats, layer_axis=axis, scheme=scheme)
    audit = audit_initialization(scaled, scheme, 0.3, patterns=pats, layer_axis=axis, tolerance=0.01)
    assert all(r.verdict == "ok" for r in audit.rows if r.role == "residual-output")
    assert audit.scheme == scheme and audit.architecture == "equinox" and "layer 1" in audit.to_table()
    twice, _ = apply_depth_scaling(scaled, patterns=pats, layer_axis=axis, scheme=scheme, force=True)
    doubled = audit_initialization(twice, scheme, 0.3, patterns=pats, layer_axis=axis, tolerance=0.01)
    assert {r.verdict for r in doubled.rows if r.role == "residual-output" and r.layer == 1} == {"double-scaled"}
    assert identify_scheme(scaled, 0.3, patterns=pats, layer_axis=axis, tolerance=0.01) == scheme
