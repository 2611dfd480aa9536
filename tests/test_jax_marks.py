# SPDX-License-Identifier: MIT
"""The Linen depth-scaling mark travels with the scaled parameters and stays out of the way:
jax.grad over the whole variables runs, a Flax TrainState trained with AdamW and weight decay
keeps it, and flax.serialization round trips keep it, so a second scaling after each is refused;
a mark of the earlier int32 collection is still read."""
import numpy as np
import pytest
from conftest import load_helper, need_extra

need_extra("jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

M = load_helper("jax_models.py")

from pydepth import JaxAlreadyScaledError  # noqa: E402
from pydepth.jax import apply_depth_scaling, scaling_count  # noqa: E402

PATTERNS = [r"\['layers_(\d+)'\]\['wo'\]"]


def scaled_linen():
    _, variables, loss_fn, _ = M.linen_model(False, 2)
    scaled, _ = apply_depth_scaling(variables, patterns=PATTERNS)
    return scaled, loss_fn


def test_jax_grad_over_the_whole_scaled_variables_runs_and_leaves_the_mark_alone():
    scaled, loss_fn = scaled_linen()
    grads = jax.grad(loss_fn)(scaled, M.tokens())
    assert np.all(np.asarray(grads["params"]["pydepth_depth_scalings"]) == 0.0)
    assert scaling_count(jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, scaled, grads)) == 1


def test_a_train_state_trained_with_weight_decay_keeps_the_mark():
    optax = pytest.importorskip("optax", reason="the TrainState test needs optax")
    from flax.training.train_state import TrainState
    scaled, loss_fn = scaled_linen()
    state = TrainState.create(apply_fn=None, params=scaled["params"], tx=optax.adamw(1e-2, weight_decay=0.5))
    step = jax.jit(lambda s, t: s.apply_gradients(grads=jax.grad(lambda p: loss_fn({"params": p}, t))(s.params)))
    for seed in range(3):
        state = step(state, M.tokens(seed))
    assert scaling_count({"params": state.params}) == 1
    with pytest.raises(JaxAlreadyScaledError):
        apply_depth_scaling({"params": state.params}, patterns=PATTERNS)


def test_flax_serialization_round_trips_keep_the_mark():
    from flax import serialization
    scaled, _ = scaled_linen()
    data = serialization.to_bytes(scaled)
    for restored in (serialization.msgpack_restore(data), serialization.from_bytes(scaled, data)):
        assert scaling_count(restored) == 1
        with pytest.raises(JaxAlreadyScaledError):
            apply_depth_scaling(restored, patterns=PATTERNS)


def test_a_mark_in_the_earlier_int32_collection_is_still_read():
    _, variables, _, _ = M.linen_model(False, 2)
    old = {**variables, "pydepth": {"pydepth_depth_scalings": jnp.asarray(1, jnp.int32)}}
    with pytest.raises(JaxAlreadyScaledError):
        apply_depth_scaling(old, patterns=PATTERNS)
    again, _ = apply_depth_scaling(old, patterns=PATTERNS, force=True)
    assert scaling_count(again) == 2 and "pydepth" not in again
