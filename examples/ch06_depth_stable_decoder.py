# SPDX-License-Identifier: MIT
"""Chapter 6: initialize residual projection weights for decoder depth, then observe residual
activation RMS and completed mean-loss adjoints.

Run:  python examples/ch06_depth_stable_decoder.py                 (walk-through and summary)
      python examples/ch06_depth_stable_decoder.py --json demo.json (also the full demo document)
      pydepth demo --format table                                  (every table of the chapter)
"""
import argparse
import json

import numpy as np

import pydepth
from pydepth.chapter.demo import demo_trace
from pydepth.health import format_table

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--json", metavar="FILE", help="write the full demo document (JSON) to FILE")
args = parser.parse_args()

# One fresh preparation: the base decoder is drawn from a clone of the caller's generator.
cfg = pydepth.DecoderConfig(266, 4, 1, 4, 8, 4)  # vocabulary, width, heads, ff, blocks, positions
rng = pydepth.SplitMix64(4701)
fresh = pydepth.FreshDepthInitialization.prepare(cfg, pydepth.DepthInitializationBudget.for_config(cfg), rng)
assert rng.state == 4701  # untouched until complete() succeeds

# A same-base unscaled control copies the actual base values (no second draw).
control = fresh.base_model.clone()

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

# The chapter's four fixtures, each with its control: the largest ratios side by side.
doc = demo_trace()
print("\nThe chapter's fixtures (seed 4701): largest ratio over the residual sites")
rows = [(fx["id"], fx["title"], f"{fx['factor']:.6f}",
         f"{fx['initialized']['activation_ratio_max']:.6f}",
         f"{fx['same_base_unscaled_control']['activation_ratio_max']:.6f}",
         f"{fx['initialized']['adjoint_ratio_max']:.6f}",
         f"{fx['same_base_unscaled_control']['adjoint_ratio_max']:.6f}") for fx in doc["fixtures"]]
print("\n".join(format_table(("fixture", "decoder", "factor", "max A_s/A_0", "(control)",
                              "max G_s/G_2L", "(control)"), rows)))
if args.json:
    with open(args.json, "w") as fh:
        json.dump(doc, fh, indent=1)
    print(f"\nwrote the full demo document to {args.json}")
