# SPDX-License-Identifier: MIT
"""A MaxText-shaped Flax Linen decoder — layers under nn.remat + nn.scan with parameters stacked
on axis 1, bfloat16 weights, DenseGeneral attention to heads and back, Flax's default
initializers, packed rows with segment ids — audited, depth-scaled and observed.

The point: the audit judges each weight by the std its own initializer gives (the feed-forward
down projection's lecun_normal fan-in is four times the others'), so the unscaled model reads
"unscaled" on the residual outputs and nothing else; after 1/sqrt(L) scaling every tensor is as
the scheme predicts, and the residual-health report counts only the real tokens of the packed
rows (segment id 0 is padding).

    python examples/jax_maxtext_shaped_health.py
"""
import jax
import jax.numpy as jnp
import flax.linen as nn

from pydepth.jax import ResidualSites, apply_depth_scaling, audit_initialization, observe_residual_health

VOCAB, WIDTH, HEADS, MLP, LAYERS = 128, 32, 4, 128, 4
BF16 = jnp.bfloat16


def segment_mask(segment_ids):
    """Causal attention inside each packed segment; padding (segment 0) attends to nothing."""
    same = segment_ids[:, :, None] == segment_ids[:, None, :]
    causal = jnp.tril(jnp.ones((segment_ids.shape[1],) * 2, bool))
    return (same & causal & (segment_ids[:, :, None] > 0))[:, None]  # [batch, 1, q, k]


class Attention(nn.Module):
    @nn.compact
    def __call__(self, x, mask):
        dense = dict(use_bias=False, param_dtype=BF16, dtype=BF16)
        q, k, v = (nn.DenseGeneral((HEADS, WIDTH // HEADS), name=n, **dense)(x) for n in ("query", "key", "value"))
        w = nn.dot_product_attention_weights(q, k, mask=mask, dtype=jnp.float32).astype(BF16)
        o = jnp.einsum("bhqk,bkhd->bqhd", w, v)
        return nn.DenseGeneral(WIDTH, axis=(-2, -1), name="out", **dense)(o)


class DecoderLayer(nn.Module):
    @nn.compact
    def __call__(self, x, mask):
        norm = dict(param_dtype=BF16, dtype=BF16)
        h = x + Attention(name="self_attention")(nn.RMSNorm(name="pre_self_attention_norm", **norm)(x), mask)
        z = nn.RMSNorm(name="post_self_attention_norm", **norm)(h)
        up = nn.Dense(MLP, use_bias=False, param_dtype=BF16, dtype=BF16, name="wi")(z)
        return h + nn.Dense(WIDTH, use_bias=False, param_dtype=BF16, dtype=BF16, name="wo")(nn.gelu(up)), None


class Decoder(nn.Module):
    @nn.compact
    def __call__(self, tokens, segment_ids):
        embed = nn.Embed(VOCAB, WIDTH, param_dtype=BF16, dtype=BF16, name="token_embedder")
        layers = nn.scan(nn.remat(DecoderLayer, prevent_cse=False), variable_axes={"params": 1},
                         split_rngs={"params": True}, in_axes=nn.broadcast, length=LAYERS)
        x, _ = layers(name="layers")(embed(tokens), segment_mask(segment_ids))
        return embed.attend(nn.RMSNorm(param_dtype=BF16, dtype=BF16, name="decoder_norm")(x)).astype(jnp.float32)


model = Decoder()
tokens = jax.random.randint(jax.random.PRNGKey(1), (2, 16), 1, VOCAB)
# two rows packed with three and two documents, the second row padded at the end
segment_ids = jnp.array([[1] * 5 + [2] * 6 + [3] * 5, [1] * 7 + [2] * 6 + [0] * 3])
variables = jax.jit(model.init)(jax.random.PRNGKey(0), tokens, segment_ids)


def loss_fn(variables, batch):
    toks, seg = batch
    logp = jax.nn.log_softmax(model.apply(variables, toks, seg)[:, :-1])
    picked = jnp.take_along_axis(logp, toks[:, 1:, None], axis=-1)[..., 0]
    keep = (seg[:, 1:] == seg[:, :-1]) & (seg[:, 1:] > 0)  # predict within a document only
    return -jnp.sum(jnp.where(keep, picked, 0.0)) / jnp.sum(keep)


patterns = [r"\['layers'\]\['self_attention'\]\['out'\]\['kernel'\]", r"\['layers'\]\['wo'\]\['kernel'\]"]
before = audit_initialization(variables, "1/sqrt(L)", patterns=patterns, layer_axis=1)
print(before.to_table())
print("before scaling, residual outputs follow:", before.follows, "| other tensors off:",
      sum(r.verdict != "ok" for r in before.rows if r.role != "residual-output"))
variables, record = apply_depth_scaling(variables, patterns=patterns, layer_axis=1)
after = audit_initialization(variables, "1/sqrt(L)", patterns=patterns, layer_axis=1)
print(f"scaled {len(record.tensors)} bfloat16 layer slices by {record.tensors[0].factor:.4f}; audit after:",
      "every tensor as the scheme predicts" if after.ok else after.findings)

sites = ResidualSites("layers", attention="self_attention", layer_axis=1,
                      attention_norm="pre_self_attention_norm", mid_norm="post_self_attention_norm",
                      final_norm="decoder_norm")
report = observe_residual_health(loss_fn, variables, (tokens, segment_ids), sites=sites, segment_ids=segment_ids)
print(report.to_table("MaxText-shaped decoder (bfloat16, remat + scan, packed), 1/sqrt(L) residual outputs"))
print(f"{report.valid_positions} real positions of {segment_ids.size} entered the RMS")
