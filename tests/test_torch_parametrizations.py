# SPDX-License-Identifier: MIT
"""The named depth parametrizations applied to a Hugging Face Llama and GPT-2 (docs/numerics-torch.md
§10): each row's init factor lands on exactly the residual output projections, bit for bit; a
branch multiplier μ ≠ 1 gives the logits of the same model with μ folded into those weights;
a second application is refused and a sibling stays untouched; the optimizer groups carry the
table's factors times the base values."""

import copy
import dataclasses
import json
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the torch bridge needs the 'torch' extra")
pytest.importorskip("transformers", reason="Hugging Face models need the 'hf' extra")

from pydepth import AlreadyScaledError, ParametrizationError  # noqa: E402
from pydepth.parametrizations import PARAMETRIZATIONS, get_parametrization  # noqa: E402
from pydepth.torch import BranchMultiplier, apply_parametrization, observe_residual_health  # noqa: E402
from pydepth.torch import parameter_groups, restore_branch_multipliers  # noqa: E402

LAYERS = 3
NAMES = tuple(PARAMETRIZATIONS)
MULTIPLIED = tuple(n for n in NAMES if PARAMETRIZATIONS[n].branch_multiplier(LAYERS) != 1.0)
#: Written from the families' module names, independently of recognition: (residual output
#: weights and biases with their block, norm parameters, parameters outside the blocks).
FAMILIES = {
    "llama": (
        r"model\.layers\.(\d+)\.(?:self_attn\.o_proj|mlp\.down_proj)\.(weight|bias)",
        r"model\.layers\.\d+\.(?:input_layernorm|post_attention_layernorm)\.weight",
        {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"},
    ),
    "gpt2": (
        r"transformer\.h\.(\d+)\.(?:attn|mlp)\.c_proj\.(weight|bias)",
        r"transformer\.h\.\d+\.ln_[12]\.(?:weight|bias)",
        {"transformer.wte.weight", "transformer.wpe.weight", "transformer.ln_f.weight", "transformer.ln_f.bias"},
    ),
}


def build(torch_models, family):
    # a stock GPT-2 draws c_proj at 0.02/sqrt(2L) already (GPT-2's rule): the same-base control is the base
    return torch_models.gpt2_without_scaled_init(LAYERS) if family == "gpt2" else torch_models.hf(family, LAYERS)


def bits(t):
    return t.detach().numpy().astype(np.float64).reshape(-1).view(np.uint64)


def snapshot(model):
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def ids():
    return torch.tensor([[3, 17, 5, 41, 8, 22, 1], [9, 0, 33, 12, 47, 6, 30]])


def folded(model, family, mu):
    """The reference: a copy without hooks whose residual output projections (weight and bias)
    are multiplied by μ, so each branch adds μ times its output (to rounding)."""
    ref = copy.deepcopy(model)
    for m in ref.modules():
        m._forward_hooks.clear()
    pattern = re.compile(FAMILIES[family][0])
    with torch.no_grad():
        for n, p in ref.named_parameters():
            if pattern.fullmatch(n):
                p.mul_(mu)
    return ref


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("name", NAMES)
def test_each_parametrization_multiplies_exactly_the_residual_output_weights_by_its_init_factor(
    torch_models, family, name
):
    model = build(torch_models, family)
    before = snapshot(model)
    row = get_parametrization(name)
    record = apply_parametrization(model, name)
    pattern = re.compile(FAMILIES[family][0])
    scaled = 0
    for n, p in model.named_parameters():
        m = pattern.fullmatch(n)
        if m is not None and m.group(2) == "weight":
            expected = before[n].numpy() * row.init_factor(LAYERS, int(m.group(1)))  # numpy: one rounded multiply
            np.testing.assert_array_equal(bits(p), expected.reshape(-1).view(np.uint64), err_msg=n)
            scaled += 1
        else:
            np.testing.assert_array_equal(bits(p), bits(before[n]), err_msg=n)
    assert scaled == 2 * LAYERS
    assert record.parametrization == name and record.depth == LAYERS
    assert [t.factor for t in record.scaling.tensors] == [
        row.init_factor(LAYERS, b) for b in range(LAYERS) for _ in range(2)
    ]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("name", MULTIPLIED)
def test_a_branch_multiplier_gives_the_logits_of_the_model_with_it_folded_into_the_output_projections(
    torch_models, family, name
):
    model = build(torch_models, family).eval()
    plain = copy.deepcopy(model)
    record = apply_parametrization(model, name)
    mu = get_parametrization(name).branch_multiplier(LAYERS)
    assert record.branch_multiplier == mu and len(record.hooked_modules) == 2 * LAYERS
    with torch.no_grad():
        got = model(ids()).logits
        want = folded(model, family, mu)(ids()).logits
        unmultiplied = folded(model, family, 1.0)(ids()).logits
    scale = float(want.abs().max())
    assert float((got - want).abs().max()) <= 1e-12 * scale
    assert float((got - unmultiplied).abs().max()) > 1e-6 * scale  # the multiplier changes the forward
    del plain


@pytest.mark.parametrize("family", FAMILIES)
def test_the_multiplied_gradients_match_the_folded_reference(torch_models, family):
    model = build(torch_models, family)
    apply_parametrization(model, "completep")
    mu = get_parametrization("completep").branch_multiplier(LAYERS)
    ref = folded(model, family, mu)
    model.eval()
    ref.eval()
    x = ids()
    model(x, labels=x).loss.backward()
    ref(x, labels=x).loss.backward()
    pattern = re.compile(FAMILIES[family][0])
    grads = dict(ref.named_parameters())
    for n, p in model.named_parameters():
        g, r = p.grad, grads[n].grad
        if pattern.fullmatch(n):
            r = r * mu  # d/dW of (μW)x is μ times d/d(μW)
        assert float((g - r).abs().max()) <= 1e-10 * float(r.abs().max()) + 1e-300, n


@pytest.mark.parametrize("family", FAMILIES)
def test_observation_sees_the_multiplied_branches_as_the_folded_model_does(torch_models, family):
    model = build(torch_models, family)
    apply_parametrization(model, "depth-mup")
    ref = folded(model, family, get_parametrization("depth-mup").branch_multiplier(LAYERS))
    got, want = observe_residual_health(model, ids()), observe_residual_health(ref, ids())
    assert len(got.sites) == len(want.sites) and len(got.branches) == len(want.branches) == LAYERS
    for rows_got, rows_want in ((got.sites, want.sites), (got.branches, want.branches)):
        for a, b in zip(rows_got, rows_want):
            for x, y in zip(dataclasses.astuple(a), dataclasses.astuple(b)):
                if isinstance(x, float):
                    assert abs(x - y) <= 1e-9 * max(abs(y), 1e-300), (a, b)
                else:
                    assert x == y


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("name", NAMES)
def test_a_second_application_is_refused_and_changes_nothing(torch_models, family, name):
    model = build(torch_models, family).eval()
    apply_parametrization(model, name)
    before = snapshot(model)
    with torch.no_grad():
        logits = model(ids()).logits
    for second in (name, "chapter"):
        with pytest.raises(AlreadyScaledError):
            apply_parametrization(model, second)
    for n, p in model.named_parameters():
        np.testing.assert_array_equal(bits(p), bits(before[n]), err_msg=n)
    with torch.no_grad():
        assert torch.equal(model(ids()).logits, logits)


def test_force_applies_a_second_time_and_says_so(torch_models):
    model = build(torch_models, "llama")
    apply_parametrization(model, "completep")
    record = apply_parametrization(model, "completep", force=True)
    mu = get_parametrization("completep").branch_multiplier(LAYERS)
    assert record.forced
    hooks = [h for m in model.modules() for h in m._forward_hooks.values() if isinstance(h, BranchMultiplier)]
    assert len(hooks) == 4 * LAYERS and all(h.multiplier == mu for h in hooks)


def test_a_sibling_built_from_the_same_config_is_untouched(torch_models):
    import transformers

    model = build(torch_models, "llama")
    sibling = transformers.LlamaForCausalLM(model.config).double()
    apply_parametrization(model, "depth-mup")
    assert not any(m._forward_hooks for m in sibling.modules())
    assert getattr(sibling.config, "pydepth_parametrization", None) is None
    assert model.config.pydepth_parametrization[0]["parametrization"] == "depth-mup"
    apply_parametrization(sibling, "depth-mup")  # not refused: nothing was applied to it


def test_a_stock_gpt2_already_carries_gpt2s_init_and_is_refused_unless_forced(torch_models):
    model = torch_models.hf("gpt2", LAYERS)
    before = snapshot(model)
    with pytest.raises(AlreadyScaledError, match="1/sqrt\\(2L\\)"):
        apply_parametrization(model, "depth-mup")
    for n, p in model.named_parameters():
        assert torch.equal(p, before[n]), n
    assert not any(m._forward_hooks for m in model.modules())


def test_an_unknown_name_is_refused_naming_the_known_ones_and_changes_nothing(torch_models):
    model = build(torch_models, "llama")
    before = snapshot(model)
    with pytest.raises(ParametrizationError, match="completep"):
        apply_parametrization(model, "mup")
    with pytest.raises(ParametrizationError, match="depth-mup"):
        parameter_groups(model, "nope", lr=1e-3)
    for n, p in model.named_parameters():
        assert torch.equal(p, before[n]), n
    assert not any(m._forward_hooks for m in model.modules())


def test_the_hooks_survive_deepcopy_load_state_dict_and_torch_compile(torch_models):
    model = build(torch_models, "llama").eval()
    apply_parametrization(model, "completep")
    with torch.no_grad():
        logits = model(ids()).logits
        twin = copy.deepcopy(model)
        assert torch.equal(twin(ids()).logits, logits)
        assert set(twin.state_dict()) == set(model.state_dict())
        twin.load_state_dict(model.state_dict())
        assert torch.equal(twin(ids()).logits, logits)
        compiled = torch.compile(model, backend="eager")
        assert torch.equal(compiled(ids()).logits, logits)


def test_save_pretrained_keeps_the_record_and_restore_rehooks_the_branch_multipliers(torch_models, tmp_path):
    import transformers

    model = build(torch_models, "llama").eval()
    apply_parametrization(model, "depth-mup")
    model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert (
        saved["pydepth_parametrization"][0]["branch_multiplier"]
        == model.config.pydepth_parametrization[0]["branch_multiplier"]
    )
    loaded = transformers.LlamaForCausalLM.from_pretrained(tmp_path, torch_dtype=torch.float64).eval()
    with pytest.raises(AlreadyScaledError):  # the scaling's mark came with the weights
        apply_parametrization(loaded, "depth-mup")
    restored = restore_branch_multipliers(loaded)
    assert len(restored) == 2 * LAYERS
    with torch.no_grad():
        assert torch.equal(loaded(ids()).logits, model(ids()).logits)
    with pytest.raises(AlreadyScaledError):
        restore_branch_multipliers(loaded)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("name", NAMES)
def test_parameter_groups_carry_the_tables_factors_times_the_base_values(torch_models, family, name):
    model = build(torch_models, family)
    lr, wd, eps = 3e-3, 0.1, 1e-8
    groups = parameter_groups(model, name, lr=lr, weight_decay=wd, eps=eps)
    row = get_parametrization(name)
    names = {id(p): n for n, p in model.named_parameters()}
    _, norm, outside = FAMILIES[family]
    seen = []
    for g in groups:
        members = [names[id(p)] for p in g["params"]]
        seen += members
        for n in members:
            expected = "embedding" if n in outside else "norm" if re.fullmatch(norm, n) else "hidden"
            assert g["group"] == expected, n
        for key, base, factor in (
            ("lr", lr, row.lr_factor),
            ("eps", eps, row.epsilon_factor),
            ("weight_decay", wd, row.weight_decay_factor),
        ):
            want = np.float64(base) * np.float64(factor(LAYERS, g["group"]))
            assert np.array([g[key]]).view(np.uint64)[0] == np.array([want]).view(np.uint64)[0], (g["group"], key)
    assert sorted(seen) == sorted(names.values())  # every parameter once
    optimizer = torch.optim.AdamW(groups)
    for g, pg in zip(groups, optimizer.param_groups):
        assert (pg["lr"], pg["eps"], pg["weight_decay"]) == (g["lr"], g["eps"], g["weight_decay"])


def test_parameter_groups_without_eps_serve_sgd_and_refuse_bad_base_values(torch_models):
    from pydepth import InvalidHyperparameterError

    model = build(torch_models, "llama")
    groups = parameter_groups(model, "depth-mup", lr=0.1, eps=None)
    assert all("eps" not in g for g in groups)
    torch.optim.SGD(groups)
    for bad in (dict(lr=-1.0), dict(lr=float("nan")), dict(lr=0.1, weight_decay=-0.5), dict(lr=0.1, eps=0.0)):
        with pytest.raises(InvalidHyperparameterError):
            parameter_groups(model, "depth-mup", **bad)


def test_a_model_whose_config_records_a_parametrization_but_has_no_hooks_is_refused_unless_forced(torch_models):
    import transformers

    model = build(torch_models, "llama")
    apply_parametrization(model, "completep")
    fresh = transformers.LlamaForCausalLM(model.config).double()  # the parametrized config, fresh weights
    before = snapshot(fresh)
    with pytest.raises(AlreadyScaledError, match="restore_branch_multipliers"):
        apply_parametrization(fresh, "completep")
    for n, p in fresh.named_parameters():
        assert torch.equal(p, before[n]), n
    assert not any(m._forward_hooks for m in fresh.modules())
    assert apply_parametrization(fresh, "completep", force=True).forced


@pytest.mark.parametrize(
    "name, scheme", [("chapter", "1/sqrt(L)"), ("gpt2", "1/sqrt(2L)"), ("torchtitan", "per-layer")]
)
def test_the_init_only_rows_give_the_bits_of_the_matching_named_scheme(torch_models, name, scheme):
    from pydepth.torch import apply_depth_scaling

    model = build(torch_models, "llama")
    twin = copy.deepcopy(model)
    apply_parametrization(model, name)
    apply_depth_scaling(twin, scheme=scheme)
    for (n, p), (_, q) in zip(model.named_parameters(), twin.named_parameters()):
        np.testing.assert_array_equal(bits(p), bits(q), err_msg=n)
    assert not any(m._forward_hooks for m in model.modules())  # μ = 1: no hook
