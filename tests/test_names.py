# SPDX-License-Identifier: MIT
"""Node kinds and status codes have one source, the C tables, and Python reads them."""
import pathlib
import re

import numpy as np
import pytest

import pydepth
from pydepth._native import _layout, _nodes, _status, _translate


def test_status_codes_are_the_c_table_in_order():
    codes = _status.STATUS_CODES
    assert codes["OK"] == 0
    assert sorted(codes.values()) == list(range(len(codes)))
    assert all(re.fullmatch(r"OK|ERR_[A-Z0-9_]+", name) for name in codes)


def test_every_error_status_has_a_translation():
    assert set(_status.STATUS_CODES) - {"OK"} == _translate.HANDLED


def test_unknown_status_is_still_a_pydepth_error():
    with pytest.raises(pydepth.PydepthError, match="status 9999"):
        _translate.raise_core(_status.CoreError(9999))


def test_block_kinds_are_the_trace_order(reference_trace):
    fx = reference_trace["fixtures"][1]
    names = [e["name"] for e in fx["initialized"]["forward"]]
    block0 = [n[len("blocks.0."):] for n in names if n.startswith("blocks.0.")]
    assert tuple(block0) == _nodes.BLOCK_KINDS
    assert [n for n in names if not n.startswith("blocks.")] == list(_nodes.GLOBAL_KIND)


def test_node_kinds_are_unique_and_parse_back():
    idents = [ident for ident, _, _ in _layout.NODE_KINDS]
    assert len(set(idents)) == len(idents)
    for name, kind in _nodes.BLOCK_KIND.items():
        assert _nodes.parse_name(f"blocks.3.{name}") == (3, kind)
        assert _nodes.node_name(3, kind) == f"blocks.3.{name}"
    for name, kind in _nodes.GLOBAL_KIND.items():
        assert _nodes.parse_name(name) == (-1, kind)
    with pytest.raises(KeyError):
        _nodes.parse_name("per_target_nll")  # read by kind, not a trace name


def test_backward_of_an_unrecorded_graph_has_its_own_error():
    model = pydepth.DecoderModel(pydepth.DecoderConfig(11, 4, 1, 4, 1, 4), pydepth.SplitMix64(3))
    loss = model.forward(np.array([[1, 2, 3]]), record=False).loss(np.array([[2, 3, 4]]))
    with pytest.raises(pydepth.AutodiffError, match="record=False"):
        loss.backward()


def test_parameter_layout_is_read_from_the_core():
    cfg = pydepth.DecoderConfig(7, 4, 2, 6, 2, 3, kv_heads=1)
    layout = cfg.parameter_layout()
    assert layout == _layout.parameter_layout(cfg._core_tuple())
    assert layout[0] == ("token_embedding.weight", (7, 4))
    assert layout[1 + 9 + 2] == ("blocks.1.attention.key.weight", (4, 2))
    assert layout[-2] == ("blocks.1.ffn.down.weight", (6, 4))
    assert layout[-1] == ("final_norm.gain", (4,))


def test_private_layout_entry_checks_its_configuration():
    with pytest.raises(_status.CoreError):
        _layout.parameter_layout((7, 4, 0, 1, 6, 2, 3, 10000.0, 1e-6))  # zero heads
    with pytest.raises(_status.CoreError):
        _layout.parameter_count((2**63, 2**8, 1, 1, 4, 1, 4, 10000.0, 1e-6))


def test_each_misuse_of_a_graph_has_its_own_status():
    model = pydepth.DecoderModel(pydepth.DecoderConfig(11, 4, 1, 4, 1, 4), pydepth.SplitMix64(3))
    fwd = model.forward(np.array([[1, 2, 3]]))
    codes = _status.STATUS_CODES
    with pytest.raises(_status.CoreError) as info:
        fwd._graph.backward([], [])
    assert info.value.code == codes["ERR_NO_LOSS"]
    fwd.loss(np.array([[2, 3, 4]]))
    with pytest.raises(_status.CoreError) as info:
        fwd._graph.attach_loss(np.array([2, 3, 4], dtype=np.int64))
    assert info.value.code == codes["ERR_LOSS_ATTACHED"]
    with pytest.raises(_status.CoreError) as info:
        fwd._graph.commit()
    assert info.value.code == codes["ERR_NO_PENDING"]
    with pytest.raises(pydepth.AutodiffError, match="already carries a loss"):
        fwd.loss(np.array([[2, 3, 4]]))


def test_configuration_check_rules_come_from_the_core():
    assert [_layout.config_check_rule(i) is not None for i in range(12)] == [False] + [True] * 10 + [False]
    with pytest.raises(pydepth.ConfigError, match="kv_heads must be positive and divide heads"):
        _translate.raise_core(_status.CoreError(_status.STATUS_CODES["ERR_CONFIG"], 10))


_ADAMW = _translate.OptimizerCall("AdamW", ("lr", "beta1", "beta2", "eps", "weight_decay"), ("a.w", "b.w"),
                                  ("exp_avg", "exp_avg_sq"), 4)


@pytest.mark.parametrize("status, err, kind, message", [
    ("ERR_CONFIG", dict(index=1, value=1.5), pydepth.InvalidHyperparameterError,
     "AdamW beta1 must be in [0, 1), got 1.5"),
    ("ERR_CONFIG", dict(index=4, value=-1.0), pydepth.InvalidHyperparameterError,
     "AdamW weight_decay must be finite and non-negative, got -1.0"),
    ("ERR_NONFINITE", dict(index=3, value=float("inf"), block=1, node=2), pydepth.NonFiniteUpdateError,
     "AdamW step 4 refused: b.w exp_avg_sq would become inf at flat index 3; nothing was changed"),
    ("ERR_SHAPE", dict(index=1), pydepth.OptimizerStateError, "AdamW slots do not match its parameters (tensor 1)"),
    ("ERR_LAYOUT", dict(index=0), pydepth.OptimizerStateError, "AdamW slots do not match its parameters (tensor 0)"),
    # a refusal naming no field or tensor of the optimizer reads as the core's
    ("ERR_CONFIG", dict(index=7, value=2.0), pydepth.ConfigError, "configuration rejected by the core"),
    ("ERR_NONFINITE", dict(index=0, value=float("nan"), block=-1, node=-1), pydepth.NonFiniteError,
     "non-finite value nan at flat index 0"),
])
def test_an_optimizers_refusal_is_translated_by_the_one_status_table(status, err, kind, message):
    core = _status.CoreError(_status.STATUS_CODES[status], err.get("index", 0), err.get("value", 0.0),
                             err.get("block", -1), err.get("node", -1))
    with pytest.raises(kind) as info:
        _translate.raise_core(core, optimizer=_ADAMW)
    assert str(info.value).startswith(message)


def test_the_optimizers_translate_no_status_themselves():
    source = (pathlib.Path(pydepth.optim.__file__)).read_text()
    assert "STATUS_CODES" not in source and "err.code" not in source
