# SPDX-License-Identifier: MIT
"""pydepth's decoder as a PyTorch module: exact round trips, float64 agreement with pydepth's
bit-exact core, depth scaling through the bridge, and the same residual-health report.

    python examples/torch_twin.py
"""
import numpy as np
import torch

import pydepth
import pydepth.torch as pt

cfg = pydepth.DecoderConfig(vocabulary_size=64, model_width=32, heads=4, kv_heads=2,
                            feed_forward_width=48, layers=4, max_positions=16)
base = pydepth.DecoderModel(cfg, pydepth.SplitMix64(4701))  # unscaled Xavier draw

# 1. the twin: pydepth's names and [in, out] layout in state_dict(); float64 by default
twin = pt.to_torch(base)
print(type(twin).__name__, "with", len(twin.state_dict()), "tensors, e.g.",
      list(twin.state_dict())[5], tuple(twin.state_dict()["blocks.0.ffn.down.weight"].shape))

# 2. depth scaling through the bridge multiplies exactly what pydepth's own policy multiplies
record = pt.apply_depth_scaling(twin)  # scheme "1/sqrt(L)"
print(record.to_table())
reference = pydepth.FreshDepthInitialization.prepare(
    cfg, pydepth.DepthInitializationBudget.for_config(cfg), pydepth.SplitMix64(4701)).complete().model
back = pt.from_torch(twin)  # a DecoderModel holding the twin's tensors bit for bit
same = all(np.array_equal(a.value.view(np.uint64), b.value.view(np.uint64))
           for a, b in zip(back.parameters, reference.parameters))
print("twin scaled by the bridge == pydepth's depth initialization, bit for bit:", same)

# 3. loss and gradients: torch (FMA, BLAS order) agrees with the bit-exact core to ~1e-13
tokens = np.array([[0, 5, 9, 12, 33, 7, 21, 40], [0, 2, 60, 61, 62, 63, 8, 3]])
targets = np.roll(tokens, -1, axis=1)
out = twin(tokens, targets)
out.loss.backward()
fwd = back.forward(tokens)
loss = fwd.loss(targets)
loss.backward()
worst = max(float(np.abs(t.grad.numpy() - p.grad).max() / np.abs(p.grad).max())
            for (_, t), p in zip(twin.named_parameters(), back.parameters))
print(f"loss torch {out.loss.item():.15f} pydepth {loss.item():.15f}; worst relative gradient "
      f"difference {worst:.1e}")

# 4. residual health through hooks on the twin: the same report as pydepth's observer
grads = [t.grad.clone() for t in twin.parameters()]
ours = pt.observe_residual_health(twin, tokens, targets)
fwd = back.forward(tokens)
theirs = pydepth.observe_residual_health(back, fwd, fwd.loss(targets))
print(ours.to_table(title="residual health of the twin (pydepth.torch)"))
print("largest ratio difference to pydepth's own report:",
      f"{max(abs(a.adjoint_ratio - b.adjoint_ratio) for a, b in zip(ours.sites, theirs.sites)):.1e}")
untouched = all(torch.equal(t.grad, g) for t, g in zip(twin.parameters(), grads))
print("parameter .grad untouched by observing:", untouched)
assert same and worst < 1e-12 and untouched
