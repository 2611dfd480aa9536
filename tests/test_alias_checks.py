# SPDX-License-Identifier: MIT
"""Parameter values written behind the model's back (raw aliases, torch in-place writes, swaps,
flipped bits) are caught at the next reverse pass by one checksum on every kernel path; a view
let go while an exception is raised keeps that exception."""
import warnings

import numpy as np
import pytest

import pydepth
from conftest import kernel_paths, need_extra
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
        for path in kernel_paths():
            assert _runtime.force_kernel_path(path)
            assert model._core.checksum_all() == want, path
    finally:
        _runtime.force_kernel_path(old)

def test_one_flipped_bit_anywhere_is_caught_on_every_kernel_path():
    import ctypes
    from pydepth._native import _runtime
    old = _runtime.kernel_path()
    try:
        for path in kernel_paths():
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

# The products gather the checksums of the weights they pack (forward and reverse pass): shapes
# whose weights are not whole panels, span two k-blocks (F = 302 > kc) and, at 2 threads, split
# a product by rows (N = W = 18 < 2 panels of 16) and by columns; and a shape on the unpacked path.
_GATHER_SHAPES = {
    "packed": (DecoderConfig(50, 18, 3, 302, 2, 128), (2, 100)),
    "unpacked": (DecoderConfig(13, 12, 2, 13, 2, 8), (1, 4)),
}
_WEIGHTS = ("token_embedding.weight", "blocks.1.attention.query.weight", "blocks.1.attention.key.weight",
            "blocks.1.attention.value.weight", "blocks.1.attention.output.weight", "blocks.0.ffn.gate.weight",
            "blocks.0.ffn.up.weight", "blocks.0.ffn.down.weight")


@pytest.mark.parametrize("shape", sorted(_GATHER_SHAPES))
@pytest.mark.parametrize("threads", [1, 2])
def test_one_flipped_bit_in_the_last_value_of_a_packed_weight_is_caught_on_every_path_and_thread_count(
        shape, threads):
    import ctypes
    from pydepth._native import _runtime
    cfg, (batch, length) = _GATHER_SHAPES[shape]
    tokens = np.arange(batch * length).reshape(batch, length) % cfg.vocabulary_size
    old_path, old_threads = _runtime.kernel_path(), pydepth.get_num_threads()
    try:
        pydepth.set_num_threads(threads)
        for path in kernel_paths():
            assert _runtime.force_kernel_path(path)
            for name in _WEIGHTS:
                model = DecoderModel(cfg, SplitMix64(7))
                loss = model.forward(tokens).loss((tokens + 1) % cfg.vocabulary_size)
                loss.backward()  # unchanged values: the gathered sums equal the recorded ones
                p = model.parameter(name)
                flipped = p.value.copy()
                flipped.reshape(-1).view(np.uint64)[-1] ^= np.uint64(1)
                ctypes.memmove(p.value.ctypes.data, flipped.ctypes.data, flipped.nbytes)
                grads = [q.grad.copy() for q in model.parameters]
                with pytest.raises(pydepth.StaleOperandError, match=rf"{name.replace('.', chr(92) + '.')}.*alias"):
                    loss.backward()
                for q, before in zip(model.parameters, grads):  # the refused pass left no trace
                    assert np.array_equal(q.grad.view(np.uint64), before.view(np.uint64)), (path, name)
    finally:
        _runtime.force_kernel_path(old_path)
        pydepth.set_num_threads(old_threads)


@pytest.mark.parametrize("shape", sorted(_GATHER_SHAPES))
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("keep", ["all", "training"])
def test_a_recorded_forward_keeps_each_parameters_checksum_by_definition_on_every_path_and_thread_count(
        shape, threads, keep):
    from pydepth._native import _runtime
    cfg, (batch, length) = _GATHER_SHAPES[shape]
    tokens = np.arange(batch * length).reshape(batch, length) % cfg.vocabulary_size
    model = DecoderModel(cfg, SplitMix64(11))
    want = [_checksum_by_definition(p.value) for p in model.parameters]
    old_path, old_threads = _runtime.kernel_path(), pydepth.get_num_threads()
    try:
        pydepth.set_num_threads(threads)
        for path in kernel_paths():
            assert _runtime.force_kernel_path(path)
            assert model.forward(tokens, keep=keep)._graph.recorded_checksums() == want, path
    finally:
        _runtime.force_kernel_path(old_path)
        pydepth.set_num_threads(old_threads)
