# SPDX-License-Identifier: MIT
"""A Flax NNX decoder whose layers are built with nnx.vmap and run with nnx.scan: depth scaling
(the NNX module is changed in place; its scaled weights are the guard, so a second scaling is refused), and the
residual-health report, observed on a private copy of the model.

    python examples/jax_nnx_health.py
"""
import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)  # before any array is made

from flax import nnx  # noqa: E402

import pydepth  # noqa: E402
from pydepth.jax import ResidualSites, apply_depth_scaling, observe_residual_health  # noqa: E402

VOCAB, WIDTH, HEADS, LAYERS = 64, 16, 2, 4
F64 = {"param_dtype": jnp.float64, "dtype": jnp.float64}  # Linear defaults to float32 params otherwise


class Block(nnx.Module):
    def __init__(self, rngs):
        self.norm1 = nnx.RMSNorm(WIDTH, rngs=rngs, **F64)
        self.attn = nnx.MultiHeadAttention(HEADS, WIDTH, use_bias=False, decode=False, rngs=rngs, **F64)
        self.norm2 = nnx.RMSNorm(WIDTH, rngs=rngs, **F64)
        self.up = nnx.Linear(WIDTH, 4 * WIDTH, use_bias=False, rngs=rngs, **F64)
        self.down = nnx.Linear(4 * WIDTH, WIDTH, use_bias=False, rngs=rngs, **F64)

    def __call__(self, x):
        h = x + self.attn(self.norm1(x), mask=nnx.make_causal_mask(x[..., 0]))
        return h + self.down(nnx.gelu(self.up(self.norm2(h))))


class Decoder(nnx.Module):
    def __init__(self, seed):
        self.embed = nnx.Embed(VOCAB, WIDTH, rngs=nnx.Rngs(seed), **F64)
        make = nnx.vmap(lambda key: Block(nnx.Rngs(key)), in_axes=0, out_axes=0)
        self.layers = make(jax.random.split(jax.random.PRNGKey(seed), LAYERS))  # leaves stacked on axis 0
        self.norm = nnx.RMSNorm(WIDTH, rngs=nnx.Rngs(seed), **F64)

    def __call__(self, tokens):
        @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
        def run(x, block):
            return block(x)
        return self.embed.attend(self.norm(run(self.embed(tokens), self.layers)))


def loss_fn(model, tokens):
    logits = model(tokens)[:, :-1]
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), tokens[:, 1:, None], axis=-1))


model = Decoder(0)
tokens = jax.random.randint(jax.random.PRNGKey(1), (4, 12), 0, VOCAB)
sites = ResidualSites("layers", attention="attn", layer_axis=0, attention_norm="norm1", mid_norm="norm2",
                      final_norm="norm")
before = observe_residual_health(loss_fn, model, tokens, sites=sites)

patterns = [r"\['layers'\]\['(?:attn'\]\['out|down)'\]\['kernel'\]"]
_, record = apply_depth_scaling(model, patterns=patterns, layer_axis=0, scheme="1/sqrt(2L)")
print(f"{record.scheme}: {len(record.tensors)} layer slices scaled by {record.tensors[0].factor:.6f}")
try:
    apply_depth_scaling(model, patterns=patterns, layer_axis=0, scheme="1/sqrt(2L)")
except pydepth.JaxAlreadyScaledError as err:
    print("second scaling refused:", err)

after = observe_residual_health(loss_fn, model, tokens, sites=sites)
print(after.to_table("NNX nnx.scan decoder after 1/sqrt(2L) scaling"))
print(f"last-site activation ratio: {before.sites[-1].activation_ratio:.4f} unscaled, "
      f"{after.sites[-1].activation_ratio:.4f} scaled")
