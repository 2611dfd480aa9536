# SPDX-License-Identifier: MIT
# cython: language_level=3, boundscheck=False, wraparound=False
"""Entry points for tests and benchmarks only: one core product kernel on numpy arrays."""
from ._cdefs cimport *

ctypedef void (*_product)(size_t M, size_t K, size_t N, const double *A, size_t lda, const double *B,
                          size_t ldb, double *C, size_t ldc, int acc) noexcept nogil

cdef _product _PRODUCTS[3]
_PRODUCTS[0], _PRODUCTS[1], _PRODUCTS[2] = pd_mm_nn, pd_mm_nt, pd_mm_tn
#: Product kind -> (its kernel in _PRODUCTS, A stored transposed, B stored transposed).
_KINDS = {"nn": (0, False, False), "nt": (1, False, True), "tn": (2, True, False)}


def matmul(str kind, const double[:, ::1] A not None, const double[:, ::1] B not None,
           double[:, ::1] C not None, bint acc=False):
    """Runs one core product kernel ('nn', 'nt', 'tn') on C-contiguous arrays (for tests)."""
    cdef size_t M = C.shape[0], N = C.shape[1], K
    cdef tuple want
    cdef _product product
    if kind not in _KINDS:
        raise ValueError(f"unknown kernel kind {kind!r}")
    index, a_transposed, b_transposed = _KINDS[kind]
    K = A.shape[0] if a_transposed else A.shape[1]
    want = ((K, M) if a_transposed else (M, K), (N, K) if b_transposed else (K, N))
    got = ((A.shape[0], A.shape[1]), (B.shape[0], B.shape[1]))
    if got != want:
        raise ValueError(f"{kind}: A {got[0]} and B {got[1]} do not fit "
                         f"C {(M, N)}; expected {want[0]} and {want[1]}")
    product = _PRODUCTS[<int>index]
    with nogil:
        product(M, K, N, &A[0, 0], A.shape[1], &B[0, 0], B.shape[1], &C[0, 0], N, acc)
