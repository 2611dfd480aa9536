# SPDX-License-Identifier: MIT
# cython: language_level=3, boundscheck=False, wraparound=False
"""Skin over the core's elementary functions: contiguous float64 in, caller's float64 out, GIL off."""
import numpy as np
from pydepth.errors import ElementaryInputError

cdef extern from "libm/pd_libm.h":
    double pd_exp(double x) nogil
    double pd_log(double x) nogil
    double pd_log1p(double x) nogil
    double pd_sin(double x) nogil
    double pd_cos(double x) nogil
    double pd_pow(double x, double y) nogil
    void pd_exp_array(size_t n, const double *inp, double *out) nogil
    size_t pd_exp_shifted_array(size_t n, const double *inp, double mx, double *out) nogil
    const char *pd_exp_array_path() nogil
    int pd_force_exp_array_path(const char *name) nogil
    double pd_fma_soft(double a, double b, double c) nogil

ctypedef double (*unary_fn)(double) noexcept nogil


cdef check_array(obj, str name, bint writable):
    """Refuse anything but a 1-d C-contiguous float64 ndarray (writable for outputs)."""
    if not isinstance(obj, np.ndarray):
        raise ElementaryInputError(f"{name} must be a numpy array, got {type(obj).__name__}")
    if obj.dtype != np.float64 or obj.ndim != 1 or not obj.flags.c_contiguous:
        raise ElementaryInputError(
            f"{name} must be 1-d C-contiguous float64, got dtype {obj.dtype} shape {obj.shape}")
    if writable and not obj.flags.writeable:
        raise ElementaryInputError(f"{name} is read-only")


cdef check_lengths(Py_ssize_t n, Py_ssize_t m):
    if n != m:
        raise ElementaryInputError(f"output length {m} does not match input length {n}")


cdef unary_into(unary_fn f, x_obj, out_obj):
    check_array(x_obj, "x", False)
    check_array(out_obj, "out", True)
    cdef const double[::1] x = x_obj
    cdef double[::1] out = out_obj
    check_lengths(x.shape[0], out.shape[0])
    cdef Py_ssize_t i, n = x.shape[0]
    with nogil:
        for i in range(n):
            out[i] = f(x[i])


def exp_into(x_obj, out_obj):
    """out[i] = exp(x[i]) on the SIMD path where the CPU has one (same bits as the scalar)."""
    check_array(x_obj, "x", False)
    check_array(out_obj, "out", True)
    cdef const double[::1] x = x_obj
    cdef double[::1] out = out_obj
    check_lengths(x.shape[0], out.shape[0])
    if x.shape[0] == 0:
        return
    with nogil:
        pd_exp_array(<size_t>x.shape[0], &x[0], &out[0])


def exp_shifted_into(x_obj, double mx, out_obj):
    """out[i] = exp(x[i] - mx) on exp_into's path, the difference rounded first; returns the
    first i whose difference is zero (len(x) when none), as a softmax row's shift finds it."""
    check_array(x_obj, "x", False)
    check_array(out_obj, "out", True)
    cdef const double[::1] x = x_obj
    cdef double[::1] out = out_obj
    check_lengths(x.shape[0], out.shape[0])
    if x.shape[0] == 0:
        return 0
    cdef size_t first
    with nogil:
        first = pd_exp_shifted_array(<size_t>x.shape[0], &x[0], mx, &out[0])
    return first


def exp_scalar_into(x, out):
    """out[i] = exp(x[i]) one call of the scalar function per element."""
    unary_into(pd_exp, x, out)


def log_into(x, out):
    """out[i] = log(x[i])."""
    unary_into(pd_log, x, out)


def log1p_into(x, out):
    """out[i] = log1p(x[i])."""
    unary_into(pd_log1p, x, out)


def sin_into(x, out):
    """out[i] = sin(x[i])."""
    unary_into(pd_sin, x, out)


def cos_into(x, out):
    """out[i] = cos(x[i])."""
    unary_into(pd_cos, x, out)


def pow_into(x_obj, y_obj, out_obj):
    """out[i] = pow(x[i], y[i])."""
    check_array(x_obj, "x", False)
    check_array(y_obj, "y", False)
    check_array(out_obj, "out", True)
    cdef const double[::1] x = x_obj
    cdef const double[::1] y = y_obj
    cdef double[::1] out = out_obj
    check_lengths(x.shape[0], y.shape[0])
    check_lengths(x.shape[0], out.shape[0])
    cdef Py_ssize_t i, n = x.shape[0]
    with nogil:
        for i in range(n):
            out[i] = pd_pow(x[i], y[i])


cdef double as_double(x, str name) except? -1.0:
    if not isinstance(x, float):
        raise ElementaryInputError(f"{name} must be a float, got {type(x).__name__}")
    return x


def exp_float(x):
    """exp of one float, as a float."""
    return pd_exp(as_double(x, "x"))


def log_float(x):
    """log of one float, as a float."""
    return pd_log(as_double(x, "x"))


def log1p_float(x):
    """log1p of one float, as a float."""
    return pd_log1p(as_double(x, "x"))


def sin_float(x):
    """sin of one float, as a float."""
    return pd_sin(as_double(x, "x"))


def cos_float(x):
    """cos of one float, as a float."""
    return pd_cos(as_double(x, "x"))


def pow_float(x, y):
    """pow of two floats, as a float."""
    return pd_pow(as_double(x, "x"), as_double(y, "y"))


def fma_emulated_into(a_obj, b_obj, c_obj, out_obj):
    """out[i] = a[i]*b[i] + c[i] rounded once by the emulation the builds without FMA use."""
    check_array(a_obj, "a", False)
    check_array(b_obj, "b", False)
    check_array(c_obj, "c", False)
    check_array(out_obj, "out", True)
    cdef const double[::1] a = a_obj
    cdef const double[::1] b = b_obj
    cdef const double[::1] c = c_obj
    cdef double[::1] out = out_obj
    check_lengths(a.shape[0], b.shape[0])
    check_lengths(a.shape[0], c.shape[0])
    check_lengths(a.shape[0], out.shape[0])
    cdef Py_ssize_t i, n = a.shape[0]
    with nogil:
        for i in range(n):
            out[i] = pd_fma_soft(a[i], b[i], c[i])


def exp_array_path():
    """The loop exp_into runs: "avx512-fma", "avx2-fma" or "scalar"."""
    return pd_exp_array_path().decode()


def force_exp_array_path(name):
    """Force exp_into's loop by name (testing); False if this CPU lacks it."""
    if not isinstance(name, str):
        raise ElementaryInputError(f"path name must be a str, got {type(name).__name__}")
    return bool(pd_force_exp_array_path(name.encode()))
