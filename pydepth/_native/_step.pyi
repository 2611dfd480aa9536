# SPDX-License-Identifier: MIT
"""Type hints for pydepth/_native/_step.pyx: the training step in one C call."""
from typing import Optional

import numpy as np

from ._graph import _Model
from ._optim import _Prepared

STAGE_FORWARD: int
STAGE_LOSS: int
STAGE_BACKWARD: int
STAGE_UPDATE: int

class _StepPlan:
    model: _Model
    def __init__(self, model: _Model) -> None: ...
    @property
    def planned(self) -> bool: ...
    def run(self, ids: np.ndarray, targets: np.ndarray, valid: Optional[np.ndarray] = None,
            pos: Optional[np.ndarray] = None, seg_start: Optional[np.ndarray] = None,
            update: Optional[_Prepared] = None, step: int = 0) -> float: ...
