# SPDX-License-Identifier: MIT
"""Tiny Hugging Face causal LMs of any model type, built offline from the installed transformers'
default config with every size field shrunk, and hooks written here from scratch that read a
layer's input and output (and every module input inside it) with their gradients."""
import math
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch

VOCAB = 50
#: Size fields shrunk wherever a config has them (the first value of each model type's own name).
SIZES = dict(num_hidden_layers=2, n_layer=2, n_layers=2, num_layers=2, decoder_layers=2,
             hidden_size=32, n_embd=32, d_model=32, n_embed=32, intermediate_size=64, ffn_dim=64, n_inner=64,
             decoder_ffn_dim=64, moe_intermediate_size=24, shared_expert_intermediate_size=24,
             num_attention_heads=4, n_head=4, n_heads=4, decoder_attention_heads=4, num_heads=4,
             num_key_value_heads=2, head_dim=8, vocab_size=VOCAB, max_position_embeddings=64, n_positions=64,
             num_local_experts=4, num_experts=4, n_routed_experts=4, num_experts_per_tok=2,
             pad_token_id=0, bos_token_id=1, eos_token_id=2)
MAX_PARAMETERS = 2_000_000
REL = 1e-12


def tiny_config(model_type, experts="eager", **extra):
    """The default config of ``model_type`` with every known size field shrunk (eager experts by default)."""
    import transformers as T
    cfg = T.AutoConfig.for_model(model_type, **({"experts_implementation": experts} if experts else {}))
    for key, value in {**SIZES, **extra}.items():
        if hasattr(cfg, key) or key in extra:
            setattr(cfg, key, value)
    return cfg


def tiny_model(model_type, dtype=torch.float64, experts="eager", **extra):
    """A tiny randomly initialized causal LM of ``model_type``; ValueError says why none can be built."""
    import transformers as T
    T.logging.set_verbosity_error()
    cfg = tiny_config(model_type, experts, **extra)
    if getattr(cfg, "is_encoder_decoder", False):
        raise ValueError("an encoder-decoder model")
    with torch.device("meta"):
        size = sum(p.numel() for p in T.AutoModelForCausalLM.from_config(cfg).parameters())
    if size > MAX_PARAMETERS:
        raise ValueError(f"{size} parameters after shrinking the known size fields (nested configs)")
    torch.manual_seed(len(model_type))
    return T.AutoModelForCausalLM.from_config(cfg).to(dtype)


def hooked_sites(model, layer_paths, ids):
    """(per layer: (input, output, [inputs of every module inside]), predicted rows) with .grad
    filled by loss.backward() of the model's own loss on labels = ids."""
    model.eval()
    per_layer = [[None, None, []] for _ in layer_paths]

    def keep(t):
        if isinstance(t, torch.Tensor) and t.requires_grad:
            t.retain_grad()
        return t

    def first(args, kwargs):
        if args and isinstance(args[0], torch.Tensor):
            return args[0]
        return kwargs.get("hidden_states")

    handles = []
    for b, path in enumerate(layer_paths):
        layer = model.get_submodule(path)
        handles.append(layer.register_forward_pre_hook(
            lambda m, a, k, b=b: per_layer[b].__setitem__(0, keep(first(a, k))), with_kwargs=True))
        handles.append(layer.register_forward_hook(
            lambda m, a, o, b=b: per_layer[b].__setitem__(1, keep(o[0] if isinstance(o, tuple) else o))))
        for name, sub in layer.named_modules():
            if name:
                handles.append(sub.register_forward_pre_hook(
                    lambda m, a, k, b=b: per_layer[b][2].append(keep(first(a, k))), with_kwargs=True))
    try:
        model(input_ids=ids, labels=ids, use_cache=False).loss.backward()
    finally:
        for h in handles:
            h.remove()
    rows = torch.ones_like(ids, dtype=torch.bool)
    rows[:, -1] = False  # the last position predicts nothing
    return per_layer, rows


def rms(t, rows):
    """RMS over the predicted rows (t viewed as [batch, tokens, width])."""
    t = t.detach().reshape(*rows.shape, -1)[rows].double()
    return math.sqrt(float((t ** 2).mean()))


def assert_sites_match_independent_hooks(model, layout, ids):
    """observe_residual_health's sites against :func:`hooked_sites` (layer inputs, outputs, and the mid
    site among the inputs of the layer's modules), activations and adjoints within REL; the report."""
    from pydepth.torch import observe_residual_health
    report = observe_residual_health(model, ids)
    model.zero_grad(set_to_none=True)
    layers, rows = hooked_sites(model, layout.layer_paths, ids)
    step = 1 if layout.parallel_residual else 2
    sites = report.sites
    assert len(sites) == step * len(layers) + 1
    expected = [(0, layers[0][0])] + [(step * b + step, layer[1]) for b, layer in enumerate(layers)]
    for index, tensor in expected:
        assert sites[index].activation_rms == pytest.approx(rms(tensor, rows), rel=REL)
        assert sites[index].adjoint_rms == pytest.approx(rms(tensor.grad, rows), rel=REL)
    for b, layer in enumerate(layers if step == 2 else ()):  # the mid site is what a module of the layer reads
        read = [t for t in layer[2] if t is not None and t.grad is not None and t.numel() == layer[0].numel()]
        assert any(sites[2 * b + 1].activation_rms == pytest.approx(rms(t, rows), rel=REL)
                   and sites[2 * b + 1].adjoint_rms == pytest.approx(rms(t.grad, rows), rel=REL) for t in read)
    return report
