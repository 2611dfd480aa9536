# SPDX-License-Identifier: MIT
"""The query's and key's head split fused with their rotation, and the inverse rotation fused
with the merge back into token rows (csrc/ops/rope.c, docs/numerics.md §5.2, §5.3, §8): on every
kernel path and thread count, heads 8 and 16 wide (AVX-512's vector sweep) and 6 wide (the
per-pair text), grouped keys or not, two sequences whose rows a chunk may cross, the recorded
heads are the product's rows relabelled, the rotated heads are §5.2's rotation of them, the
heads' adjoints are the inverse rotation of the rotated heads' adjoints, and the query weight's
gradient is the products of the merged adjoint rows, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from pydepth import DecoderConfig, DecoderModel, SplitMix64, elementary
from pydepth._native import _testing
from conftest import bits, each_path_and_thread_count

# (width, heads, kv_heads): heads 8, 16 and 6 wide
SHAPES = [(16, 2, None), (32, 2, 1), (24, 4, 2)]
IDS = np.arange(5, 27).reshape(2, 11) % 40


def canon(a):
    return np.where(a == 0.0, 0.0, a)


def tables(T, D, base):
    """§5.2's tables [T, D/2]: canon(sin(p * inv_j)), canon(cos(p * inv_j)), inv_j = base^((-2j)/D)."""
    half = D // 2
    inv = np.array([float(elementary.pow(np.array([base]), np.array([(-2.0 * j) / D]))[0]) for j in range(half)])
    angle = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]
    return canon(elementary.sin(angle.ravel()).reshape(T, half)), canon(elementary.cos(angle.ravel()).reshape(T, half))


def turn(a, s, c, inverse):
    """§5.2 on heads [B, Hn, T, D] (inverse: the VJP's rotation with the same entries)."""
    left, right = a[..., 0::2], a[..., 1::2]
    out = np.empty_like(a)
    if inverse:
        out[..., 0::2] = canon(left * c + right * s)
        out[..., 1::2] = canon(right * c - left * s)
    else:
        out[..., 0::2] = canon(left * c - right * s)
        out[..., 1::2] = canon(left * s + right * c)
    return out


@pytest.mark.parametrize("width, heads, kv", SHAPES)
def test_fused_split_rotations_and_merges_give_the_separate_passes_bits(width, heads, kv):
    cfg = DecoderConfig(40, width, heads, 20, 1, 16, kv_heads=kv)
    model = DecoderModel(cfg, SplitMix64(width + heads))
    B, T = IDS.shape
    D = width // heads
    s, c = tables(T, D, cfg.rope_base)
    for path, threads in each_path_and_thread_count():
        model.zero_grad()
        rec = model.forward(IDS)
        names = ("query_heads", "key_heads", "rotated_query_heads", "rotated_key_heads")
        vals = {n: rec.named(f"blocks.0.attention.{n}") for n in names}
        adj = dict(zip(names, rec.loss(np.roll(IDS, -1, axis=1)).backward_with_selected_adjoints(list(vals.values()))))
        an = np.ascontiguousarray(rec.named("blocks.0.attention_norm.output").value).reshape(B * T, width)
        wq = model.parameter("blocks.0.attention.query.weight").snapshot()
        q = np.zeros((B * T, width))
        _testing.matmul("nn", an, wq, q)
        label = (width, heads, kv, path, threads)
        split = q.reshape(B, T, heads, D).transpose(0, 2, 1, 3)
        assert np.array_equal(bits(vals["query_heads"].value), bits(split)), label
        for n in ("query", "key"):
            heads_v = vals[f"{n}_heads"].value
            assert np.array_equal(bits(vals[f"rotated_{n}_heads"].value), bits(turn(heads_v, s, c, False))), (n, label)
            assert np.array_equal(bits(adj[f"{n}_heads"]), bits(turn(adj[f"rotated_{n}_heads"], s, c, True))), (
                n,
                label,
            )
        merged = np.ascontiguousarray(adj["query_heads"].transpose(0, 2, 1, 3).reshape(B * T, width))
        want = np.zeros((width, width))
        for b in range(B):  # one product per sequence, the later ones accumulated (pd_backward.c)
            _testing.matmul("tn", an[b * T : (b + 1) * T], merged[b * T : (b + 1) * T], want, acc=b > 0)
        grad = model.parameter("blocks.0.attention.query.weight").grad
        assert np.array_equal(bits(grad), bits(0.0 + want)), label
