"""Chapter 6: initialize residual projection weights for decoder depth, then observe residual
activation RMS and completed mean-loss adjoints.

Run:  python examples/ch06_depth_stable_decoder.py          (walk-through, then the demo JSON)
      python -m pydepth demo --format table                 (the chapter's tables)
"""
import json

import numpy as np

import pydepth
from pydepth.demo import demo_trace

# One fresh preparation: the base decoder is drawn from a clone of the caller's generator.
cfg = pydepth.DecoderConfig(266, 4, 1, 4, 8, 4)  # vocabulary, width, heads, ff, blocks, positions
rng = pydepth.SplitMix64(4701)
fresh = pydepth.FreshDepthInitialization.prepare(
    cfg, pydepth.DepthInitializationBudget(max_parameters=8304, max_positions=16), rng)
assert rng.state == 4701  # untouched until complete() succeeds

# A same-base unscaled control copies the actual base values (no second draw).
control = pydepth.DecoderModel.from_parameters(
    cfg, [pydepth.NamedParameter(p.name, p.snapshot()) for p in fresh.base_model.parameters])

init = fresh.complete()  # selected weights x 1/sqrt(8), stored once; rng committed now
print(f"factor {init.record.factor:.6f}, transformed tensors {init.record.transformed_tensors}")

tokens, targets = np.array([[0, 99, 100, 101]]), np.array([[99, 100, 101, 1]])
for name, model in (("initialized", init.model), ("same-base unscaled control", control)):
    fwd = model.forward(tokens)
    loss = fwd.loss(targets)
    report = pydepth.observe_residual_health(model, fwd, loss)
    print()
    print(report.to_table(f"{name}: mean loss {loss.item():.6f} nats"))

# Restoration takes the record and the actual stored parameters; it never rescales.
record = pydepth.DepthInitializationRecord.from_dict(json.loads(json.dumps(init.record.to_dict())))
restored = pydepth.DepthInitializedDecoder.from_initialized_parameters(record, init.model.parameters)
try:
    pydepth.initialize_depth_scaled(pydepth.Restored(restored))
except pydepth.NotFreshError as err:
    print(f"\nrefused as expected: {err}")

print()
print(json.dumps(demo_trace(), indent=1))
