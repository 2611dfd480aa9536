# SPDX-License-Identifier: MIT
"""The depth-scaling mark travels with the weights: scaling a model and then its backbone, a
model saved and loaded again, or a fresh model loaded from a scaled state dict is refused
unless forced; the audit reads the mark too."""
import json

import pytest

torch = pytest.importorskip("torch", reason="the torch bridge needs the 'torch' extra")
pytest.importorskip("transformers", reason="Hugging Face models need the 'hf' extra")

from pydepth import AlreadyScaledError  # noqa: E402
from pydepth.torch import apply_depth_scaling, audit_initialization  # noqa: E402


def snapshot(module):
    return {n: p.detach().clone() for n, p in module.named_parameters()}


def assert_unchanged(module, before):
    for n, p in module.named_parameters():
        assert torch.equal(p, before[n]), n


def test_scaling_the_model_then_its_backbone_is_refused(torch_models):
    model = torch_models.hf("llama", 4)
    apply_depth_scaling(model)
    before = snapshot(model)
    with pytest.raises(AlreadyScaledError, match=r"1/sqrt\(L\).*config"):
        apply_depth_scaling(model.model)
    assert_unchanged(model, before)
    nano = torch_models.NanoGPT(4)
    apply_depth_scaling(nano, scheme="1/sqrt(2L)")
    with pytest.raises(AlreadyScaledError, match="parameters"):  # no config: the parameters carry it
        apply_depth_scaling(nano.transformer, scheme="1/sqrt(2L)")


def test_save_pretrained_then_from_pretrained_keeps_the_mark(torch_models, tmp_path):
    import transformers
    model = torch_models.hf("qwen2", 4)
    apply_depth_scaling(model)
    model.save_pretrained(tmp_path)
    stored = json.loads((tmp_path / "config.json").read_text())["pydepth_depth_scaling"]
    assert stored == [{"scheme": "1/sqrt(L)", "architecture": "hf-llama", "depth": 4, "tensors": 8, "forced": False}]
    loaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, local_files_only=True, dtype=torch.float64)
    before = snapshot(loaded)
    with pytest.raises(AlreadyScaledError, match="config"):
        apply_depth_scaling(loaded, scheme="per-layer")
    assert_unchanged(loaded, before)
    audit = audit_initialization(loaded)
    assert audit.scheme == "1/sqrt(L)" and audit.scheme_source == "recorded" and audit.ok
    assert "1/sqrt(L) on 8 tensors of hf-llama (config)" in audit.to_table()


def test_a_scaled_state_dict_loaded_into_a_fresh_model_is_caught_by_the_audit(torch_models):
    scaled = torch_models.hf("llama", 4)
    apply_depth_scaling(scaled)
    fresh = torch_models.hf("llama", 4)
    fresh.load_state_dict(scaled.state_dict())
    before = snapshot(fresh)
    with pytest.raises(AlreadyScaledError, match="already follow 1/sqrt\\(L\\)"):
        apply_depth_scaling(fresh)
    assert_unchanged(fresh, before)
    record = apply_depth_scaling(fresh, force=True)  # forced: done, and recorded as a forced repeat
    assert record.forced
    assert torch.equal(fresh.model.layers[1].mlp.down_proj.weight, before["model.layers.1.mlp.down_proj.weight"] * 0.5)


def test_a_stock_gpt2_already_follows_its_scheme_and_is_not_scaled_again(torch_models):
    model = torch_models.hf("gpt2", 4)
    with pytest.raises(AlreadyScaledError, match="1/sqrt\\(2L\\)"):
        apply_depth_scaling(model, scheme="1/sqrt(2L)")
    fresh = torch_models.gpt2_without_scaled_init(4)  # the same model with its scaled init skipped
    apply_depth_scaling(fresh, scheme="megatron")
    assert audit_initialization(fresh).ok
