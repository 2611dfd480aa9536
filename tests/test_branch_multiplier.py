# SPDX-License-Identifier: MIT
"""Residual-branch multipliers (docs/numerics.md §5.9): a multiplier != 1 matches the independent
numpy reference bit for bit (every recorded value, the loss, every site adjoint and gradient), a
multiplier of 1 keeps today's bits, the multipliers travel with clones, pickles and the torch
twin, and bad multipliers are refused with a typed error before anything is built."""

import pickle

import numpy as np
import pytest

from pydepth import DecoderConfig, DecoderModel, NamedParameter, ParametrizationError, SplitMix64
from conftest import need_extra, reference_impl


ri = reference_impl()

CONFIG = DecoderConfig(29, 12, 3, 10, 3, 7)  # non-power-of-two widths: the rounding traps bite
MULTIPLIERS = {"one over L": (1.0 / 3.0,) * 3, "one over sqrt L": (3.0**-0.5,) * 3, "per block": (0.7, 1.0, 1.9)}


def bits(a):
    return np.ascontiguousarray(a, dtype=np.float64).reshape(-1).view(np.uint64)


def inputs(seed=5, shape=(2, 6)):
    rng = np.random.default_rng(seed)
    return rng.integers(0, CONFIG.vocabulary_size, shape), rng.integers(0, CONFIG.vocabulary_size, shape)


def reference(params, tokens, targets, branch):
    cfg = ri.Config(CONFIG.to_dict())
    fw = ri.forward(cfg, dict(params), tokens, targets, branch)
    sites, grads = ri.backward(cfg, dict(params), fw)
    return fw, sites, grads


def run(model, tokens, targets):
    model.zero_grad()
    fwd = model.forward(tokens)
    loss = fwd.loss(targets)
    adjoints = loss.backward_with_selected_adjoints(list(fwd.residual_sites))
    return fwd, loss, adjoints


@pytest.mark.parametrize("label", list(MULTIPLIERS))
def test_a_branch_multiplier_matches_the_numpy_reference_in_every_bit(label):
    branch = MULTIPLIERS[label]
    params = ri.init_parameters(ri.Config(CONFIG.to_dict()), ri.SplitMix64(11))
    model = DecoderModel.from_parameters(CONFIG, [NamedParameter(n, v) for n, v in params], branch_multipliers=branch)
    assert model.branch_multipliers == branch
    tokens, targets = inputs()
    fwd, loss, adjoints = run(model, tokens, targets)
    fw, sites, grads = reference(params, tokens, targets, branch)
    for name, want in fw["named"]:
        got = loss.value if name == "loss" else fwd.named(name).value
        assert np.array_equal(bits(got), bits(want)), name
    for i, (got, want) in enumerate(zip(adjoints, sites)):
        assert np.array_equal(bits(got), bits(0.0 + want)), f"site {i}"
    for p in model.parameters:
        assert np.array_equal(bits(p.grad), bits(grads[p.name])), p.name


def test_the_reference_with_a_multiplier_differs_from_the_reference_without():
    """Guard against a toothless comparison: the multiplier changes the loss and every block's grads."""
    params = ri.init_parameters(ri.Config(CONFIG.to_dict()), ri.SplitMix64(11))
    tokens, targets = inputs()
    with_mu, _, g_mu = reference(params, tokens, targets, MULTIPLIERS["per block"])
    without, _, g_one = reference(params, tokens, targets, None)
    assert with_mu["loss"] != without["loss"]
    assert not np.array_equal(g_mu["blocks.2.attention.output.weight"], g_one["blocks.2.attention.output.weight"])


@pytest.mark.parametrize("keep", ["all", "training"])
def test_a_multiplier_of_one_keeps_the_bits_of_a_model_without_multipliers(keep):
    plain = DecoderModel(CONFIG, SplitMix64(3))
    ones = DecoderModel(CONFIG, SplitMix64(3), branch_multipliers=[1.0, 1.0, 1.0])
    tokens, targets = inputs(7)
    results = []
    for model in (plain, ones):
        model.zero_grad()
        fwd = model.forward(tokens, keep=keep)
        loss = fwd.loss(targets)
        loss.backward()
        results.append((loss.item(), fwd.final_norm_output.value.copy(), [p.grad.copy() for p in model.parameters]))
    assert bits(results[0][0]).tolist() == bits(results[1][0]).tolist()
    assert np.array_equal(bits(results[0][1]), bits(results[1][1]))
    for a, b in zip(results[0][2], results[1][2]):
        assert np.array_equal(bits(a), bits(b))


def test_a_lean_record_gives_the_same_bits_with_multipliers():
    model = DecoderModel(CONFIG, SplitMix64(3), branch_multipliers=0.5)
    tokens, targets = inputs(9)
    got = []
    for keep in ("all", "training"):
        model.zero_grad()
        loss = model.forward(tokens, keep=keep).loss(targets)
        loss.backward()
        got.append((loss.item(), [p.grad.copy() for p in model.parameters]))
    assert got[0][0] == got[1][0]
    assert all(np.array_equal(bits(a), bits(b)) for a, b in zip(got[0][1], got[1][1]))


def test_multipliers_travel_with_clone_pickle_and_state_dict_construction():
    model = DecoderModel(CONFIG, SplitMix64(3), branch_multipliers=(0.5, 0.25, 2.0))
    tokens, targets = inputs(4)
    want = model.loss(tokens, targets).item()
    rebuilt = DecoderModel.from_state_dict(CONFIG, model.state_dict(), branch_multipliers=model.branch_multipliers)
    for other in (model.clone(), pickle.loads(pickle.dumps(model)), rebuilt):
        assert other.branch_multipliers == (0.5, 0.25, 2.0)
        assert other.loss(tokens, targets).item() == want
    assert DecoderModel(CONFIG, SplitMix64(3)).branch_multipliers == (1.0, 1.0, 1.0)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf"), [1.0, 1.0], [1.0, "2", 1.0], True, "x"])
def test_bad_multipliers_are_refused_with_a_typed_error_and_nothing_is_drawn(bad):
    rng = SplitMix64(3)
    state = rng.state
    with pytest.raises(ParametrizationError):
        DecoderModel(CONFIG, rng, branch_multipliers=bad)
    assert rng.state == state


@pytest.mark.parametrize("label", list(MULTIPLIERS))
def test_the_torch_twin_with_multipliers_agrees_in_loss_and_every_gradient(label):
    need_extra("torch")
    from pydepth.torch import from_torch, to_torch

    tol = 1e-12  # the twin's contract (docs/numerics-torch.md): torch sums in BLAS order with FMA
    model = DecoderModel(CONFIG, SplitMix64(13), branch_multipliers=MULTIPLIERS[label])
    tokens, targets = inputs(2)
    fwd, loss, _ = run(model, tokens, targets)
    twin = to_torch(model)
    assert twin.branch_multipliers == MULTIPLIERS[label]
    out = twin(tokens, targets)
    out.loss.backward()
    assert abs(out.loss.item() - loss.item()) <= tol * abs(loss.item())
    logits = fwd.logits.value
    assert np.abs(out.logits.detach().numpy() - logits).max() <= tol * np.abs(logits).max()
    grads = dict(twin.named_parameters())
    for p in model.parameters:
        assert np.abs(grads[p.name].grad.numpy() - p.grad).max() <= tol * np.abs(p.grad).max(), p.name
    back = from_torch(twin)
    assert back.branch_multipliers == MULTIPLIERS[label]
    assert back.loss(tokens, targets).item() == loss.item()


def test_a_checkpoint_restores_the_multipliers_and_one_without_them_keeps_its_bytes(tmp_path):
    from pydepth import checkpoint

    tokens, targets = inputs(3)
    scaled = DecoderModel(CONFIG, SplitMix64(21), branch_multipliers=(0.5, 1.0, 2.0))
    checkpoint.save(tmp_path / "scaled.safetensors", scaled)
    back = checkpoint.load(tmp_path / "scaled.safetensors").model
    assert back.branch_multipliers == (0.5, 1.0, 2.0)
    assert back.loss(tokens, targets).item() == scaled.loss(tokens, targets).item()
    plain = DecoderModel(CONFIG, SplitMix64(21))
    ones = DecoderModel(CONFIG, SplitMix64(21), branch_multipliers=1.0)
    checkpoint.save(tmp_path / "plain.safetensors", plain)
    checkpoint.save(tmp_path / "ones.safetensors", ones)
    raw = (tmp_path / "plain.safetensors").read_bytes()
    assert b"branch_multipliers" not in raw
    assert raw == (tmp_path / "ones.safetensors").read_bytes()
    assert checkpoint.load(tmp_path / "plain.safetensors").model.branch_multipliers == (1.0, 1.0, 1.0)


def test_a_checkpoint_with_bad_multipliers_is_refused_as_a_format_error(tmp_path):
    from pydepth import CheckpointFormatError, checkpoint

    scaled = DecoderModel(CONFIG, SplitMix64(21), branch_multipliers=(0.5, 1.0, 2.0))
    path = tmp_path / "scaled.safetensors"
    checkpoint.save(path, scaled)
    raw = path.read_bytes()
    bad = raw.replace(b"[0.5, 1.0, 2.0]", b"[0.5, 0.0, 2.0]")
    assert bad != raw and len(bad) == len(raw)
    path.write_bytes(bad)
    with pytest.raises(CheckpointFormatError, match="block 1"):
        checkpoint.load(path)
