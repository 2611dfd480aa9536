# SPDX-License-Identifier: MIT
"""A small depth-transfer study: does the best learning rate move with depth?

Trains the standard parametrization (no depth rule, the control) and CompleteP (branches times
1/L) at depths 2 and 8 over a grid of learning rates on the shipped corpus, then prints, verdict
first, each rule's best learning rate per depth and how far it drifts in octaves. The study of
docs/depth-transfer.md is `pydepth depth-transfer examples/data/corpus.txt --out DIR` (the
laptop preset: 7 rules, depths 2-16, 10 learning rates, about 8 minutes on 2 cores); this one is
sized to finish in seconds, so its answer is a demonstration, not evidence.
"""
import pathlib

from pydepth.sweep import depth_transfer, transfer_spec

CORPUS = pathlib.Path(__file__).resolve().parent / "data" / "corpus.txt"

if __name__ == "__main__":  # Dask would spawn worker processes that import this file
    spec = transfer_spec(CORPUS, "laptop", parametrizations=["standard", "completep"], depths=[2, 8],
                         lrs=[0.008, 0.016, 0.032, 0.064, 0.128, 0.256], seeds=[0], width=16, updates=30, warmup=3,
                         eval_rows=8)
    result = depth_transfer(spec, CORPUS, out="depth-transfer-out", scheduler="serial", plots=False,
                            progress=False)
    print("\n".join(result.summary))
