# SPDX-License-Identifier: MIT
# cython: language_level=3, boundscheck=False, wraparound=False
"""Skin over the core's residual-health sums of squares: the caller's arrays are read in place
(no copy), the GIL is off while the core sums."""
from libc.stdlib cimport malloc, free
import numpy as np
from pydepth.errors import InvalidGeometryError
from pydepth._native._cdefs cimport pd_rms_array, pd_rms_sums, PD_RMS_FLOAT32, PD_RMS_FLOAT64

_DTYPES = {np.dtype(np.float32): PD_RMS_FLOAT32, np.dtype(np.float64): PD_RMS_FLOAT64}


def sums_of_squares(arrays, scales, valid, double limit):
    """For each C-contiguous float32/float64 array ``[positions, features]`` (all one shape) and
    its scale: ``(sum, in_range)`` of the core's sequential sum of ``(x * scale)**2`` over the
    positions ``valid`` (1-d bool) selects; ``in_range`` is False when a value is non-finite,
    nonzero below 2**-511 or above ``limit`` in magnitude (then ``sum`` means nothing)."""
    arrays = list(arrays)
    scales = [float(s) for s in scales]
    if len(scales) != len(arrays):
        raise InvalidGeometryError(f"{len(arrays)} arrays and {len(scales)} scales")
    if not isinstance(valid, np.ndarray) or valid.dtype != np.bool_ or valid.ndim != 1 or not valid.flags.c_contiguous:
        raise InvalidGeometryError("the validity mask must be a 1-d C-contiguous boolean array")
    cdef Py_ssize_t positions = valid.shape[0], features = 0, count = len(arrays), i
    for i, a in enumerate(arrays):
        if not isinstance(a, np.ndarray) or a.dtype not in _DTYPES or a.ndim != 2 or not a.flags.c_contiguous:
            raise InvalidGeometryError(f"array {i} must be a 2-d C-contiguous float32 or float64 array, got "
                                       f"{type(a).__name__} {getattr(a, 'dtype', '')} {getattr(a, 'shape', '')}")
        if i == 0:
            features = a.shape[1]
        if a.shape[0] != positions or a.shape[1] != features:
            raise InvalidGeometryError(f"array {i} has shape {a.shape}; expected ({positions}, {features})")
    if count == 0:
        return []
    cdef const unsigned char[::1] mask = valid.view(np.uint8)
    cdef pd_rms_array *jobs = <pd_rms_array *>malloc(count * sizeof(pd_rms_array))
    if jobs == NULL:
        raise MemoryError()
    cdef size_t address
    try:
        for i, a in enumerate(arrays):
            address = a.__array_interface__["data"][0]
            jobs[i].data = <const void *>address
            jobs[i].dtype = _DTYPES[a.dtype]
            jobs[i].scale = scales[i]
            jobs[i].sum = 0.0
            jobs[i].in_range = 0
        with nogil:
            pd_rms_sums(jobs, <size_t>count, &mask[0] if positions else NULL, <size_t>positions,
                        <size_t>features, limit)
        return [(jobs[i].sum, bool(jobs[i].in_range)) for i in range(count)]
    finally:
        free(jobs)
