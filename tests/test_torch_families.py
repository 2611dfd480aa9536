# SPDX-License-Identifier: MIT
"""observe_residual_health on every family the bridge accepts, against hooks written here from
scratch (forward hooks at the residual states, their gradients from loss.backward()): Gemma2 and
Gemma3 read after the post-branch norm, prompt masking with the caller's attention mask, OLMo2,
mixtures of experts, parallel residuals; structures the bridge does not know are refused."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the torch bridge needs the 'torch' extra")
pytest.importorskip("transformers", reason="Hugging Face families need the 'hf' extra")

from pydepth import ArchitectureError  # noqa: E402
from pydepth.torch import ArchitectureSpec, apply_depth_scaling, find_layout, observe_residual_health  # noqa: E402

REL = 1e-12

# family -> (path of the decoder layers, the child of a layer whose input is the residual stream
# between the two additions, or None when the two branches are added together)
FAMILIES = {
    "llama": ("model.layers", "post_attention_layernorm"),
    "mistral": ("model.layers", "post_attention_layernorm"),
    "qwen2": ("model.layers", "post_attention_layernorm"),
    "qwen3": ("model.layers", "post_attention_layernorm"),
    "phi3": ("model.layers", "post_attention_layernorm"),
    "gemma": ("model.layers", "post_attention_layernorm"),
    "gemma2": ("model.layers", "pre_feedforward_layernorm"),  # post_attention_layernorm is in the branch
    "gemma3": ("model.layers", "pre_feedforward_layernorm"),
    "olmo2": ("model.layers", "mlp"),  # no pre-norm: the feed-forward block reads the stream itself
    "stablelm": ("model.layers", "post_attention_layernorm"),
    "stablelm-parallel": ("model.layers", None),
    "mixtral": ("model.layers", "post_attention_layernorm"),
    "qwen2-moe": ("model.layers", "post_attention_layernorm"),
    "qwen2-moe-mixed": ("model.layers", "post_attention_layernorm"),  # layer 0 dense, the others experts
    "deepseek-v3": ("model.layers", "post_attention_layernorm"),  # shared experts beside the routed ones
    "qwen3-moe": ("model.layers", "post_attention_layernorm"),
    "olmoe": ("model.layers", "post_attention_layernorm"),
    "cohere": ("model.layers", None),  # one norm, attention and MLP added together
    "gpt-neox": ("gpt_neox.layers", None),
    "falcon": ("transformer.h", "post_attention_layernorm"),
    "falcon-parallel": ("transformer.h", None),
    "falcon-new": ("transformer.h", None),
    "bloom": ("transformer.h", "post_attention_layernorm"),
    "gpt-j": ("transformer.h", None),
    "gpt2": ("transformer.h", "ln_2"),
}


def hooked_rms(model, layers_path, mid_child, ids, labels=None, attention_mask=None):
    """(activation RMS, adjoint RMS) per residual state, by forward hooks and loss.backward()."""
    model.eval()
    states = {}

    def keep(index, tensor):
        tensor.retain_grad()
        states[index] = tensor

    layers = model.get_submodule(layers_path)
    per_layer = 2 if mid_child else 1
    handles = [layers[0].register_forward_pre_hook(
        lambda m, args, kwargs: keep(0, args[0] if args else kwargs["hidden_states"]), with_kwargs=True)]
    for b, layer in enumerate(layers):
        if mid_child:
            handles.append(getattr(layer, mid_child).register_forward_pre_hook(
                lambda m, args, b=b: keep(2 * b + 1, args[0])))
        handles.append(layer.register_forward_hook(
            lambda m, args, out, b=b: keep(per_layer * (b + 1), out[0] if isinstance(out, tuple) else out)))
    labels = ids if labels is None else labels
    if attention_mask is not None and labels is ids:
        labels = ids.masked_fill(attention_mask == 0, -100)
    try:
        out = model(input_ids=ids, labels=labels, attention_mask=attention_mask, use_cache=False)
        out.loss.backward()
    finally:
        for h in handles:
            h.remove()
    mask = torch.ones_like(ids, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
    predicts = torch.zeros_like(mask)
    predicts[:, :-1] = labels[:, 1:] != -100  # position t is scored against labels[t + 1]
    rows = mask & predicts

    def rms(t):
        return math.sqrt(float((t.detach()[rows].double() ** 2).mean()))

    return ([rms(states[i]) for i in range(len(states))], [rms(states[i].grad) for i in range(len(states))])


def assert_agrees(report, hooked):
    acts, adjs = hooked
    assert len(report.sites) == len(acts)
    for site, a, g in zip(report.sites, acts, adjs):
        assert site.activation_rms == pytest.approx(a, rel=REL), site.label
        assert site.adjoint_rms == pytest.approx(g, rel=REL), site.label


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_observe_agrees_with_independent_hooks_on_every_accepted_family(family, torch_models):
    model = torch_models.hf(family, 3)
    ids = torch.randint(0, torch_models.VOCAB, (2, 7), generator=torch.Generator().manual_seed(5))
    report = observe_residual_health(model, ids)
    layers, mid = FAMILIES[family]
    assert len(report.sites) == (7 if mid else 4)
    model.zero_grad(set_to_none=True)
    assert_agrees(report, hooked_rms(model, layers, mid, ids))


@pytest.mark.parametrize("family", ["gemma2", "gemma3"])
def test_gemma2_and_gemma3_sites_are_the_stream_after_the_post_branch_norm(family, torch_models):
    model = torch_models.hf(family, 2)
    layout = find_layout(model)
    assert layout.architecture == "hf-gemma-sandwich" and layout.norm_placement == "sandwich"
    assert layout.mid_norms[0] is model.model.layers[0].pre_feedforward_layernorm
    ids = torch.randint(0, torch_models.VOCAB, (2, 6), generator=torch.Generator().manual_seed(2))
    report = observe_residual_health(model, ids)
    # the attention branch before its norm is ~0.02 in RMS; the stream after the addition is ~1
    assert report.sites[1].activation_rms > 0.5
    with pytest.raises(ArchitectureError, match="pre_feedforward_layernorm"):
        find_layout(model, "hf-llama")  # the Llama reading would take the branch for the stream
    assert_agrees(report, hooked_rms(model, "model.layers", "pre_feedforward_layernorm", ids))


def test_prompt_masking_keeps_the_callers_attention_mask_and_only_selects_rms_positions(torch_models):
    model = torch_models.hf("llama", 2)
    ids = torch.randint(1, torch_models.VOCAB, (2, 9), generator=torch.Generator().manual_seed(8))
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, :2] = 0  # left padding on the second row
    labels = ids.clone()
    labels[0, :4] = -100  # the prompt is not scored (supervised fine-tuning)
    labels[1, :5] = -100
    report = observe_residual_health(model, ids, labels, attention_mask=mask)
    model.zero_grad(set_to_none=True)
    hooked = hooked_rms(model, "model.layers", "post_attention_layernorm", ids, labels, mask)
    assert_agrees(report, hooked)
    assert report.valid_positions == (8 - 3) + (8 - 4)
    # with the prompt hidden from attention the states differ: the mask reached the model unchanged
    hidden = hooked_rms(model, "model.layers", "post_attention_layernorm", ids, labels,
                        mask * (labels != -100).long())
    assert abs(hidden[0][-1] - report.sites[-1].activation_rms) > 1e-6


def test_olmo2_reads_the_stream_at_the_feed_forward_input_and_scales_norm_gains(torch_models):
    model = torch_models.hf("olmo2", 2)
    layout = find_layout(model)
    assert layout.architecture == "hf-olmo2" and layout.norm_placement == "post"
    assert layout.mid_norms[1] is model.model.layers[1].mlp
    assert layout.projection_names[:2] == ("model.layers.0.post_attention_layernorm.weight",
                                           "model.layers.0.post_feedforward_layernorm.weight")


class _ShrunkInputBlock(torch.nn.Module):
    """A pre-norm block with nanoGPT's names whose forward adds the attention branch to half its input."""

    def __init__(self, w):
        super().__init__()
        self.ln_1, self.ln_2 = torch.nn.LayerNorm(w), torch.nn.LayerNorm(w)
        self.attn = torch.nn.Module()
        self.attn.c_proj = torch.nn.Linear(w, w)
        self.mlp = torch.nn.Module()
        self.mlp.c_proj = torch.nn.Linear(w, w)

    def forward(self, x):
        x = 0.5 * x + self.attn.c_proj(self.ln_1(x))
        return x + self.mlp.c_proj(self.ln_2(x))


def test_a_structure_other_than_the_one_its_names_suggest_is_refused_by_observation_and_scaling_alike(torch_models):
    model = torch_models.NanoGPT(2).double()
    for i in range(2):
        model.transformer.h[i] = _ShrunkInputBlock(32).double()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    for act in (find_layout, apply_depth_scaling,
                lambda m: observe_residual_health(m, torch.tensor([[1, 2, 3]]), torch.tensor([[2, 3, 4]]))):
        with pytest.raises(ArchitectureError, match=r"transformer\.h\.0: .*not a constant multiple of the input"):
            act(model)
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())


class _SandwichBlock(torch.nn.Module):
    def __init__(self, w):
        super().__init__()
        self.pre_a, self.post_a = torch.nn.RMSNorm(w), torch.nn.RMSNorm(w)
        self.pre_f, self.post_f = torch.nn.RMSNorm(w), torch.nn.RMSNorm(w)
        self.mix, self.ff = torch.nn.Linear(w, w), torch.nn.Linear(w, w)

    def forward(self, x):
        x = x + self.post_a(self.mix(self.pre_a(x)))
        return x + self.post_f(self.ff(torch.tanh(self.pre_f(x))))


class _SandwichModel(torch.nn.Module):
    def __init__(self, vocab, w=16, layers=3):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, w)
        self.stack = torch.nn.ModuleList(_SandwichBlock(w) for _ in range(layers))
        self.last = torch.nn.RMSNorm(w)
        self.head = torch.nn.Linear(w, vocab)

    def forward(self, ids, labels):
        x = self.embed(ids)
        for block in self.stack:
            x = block(x)
        logits = self.head(self.last(x))
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.reshape(-1)), logits


SANDWICH = ArchitectureSpec("my-sandwich", "a user's sandwich-norm decoder", ("stack",), "mix", "ff", "pre_a",
                            "pre_f", "last", norm_placement="sandwich", attention_post_norm="post_a",
                            feed_forward_post_norm="post_f")


def test_a_users_model_described_by_an_architecture_spec_is_observed_where_its_spec_says():
    torch.manual_seed(3)
    model = _SandwichModel(20).double()
    with pytest.raises(ArchitectureError, match="ArchitectureSpec"):
        find_layout(model)  # unknown structure: refused, with the fields to fill in
    ids = torch.randint(0, 20, (2, 5), generator=torch.Generator().manual_seed(1))
    report = observe_residual_health(model, ids, ids, architecture=SANDWICH)  # (loss, logits) output
    states = []
    hooks = [model.stack[0].register_forward_pre_hook(lambda m, a: states.append(a[0]))]
    for block in model.stack:
        hooks.append(block.pre_f.register_forward_pre_hook(lambda m, a: states.append(a[0])))
        hooks.append(block.register_forward_hook(lambda m, a, out: states.append(out)))
    loss, _ = model(ids, ids)
    for h in hooks:
        h.remove()
    grads = torch.autograd.grad(loss, states)
    for site, act, adj in zip(report.sites, states, grads):
        assert site.activation_rms == pytest.approx(math.sqrt(float((act.detach() ** 2).mean())), rel=REL)
        assert site.adjoint_rms == pytest.approx(math.sqrt(float((adj ** 2).mean())), rel=REL)
    wrong = ArchitectureSpec("my-pre", "the same read as pre-norm", ("stack",), "mix", "ff", "pre_a", "pre_f",
                             "last")
    with pytest.raises(ArchitectureError, match="post_a"):
        find_layout(model, wrong)  # the spec names two norms per layer; the layer holds four


@pytest.mark.parametrize("kwargs,match", [
    ({"norm_placement": "middle"}, "norm_placement"),
    ({"norm_placement": "sandwich"}, "attention_post_norm"),
    ({"attention_post_norm": "post_a"}, "sandwich"),
    ({"mid_norm": None}, "mid_norm"),
])
def test_an_inconsistent_architecture_spec_is_refused_naming_the_field(kwargs, match):
    fields = {"name": "x", "description": "x", "layers": ("stack",), "attention_output": "mix",
              "feed_forward_output": "ff", "attention_norm": "pre_a", "mid_norm": "pre_f", "final_norm": "last"}
    with pytest.raises(ArchitectureError, match=match):
        ArchitectureSpec(**{**fields, **kwargs})


def test_gemma_gains_are_reported_as_the_effective_one_plus_weight(torch_models):
    model = torch_models.hf("gemma", 2)
    with torch.no_grad():
        model.model.norm.weight.uniform_(-0.5, 0.5)
    report = observe_residual_health(model, torch.arange(12).reshape(2, 6) % torch_models.VOCAB)
    assert report.final_norm_gain == tuple(1.0 + float(w) for w in model.model.norm.weight.detach().double())
    assert report.branches[0].attention_norm_gain == (1.0,) * 32  # stored weight 0, effective gain 1
    assert find_layout(torch_models.hf("llama", 1)).gain_offset == 0.0


def test_float32_and_bfloat16_scaled_weights_are_w_times_the_float32_factor(torch_models):
    from pydepth.torch import apply_depth_scaling
    model = torch_models.hf("llama", 3).float()
    w = model.model.layers[0].self_attn.o_proj.weight.detach().clone()
    apply_depth_scaling(model)
    f = 1.0 / math.sqrt(3.0)
    scaled = model.model.layers[0].self_attn.o_proj.weight.detach()
    assert torch.equal(scaled, w * torch.tensor(f, dtype=torch.float32))  # w * fl32(f), rounded once
    exact = (w.double() * f).float()  # the correctly rounded w * f differs in some elements
    assert not torch.equal(scaled, exact)
    assert np.abs(scaled.numpy().view(np.int32) - exact.numpy().view(np.int32)).max() == 1
    half = torch_models.hf("llama", 3).to(torch.bfloat16)
    w = half.model.layers[0].mlp.down_proj.weight.detach().clone()
    apply_depth_scaling(half)  # bfloat16: w * fl32(f) computed in float32, rounded once to bfloat16
    expected = (w.float() * torch.tensor(f, dtype=torch.float32)).to(torch.bfloat16)
    assert torch.equal(half.model.layers[0].mlp.down_proj.weight.detach(), expected)


def test_a_norm_that_cannot_be_run_is_not_taken_for_one_with_a_gain_offset(torch_models):
    with torch.device("meta"):  # no values: the norms cannot be probed
        llama, gemma2 = torch_models.hf("llama", 2), torch_models.hf("gemma2", 2)
    assert find_layout(llama).architecture == "hf-llama"
    with pytest.raises(ArchitectureError, match="could not be run"):
        find_layout(gemma2)
