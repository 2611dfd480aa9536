# SPDX-License-Identifier: MIT
"""A JAX depth scaling is carried by the scaled weights themselves, so every round trip that
carries the weights carries the guard and none of them breaks: Linen (jax.grad over the whole
variables, a TrainState trained with AdamW and weight decay, flax.serialization and orbax restores
into a fresh init and into an abstract jax.eval_shape tree), NNX (nnx.split/merge, a gradient
step, nnx.state saved with orbax and restored into nnx.eval_shape of a fresh model then
nnx.update) and Equinox (tree_serialise_leaves/tree_deserialise_leaves into a freshly built
model, a filter_grad step, orbax). After each the model runs, a second scaling is refused and
force=True passes; a fresh initialization and the unscaled original are not refused; a mark of
an earlier release is still read."""
import numpy as np
import pytest
from conftest import load_helper, need_extra

need_extra("jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

M = load_helper("jax_models.py")

from pydepth import JaxAlreadyScaledError  # noqa: E402
from pydepth.jax import apply_depth_scaling, scaling_count  # noqa: E402

LINEN = [r"\['layers_(\d+)'\]\['wo'\]"]
NNX = [r"\['layers'\]\[(\d+)\]\['wo'\]\['kernel'\]"]
EQX = [r"\.layers\[(\d+)\]\.wo$"]
LAYERS = 2


_COMPILED = {}


def compiled(model, loss_fn):
    """The jitted loss and gradient of the model's library, compiled once per loss function."""
    kind = "linen" if isinstance(model, dict) else "nnx" if type(model).__name__.startswith("Nnx") else "eqx"
    if (kind, loss_fn) not in _COMPILED:
        if kind == "linen":
            fns = (jax.jit(loss_fn), jax.jit(jax.grad(loss_fn)))
        elif kind == "nnx":
            from flax import nnx

            fns = (nnx.jit(loss_fn), nnx.jit(nnx.grad(loss_fn)))
        else:
            import equinox as eqx

            fns = (eqx.filter_jit(loss_fn), eqx.filter_jit(eqx.filter_grad(loss_fn)))
        _COMPILED[kind, loss_fn] = fns
    return _COMPILED[kind, loss_fn]


def refused_then_forced(model, patterns, loss_fn):
    """The model runs (loss and gradient finite), carries one scaling, a repeat is refused, and
    force=True scales it a second time."""
    loss, grad = compiled(model, loss_fn)
    assert np.isfinite(float(loss(model, M.tokens())))
    grads = jax.tree_util.tree_leaves(grad(model, M.tokens()))
    assert grads and all(np.isfinite(np.asarray(g)).all() for g in grads)
    assert scaling_count(model) == 1
    with pytest.raises(JaxAlreadyScaledError, match="force=True"):
        apply_depth_scaling(model, patterns=patterns)
    twice, record = apply_depth_scaling(model, patterns=patterns, force=True)
    assert record.forced and scaling_count(twice) == 2


def checkpointer():
    ocp = pytest.importorskip("orbax.checkpoint", reason="the orbax round trips need orbax-checkpoint")
    return ocp.StandardCheckpointer()


def orbax_round_trip(tmp_path, tree, target):
    ckpt = checkpointer()
    ckpt.save(tmp_path / "ckpt", tree)
    ckpt.wait_until_finished()
    return ckpt.restore(tmp_path / "ckpt", target)


# ------------------------------------------------------------------ Linen
def scaled_linen():
    _, variables, loss_fn, _ = M.linen_model(False, LAYERS)
    scaled, _ = apply_depth_scaling(variables, patterns=LINEN)
    return scaled, loss_fn


def fresh_linen():
    return M.linen_model(False, LAYERS, seed=1)[1]


def test_linen_scaled_variables_have_the_tree_of_fresh_ones():
    scaled, _ = scaled_linen()
    assert jax.tree_util.tree_structure(scaled) == jax.tree_util.tree_structure(fresh_linen())


def test_linen_a_gradient_step_over_the_whole_variables_keeps_the_guard():
    scaled, loss_fn = scaled_linen()
    grads = jax.grad(loss_fn)(scaled, M.tokens())
    refused_then_forced(jax.tree_util.tree_map(lambda p, g: p - 1e-2 * g, scaled, grads), LINEN, loss_fn)


def test_linen_a_train_state_trained_with_weight_decay_keeps_the_guard():
    optax = pytest.importorskip("optax", reason="the TrainState test needs optax")
    from flax.training.train_state import TrainState
    scaled, loss_fn = scaled_linen()
    state = TrainState.create(apply_fn=None, params=scaled["params"], tx=optax.adamw(1e-2, weight_decay=0.5))
    step = jax.jit(lambda s, t: s.apply_gradients(grads=jax.grad(lambda p: loss_fn({"params": p}, t))(s.params)))
    for seed in range(3):
        state = step(state, M.tokens(seed))
    refused_then_forced({"params": state.params}, LINEN, loss_fn)


def test_linen_flax_serialization_into_a_fresh_init_keeps_the_guard():
    from flax import serialization
    scaled, loss_fn = scaled_linen()
    data = serialization.to_bytes(scaled)
    for restored in (serialization.msgpack_restore(data), serialization.from_bytes(fresh_linen(), data)):
        refused_then_forced(restored, LINEN, loss_fn)


def test_linen_orbax_restores_into_a_fresh_init_and_an_abstract_tree_keep_the_guard(tmp_path):
    scaled, loss_fn = scaled_linen()
    fresh = fresh_linen()
    for i, target in enumerate((fresh, jax.eval_shape(lambda: fresh))):
        refused_then_forced(orbax_round_trip(tmp_path / str(i), scaled, target), LINEN, loss_fn)


def test_a_fresh_init_and_the_unscaled_original_are_not_refused():
    _, variables, _, _ = M.linen_model(False, LAYERS)
    scaled_linen()
    assert scaling_count(variables) == 0 and scaling_count(fresh_linen()) == 0
    apply_depth_scaling(fresh_linen(), patterns=LINEN)
    apply_depth_scaling(variables, patterns=LINEN)
    zero = jax.tree_util.tree_map_with_path(
        lambda path, v: jnp.zeros_like(v) if "wo" in jax.tree_util.keystr(path) else v, variables)
    once, _ = apply_depth_scaling(zero, patterns=LINEN)
    apply_depth_scaling(once, patterns=LINEN)  # zeros scaled are zeros: nothing to tell, nothing refused


def test_a_mark_of_an_earlier_release_is_still_read_and_dropped_by_a_forced_scaling():
    _, variables, _, _ = M.linen_model(False, LAYERS)
    leaf = {**variables, "params": {**variables["params"], "pydepth_depth_scalings": jnp.zeros((1,))}}
    collection = {**variables, "pydepth": {"pydepth_depth_scalings": jnp.asarray(1, jnp.int32)}}
    for old in (leaf, collection):
        with pytest.raises(JaxAlreadyScaledError):
            apply_depth_scaling(old, patterns=LINEN)
        again, _ = apply_depth_scaling(old, patterns=LINEN, force=True)
        assert scaling_count(again) == 2
        assert jax.tree_util.tree_structure(again) == jax.tree_util.tree_structure(variables)


# ------------------------------------------------------------------ NNX
def scaled_nnx(seed=0):
    from flax import nnx
    model = M.NnxDecoder(LAYERS, False, seed)
    apply_depth_scaling(model, patterns=NNX)
    _, loss_fn, _ = M.nnx_model(False, LAYERS)
    return nnx, model, loss_fn


def test_nnx_split_and_merge_keep_the_guard():
    nnx, model, loss_fn = scaled_nnx()
    graphdef, state = nnx.split(model)
    refused_then_forced(nnx.merge(graphdef, state), NNX, loss_fn)


def test_nnx_a_gradient_step_keeps_the_guard():
    nnx, model, loss_fn = scaled_nnx()
    grads = nnx.grad(loss_fn)(model, M.tokens())
    params = nnx.state(model, nnx.Param)
    nnx.update(model, jax.tree_util.tree_map(lambda p, g: p - 1e-2 * g, params, grads))
    refused_then_forced(model, NNX, loss_fn)


def test_nnx_orbax_restore_into_the_eval_shape_of_a_fresh_model_keeps_the_guard(tmp_path):
    nnx, model, loss_fn = scaled_nnx()
    abstract = nnx.eval_shape(lambda: M.NnxDecoder(LAYERS, False, 1))
    graphdef, abstract_state = nnx.split(abstract)
    restored = orbax_round_trip(tmp_path, nnx.state(model), abstract_state)
    refused_then_forced(nnx.merge(graphdef, restored), NNX, loss_fn)
    fresh = M.NnxDecoder(LAYERS, False, 1)
    assert scaling_count(fresh) == 0
    nnx.update(fresh, orbax_round_trip(tmp_path / "again", nnx.state(model), abstract_state))
    refused_then_forced(fresh, NNX, loss_fn)


# ------------------------------------------------------------------ Equinox
def scaled_eqx():
    import equinox as eqx
    model, loss_fn, _ = M.eqx_model(False, LAYERS)
    scaled, _ = apply_depth_scaling(model, patterns=EQX)
    return eqx, scaled, loss_fn


def test_equinox_scaling_returns_the_same_type_and_tree():
    _, scaled, _ = scaled_eqx()
    fresh = M.EqxDecoder(LAYERS, False, 1)
    assert type(scaled) is type(fresh)
    assert jax.tree_util.tree_structure(scaled) == jax.tree_util.tree_structure(fresh)


def test_equinox_deserialising_into_a_freshly_built_model_keeps_the_guard(tmp_path):
    eqx, scaled, loss_fn = scaled_eqx()
    eqx.tree_serialise_leaves(tmp_path / "model.eqx", scaled)
    fresh = M.EqxDecoder(LAYERS, False, 1)
    assert scaling_count(fresh) == 0
    refused_then_forced(eqx.tree_deserialise_leaves(tmp_path / "model.eqx", fresh), EQX, loss_fn)


def test_equinox_a_filter_grad_step_keeps_the_guard():
    eqx, scaled, loss_fn = scaled_eqx()
    grads = eqx.filter_grad(loss_fn)(scaled, M.tokens())
    refused_then_forced(eqx.apply_updates(scaled, jax.tree_util.tree_map(lambda g: -1e-2 * g, grads)), EQX,
                        loss_fn)


def test_equinox_orbax_restore_into_a_fresh_model_keeps_the_guard(tmp_path):
    eqx, scaled, loss_fn = scaled_eqx()
    dynamic, static = eqx.partition(M.EqxDecoder(LAYERS, False, 1), eqx.is_array)
    restored = orbax_round_trip(tmp_path, eqx.filter(scaled, eqx.is_array), dynamic)
    refused_then_forced(eqx.combine(restored, static), EQX, loss_fn)


# ------------------------------------------------------------------ another process
def restored_in_a_new_process(library, tmp_path):
    """A scaled model saved, the process's memory of its scalings gone (what a new process has),
    and the weights restored into a freshly built model; with that fresh model and the patterns."""
    from pydepth.jax import _guard
    if library == "linen":
        from flax import serialization
        scaled, _ = scaled_linen()
        data = serialization.to_bytes(scaled)
        _guard.forget_all()
        return serialization.from_bytes(fresh_linen(), data), fresh_linen(), LINEN
    if library == "nnx":
        nnx, model, _ = scaled_nnx()
        state = jax.tree_util.tree_map(np.asarray, nnx.state(model))
        _guard.forget_all()
        fresh = M.NnxDecoder(LAYERS, False, 1)
        restored = M.NnxDecoder(LAYERS, False, 2)
        nnx.update(restored, state)
        return restored, fresh, NNX
    eqx, scaled, _ = scaled_eqx()
    eqx.tree_serialise_leaves(tmp_path / "model.eqx", scaled)
    _guard.forget_all()
    return eqx.tree_deserialise_leaves(tmp_path / "model.eqx", M.EqxDecoder(LAYERS, False, 1)), \
        M.EqxDecoder(LAYERS, False, 3), EQX


@pytest.mark.parametrize("library", ["linen", "nnx", "equinox"])
def test_in_a_new_process_restored_scaled_weights_are_refused_by_the_audit_and_fresh_ones_are_not(
        library, tmp_path):
    restored, fresh, patterns = restored_in_a_new_process(library, tmp_path)
    assert scaling_count(restored) == 0  # the samples are gone with the process
    with pytest.raises(JaxAlreadyScaledError, match=r"1/sqrt\(L\).*audit_initialization.*force=True"):
        apply_depth_scaling(restored, patterns=patterns)
    _, record = apply_depth_scaling(restored, patterns=patterns, force=True)
    assert record.tensors
    apply_depth_scaling(fresh, patterns=patterns)  # a fresh init reads "unscaled": not refused
