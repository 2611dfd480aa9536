# SPDX-License-Identifier: MIT
"""A batch sharded over two host devices gives the report of the unsharded batch: the site sums
are reduced across devices by autodiff. XLA reads the device count at first import, so the
check runs in a fresh interpreter with XLA_FLAGS set."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("jax", reason="the JAX bridge needs the 'jax' extra (jax, flax, equinox)")
pytest.importorskip("flax", reason="the JAX bridge tests need flax (the 'jax' extra)")
pytest.importorskip("equinox", reason="the JAX bridge tests need equinox (the 'jax' extra)")

SCRIPT = r"""
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("jax_models", sys.argv[1])
M = importlib.util.module_from_spec(spec); spec.loader.exec_module(M)
import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from pydepth.jax import ResidualSites, observe_residual_health
_, variables, loss_fn, _ = M.linen_model(True, 2)
sites = ResidualSites("decoder", "attention", layer_axis=1)
toks = M.tokens(4, batch=4)
mesh = Mesh(jax.devices(), ("data",))
sharded = jax.device_put(toks, NamedSharding(mesh, P("data")))
whole = observe_residual_health(loss_fn, variables, toks, sites=sites)
split = observe_residual_health(loss_fn, variables, sharded, sites=sites)
print(json.dumps({"devices": len(jax.devices()), "shards": len(sharded.addressable_shards),
                  "whole": whole.to_dict(), "split": split.to_dict()}))
"""


def test_a_batch_sharded_over_two_devices_gives_the_unsharded_report(tmp_path):
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
    models = pathlib.Path(__file__).with_name("jax_models.py")
    run = subprocess.run([sys.executable, "-c", SCRIPT, str(models)], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["devices"] == 2 and out["shards"] == 2
    whole, split = out["whole"], out["split"]
    assert split["valid_positions"] == whole["valid_positions"] == 4 * 5
    for w, s in zip(whole["sites"], split["sites"]):
        assert s["activation_rms"] == pytest.approx(w["activation_rms"], rel=1e-12)
        assert s["adjoint_rms"] == pytest.approx(w["adjoint_rms"], rel=1e-12)
