# SPDX-License-Identifier: MIT
"""A deep Hugging Face Llama built from a config (nothing is downloaded): audit its initialization,
observe residual health at every site, apply this project's depth scaling, audit and observe
again, and say in words what the scaling changed.

    python examples/hf_llama_health.py
"""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import transformers

import pydepth
import pydepth.torch as pt

transformers.logging.set_verbosity_error()
torch.set_num_threads(1)  # matrices this small run fastest on one thread
torch.manual_seed(0)
config = transformers.LlamaConfig(num_hidden_layers=24, hidden_size=32, intermediate_size=64,
                                  num_attention_heads=4, num_key_value_heads=2, vocab_size=128,
                                  max_position_embeddings=64)
model = transformers.LlamaForCausalLM(config)  # random init, initializer_range 0.02, no depth scaling

layout = pt.find_layout(model)
print(f"recognized {layout.architecture}: {layout.depth} layers, residual outputs "
      f"{layout.projection_names[0]}, {layout.projection_names[1]}, ...")

audit = pt.audit_initialization(model, scheme="1/sqrt(L)")
print(f"before: {len(audit.findings)} of {len(audit.rows)} matrices not as 1/sqrt(L) predicts "
      f"({', '.join(sorted({r.verdict for r in audit.findings}))})")

input_ids = torch.randint(0, config.vocab_size, (2, 16), generator=torch.Generator().manual_seed(1))
attention_mask = torch.ones_like(input_ids)
attention_mask[1, 12:] = 0  # right padding: excluded from every RMS
before = pt.observe_residual_health(model, input_ids, attention_mask=attention_mask)
print("Llama, default init:", before.verdict())

record = pt.apply_depth_scaling(model, scheme="1/sqrt(L)")
print(f"scaled {len(record.tensors)} tensors by {record.tensors[0].factor:.6f}")
fixed = pt.audit_initialization(model).ok
print("after:", "all matrices as the scheme predicts" if fixed else "findings remain")
assert {r.verdict for r in audit.findings} == {"unscaled"} and fixed
after = pt.observe_residual_health(model, input_ids, attention_mask=attention_mask)
print("Llama, depth-scaled:", after.verdict())

# what the scaling changed, from the two reports
grown = {name: r.activation_ratio_range[1] for name, r in (("default init", before), ("depth-scaled", after))}
adjoint = {name: r.adjoint_ratio_range[1] for name, r in (("default init", before), ("depth-scaled", after))}
print(f"over {layout.depth} blocks the residual stream's RMS grows to {grown['default init']:.3f}x its input's "
      f"without the scaling and to {grown['depth-scaled']:.3f}x with it (largest A_s/A_0, "
      f"{grown['default init'] / grown['depth-scaled']:.2f}x apart)")
print(f"largest G_s/G_2L: default init {adjoint['default init']:.3f}, depth-scaled {adjoint['depth-scaled']:.3f}")
print("in the band at initialization: default init", "yes" if before.within_band else "NO", "| depth-scaled",
      "yes" if after.within_band else "NO", "(examples/train_with_health_monitor.py follows both through training)")

try:
    pt.apply_depth_scaling(model)
except pydepth.AlreadyScaledError as err:
    print("second application refused:", str(err).split(";")[0])
