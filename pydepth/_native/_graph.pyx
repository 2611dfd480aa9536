# SPDX-License-Identifier: MIT
# cython: language_level=3, boundscheck=False, wraparound=False
"""Parameters, models and recorded graphs over C memory: buffer views, the model locks (and the
fork handlers that hold them), parameter buffers and draws, the model, the graph and its reverse pass."""
from cpython.buffer cimport PyBUF_WRITABLE
from libc.stdint cimport uint64_t, int64_t, uint8_t
from libc.stdlib cimport malloc, calloc, free
from libc.string cimport memcpy
from ._cdefs cimport *
from ._status cimport raise_status, _check_status
from ._layout cimport _config
from ._rng cimport SplitMix64
import operator
import os as _os
import weakref as _weakref
from ._status import CoreError
from . import _runtime  # noqa: F401 -- installs the interrupt check the passes poll


cdef class _BufferView:
    """Exports a C buffer to numpy; holds its owner alive while any view exists."""

    def __dealloc__(self):
        free(self.shape)

    def __getbuffer__(self, Py_buffer *buf, int flags):
        if self.readonly and (flags & PyBUF_WRITABLE):
            raise BufferError("pydepth buffers are read-only")
        buf.buf = <void *>self.ptr
        buf.obj = self
        buf.len = sizeof(double)
        for i in range(self.ndim):
            buf.len *= self.shape[i]
        buf.readonly = self.readonly
        buf.itemsize = sizeof(double)
        buf.format = b"d"
        buf.ndim = self.ndim
        buf.shape = self.shape
        buf.strides = self.strides
        buf.suboffsets = NULL
        buf.internal = NULL
        if isinstance(self.owner, _Graph):
            (<_Graph>self.owner).exports += 1

    def __releasebuffer__(self, Py_buffer *buf):
        if isinstance(self.owner, _Graph):
            (<_Graph>self.owner).exports -= 1
            (<_Graph>self.owner)._maybe_free()


cdef _BufferView _view(object owner, double *ptr, tuple shape, bint readonly=True):
    cdef _BufferView v = _BufferView.__new__(_BufferView)
    v.owner = owner
    v.ptr = ptr
    v.ndim = len(shape)
    v.readonly = readonly
    v.shape = <Py_ssize_t *>malloc((2 * v.ndim + 1) * sizeof(Py_ssize_t))
    if v.shape == NULL:
        raise MemoryError()
    v.strides = v.shape + v.ndim
    cdef Py_ssize_t stride = sizeof(double)
    for i in reversed(range(v.ndim)):
        v.shape[i] = shape[i]
        v.strides[i] = stride
        stride *= shape[i]
    return v


cdef class _Lock:
    """One model's lock: forwards share it; reverse passes, optimizer steps and every change of
    its parameters' values or gradients hold it alone, so no forward reads a half-updated value
    and no update runs while a backward reads the values it would change."""

    def __cinit__(self):
        self.lock = pd_rwlock_new()
        if self.lock == NULL:
            raise MemoryError()
        _LIVE_LOCKS.add(self)

    def __dealloc__(self):
        if self.lock != NULL:
            pd_rwlock_free(self.lock)


_LIVE_LOCKS = _weakref.WeakSet()
_FORK_HELD = []


def _before_fork():
    """os.fork() waits (GIL released) until no pass or parameter change is in flight and holds
    every model lock across it: a child never inherits a lock held by a thread it lacks, nor a
    model halfway through a backward or a step."""
    cdef _Lock lk
    for lk in sorted(list(_LIVE_LOCKS), key=id):  # the global order of _LockSet
        with nogil:
            pd_rwlock_lock(lk.lock)
        _FORK_HELD.append(lk)


def _after_fork_in_parent():
    """Releases what _before_fork took."""
    cdef _Lock lk
    while _FORK_HELD:
        lk = _FORK_HELD.pop()
        pd_rwlock_unlock(lk.lock)


def _after_fork_in_child():
    """Every lock back to unlocked: the threads that waited on them do not exist in the child."""
    cdef _Lock lk
    while _FORK_HELD:
        lk = _FORK_HELD.pop()
        pd_rwlock_reset(lk.lock)


if hasattr(_os, "register_at_fork"):
    _os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                         after_in_child=_after_fork_in_child)


cdef class _LockSet:
    """Several _Lock taken in one global order (by address), so holders of overlapping sets never
    deadlock; alone (acquire) or shared with other forwards (acquire_shared)."""

    def __cinit__(self, locks not None):
        self.held = tuple(sorted({id(l): l for l in locks if l is not None}.values(), key=id))
        self.n = len(self.held)
        self.locks = <pd_rwlock **>malloc((self.n + 1) * sizeof(pd_rwlock *))
        if self.locks == NULL:
            raise MemoryError()
        for i in range(self.n):
            self.locks[i] = (<_Lock?>self.held[i]).lock

    def __dealloc__(self):
        free(self.locks)

    cdef void acquire(self) noexcept nogil:
        cdef Py_ssize_t i
        for i in range(self.n):
            pd_rwlock_lock(self.locks[i])

    cdef void release(self) noexcept nogil:
        cdef Py_ssize_t i
        for i in range(self.n - 1, -1, -1):
            pd_rwlock_unlock(self.locks[i])

    cdef void acquire_shared(self) noexcept nogil:
        cdef Py_ssize_t i
        for i in range(self.n):
            pd_rwlock_lock_shared(self.locks[i])

    cdef void release_shared(self) noexcept nogil:
        cdef Py_ssize_t i
        for i in range(self.n - 1, -1, -1):
            pd_rwlock_unlock_shared(self.locks[i])


cdef class _Param:
    """Owns one parameter's value and gradient buffers and its value revision; changes hold the
    lock of the model(s) built over it (none before a model exists)."""

    cdef _LockSet _locks(self):
        return _LockSet((self.lock,))

    def __cinit__(self, tuple shape not None):
        cdef size_t n = 1
        dims = []
        for d in shape:
            d = operator.index(d)
            if d < 0 or (d and n > (<size_t>-1) // 16 // <size_t>d):
                raise CoreError(PD_ERR_OVERFLOW, 0, 0.0, -1, -1)
            n *= <size_t>d
            dims.append(d)
        self.shape = tuple(dims)
        self.p.size = n
        self.p.revision = 0
        self.p.grad_zero = 1  # every gradient element starts +0.0
        if pd_param_alloc(&self.p, n) != PD_OK:
            raise MemoryError(f"cannot allocate a parameter of shape {shape}")

    def __dealloc__(self):
        pd_param_release(&self.p)

    def value_view(self):
        return _view(self, self.p.value, self.shape)

    def grad_view(self):
        return _view(self, self.p.grad, self.shape)

    @property
    def size(self):
        return self.p.size

    @property
    def revision(self):
        return int(self.p.revision)

    def assign(self, const double[::1] values not None):
        """Replaces every value and advances the revision."""
        if <size_t>values.shape[0] != self.p.size:
            raise ValueError("size mismatch")
        cdef _LockSet held = self._locks()
        with nogil:
            held.acquire()
            if self.p.size:
                memcpy(self.p.value, &values[0], self.p.size * sizeof(double))
            self.p.revision += 1
            held.release()

    def scale_values(self, double factor):
        """Multiplies every stored value once by factor (one rounded multiply each)."""
        cdef size_t i
        cdef _LockSet held = self._locks()
        with nogil:
            held.acquire()
            for i in range(self.p.size):
                self.p.value[i] = self.p.value[i] * factor
            self.p.revision += 1
            held.release()

    def zero_grad(self):
        cdef _LockSet held = self._locks()
        with nogil:
            held.acquire()
            pd_grad_zero(&self.p)
            held.release()

    def restore(self, const double[::1] values not None, const double[::1] grads not None,
                uint64_t revision):
        """Sets values, gradient and revision at once (unpickling); sizes are checked first."""
        if <size_t>values.shape[0] != self.p.size or <size_t>grads.shape[0] != self.p.size:
            raise ValueError(f"restore needs {self.p.size} values and gradients, got "
                             f"{values.shape[0]} and {grads.shape[0]}")
        cdef _LockSet held = self._locks()
        with nogil:
            held.acquire()
            if self.p.size:
                memcpy(self.p.value, &values[0], self.p.size * sizeof(double))
                pd_grad_set(&self.p, &grads[0])
            self.p.revision = revision
            held.release()

    @property
    def grad_known_zero(self):
        """Whether the core knows every gradient element is +0.0 (a fresh or zeroed gradient):
        the next committing reverse pass then writes its contributions in place."""
        return bool(self.p.grad_zero)

    def grad_is_zero(self):
        cdef size_t i
        for i in range(self.p.size):
            if self.p.grad[i] != 0.0:
                return False
        return True


cdef _LockSet _param_locks(list params):
    return _LockSet([(<_Param?>p).lock for p in params])


def zero_grads(list params not None):
    """Every gradient of params to +0.0 under all their locks at once: no step sees some zeroed."""
    cdef _LockSet held = _param_locks(params)
    cdef _Param p
    with nogil:
        held.acquire()
    try:
        for p in params:
            pd_grad_zero(&p.p)
    finally:
        with nogil:
            held.release()


def assign_all(list params not None, list values not None):
    """Replaces the values of every parameter (sizes checked first) under all their locks at once,
    so no forward sees some replaced and others not."""
    cdef Py_ssize_t i, n = len(params)
    cdef const double[::1] v
    if len(values) != n:
        raise ValueError(f"{n} parameters but {len(values)} value arrays")
    views = [values[i] for i in range(n)]
    for i in range(n):
        v = views[i]
        if <size_t>v.shape[0] != (<_Param?>params[i]).p.size:
            raise ValueError(f"value array {i} has {v.shape[0]} entries, expected {(<_Param>params[i]).p.size}")
    cdef _LockSet held = _param_locks(params)
    with nogil:
        held.acquire()
    try:
        for i in range(n):
            v = views[i]
            if v.shape[0]:
                memcpy((<_Param>params[i]).p.value, &v[0], v.shape[0] * sizeof(double))
            (<_Param>params[i]).p.revision += 1
    finally:
        with nogil:
            held.release()


def copy_values(list params not None, list outs not None):
    """Copies every parameter's values into outs (writable buffers of their sizes) while no step
    or value change runs, so the copies are the state between two whole updates."""
    cdef Py_ssize_t i, n = len(params)
    cdef double[::1] v
    if len(outs) != n:
        raise ValueError(f"{n} parameters but {len(outs)} output arrays")
    views = [outs[i] for i in range(n)]
    for i in range(n):
        v = views[i]
        if <size_t>v.shape[0] != (<_Param?>params[i]).p.size:
            raise ValueError(f"output {i} has {v.shape[0]} entries, expected {(<_Param>params[i]).p.size}")
    cdef _LockSet held = _param_locks(params)
    with nogil:
        held.acquire_shared()
    try:
        for i in range(n):
            v = views[i]
            if v.shape[0]:
                memcpy(&v[0], (<_Param>params[i]).p.value, v.shape[0] * sizeof(double))
    finally:
        with nogil:
            held.release_shared()


def can_allocate(size_t n):
    """Whether n float64 values could be allocated now (nothing is kept)."""
    cdef int ok
    with nogil:
        ok = pd_can_allocate(n)
    return bool(ok)


cdef pd_param **_param_table(tuple c, list params, pd_config *cfg) except NULL:
    """A malloc'd table of params after checking the config and that params match its layout."""
    cdef pd_error e
    cdef size_t count
    cdef Py_ssize_t n = len(params)
    cfg[0] = _config(c)
    cdef pd_status st = pd_config_validate(cfg, &e)
    if st == PD_OK:
        st = pd_config_parameter_count(cfg, &count, &e)
    if st != PD_OK:
        raise_status(st, &e)
    cdef pd_param **ptrs = <pd_param **>malloc((n + 1) * sizeof(pd_param *))
    if ptrs == NULL:
        raise MemoryError()
    for i in range(n):
        if not isinstance(params[i], _Param):
            free(ptrs)
            raise TypeError(f"params[{i}] must be a _Param, got {type(params[i]).__name__}")
        ptrs[i] = &(<_Param>params[i]).p
    st = pd_params_check(cfg, ptrs, n, &e)
    if st != PD_OK:
        free(ptrs)
        raise_status(st, &e)
    return ptrs


def draw_parameters(tuple c not None, list params not None, SplitMix64 rng not None):
    """Fills fresh parameters in the reference draw order; rng advances only on success."""
    cdef pd_config cfg
    cdef pd_error e
    cdef pd_param **ptrs = _param_table(c, params, &cfg)
    cdef Py_ssize_t n = len(params)
    cdef double **values = <double **>malloc((n + 1) * sizeof(double *))
    cdef pd_status st
    if values == NULL:
        free(ptrs)
        raise MemoryError()
    for i in range(n):
        values[i] = ptrs[i].value
    free(ptrs)
    with nogil:
        st = pd_draw_parameters(&cfg, values, &rng.rng, &e)
    free(values)
    if st != PD_OK:
        raise_status(st, &e)


cdef class _Model:
    """A C decoder over borrowed parameter buffers (kept alive here) and its RoPE tables.
    Reverse passes, gradient resets and parameter changes hold its lock (a _Lock its parameters
    share; parameters already owned by another model keep that model's lock and this one takes
    both), so gradient sums never race and no update runs under a reverse pass."""

    def __cinit__(self, tuple c not None, list params not None, tuple branch=None):
        cdef pd_config cfg
        cdef pd_error e
        self.params = list(params)
        self.ptrs = _param_table(c, self.params, &cfg)
        cdef pd_status st = pd_model_init(&self.m, &cfg, self.ptrs, &e)
        if st != PD_OK:
            raise_status(st, &e)
        self.ready = True
        if branch is not None:
            self._set_branch(branch)
        own = _Lock()
        for p in self.params:
            if (<_Param>p).lock is None:
                (<_Param>p).lock = own
        self.grad_lock = _LockSet([(<_Param>p).lock for p in self.params])

    def __dealloc__(self):
        if self.ready:
            pd_model_free(&self.m)
        free(self.ptrs)

    cdef _set_branch(self, tuple branch):
        # set once, at construction: a recorded graph reads the multipliers again in its reverse pass
        cdef size_t b, L = self.m.cfg.layers
        cdef pd_error e
        if <size_t>len(branch) != L:
            raise ValueError(f"branch multipliers: {len(branch)} given for {L} blocks")
        cdef double *mu = <double *>malloc((L if L else 1) * sizeof(double))
        if mu == NULL:
            raise MemoryError()
        for b in range(L):
            mu[b] = branch[b]
        cdef pd_status st = pd_model_set_branch(&self.m, mu, &e)
        free(mu)
        if st != PD_OK:
            raise_status(st, &e)

    @property
    def branch(self):
        """Every block's residual-branch multiplier (1.0 where none)."""
        return tuple(pd_model_branch(&self.m, b) for b in range(self.m.cfg.layers))

    def checksum_all(self):
        """The value checksums a recorded forward takes (for benchmarks/bench_alias_checksum.py)."""
        cdef size_t i, n = len(self.params)
        cdef size_t acc = 0
        with nogil:
            for i in range(n):
                acc ^= pd_values_checksum(self.ptrs[i].value, self.ptrs[i].size)
        return int(acc)

    def zero_grads(self):
        """Every parameter gradient to +0.0, in one C call (split over the pool)."""
        cdef size_t n = len(self.params)
        with nogil:
            self.grad_lock.acquire()
            pd_grads_zero(self.ptrs, n)
            self.grad_lock.release()


RELEASED = -1  # CoreError code for a graph used after release()


cdef int _pass_mode(bint commit, object decide) except -1:
    """pd_graph_backward_pass's mode: wait in place for decide, else commit now or wait for commit()."""
    if decide is not None and not callable(decide):
        raise TypeError(f"decide must be callable, got {type(decide).__name__}")
    return PD_PASS_WAIT_IN_PLACE if decide is not None else (PD_PASS_COMMIT if commit else PD_PASS_WAIT)


cdef class _Selection:
    """The C arrays one reverse pass reads and writes, freed with it; held keeps the outputs exported."""

    def __cinit__(self, size_t n):
        self.n = n
        self.blocks = <int *>malloc((n + 1) * sizeof(int))
        self.kinds = <int *>malloc((n + 1) * sizeof(int))
        self.outs = <double **>malloc((n + 1) * sizeof(double *))
        self.found = <uint8_t *>calloc(n + 1, 1)
        self.held = []
        if self.blocks == NULL or self.kinds == NULL or self.outs == NULL or self.found == NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self.blocks); free(self.kinds); free(self.outs); free(self.found)

    cdef list flags(self):
        cdef size_t i
        return [bool(self.found[i]) for i in range(self.n)]


cdef class _Graph:
    """One recorded forward (and optional loss) over a _Model; freed with its last reference.
    C calls on the graph count as users: release() frees only once none runs and no view exists."""

    def __cinit__(self, _Model model not None, const int64_t[:, ::1] ids not None,
                  const uint8_t[::1] valid=None, const size_t[::1] pos=None,
                  const size_t[::1] seg_start=None, int record=PD_RECORD_ALL):
        cdef pd_error e
        cdef pd_status st
        cdef size_t B = ids.shape[0], T = ids.shape[1]
        cdef const uint8_t *vp = NULL
        cdef const size_t *pp = NULL
        cdef const size_t *sp = NULL
        self.model = model
        if B == 0 or T == 0:
            raise CoreError(PD_ERR_EMPTY, 0, 0.0, -1, -1)
        for name, arr in (("valid", valid), ("pos", pos), ("seg_start", seg_start)):
            if arr is not None and <size_t>len(arr) != B * T:
                raise ValueError(f"{name} has {len(arr)} entries, expected {B * T}")
        if valid is not None:
            vp = &valid[0]
        if pos is not None:
            pp = &pos[0]
        if seg_start is not None:
            sp = &seg_start[0]
        with nogil:
            model.grad_lock.acquire_shared()  # no step or value change runs under a forward
            st = pd_graph_forward(&self.g, &model.m, B, T, &ids[0, 0], vp, pp, sp, record, &e)
            model.grad_lock.release_shared()
        _check_status(st, &e)
        self.alive = True

    def __dealloc__(self):
        if self.alive:
            pd_graph_free(&self.g)

    cdef int _enter(self) except -1:
        if self.released or not self.alive:
            raise CoreError(RELEASED)
        self.busy += 1
        return 0

    cdef void _leave(self):
        self.busy -= 1
        self._maybe_free()

    cdef void _maybe_free(self) noexcept:  # called from __releasebuffer__, maybe while an exception is raised
        if self.released and self.exports == 0 and self.busy == 0 and self.alive:
            pd_graph_free(&self.g)
            self.alive = False

    def release(self):
        """Frees the recorded values once no numpy view of them and no C call on them remains."""
        self.released = True
        self._maybe_free()

    @property
    def recorded(self):
        return bool(self.g.recorded)

    def recorded_checksums(self):
        """The parameter value checksums this recorded forward took, in parameter order (for tests)."""
        cdef size_t i
        if not self.g.recorded:
            return []
        self._enter()
        try:
            return [int(self.g.checksums[i]) for i in range(len(self.model.params))]
        finally:
            self._leave()

    @property
    def lean(self):
        """Whether the record keeps only what a training step reads."""
        return bool(self.g.lean)

    @property
    def has_loss(self):
        return self.loss_state == 2

    def attach_loss(self, const int64_t[::1] targets not None):
        cdef pd_error e
        cdef pd_status st
        if self.loss_state:
            raise CoreError(PD_ERR_LOSS_ATTACHED)  # attached, or being attached by another thread
        if <size_t>targets.shape[0] != self.g.N:
            raise ValueError(f"targets has {targets.shape[0]} entries, expected {self.g.N}")
        self._enter()
        self.loss_state = 1
        try:
            with nogil:
                st = pd_graph_loss(&self.g, &targets[0], &e)
        finally:
            self.loss_state = 2 if st == PD_OK else 0
            self._leave()
        _check_status(st, &e)

    cdef bint _readable(self, int kind):
        """Alive, and a loss value only once the loss is attached."""
        return self.alive and (self.loss_state == 2 or (kind != PD_N_LOSS and kind != PD_N_PER_TARGET_NLL))

    cdef double *_value(self, int block, int kind, size_t *rank, size_t dims[4]):
        if not self._readable(kind):
            return NULL
        return pd_graph_value(&self.g, block, kind, rank, dims)

    def value(self, int block, int kind):
        """A read-only view of a named value, or None when it is not stored."""
        cdef size_t rank
        cdef size_t dims[4]
        cdef double *ptr = self._value(block, kind, &rank, dims)
        if ptr == NULL:
            return None
        return _view(self, ptr, tuple(dims[i] for i in range(rank)))

    def loss_item(self):
        """The attached mean loss as a float (no view made); None before a loss is attached."""
        if not self._readable(PD_N_LOSS):
            return None
        return self.g.loss

    def value_shape(self, int block, int kind):
        """The shape of a value this graph computed, kept or not; None when it has no such value."""
        cdef size_t rank
        cdef size_t dims[4]
        if not self._readable(kind) or not pd_graph_value_shape(&self.g, block, kind, &rank, dims):
            return None
        return tuple(dims[i] for i in range(rank))

    def backward(self, list selected not None, list outputs not None, bint commit=True, decide=None):
        """Reverse pass; selected is [(block, kind)], outputs the matching float64 buffers.
        Returns a list of found flags. With commit=False the parameter adjoints wait on the
        graph for commit(). With decide (a callable; commit is ignored) the pass waits inside
        the gradients known to be +0.0 while the model's lock stays held, decide(found) runs,
        and the pass is committed when it returns true and dropped when it returns false or
        raises; decide must not take the model's lock (no backward, zero_grad or assign)."""
        cdef int mode = _pass_mode(commit, decide)
        cdef size_t n = len(selected)
        cdef _Selection sel
        if <size_t>len(outputs) != n:
            raise ValueError(f"{n} selected values but {len(outputs)} output buffers")
        if self.loss_state != 2:
            raise CoreError(PD_ERR_NO_LOSS, 0)
        self._enter()
        try:
            sel = _Selection(n)
            self._bind(sel, selected, outputs)
            return self._reverse(sel, mode, decide)
        finally:
            self._leave()

    cdef int _bind(self, _Selection sel, list selected, list outputs) except -1:
        """Points sel at each selected value of this graph and at its output, checking the sizes."""
        cdef size_t i, r, rank, size
        cdef size_t dims[4]
        cdef double[::1] buf
        for i in range(sel.n):
            sel.blocks[i], sel.kinds[i] = selected[i]
            if not pd_graph_value_shape(&self.g, sel.blocks[i], sel.kinds[i], &rank, dims):
                raise ValueError(f"value {selected[i]} is not in this graph")
            size = 1
            for r in range(rank):
                size *= dims[r]
            buf = outputs[i]
            if <size_t>buf.shape[0] != size:
                raise ValueError(f"output {i} has {buf.shape[0]} entries, value {selected[i]} has {size}")
            sel.held.append(buf)
            sel.outs[i] = &buf[0]
        return 0

    cdef list _reverse(self, _Selection sel, int mode, object decide):
        """The pass under the model's lock; with decide, the lock stays held until it is committed or dropped."""
        cdef pd_error e
        cdef pd_status st
        cdef bint hold = decide is not None
        cdef bint locked = False, waiting = False
        try:
            with nogil:
                self.model.grad_lock.acquire()
                locked = True
                st = pd_graph_backward_pass(&self.g, sel.n, sel.blocks, sel.kinds, sel.outs, sel.found, mode, &e)
                waiting = hold and st == PD_OK
                if not waiting:
                    self.model.grad_lock.release()
                    locked = False
            _check_status(st, &e)
            flags = sel.flags()
            if waiting and decide(flags):
                with nogil:
                    st = pd_graph_commit(&self.g, &e)
                _check_status(st, &e)
            return flags
        finally:
            if locked:
                with nogil:
                    if waiting:
                        pd_graph_discard(&self.g)  # still waiting: dropped, +0.0 written back
                    self.model.grad_lock.release()

    def discard(self):
        """Drops the pending reverse pass, if any, leaving the gradients as they are."""
        if self.released or not self.alive:
            return  # freeing the graph drops it anyway
        self._enter()
        try:
            with nogil:
                self.model.grad_lock.acquire()
                pd_graph_discard(&self.g)
                self.model.grad_lock.release()
        finally:
            self._leave()

    def commit(self):
        """Adds the pending reverse pass (backward(commit=False)) to the parameter gradients."""
        cdef pd_error e
        cdef pd_status st
        self._enter()
        try:
            with nogil:
                self.model.grad_lock.acquire()
                st = pd_graph_commit(&self.g, &e)
                self.model.grad_lock.release()
            _check_status(st, &e)
        finally:
            self._leave()
