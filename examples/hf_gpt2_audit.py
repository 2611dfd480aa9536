# SPDX-License-Identifier: MIT
"""GPT-2 (Hugging Face, built from a config) whose c_proj depth scaling was skipped — the bug of
transformers issue 47458 — found by the audit, fixed with the GPT-2 scheme 1/sqrt(2L), and its
residual health observed.

    python examples/hf_gpt2_audit.py
"""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import transformers

import pydepth.torch as pt

transformers.logging.set_verbosity_error()
torch.manual_seed(0)
config = transformers.GPT2Config(n_layer=6, n_embd=64, n_head=4, vocab_size=128, n_positions=64)
model = transformers.GPT2LMHeadModel(config)
with torch.no_grad():  # what a skipped scaled init leaves: every c_proj at plain N(0, 0.02)
    for block in model.transformer.h:
        block.attn.c_proj.weight.normal_(0.0, config.initializer_range)
        block.mlp.c_proj.weight.normal_(0.0, config.initializer_range)

audit = pt.audit_initialization(model, scheme="1/sqrt(2L)")
print(audit.to_table())

record = pt.apply_depth_scaling(model, scheme="1/sqrt(2L)")  # GPT-2's own rule, once
print(f"\nscaled {len(record.tensors)} Conv1D c_proj tensors by {record.tensors[0].factor:.6f}; "
      f"std {record.tensors[0].std_before:.4f} -> {record.tensors[0].std_after:.4f}")
fixed = pt.audit_initialization(model, scheme="1/sqrt(2L)").ok
print("audit after the fix:", "ok" if fixed else "findings remain")
assert {r.verdict for r in audit.findings} == {"unscaled"} and len(audit.findings) == 2 * config.n_layer and fixed

report = pt.observe_residual_health(model, torch.arange(32).reshape(2, 16) % config.vocab_size)
print(report.to_table(title="GPT-2 after 1/sqrt(2L)"))
