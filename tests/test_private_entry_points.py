# SPDX-License-Identifier: MIT
"""Anything importable is reachable: the Cython skin checks its inputs instead of reading or
writing past a buffer (issue 11, items 1 and 8)."""
import numpy as np
import pytest

import pydepth
from pydepth._native import _graph, _optim, _runtime, _status, _testing
from pydepth._native._nodes import LOGITS

CFG = pydepth.DecoderConfig(11, 4, 2, 6, 1, 8)


@pytest.mark.parametrize("rank", [5, 6, 9])
def test_parameter_of_any_rank_exports_its_values(rank):
    shape = tuple(range(1, rank + 1))
    values = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    p = pydepth.NamedParameter("w", values)
    assert p.value.shape == shape and p.grad.shape == shape
    assert np.array_equal(p.value.view(np.uint64), values.view(np.uint64))
    assert p.value.sum() == values.sum()
    assert not p.value.flags.writeable


@pytest.mark.parametrize("kind, a, b, c", [
    ("nn", (4, 4), (2, 2), (4, 4)),
    ("nn", (4, 3), (4, 4), (4, 4)),
    ("nt", (4, 4), (4, 2), (4, 4)),
    ("tn", (2, 4), (3, 4), (4, 4)),
    ("tn", (3, 1), (3, 4), (4, 4)),
])
def test_matmul_refuses_operands_that_do_not_fit(kind, a, b, c):
    with pytest.raises(ValueError, match=kind):
        _testing.matmul(kind, np.ones(a), np.ones(b), np.zeros(c))


def test_param_refuses_bad_shapes():
    for shape in [(-1,), (2**40, 2**40), ("3",), (1.5,)]:
        with pytest.raises((TypeError, ValueError, _status.CoreError)):
            _graph._Param(shape)


def _params(cfg, drop=0, wrong=None):
    layout = cfg.parameter_layout()
    out = [_graph._Param(shape) for _, shape in layout[:len(layout) - drop]]
    if wrong is not None:
        out[wrong] = _graph._Param((1,))
    return out


@pytest.mark.parametrize("drop, wrong", [(1, None), (0, 0), (0, 3), (0, 10)])
def test_model_and_draw_refuse_params_that_do_not_match_the_layout(drop, wrong):
    params = _params(CFG, drop, wrong)
    with pytest.raises(_status.CoreError) as info:
        _graph._Model(CFG._core_tuple(), params)
    assert info.value.code == 9  # PD_ERR_SHAPE
    rng = pydepth.SplitMix64(4)
    with pytest.raises(_status.CoreError):
        _graph.draw_parameters(CFG._core_tuple(), params, rng)
    assert rng.state == 4
    with pytest.raises(TypeError):
        _graph._Model(CFG._core_tuple(), [*params[:-1], "not a param"])


def test_graph_refuses_side_arrays_of_the_wrong_length():
    model = pydepth.DecoderModel(CFG, pydepth.SplitMix64(1))
    core = model._core
    ids = np.zeros((2, 3), dtype=np.int64)
    with pytest.raises(ValueError, match="valid"):
        _graph._Graph(core, ids, np.ones(2, dtype=np.uint8))
    with pytest.raises(ValueError, match="pos"):
        _graph._Graph(core, ids, None, np.zeros(5, dtype=np.uintp))
    with pytest.raises(ValueError, match="seg_start"):
        _graph._Graph(core, ids, None, None, np.zeros(1, dtype=np.uintp))
    with pytest.raises(TypeError):
        _graph._Graph(None, ids)
    with pytest.raises(_status.CoreError):
        _graph._Graph(core, np.zeros((0, 3), dtype=np.int64))
    for mode in (-1, 3, 2**31 - 1):
        with pytest.raises(_status.CoreError) as info:
            _graph._Graph(core, ids, record=mode)
        assert info.value.code == _status.STATUS_CODES["ERR_RECORD_MODE"] and info.value.value == mode
    g = _graph._Graph(core, ids)
    with pytest.raises(ValueError, match="targets"):
        g.attach_loss(np.zeros(2, dtype=np.int64))
    g.attach_loss(np.zeros(6, dtype=np.int64))
    with pytest.raises(ValueError, match="entries"):
        g.backward([(-1, LOGITS)], [np.zeros(3)])  # the logits hold 2*3*11
    with pytest.raises(ValueError, match="not in this graph"):
        g.backward([(7, 0)], [np.zeros(3)])
    with pytest.raises(ValueError, match="buffers"):
        g.backward([(-1, LOGITS)], [])
    out = np.zeros(2 * 3 * 11)
    assert g.backward([(-1, LOGITS)], [out]) == [True]
    g.release()
    assert g.value(-1, LOGITS) is None and g.value_shape(-1, LOGITS) is None
    with pytest.raises(_status.CoreError):
        g.backward([], [])


def test_set_num_threads_core_refuses_out_of_range():
    for bad in (0, -3, 1025):
        with pytest.raises(ValueError):
            _runtime.set_num_threads(bad)


def test_an_unknown_product_or_optimizer_kind_is_refused_by_name():
    with pytest.raises(ValueError, match="'xx'"):
        _testing.matmul("xx", np.ones((2, 2)), np.ones((2, 2)), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="'adam'"):
        _optim.optim_check("adam", (1e-3,))
    with pytest.raises(ValueError, match="'adam'"):
        _optim.optim_step("adam", [], [], (1e-3,), 1)


def test_every_optimizer_steps_through_a_row_of_the_skins_update_table():
    kinds = {cls._kind for cls in (pydepth.optim.SGD, pydepth.optim.AdamW)}
    assert kinds == set(_optim._UPDATES)
