# SPDX-License-Identifier: MIT
# cython: language_level=3, boundscheck=False, wraparound=False
"""Entry points for tests and benchmarks only: one core product kernel, attention's softmax rows
and their VJP, on numpy arrays."""
from libc.stdint cimport uint8_t
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


cdef pd_attn_rows _attn_rows(size_t T, const uint8_t[::1] valid, const size_t[::1] seg_start, double kappa):
    if T == 0 or valid.shape[0] != T or seg_start.shape[0] != T:
        raise ValueError(f"valid and seg_start need one entry per row of the {T} x {T} weights")
    cdef size_t i
    for i in range(T):
        if valid[i] and seg_start[i] > i:
            raise ValueError(f"row {i} starts its keys at {seg_start[i]}, after itself")
    cdef pd_attn_rows r
    r.T, r.i0, r.i1, r.valid, r.s0, r.kappa = T, 0, T, &valid[0], &seg_start[0], kappa
    return r


def attention_softmax_rows(double[:, ::1] W not None, const uint8_t[::1] valid not None,
                           const size_t[::1] seg_start not None, double kappa):
    """Runs attention's softmax over every row of the square W in place (for tests):
    (True, 0, 0.0), or (False, the first non-finite scaled score's flat index, its value)."""
    if W.shape[0] != W.shape[1]:
        raise ValueError(f"W must be square, got {W.shape[0]} x {W.shape[1]}")
    cdef pd_attn_rows r = _attn_rows(W.shape[0], valid, seg_start, kappa)
    cdef size_t at = 0
    cdef double bad = 0.0
    cdef int ok
    with nogil:
        ok = pd_attn_softmax_rows(&r, &W[0, 0], &at, &bad)
    return bool(ok), at, bad


def attention_softmax_vjp_rows(const double[:, ::1] W not None, double[:, ::1] dS not None,
                               const uint8_t[::1] valid not None, const size_t[::1] seg_start not None,
                               double kappa):
    """Runs the softmax VJP of attention's weights W over every row of dS in place (for tests)."""
    if W.shape[0] != W.shape[1] or dS.shape[0] != W.shape[0] or dS.shape[1] != W.shape[1]:
        raise ValueError("W and dS must be square and alike")
    cdef pd_attn_rows r = _attn_rows(W.shape[0], valid, seg_start, kappa)
    with nogil:
        pd_attn_softmax_vjp_rows(&r, &W[0, 0], &dS[0, 0])
