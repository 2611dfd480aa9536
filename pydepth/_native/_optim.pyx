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
    """One optimizer's hyperparameters in the core's structs (one set shared, or one per tensor),
    with their check and the step."""

    cdef pd_status check(self, pd_error *e) noexcept:
        return PD_ERR_LAYOUT  # every kind in _UPDATES overrides both

    cdef pd_status step(self, const pd_optim_tensor *t, size_t n, uint64_t step, pd_error *e) noexcept nogil:
        return PD_ERR_LAYOUT

    cdef void bind(self, pd_step_update *u) noexcept:
        u.apply = NULL  # the training step's form of step(): every kind in _UPDATES sets it


cdef list _sets(object h):
    """A tuple is one shared set; a list holds one tuple per tensor."""
    sets = list(h) if isinstance(h, list) else [h]
    if not sets:
        raise ValueError("no hyperparameter set")
    return sets


cdef class _SGD(_Update):
    cdef pd_sgd_hparams *h

    def __cinit__(self, object h):
        sets = _sets(h)
        self.nh = len(sets)
        self.h = <pd_sgd_hparams *>calloc(self.nh, sizeof(pd_sgd_hparams))
        if self.h == NULL:
            raise MemoryError()
        for k, one in enumerate(sets):
            self.h[k].lr, self.h[k].momentum, self.h[k].weight_decay = one

    def __dealloc__(self):
        free(self.h)

    cdef pd_status check(self, pd_error *e) noexcept:
        cdef size_t k
        cdef pd_status st
        for k in range(self.nh):
            st = pd_sgd_check(&self.h[k], e)
            if st != PD_OK:
                return st
        return PD_OK

    cdef pd_status step(self, const pd_optim_tensor *t, size_t n, uint64_t step, pd_error *e) noexcept nogil:
        return pd_sgd_step(t, n, self.h, self.nh, step, e)

    cdef void bind(self, pd_step_update *u) noexcept:
        u.apply, u.hparams, u.nh = pd_step_sgd, self.h, self.nh


cdef class _AdamW(_Update):
    cdef pd_adamw_hparams *h

    def __cinit__(self, object h):
        sets = _sets(h)
        self.nh = len(sets)
        self.h = <pd_adamw_hparams *>calloc(self.nh, sizeof(pd_adamw_hparams))
        if self.h == NULL:
            raise MemoryError()
        for k, one in enumerate(sets):
            self.h[k].lr, self.h[k].beta1, self.h[k].beta2, self.h[k].eps, self.h[k].weight_decay = one

    def __dealloc__(self):
        free(self.h)

    cdef pd_status check(self, pd_error *e) noexcept:
        cdef size_t k
        cdef pd_status st
        for k in range(self.nh):
            st = pd_adamw_check(&self.h[k], e)
            if st != PD_OK:
                return st
        return PD_OK

    cdef pd_status step(self, const pd_optim_tensor *t, size_t n, uint64_t step, pd_error *e) noexcept nogil:
        return pd_adamw_step(t, n, self.h, self.nh, step, e)

    cdef void bind(self, pd_step_update *u) noexcept:
        u.apply, u.hparams, u.nh = pd_step_adamw, self.h, self.nh


#: The core's name of each update (pydepth.optim's Optimizer._kind) -> its hyperparameters' type.
_UPDATES = {"sgd": _SGD, "adamw": _AdamW}


def _update_type(str kind):
    try:
        return _UPDATES[kind]
    except KeyError:
        raise ValueError(f"unknown optimizer kind {kind!r}") from None


def optim_check(str kind, object hparams):
    """Raises CoreError(PD_ERR_CONFIG, index = field) for a hyperparameter outside its domain."""
    cdef pd_error e
    cdef _Update update = _update_type(kind)(hparams)
    cdef pd_status st = update.check(&e)
    if st != PD_OK:
        raise_status(st, &e)


cdef class _Prepared:
    """One optimizer's update bound to its tensors and slots (their buffers held) and to the
    parameters' locks, ready to run at any step count: optim_step runs it once, a training
    step (_step.pyx) reuses it while the rate, hyperparameters and slots stay the same.
    slots[i] is a tuple of writable float64 buffers of params[i].size elements (SGD:
    (momentum,) or (); AdamW: (exp_avg, exp_avg_sq)); hparams is one tuple shared by every
    parameter, or a list of one tuple per parameter."""

    def __cinit__(self, str kind, list params not None, list slots not None, object hparams):
        cdef Py_ssize_t n = len(params)
        cdef double[::1] buf
        kind_type = _update_type(kind)
        if len(slots) != n:
            raise CoreError(<int>PD_ERR_LAYOUT, len(slots), 0.0, -1, -1)
        self.update = kind_type(hparams)
        self.n = n
        self.t = <pd_optim_tensor *>calloc(n + 1, sizeof(pd_optim_tensor))
        if self.t == NULL:
            raise MemoryError()
        self.views = []  # keeps every exported buffer alive across the nogil calls
        self.held = _LockSet([(<_Param?>p).lock for p in params])
        for i in range(n):
            self.t[i].param = &(<_Param?>params[i]).p
            for k, obj in enumerate(slots[i]):
                if k >= 2:
                    raise CoreError(<int>PD_ERR_LAYOUT, i, 0.0, <int>i, <int>k + 1)
                buf = obj
                if <size_t>buf.shape[0] != self.t[i].param.size:
                    raise CoreError(<int>PD_ERR_SHAPE, i, <double>buf.shape[0], <int>i, <int>k + 1)
                self.views.append(buf)
                if buf.shape[0]:  # an empty tensor's slot is never read
                    self.t[i].slot[k] = &buf[0]
                else:
                    self.t[i].slot[k] = self.t[i].param.value

    def __dealloc__(self):
        free(self.t)


def optim_step(str kind, list params, list slots, object hparams, uint64_t step):
    """One update of every parameter (the operands as _Prepared takes them)."""
    cdef pd_error e
    cdef pd_status st
    cdef _Prepared prep = _Prepared(kind, params, slots, hparams)
    with nogil:
        prep.held.acquire()  # no reverse pass of a model over these parameters runs meanwhile
        st = prep.update.step(prep.t, prep.n, step, &e)
        prep.held.release()
    if st != PD_OK:
        raise_status(st, &e)
