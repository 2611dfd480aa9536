# SPDX-License-Identifier: MIT
# The extension types of _optim.pyx, for the skin modules that cimport them (_step.pyx).
from libc.stdint cimport uint64_t
from ._cdefs cimport pd_status, pd_error, pd_optim_tensor, pd_step_update
from ._graph cimport _LockSet


cdef class _Update:
    cdef size_t nh
    cdef pd_status check(self, pd_error *e) noexcept
    cdef pd_status step(self, const pd_optim_tensor *t, size_t n, uint64_t step, pd_error *e) noexcept nogil
    cdef void bind(self, pd_step_update *u) noexcept


cdef class _Prepared:
    cdef pd_optim_tensor *t
    cdef size_t n
    cdef _Update update
    cdef list views
    cdef _LockSet held
