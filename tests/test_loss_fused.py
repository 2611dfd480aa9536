# SPDX-License-Identifier: MIT
"""The loss rows' fused passes (csrc/ops/loss.c, docs/numerics.md §5.7): the shift folded into
the exps' sweep (pd_exp_shifted_array, docs/numerics-elementary.md §7.3) gives the bits of the
shift then the array exp and finds the same first zero shift, on every exp path, at every length
and tail position; and the tail sums of sixteen rows in vector lanes give the reference's loss
and adjoint bits at odd vocabulary widths and row counts around the groups of four, eight and sixteen,
on every kernel path and exp path."""

from __future__ import annotations

import numpy as np
import pytest

import pydepth as pd
from pydepth._native import _elementary, _runtime
from conftest import EXP_PATHS, bits, kernel_paths, reference_impl, scalar_exp


@pytest.fixture
def exp_path_restored():
    """Restores the array exp's path a test changes."""
    before = _elementary.exp_array_path()
    yield
    assert _elementary.force_exp_array_path(before)


def first_zero(d):
    """The first index of a zero difference, len(d) when none (the shift's own definition)."""
    at = np.flatnonzero(d == 0.0)
    return int(at[0]) if at.size else d.size


def rows_with_ties(n, rng):
    """A row with a tied maximum, signed zeros, a far value and, for the mixed groups, exps
    outside the eight-lane class (differences below -745 and tiny ones)."""
    x = rng.uniform(-8.0, 8.0, n)
    if n > 2:
        x[rng.integers(0, n, 2)] = x.max() + 1.0  # a tied maximum
        x[rng.integers(0, n)] = -0.0
        x[rng.integers(0, n)] = -900.0  # its exp underflows: a scalar lane in the group
    return x


@pytest.mark.parametrize("path", EXP_PATHS)
def test_shifted_exps_give_the_shift_then_exp_bits_and_first_zero(exp_path_restored, path):
    if not _elementary.force_exp_array_path(path):
        pytest.skip(f"no {path} path here")
    rng = np.random.default_rng(3901)
    for n in [*range(0, 41), 63, 64, 65, 266]:
        for kind in ("max", "zero max", "tiny gap", "not in row"):
            x = rows_with_ties(n, rng)
            mx = float(x.max()) if n else 0.0
            if kind == "zero max" and n:
                x = np.minimum(x, 0.0)
                x[rng.integers(0, n)] = 0.0
                mx = 0.0
            elif kind == "tiny gap" and n:  # differences of a few ulps: §2.1's tiny class
                x[:] = 2.0**-1000 * rng.integers(1, 4, n)
                mx = float(x.max())
            elif kind == "not in row":  # no zero shift
                mx = float(x.max()) + 0.5 if n else 1.0
            d = x - mx
            want = scalar_exp(d)
            out = np.full(n + 9, -123.25)  # a group of guards past the end
            first = _elementary.exp_shifted_into(x, mx, out[:n])
            label = f"{path}, n={n}, {kind}"
            assert np.array_equal(bits(out[:n]), bits(want)), label
            assert first == first_zero(d), label
            assert np.all(out[n:] == -123.25), f"{label}: wrote past the end"
            y = x.copy()
            assert _elementary.exp_shifted_into(y, mx, y) == first_zero(d), label
            assert np.array_equal(bits(y), bits(want)), f"{label}, in place"


def tied_model(V, tokens):
    """A one-block model whose embedding has tied extreme rows (tied maximal logits)."""
    cfg = pd.DecoderConfig(V, 6, 3, 5, 1, max(tokens, 8))
    base = pd.DecoderModel(cfg, pd.SplitMix64(V))
    params = []
    for p in base.parameters:
        v = p.snapshot()
        if p.name == "token_embedding.weight":
            v[[1, V - 2]] = 8.0 * v[0]
            v[[2, V - 1]] = -8.0 * v[0]
        params.append(pd.NamedParameter(p.name, v))
    return pd.DecoderModel.from_parameters(cfg, params)


@pytest.mark.parametrize("V", [3, 7, 9, 17, 33])
def test_loss_and_adjoint_match_the_reference_at_odd_widths_and_row_counts(kernel_path_restored, exp_path_restored, V):
    ri = reference_impl()
    paths = [p for p in ("avx512-fma", "scalar") if p in EXP_PATHS]
    for batch, tokens in [(1, 1), (1, 3), (1, 7), (1, 8), (1, 9), (2, 8), (1, 17), (3, 11)]:
        model = tied_model(V, tokens)
        rng = np.random.default_rng(V * 100 + batch * 10 + tokens)
        ids = rng.integers(0, V, size=(batch, tokens))
        targets = rng.integers(0, V, size=(batch, tokens))
        n = batch * tokens
        for path in kernel_paths():
            assert _runtime.force_kernel_path(path)
            for exp_path in paths:
                if not _elementary.force_exp_array_path(exp_path):
                    continue
                fwd = model.forward(ids)
                logits = np.array(fwd.logits.value)
                loss = fwd.loss(targets)
                (dlogits,) = loss.backward_with_selected_adjoints([fwd.logits])
                want_loss, prob = ri.nll_mean(logits, targets)
                scaled = prob.reshape(-1, V) * (1.0 / n)
                want_d = np.where(scaled == 0.0, 0.0, scaled)
                rows, t = np.arange(n), targets.reshape(-1)
                at = (prob.reshape(-1, V)[rows, t] - 1.0) * (1.0 / n)
                want_d[rows, t] = np.where(at == 0.0, 0.0, at)
                label = (path, exp_path, batch, tokens)
                assert bits(np.float64(loss.value)) == bits(np.float64(want_loss)), label
                assert np.array_equal(bits(dlogits.reshape(-1, V)), bits(want_d)), label
