"""Thread count of the C kernels: set_num_threads(n) or PYDEPTH_NUM_THREADS."""
from __future__ import annotations

import os

from . import _core
from ._checks import as_u64


def set_num_threads(n: int) -> None:
    """Use n >= 1 worker threads in the C kernels; results are bit-identical for every n."""
    _core.set_num_threads(as_u64("thread count", n, ValueError, minimum=1, maximum=1024))


def get_num_threads() -> int:
    """The number of worker threads the C kernels use."""
    return _core.get_num_threads()


def _default_threads() -> int:
    raw = os.environ.get("PYDEPTH_NUM_THREADS")
    if raw is None or raw.strip() == "":
        return os.cpu_count() or 1
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"PYDEPTH_NUM_THREADS must be a positive integer, got {raw!r}") from None
    if n < 1:
        raise ValueError(f"PYDEPTH_NUM_THREADS must be a positive integer, got {raw!r}")
    return n


set_num_threads(_default_threads())
