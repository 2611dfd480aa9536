# SPDX-License-Identifier: MIT
"""The head split and merge (csrc/ops/heads.c) on every kernel path, heads a multiple of eight
wide or not (AVX-512 copies those a vector at a time): exact relabellings between [B, T, Hn*D]
rows and [B, Hn, T, D] heads, the same bits everywhere, and a non-finite value named as the
separate check names it (docs/numerics.md §5.3, §8)."""

from __future__ import annotations

import numpy as np
import pytest

import pydepth
from pydepth import DecoderConfig, DecoderModel, SplitMix64
from conftest import bits, each_path_and_thread_count

# (width, heads, kv_heads): heads 8, 16, 24 and 6 wide, grouped keys and values or not
SHAPES = [(32, 4, None), (32, 2, 1), (48, 2, None), (24, 4, 2)]
IDS = np.arange(3, 33).reshape(2, 15) % 40  # two sequences: a chunk of rows can cross from one to the next
NAMES = ("attention.query_heads", "attention.key_heads", "attention.value_heads", "attention.merged")


def _model(width, heads, kv):
    return DecoderModel(DecoderConfig(40, width, heads, 20, 2, 16, kv_heads=kv), SplitMix64(width + heads))


@pytest.mark.parametrize("width, heads, kv", SHAPES)
def test_the_merged_rows_are_the_head_outputs_relabelled_exactly_on_every_path_and_thread_count(width, heads, kv):
    model = _model(width, heads, kv)
    for path, threads in each_path_and_thread_count():
        rec = model.forward(IDS)
        for i in range(model.config.layers):
            heads_out = rec.named(f"blocks.{i}.attention.head_outputs").value  # [B, H, T, D]
            merged = rec.named(f"blocks.{i}.attention.merged").value            # [B, T, H*D]
            want = heads_out.transpose(0, 2, 1, 3).reshape(merged.shape)
            assert np.array_equal(bits(merged), bits(want)), (path, threads)


@pytest.mark.parametrize("width, heads, kv", SHAPES)
def test_the_split_and_merged_values_and_the_gradients_are_the_same_bits_on_every_path(width, heads, kv):
    model = _model(width, heads, kv)
    seen = {}
    for path, threads in each_path_and_thread_count():
        model.zero_grad()
        rec = model.forward(IDS)
        rec.loss(np.roll(IDS, -1, axis=1)).backward()
        got = [bits(rec.named(f"blocks.{i}.{n}").value) for i in range(model.config.layers) for n in NAMES]
        got += [bits(p.grad) for p in model.parameters]
        ref = seen.setdefault("first", (path, threads, got))
        assert all(np.array_equal(a, b) for a, b in zip(got, ref[2])), (path, threads, ref[:2])


@pytest.mark.parametrize("width, heads, kv", SHAPES)
def test_a_non_finite_split_value_is_named_at_the_same_index_on_every_path(width, heads, kv):
    messages = set()
    for path, threads in each_path_and_thread_count():
        model = _model(width, heads, kv)
        p = model.parameter("blocks.1.attention.value.weight")
        v = p.snapshot()
        v[:, -1] = -1.7e308  # the last column: the last head's last lane overflows
        p.assign(v)
        with pytest.raises(pydepth.NonFiniteError) as err:
            model.forward(IDS)
        assert " in blocks.1.attention.value_heads at flat index " in str(err.value), (path, threads)
        messages.add(str(err.value))
    assert len(messages) == 1, messages
