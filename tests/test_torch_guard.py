# SPDX-License-Identifier: MIT
"""The repeat guard lives with the weights: a sibling built from the same config object is
untouched, a model built from a scaled model's saved config does not inherit the mark, a
state-dict copy of a model scaled once or more is caught by the audit, and force=True is the one
way past it."""
import json

import pytest

torch = pytest.importorskip("torch", reason="the torch bridge needs the 'torch' extra")
transformers = pytest.importorskip("transformers", reason="Hugging Face models need the 'hf' extra")

from pydepth import AlreadyScaledError  # noqa: E402
from pydepth.torch import apply_depth_scaling, audit_initialization  # noqa: E402

CONFIG = dict(num_hidden_layers=4, hidden_size=32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=48,
              vocab_size=50, max_position_embeddings=64)


def test_a_sibling_built_from_the_same_config_object_is_untouched(tmp_path):
    cfg = transformers.LlamaConfig(**CONFIG)
    scaled, sibling = transformers.LlamaForCausalLM(cfg).double(), transformers.LlamaForCausalLM(cfg).double()
    apply_depth_scaling(scaled)
    assert audit_initialization(sibling).scheme_source != "recorded"
    sibling.save_pretrained(tmp_path)
    assert "pydepth_depth_scaling" not in json.loads((tmp_path / "config.json").read_text())
    apply_depth_scaling(sibling)  # not refused: nothing was done to it
    with pytest.raises(AlreadyScaledError, match="config"):
        apply_depth_scaling(scaled.model)


def test_a_model_built_from_a_scaled_models_saved_config_does_not_inherit_the_mark(tmp_path):
    scaled = transformers.LlamaForCausalLM(transformers.LlamaConfig(**CONFIG)).double()
    apply_depth_scaling(scaled)
    scaled.save_pretrained(tmp_path)
    fresh = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.from_pretrained(tmp_path)).double()
    assert audit_initialization(fresh).recorded == ()
    apply_depth_scaling(fresh)
    loaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, local_files_only=True, dtype=torch.float64)
    with pytest.raises(AlreadyScaledError, match="recorded on the config"):  # the weights came along: so did the mark
        apply_depth_scaling(loaded)


@pytest.mark.parametrize("family,schemes", [
    ("gpt2", ["1/sqrt(2L)"]),  # stock GPT-2 already follows 1/sqrt(2L): forced once more, it is applied twice
    ("llama", ["1/sqrt(L)", "per-layer"]),
    ("gemma2", ["per-layer", "per-layer"]),
])
def test_a_state_dict_copy_of_a_model_scaled_once_or_more_is_caught(family, schemes, torch_models):
    scaled = torch_models.hf(family, 4)
    for scheme in schemes:
        apply_depth_scaling(scaled, scheme=scheme, force=True)
    fresh = torch_models.hf(family, 4)
    fresh.load_state_dict(scaled.state_dict())
    before = {n: p.detach().clone() for n, p in fresh.named_parameters()}
    with pytest.raises(AlreadyScaledError, match="already follow"):
        apply_depth_scaling(fresh, scheme=schemes[0])
    assert all(torch.equal(p, before[n]) for n, p in fresh.named_parameters())
    assert apply_depth_scaling(fresh, scheme=schemes[0], force=True).forced
