# SPDX-License-Identifier: MIT
"""Type hints for the Cython skin over the residual-health sums (pydepth/_native/_health.pyx)."""
from typing import Iterable, List, Tuple

import numpy as np

def sums_of_squares(arrays: Iterable[np.ndarray], scales: Iterable[float], valid: np.ndarray,
                    limit: float) -> List[Tuple[float, bool]]: ...
