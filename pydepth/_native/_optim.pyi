# SPDX-License-Identifier: MIT
"""Type hints for pydepth/_native/_optim.pyx: the optimizer steps."""
from typing import List

from ._graph import _Param

def optim_check(kind: str, hparams: tuple) -> None: ...
def optim_step(kind: str, params: List[_Param], slots: List[tuple], hparams: tuple, step: int) -> None: ...
