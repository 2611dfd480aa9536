# SPDX-License-Identifier: MIT
"""RoPE's rotations (csrc/ops/rope.c) on every kernel path: the rotated query and key heads equal
the §5.2 text computed here from pydepth's own sin, cos and pow, and their adjoints (the inverse
rotation) are the same bits on every path, for head widths a multiple of 8 (four pairs per AVX-512
vector) and others, at segment-local positions."""

from __future__ import annotations

import numpy as np
import pytest

import pydepth as pd
from pydepth._native import _elementary, _runtime
from conftest import bits, kernel_paths


PATHS = kernel_paths()
WIDTHS = [4, 6, 8, 12, 16, 24]  # head widths D


def canon(v: float) -> float:
    return 0.0 if v == 0.0 else v


def rotated(heads, positions, D, base):
    """§5.2 pair by pair: (l*c - r*s, l*s + r*c) at each position's angle."""
    out = np.empty_like(heads)
    for j in range(D // 2):
        inv = _elementary.pow_float(base, (-2.0 * j) / D)
        for idx in np.ndindex(*heads.shape[:-1]):
            angle = float(positions[idx[0], idx[2]]) * inv
            s, c = canon(_elementary.sin_float(angle)), canon(_elementary.cos_float(angle))
            left, right = heads[(*idx, 2 * j)], heads[(*idx, 2 * j + 1)]
            out[(*idx, 2 * j)] = canon(left * c - right * s)
            out[(*idx, 2 * j + 1)] = canon(left * s + right * c)
    return out


def run(D):
    """A packed batch (segment-local positions) through one block: rotated heads and adjoints."""
    cfg = pd.DecoderConfig(40, 2 * D, 2, 8, 1, 16)
    model = pd.DecoderModel(cfg, pd.SplitMix64(D))
    tok = np.arange(2 * 11).reshape(2, 11) % 40
    seg = np.array([[0] * 4 + [1] * 7, [2] * 9 + [-1] * 2])
    batch = pd.Batch(tok, (tok + 1) % 40, seg)
    fwd = model.forward(batch)
    block = fwd.blocks[0]
    names = (
        "attention.query_heads",
        "attention.key_heads",
        "attention.rotated_query_heads",
        "attention.rotated_key_heads",
    )
    values = [block.value(n) for n in names]
    loss = fwd.loss()
    adjoints = loss.backward_with_selected_adjoints(values[:2])
    positions = np.array([[*range(4), *range(7)], [*range(9), 0, 0]])
    return [v.value.copy() for v in values], adjoints, positions, cfg.rope_base


@pytest.mark.parametrize("D", WIDTHS)
def test_rotations_and_their_adjoints_are_the_texts_bits_on_every_path(kernel_path_restored, D):
    results = []
    for path in PATHS:
        assert _runtime.force_kernel_path(path)
        (q, k, qr, kr), adjoints, positions, base = run(D)
        assert np.array_equal(bits(qr), bits(rotated(q, positions, D, base))), (path, D)
        assert np.array_equal(bits(kr), bits(rotated(k, positions, D, base))), (path, D)
        results.append([bits(a) for a in adjoints])
    for r in results[1:]:
        for x, y in zip(results[0], r):
            assert np.array_equal(x, y), D
