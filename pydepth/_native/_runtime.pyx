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


cdef extern from "Python.h":
    int _pending_signals "PyErr_CheckSignals" () noexcept  # no except clause: the error stays set
    unsigned long PyThread_get_thread_ident() nogil

cdef unsigned long _main_thread = PyThread_get_thread_ident()


cdef int _interrupt_check() noexcept nogil:
    """Runs pending signal handlers between blocks on the main thread (where Python runs them);
    an exception they raise (KeyboardInterrupt) stays set and stops the C loop."""
    cdef int r
    if PyThread_get_thread_ident() != _main_thread:
        return 0
    with gil:
        r = _pending_signals()
    return r != 0


pd_set_interrupt_check(_interrupt_check)
