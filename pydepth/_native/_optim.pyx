# SPDX-License-Identifier: MIT
# cython: language_level=3, boundscheck=False, wraparound=False
"""Optimizers: one C call per step; Python owns the slots, the core owns the arithmetic."""
from libc.stdint cimport uint64_t
from libc.stdlib cimport calloc, free
from ._cdefs cimport *
from ._status cimport raise_status
from ._graph cimport _LockSet, _Param
from ._status import CoreError


cdef class _Update:
    """One optimizer's hyperparameters in the core's struct, with its check and its step."""

    cdef pd_status check(self, pd_error *e) noexcept:
        return PD_ERR_LAYOUT  # every kind in _UPDATES overrides both

    cdef pd_status step(self, const pd_optim_tensor *t, size_t n, uint64_t step, pd_error *e) noexcept nogil:
        return PD_ERR_LAYOUT


cdef class _SGD(_Update):
    cdef pd_sgd_hparams h

    def __cinit__(self, tuple h):
        self.h.lr, self.h.momentum, self.h.weight_decay = h

    cdef pd_status check(self, pd_error *e) noexcept:
        return pd_sgd_check(&self.h, e)

    cdef pd_status step(self, const pd_optim_tensor *t, size_t n, uint64_t step, pd_error *e) noexcept nogil:
        return pd_sgd_step(t, n, &self.h, step, e)


cdef class _AdamW(_Update):
    cdef pd_adamw_hparams h

    def __cinit__(self, tuple h):
        self.h.lr, self.h.beta1, self.h.beta2, self.h.eps, self.h.weight_decay = h

    cdef pd_status check(self, pd_error *e) noexcept:
        return pd_adamw_check(&self.h, e)

    cdef pd_status step(self, const pd_optim_tensor *t, size_t n, uint64_t step, pd_error *e) noexcept nogil:
        return pd_adamw_step(t, n, &self.h, step, e)


#: The core's name of each update (pydepth.optim's Optimizer._kind) -> its hyperparameters' type.
_UPDATES = {"sgd": _SGD, "adamw": _AdamW}


def _update_type(str kind):
    try:
        return _UPDATES[kind]
    except KeyError:
        raise ValueError(f"unknown optimizer kind {kind!r}") from None


def optim_check(str kind, tuple hparams):
    """Raises CoreError(PD_ERR_CONFIG, index = field) for a hyperparameter outside its domain."""
    cdef pd_error e
    cdef _Update update = _update_type(kind)(hparams)
    cdef pd_status st = update.check(&e)
    if st != PD_OK:
        raise_status(st, &e)


def optim_step(str kind, list params, list slots, tuple hparams, uint64_t step):
    """One update of every parameter: slots[i] is a tuple of writable float64 buffers of
    params[i].size elements (SGD: (momentum,) or (); AdamW: (exp_avg, exp_avg_sq))."""
    cdef Py_ssize_t n = len(params)
    cdef pd_error e
    cdef pd_status st
    cdef double[::1] buf
    kind_type = _update_type(kind)
    if len(slots) != n:
        raise CoreError(<int>PD_ERR_LAYOUT, len(slots), 0.0, -1, -1)
    cdef _Update update = kind_type(hparams)
    cdef pd_optim_tensor *t = <pd_optim_tensor *>calloc(n + 1, sizeof(pd_optim_tensor))
    if t == NULL:
        raise MemoryError()
    views = []  # keeps every exported buffer alive across the nogil call
    cdef _LockSet held
    try:
        held = _LockSet([(<_Param?>p).lock for p in params])
        for i in range(n):
            t[i].param = &(<_Param?>params[i]).p
            for k, obj in enumerate(slots[i]):
                if k >= 2:
                    raise CoreError(<int>PD_ERR_LAYOUT, i, 0.0, <int>i, <int>k + 1)
                buf = obj
                if <size_t>buf.shape[0] != t[i].param.size:
                    raise CoreError(<int>PD_ERR_SHAPE, i, <double>buf.shape[0], <int>i, <int>k + 1)
                views.append(buf)
                if buf.shape[0]:  # an empty tensor's slot is never read
                    t[i].slot[k] = &buf[0]
                else:
                    t[i].slot[k] = t[i].param.value
        with nogil:
            held.acquire()  # no reverse pass of a model over these parameters runs meanwhile
            st = update.step(t, n, step, &e)
            held.release()
        if st != PD_OK:
            raise_status(st, &e)
    finally:
        free(t)
