# SPDX-License-Identifier: MIT
"""A MaxText-style Flax Linen decoder (layers under nn.remat + nn.scan, parameters stacked on
axis 1): depth scaling of the stacked output projections, the initialization audit, and the
residual-health report — no change to the model code.

    python examples/jax_linen_scan_health.py
"""
import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)  # before any array is made

import flax.linen as nn  # noqa: E402

from pydepth.jax import (ResidualSites, apply_depth_scaling, audit_initialization,  # noqa: E402
                         observe_residual_health)

VOCAB, WIDTH, HEADS, LAYERS = 64, 16, 2, 4
F64 = jnp.float64  # with x64 on, Dense still defaults to float32 parameters: say float64
INIT = nn.initializers.normal(0.02)  # one base std for every matrix (GPT-2 style)


class Attention(nn.Module):
    @nn.compact
    def __call__(self, x):
        mha = nn.MultiHeadDotProductAttention(HEADS, param_dtype=F64, dtype=F64, use_bias=False,
                                              kernel_init=INIT, name="mha")
        causal = nn.make_causal_mask(jnp.ones(x.shape[:2]))
        return mha(x, x, mask=causal)


class DecoderLayer(nn.Module):
    @nn.compact
    def __call__(self, x, _):
        h = x + Attention(name="self_attention")(nn.RMSNorm(param_dtype=F64, name="pre_self_attention_norm")(x))
        mlp = nn.Dense(4 * WIDTH, use_bias=False, param_dtype=F64, kernel_init=INIT, name="wi")
        out = nn.Dense(WIDTH, use_bias=False, param_dtype=F64, kernel_init=INIT, name="wo")
        return h + out(nn.gelu(mlp(nn.RMSNorm(param_dtype=F64, name="post_self_attention_norm")(h)))), None


class Decoder(nn.Module):
    @nn.compact
    def __call__(self, tokens):
        embed = nn.Embed(VOCAB, WIDTH, param_dtype=F64, embedding_init=INIT, name="token_embedder")
        layers = nn.scan(nn.remat(DecoderLayer, prevent_cse=False), variable_axes={"params": 1},
                         split_rngs={"params": True}, in_axes=nn.broadcast, length=LAYERS)
        x, _ = layers(name="layers")(embed(tokens), None)
        return embed.attend(nn.RMSNorm(param_dtype=F64, name="decoder_norm")(x))


model = Decoder()
tokens = jax.random.randint(jax.random.PRNGKey(1), (4, 12), 0, VOCAB)
variables = jax.jit(model.init)(jax.random.PRNGKey(0), tokens)


def loss_fn(variables, tokens):
    logits = model.apply(variables, tokens)[:, :-1]
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), tokens[:, 1:, None], axis=-1))


# the residual output projections: one stacked leaf each, layers on axis 1
patterns = [r"\['layers'\]\['self_attention'\]\['mha'\]\['out'\]\['kernel'\]", r"\['layers'\]\['wo'\]\['kernel'\]"]
print(audit_initialization(variables, "1/sqrt(L)", patterns=patterns, layer_axis=1).to_table())
variables, record = apply_depth_scaling(variables, patterns=patterns, layer_axis=1)
print(f"scaled {len(record.tensors)} layer slices by {record.tensors[0].factor:.6f} ({record.scheme})")
after = audit_initialization(variables, "1/sqrt(L)", 0.02, patterns=patterns, layer_axis=1)
print("audit after scaling:", "every matrix as the scheme predicts" if after.ok else after.findings)

sites = ResidualSites("layers", attention="self_attention", layer_axis=1,
                      attention_norm="pre_self_attention_norm", mid_norm="post_self_attention_norm",
                      final_norm="decoder_norm")
report = observe_residual_health(loss_fn, variables, tokens, sites=sites)
print(report.to_table("Linen nn.scan decoder, 1/sqrt(L) residual outputs"))
