# SPDX-License-Identifier: MIT
"""Pack several sequences into padded rows, run a grouped-query decoder on them, and observe
residual health over the valid positions only.

    python examples/packed_batch_health.py
"""
import numpy as np

import pydepth

cfg = pydepth.DecoderConfig(vocabulary_size=64, model_width=32, heads=4, kv_heads=2,
                            feed_forward_width=48, layers=4, max_positions=16)
rng = pydepth.SplitMix64(4701)
budget = pydepth.DepthInitializationBudget(max_parameters=cfg.parameter_count, max_positions=16)
model = pydepth.FreshDepthInitialization.prepare(cfg, budget, rng).complete().model

sources = [[0, 5, 9, 12, 1], [0, 33, 33, 7, 21, 40, 1], [0, 2, 1], [0, 60, 61, 62, 63, 1]]
batch = pydepth.Batch.pack(sources, row_length=10)  # greedy: a new row when a segment won't fit
print(batch)
print("segments (row, start, length):", batch.segments())
print("segment-local positions:")
print(batch.positions)

fwd = model.forward(batch)
loss = fwd.loss()  # the batch carries its targets; mean over valid targets only
print(f"mean loss {loss.item():.6f} nats over {int(batch.valid.sum())} valid targets")

report = pydepth.observe_residual_health(model, fwd, loss)
print(report.to_table(title="packed batch, depth-initialized"))

# every value of a segment equals the same segment run alone, bit for bit
alone = model.forward(np.array([sources[1][:-1]]))
row, start, n = batch.segments()[1]
same = np.array_equal(fwd.logits.value[row, start:start + n].view(np.uint64), alone.logits.value[0].view(np.uint64))
print("segment 1 logits identical to its solo run:", same)
