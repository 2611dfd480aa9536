# SPDX-License-Identifier: MIT
# cython: language_level=3, boundscheck=False, wraparound=False
"""Entry points for tests and benchmarks only: one core product kernel, attention's softmax rows
and their VJP, on numpy arrays; a signal raised at a chosen poll of the interrupt check."""
from libc.signal cimport raise_
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


cdef pd_interrupt_fn _host = NULL  # the check the probe wraps while installed
cdef int _signum = 0  # the armed signal (0: none)
cdef long _polls = 0  # polls until it is raised before the check; 0: just after the next final poll


cdef int _probe(int final) noexcept nogil:
    """The installed check with the armed signal raised once: before the chosen poll's check (the
    poll then handles it) or just after a final poll's check (pending through the rest of the
    call, as a signal arriving in a training step's update)."""
    global _signum, _polls
    cdef int r
    if _signum and _polls > 0:
        _polls -= 1
        if _polls == 0:
            raise_(_signum)
            _signum = 0
    r = _host(final) if _host != NULL else 0
    if _signum and _polls == 0 and final and r == 0:
        raise_(_signum)
        _signum = 0
    return r


def signal_at_poll(int signum, long poll=1):
    """Wraps the interrupt check in a probe that raises ``signum`` once: just before the check of
    the ``poll``-th poll from now (1: the next), or, with poll=0, just after the next final poll's
    check (pd_interrupt_final). signal_at_poll(0) disarms and restores the check (for tests)."""
    global _host, _signum, _polls
    if poll < 0:
        raise ValueError(f"poll must be >= 0, got {poll}")
    _signum, _polls = 0, poll
    if signum == 0:
        if _host != NULL:
            pd_set_interrupt_check(_host)
            _host = NULL
        return
    if _host == NULL:
        _host = pd_get_interrupt_check()
        pd_set_interrupt_check(_probe)
    _signum = signum


def signal_pending_at_poll():
    """Whether the armed signal is still to be raised (for tests)."""
    return _signum != 0
