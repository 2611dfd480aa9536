# SPDX-License-Identifier: MIT
"""exp, log, log1p, sin, cos and pow with the bits of the reference platform on every platform.

These are the functions the decoder's core computes with: pydepth's own implementations of the
published algorithms, equal bit for bit to glibc (2.28 or later) on x86-64 with FMA, whatever
the local C library (see docs/numerics-elementary.md). Like the C functions, they follow IEEE
semantics: a domain error gives NaN, an overflow gives inf; only unusable *inputs* raise.
"""

from __future__ import annotations

from typing import Callable, Union

import numpy as np

from ._native import _elementary
from .errors import ElementaryInputError

__all__ = ["cos", "exp", "exp_array_path", "log", "log1p", "pow", "sin"]

ArrayOrScalar = Union[np.ndarray, np.float64]
_EXACT_INT = 2**53  # integers up to this magnitude convert to float64 exactly


def _as_float64(x: object, arg: str) -> np.ndarray:
    """x as a C-contiguous float64 array, refusing anything that would not convert exactly."""
    if isinstance(x, (bool, np.bool_)):
        raise ElementaryInputError(f"{arg} must be a real number or array, got the bool {x!r}")
    try:
        arr = np.asarray(x)
    except (ValueError, TypeError) as exc:  # ragged sequences and the like
        raise ElementaryInputError(f"{arg} is not an array of real numbers: {exc}") from None
    kind = arr.dtype.kind
    if kind == "f":
        if arr.dtype.itemsize > 8:
            raise ElementaryInputError(f"{arg} has dtype {arr.dtype}, which does not convert to float64 exactly")
    elif kind in "iu":
        if arr.size and int(np.max(np.abs(arr.astype(object)))) > _EXACT_INT:
            raise ElementaryInputError(f"{arg} holds integers beyond 2**53, which do not convert to float64 exactly")
    else:
        raise ElementaryInputError(f"{arg} must hold real numbers (float or integer dtype), got dtype {arr.dtype}")
    return np.asarray(arr, dtype=np.float64, order="C")


def _shape_result(out: np.ndarray, shape: tuple, scalar: bool) -> ArrayOrScalar:
    out = out.reshape(shape)
    return np.float64(out[()]) if scalar else out


def _is_scalar(x: object) -> bool:
    return not isinstance(x, np.ndarray) and np.ndim(x) == 0


def _unary(into: Callable[[np.ndarray, np.ndarray], None], one: Callable[[float], float], x: object) -> ArrayOrScalar:
    if isinstance(x, float):  # the fast path for one Python float
        return np.float64(one(x))
    arr = _as_float64(x, "x")
    out = np.empty(arr.shape, dtype=np.float64)
    into(arr.reshape(-1), out.reshape(-1))
    return _shape_result(out, arr.shape, _is_scalar(x))


def exp(x: object) -> ArrayOrScalar:
    """e**x elementwise as a new float64 array (a float64 scalar for a scalar input)."""
    return _unary(_elementary.exp_into, _elementary.exp_float, x)


def log(x: object) -> ArrayOrScalar:
    """Natural logarithm elementwise (NaN below 0, -inf at 0), as a new float64 array."""
    return _unary(_elementary.log_into, _elementary.log_float, x)


def log1p(x: object) -> ArrayOrScalar:
    """log(1 + x) elementwise, accurate near 0 (NaN below -1, -inf at -1)."""
    return _unary(_elementary.log1p_into, _elementary.log1p_float, x)


def sin(x: object) -> ArrayOrScalar:
    """Sine of x radians elementwise (NaN for infinite x)."""
    return _unary(_elementary.sin_into, _elementary.sin_float, x)


def cos(x: object) -> ArrayOrScalar:
    """Cosine of x radians elementwise (NaN for infinite x)."""
    return _unary(_elementary.cos_into, _elementary.cos_float, x)


def pow(x: object, y: object) -> ArrayOrScalar:  # the C name, on purpose
    """x**y elementwise with C99 pow semantics; x and y broadcast against each other."""
    if isinstance(x, float) and isinstance(y, float):
        return np.float64(_elementary.pow_float(x, y))
    xa, ya = _as_float64(x, "x"), _as_float64(y, "y")
    try:
        xb, yb = np.broadcast_arrays(xa, ya)
    except ValueError:
        raise ElementaryInputError(f"shapes {xa.shape} and {ya.shape} do not broadcast together") from None
    xc, yc = np.asarray(xb, order="C"), np.asarray(yb, order="C")
    out = np.empty(xc.shape, dtype=np.float64)
    _elementary.pow_into(xc.reshape(-1), yc.reshape(-1), out.reshape(-1))
    return _shape_result(out, xc.shape, _is_scalar(x) and _is_scalar(y))


def exp_array_path() -> str:
    """The loop the core's array exp runs on this CPU: "avx512-fma", "avx2-fma" or "scalar" (same bits)."""
    return _elementary.exp_array_path()
