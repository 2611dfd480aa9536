# SPDX-License-Identifier: MIT
"""Thread count of the C kernels: set_num_threads(n) or PYDEPTH_NUM_THREADS."""
from __future__ import annotations

import os
import warnings

from ._native import _runtime
from ._checks import as_u64
from .errors import ThreadCountError


def set_num_threads(n: int) -> None:
    """Use n >= 1 worker threads in the C kernels; results are bit-identical for every n."""
    _runtime.set_num_threads(as_u64("thread count", n, ThreadCountError, minimum=1, maximum=1024))


def get_num_threads() -> int:
    """The number of worker threads the C kernels use."""
    return _runtime.get_num_threads()


def _default_threads() -> int:
    """PYDEPTH_NUM_THREADS, or the CPU count; an import never fails on a bad variable: it warns."""
    fallback = min(os.cpu_count() or 1, 1024)
    raw = os.environ.get("PYDEPTH_NUM_THREADS")
    if raw is None or raw.strip() == "":
        return fallback
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if not 1 <= n <= 1024:
        warnings.warn(f"PYDEPTH_NUM_THREADS must be an integer in [1, 1024], got {raw!r}; "
                      f"using {fallback}", RuntimeWarning, stacklevel=2)
        return fallback
    return n


set_num_threads(_default_threads())
