# SPDX-License-Identifier: MIT
"""The loss's row pass (csrc/ops/loss.c: interleaved max chains, tail sums of four rows at a
time, vector division) against the independent reference implementation, bit for bit, where
it is easiest to get wrong: tied maximal logits and row counts around the group of
four, on every kernel path (masked rows: test_batch.py)."""
from __future__ import annotations


import numpy as np
import pytest

import pydepth as pd
from pydepth._native import _runtime
from conftest import bits, kernel_paths, reference_impl


@pytest.mark.parametrize("batch,tokens", [(1, 1), (1, 3), (1, 4), (1, 5), (2, 7), (3, 3)])
def test_tied_maximal_logits_match_the_reference_on_every_path(batch, tokens):
    ri = reference_impl()
    cfg = pd.DecoderConfig(37, 6, 3, 5, 1, 8)
    base = pd.DecoderModel(cfg, pd.SplitMix64(7))
    params = []
    for p in base.parameters:
        v = p.snapshot()
        if p.name == "token_embedding.weight":  # equal rows, far from the rest: tied extremes
            v[[3, 11, 12, 30]] = 8.0 * v[5]
            v[[4, 13, 14, 35]] = -8.0 * v[5]
        params.append(pd.NamedParameter(p.name, v))
    model = pd.DecoderModel.from_parameters(cfg, params)
    rng = np.random.default_rng(batch * 10 + tokens)
    ids = rng.integers(0, 37, size=(batch, tokens))
    targets = rng.integers(0, 37, size=(batch, tokens))
    old = _runtime.kernel_path()
    try:
        for path in kernel_paths():
            assert _runtime.force_kernel_path(path)
            fwd = model.forward(ids)
            logits = np.array(fwd.logits.value)
            loss = fwd.loss(targets)
            (dlogits,) = loss.backward_with_selected_adjoints([fwd.logits])
            want_loss, prob = ri.nll_mean(logits, targets)
            n = float(batch * tokens)
            want_d = np.where(prob * (1.0 / n) == 0.0, 0.0, prob * (1.0 / n)).reshape(-1, 37)
            rows = np.arange(batch * tokens)
            t = targets.reshape(-1)
            at = (prob.reshape(-1, 37)[rows, t] - 1.0) * (1.0 / n)
            want_d[rows, t] = np.where(at == 0.0, 0.0, at)
            assert bits(np.float64(loss.value)) == bits(np.float64(want_loss)), path
            assert np.array_equal(bits(dlogits.reshape(-1, 37)), bits(want_d)), path
            top = np.sort(logits.reshape(-1, 37), axis=1)
            assert np.any(top[:, -1] == top[:, -2])  # the case under test: a tied maximum
    finally:
        _runtime.force_kernel_path(old)
