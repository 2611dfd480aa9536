# SPDX-License-Identifier: MIT
"""SiLU takes its exponentials from the array exp (issue 17) and keeps the scalar branches' bits."""
import numpy as np

import pydepth
from pydepth import elementary


def test_gate_silu_equals_the_two_scalar_branches_bit_for_bit():
    cfg = pydepth.DecoderConfig(300, 48, 4, 72, 2, 80, kv_heads=2)
    model = pydepth.DecoderModel(cfg, pydepth.SplitMix64(5))
    toks = np.random.default_rng(1).integers(0, 300, size=(3, 80))
    fwd = model.forward(toks)
    for b in range(cfg.layers):
        gl = np.array(fwd.named(f"blocks.{b}.ffn.gate_linear").value).ravel()
        gs = np.array(fwd.named(f"blocks.{b}.ffn.gate_silu").value).ravel()
        assert (gl < 0).sum() > 1000 and (gl >= 0).sum() > 1000  # both branches exercised
        sig = np.where(gl >= 0, 1.0 / (1.0 + elementary.exp(-gl)),
                       elementary.exp(gl) / (1.0 + elementary.exp(gl)))
        assert np.array_equal((gl * sig).view(np.uint64), gs.view(np.uint64))
