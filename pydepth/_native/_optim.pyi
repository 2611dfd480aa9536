# SPDX-License-Identifier: MIT
"""Type hints for pydepth/_native/_optim.pyx: the optimizer steps."""
from typing import List, Union

from ._graph import _Param

def optim_check(kind: str, hparams: Union[tuple, List[tuple]]) -> None: ...
class _Prepared:
    def __init__(self, kind: str, params: List[_Param], slots: List[tuple],
                 hparams: Union[tuple, List[tuple]]) -> None: ...

def optim_step(kind: str, params: List[_Param], slots: List[tuple], hparams: Union[tuple, List[tuple]],
               step: int) -> None: ...
