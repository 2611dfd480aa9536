# SPDX-License-Identifier: MIT
"""Blocks that do not add the attention output as it is: a Gemma-style post-attention norm is
refused by name when the attention is named (the mid site would be wrong) and observed exactly
when the norm whose output is added is named; a constant residual multiplier is found on a
probe trace and the mid site is the block input plus the multiplied output, against a
brute-force perturbation reference."""
import numpy as np
import pytest
from conftest import load_helper, need_extra

need_extra("jax")

import flax.linen as nn  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

M = load_helper("jax_models.py")

from pydepth import SiteSpecError  # noqa: E402
from pydepth.jax import ResidualSites, observe_residual_health  # noqa: E402

TOL = 1e-12


class Block(nn.Module):
    """A pre-norm block with a post-attention norm (``post``) or a residual multiplier (``scale``)."""
    post: bool
    scale: float

    @nn.compact
    def __call__(self, x, eps=None):
        e = eps if eps is not None else [0.0, 0.0, 0.0]  # no perturbation: the block as a model writes it
        if eps is not None:
            x = x + e[0]
        a = M.LinenAttention(name="attention")(nn.RMSNorm(param_dtype=M.F64, dtype=M.F64, name="n1")(x))
        if self.post:
            a = nn.RMSNorm(param_dtype=M.F64, dtype=M.F64, name="post_attention_norm")(a)
        mid = x + (a if self.scale == 1.0 else self.scale * a)
        if eps is not None:
            mid = mid + e[1]
        ffn = nn.Dense(M.W, use_bias=False, param_dtype=M.F64, name="wo")(
            jax.nn.silu(nn.Dense(M.FF, use_bias=False, param_dtype=M.F64, name="wi")(
                nn.RMSNorm(param_dtype=M.F64, dtype=M.F64, name="n2")(mid))))
        out = mid + ffn
        if eps is not None:
            out = out + e[2]
        return out, jnp.stack([x, mid, out])


class Decoder(nn.Module):
    post: bool
    scale: float

    @nn.compact
    def __call__(self, toks, eps=None):
        embed = nn.Embed(M.V, M.W, param_dtype=M.F64, name="embed", embedding_init=nn.initializers.normal(1.0))
        x, sites = embed(toks), []
        for i in range(2):
            x, s = Block(self.post, self.scale, name=f"layers_{i}")(x, None if eps is None else eps[i])
            sites.append(s)
        return embed.attend(x), jnp.stack(sites)


def case(post, scale):
    model = Decoder(post, scale)
    variables = model.init(jax.random.PRNGKey(0), M.tokens())

    def loss_fn(v, toks):
        return M.cross_entropy(model.apply(v, toks)[0], toks)

    def reference(v, toks, eps):
        logits, sites = model.apply(v, toks, eps)
        return M.cross_entropy(logits, toks), sites
    return variables, loss_fn, reference


def brute_force(reference, variables, toks):
    adjoints, acts = jax.grad(lambda e: reference(variables, toks, e), has_aux=True)(jnp.zeros((2, 3, M.B, M.T, M.W)))
    rows = [(0, 0)] + [(b, r) for b in range(2) for r in (1, 2)]

    def rms(a):
        return float(np.sqrt(np.mean(np.square(np.asarray(a)))))
    return [rms(acts[b, r]) for b, r in rows], [rms(adjoints[b, r]) for b, r in rows]


def test_a_post_attention_norm_is_refused_when_the_attention_is_named():
    variables, loss_fn, _ = case(post=True, scale=1.0)
    with pytest.raises(SiteSpecError, match="post-attention norm") as err:
        observe_residual_health(loss_fn, variables, M.tokens(), sites=ResidualSites(r"layers_(\d+)", "attention"))
    assert "'attention'" in str(err.value) and "goes into" in str(err.value)


def test_a_post_attention_norm_named_as_the_added_submodule_is_observed_exactly():
    variables, loss_fn, reference = case(post=True, scale=1.0)
    toks = M.tokens(1)
    report = observe_residual_health(loss_fn, variables, toks,
                                     sites=ResidualSites(r"layers_(\d+)", "post_attention_norm"))
    want_a, want_g = brute_force(reference, variables, toks)
    assert [r.activation_rms for r in report.sites] == pytest.approx(want_a, rel=TOL, abs=0)
    assert [r.adjoint_rms for r in report.sites] == pytest.approx(want_g, rel=TOL, abs=0)


def test_a_residual_multiplier_is_found_and_the_mid_site_is_the_multiplied_sum():
    variables, loss_fn, reference = case(post=False, scale=0.25)
    toks = M.tokens(2)
    report = observe_residual_health(loss_fn, variables, toks, sites=ResidualSites(r"layers_(\d+)", "attention"))
    want_a, want_g = brute_force(reference, variables, toks)
    assert [r.activation_rms for r in report.sites] == pytest.approx(want_a, rel=TOL, abs=0)
    assert [r.adjoint_rms for r in report.sites] == pytest.approx(want_g, rel=TOL, abs=0)
