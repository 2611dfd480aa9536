# SPDX-License-Identifier: MIT
"""pydepth.jax.JaxHealthMonitor: the training step's own value_and_grad also returns the site
sums (the gradients equal jax's, the sums equal residual_sums'), every N steps the host logs the
report's metrics — in an Optax loop over Linen params, a Flax TrainState loop logging to
TensorBoard with torch blocked, and an Equinox loop."""
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from conftest import load_helper, need_extra

need_extra("jax")

import jax  # noqa: E402

M = load_helper("jax_models.py")

from pydepth import JaxMonitorSettingError  # noqa: E402
from pydepth.jax import JaxHealthMonitor, ResidualSites, report_from_sums, residual_sums  # noqa: E402
from pydepth.monitoring import JsonLinesSink  # noqa: E402

optax = pytest.importorskip("optax", reason="the training loops need optax")
HERE = pathlib.Path(__file__).resolve().parent


def test_an_optax_loop_over_linen_params_logs_every_n_steps_from_its_own_backward_pass(tmp_path):
    _, variables, loss_fn, _ = M.linen_model(True, 2)
    sites = ResidualSites("decoder", "attention", layer_axis=1)
    sink = JsonLinesSink(tmp_path / "health.jsonl")
    monitor = JaxHealthMonitor(loss_fn, sites=sites, every=2, sinks=sink)
    tx = optax.adam(1e-2)

    @jax.jit
    def step(params, opt, toks):
        _loss, grads, sums = monitor.value_and_grad({"params": params}, toks)
        updates, opt = tx.update(grads, opt, params)
        return optax.apply_updates(params, updates), opt, grads, sums

    params, opt = variables["params"], tx.init(variables["params"])
    want_grads = jax.jit(jax.grad(lambda p, t: loss_fn({"params": p}, t)))(params, M.tokens(0))
    want_sums = jax.jit(lambda p, t: residual_sums(loss_fn, {"params": p}, t, sites=sites))(params, M.tokens(0))
    for n in range(1, 5):
        before = params
        params, opt, grads, sums = step(params, opt, M.tokens(n - 1))
        if n == 1:
            assert jax.tree_util.tree_all(jax.tree_util.tree_map(
                lambda a, b: np.allclose(a, b, rtol=1e-12, atol=0), grads, want_grads))
            got = report_from_sums(np.asarray(sums), attention=True)
            assert got.sites == report_from_sums(np.asarray(want_sums), attention=True).sites
            assert before is not params
        assert (monitor.log(n, sums) is None) == (n % 2 == 1)
    sink.close()
    rows = [json.loads(line) for line in (tmp_path / "health.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [2, 4] and rows[0]["residual/valid_positions"] == M.B * M.T


_TRAIN_STATE_LOOP = """
import sys
sys.modules["torch"] = None
sys.path.insert(0, {here!r})
from conftest import load_helper
M = load_helper("jax_models.py")
import jax, optax
from flax.training.train_state import TrainState
from tensorboard.summary import Writer
from pydepth.jax import JaxHealthMonitor, ResidualSites
from pydepth.monitoring import TensorBoardSink
_, variables, loss_fn, _ = M.linen_model(False, 2)
writer = Writer({logdir!r})
monitor = JaxHealthMonitor(loss_fn, sites=ResidualSites(r"layers_(\\d+)", "attention"), every=1,
                           sinks=TensorBoardSink(writer), per_site=False)
state = TrainState.create(apply_fn=None, params=variables["params"], tx=optax.sgd(1e-2))

@jax.jit
def step(state, toks):
    loss, grads, sums = monitor.value_and_grad({{"params": state.params}}, toks)
    return state.apply_gradients(grads=grads), sums

for n in range(1, 3):
    state, sums = step(state, M.tokens(n))
    monitor.log(int(state.step), sums)
writer.close()
print(sorted(k for k, v in sys.modules.items() if v is not None and k.split(".")[0] == "torch"))
"""


def test_a_train_state_loop_logs_to_tensorboard_with_torch_blocked(tmp_path):
    need_extra("train")
    code = _TRAIN_STATE_LOOP.format(here=str(HERE), logdir=str(tmp_path))
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("[]")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    assert [e.step for e in acc.Tensors("residual/activation_ratio_max")] == [1, 2]


def test_an_equinox_loop_gets_filter_grad_gradients_and_the_sums():
    import equinox as eqx
    model, loss_fn, _ = M.eqx_model(True, 2)
    sites = ResidualSites("layers.blocks", "attention", layer_axis=0)
    monitor = JaxHealthMonitor(loss_fn, sites=sites, every=1)
    loss, grads, sums = eqx.filter_jit(monitor.value_and_grad)(model, M.tokens(1))
    want_loss, want_grads = eqx.filter_jit(eqx.filter_value_and_grad(loss_fn))(model, M.tokens(1))
    assert float(loss) == pytest.approx(float(want_loss), rel=1e-14)
    assert jax.tree_util.tree_all(jax.tree_util.tree_map(
        lambda a, b: np.allclose(a, b, rtol=1e-12, atol=0), grads, want_grads))
    report = monitor.log(1, sums)
    assert report is monitor.last and len(report.sites) == 5
    with pytest.raises(JaxMonitorSettingError, match="0"):
        JaxHealthMonitor(loss_fn, sites=sites, every=0)
