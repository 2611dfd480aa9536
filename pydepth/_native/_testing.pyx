# SPDX-License-Identifier: MIT
# cython: language_level=3, boundscheck=False, wraparound=False
"""Entry points for tests and benchmarks only: one core product kernel on numpy arrays."""
from ._cdefs cimport *


def matmul(str kind, const double[:, ::1] A not None, const double[:, ::1] B not None,
           double[:, ::1] C not None, bint acc=False):
    """Runs one core product kernel ('nn', 'nt', 'tn') on C-contiguous arrays (for tests)."""
    cdef size_t M = C.shape[0], N = C.shape[1], K
    cdef tuple want
    if kind == "nn":
        want = ((M, A.shape[1]), (A.shape[1], N))
    elif kind == "nt":
        want = ((M, A.shape[1]), (N, A.shape[1]))
    elif kind == "tn":
        want = ((A.shape[0], M), (A.shape[0], N))
    else:
        raise ValueError(f"unknown kernel kind {kind!r}")
    got = ((A.shape[0], A.shape[1]), (B.shape[0], B.shape[1]))
    if got != want:
        raise ValueError(f"{kind}: A {got[0]} and B {got[1]} do not fit "
                         f"C {(M, N)}; expected {want[0]} and {want[1]}")
    if kind == "nn":
        K = A.shape[1]
        with nogil:
            pd_mm_nn(M, K, N, &A[0, 0], A.shape[1], &B[0, 0], B.shape[1], &C[0, 0], N, acc)
    elif kind == "nt":
        K = A.shape[1]
        with nogil:
            pd_mm_nt(M, K, N, &A[0, 0], A.shape[1], &B[0, 0], B.shape[1], &C[0, 0], N, acc)
    elif kind == "tn":
        K = A.shape[0]
        with nogil:
            pd_mm_tn(M, K, N, &A[0, 0], A.shape[1], &B[0, 0], B.shape[1], &C[0, 0], N, acc)
    else:
        raise ValueError(f"unknown kernel kind {kind!r}")
