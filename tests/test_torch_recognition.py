# SPDX-License-Identifier: MIT
"""Recognition from what a layer does: families without a table row (Phi, GPT-Neo, StarCoder2,
Persimmon, Apertus, GLM4, GraniteMoE, MPT, BioGPT, XGLM) and Granite with its residual multiplier
are observed at the sites independent hooks read and scaled; observation and scaling refuse
together; Hugging Face model_type names are accepted by architecture=."""
import pytest

torch = pytest.importorskip("torch", reason="the torch bridge needs the 'torch' extra")
pytest.importorskip("transformers", reason="Hugging Face families need the 'hf' extra")

from pydepth import AlreadyScaledError, ArchitectureError  # noqa: E402
from conftest import load_helper  # noqa: E402
from pydepth.torch import apply_depth_scaling, find_layout, observe_residual_health  # noqa: E402

hf_tiny = load_helper("hf_tiny.py")

NAMED = {"phi": {}, "gpt_neo": dict(attention_types=[[["global", "local"], 1]]), "starcoder2": {}, "persimmon": {},
         "apertus": {}, "glm4": {}, "granitemoe": {}, "mpt": {}, "biogpt": {}, "xglm": {},
         "granite": dict(residual_multiplier=0.22)}
FLOAT32 = {"xglm"}  # transformers' XGLM fills its mask with float32's minimum and cannot run in float64


@pytest.mark.parametrize("model_type", sorted(NAMED))
def test_families_without_a_table_row_are_observed_and_scaled(model_type):
    dtype = torch.float32 if model_type in FLOAT32 else torch.float64
    model = hf_tiny.tiny_model(model_type, dtype, **NAMED[model_type])
    layout = find_layout(model)
    ids = torch.randint(3, 50, (2, 7), generator=torch.Generator().manual_seed(4))
    hf_tiny.assert_sites_match_independent_hooks(model, layout, ids)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    record = apply_depth_scaling(model, force=True)
    scaled = {t.name: t.factor for t in record.tensors}
    assert len(scaled) >= 2 * layout.depth
    for n, p in model.named_parameters():
        want = before[n] * scaled[n] if n in scaled else before[n]
        assert torch.equal(p.detach(), want), n


def test_granites_residual_multiplier_is_observed_and_named_in_the_scaling_record():
    model = hf_tiny.tiny_model("granite", residual_multiplier=0.22)
    layout = find_layout(model)
    assert layout.attention_multipliers == (0.22, 0.22) and layout.feed_forward_multipliers == (0.22, 0.22)
    ids = torch.randint(3, 50, (2, 7), generator=torch.Generator().manual_seed(4))
    report = hf_tiny.assert_sites_match_independent_hooks(model, layout, ids)
    assert report.branches[0].attention_output_rms > 0.0
    record = apply_depth_scaling(model)
    assert record.residual_multipliers == (0.22,)
    assert "residual multiplier 0.22 kept as is" in record.to_table()
    assert record.to_dict()["residual_multipliers"] == [0.22]


class _HalfInputLlamaLayer(torch.nn.Module):
    """Wraps a Llama layer so that its attention branch is added to half its input."""

    def __init__(self, layer):
        super().__init__()
        self.inner = layer

    def forward(self, hidden_states, **kwargs):
        inner = self.inner
        h = 0.5 * hidden_states + inner.self_attn(inner.input_layernorm(hidden_states), **kwargs)[0]
        return h + inner.mlp(inner.post_attention_layernorm(h))


@pytest.mark.parametrize("model_type", ["minimax", "llama-half-input"])
def test_observation_and_scaling_refuse_the_same_models(model_type, torch_models):
    if model_type == "minimax":
        model = hf_tiny.tiny_model("minimax")
    else:
        model = torch_models.hf("llama", 2)
        for i, layer in enumerate(model.model.layers):
            model.model.layers[i] = _HalfInputLlamaLayer(layer)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    messages = []
    for act in (apply_depth_scaling, lambda m: observe_residual_health(m, torch.tensor([[3, 4, 5]]))):
        with pytest.raises(ArchitectureError) as info:
            act(model)
        messages.append(str(info.value).splitlines()[0])
    assert messages[0] == messages[1] and "layers.0" in messages[0] and len(messages[0]) < 300
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())


def test_hugging_face_model_type_names_are_accepted_by_architecture(torch_models):
    model = torch_models.hf("llama", 2)
    assert find_layout(model, "llama").projection_names == find_layout(model).projection_names
    with pytest.raises(ArchitectureError, match="model_type 'llama'"):
        find_layout(model, "gpt_neo")
    apply_depth_scaling(model, architecture="llama")
    with pytest.raises(AlreadyScaledError):
        apply_depth_scaling(model, architecture="llama")


def test_grouped_experts_refusing_float64_are_told_to_use_eager_experts():
    model = hf_tiny.tiny_model("minimax", experts=None)  # transformers' default: grouped experts
    with pytest.raises(ArchitectureError, match='experts_implementation="eager"') as info:
        find_layout(model)
    assert "Float32" in str(info.value).splitlines()[0]


@pytest.mark.parametrize("value,word", [(float("nan"), "NaN"), (float("inf"), "inf")])
def test_a_non_finite_gain_is_named_as_such(value, word, torch_models):
    model = torch_models.hf("llama", 2)
    with torch.no_grad():
        model.model.layers[1].post_attention_layernorm.weight[3] = value
    with pytest.raises(ArchitectureError) as info:
        find_layout(model)
    first = str(info.value).splitlines()[0]
    assert "model.layers.1: the stream holds" in first and f"'post_attention_layernorm.weight' holds {word}" in first
