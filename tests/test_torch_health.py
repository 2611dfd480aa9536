# SPDX-License-Identifier: MIT
"""pydepth.torch.observe_residual_health: the twin's report equals pydepth's own; hooks capture
the true residual stream (checked by finite differences through another route) on Hugging Face
and other decoders; masking, parallel residuals, no side effects, and the refusals."""
import math

import numpy as np
import pytest
import torch

import pydepth
from pydepth import (Batch, DecoderConfig, DecoderModel, DepthHealthReport, EmptyValidityError,
                     SplitMix64, TokenError, UnsupportedModuleError)
from pydepth.torch import apply_depth_scaling, observe_residual_health, to_torch
from pydepth.torch.health import probe_sites

REL = 1e-10


def assert_reports_agree(ours, theirs):
    assert isinstance(ours, DepthHealthReport)
    assert (ours.valid_positions, ours.width, len(ours.sites)) == (theirs.valid_positions, theirs.width,
                                                                     len(theirs.sites))
    for a, b in zip(ours.sites, theirs.sites):
        assert a.label == b.label
        for field in ("activation_rms", "adjoint_rms", "activation_ratio", "adjoint_ratio"):
            assert getattr(a, field) == pytest.approx(getattr(b, field), rel=REL), (a.label, field)
        assert (a.activation_status, a.adjoint_status) == (b.activation_status, b.adjoint_status)
    for a, b in zip(ours.branches, theirs.branches):
        assert a.attention_output_rms == pytest.approx(b.attention_output_rms, rel=REL)
        assert a.feed_forward_output_rms == pytest.approx(b.feed_forward_output_rms, rel=REL)
        assert (a.attention_norm_gain, a.feed_forward_norm_gain) == (b.attention_norm_gain, b.feed_forward_norm_gain)
    assert ours.final_norm_gain == theirs.final_norm_gain


def pydepth_report(model, source, targets=None):
    fwd = model.forward(source)
    loss = fwd.loss(targets)
    return pydepth.observe_residual_health(model, fwd, loss)


def test_twin_report_equals_pydepths_on_every_fixture(reference_trace, torch_models):
    for _name, _, tokens, targets, model in torch_models.fixture_models(reference_trace):
        assert_reports_agree(observe_residual_health(to_torch(model), tokens, targets),
                             pydepth_report(model, tokens, targets))


@pytest.mark.parametrize("layers,kv,seed", [(0, 2, 1), (1, 1, 2), (3, 2, 3), (6, 4, 4)])
def test_twin_report_equals_pydepths_on_other_shapes_and_packed_batches(layers, kv, seed):
    cfg = DecoderConfig(41, 16, 4, 20, layers, 8, kv_heads=kv, rms_epsilon=1e-5)
    model = DecoderModel(cfg, SplitMix64(seed))
    rng = np.random.default_rng(seed)
    tokens, targets = rng.integers(0, 41, (2, 8)), rng.integers(0, 41, (2, 8))
    assert_reports_agree(observe_residual_health(to_torch(model), tokens, targets),
                         pydepth_report(model, tokens, targets))
    batch = Batch.pack([rng.integers(0, 41, n) for n in (4, 6, 3, 9)], 8)
    assert not batch.valid.all()
    assert_reports_agree(observe_residual_health(to_torch(model), batch), pydepth_report(model, batch))


def test_twin_report_matches_after_bridge_scaling():
    cfg = DecoderConfig(41, 16, 2, 20, 4, 8)
    twin = to_torch(DecoderModel(cfg, SplitMix64(8)))
    apply_depth_scaling(twin)
    init = pydepth.FreshDepthInitialization.prepare(
        cfg, pydepth.DepthInitializationBudget(cfg.parameter_count, 8), SplitMix64(8)).complete()
    tokens = np.arange(16).reshape(2, 8) % 41
    assert_reports_agree(observe_residual_health(twin, tokens, tokens[:, ::-1]),
                         pydepth_report(init.model, tokens, tokens[:, ::-1]))


def loss_with_perturbation(module, layout, site, delta, ids):
    """The module's mean loss with delta added to residual site `site` through another route:
    the first layer's input (site 0), the attention branch output (mid sites) or the layer output."""
    step = 1 if layout.parallel_residual else 2
    b, kind = divmod(site - 1, step)
    if site == 0:
        def shift(m, a, k):
            if a:
                return (a[0] + delta, *a[1:]), k
            return a, {**k, "hidden_states": k["hidden_states"] + delta}
        handle = layout.layers[0].register_forward_pre_hook(shift, with_kwargs=True)
    elif step == 2 and kind == 0:
        handle = layout.attention_outputs[b].register_forward_hook(lambda m, a, out: out + delta)
    else:
        def add(m, a, out):
            return (out[0] + delta, *out[1:]) if isinstance(out, tuple) else out + delta
        handle = layout.layers[b].register_forward_hook(add)
    try:
        with torch.no_grad():
            module.eval()
            if hasattr(module, "config"):  # HF computes its loss in float32; recompute it in float64
                logits = module(input_ids=ids).logits
                loss = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].reshape(-1))
            else:
                loss = module(ids, ids)[-1]
    finally:
        handle.remove()
    return float(loss)


@pytest.mark.parametrize("name", ["llama", "mistral", "qwen2", "gpt2", "gpt-neox", "gpt-neox-sequential", "nanogpt"])
def test_site_adjoints_are_total_derivatives_of_the_loss(name, torch_models):
    if name == "nanogpt":
        with torch.random.fork_rng():  # its init draws from the global generator: the same draw every run
            torch.manual_seed(5)
            module = torch_models.NanoGPT(2).double()
    elif name == "gpt-neox-sequential":
        module = torch_models.hf("gpt-neox", 2, use_parallel_residual=False)
    else:
        module = torch_models.hf(name, 2)
    ids = torch.randint(0, torch_models.VOCAB, (2, 6), generator=torch.Generator().manual_seed(1))
    probe = probe_sites(module, ids, ids)
    expected = 3 if name == "gpt-neox" else 5
    assert len(probe.sites) == len(probe.adjoints) == expected
    gen = torch.Generator().manual_seed(2)
    # HF norms compute in float32: a smaller step drowns in their rounding. NanoGPT is float64
    # throughout, where the central difference's eps**2 error term is what limits the agreement.
    eps = 1e-5 if name == "nanogpt" else 1e-4
    for site, (act, adj) in enumerate(zip(probe.sites, probe.adjoints)):
        assert act.shape == adj.shape == (2, 6, 32)
        delta = torch.randn(act.shape, generator=gen, dtype=torch.float64)
        fd = (loss_with_perturbation(module, probe.layout, site, eps * delta, ids)
              - loss_with_perturbation(module, probe.layout, site, -eps * delta, ids)) / (2 * eps)
        # float32 inside HF's norms and loss limit the agreement; a wrong or partial site is O(1) off
        rel = 1e-6 if name == "nanogpt" else 1e-3
        assert float((adj * delta).sum()) == pytest.approx(fd, rel=rel), site


def test_parallel_residual_has_l_plus_one_sites_and_says_so(torch_models):
    report = observe_residual_health(torch_models.hf("gpt-neox", 3), torch.arange(12).reshape(2, 6))
    assert [r.label for r in report.sites] == ["input"] + [f"block.{b}.parallel_residual.output" for b in range(3)]
    assert report.sites[-1].adjoint_ratio == 1.0 and report.sites[0].activation_ratio == 1.0
    assert "parallel_residual" in report.to_table()
    from pydepth.plots.style import site_tick_labels  # the plots read the block index from the label
    assert site_tick_labels(4, [r.label for r in report.sites]) == ["input", "block 0", "block 1", "block 2"]


def test_positions_without_a_label_or_masked_out_enter_no_rms(torch_models):
    model = torch_models.hf("llama", 2)
    ids = torch.randint(0, torch_models.VOCAB, (2, 8), generator=torch.Generator().manual_seed(4))
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[1, 5:] = 0
    report = observe_residual_health(model, ids, attention_mask=mask)
    assert report.valid_positions == 7 + 4  # positions that predict an unmasked label
    other = ids.clone()
    other[1, 5:] = (other[1, 5:] + 7) % torch_models.VOCAB  # right padding: causal, no label, no RMS
    again = observe_residual_health(model, other, attention_mask=mask)
    for a, b in zip(report.sites, again.sites):
        assert a.activation_rms == pytest.approx(b.activation_rms, rel=1e-12)
        assert a.adjoint_rms == pytest.approx(b.adjoint_rms, rel=1e-12)
    with pytest.raises(EmptyValidityError):
        observe_residual_health(model, ids, attention_mask=torch.zeros(2, 8, dtype=torch.long))
    with pytest.raises(EmptyValidityError, match="predicts"):
        observe_residual_health(model, ids[:, :1])
    with pytest.raises(TokenError, match="attention_mask"):
        observe_residual_health(model, ids, attention_mask=torch.ones(2, 7))


def test_observing_leaves_grads_modes_and_checkpointing_as_they_were(torch_models):
    model = torch_models.hf("gpt2", 2)
    model.train()
    (getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable)()
    for p in model.parameters():
        p.grad = torch.full_like(p, 0.5)
    ids = torch.arange(10).reshape(2, 5)
    first = observe_residual_health(model, ids)
    second = observe_residual_health(model, ids)  # dropout is off inside the probe: identical
    assert first == second
    assert model.training and all(m.training for m in model.modules())
    assert all(m.gradient_checkpointing for m in model.transformer.h)
    assert all(torch.equal(p.grad, torch.full_like(p, 0.5)) for p in model.parameters())
    fresh = torch_models.hf("llama", 2)
    observe_residual_health(fresh, ids)
    assert all(p.grad is None for p in fresh.parameters())


def test_frozen_models_are_observed_too(torch_models):
    model = torch_models.hf("llama", 2)
    ids = torch.arange(12).reshape(2, 6)
    expected = observe_residual_health(model, ids)
    for p in model.parameters():
        p.requires_grad_(False)
    assert observe_residual_health(model, ids) == expected
    assert not any(p.requires_grad for p in model.parameters())


def test_compiled_modules_are_refused(torch_models):
    model = torch_models.hf("llama", 1)
    with pytest.raises(UnsupportedModuleError, match=r"torch\.compile"):
        observe_residual_health(torch.compile(model), torch.arange(6).reshape(1, 6))
    model.model.layers[0].compile()
    with pytest.raises(UnsupportedModuleError, match=r"torch\.compile"):
        observe_residual_health(model, torch.arange(6).reshape(1, 6))


def test_refusals_are_typed_and_name_the_value(torch_models):
    model = torch_models.hf("gpt2", 1)
    with pytest.raises(TokenError, match=f"token id {torch_models.VOCAB} at position \\[0, 1\\]"):
        observe_residual_health(model, torch.tensor([[1, torch_models.VOCAB]]))
    with pytest.raises(TokenError, match="label 99"):
        observe_residual_health(model, torch.tensor([[1, 2]]), torch.tensor([[-100, 99]]))
    with pytest.raises(TokenError, match="rank 2"):
        observe_residual_health(model, torch.tensor([1, 2]))
    with pytest.raises(UnsupportedModuleError, match="does not take"):
        observe_residual_health(torch_models.TitanLlama(2), torch.tensor([[1, 2]]))

    class LogitsOnly(torch_models.NanoGPT):
        def forward(self, idx, targets=None):
            return super().forward(idx, targets)[0]

    with pytest.raises(UnsupportedModuleError, match="no scalar loss"):
        observe_residual_health(LogitsOnly(1), torch.tensor([[1, 2]]))
    with pytest.raises(TokenError, match="-100"):
        observe_residual_health(model, torch.tensor([[1, 2]]), torch.tensor([[-100, -100]]))
    twin = to_torch(DecoderModel(DecoderConfig(11, 4, 1, 4, 1, 3), SplitMix64(1)))
    with pytest.raises(TokenError, match="targets"):
        observe_residual_health(twin, np.array([[1, 2]]))
    with pytest.raises(pydepth.ArchitectureError, match="recognized"):
        observe_residual_health(torch.nn.Linear(2, 2), torch.tensor([[1]]))


def test_band_is_passed_through(torch_models):
    report = observe_residual_health(torch_models.hf("llama", 2), torch.arange(12).reshape(2, 6), band=(0.999, 1.001))
    assert report.band == (0.999, 1.001)
    assert not report.within_band
    assert math.isclose(report.sites[-1].adjoint_ratio, 1.0)
