# SPDX-License-Identifier: MIT
"""The depth check on a reduced grid: where does the unscaled control leave the band?

Runs depths 1..32 x 3 seeds x {scaled, unscaled} at initialization (step 0) on the local Dask
cluster, prints the summary and writes the figures and the Parquet rows into ./depth-check-out.
The full default grid (depths 1..64, 5 seeds, steps 0, 1, 2, 5, 10) is `pydepth depth-check`.
"""
from pydepth.sweep.presets import depth_check, depth_check_spec

if __name__ == "__main__":  # Dask spawns worker processes that import this file
    spec = depth_check_spec(depths=[1, 2, 4, 8, 16, 32], widths=[16], seeds=[0, 1, 2], steps=[0])
    result = depth_check(spec, out="depth-check-out")
    print("\n".join(result.summary))
    for path in result.figures:
        print("wrote", path)
