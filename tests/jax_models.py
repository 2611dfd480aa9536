# SPDX-License-Identifier: MIT
"""Tiny float64 decoders in Flax Linen, Flax NNX and Equinox, each unrolled and scanned, for the
JAX bridge's tests. Every block takes an optional explicit perturbation ``eps`` [3, *x] added at
its input, to its attention output and to its output, and then also returns the three site
activations: the brute-force reference differentiates the loss with respect to ``eps``."""
from functools import cache

import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)

import equinox as eqx  # noqa: E402
import flax.linen as nn  # noqa: E402
from flax import nnx  # noqa: E402

F64 = jnp.float64
V, W, HEADS, FF, T, B = 11, 8, 2, 16, 5, 2


def rms_norm(x, gain):
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * gain


def attend(x, wq, wk, wv, wo):
    """Causal multi-head attention on [..., T, W]."""
    def heads(a):
        return a.reshape((*a.shape[:-1], HEADS, W // HEADS))
    q, k, v = heads(x @ wq), heads(x @ wk), heads(x @ wv)
    s = jnp.einsum("...qhd,...khd->...hqk", q, k) / jnp.sqrt(W / HEADS)
    n = x.shape[-2]
    s = jnp.where(jnp.tril(jnp.ones((n, n), bool)), s, -jnp.inf)
    o = jnp.einsum("...hqk,...khd->...qhd", jax.nn.softmax(s, axis=-1), v)
    return o.reshape(x.shape) @ wo


def feed_forward(x, wi, wo):
    return jax.nn.silu(x @ wi) @ wo


def block_math(x, eps, attention, ffn, norm1, norm2):
    """Pre-norm block; with ``eps`` the three perturbed sites are returned too."""
    if eps is not None:
        x = x + eps[0]
    a = attention(norm1(x))
    if eps is not None:
        a = a + eps[1]
    mid = x + a
    out = mid + ffn(norm2(mid))
    if eps is not None:
        out = out + eps[2]
        return out, jnp.stack([x, mid, out])
    return out, None


def cross_entropy(logits, tokens):
    logp = jax.nn.log_softmax(logits[..., :-1, :], axis=-1)
    picked = jnp.take_along_axis(logp, tokens[..., 1:, None], axis=-1)
    return -jnp.mean(picked)


def tokens(seed=0, batch=B):
    return jax.random.randint(jax.random.PRNGKey(seed), (batch, T), 0, V)


# ------------------------------------------------------------------ Flax Linen
def _dense(features, name):
    return nn.Dense(features, use_bias=False, param_dtype=F64, dtype=F64, name=name,
                    kernel_init=nn.initializers.normal(0.3))


class LinenAttention(nn.Module):
    @nn.compact
    def __call__(self, x):
        return attend(x, *(self.param(n, nn.initializers.normal(0.3), (W, W), F64)
                           for n in ("query", "key", "value", "out")))


class LinenBlock(nn.Module):
    @nn.compact
    def __call__(self, x, eps=None):
        n1 = nn.RMSNorm(param_dtype=F64, dtype=F64, name="attention_norm")
        n2 = nn.RMSNorm(param_dtype=F64, dtype=F64, name="mlp_norm")
        att = LinenAttention(name="attention")
        wi, wo = _dense(FF, "wi"), _dense(W, "wo")
        return block_math(x, eps, att, lambda h: wo(jax.nn.silu(wi(h))), n1, n2)


class LinenScannedBlock(LinenBlock):
    """The scan body: (carry, eps slice) -> (carry, sites)."""


class LinenDecoder(nn.Module):
    """Unrolled (``layers_0``, ...) or MaxText-like scanned (``nn.remat`` + ``nn.scan`` with
    ``param_scan_axis=1``)."""
    layers: int = 3
    scanned: bool = False

    @nn.compact
    def __call__(self, toks, eps=None):
        embed = nn.Embed(V, W, param_dtype=F64, dtype=F64, name="embed",
                         embedding_init=nn.initializers.normal(1.0))
        x = embed(toks)
        if self.scanned:
            body = nn.remat(LinenScannedBlock, prevent_cse=False)
            stack = nn.scan(body, variable_axes={"params": 1}, split_rngs={"params": True},
                            in_axes=0, length=self.layers, metadata_params={nn.PARTITION_NAME: "layers"})
            x, sites = stack(name="decoder")(x, eps)
        else:
            sites = []
            for i in range(self.layers):
                x, s = LinenBlock(name=f"layers_{i}")(x, None if eps is None else eps[i])
                sites.append(s)
            sites = None if eps is None else jnp.stack(sites)
        x = nn.RMSNorm(param_dtype=F64, dtype=F64, name="final_norm")(x)
        return embed.attend(x), sites


@cache
def linen_model(scanned, layers=3, seed=0):
    """(module, variables, loss_fn, reference); cached: the variables are never changed in place."""
    model = LinenDecoder(layers=layers, scanned=scanned)
    variables = jax.jit(model.init)(jax.random.PRNGKey(seed), tokens())

    def loss_fn(v, toks):
        logits, _ = model.apply(v, toks)
        return cross_entropy(logits, toks)

    def reference(v, toks, eps):
        logits, sites = model.apply(v, toks, eps)
        return cross_entropy(logits, toks), sites
    return model, variables, loss_fn, reference


# ------------------------------------------------------------------ Flax NNX
class NnxAttention(nnx.Module):
    def __init__(self, rngs):
        self.query, self.key, self.value, self.out = (
            nnx.Linear(W, W, use_bias=False, param_dtype=F64, dtype=F64, rngs=rngs,
                       kernel_init=nnx.initializers.normal(0.3)) for _ in range(4))

    def __call__(self, x):
        return attend(x, self.query.kernel[...], self.key.kernel[...], self.value.kernel[...],
                      self.out.kernel[...])


class NnxBlock(nnx.Module):
    def __init__(self, rngs):
        self.attention_norm = nnx.RMSNorm(W, param_dtype=F64, dtype=F64, rngs=rngs)
        self.attention = NnxAttention(rngs)
        self.mlp_norm = nnx.RMSNorm(W, param_dtype=F64, dtype=F64, rngs=rngs)
        self.wi = nnx.Linear(W, FF, use_bias=False, param_dtype=F64, dtype=F64, rngs=rngs,
                             kernel_init=nnx.initializers.normal(0.3))
        self.wo = nnx.Linear(FF, W, use_bias=False, param_dtype=F64, dtype=F64, rngs=rngs,
                             kernel_init=nnx.initializers.normal(0.3))

    def __call__(self, x, eps=None):
        return block_math(x, eps, self.attention, lambda h: self.wo(jax.nn.silu(self.wi(h))),
                          self.attention_norm, self.mlp_norm)


class NnxDecoder(nnx.Module):
    """Unrolled (an ``nnx.List`` of blocks) or stacked with ``nnx.vmap`` and run with ``nnx.scan``."""

    def __init__(self, layers=3, scanned=False, seed=0):
        rngs = nnx.Rngs(seed)
        self.scanned = scanned
        self.embed = nnx.Embed(V, W, param_dtype=F64, dtype=F64, rngs=rngs,
                               embedding_init=nnx.initializers.normal(1.0))
        if scanned:
            @nnx.vmap(in_axes=0, out_axes=0)
            def make(key):
                return NnxBlock(nnx.Rngs(key))
            self.layers = make(jax.random.split(jax.random.PRNGKey(seed + 1), layers))
        else:
            self.layers = nnx.List([NnxBlock(rngs) for _ in range(layers)])
        self.final_norm = nnx.RMSNorm(W, param_dtype=F64, dtype=F64, rngs=rngs)

    def __call__(self, toks, eps=None):
        x = self.embed(toks)
        if self.scanned:
            @nnx.scan(in_axes=(nnx.Carry, 0, 0 if eps is not None else None), out_axes=(nnx.Carry, 0))
            def run(h, blk, e):
                return blk(h, e)
            x, sites = run(x, self.layers, eps)
        else:
            sites = []
            for i, blk in enumerate(self.layers):
                x, s = blk(x, None if eps is None else eps[i])
                sites.append(s)
            sites = None if eps is None else jnp.stack(sites)
        return self.embed.attend(self.final_norm(x)), sites


@cache
def nnx_model(scanned, layers=3, seed=0):
    """(model, loss_fn, reference); cached: clone the model (nnx.clone) before changing it."""
    model = NnxDecoder(layers, scanned, seed)

    def loss_fn(m, toks):
        return cross_entropy(m(toks)[0], toks)

    def reference(m, toks, eps):
        graphdef, state = nnx.split(m)  # a copy merged inside the caller's trace
        logits, sites = nnx.merge(graphdef, state, copy=True)(toks, eps)
        return cross_entropy(logits, toks), sites
    return model, loss_fn, reference


# ------------------------------------------------------------------ Equinox
def _matrix(key, fan_in, fan_out):
    return 0.3 * jax.random.normal(key, (fan_in, fan_out), dtype=F64)


class EqxNorm(eqx.Module):
    weight: jax.Array

    def __call__(self, x):
        return rms_norm(x, self.weight)


class EqxAttention(eqx.Module):
    wq: jax.Array
    wk: jax.Array
    wv: jax.Array
    wo: jax.Array

    def __call__(self, x):
        return attend(x, self.wq, self.wk, self.wv, self.wo)


class EqxBlock(eqx.Module):
    attention_norm: EqxNorm
    attention: EqxAttention
    mlp_norm: EqxNorm
    wi: jax.Array
    wo: jax.Array

    def __init__(self, key):
        k = jax.random.split(key, 6)
        self.attention_norm = EqxNorm(jnp.ones(W, F64))
        self.attention = EqxAttention(*(_matrix(k[i], W, W) for i in range(4)))
        self.mlp_norm = EqxNorm(jnp.ones(W, F64))
        self.wi, self.wo = _matrix(k[4], W, FF), _matrix(k[5], FF, W)

    def __call__(self, x, eps=None):
        return block_math(x, eps, self.attention, lambda h: feed_forward(h, self.wi, self.wo),
                          self.attention_norm, self.mlp_norm)


class EqxStack(eqx.Module):
    """Levanter-like: blocks built with ``filter_vmap`` (stacked leaves), run with ``lax.scan``."""
    blocks: EqxBlock

    def __call__(self, x, eps=None):
        dynamic, static = eqx.partition(self.blocks, eqx.is_array)

        def step(h, xs):
            params, e = xs
            return eqx.combine(params, static)(h, e)
        return jax.lax.scan(step, x, (dynamic, eps))


class EqxDecoder(eqx.Module):
    embed: jax.Array
    layers: object
    final_norm: EqxNorm
    scanned: bool = eqx.field(static=True)

    def __init__(self, layers=3, scanned=False, seed=0):
        keys = jax.random.split(jax.random.PRNGKey(seed), layers + 1)
        self.embed = jax.random.normal(keys[0], (V, W), dtype=F64)
        self.scanned = scanned
        if scanned:
            self.layers = EqxStack(eqx.filter_vmap(EqxBlock)(keys[1:]))
        else:
            self.layers = [EqxBlock(k) for k in keys[1:]]
        self.final_norm = EqxNorm(jnp.ones(W, F64))

    def __call__(self, toks, eps=None):
        """One example: tokens [T] -> logits [T, V]."""
        x = self.embed[toks]
        if self.scanned:
            x, sites = self.layers(x, eps)
        else:
            sites = []
            for i, blk in enumerate(self.layers):
                x, s = blk(x, None if eps is None else eps[i])
                sites.append(s)
            sites = None if eps is None else jnp.stack(sites)
        return self.final_norm(x) @ self.embed.T, sites


@cache
def eqx_model(scanned, layers=3, seed=0):
    """(model, loss_fn, reference); cached (Equinox modules are immutable)."""
    model = EqxDecoder(layers, scanned, seed)

    def loss_fn(m, toks):
        logits = jax.vmap(lambda t: m(t)[0])(toks)
        return cross_entropy(logits, toks)

    def reference(m, toks, eps):
        logits, sites = jax.vmap(lambda t, e: m(t, e))(toks, eps)
        return cross_entropy(logits, toks), sites
    return model, loss_fn, reference


# ------------------------------------------------------------------ a twin of pydepth's decoder
class TwinNorm(eqx.Module):
    gain: jax.Array
    eps: float = eqx.field(static=True)

    def __call__(self, x):
        return x * jnp.exp(-0.5 * jnp.log(jnp.mean(x * x, axis=-1, keepdims=True) + self.eps)) * self.gain


class TwinAttention(eqx.Module):
    query: jax.Array
    key: jax.Array
    value: jax.Array
    output: jax.Array
    cos: jax.Array
    sin: jax.Array
    heads: int = eqx.field(static=True)

    def _rope(self, a):
        left, right = a[..., 0::2], a[..., 1::2]
        return jnp.stack((left * self.cos - right * self.sin, left * self.sin + right * self.cos),
                         axis=-1).reshape(a.shape)

    def __call__(self, x):
        b, t, w = x.shape
        d = w // self.heads

        def split(a):
            return a.reshape(b, t, self.heads, d).transpose(0, 2, 1, 3)
        q, k, v = split(x @ self.query), split(x @ self.key), split(x @ self.value)
        q, k = self._rope(q), self._rope(k)
        s = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / jnp.sqrt(float(d)))
        s = jnp.where(jnp.tril(jnp.ones((t, t), bool)), s, -jnp.inf)
        o = (jax.nn.softmax(s, axis=-1) @ v).transpose(0, 2, 1, 3).reshape(b, t, w)
        return o @ self.output


class TwinFeedForward(eqx.Module):
    gate: jax.Array
    up: jax.Array
    down: jax.Array

    def __call__(self, x):
        return (jax.nn.silu(x @ self.gate) * (x @ self.up)) @ self.down


class TwinBlock(eqx.Module):
    attention_norm: TwinNorm
    attention: TwinAttention
    ffn_norm: TwinNorm
    ffn: TwinFeedForward

    def __call__(self, x):
        mid = x + self.attention(self.attention_norm(x))
        return mid + self.ffn(self.ffn_norm(mid))


class Twin(eqx.Module):
    """pydepth's decoder (no packing, no padding) in Equinox, from a DecoderModel's values."""
    token_embedding: jax.Array
    blocks: list
    final_norm: TwinNorm

    def __call__(self, toks):
        x = self.token_embedding[toks]
        for block in self.blocks:
            x = block(x)
        return self.final_norm(x) @ self.token_embedding.T


def twin_of(model, tokens_per_row):
    """The Equinox twin of a pydepth.DecoderModel (kv_heads == heads) for rows of this length."""
    import math

    import numpy as np
    cfg = model.config
    p = {q.name: jnp.asarray(q.snapshot()) for q in model.parameters}
    d = cfg.model_width // cfg.heads
    inv = [math.pow(cfg.rope_base, (-2.0 * j) / d) for j in range(d // 2)]
    cos = np.array([[math.cos(float(t) * f) for f in inv] for t in range(tokens_per_row)])
    sin = np.array([[math.sin(float(t) * f) for f in inv] for t in range(tokens_per_row)])
    eps = cfg.rms_epsilon

    def block(b):
        n = f"blocks.{b}."
        att = TwinAttention(*(p[n + f"attention.{m}.weight"] for m in ("query", "key", "value", "output")),
                            jnp.asarray(cos), jnp.asarray(sin), cfg.heads)
        ffn = TwinFeedForward(*(p[n + f"ffn.{m}.weight"] for m in ("gate", "up", "down")))
        return TwinBlock(TwinNorm(p[n + "attention_norm.gain"], eps), att, TwinNorm(p[n + "ffn_norm.gain"], eps), ffn)
    return Twin(p["token_embedding.weight"], [block(b) for b in range(cfg.layers)],
                TwinNorm(p["final_norm.gain"], eps))


def twin_loss(twin, batch):
    toks, targets = batch
    logp = jax.nn.log_softmax(twin(toks), axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, targets[..., None], axis=-1))
