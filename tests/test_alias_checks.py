# SPDX-License-Identifier: MIT
"""Parameter values written behind the model's back (raw aliases, torch in-place writes, swaps,
flipped bits) are caught at the next reverse pass by one checksum on every kernel path; a view
let go while an exception is raised keeps that exception."""
import warnings

import numpy as np
import pytest

import pydepth
from conftest import need_extra
from pydepth import (DecoderConfig, DecoderModel, SplitMix64)

def _aliased_model():
    model = DecoderModel(DecoderConfig(13, 4, 2, 6, 2, 8), SplitMix64(3))
    tokens = np.array([[1, 2, 3, 4]])
    return model, model.forward(tokens).loss((tokens + 1) % 13)

def test_a_write_through_a_raw_alias_is_caught_at_backward():
    import ctypes
    model, loss = _aliased_model()
    p = model.parameter("blocks.1.ffn.down.weight")
    scaled = p.value * 10.0
    ctypes.memmove(p.value.ctypes.data, scaled.ctypes.data, scaled.nbytes)  # bypasses assign()
    with pytest.raises(pydepth.StaleOperandError, match=r"blocks\.1\.ffn\.down\.weight.*alias"):
        loss.backward()
    assert all(not np.any(q.grad) for q in model.parameters)

def test_a_torch_in_place_write_is_caught_at_backward():
    need_extra("torch")
    import torch
    model, loss = _aliased_model()
    p = model.parameter("token_embedding.weight")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that the array is not writable, then writes
        torch.from_numpy(p.value).mul_(10.0)
    with pytest.raises(pydepth.StaleOperandError, match=r"token_embedding\.weight.*alias"):
        loss.backward()

def test_swapping_two_values_through_an_alias_is_caught():
    import ctypes
    model, loss = _aliased_model()
    p = model.parameter("final_norm.gain")
    p.assign(np.arange(1.0, 5.0))
    tokens = np.array([[1, 2, 3, 4]])
    loss = model.forward(tokens).loss((tokens + 1) % 13)
    swapped = p.value[::-1].copy()
    ctypes.memmove(p.value.ctypes.data, swapped.ctypes.data, swapped.nbytes)
    with pytest.raises(pydepth.StaleOperandError, match="alias"):
        loss.backward()

# the alias guard's checksum: one definition on every instruction-set path
_STEP, _MUL = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9


def _kernel_paths():
    from pydepth._native import _runtime
    old = _runtime.kernel_path()
    out = [p for p in ("baseline", "avx2", "avx512", "neon") if _runtime.force_kernel_path(p)]
    _runtime.force_kernel_path(old)
    return out

def _checksum_by_definition(values):
    """sum over i of (bits_i ^ i * STEP) * MUL, mod 2^64 (csrc/pd_checksum.c)."""
    with np.errstate(over="ignore"):
        bits = np.ascontiguousarray(values, dtype=np.float64).reshape(-1).view(np.uint64)
        key = np.arange(bits.size, dtype=np.uint64) * np.uint64(_STEP)
        return int(np.sum((bits ^ key) * np.uint64(_MUL), dtype=np.uint64))

def test_the_alias_checksum_is_one_sum_on_every_kernel_path():
    from pydepth._native import _runtime
    model = DecoderModel(DecoderConfig(13, 12, 2, 13, 2, 8), SplitMix64(5))  # sizes 13*12, 12, 13*12...
    want = 0
    for p in model.parameters:
        want ^= _checksum_by_definition(p.value)
    old = _runtime.kernel_path()
    try:
        for path in _kernel_paths():
            assert _runtime.force_kernel_path(path)
            assert model._core.checksum_all() == want, path
    finally:
        _runtime.force_kernel_path(old)

def test_one_flipped_bit_anywhere_is_caught_on_every_kernel_path():
    import ctypes
    from pydepth._native import _runtime
    old = _runtime.kernel_path()
    try:
        for path in _kernel_paths():
            assert _runtime.force_kernel_path(path)
            for index in (0, 5, 8, 11):  # vector lanes and the scalar tail of a 12-value gain
                for bit in (0, 31, 32, 52, 63):
                    model = DecoderModel(DecoderConfig(13, 12, 2, 13, 2, 8), SplitMix64(3))
                    tokens = np.array([[1, 2, 3, 4]])
                    loss = model.forward(tokens).loss((tokens + 1) % 13)
                    p = model.parameter("final_norm.gain")
                    flipped = p.value.copy()
                    flipped.view(np.uint64)[index] ^= np.uint64(1 << bit)
                    ctypes.memmove(p.value.ctypes.data, flipped.ctypes.data, flipped.nbytes)
                    with pytest.raises(pydepth.StaleOperandError, match=r"final_norm\.gain.*alias"):
                        loss.backward()
    finally:
        _runtime.force_kernel_path(old)

def test_a_view_let_go_while_an_exception_is_raised_keeps_that_exception():
    # `.value` is a property: calling its array drops the array's buffer view while the TypeError is set
    cfg = pydepth.DecoderConfig(266, 16, 2, 20, 2, 16)
    fwd = pydepth.DecoderModel(cfg, pydepth.SplitMix64(1)).forward(np.array([[0, 99, 100, 101]]))
    site = fwd.residual_sites[0]
    with pytest.raises(TypeError, match="not callable"):
        site.value()
    assert site.value.shape == (1, 4, 16)  # the record is intact and still readable
