# SPDX-License-Identifier: MIT
"""A PyTorch float64 eager twin of pydepth's decoder, for benchmarks and cross-checks.

    python benchmarks/torch_decoder.py [--json]   # correctness check against pydepth

The model follows docs/numerics.md operation for operation in meaning, not
in rounding: token embedding, per block pre-norm RMSNorm -> causal multi-head attention
with RoPE (adjacent pairs, positions 0..T-1, optional grouped-query attention) -> residual
add, RMSNorm -> SwiGLU -> residual add; final RMSNorm; tied vocabulary head; mean
next-token cross entropy. Parameters use pydepth's names and [in, out] layout, so a
pydepth model's values can be loaded with ``TorchDecoder.from_pydepth``. Torch uses FMA
and blocked BLAS sums, so results agree with pydepth to ~1e-13 relative, not bit for bit.

Running the module checks loss and every gradient against pydepth on the tiny and
small benchmark shapes (and a grouped-query variant) and exits non-zero on a mismatch.
"""
from __future__ import annotations

import math
import sys
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F

Shape = Tuple[int, ...]

_GOLDEN = 0x9E3779B97F4A7C15
_MASK64 = (1 << 64) - 1


class TorchConfig:
    """Decoder dimensions, mirroring pydepth.DecoderConfig's fields (no validation beyond
    what the math needs)."""

    def __init__(self, vocabulary_size: int, model_width: int, heads: int,
                 feed_forward_width: int, layers: int, max_positions: int,
                 kv_heads: Optional[int] = None, rope_base: float = 10000.0,
                 rms_epsilon: float = 1e-6) -> None:
        self.vocabulary_size = vocabulary_size
        self.model_width = model_width
        self.heads = heads
        self.kv_heads = heads if kv_heads is None else kv_heads
        self.feed_forward_width = feed_forward_width
        self.layers = layers
        self.max_positions = max_positions
        self.rope_base = float(rope_base)
        self.rms_epsilon = float(rms_epsilon)
        if model_width % heads or (model_width // heads) % 2 or heads % self.kv_heads:
            raise ValueError("width/heads/kv_heads do not fit together")

    @property
    def head_width(self) -> int:
        """Features per head, model_width / heads."""
        return self.model_width // self.heads

    @property
    def kv_width(self) -> int:
        """Width of the key/value projections, kv_heads * head_width."""
        return self.kv_heads * self.head_width

    def parameter_layout(self) -> List[Tuple[str, Shape, Optional[Tuple[int, int]]]]:
        """(name, shape, xavier fans or None for a gain) in pydepth's declaration order."""
        v, w, f, kvd = self.vocabulary_size, self.model_width, self.feed_forward_width, self.kv_width
        out: List[Tuple[str, Shape, Optional[Tuple[int, int]]]] = [
            ("token_embedding.weight", (v, w), (v, w))]
        for b in range(self.layers):
            p = f"blocks.{b}."
            out += [(p + "attention_norm.gain", (w,), None),
                    (p + "attention.query.weight", (w, w), (w, w)),
                    (p + "attention.key.weight", (w, kvd), (w, kvd)),
                    (p + "attention.value.weight", (w, kvd), (w, kvd)),
                    (p + "attention.output.weight", (w, w), (w, w)),
                    (p + "ffn_norm.gain", (w,), None),
                    (p + "ffn.gate.weight", (w, f), (w, f)),
                    (p + "ffn.up.weight", (w, f), (w, f)),
                    (p + "ffn.down.weight", (f, w), (f, w))]
        out.append(("final_norm.gain", (w,), None))
        return out

    @classmethod
    def from_pydepth(cls, cfg: Any) -> TorchConfig:
        """Copies the fields of a pydepth.DecoderConfig."""
        return cls(cfg.vocabulary_size, cfg.model_width, cfg.heads, cfg.feed_forward_width,
                   cfg.layers, cfg.max_positions, kv_heads=cfg.kv_heads,
                   rope_base=cfg.rope_base, rms_epsilon=cfg.rms_epsilon)


def splitmix64_xavier(seed: int, layout: Sequence[Tuple[str, Shape, Optional[Tuple[int, int]]]],
                      chunk: int = 1 << 20) -> Tuple[Dict[str, np.ndarray], int]:
    """Reproduces pydepth's construction in numpy: SplitMix64 Xavier-uniform draws in
    declaration order (gains are 1.0 and draw nothing). Returns (values, final state).

    Used by the torch benchmark worker so that it computes the same function as the
    pydepth worker without importing pydepth (which would inflate its peak RSS)."""
    gamma = np.uint64(_GOLDEN)
    state = seed & _MASK64
    out: Dict[str, np.ndarray] = {}
    with np.errstate(over="ignore"):
        for name, shape, fans in layout:
            if fans is None:
                out[name] = np.ones(shape, dtype=np.float64)
                continue
            n = int(np.prod(shape))
            limit = math.sqrt(6.0 / float(fans[0] + fans[1]))
            flat = np.empty(n, dtype=np.float64)
            for lo in range(0, n, chunk):
                hi = min(n, lo + chunk)
                z = np.uint64(state) + np.arange(lo + 1, hi + 1, dtype=np.uint64) * gamma
                z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
                z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
                z = z ^ (z >> np.uint64(31))
                u = (z >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
                flat[lo:hi] = limit * (2.0 * u - 1.0)
            state = (state + n * _GOLDEN) & _MASK64
            out[name] = flat.reshape(shape)
    return out, state


def rope_tables(head_width: int, positions: int, base: float) -> Tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables [positions, head_width/2], angle = p * base**(-2j/D)."""
    half = head_width // 2
    inv = np.array([math.pow(base, (-2.0 * j) / head_width) for j in range(half)])
    angle = np.arange(positions, dtype=np.float64)[:, None] * inv[None, :]
    return torch.from_numpy(np.cos(angle)), torch.from_numpy(np.sin(angle))


def rms_norm(x: torch.Tensor, gain: torch.Tensor, eps: float) -> torch.Tensor:
    """x * rsqrt(mean(x^2) + eps) * gain over the last axis."""
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * gain


def apply_rope(a: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotates adjacent feature pairs (2j, 2j+1) of a [B, H, T, D] tensor by position t."""
    b, h, t, d = a.shape
    pairs = a.reshape(b, h, t, d // 2, 2)
    left, right = pairs[..., 0], pairs[..., 1]
    c, s = cos[:t], sin[:t]
    return torch.stack((left * c - right * s, left * s + right * c), dim=-1).reshape(b, h, t, d)


class TorchDecoder:
    """Float64 eager decoder over a dict of leaf tensors named like pydepth's parameters."""

    def __init__(self, config: TorchConfig, params: Dict[str, torch.Tensor]) -> None:
        self.config = config
        self.params = params
        for p in params.values():
            p.requires_grad_(True)
        self._cos, self._sin = rope_tables(config.head_width, config.max_positions, config.rope_base)
        mask = torch.ones(config.max_positions, config.max_positions, dtype=torch.bool)
        self._future = torch.triu(mask, diagonal=1)

    @classmethod
    def random(cls, config: TorchConfig, seed: int = 0) -> TorchDecoder:
        """The idiomatic torch construction: allocate and Xavier-uniform initialize every
        weight with torch's own generator (different values from pydepth's)."""
        gen = torch.Generator().manual_seed(seed)
        params: Dict[str, torch.Tensor] = {}
        for name, shape, fans in config.parameter_layout():
            if fans is None:
                params[name] = torch.ones(shape, dtype=torch.float64)
            else:
                limit = math.sqrt(6.0 / float(fans[0] + fans[1]))
                params[name] = torch.empty(shape, dtype=torch.float64).uniform_(-limit, limit, generator=gen)
        return cls(config, params)

    @classmethod
    def from_arrays(cls, config: TorchConfig, arrays: Dict[str, np.ndarray]) -> TorchDecoder:
        """Wraps float64 numpy arrays (copied) as the parameters."""
        return cls(config, {n: torch.from_numpy(np.array(a, dtype=np.float64)) for n, a in arrays.items()})

    @classmethod
    def from_pydepth(cls, model: Any) -> TorchDecoder:
        """Copies a pydepth.DecoderModel's parameter values, so both compute the same function."""
        cfg = TorchConfig.from_pydepth(model.config)
        return cls(cfg, {p.name: torch.from_numpy(np.array(p.value)) for p in model.parameters})

    def parameters(self) -> Iterable[torch.Tensor]:
        """Leaf tensors in declaration order."""
        return self.params.values()

    def zero_grad(self) -> None:
        """Drops accumulated gradients (torch's default set_to_none behaviour)."""
        for p in self.params.values():
            p.grad = None

    def _attention(self, b: int, x: torch.Tensor) -> torch.Tensor:
        cfg, p = self.config, self.params
        pre = f"blocks.{b}.attention."
        bsz, t, w = x.shape
        h, kv, d = cfg.heads, cfg.kv_heads, cfg.head_width
        q = (x @ p[pre + "query.weight"]).reshape(bsz, t, h, d).transpose(1, 2)
        k = (x @ p[pre + "key.weight"]).reshape(bsz, t, kv, d).transpose(1, 2)
        v = (x @ p[pre + "value.weight"]).reshape(bsz, t, kv, d).transpose(1, 2)
        q = apply_rope(q, self._cos, self._sin)
        k = apply_rope(k, self._cos, self._sin)
        if kv != h:  # query head i reads kv head i // (h // kv)
            k = k.repeat_interleave(h // kv, dim=1)
            v = v.repeat_interleave(h // kv, dim=1)
        scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(d))
        scores = scores.masked_fill(self._future[:t, :t], float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        merged = (weights @ v).transpose(1, 2).reshape(bsz, t, w)
        return merged @ p[pre + "output.weight"]

    def _ffn(self, b: int, x: torch.Tensor) -> torch.Tensor:
        p = self.params
        pre = f"blocks.{b}.ffn."
        return (F.silu(x @ p[pre + "gate.weight"]) * (x @ p[pre + "up.weight"])) @ p[pre + "down.weight"]

    def logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits [B, T, V] for int64 token ids [B, T]."""
        cfg, p = self.config, self.params
        eps = cfg.rms_epsilon
        emb = p["token_embedding.weight"]
        x = emb[tokens]
        for b in range(cfg.layers):
            pre = f"blocks.{b}."
            x = x + self._attention(b, rms_norm(x, p[pre + "attention_norm.gain"], eps))
            x = x + self._ffn(b, rms_norm(x, p[pre + "ffn_norm.gain"], eps))
        return rms_norm(x, p["final_norm.gain"], eps) @ emb.t()

    def loss(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross entropy over all B*T positions."""
        lg = self.logits(tokens)
        return F.cross_entropy(lg.reshape(-1, lg.shape[-1]), targets.reshape(-1))


def benchmark_tokens(vocabulary_size: int, length: int, batch: int = 1) -> Tuple[np.ndarray, np.ndarray]:
    """Deterministic int64 tokens [batch, length] and their next-token targets."""
    seq = (np.arange(batch * (length + 1), dtype=np.int64) * 7919 + 11) % vocabulary_size
    seq = seq.reshape(batch, length + 1)
    return np.ascontiguousarray(seq[:, :-1]), np.ascontiguousarray(seq[:, 1:])


def compare_with_pydepth(cfg_args: Tuple[int, ...], kv_heads: Optional[int], seq_len: int,
                         seed: int = 1) -> Tuple[float, float, float, bool]:
    """Builds a pydepth model, loads its values into torch, runs forward+backward in both.

    Returns (loss relative difference, worst per-tensor relative gradient difference,
    worst value mismatch of the numpy SplitMix64 reproduction, True if it is bit-exact)."""
    import pydepth

    cfg = pydepth.DecoderConfig(*cfg_args, kv_heads=kv_heads)
    model = pydepth.DecoderModel(cfg, pydepth.SplitMix64(seed))
    tokens, targets = benchmark_tokens(cfg.vocabulary_size, seq_len)
    loss = model.forward(tokens).loss(targets)
    loss.backward()

    twin = TorchDecoder.from_pydepth(model)
    tl = twin.loss(torch.from_numpy(tokens), torch.from_numpy(targets))
    tl.backward()
    loss_rel = abs(tl.item() - loss.item()) / abs(loss.item())
    grad_rel = 0.0
    for p in model.parameters:
        ref = np.asarray(p.grad)
        got = twin.params[p.name].grad.numpy()
        scale = max(float(np.max(np.abs(ref))), 1e-300)
        grad_rel = max(grad_rel, float(np.max(np.abs(got - ref))) / scale)

    tcfg = TorchConfig.from_pydepth(cfg)
    values, _ = splitmix64_xavier(seed, tcfg.parameter_layout())
    exact = all(np.array_equal(values[p.name], np.asarray(p.value)) for p in model.parameters)
    worst = max(float(np.max(np.abs(values[p.name] - np.asarray(p.value)))) for p in model.parameters)
    return loss_rel, grad_rel, worst, exact


CHECK_SHAPES: List[Tuple[str, Tuple[int, ...], Optional[int], int]] = [
    # name, (V, W, H, F, L, P), kv_heads, T
    ("tiny", (266, 4, 1, 4, 8, 4), None, 4),
    ("small", (266, 16, 2, 20, 2, 16), None, 16),
    ("small-gqa", (266, 32, 4, 20, 2, 16), 2, 16),
    ("medium-1block", (4096, 128, 4, 384, 1, 128), None, 128),
]


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Prints the torch-vs-pydepth agreement per check shape (a markdown table, or one JSON
    list with --json); the exit status is non-zero when any relative difference is >= 1e-10."""
    args = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in args
    ok = True
    rows = []
    for name, cargs, kv, t in CHECK_SHAPES:
        lr, gr, worst, exact = compare_with_pydepth(cargs, kv, t)
        good = lr < 1e-10 and gr < 1e-10 and exact
        ok &= good
        rows.append({"shape": name, "loss_rel": lr, "grad_rel": gr, "init_bit_exact": exact,
                     "init_max_diff": worst, "ok": good})
    if as_json:
        import json
        print(json.dumps(rows))
    else:
        print("| shape | loss rel diff | worst grad rel diff | numpy SplitMix64 == pydepth init |")
        print("|---|---|---|---|")
        for r in rows:
            init = "bit-exact" if r["init_bit_exact"] else f"max diff {r['init_max_diff']:.2e}"
            print(f"| {r['shape']} | {r['loss_rel']:.2e} | {r['grad_rel']:.2e} | {init} |"
                  + ("" if r["ok"] else "  <-- MISMATCH"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
