# SPDX-License-Identifier: MIT
"""Attention's softmax rows and their VJP (csrc/ops/attn_rows.c): every kernel path gives the bits
of the scalar text of docs/numerics.md §5.3/§6.2 for every row length, segment start and padded
row, whole blocks of eight-lane groups or not, and names the same first non-finite score."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pydepth._native import _elementary, _runtime, _testing
from conftest import bits, kernel_paths


PATHS = kernel_paths()
EXTENTS = [*range(1, 18), 24, 31, 32, 33, 64]  # multiples of 8 take the AVX-512 block path
KAPPA = 1.0 / math.sqrt(8.0)


def canon(v: float) -> float:
    return 0.0 if v == 0.0 else v


def softmax_reference(raw, kappa):
    """One row's allowed scores, element by element as the scalar text computes them."""
    s = [x * kappa for x in raw]
    mx = -math.inf
    for v in s:
        if v > mx:
            mx = v
    d = [v - mx for v in s]
    first = next(j for j, v in enumerate(d) if v == 0.0)
    e = [_elementary.exp_float(v) for v in d]
    tail = 0.0
    for j, v in enumerate(e):
        if j != first:
            tail = tail + v
    return [canon(v / (1.0 + tail)) for v in e]


def layout(T, rng):
    """valid [T] and seg_start [T]: segments of random length, some positions padding."""
    valid, s0, start = np.zeros(T, np.uint8), np.zeros(T, np.uintp), 0
    for i in range(T):
        if rng.random() < 0.15:  # padding; the next valid position opens a segment
            start = i + 1
            continue
        if i > start and rng.random() < 0.2:
            start = i
        valid[i], s0[i] = 1, start
    return valid, s0


def scores(T, rng):
    """Raw scores with ties at the maximum, zeros of both signs, and garbage outside the keys."""
    w = rng.standard_normal((T, T)) * 4.0
    w[rng.random((T, T)) < 0.1] = -0.0
    w[rng.random((T, T)) < 0.1] = 0.0
    w[:, T // 2] = w[:, 0]  # a repeated value: ties for the first maximum
    return w


def weights_reference(w, valid, s0):
    out = np.zeros_like(w)
    for i in range(w.shape[0]):
        if valid[i]:
            out[i, s0[i] : i + 1] = softmax_reference(list(w[i, s0[i] : i + 1]), KAPPA)
    return out


def vjp_reference(p, ds, valid, s0):
    out = np.zeros_like(ds)
    for i in range(p.shape[0]):
        if not valid[i]:
            continue
        acc = 0.0
        for j in range(s0[i], i + 1):
            acc = acc + ds[i, j] * p[i, j]
        for j in range(s0[i], i + 1):
            out[i, j] = canon(p[i, j] * (ds[i, j] - acc)) * KAPPA
    return out


@pytest.mark.parametrize("path", PATHS)
def test_softmax_rows_give_the_scalar_texts_bits_at_every_extent(kernel_path_restored, path):
    assert _runtime.force_kernel_path(path)
    rng = np.random.default_rng(sum(map(ord, path)))
    for T in EXTENTS:
        valid, s0 = layout(T, rng)
        valid[rng.integers(T)] = 0  # at least one padded row
        w = scores(T, rng)
        want = weights_reference(w, valid, s0)
        assert _testing.attention_softmax_rows(w, valid, s0, KAPPA) == (True, 0, 0.0)
        assert np.array_equal(bits(w), bits(want)), (path, T)


@pytest.mark.parametrize("path", PATHS)
def test_softmax_vjp_rows_give_the_scalar_texts_bits_at_every_extent(kernel_path_restored, path):
    assert _runtime.force_kernel_path(path)
    rng = np.random.default_rng(sum(map(ord, path)) + 1)
    for T in EXTENTS:
        valid, s0 = layout(T, rng)
        p = weights_reference(scores(T, rng), valid, s0)
        ds = rng.standard_normal((T, T))
        ds[rng.random((T, T)) < 0.1] = -0.0
        want = vjp_reference(p, ds, valid, s0)
        _testing.attention_softmax_vjp_rows(p, ds, valid, s0, KAPPA)
        assert np.array_equal(bits(ds), bits(want)), (path, T)


@pytest.mark.parametrize("T", [13, 16])
def test_the_first_non_finite_score_in_row_order_is_named_on_every_path(kernel_path_restored, T):
    """Non-finite scores outside a row's keys are never read; the first one inside is named."""
    valid, s0 = np.ones(T, np.uint8), np.zeros(T, np.uintp)
    s0[6:] = 4  # rows 6.. attend to keys 4..i
    w0 = np.random.default_rng(T).standard_normal((T, T))
    w0[2, 5] = np.inf  # after row 2's last key
    w0[7, 1] = np.nan  # before row 7's first key
    w0[7, 6] = -np.inf  # the first inside
    w0[9, 4] = np.nan  # later in row order
    for path in PATHS:
        assert _runtime.force_kernel_path(path)
        w = w0.copy()
        ok, at, bad = _testing.attention_softmax_rows(w, valid, s0, KAPPA)
        assert (ok, at, bad) == (False, 7 * T + 6, -np.inf), path
