# SPDX-License-Identifier: MIT
# cython: language_level=3, boundscheck=False, wraparound=False
"""Optimizers: one C call per step; Python owns the slots, the core owns the arithmetic."""
from libc.stdint cimport uint64_t
from libc.stdlib cimport calloc, free
from ._cdefs cimport *
from ._status cimport raise_status
from ._graph cimport _LockSet, _Param
from ._status import CoreError


cdef pd_sgd_hparams _sgd_hparams(tuple h):
    cdef pd_sgd_hparams s
    s.lr, s.momentum, s.weight_decay = h
    return s


cdef pd_adamw_hparams _adamw_hparams(tuple h):
    cdef pd_adamw_hparams a
    a.lr, a.beta1, a.beta2, a.eps, a.weight_decay = h
    return a


def optim_check(str kind, tuple hparams):
    """Raises CoreError(PD_ERR_CONFIG, index = field) for a hyperparameter outside its domain."""
    cdef pd_error e
    cdef pd_sgd_hparams s
    cdef pd_adamw_hparams a
    cdef pd_status st
    if kind == "sgd":
        s = _sgd_hparams(hparams)
        st = pd_sgd_check(&s, &e)
    elif kind == "adamw":
        a = _adamw_hparams(hparams)
        st = pd_adamw_check(&a, &e)
    else:
        raise ValueError(f"unknown optimizer kind {kind!r}")
    if st != PD_OK:
        raise_status(st, &e)


def optim_step(str kind, list params, list slots, tuple hparams, uint64_t step):
    """One update of every parameter: slots[i] is a tuple of writable float64 buffers of
    params[i].size elements (SGD: (momentum,) or (); AdamW: (exp_avg, exp_avg_sq))."""
    cdef Py_ssize_t n = len(params)
    cdef pd_error e
    cdef pd_status st
    cdef pd_sgd_hparams s
    cdef pd_adamw_hparams a
    cdef double[::1] buf
    cdef int is_sgd = kind == "sgd"
    if not is_sgd and kind != "adamw":
        raise ValueError(f"unknown optimizer kind {kind!r}")
    if len(slots) != n:
        raise CoreError(<int>PD_ERR_LAYOUT, len(slots), 0.0, -1, -1)
    if is_sgd:
        s = _sgd_hparams(hparams)
    else:
        a = _adamw_hparams(hparams)
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
            if is_sgd:
                st = pd_sgd_step(t, n, &s, step, &e)
            else:
                st = pd_adamw_step(t, n, &a, step, &e)
            held.release()
        if st != PD_OK:
            raise_status(st, &e)
    finally:
        free(t)
