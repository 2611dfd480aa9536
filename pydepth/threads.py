# SPDX-License-Identifier: MIT
"""Threads: the C kernels' thread count (set_num_threads(n) or PYDEPTH_NUM_THREADS), and calls
of one object taken in turn across threads (an optimizer's step, zero_grad and state), held
across os.fork() so a child never inherits a turn that a thread it lacks was holding."""
from __future__ import annotations

import contextlib
import os
import threading
import warnings
import weakref
from typing import Iterator, List, Optional

from ._native import _graph  # noqa: F401 -- registers the model locks' fork hooks before ours below
from ._native import _runtime
from ._checks import as_u64
from .errors import OptimizerStateError, ThreadCountError


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


class InTurn:
    """One object's calls one at a time: another thread waits for its turn; the same thread
    calling in again (from an lr schedule) is refused, since waiting for itself never ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: Optional[int] = None
        _LIVE.add(self)

    @contextlib.contextmanager
    def __call__(self, what: str) -> Iterator[None]:
        """Holds the turn for the body; refuses a call from inside another call on this thread."""
        if self._owner == threading.get_ident():
            raise OptimizerStateError(f"{what} was called while this optimizer's own call runs on the "
                                      "same thread (from its learning-rate schedule?)")
        with self._lock:
            self._owner = threading.get_ident()
            try:
                yield
            finally:
                self._owner = None


_LIVE: weakref.WeakSet[InTurn] = weakref.WeakSet()
_FORK_HELD: List[InTurn] = []


def _before_fork() -> None:
    """Waits for every turn another thread holds and keeps them across the fork, so the child
    sees no call halfway done (the forking thread's own turn, if any, it already holds)."""
    me = threading.get_ident()
    for turn in sorted(list(_LIVE), key=id):
        if turn._owner != me:
            turn._lock.acquire()
            _FORK_HELD.append(turn)


def _after_fork() -> None:
    """Releases what _before_fork took, in the parent and in the child."""
    while _FORK_HELD:
        _FORK_HELD.pop()._lock.release()


if hasattr(os, "register_at_fork"):
    # registered after the model locks' hooks (_graph, imported above), so before a fork it runs
    # first: turns, then model locks, the order a step takes them in
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork, after_in_child=_after_fork)

