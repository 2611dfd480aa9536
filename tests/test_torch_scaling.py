# SPDX-License-Identifier: MIT
"""apply_depth_scaling: the tensors each architecture selects, the factors of each scheme, the
record, one application only, atomic refusals; the twin matches pydepth's own depth init bit
for bit."""
import math

import numpy as np
import pytest
import torch

import pydepth
from pydepth import (AlreadyScaledError, ArchitectureError, DecoderConfig, DecoderModel,
                     DepthInitializationBudget, FreshDepthInitialization, ScalingSchemeError, SplitMix64)
from pydepth.torch import (SCHEMES, apply_depth_scaling, find_layout, from_torch, observe_residual_health,
                           scheme_factors, to_torch)
from pydepth.torch.scaling import scaling_history

EXPECTED = {  # architecture -> (builder, depth, the two selected names of layer 1)
    "hf-llama": (lambda tm: tm.hf("llama", 3), 3,
                 ("model.layers.1.self_attn.o_proj.weight", "model.layers.1.mlp.down_proj.weight")),
    "gpt2": (lambda tm: tm.gpt2_without_scaled_init(3), 3,
             ("transformer.h.1.attn.c_proj.weight", "transformer.h.1.mlp.c_proj.weight")),
    "gpt-neox": (lambda tm: tm.hf("gpt-neox", 2), 2,
                 ("gpt_neox.layers.1.attention.dense.weight", "gpt_neox.layers.1.mlp.dense_4h_to_h.weight")),
    "nanogpt": (lambda tm: tm.NanoGPT(3), 3,
                ("transformer.h.1.attn.c_proj.weight", "transformer.h.1.mlp.c_proj.weight")),
    "torchtitan-llama": (lambda tm: tm.TitanLlama(4), 4,
                         ("layers.1.attention.wo.weight", "layers.1.feed_forward.w2.weight")),
}


def snapshot(module):
    return {n: p.detach().clone() for n, p in module.named_parameters()}


def bits(t):
    return t.detach().numpy().reshape(-1).view(np.uint64)


def test_twin_scaling_equals_pydepths_depth_initialization_bit_for_bit():
    for layers in (1, 2, 5):
        cfg = DecoderConfig(29, 8, 2, 12, layers, 6, kv_heads=1)
        base = DecoderModel(cfg, SplitMix64(77))
        twin = to_torch(base)
        record = apply_depth_scaling(twin)
        init = FreshDepthInitialization.prepare(
            cfg, DepthInitializationBudget(cfg.parameter_count, cfg.max_positions), SplitMix64(77)).complete()
        assert record.scheme == "1/sqrt(L)" and record.depth == layers
        assert {t.factor for t in record.tensors} == {pydepth.DepthScalePolicy(layers).factor}
        for a, b in zip(from_torch(twin).parameters, init.model.parameters):
            assert np.array_equal(a.value.view(np.uint64), b.value.view(np.uint64)), a.name


@pytest.mark.parametrize("arch", sorted(EXPECTED))
def test_each_architecture_selects_its_residual_output_projections(arch, torch_models):
    build, depth, layer1 = EXPECTED[arch]
    module = build(torch_models)
    layout = find_layout(module)
    assert layout.architecture == arch and layout.depth == depth
    assert layout.projection_names[2:4] == layer1
    before = snapshot(module)
    record = apply_depth_scaling(module, scheme="1/sqrt(2L)")
    factor = 1.0 / math.sqrt(2.0 * depth)
    assert [t.name for t in record.tensors] == list(layout.projection_names)
    selected = set(layout.projection_names)
    for name, p in module.named_parameters():
        if name in selected:
            assert torch.equal(p, before[name] * factor), name
        else:
            assert torch.equal(p, before[name]), name
    for t in record.tensors:
        assert t.factor == factor
        assert t.std_after == pytest.approx(t.std_before * factor, rel=1e-6)  # float32 stand-ins
        assert t.std_before > 0


@pytest.mark.parametrize("model", ["mistral", "qwen2"])
def test_mistral_and_qwen2_are_recognized_as_llama_layouts(model, torch_models):
    layout = find_layout(torch_models.hf(model, 2))
    assert layout.architecture == "hf-llama" and layout.depth == 2
    assert layout.projection_names == tuple(f"model.layers.{i}.{n}" for i in range(2)
                                            for n in ("self_attn.o_proj.weight", "mlp.down_proj.weight"))


def test_scheme_factors_follow_their_formulas():
    assert scheme_factors("1/sqrt(L)", 4) == (0.5,) * 4
    assert scheme_factors("1/sqrt(2L)", 8) == (0.25,) * 8
    assert scheme_factors("per-layer", 3) == tuple(1.0 / math.sqrt(2.0 * (i + 1)) for i in range(3))
    assert scheme_factors(lambda layer, depth: (layer + 1) / depth, 4) == (0.25, 0.5, 0.75, 1.0)
    assert SCHEMES == ("1/sqrt(L)", "1/sqrt(2L)", "per-layer")


def test_per_layer_scheme_scales_each_layer_by_its_own_factor(torch_models):
    module = torch_models.TitanLlama(4)
    before = snapshot(module)
    record = apply_depth_scaling(module, scheme="per-layer")
    for t in record.tensors:
        f = 1.0 / math.sqrt(2.0 * (t.layer + 1))
        assert t.factor == f
        assert torch.equal(dict(module.named_parameters())[t.name], before[t.name] * f)


def test_second_application_is_refused_untouched_unless_forced(torch_models):
    module = torch_models.hf("llama", 2)
    apply_depth_scaling(module)
    once = snapshot(module)
    with pytest.raises(AlreadyScaledError, match="force=True"):
        apply_depth_scaling(module, scheme="per-layer")
    for n, p in module.named_parameters():
        assert torch.equal(p, once[n])
    record = apply_depth_scaling(module, force=True)
    assert record.forced and len(scaling_history(module)) == 2
    assert torch.equal(module.model.layers[0].self_attn.o_proj.weight,
                       once["model.layers.0.self_attn.o_proj.weight"] * (1 / math.sqrt(2)))


@pytest.mark.parametrize("scheme,match", [
    ("1/L", "unknown scheme"), (lambda i, L: 0.0, "layer 0"), (lambda i, L: float("nan") if i == 1 else 1.0, "layer 1"),
    (lambda i, L: "half", "real number"), (3, "callable")])
def test_bad_schemes_are_refused_before_any_tensor_changes(scheme, match, torch_models):
    module = torch_models.NanoGPT(2)
    before = snapshot(module)
    with pytest.raises(ScalingSchemeError, match=match):
        apply_depth_scaling(module, scheme=scheme)
    for n, p in module.named_parameters():
        assert torch.equal(p, before[n])
    assert scaling_history(module) == ()


def test_unrecognized_model_lists_what_was_found_and_patterns_work():
    class Odd(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stack = torch.nn.ModuleList(
                torch.nn.ModuleDict({"mix": torch.nn.Linear(8, 8), "out": torch.nn.Linear(8, 8)}) for _ in range(4))

    module = Odd()
    with pytest.raises(ArchitectureError, match=r"(?s)stack.*stack.0.mix.weight.*hf-llama"):
        apply_depth_scaling(module)
    before = snapshot(module)
    record = apply_depth_scaling(module, patterns=[r"stack\.(\d+)\.out\.weight"])
    assert record.architecture == "patterns" and record.depth == 4
    assert [t.name for t in record.tensors] == [f"stack.{i}.out.weight" for i in range(4)]
    assert torch.equal(module.stack[2].out.weight, before["stack.2.out.weight"] * 0.5)
    assert torch.equal(module.stack[2].mix.weight, before["stack.2.mix.weight"])
    fresh = Odd()
    bad = (([r"nothing\.(\d+)"], "matches no parameter"), ([r"stack\.0\.out\.weight"], "group"),
           ([r"(stack)\.\d+\.out\.weight"], "not a layer index"), ("stack", "sequence"),
           ([r"stack\.(\d+"], "regular"))
    for patterns, match in bad:
        with pytest.raises(ArchitectureError, match=match):
            apply_depth_scaling(fresh, patterns=patterns)
    with pytest.raises(ArchitectureError, match="outside"):
        apply_depth_scaling(fresh, patterns=[r"stack\.(\d+)\.out\.weight"], depth=2)
    with pytest.raises(ArchitectureError, match="unknown architecture"):
        apply_depth_scaling(fresh, architecture="bert")


def test_named_architecture_must_match_the_structure(torch_models):
    with pytest.raises(ArchitectureError, match="gpt2"):
        apply_depth_scaling(torch_models.NanoGPT(2), architecture="gpt2")  # nn.Linear, not Conv1D
    record = apply_depth_scaling(torch_models.NanoGPT(2), architecture="nanogpt")
    assert record.architecture == "nanogpt"


def test_record_is_json_serializable_and_printable(torch_models):
    import json
    record = apply_depth_scaling(torch_models.gpt2_without_scaled_init(2), scheme="1/sqrt(2L)")
    doc = json.loads(json.dumps(record.to_dict()))
    assert doc["scheme"] == "1/sqrt(2L)" and len(doc["tensors"]) == 4
    assert "transformer.h.1.mlp.c_proj.weight" in record.to_table()


SCALED_PER_LAYER = {"qwen2-moe": 3}  # its shared expert's down projection is the third


@pytest.mark.parametrize("family", ["llama", "gemma", "gemma2", "gemma3", "olmo2", "stablelm-parallel", "mixtral",
                                    "qwen2-moe", "falcon", "falcon-parallel", "falcon-new", "bloom", "gpt-j",
                                    "gpt-neox", "phi3", "qwen3"])
def test_every_family_scales_exactly_its_residual_outputs_and_nothing_else(family, torch_models):
    module = torch_models.hf(family, 3)
    layout = find_layout(module)
    assert len(layout.projections) == 3 * SCALED_PER_LAYER.get(family, 2)
    before = snapshot(module)
    record = apply_depth_scaling(module, scheme="1/sqrt(2L)")
    f = 1.0 / math.sqrt(6.0)
    selected = {p.name: p for p in layout.projections}
    assert [t.name for t in record.tensors] == list(selected)
    for name, p in module.named_parameters():
        proj = selected.get(name)
        if proj is None:
            assert torch.equal(p, before[name]), name
        elif proj.kind == "gain" and proj.offset:  # Gemma: the effective gain 1 + w is what is scaled
            assert torch.equal(p, (before[name] + proj.offset) * f - proj.offset), name
        else:
            assert torch.equal(p, before[name] * f), name


def test_mixed_dense_and_expert_layers_scale_each_layers_own_outputs(torch_models):
    assert find_layout(torch_models.hf("qwen2-moe-mixed", 3)).projection_names == (
        "model.layers.0.self_attn.o_proj.weight", "model.layers.0.mlp.down_proj.weight",
        *(f"model.layers.{i}.{n}" for i in (1, 2) for n in (
            "self_attn.o_proj.weight", "mlp.experts.down_proj", "mlp.shared_expert.down_proj.weight")))
    deepseek = find_layout(torch_models.hf("deepseek-v3", 2))
    assert deepseek.architecture == "hf-deepseek-moe"
    assert deepseek.projection_names[2:] == tuple(f"model.layers.1.{n}" for n in (
        "self_attn.o_proj.weight", "mlp.experts.down_proj", "mlp.shared_experts.down_proj.weight"))


def test_mixture_of_experts_scales_every_experts_fused_down_projection(torch_models):
    module = torch_models.hf("qwen2-moe", 2)
    names = find_layout(module).projection_names
    assert names == tuple(f"model.layers.{i}.{n}" for i in range(2) for n in (
        "self_attn.o_proj.weight", "mlp.experts.down_proj", "mlp.shared_expert.down_proj.weight"))
    assert module.model.layers[0].mlp.experts.down_proj.ndim == 3  # [experts, out, in], one tensor


@pytest.mark.parametrize("family", ["gemma2", "olmo2"])
def test_with_post_branch_norms_depth_scaling_scales_what_each_branch_adds(family, torch_models):
    module = torch_models.hf(family, 4)
    ids = torch.arange(14).reshape(2, 7) % torch_models.VOCAB
    before = observe_residual_health(module, ids)
    apply_depth_scaling(module)  # the post-branch norm's effective gain, times 1/sqrt(4)
    after = observe_residual_health(module, ids)
    # the first branch sees the same input before and after: what it adds (after its norm) halves
    assert after.branches[0].attention_output_rms == pytest.approx(0.5 * before.branches[0].attention_output_rms,
                                                                   rel=1e-5)
    if family != "gemma2":
        return
    # halving o_proj instead leaves the branch far from halved: the norm divides the factor out
    # (all but what its epsilon keeps, since these random branches are small)
    module = torch_models.hf(family, 4)
    with torch.no_grad():
        for layer in module.model.layers:
            layer.self_attn.o_proj.weight.mul_(0.5)
    moved = observe_residual_health(module, ids)
    assert moved.branches[0].attention_output_rms > 0.8 * before.branches[0].attention_output_rms


def test_scheme_aliases_name_the_same_factors():
    assert scheme_factors("megatron", 8) == scheme_factors("gpt2", 8) == scheme_factors("1/sqrt(2L)", 8)
    assert scheme_factors("torchtitan", 3) == scheme_factors("per-layer", 3)
