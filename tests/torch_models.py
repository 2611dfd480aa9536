# SPDX-License-Identifier: MIT
"""Models for the bridge tests: the public fixtures as pydepth models, and tiny decoders of
every architecture the bridge recognizes, built from configs (nothing is downloaded): the
Hugging Face families of :data:`HF_FAMILIES`, and small stand-ins with the module structure
of nanoGPT and torchtitan's Llama."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch
from torch import nn

import pydepth
from conftest import need_extra

VOCAB = 50


def fixture_models(reference_trace):
    """(id, config, tokens, targets, model) for both parameter variants of every fixture."""
    out = []
    for fx in reference_trace["fixtures"]:
        cfg = pydepth.DecoderConfig.from_dict(fx["config"])
        tokens = np.array(fx["tokens"]).reshape(fx["token_shape"])
        targets = np.array(fx["targets"]).reshape(fx["token_shape"])
        for variant in ("initialized", "same_base_unscaled_control"):
            params = [pydepth.NamedParameter(p["name"], np.array([int(h, 16) for h in p["bits"]], dtype=np.uint64)
                                             .view(np.float64).reshape(p["shape"]))
                      for p in fx[variant]["parameters"]]
            out.append((f"{fx['id']}/{variant}", cfg, tokens, targets,
                        pydepth.DecoderModel.from_parameters(cfg, params)))
    return out


def _hf_families(T, layers, common):
    """name -> (model class, config) of every Hugging Face family the bridge recognizes."""
    llama_like = dict(intermediate_size=48, num_key_value_heads=2, **common)
    moe = dict(num_local_experts=4, num_experts_per_tok=2, **llama_like)
    eager = dict(experts_implementation="eager")  # grouped_mm has no float64 kernel
    return {
        "llama": (T.LlamaForCausalLM, lambda e: T.LlamaConfig(**llama_like, **e)),
        "mistral": (T.MistralForCausalLM, lambda e: T.MistralConfig(**llama_like, **e)),
        "qwen2": (T.Qwen2ForCausalLM, lambda e: T.Qwen2Config(**llama_like, **e)),
        "qwen3": (T.Qwen3ForCausalLM, lambda e: T.Qwen3Config(head_dim=8, **llama_like, **e)),
        "phi3": (T.Phi3ForCausalLM, lambda e: T.Phi3Config(pad_token_id=0, **llama_like, **e)),
        "gemma": (T.GemmaForCausalLM, lambda e: T.GemmaConfig(head_dim=8, **llama_like, **e)),
        "gemma2": (T.Gemma2ForCausalLM, lambda e: T.Gemma2Config(head_dim=8, **llama_like, **e)),
        "gemma3": (T.Gemma3ForCausalLM, lambda e: T.Gemma3TextConfig(head_dim=8, **llama_like, **e)),
        "olmo2": (T.Olmo2ForCausalLM, lambda e: T.Olmo2Config(**llama_like, **e)),
        "stablelm": (T.StableLmForCausalLM, lambda e: T.StableLmConfig(**llama_like, **e)),
        "stablelm-parallel": (T.StableLmForCausalLM,
                              lambda e: T.StableLmConfig(use_parallel_residual=True, **llama_like, **e)),
        "mixtral": (T.MixtralForCausalLM, lambda e: T.MixtralConfig(**moe, **eager, **e)),
        "qwen2-moe": (T.Qwen2MoeForCausalLM, lambda e: T.Qwen2MoeConfig(
            num_experts=4, num_experts_per_tok=2, moe_intermediate_size=24, shared_expert_intermediate_size=40, **eager,
            **llama_like, **e)),
        "qwen3-moe": (T.Qwen3MoeForCausalLM, lambda e: T.Qwen3MoeConfig(
            num_experts=4, num_experts_per_tok=2, moe_intermediate_size=24, head_dim=8, **eager, **llama_like, **e)),
        "olmoe": (T.OlmoeForCausalLM, lambda e: T.OlmoeConfig(num_experts=4, num_experts_per_tok=2, **eager,
                                                              **llama_like, **e)),
        "cohere": (T.CohereForCausalLM, lambda e: T.CohereConfig(**llama_like, **e)),
        "qwen2-moe-mixed": (T.Qwen2MoeForCausalLM, lambda e: T.Qwen2MoeConfig(
            num_experts=4, num_experts_per_tok=2, moe_intermediate_size=24, shared_expert_intermediate_size=40,
            mlp_only_layers=[0], **eager, **llama_like, **e)),
        "deepseek-v3": (T.DeepseekV3ForCausalLM, lambda e: T.DeepseekV3Config(
            n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=24, first_k_dense_replace=1,
            kv_lora_rank=8, q_lora_rank=8, qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=8, n_group=1,
            topk_group=1, **eager, **llama_like, **e)),
        "gpt-neox": (T.GPTNeoXForCausalLM, lambda e: T.GPTNeoXConfig(intermediate_size=64, **common, **e)),
        "falcon": (T.FalconForCausalLM, lambda e: T.FalconConfig(
            hidden_size=32, num_attention_heads=4, num_hidden_layers=layers, vocab_size=VOCAB,
            **{"parallel_attn": False, "new_decoder_architecture": False, "alibi": False, "bias": True, **e})),
        "falcon-parallel": (T.FalconForCausalLM, lambda e: T.FalconConfig(
            hidden_size=32, num_attention_heads=4, num_hidden_layers=layers, vocab_size=VOCAB,
            **{"parallel_attn": True, "new_decoder_architecture": False, **e})),
        "falcon-new": (T.FalconForCausalLM, lambda e: T.FalconConfig(
            hidden_size=32, num_attention_heads=4, num_kv_heads=2, num_hidden_layers=layers, vocab_size=VOCAB,
            **{"new_decoder_architecture": True, **e})),
        "bloom": (T.BloomForCausalLM, lambda e: T.BloomConfig(hidden_size=32, n_head=4, n_layer=layers,
                                                              vocab_size=VOCAB, **e)),
        "gpt-j": (T.GPTJForCausalLM, lambda e: T.GPTJConfig(n_embd=32, n_head=4, n_layer=layers, vocab_size=VOCAB,
                                                            n_positions=64, rotary_dim=4, **e)),
        "gpt2": (T.GPT2LMHeadModel, lambda e: T.GPT2Config(n_layer=layers, n_embd=32, n_head=4, vocab_size=VOCAB,
                                                           n_positions=64, **e)),
    }


#: Every Hugging Face family :func:`hf` builds.
HF_FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "phi3", "gemma", "gemma2", "gemma3", "olmo2", "stablelm",
               "stablelm-parallel", "cohere", "mixtral", "qwen2-moe", "qwen2-moe-mixed", "qwen3-moe", "olmoe",
               "deepseek-v3", "gpt-neox", "falcon", "falcon-parallel", "falcon-new", "bloom", "gpt-j", "gpt2")


def hf(name, layers=2, **extra):
    """A tiny randomly initialized Hugging Face causal LM, in float64 unless asked otherwise."""
    need_extra("hf")
    import transformers as T
    T.logging.set_verbosity_error()
    torch.manual_seed(layers * 7 + len(name))
    common = dict(num_hidden_layers=layers, hidden_size=32, num_attention_heads=4, vocab_size=VOCAB,
                  max_position_embeddings=64)
    families = _hf_families(T, layers, common)
    if name not in families:
        raise KeyError(name)
    cls, config = families[name]
    return cls(config(extra)).double()


def gpt2_without_scaled_init(layers=2):
    """A tiny GPT-2 whose c_proj weights are redrawn at plain N(0, 0.02): what a skipped
    1/sqrt(2L) init leaves (the stock init already follows 1/sqrt(2L))."""
    model = hf("gpt2", layers)
    with torch.no_grad():
        for block in model.transformer.h:
            block.attn.c_proj.weight.normal_(0.0, 0.02)
            block.mlp.c_proj.weight.normal_(0.0, 0.02)
    return model


class _NanoAttention(nn.Module):
    def __init__(self, w, heads):
        super().__init__()
        self.c_attn = nn.Linear(w, 3 * w)
        self.c_proj = nn.Linear(w, w)
        self.heads = heads

    def forward(self, x):
        B, T, W = x.shape
        q, k, v = (t.view(B, T, self.heads, W // self.heads).transpose(1, 2) for t in self.c_attn(x).split(W, dim=2))
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, W))


class _NanoMLP(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.c_fc = nn.Linear(w, 4 * w)
        self.c_proj = nn.Linear(4 * w, w)

    def forward(self, x):
        return self.c_proj(nn.functional.gelu(self.c_fc(x)))


class _NanoBlock(nn.Module):
    def __init__(self, w, heads):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(w), _NanoAttention(w, heads)
        self.ln_2, self.mlp = nn.LayerNorm(w), _NanoMLP(w)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class NanoGPT(nn.Module):
    """nanoGPT's module structure: transformer.{wte, wpe, h, ln_f}, lm_head; forward(idx, targets)
    returns (logits, loss) with targets aligned to the inputs."""

    def __init__(self, layers=3, w=32, heads=4, block=64):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(VOCAB, w), wpe=nn.Embedding(block, w),
            h=nn.ModuleList(_NanoBlock(w, heads) for _ in range(layers)), ln_f=nn.LayerNorm(w)))
        self.lm_head = nn.Linear(w, VOCAB, bias=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, idx, targets=None):
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(idx.shape[1]))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None if targets is None else nn.functional.cross_entropy(logits.flatten(0, 1), targets.reshape(-1))
        return logits, loss


class _TitanAttention(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(w, w, bias=False) for _ in range(4))

    def forward(self, x):
        y = nn.functional.scaled_dot_product_attention(self.wq(x), self.wk(x), self.wv(x), is_causal=True)
        return self.wo(y)


class _TitanFeedForward(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.w1, self.w3 = nn.Linear(w, 2 * w, bias=False), nn.Linear(w, 2 * w, bias=False)
        self.w2 = nn.Linear(2 * w, w, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)) * self.w3(x))


class _TitanBlock(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.attention_norm, self.attention = nn.RMSNorm(w), _TitanAttention(w)
        self.ffn_norm, self.feed_forward = nn.RMSNorm(w), _TitanFeedForward(w)

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x))
        return h + self.feed_forward(self.ffn_norm(h))


class TitanLlama(nn.Module):
    """torchtitan Llama's module structure: tok_embeddings, layers (a ModuleDict keyed "0".."L-1"),
    norm, output; forward(tokens) returns logits only."""

    def __init__(self, layers=4, w=32):
        super().__init__()
        self.tok_embeddings = nn.Embedding(VOCAB, w)
        self.layers = nn.ModuleDict({str(i): _TitanBlock(w) for i in range(layers)})
        self.norm = nn.RMSNorm(w)
        self.output = nn.Linear(w, VOCAB, bias=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        for layer in self.layers.values():
            h = layer(h)
        return self.output(self.norm(h))
