# SPDX-License-Identifier: MIT
# cython: language_level=3, boundscheck=False, wraparound=False
"""The training step in one C call: a model's step plan (a graph kept between steps of one batch
shape, freed with the plan) and the call that runs forward, loss, reverse pass and update on it."""
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_C_CONTIGUOUS, PyBUF_FORMAT
from libc.stdint cimport uint64_t, int64_t, uint8_t
from libc.string cimport memset, strchr
import sys
from ._cdefs cimport *
from ._status cimport _check_status
from ._graph cimport _Model
from ._optim cimport _Prepared
from ._status import CoreError

#: Where a refused step stopped (CoreError.stage), so the caller words it as that call would.
STAGE_FORWARD, STAGE_LOSS, STAGE_BACKWARD, STAGE_UPDATE = PD_STEP_FORWARD, PD_STEP_LOSS, PD_STEP_BACKWARD, PD_STEP_UPDATE

cdef char _NATIVE = b'<' if sys.byteorder == "little" else b'>'


cdef const void *_c_array(object arr, Py_buffer *view, const char *name, const char *codes, Py_ssize_t itemsize,
                          Py_ssize_t n) except NULL:
    """arr's C-contiguous data of n (any n when negative) native integers whose format code is one
    of codes, through view, which the caller releases: the buffer protocol itself, as a typed
    memoryview checks it, without building one (that cost about 0.15 µs per array a step)."""
    cdef const char *f
    PyObject_GetBuffer(arr, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)
    f = view.format
    if f == NULL:  # no format: unsigned bytes (the buffer protocol's default)
        f = b"B"
    if f[0] == b'@' or f[0] == b'=' or f[0] == _NATIVE:
        f += 1
    if view.itemsize != itemsize or f[0] == 0 or f[1] != 0 or strchr(codes, f[0]) == NULL:
        PyBuffer_Release(view)
        raise ValueError(f"{name.decode()} must hold {itemsize}-byte integers of format {codes.decode()!r}, "
                         f"got {f.decode()!r}")
    if n >= 0 and view.len != n * itemsize:
        PyBuffer_Release(view)
        raise ValueError(f"{name.decode()} has {view.len // itemsize} entries, expected {n}")
    return view.buf


cdef class _StepPlan:
    """One model's training steps: the graph they run in is planned for a batch shape on the
    first step of that shape and reused until a step of another shape plans again. Steps hold
    the model's lock alone from the forward to the update, so concurrent steps run in turn."""
    cdef pd_step_plan plan
    cdef readonly _Model model

    def __cinit__(self, _Model model not None):
        self.model = model
        memset(&self.plan, 0, sizeof(self.plan))

    def __dealloc__(self):
        pd_step_plan_free(&self.plan)

    @property
    def planned(self):
        """Whether a graph is planned (held between steps)."""
        return bool(self.plan.planned)

    def run(self, object ids not None, object targets not None, object valid=None, object pos=None,
            object seg_start=None, _Prepared update=None, uint64_t step=0):
        """One step over C-contiguous int64 ids [B, T] and targets (B*T of them, any shape), the
        optional uint8 valid and size_t pos and seg_start (B*T each); returns the mean loss. A
        refusal raises CoreError with .stage (STAGE_*)."""
        cdef Py_buffer bi, bt, bv, bp, bs
        cdef int held = 0  # buffers acquired so far, released in reverse
        cdef pd_step_batch b
        cdef pd_step_update u
        cdef const pd_step_update *up = NULL
        cdef pd_error e
        cdef pd_status st
        cdef double loss = 0.0
        cdef int stage = PD_STEP_FORWARD
        cdef size_t n
        memset(&b, 0, sizeof(b))
        try:
            b.in_.ids = <const int64_t *>_c_array(ids, &bi, b"ids", b"lq", 8, -1)
            held = 1
            if bi.ndim != 2:
                raise ValueError(f"ids must have rank 2, got {bi.ndim}")
            b.in_.B, b.in_.T = bi.shape[0], bi.shape[1]
            n = b.in_.B * b.in_.T
            if n == 0:
                raise CoreError(PD_ERR_EMPTY, 0, 0.0, -1, -1)
            b.targets = <const int64_t *>_c_array(targets, &bt, b"targets", b"lq", 8, n)
            held = 2
            if valid is not None:
                b.in_.valid = <const uint8_t *>_c_array(valid, &bv, b"valid", b"B", 1, n)
            held = 3
            if pos is not None:
                b.in_.pos = <const size_t *>_c_array(pos, &bp, b"pos", b"LQ", sizeof(size_t), n)
            held = 4
            if seg_start is not None:
                b.in_.seg_start = <const size_t *>_c_array(seg_start, &bs, b"seg_start", b"LQ", sizeof(size_t), n)
            held = 5
            if update is not None:
                update.update.bind(&u)
                u.tensors, u.n, u.step = update.t, update.n, step
                up = &u
            with nogil:
                self.model.grad_lock.acquire()  # the optimizer's parameters are among the model's
                st = pd_train_step(&self.plan, &self.model.m, &b, up, &loss, &stage, &e)
                self.model.grad_lock.release()
            try:
                _check_status(st, &e)
            except CoreError as err:
                err.stage = stage
                raise
            return loss
        finally:  # the buffers stay held (their arrays unresizable) until the step is done
            if held >= 5 and seg_start is not None: PyBuffer_Release(&bs)
            if held >= 4 and pos is not None: PyBuffer_Release(&bp)
            if held >= 3 and valid is not None: PyBuffer_Release(&bv)
            if held >= 2: PyBuffer_Release(&bt)
            if held >= 1: PyBuffer_Release(&bi)
