# SPDX-License-Identifier: MIT
"""Type hints for pydepth/_native/_status.pyx: the core's status codes."""
from typing import Dict

from ..errors import PydepthError as _PydepthError


class CoreError(_PydepthError):
    code: int
    index: int
    value: float
    block: int
    node: int

STATUS_CODES: Dict[str, int]
