# SPDX-License-Identifier: MIT
# cython: language_level=3, boundscheck=False, wraparound=False
"""The training step in one C call: a model's step plan (a graph kept between steps of one batch
shape, freed with the plan) and the call that runs forward, loss, reverse pass and update on it."""
from libc.stdint cimport uint64_t, int64_t, uint8_t
from libc.string cimport memset
from ._cdefs cimport *
from ._status cimport _check_status
from ._graph cimport _Model
from ._optim cimport _Prepared
from ._status import CoreError

#: Where a refused step stopped (CoreError.stage), so the caller words it as that call would.
STAGE_FORWARD, STAGE_LOSS, STAGE_BACKWARD, STAGE_UPDATE = PD_STEP_FORWARD, PD_STEP_LOSS, PD_STEP_BACKWARD, PD_STEP_UPDATE


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

    def run(self, const int64_t[:, ::1] ids not None, const int64_t[::1] targets not None,
            const uint8_t[::1] valid=None, const size_t[::1] pos=None, const size_t[::1] seg_start=None,
            _Prepared update=None, uint64_t step=0):
        """One step; returns the mean loss. A refusal raises CoreError with .stage (STAGE_*)."""
        cdef pd_step_batch b
        cdef pd_step_update u
        cdef const pd_step_update *up = NULL
        cdef pd_error e
        cdef pd_status st
        cdef double loss = 0.0
        cdef int stage = PD_STEP_FORWARD
        cdef size_t n = <size_t>ids.shape[0] * <size_t>ids.shape[1]
        if n == 0:
            raise CoreError(PD_ERR_EMPTY, 0, 0.0, -1, -1)
        for name, arr in (("targets", targets), ("valid", valid), ("pos", pos), ("seg_start", seg_start)):
            if arr is not None and <size_t>len(arr) != n:
                raise ValueError(f"{name} has {len(arr)} entries, expected {n}")
        b.in_.B, b.in_.T, b.in_.ids, b.targets = ids.shape[0], ids.shape[1], &ids[0, 0], &targets[0]
        b.in_.valid = &valid[0] if valid is not None else NULL
        b.in_.pos = &pos[0] if pos is not None else NULL
        b.in_.seg_start = &seg_start[0] if seg_start is not None else NULL
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
