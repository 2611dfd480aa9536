# SPDX-License-Identifier: MIT
"""IEEE-754 binary64 bit patterns as 16 lowercase hex digits: the one spelling every record,
trace and demo document uses."""
from __future__ import annotations

import struct
from typing import Any, List

import numpy as np


def float_bits(x: float) -> str:
    """The bit pattern of one float64, e.g. ``float_bits(1.0) == "3ff0000000000000"``."""
    return struct.pack(">d", x).hex()


def hex_bits(values: Any) -> List[str]:
    """Bit patterns of float64 values, row-major."""
    arr = np.ascontiguousarray(values, dtype=np.float64).reshape(-1)
    return [format(int(b), "016x") for b in arr.view(np.uint64)]
