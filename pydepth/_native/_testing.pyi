# SPDX-License-Identifier: MIT
"""Type hints for pydepth/_native/_testing.pyx: entry points for tests and benchmarks."""
from typing import Tuple

import numpy as np

def matmul(kind: str, A: np.ndarray, B: np.ndarray, C: np.ndarray, acc: bool = ...) -> None: ...
def attention_softmax_rows(W: np.ndarray, valid: np.ndarray, seg_start: np.ndarray,
                           kappa: float) -> Tuple[bool, int, float]: ...
def attention_softmax_vjp_rows(W: np.ndarray, dS: np.ndarray, valid: np.ndarray, seg_start: np.ndarray,
                               kappa: float) -> None: ...
