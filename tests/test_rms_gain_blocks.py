# SPDX-License-Identifier: MIT
"""The RMSNorm gain gradient's column sums (csrc/ops/rmsnorm.c, docs/numerics.md §6.2, §8): on
every kernel path and thread count, widths that fill the AVX-512 loop's 64-column register
blocks, its 16-column steps and its masked last columns, with padded rows left out, the
attention norm's gain gradient (its normalized rows are recorded) is +0.0 plus the sum over the
counted rows in order of the output adjoint times the normalized value, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from pydepth import Batch, DecoderConfig, DecoderModel, SplitMix64
from conftest import bits, each_path_and_thread_count

# (width, heads): 64 + 16, 64 + 16 + 8 (masked), 128 + 12 (masked), 20 (masked alone)
SHAPES = [(80, 10), (88, 11), (140, 14), (20, 2)]


@pytest.mark.parametrize("width, heads", SHAPES)
def test_gain_gradients_are_the_rows_terms_added_in_order_on_every_path(width, heads):
    model = DecoderModel(DecoderConfig(50, width, heads, 24, 1, 16), SplitMix64(width))
    sources = [[(7 * i + 3) % 50 for i in range(n)] for n in (14, 9, 12)]
    batch = Batch.pack(sources, 13)  # padded positions: rows the gain leaves out
    valid = np.asarray(batch.valid).reshape(-1)
    assert not valid.all()
    for path, threads in each_path_and_thread_count():
        model.zero_grad()
        rec = model.forward(batch)
        norms = ["blocks.0.attention_norm"]  # the norm whose normalized rows are recorded
        outs = [rec.named(f"{n}.output") for n in norms]
        adjoints = rec.loss().backward_with_selected_adjoints(outs)
        for name, u in zip(norms, adjoints):
            nrm = rec.named(f"{name}.normalized").value.reshape(-1, width)
            u = u.reshape(-1, width)
            want = np.zeros(width)
            for row in np.flatnonzero(valid):  # rows in order, every column at once
                want = want + u[row] * nrm[row]
            grad = model.parameter(f"{name}.gain").grad
            assert np.array_equal(bits(grad), bits(0.0 + want)), (name, width, path, threads)
