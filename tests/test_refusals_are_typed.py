# SPDX-License-Identifier: MIT
"""Every refusal is a typed PydepthError naming the bad value, built-in type kept where natural
(issue 11, items 6 and 7)."""
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import pydepth
from pydepth import (Batch, DecoderConfig, DecoderModel, DepthInitializationRecord, NamedParameter,
                     PydepthError, SplitMix64)

CFG = DecoderConfig(13, 4, 2, 6, 2, 8)
TOKENS = np.array([[1, 2, 3], [4, 5, 6]])


@pytest.fixture(scope="module")
def model():
    return DecoderModel(CFG, SplitMix64(3))


def record_dict():
    init = pydepth.initialize_depth_scaled(pydepth.Fresh(CFG, pydepth.DepthInitializationBudget(10**6, 64),
                                                         SplitMix64(1)))
    return init.record.to_dict()


def _record_with(**changes):
    d = record_dict()
    d.update(changes)
    return d


@pytest.mark.parametrize("call, error, text", [
    (lambda: SplitMix64(-1), pydepth.GeneratorStateError, "-1"),
    (lambda: SplitMix64(2**64), pydepth.GeneratorStateError, str(2**64)),
    (lambda: SplitMix64(1.5), pydepth.GeneratorStateError, "1.5"),
    (lambda: SplitMix64(None), pydepth.GeneratorStateError, "None"),
    (lambda: SplitMix64(True), pydepth.GeneratorStateError, "True"),
    (lambda: SplitMix64.from_state(-5), pydepth.GeneratorStateError, "-5"),
    (lambda: pydepth.set_num_threads(0), pydepth.ThreadCountError, "0"),
    (lambda: pydepth.set_num_threads(1.5), pydepth.ThreadCountError, "1.5"),
    (lambda: pydepth.set_num_threads(1025), pydepth.ThreadCountError, "1025"),
    (lambda: DepthInitializationRecord.from_dict(None), pydepth.RecordFormatError, "NoneType"),
    (lambda: DepthInitializationRecord.from_dict(_record_with(factor=2**1100)), pydepth.RecordFormatError, "factor"),
    (lambda: DepthInitializationRecord.from_dict(_record_with(format="x")), pydepth.RecordFormatError, "'x'"),
    (lambda: DepthInitializationRecord.from_dict(_record_with(transformed_tensors="4")),
     pydepth.RecordFormatError, "'4'"),
    (lambda: DecoderConfig.from_dict(None), pydepth.ConfigError, "NoneType"),
    (lambda: DecoderConfig(13, 4, 2, 6, 2, 8, rope_base="1e4"), pydepth.ConfigError, "'1e4'"),
    (lambda: DecoderConfig(13, 4, 2, 6, 2, 8, rms_epsilon="0.1"), pydepth.ConfigError, "'0.1'"),
    (lambda: Batch.pack([[1, 2, 3]], 8, pad_id=2**63), pydepth.TokenError, str(2**63)),
    (lambda: Batch.pack([[1, 2, 3]], 2**70), pydepth.TokenError, str(2**70)),
    (lambda: Batch.pack([[1, 2, 3]], 10**7), pydepth.TokenError, str(10**7)),
    (lambda: Batch.pack(None, 8), pydepth.TokenError, "NoneType"),
    (lambda: Batch.pack([[1, 2, 3], [[1], [2, 3]]], 8), pydepth.TokenError, "source 1"),
    (lambda: Batch.pack([np.ma.masked_array([1, 2, 3], [0, 1, 0])], 8), pydepth.TokenError, "masked"),
    (lambda: Batch(np.array([[2**63]], dtype=np.uint64), [[0]], [[0]]), pydepth.TokenError, str(2**63)),
    (lambda: NamedParameter("ok", [[1.0], [2.0, 3.0]]), pydepth.ParameterLayoutError, "ok"),
    (lambda: NamedParameter("ok", np.ma.masked_array([1.0, 2.0], [0, 1])), pydepth.ParameterLayoutError, "masked"),
])
def test_refusal_is_typed_and_names_the_value(call, error, text):
    with pytest.raises(error) as info:
        call()
    assert isinstance(info.value, PydepthError)
    assert text in str(info.value)


def test_pack_accepts_any_iterable_of_sources():
    from_list = Batch.pack([[1, 2, 3], [4, 5]], 4)
    from_gen = Batch.pack((s for s in [[1, 2, 3], [4, 5]]), 4)
    assert np.array_equal(from_list.tokens, from_gen.tokens)


def test_loss_of_another_models_record_is_typed(model):
    other = DecoderModel(CFG, SplitMix64(4))
    with pytest.raises(pydepth.ForeignRecordError) as info:
        model.loss(other.forward(TOKENS), TOKENS)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("values", [np.ones((13, 4), dtype=bool), np.ones((13, 4)) + 1j,
                                    np.full((13, 4), "a"), np.full((13, 4), None, dtype=object),
                                    np.ma.masked_array(np.ones((13, 4)))])
def test_assign_refuses_what_the_constructor_refuses(model, values):
    p = model.parameter("token_embedding.weight")
    before, revision = p.snapshot(), p.revision
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(pydepth.ParameterLayoutError):
            p.assign(values)
        with pytest.raises(pydepth.ParameterLayoutError):
            NamedParameter("w", values)
    assert p.revision == revision and np.array_equal(p.value, before)


def test_huge_max_positions_refusal_names_the_field():
    with pytest.raises(pydepth.AllocationError, match="max_positions"):
        DecoderModel(DecoderConfig(10, 4, 1, 4, 1, 2**63), SplitMix64(1))


def test_core_allocation_failure_names_a_real_count(model):
    from pydepth._native._translate import raise_core
    from pydepth._native._status import CoreError
    with pytest.raises(pydepth.AllocationError, match=r"1000 float64 values \(8000 bytes"):
        raise_core(CoreError(1, 1000))


def test_per_target_nll_of_a_released_record(model):
    fwd = model.forward(TOKENS)
    fwd.loss(TOKENS)
    fwd.release()
    with pytest.raises(pydepth.GraphReleasedError):
        _ = fwd.per_target_nll
    with pytest.raises(pydepth.GraphReleasedError):
        _ = fwd.mean_loss


def test_masked_tokens_are_refused(model):
    with pytest.raises(pydepth.TokenError, match="masked"):
        model.forward(np.ma.masked_array(TOKENS, TOKENS > 3))


@pytest.mark.parametrize("record", ["no", 0, 1, "False"])
def test_forward_record_must_be_a_bool(model, record):
    with pytest.raises(pydepth.ArgumentTypeError, match="record"):
        model.forward(TOKENS, record=record)


def test_unknown_names_are_typed_key_errors(model):
    with pytest.raises(pydepth.UnknownNameError) as info:
        model.parameter("nope")
    assert isinstance(info.value, KeyError) and "nope" in str(info.value)
    with pytest.raises(pydepth.UnknownNameError):
        model.forward(TOKENS).named("blocks.0.nope")


def test_bad_thread_variable_does_not_break_the_import(tmp_path):
    env = dict(os.environ, PYDEPTH_NUM_THREADS="0")
    out = subprocess.run([sys.executable, "-c", "import pydepth"], capture_output=True, text=True,
                         env=env, cwd=tmp_path)
    assert out.returncode == 0 and "PYDEPTH_NUM_THREADS" in out.stderr
