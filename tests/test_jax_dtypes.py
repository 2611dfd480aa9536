# SPDX-License-Identifier: MIT
"""Depth scaling and the audit of JAX models with float32, bfloat16 and fp8 weights: every
floating tensor is seen, and each product is numpy's float64 product rounded once to the
weight's dtype, checked bit for bit (also where a second rounding through float32 would differ)."""
import ml_dtypes
import numpy as np
import pytest
from conftest import load_helper, need_extra

need_extra("jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

M = load_helper("jax_models.py")

from pydepth.jax import apply_depth_scaling, audit_initialization, scheme_factors  # noqa: E402

DTYPES = [jnp.float32, jnp.bfloat16, jnp.float8_e4m3fn]
UNROLLED = [r"\['layers_(\d+)'\]\['attention'\]\['out'\]", r"\['layers_(\d+)'\]\['wo'\]"]
SCANNED = [r"\['decoder'\]\['(?:attention'\]\['out|wo)'\]"]


def linen_in(dtype, scanned=False):
    variables = M.linen_model(scanned, 2)[1]
    return jax.tree_util.tree_map(lambda a: a.astype(dtype), variables)


def raw(a):
    """The stored bits of an array of any width."""
    arr = np.asarray(a)
    return arr.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[arr.dtype.itemsize])


def rule(old, factors):
    """The documented rule, written out: the float64 product, one rounding to the dtype."""
    return (np.asarray(old).astype(np.float64) * np.asarray(factors, dtype=np.float64)).astype(np.asarray(old).dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_narrow_weights_are_scaled_by_the_float64_product_rounded_once(dtype):
    variables = linen_in(dtype)
    scaled, record = apply_depth_scaling(variables, patterns=UNROLLED, scheme="per-layer")
    factors = scheme_factors("per-layer", 2)
    assert len(record.tensors) == 4
    for b in range(2):
        for path in (("attention", "out"), ("wo", "kernel")):
            old = variables["params"][f"layers_{b}"][path[0]][path[1]]
            new = scaled["params"][f"layers_{b}"][path[0]][path[1]]
            assert new.dtype == old.dtype
            assert np.array_equal(raw(new), raw(rule(old, factors[b])))
    untouched = scaled["params"]["layers_0"]["wi"]["kernel"]
    assert np.array_equal(raw(untouched), raw(variables["params"]["layers_0"]["wi"]["kernel"]))


def test_a_stacked_bfloat16_tensor_gets_each_layers_factor():
    variables = linen_in(jnp.bfloat16, scanned=True)
    scaled, _ = apply_depth_scaling(variables, patterns=SCANNED, scheme="per-layer", layer_axis=1)
    old, new = variables["params"]["decoder"]["wo"]["kernel"], scaled["params"]["decoder"]["wo"]["kernel"]
    factors = np.array(scheme_factors("per-layer", 2)).reshape(1, 2, 1)
    assert np.array_equal(raw(new), raw(rule(old, factors)))


def test_the_rounding_is_one_rounding_not_two_through_float32():
    # 1 × (1 + 2^-8 + 2^-30) lies just above a bfloat16 midpoint: one rounding goes up to 1 + 2^-7,
    # a rounding through float32 first lands on the midpoint and then goes down to 1
    variables = linen_in(jnp.bfloat16)
    ones = jax.tree_util.tree_map(jnp.ones_like, variables)
    factor = 1.0 + 2.0 ** -8 + 2.0 ** -30
    scaled, _ = apply_depth_scaling(ones, patterns=UNROLLED, scheme=lambda layer, depth: factor)
    got = np.asarray(scaled["params"]["layers_0"]["wo"]["kernel"]).astype(np.float64)
    assert np.all(got == 1.0 + 2.0 ** -7)
    assert float(np.float32(factor).astype(ml_dtypes.bfloat16)) == 1.0  # the two-rounding answer differs


def test_the_audit_reads_bfloat16_weights():
    variables = linen_in(jnp.bfloat16)
    audit = audit_initialization(variables, "per-layer", 0.3, patterns=UNROLLED)
    residual = [r for r in audit.rows if r.role == "residual-output"]
    assert len(residual) == 4 and {r.verdict for r in residual} <= {"unscaled", "ok"}
    assert any(r.role == "matrix" for r in audit.rows)
