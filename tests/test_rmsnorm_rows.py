# SPDX-License-Identifier: MIT
"""RMSNorm's rows (csrc/ops/rmsnorm.c) run their sums side by side in groups: a failure is still
named at the first failing row in row order, with that row's own reason, wherever the row sits
in a group and whichever check of a later row would also fail (docs/numerics.md §5.1)."""

from __future__ import annotations

import numpy as np
import pytest

import pydepth
from pydepth import DecoderConfig, DecoderModel, NamedParameter
from pydepth._native import _runtime
from conftest import kernel_paths

T_MAX = 19  # two whole groups of eight and a partial one
OVERFLOW, ZERO, PLAIN = 3, 0, 1  # token ids: a row whose squares overflow, an all-zero row, a plain one


def _model() -> DecoderModel:
    """eps 0, so token 0's all-zero embedding row has mean square 0; token 3's squares overflow."""
    cfg = DecoderConfig(6, 4, 1, 4, 1, T_MAX, rms_epsilon=0.0)
    params = []
    for name, shape in cfg.parameter_layout():
        v = np.full(shape, 0.25)
        if name == "token_embedding.weight":
            v[ZERO] = 0.0
            v[OVERFLOW] = 1e200
        params.append(NamedParameter(name, v))
    return DecoderModel.from_parameters(cfg, params)


def _cases():
    for t in range(1, T_MAX + 1):
        for k in sorted({0, t // 2, t - 1}):
            for first, later in ((OVERFLOW, ZERO), (ZERO, OVERFLOW), (OVERFLOW, OVERFLOW)):
                yield t, k, first, later


@pytest.mark.parametrize("path", kernel_paths())
def test_a_norm_failure_names_the_first_failing_row_and_its_own_reason_anywhere_in_a_group(
        path, kernel_path_restored):
    assert _runtime.force_kernel_path(path)
    model = _model()
    for t, k, first, later in _cases():
        ids = np.full((1, t), PLAIN)
        ids[0, k] = first
        ids[0, k + 1:] = later
        reason = "non-finite value inf" if first == OVERFLOW else "mean square 0"
        with pytest.raises(pydepth.NonFiniteError) as err:
            model.forward(ids)
        msg = str(err.value)
        assert msg.startswith(reason), (t, k, msg)
        assert msg.endswith(f"blocks.0.attention_norm.output at flat index {k}"), (t, k, msg)
