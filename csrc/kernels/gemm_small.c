/* SPDX-License-Identifier: MIT */
/* Unpacked small products: the path's vector kernel over B rows read in place (a transposed B
 * copied k-major first), and the portable kernel every path falls back on. */
#include "gemm_small.h"
#include "transpose.h"
#include "../platform/pd_platform.h"

#define COLS 64 /* one row's partial sums kept on the stack */

void pd_small_generic(const pd_product *p) {
    const size_t M = p->M, K = p->K, N = p->N, rsa = p->rsa, csa = p->csa, rsb = p->rsb, ldc = p->ldc;
    const double *A = p->A, *B = p->B;
    double *C = p->C;
    const int acc = p->acc;
    double s[COLS];
    for (size_t j0 = 0; j0 < N; j0 += COLS) {
        const size_t n = N - j0 < COLS ? N - j0 : COLS;
        for (size_t i = 0; i < M; i++) {
            const double *a = A + i * rsa, *b = B + j0;
            for (size_t j = 0; j < n; j++) s[j] = 0.0;
            for (size_t k = 0; k < K; k++, b += rsb) {
                const double ak = a[k * csa];
                for (size_t j = 0; j < n; j++) s[j] = s[j] + ak * b[j];
            }
            double *c = C + i * ldc + j0;
            for (size_t j = 0; j < n; j++) c[j] = acc ? c[j] + s[j] : s[j];
        }
    }
}

/* A transposed B with fewer rows in A (X Eᵀ, the tied head): copy A k-major instead, run
 * B Aᵀ with B's rows broadcast in place and store its tiles transposed; 1 if it ran. */
static int small_swapped(const pd_gemm_path *path, const pd_product *p, double *at) {
#if PD_ARCH_X86_64
    if (path != &pd_path_avx512 || p->rsb != 1 || p->csa != 1 || p->M >= p->N) return 0;
    pd_transpose_for(path)(p->K, p->M, p->A, p->rsa, at); /* at[k*M + m] = A(m, k) */
    const pd_product q = {p->N, p->K, p->M, p->B, p->csb, 1, at, p->M, 1, p->C, p->ldc, p->acc, NULL};
    pd_small_avx512_ct(&q);
    return 1;
#else
    (void)path, (void)p, (void)at;
    return 0;
#endif
}

void pd_mm_small(const pd_gemm_path *path, const pd_product *p, double *bt) {
    const size_t K = p->K, N = p->N, rsb = p->rsb, csb = p->csb;
    if (csb == 1) { /* p as given: a copy of it would reload fields just stored (a store-forward stall) */
        path->small(p);
        return;
    }
    if (small_swapped(path, p, bt)) return;
    /* bt[k*N + n] = B(k, n); the callers' transposed B has rsb == 1 */
    if (rsb == 1) pd_transpose_for(path)(K, N, p->B, csb, bt);
    else
        for (size_t n = 0; n < N; n++)
            for (size_t k = 0; k < K; k++) bt[k * N + n] = p->B[k * rsb + n * csb];
    const pd_product q = {p->M, K, N, p->A, p->rsa, p->csa, bt, N, 1, p->C, p->ldc, p->acc, NULL};
    path->small(&q);
}
