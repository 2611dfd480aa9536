# SPDX-License-Identifier: MIT
"""pydepth.torch twin: exact round trips, float64 agreement with pydepth within 1e-12, packed
batches and grouped-query attention, typed refusals, and importing without torch."""
import subprocess
import sys

import numpy as np
import pytest

import torch

import pydepth
from pydepth import Batch, DecoderConfig, DecoderModel, ParameterLayoutError, SplitMix64, TokenError
from pydepth.torch import PydepthTwin, from_torch, to_torch

TOL = 1e-12


def bits(a):
    return np.ascontiguousarray(a, dtype=np.float64).reshape(-1).view(np.uint64)


def assert_twin_agrees(model, source, targets=None):
    """Loss and every gradient of the float64 twin within TOL relative of pydepth's."""
    model.zero_grad()
    fwd = model.forward(source)
    loss = fwd.loss(targets)
    loss.backward()
    twin = to_torch(model)
    out = twin(source, targets)
    out.loss.backward()
    assert abs(out.loss.item() - loss.item()) <= TOL * abs(loss.item())
    np.testing.assert_allclose(out.logits.detach().numpy(), fwd.logits.value, rtol=TOL,
                               atol=TOL * np.abs(fwd.logits.value).max())
    grads = dict(twin.named_parameters())
    for p in model.parameters:
        g = grads[p.name].grad.numpy()
        scale = np.abs(p.grad).max()
        assert np.abs(g - p.grad).max() <= TOL * scale, p.name


def test_twin_state_dict_has_pydepths_names_shapes_and_order():
    cfg = DecoderConfig(23, 12, 3, 10, 2, 6, kv_heads=1)
    model = DecoderModel(cfg, SplitMix64(1))
    state = to_torch(model).state_dict()
    assert [(k, tuple(v.shape)) for k, v in state.items()] == list(cfg.parameter_layout())
    assert all(v.dtype == torch.float64 for v in state.values())


def test_round_trip_is_exact_both_ways(reference_trace, torch_models):
    for name, cfg, _, _, model in torch_models.fixture_models(reference_trace):
        twin = to_torch(model)
        for p in model.parameters:
            assert np.array_equal(bits(twin.state_dict()[p.name].numpy()), bits(p.value)), name
        back = from_torch(twin)
        again = from_torch(twin.state_dict(), cfg)
        for a, b, c in zip(model.parameters, back.parameters, again.parameters):
            assert a.name == b.name == c.name
            assert np.array_equal(bits(a.value), bits(b.value)) and np.array_equal(bits(a.value), bits(c.value))


def test_round_trip_keeps_signed_zeros_subnormals_and_extremes():
    cfg = DecoderConfig(5, 4, 1, 4, 1, 3)
    model = DecoderModel(cfg, SplitMix64(2))
    special = np.array([-0.0, 5e-324, -2.2250738585072014e-308, 1.7976931348623157e308,
                        0.1, -1e-300, 3.0, -0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0])
    params = [pydepth.NamedParameter(p.name, special[:p.size].reshape(p.shape) if p.size == 16 else p.value)
              for p in model.parameters]
    model = DecoderModel.from_parameters(cfg, params)
    back = from_torch(to_torch(model))
    for a, b in zip(model.parameters, back.parameters):
        assert np.array_equal(bits(a.value), bits(b.value))


def test_twin_agrees_with_pydepth_on_every_fixture(reference_trace, torch_models):
    for _, _, tokens, targets, model in torch_models.fixture_models(reference_trace):
        assert_twin_agrees(model, tokens, targets)


@pytest.mark.parametrize("heads,kv,layers", [(4, 2, 3), (4, 1, 2), (6, 3, 1), (2, 2, 0)])
def test_twin_agrees_with_grouped_query_attention(heads, kv, layers):
    cfg = DecoderConfig(37, 4 * heads, heads, 14, layers, 9, kv_heads=kv, rope_base=500.0, rms_epsilon=1e-5)
    model = DecoderModel(cfg, SplitMix64(heads * 100 + kv))
    rng = np.random.default_rng(layers)
    assert_twin_agrees(model, rng.integers(0, 37, (3, 9)), rng.integers(0, 37, (3, 9)))


@pytest.mark.parametrize("pad", [-1, -7, 10**9])
def test_twin_agrees_on_packed_batches_with_padding(pad):
    cfg = DecoderConfig(31, 8, 2, 6, 2, 6, kv_heads=1)
    model = DecoderModel(cfg, SplitMix64(5))
    batch = Batch.pack([[1, 2, 3, 4], [5, 6, 7], [8, 9], [10, 11, 12, 13, 14, 15, 16]], 7, pad_id=pad)
    assert not batch.valid.all()
    assert_twin_agrees(model, batch)
    out = to_torch(model)(batch)
    assert np.isfinite(out.logits.detach().numpy()).all()
    assert not out.logits.detach().numpy()[~batch.valid].any()  # padding stays +0.0 (numerics.md §4.2)


def test_float32_twin_rounds_once_and_converts_back_exactly():
    model = DecoderModel(DecoderConfig(19, 8, 2, 6, 1, 5), SplitMix64(9))
    twin = to_torch(model, dtype=torch.float32)
    assert all(t.dtype == torch.float32 for t in twin.state_dict().values())
    back = from_torch(twin)
    for a, b in zip(model.parameters, back.parameters):
        assert np.array_equal(bits(b.value), bits(a.value.astype(np.float32).astype(np.float64)))


def test_from_torch_refuses_mismatched_state_dicts_naming_the_tensor():
    cfg = DecoderConfig(11, 4, 1, 4, 1, 3)
    state = to_torch(DecoderModel(cfg, SplitMix64(1))).state_dict()
    missing = dict(state)
    del missing["blocks.0.ffn.up.weight"]
    with pytest.raises(ParameterLayoutError, match=r"blocks\.0\.ffn\.up\.weight"):
        from_torch(missing, cfg)
    extra = dict(state, **{"lm_head.weight": torch.zeros(11, 4, dtype=torch.float64)})
    with pytest.raises(ParameterLayoutError, match=r"lm_head\.weight"):
        from_torch(extra, cfg)
    transposed = dict(state, **{"blocks.0.ffn.down.weight": state["blocks.0.ffn.down.weight"].t()})
    with pytest.raises(ParameterLayoutError, match=r"blocks.0.ffn.down.weight.*\[in, out\]"):
        from_torch(dict(transposed, **{"blocks.0.ffn.down.weight": torch.zeros(3, 4, dtype=torch.float64)}), cfg)
    nan = dict(state, **{"final_norm.gain": torch.tensor([1.0, float("nan"), 1.0, 1.0], dtype=torch.float64)})
    with pytest.raises(ParameterLayoutError, match=r"final_norm\.gain"):
        from_torch(nan, cfg)
    ints = dict(state, **{"final_norm.gain": torch.ones(4, dtype=torch.int64)})
    with pytest.raises(ParameterLayoutError, match="floating"):
        from_torch(ints, cfg)
    with pytest.raises(TypeError, match="DecoderConfig"):
        from_torch(state)
    with pytest.raises(TypeError, match="DecoderModel"):
        to_torch(state)


def test_twin_refuses_bad_tokens_with_typed_errors():
    cfg = DecoderConfig(11, 4, 1, 4, 1, 3)
    twin = to_torch(DecoderModel(cfg, SplitMix64(1)))
    with pytest.raises(TokenError, match="token id 11 at position \\[0, 1\\]"):
        twin(np.array([[1, 11]]), np.array([[1, 2]]))
    with pytest.raises(TokenError, match="token id -1"):
        twin(torch.tensor([[1, -1]]))
    with pytest.raises(TokenError, match="target id 12"):
        twin(np.array([[1, 2]]), np.array([[12, 2]]))
    with pytest.raises(TokenError, match="max_positions"):
        twin(np.zeros((1, 4), dtype=np.int64))
    with pytest.raises(TokenError, match="integer"):
        twin(np.zeros((1, 2)))
    assert twin(np.array([[1, 2]])).loss is None


def test_importing_pydepth_does_not_import_torch_and_the_bridge_names_its_extra():
    code = ("import sys\n"
            "sys.modules['torch'] = None\n"  # makes `import torch` fail as if it were not installed
            "import pydepth\n"
            "assert 'torch' not in sys.modules or sys.modules['torch'] is None\n"
            "try:\n"
            "    import pydepth.torch\n"
            "except pydepth.TorchDependencyError as err:\n"
            "    assert isinstance(err, ImportError) and \"pydepth[torch]\" in str(err), err\n"
            "    print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert out.stdout.strip() == "ok", out.stderr
    plain = subprocess.run([sys.executable, "-c", "import sys, pydepth; print('torch' in sys.modules)"],
                           capture_output=True, text=True, cwd="/")
    assert plain.stdout.strip() == "False", plain.stderr


def test_twin_class_is_a_module_with_the_config():
    cfg = DecoderConfig(11, 4, 1, 4, 2, 3)
    twin = to_torch(DecoderModel(cfg, SplitMix64(1)))
    assert isinstance(twin, PydepthTwin) and isinstance(twin, torch.nn.Module)
    assert twin.config == cfg
    with pytest.raises(TypeError, match="dtype"):
        PydepthTwin(cfg, dtype=torch.int64)


def test_hf_llama_runs_pydepths_function_after_the_documented_rope_permutation(torch_models):
    """docs/numerics-torch.md §4: q/k rows permuted within each head (j -> 2j, j + D/2 -> 2j + 1),
    every nn.Linear weight transposed to [in, out]; a tied-embedding Llama then gives pydepth's logits."""
    llama = torch_models.hf("llama", 2, tie_word_embeddings=True, rms_norm_eps=1e-6)
    cfg = DecoderConfig(torch_models.VOCAB, 32, 4, 48, 2, 64, kv_heads=2, rms_epsilon=1e-6)
    D = cfg.head_width
    perm = np.arange(D).reshape(2, D // 2).T.reshape(-1)  # [0, D/2, 1, D/2 + 1, ...]
    torch.manual_seed(5)
    with torch.no_grad():  # gains away from 1 so that each one's place is checked
        for m in llama.modules():
            if type(m).__name__ == "LlamaRMSNorm":
                m.weight.copy_(1 + 0.2 * torch.randn_like(m.weight))

    def heads(w, n, permute):
        w = w.detach().reshape(n, D, -1)
        return (w[:, perm, :] if permute else w).reshape(n * D, -1).t()

    def convert(permute):
        state = {"token_embedding.weight": llama.model.embed_tokens.weight.detach(),
                 "final_norm.gain": llama.model.norm.weight.detach()}
        for b, layer in enumerate(llama.model.layers):
            p, att, mlp = f"blocks.{b}.", layer.self_attn, layer.mlp
            state.update({p + "attention_norm.gain": layer.input_layernorm.weight.detach(),
                          p + "attention.query.weight": heads(att.q_proj.weight, cfg.heads, permute),
                          p + "attention.key.weight": heads(att.k_proj.weight, cfg.kv_heads, permute),
                          p + "attention.value.weight": att.v_proj.weight.detach().t(),
                          p + "attention.output.weight": att.o_proj.weight.detach().t(),
                          p + "ffn_norm.gain": layer.post_attention_layernorm.weight.detach(),
                          p + "ffn.gate.weight": mlp.gate_proj.weight.detach().t(),
                          p + "ffn.up.weight": mlp.up_proj.weight.detach().t(),
                          p + "ffn.down.weight": mlp.down_proj.weight.detach().t()})
        return from_torch(state, cfg)

    ids = np.random.default_rng(3).integers(0, torch_models.VOCAB, (2, 12))
    with torch.no_grad():
        expected = llama(input_ids=torch.from_numpy(ids)).logits.numpy()
    scale = np.abs(expected).max()
    got = convert(True).forward(ids, record=False).logits.value
    assert np.abs(got - expected).max() <= 1e-5 * scale  # HF's RMSNorm runs in float32
    unpermuted = convert(False).forward(ids, record=False).logits.value
    assert np.abs(unpermuted - expected).max() > 1e-3 * scale
