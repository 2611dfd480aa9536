# SPDX-License-Identifier: MIT
"""A Levanter-style Equinox decoder (blocks built with filter_vmap, run with lax.scan, one
example per call and the batch vmapped in the loss): per-layer depth scaling, the audit naming
the scheme, and the residual-health report.

    python examples/jax_equinox_health.py
"""
import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)  # before any array is made

import equinox as eqx  # noqa: E402

from pydepth.jax import (ResidualSites, apply_depth_scaling, identify_scheme,  # noqa: E402
                         observe_residual_health)

VOCAB, WIDTH, HEADS, LAYERS, STD = 64, 16, 2, 4, 0.02


class Norm(eqx.Module):
    weight: jax.Array

    def __call__(self, x):
        return x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6) * self.weight


class Attention(eqx.Module):
    qkv: jax.Array
    out: jax.Array

    def __call__(self, x):  # x: [tokens, width]
        t = x.shape[0]
        q, k, v = (a.reshape(t, HEADS, -1) for a in jnp.split(x @ self.qkv, 3, axis=-1))
        s = jnp.einsum("qhd,khd->hqk", q, k) / jnp.sqrt(q.shape[-1])
        s = jnp.where(jnp.tril(jnp.ones((t, t), bool)), s, -jnp.inf)
        return jnp.einsum("hqk,khd->qhd", jax.nn.softmax(s, -1), v).reshape(t, -1) @ self.out


class Block(eqx.Module):
    ln1: Norm
    attn: Attention
    ln2: Norm
    up: jax.Array
    down: jax.Array

    def __init__(self, key):
        k = jax.random.split(key, 4)
        self.ln1, self.ln2 = Norm(jnp.ones(WIDTH)), Norm(jnp.ones(WIDTH))
        self.attn = Attention(STD * jax.random.normal(k[0], (WIDTH, 3 * WIDTH)),
                              STD * jax.random.normal(k[1], (WIDTH, WIDTH)))
        self.up = STD * jax.random.normal(k[2], (WIDTH, 4 * WIDTH))
        self.down = STD * jax.random.normal(k[3], (4 * WIDTH, WIDTH))

    def __call__(self, x):
        h = x + self.attn(self.ln1(x))
        return h + jax.nn.gelu(self.ln2(h) @ self.up) @ self.down


class Stacked(eqx.Module):
    blocks: Block  # every leaf has a leading layer axis

    def __call__(self, x):
        params, static = eqx.partition(self.blocks, eqx.is_array)
        return jax.lax.scan(lambda h, p: (eqx.combine(p, static)(h), None), x, params)[0]


class Decoder(eqx.Module):
    embed: jax.Array
    stack: Stacked
    norm: Norm

    def __init__(self, key):
        k0, k1 = jax.random.split(key)
        self.embed = STD * jax.random.normal(k0, (VOCAB, WIDTH))
        self.stack = Stacked(eqx.filter_vmap(Block)(jax.random.split(k1, LAYERS)))
        self.norm = Norm(jnp.ones(WIDTH))

    def __call__(self, tokens):  # one example: [tokens] -> [tokens, vocab]
        return self.norm(self.stack(self.embed[tokens])) @ self.embed.T


def loss_fn(model, tokens):
    logits = jax.vmap(model)(tokens)[:, :-1]
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), tokens[:, 1:, None], axis=-1))


model = Decoder(jax.random.PRNGKey(0))
tokens = jax.random.randint(jax.random.PRNGKey(1), (4, 12), 0, VOCAB)
patterns = [r"\.stack\.blocks\.(?:attn\.out|down)$"]
model, record = apply_depth_scaling(model, patterns=patterns, layer_axis=0, scheme="per-layer")
print(record.to_table())
print("the audit recognizes:", identify_scheme(model, STD, patterns=patterns, layer_axis=0, tolerance=0.25))

sites = ResidualSites("stack.blocks", attention="attn", layer_axis=0, attention_norm="ln1", mid_norm="ln2",
                      final_norm="norm")
print(observe_residual_health(loss_fn, model, tokens, sites=sites).to_table("Equinox scanned stack, per-layer"))
