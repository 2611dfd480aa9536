# SPDX-License-Identifier: MIT
"""Type hints for pydepth/_native/_testing.pyx: entry points for tests and benchmarks."""
import numpy as np

def matmul(kind: str, A: np.ndarray, B: np.ndarray, C: np.ndarray, acc: bool = ...) -> None: ...
