# SPDX-License-Identifier: MIT
# cython: language_level=3, boundscheck=False, wraparound=False
"""The core's process-wide settings and hooks: thread count, kernel path, the interrupt check."""
from ._cdefs cimport *


def set_num_threads(int n):
    if not 1 <= n <= 1024:
        raise ValueError(f"thread count must be in [1, 1024], got {n}")
    pd_set_num_threads(n)


def get_num_threads():
    return pd_get_num_threads()


def kernel_path():
    return pd_kernel_path().decode()


def force_kernel_path(str name):
    return bool(pd_force_kernel_path(name.encode()))


def avx512_folds():
    return bool(pd_avx512_folds())


def force_avx512_fold(int mode):
    pd_force_avx512_fold(mode)


cdef extern from "Python.h":
    int _pending_signals "PyErr_CheckSignals" () noexcept  # no except clause: the error stays set
    unsigned long PyThread_get_thread_ident() nogil

cdef unsigned long _main_thread = PyThread_get_thread_ident()
cdef unsigned long long _finals = 0  # main-thread calls past their final poll (the GIL guards it)


cdef int _interrupt_check(int final) noexcept nogil:
    """Runs pending signal handlers between blocks on the main thread (where Python runs them);
    an exception they raise (KeyboardInterrupt) stays set and stops the C loop. A final poll
    that finds nothing counts: its call then runs to its end (final_polls)."""
    global _finals
    cdef int r
    if PyThread_get_thread_ident() != _main_thread:
        return 0
    with gil:
        r = _pending_signals()
        if final and r == 0:
            _finals += 1
    return r != 0


def final_polls():
    """How many core calls on the main thread have passed their final poll (pd_interrupt_final):
    a signal handler that sees the count move knows the call it runs in no longer stops."""
    return _finals


pd_set_interrupt_check(_interrupt_check)
