# SPDX-License-Identifier: MIT
"""fixture_trace and `pydepth trace` reproduce trace-public.json in every bit."""
import json
import subprocess
import sys

import numpy as np
import pytest

from pydepth import DecoderConfig
from pydepth.chapter.trace import fixture_trace

MODEL_KEYS = ("parameters", "forward", "site_adjoints", "parameter_gradients")


def _rms(hexes):
    return np.array([int(h, 16) for h in hexes], dtype=np.uint64).view(np.float64)


def assert_fixture_equal(got, ref):
    for key in ("id", "config", "seed", "initial_rng_state", "final_rng_state", "factor",
                "token_shape", "tokens", "targets", "parameter_count"):
        assert got[key] == ref[key], key
    for variant in ("initialized", "same_base_unscaled_control"):
        g, r = got[variant], ref[variant]
        for key in MODEL_KEYS:
            assert [(e["name"], e["shape"]) for e in g[key]] == [(e["name"], e["shape"]) for e in r[key]], key
            for ge, re_ in zip(g[key], r[key]):
                assert ge["bits"] == re_["bits"], f"{variant} {key} {ge['name']}"
        for key in ("site_activation_rms", "site_adjoint_rms"):
            np.testing.assert_allclose(_rms(g[key]), _rms(r[key]), rtol=1e-13, atol=0)


@pytest.mark.parametrize("index", [0, 1, 2])
def test_fixture_trace_bit_exact(reference_trace, index):
    ref = reference_trace["fixtures"][index]
    got = fixture_trace(DecoderConfig.from_dict(ref["config"]), ref["seed"], ref["tokens"],
                        ref["targets"], fixture_id=ref["id"], batch=ref["token_shape"][0])
    assert_fixture_equal(got, ref)


def test_trace_cli_matches_reference(reference_trace, tmp_path):
    ref = reference_trace["fixtures"][2]
    config = tmp_path / "config.json"
    config.write_text(json.dumps(ref["config"]))
    out = tmp_path / "trace.json"
    cmd = [sys.executable, "-m", "pydepth", "trace", "--config", str(config), "--seed", str(ref["seed"]),
           "--tokens", ",".join(map(str, ref["tokens"])), "--targets", ",".join(map(str, ref["targets"])),
           "--batch-rows", str(ref["token_shape"][0]), "--output", str(out)]
    subprocess.run(cmd, check=True, cwd=tmp_path)
    doc = json.loads(out.read_text())
    assert doc["format"] == reference_trace["format"]
    got = doc["fixtures"][0]
    got["id"] = ref["id"]
    assert_fixture_equal(got, ref)
