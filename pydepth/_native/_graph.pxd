# SPDX-License-Identifier: MIT
# The extension types of _graph.pyx, for the skin modules that cimport them (_optim.pyx).
from libc.stdint cimport uint8_t
from ._cdefs cimport pd_param, pd_model, pd_graph, pd_rwlock


cdef class _BufferView:
    cdef object owner
    cdef double *ptr
    cdef Py_ssize_t *shape    # ndim sizes, then ndim strides, in one allocation: any rank
    cdef Py_ssize_t *strides
    cdef int ndim
    cdef bint readonly


cdef class _Lock:
    cdef pd_rwlock *lock
    cdef object __weakref__


cdef class _LockSet:
    cdef pd_rwlock **locks
    cdef Py_ssize_t n
    cdef tuple held  # keeps every _Lock alive while the set exists
    cdef void acquire(self) noexcept nogil
    cdef void release(self) noexcept nogil
    cdef void acquire_shared(self) noexcept nogil
    cdef void release_shared(self) noexcept nogil


cdef class _Param:
    cdef pd_param p
    cdef readonly tuple shape
    cdef _Lock lock
    cdef _LockSet _locks(self)


cdef class _Model:
    cdef pd_model m
    cdef pd_param **ptrs
    cdef readonly list params
    cdef bint ready
    cdef _LockSet grad_lock
    cdef _set_branch(self, tuple branch)


cdef class _Selection:
    cdef size_t n
    cdef int *blocks
    cdef int *kinds
    cdef double **outs
    cdef uint8_t *found
    cdef list held
    cdef list flags(self)


cdef class _Graph:
    cdef pd_graph g
    cdef readonly _Model model
    cdef bint alive
    cdef public bint released
    cdef int exports
    cdef int busy        # C calls on the graph now running (changed only with the GIL held)
    cdef int loss_state  # 0 none, 1 being attached, 2 attached
    cdef int _enter(self) except -1
    cdef void _leave(self)
    cdef void _maybe_free(self) noexcept
    cdef bint _readable(self, int kind)
    cdef double *_value(self, int block, int kind, size_t *rank, size_t dims[4])
    cdef int _bind(self, _Selection sel, list selected, list outputs) except -1
    cdef list _reverse(self, _Selection sel, int mode, object decide)
