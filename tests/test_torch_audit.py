# SPDX-License-Identifier: MIT
"""audit_initialization: expected standard deviations per role, the verdicts that name the
usual mistakes (a GPT-2 whose c_proj scaling was skipped, a Llama scaled twice)."""
import json
import math

import pytest
import torch

from pydepth import DecoderConfig, DecoderModel, ScalingSchemeError, SplitMix64
from pydepth.torch import apply_depth_scaling, audit_initialization, to_torch


def by_name(audit):
    return {r.name: r for r in audit.rows}


def test_gpt2_with_skipped_c_proj_scaling_is_found_unscaled(torch_models):
    model = torch_models.hf("gpt2", 4)
    torch.manual_seed(3)
    with torch.no_grad():  # what a skipped scaled init leaves behind: plain N(0, 0.02)
        for block in model.transformer.h:
            block.mlp.c_proj.weight.normal_(0.0, 0.02)
    audit = audit_initialization(model, scheme="1/sqrt(2L)")
    rows = by_name(audit)
    for i in range(4):
        assert rows[f"transformer.h.{i}.mlp.c_proj.weight"].verdict == "unscaled"
        assert rows[f"transformer.h.{i}.mlp.c_proj.weight"].role == "residual-output"
        assert rows[f"transformer.h.{i}.attn.c_attn.weight"].verdict == "ok"
    assert rows["transformer.wte.weight"].role == "embedding"
    assert rows["transformer.h.0.mlp.c_proj.weight"].expected_std == pytest.approx(0.02 / math.sqrt(8))
    assert not audit.ok and "unscaled" in audit.to_table()
    apply_depth_scaling(model, scheme="1/sqrt(2L)")  # fixing it makes the audit clean for those rows
    assert all(by_name(audit_initialization(model, scheme="1/sqrt(2L)"))[f"transformer.h.{i}.mlp.c_proj.weight"]
               .verdict == "ok" for i in range(4))


def test_llama_scaled_twice_is_found_double_scaled(torch_models):
    model = torch_models.hf("llama", 4)
    assert all(r.verdict == "unscaled" for r in audit_initialization(model).findings)
    apply_depth_scaling(model)
    assert audit_initialization(model).ok
    apply_depth_scaling(model, force=True)
    audit = audit_initialization(model)
    assert {r.name for r in audit.findings} == {f"model.layers.{i}.{n}" for i in range(4)
                                                for n in ("self_attn.o_proj.weight", "mlp.down_proj.weight")}
    assert {r.verdict for r in audit.findings} == {"double-scaled"}
    assert audit.base_source.startswith("config.initializer_range")


def test_twin_audit_uses_xavier_per_matrix():
    cfg = DecoderConfig(64, 32, 4, 48, 4, 8)
    twin = to_torch(DecoderModel(cfg, SplitMix64(11)))
    rows = by_name(audit_initialization(twin))
    assert rows["blocks.2.ffn.down.weight"].verdict == "unscaled"
    assert rows["blocks.2.ffn.down.weight"].expected_std == pytest.approx(math.sqrt(2 / 80) * 0.5)
    assert rows["blocks.2.ffn.gate.weight"].verdict == "ok"
    apply_depth_scaling(twin)
    assert audit_initialization(twin).ok


def test_base_from_other_matrices_and_explicit_base(torch_models):
    model = torch_models.TitanLlama(4)  # no config: the base is the median of the other matrices
    audit = audit_initialization(model, scheme="per-layer")
    assert audit.base_source.startswith("median")
    assert {r.verdict for r in audit.findings} == {"unscaled"}
    apply_depth_scaling(model, scheme="per-layer")
    assert audit_initialization(model, scheme="per-layer").ok
    rows = by_name(audit_initialization(model, scheme="per-layer", base_std=0.04))
    assert rows["layers.0.attention.wq.weight"].verdict == "off"
    assert rows["layers.0.attention.wq.weight"].expected_std == 0.04


def test_other_std_is_off_and_output_is_serializable(torch_models):
    model = torch_models.NanoGPT(2)
    with torch.no_grad():
        model.transformer.h[0].attn.c_attn.weight.mul_(3.0)
    audit = audit_initialization(model, scheme="1/sqrt(2L)", base_std=0.02)
    row = by_name(audit)["transformer.h.0.attn.c_attn.weight"]
    assert row.verdict == "off" and row.ratio == pytest.approx(3.0, rel=0.1)
    doc = json.loads(json.dumps(audit.to_dict()))
    assert doc["rows"][0].keys() == {"name", "role", "layer", "measured_std", "expected_std", "ratio", "verdict"}


@pytest.mark.parametrize("kwargs,match", [({"base_std": 0.0}, "base_std"), ({"base_std": float("inf")}, "base_std"),
                                          ({"tolerance": -1}, "tolerance"), ({"scheme": "2L"}, "unknown scheme")])
def test_bad_audit_arguments_are_typed_errors(kwargs, match, torch_models):
    with pytest.raises(ScalingSchemeError, match=match):
        audit_initialization(torch_models.NanoGPT(1), **kwargs)


def test_a_stock_gpt2_is_read_as_following_1_over_sqrt_2l_not_as_off(torch_models):
    model = torch_models.hf("gpt2", 4)  # transformers draws c_proj at 0.02 / sqrt(2 * 4)
    audit = audit_initialization(model)
    assert "1/sqrt(2L)" in audit.follows
    assert audit.scheme == "1/sqrt(2L)" and audit.scheme_source == "detected"
    assert audit.ok and "off" not in {r.verdict for r in audit.rows}
    assert "residual outputs follow: 1/sqrt(2L) (GPT-2, nanoGPT, Megatron" in audit.to_table()
    explicit = audit_initialization(model, scheme="1/sqrt(L)")  # asked for another scheme: it says which
    assert explicit.follows == audit.follows and explicit.scheme_source == "argument"
    assert audit_initialization(model, scheme="megatron").scheme == "1/sqrt(2L)"


def test_each_known_scheme_is_recognized_by_name(torch_models):
    for scheme in ("1/sqrt(L)", "1/sqrt(2L)", "per-layer"):
        model = torch_models.TitanLlama(4)
        assert audit_initialization(model).follows == ("unscaled",)
        apply_depth_scaling(model, scheme=scheme)
        fresh = torch_models.TitanLlama(4)  # the same weights without the mark: read from the weights alone
        fresh.load_state_dict(model.state_dict())
        audit = audit_initialization(fresh)
        assert scheme in audit.follows and audit.scheme == audit.follows[0] and audit.ok, (scheme, audit.follows)


def test_mixture_of_experts_audit_covers_the_fused_3d_expert_tensors(torch_models):
    model = torch_models.hf("mixtral", 4)
    rows = by_name(audit_initialization(model))
    down = rows["model.layers.2.mlp.experts.down_proj"]
    assert down.role == "residual-output" and down.verdict == "unscaled"
    assert rows["model.layers.2.mlp.experts.gate_up_proj"].role == "matrix"
    apply_depth_scaling(model)
    assert by_name(audit_initialization(model))["model.layers.2.mlp.experts.down_proj"].verdict == "ok"


def test_sandwich_norm_audit_reads_effective_gains(torch_models):
    model = torch_models.hf("gemma2", 4)
    audit = audit_initialization(model)
    gain = by_name(audit)["model.layers.0.post_attention_layernorm.weight"]
    assert gain.role == "residual-output" and gain.measured_std == 1.0  # stored 0, effective gain 1
    assert by_name(audit)["model.layers.0.self_attn.o_proj.weight"].role == "matrix"
    apply_depth_scaling(model)
    after = by_name(audit_initialization(model))["model.layers.0.post_attention_layernorm.weight"]
    assert after.measured_std == pytest.approx(0.5) and after.verdict == "ok"
