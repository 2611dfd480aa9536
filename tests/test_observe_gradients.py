# SPDX-License-Identifier: MIT
"""One side-effect rule for pydepth.observe_residual_health and pydepth.torch.observe_residual_health:
the same keyword ``accumulate_gradients`` with the same default (False: ``.grad`` left as it was),
True adding exactly what ``loss.backward()`` would, and a refusal changing no gradient."""
import inspect

import numpy as np
import pytest
import torch

import pydepth
import pydepth.torch as pt
from pydepth import DecoderConfig, DecoderModel, SplitMix64

TOKENS = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
TARGETS = (TOKENS + 1) % 13


def native_model():
    return DecoderModel(DecoderConfig(13, 4, 2, 6, 2, 8), SplitMix64(3))


def grad_bits(model):
    return [p.grad.view(np.uint64).copy() for p in model.parameters]


def test_both_observers_take_the_same_keyword_with_the_same_default():
    native = inspect.signature(pydepth.observe_residual_health).parameters["accumulate_gradients"]
    bridged = inspect.signature(pt.observe_residual_health).parameters["accumulate_gradients"]
    for p in (native, bridged):
        assert p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is False


def test_native_observer_leaves_gradients_by_default_and_accumulates_when_asked():
    model = native_model()
    model.loss(TOKENS, TARGETS).backward()
    before = grad_bits(model)
    fwd = model.forward(TOKENS)
    pydepth.observe_residual_health(model, fwd, fwd.loss(TARGETS))
    assert all(np.array_equal(a, b) for a, b in zip(grad_bits(model), before))
    twin = native_model()
    twin.loss(TOKENS, TARGETS).backward()
    twin.loss(TOKENS, TARGETS).backward()
    fwd = model.forward(TOKENS)
    pydepth.observe_residual_health(model, fwd, fwd.loss(TARGETS), accumulate_gradients=True)
    assert all(np.array_equal(a, b) for a, b in zip(grad_bits(model), grad_bits(twin)))


def test_torch_observer_leaves_gradients_by_default(torch_models):
    model = torch_models.hf("llama", 2)
    ids = torch.arange(12).reshape(2, 6)
    for p in model.parameters():
        p.grad = torch.full_like(p, 0.25)
    pt.observe_residual_health(model, ids)
    assert all(torch.equal(p.grad, torch.full_like(p, 0.25)) for p in model.parameters())


def test_torch_observer_accumulates_what_backward_of_the_eval_loss_would(torch_models):
    model = torch_models.hf("llama", 2)
    reference = torch_models.hf("llama", 2)
    reference.load_state_dict(model.state_dict())
    ids = torch.arange(12).reshape(2, 6)
    for m in (model, reference):
        for p in m.parameters():
            p.grad = torch.full_like(p, 0.25)
    plain = pt.observe_residual_health(model, ids)
    observed = pt.observe_residual_health(model, ids, accumulate_gradients=True)
    reference.eval()
    reference(input_ids=ids, labels=ids).loss.backward()
    assert observed == plain  # the report does not depend on the keyword
    changed = 0
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-12, atol=0.0, msg=name)
        changed += int(not torch.equal(p.grad, torch.full_like(p, 0.25)))
    assert changed > 0


def test_torch_refusal_after_the_reverse_pass_changes_no_gradient_even_when_accumulating(torch_models):
    model = torch_models.hf("llama", 2)
    with torch.no_grad():
        model.model.norm.weight.zero_()  # G_2L = 0: refused after the reverse pass ran
    for p in model.parameters():
        p.grad = torch.full_like(p, 0.25)
    with pytest.raises(pydepth.InvalidNormalizerError, match="G_2L"):
        pt.observe_residual_health(model, torch.arange(12).reshape(2, 6), accumulate_gradients=True)
    assert all(torch.equal(p.grad, torch.full_like(p, 0.25)) for p in model.parameters())


@pytest.mark.parametrize("value", ["no", 1, None])
def test_both_observers_refuse_a_non_bool_keyword_naming_it(torch_models, value):
    model = native_model()
    fwd = model.forward(TOKENS)
    with pytest.raises(pydepth.PydepthError, match="accumulate_gradients"):
        pydepth.observe_residual_health(model, fwd, fwd.loss(TARGETS), accumulate_gradients=value)
    with pytest.raises(pydepth.PydepthError, match="accumulate_gradients"):
        pt.observe_residual_health(torch_models.hf("llama", 1), torch.arange(6).reshape(1, 6),
                                   accumulate_gradients=value)
