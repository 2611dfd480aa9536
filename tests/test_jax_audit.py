# SPDX-License-Identifier: MIT
"""pydepth.jax.audit_initialization judges each tensor against the std its own initializer
gives: Flax lecun_normal by fan-in (a feed-forward down projection included), Equinox Linear by
its uniform bound, the embedding by its own rule, norm gains as gains (stacked, constant or not),
explicit per-path bases from the caller. A model with its library's default initializers audits
"unscaled" before depth scaling and "ok" under the scheme after, and nothing as initialized
reads "off"."""
import math

import numpy as np
import pytest
from conftest import need_extra

need_extra("jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

jax.config.update("jax_enable_x64", True)

import equinox as eqx  # noqa: E402
import flax.linen as nn  # noqa: E402
from flax import nnx  # noqa: E402

from pydepth import JaxScalingSchemeError  # noqa: E402
from pydepth.jax import apply_depth_scaling, audit_initialization  # noqa: E402

W, HEADS, L, V = 32, 4, 3, 50
F64 = jnp.float64


class LinenBlock(nn.Module):
    """Flax defaults throughout: DenseGeneral to heads and back, a 4x feed-forward."""

    @nn.compact
    def __call__(self, x, _):
        h = nn.RMSNorm(param_dtype=F64, name="attention_norm")(x)
        q = nn.DenseGeneral((HEADS, W // HEADS), use_bias=False, param_dtype=F64, name="query")(h)
        x = x + nn.DenseGeneral(W, axis=(-2, -1), use_bias=False, param_dtype=F64, name="out")(q)
        h = nn.RMSNorm(param_dtype=F64, name="mlp_norm")(x)
        up = nn.Dense(4 * W, use_bias=False, param_dtype=F64, name="up")(h)
        return x + nn.Dense(W, use_bias=False, param_dtype=F64, name="down")(jax.nn.gelu(up)), None


class LinenModel(nn.Module):
    @nn.compact
    def __call__(self, toks):
        embed = nn.Embed(V, W, param_dtype=F64, name="embed")
        stack = nn.scan(nn.remat(LinenBlock), variable_axes={"params": 1}, split_rngs={"params": True},
                        in_axes=nn.broadcast, length=L)
        x, _ = stack(name="decoder")(embed(toks), None)
        return embed.attend(nn.RMSNorm(param_dtype=F64, name="final_norm")(x))


class NnxBlock(nnx.Module):
    def __init__(self, rngs):
        self.attention_norm = nnx.RMSNorm(W, param_dtype=F64, rngs=rngs)
        self.query = nnx.Linear(W, W, use_bias=False, param_dtype=F64, rngs=rngs)
        self.out = nnx.Linear(W, W, use_bias=False, param_dtype=F64, rngs=rngs)
        self.mlp_norm = nnx.RMSNorm(W, param_dtype=F64, rngs=rngs)
        self.up = nnx.Linear(W, 4 * W, use_bias=False, param_dtype=F64, rngs=rngs)
        self.down = nnx.Linear(4 * W, W, use_bias=False, param_dtype=F64, rngs=rngs)


class NnxModel(nnx.Module):
    def __init__(self):
        self.embed = nnx.Embed(V, W, param_dtype=F64, rngs=nnx.Rngs(0))
        self.layers = nnx.vmap(lambda k: NnxBlock(nnx.Rngs(k)))(jax.random.split(jax.random.PRNGKey(1), L))
        self.final_norm = nnx.RMSNorm(W, param_dtype=F64, rngs=nnx.Rngs(2))


class EqxBlock(eqx.Module):
    attention_norm: eqx.nn.RMSNorm
    query: eqx.nn.Linear
    out: eqx.nn.Linear
    mlp_norm: eqx.nn.RMSNorm
    up: eqx.nn.Linear
    down: eqx.nn.Linear

    def __init__(self, key):
        k = jax.random.split(key, 4)
        self.attention_norm, self.mlp_norm = eqx.nn.RMSNorm(W, dtype=F64), eqx.nn.RMSNorm(W, dtype=F64)
        self.query = eqx.nn.Linear(W, W, use_bias=False, key=k[0], dtype=F64)
        self.out = eqx.nn.Linear(W, W, use_bias=False, key=k[1], dtype=F64)
        self.up = eqx.nn.Linear(W, 4 * W, use_bias=False, key=k[2], dtype=F64)
        self.down = eqx.nn.Linear(4 * W, W, use_bias=False, key=k[3], dtype=F64)


class EqxModel(eqx.Module):
    embed: eqx.nn.Embedding
    layers: EqxBlock

    def __init__(self):
        keys = jax.random.split(jax.random.PRNGKey(0), L + 1)
        self.embed = eqx.nn.Embedding(V, W, key=keys[0], dtype=F64)
        self.layers = eqx.filter_vmap(EqxBlock)(keys[1:])


def default_model(library):
    """(model, residual-output patterns, layer axis) with the library's default initializers."""
    if library == "flax-linen":
        variables = LinenModel().init(jax.random.PRNGKey(0), jnp.zeros((1, 4), int))
        return variables, [r"\['decoder'\]\['(?:out|down)'\]"], 1
    if library == "flax-nnx":
        return NnxModel(), [r"\['layers'\]\['(?:out|down)'\]\['kernel'\]"], 0
    return EqxModel(), [r"\.layers\.(?:out|down)\.weight$"], 0


LIBRARIES = ["flax-linen", "flax-nnx", "equinox"]


@pytest.mark.parametrize("library", LIBRARIES)
def test_a_model_with_default_initializers_audits_unscaled_and_then_scaled(library):
    model, pats, axis = default_model(library)
    before = audit_initialization(model, patterns=pats, layer_axis=axis)
    assert before.follows == ("unscaled",)
    assert {r.verdict for r in before.rows if r.role == "residual-output"} == {"unscaled"}
    assert all(r.verdict == "ok" for r in before.rows if r.role != "residual-output")
    assert {r.role for r in before.rows} == {"embedding", "matrix", "residual-output", "gain"}
    scaled, _ = apply_depth_scaling(model, patterns=pats, layer_axis=axis)
    after = audit_initialization(scaled, patterns=pats, layer_axis=axis)
    assert after.ok and "1/sqrt(L)" in after.follows
    assert not any(r.verdict == "off" for r in before.rows + after.rows)


def test_a_flax_feed_forward_down_projection_is_judged_by_its_fan_in():
    model, pats, axis = default_model("flax-linen")
    audit = audit_initialization(model, patterns=pats, layer_axis=axis)
    down = [r for r in audit.rows if "['down']" in r.name]
    out = [r for r in audit.rows if "['out']" in r.name]
    factor = 1.0 / math.sqrt(L)
    assert len(down) == L and all(r.expected_std == pytest.approx(factor / math.sqrt(4 * W)) for r in down)
    assert all(r.expected_std == pytest.approx(factor / math.sqrt(W)) for r in out)  # [heads, head, width]
    query = [r for r in audit.rows if "['query']" in r.name]
    assert all(r.expected_std == pytest.approx(1.0 / math.sqrt(W)) and r.verdict == "ok" for r in query)
    assert "lecun_normal" in audit.base_source


def test_one_base_for_every_matrix_misreads_the_down_projection_the_fan_in_rule_reads_right():
    model, pats, axis = default_model("flax-linen")
    one = audit_initialization(model, "per-layer", 1.0 / math.sqrt(W), patterns=pats, layer_axis=axis)
    per_tensor = audit_initialization(model, "per-layer", patterns=pats, layer_axis=axis)
    assert {r.verdict for r in per_tensor.rows if "['down']" in r.name} == {"unscaled"}
    assert "unscaled" not in {r.verdict for r in one.rows if "['down']" in r.name}  # half the base: misread


@pytest.mark.parametrize("library", LIBRARIES)
def test_stacked_norm_gains_that_are_not_constant_are_gains_never_matrices(library):
    model, pats, axis = default_model(library)
    noise = lambda g: g * (1.0 + 0.01 * jnp.cos(jnp.arange(g.size, dtype=F64).reshape(g.shape)))  # noqa: E731
    if library == "flax-linen":
        model = jax.tree_util.tree_map_with_path(
            lambda p, v: noise(v) if "scale" in jax.tree_util.keystr(p) else v, model)
    elif library == "flax-nnx":
        for norm in (model.layers.attention_norm, model.layers.mlp_norm):
            norm.scale[...] = noise(norm.scale[...])
    else:
        model = eqx.tree_at(lambda m: m.layers.mlp_norm.weight, model, noise(model.layers.mlp_norm.weight))
    audit = audit_initialization(model, patterns=pats, layer_axis=axis)
    gains = [r for r in audit.rows if "norm" in r.name]
    assert gains and {r.role for r in gains} == {"gain"} and all(r.verdict == "ok" for r in gains)
    assert any(r.name.endswith(f"[layer {L - 1}]") for r in gains)  # one row per layer of the stack


def test_a_model_drawn_from_one_normal_is_judged_against_the_median():
    init = nn.initializers.normal(0.05)

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x, _):
            up = nn.Dense(4 * W, use_bias=False, param_dtype=F64, kernel_init=init, name="up")(x)
            return x + nn.Dense(W, use_bias=False, param_dtype=F64, kernel_init=init, name="down")(up), None

    class Model(nn.Module):
        @nn.compact
        def __call__(self, toks):
            x = nn.Embed(V, W, param_dtype=F64, embedding_init=init, name="embed")(toks)
            return nn.scan(Block, variable_axes={"params": 1}, split_rngs={"params": True},
                           in_axes=nn.broadcast, length=L)(name="decoder")(x, None)[0]

    variables = Model().init(jax.random.PRNGKey(0), jnp.zeros((1, 4), int))
    audit = audit_initialization(variables, patterns=[r"\['decoder'\]\['down'\]"], layer_axis=1)
    assert audit.base_source.startswith("median") and audit.follows == ("unscaled",)
    assert all(r.verdict == "ok" for r in audit.rows if r.role != "residual-output")  # the embedding too


def test_explicit_per_path_base_stds_win_and_bad_ones_are_refused_by_name():
    model, pats, axis = default_model("flax-linen")
    given = {r"\['up'\]": 0.5}
    audit = audit_initialization(model, base_std=given, patterns=pats, layer_axis=axis)
    up = [r for r in audit.rows if "['up']" in r.name]
    assert up and all(r.expected_std == 0.5 and r.verdict == "off" for r in up)
    assert r"\['up'\]" in audit.base_source
    down = [r for r in audit.rows if "['down']" in r.name]
    assert all(r.verdict == "unscaled" for r in down)  # the others still by their initializer's rule
    before = jax.tree_util.tree_map(lambda v: np.array(v), model)
    for bad, words in (({r"\['nothing'\]": 0.1}, "matches no audited tensor"), ({"up": 0.0}, "positive"),
                       ({"(": 0.1}, "not a regular expression"), ({1: 0.1}, "path patterns")):
        with pytest.raises(JaxScalingSchemeError, match=words):
            audit_initialization(model, base_std=bad, patterns=pats, layer_axis=axis)
    assert all(np.array_equal(np.asarray(a).view(np.uint64), b.view(np.uint64))
               for a, b in zip(jax.tree_util.tree_leaves(model), jax.tree_util.tree_leaves(before)))


def test_a_pattern_group_that_captures_a_name_not_a_layer_index_is_refused():
    model, _, axis = default_model("flax-linen")
    with pytest.raises(JaxScalingSchemeError, match=r"captured '(?:out|down)'.*\(\?:"):
        audit_initialization(model, patterns=[r"\['decoder'\]\['(out|down)'\]"], layer_axis=axis)
