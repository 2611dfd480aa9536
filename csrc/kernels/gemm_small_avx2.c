/* SPDX-License-Identifier: MIT */
/* AVX2 small products: tiles of 4 rows by one or two 4-wide column vectors, B rows read in
 * place, A broadcast in place; the last N % 4 columns go to the portable kernel. Multiply and
 * add stay separate instructions (the functions target AVX2, never FMA). */
#include "../platform/pd_platform.h"
#if PD_ARCH_X86_64
#include <immintrin.h>
#include "gemm_small.h"

#define R 4

/* Row r of the tile: missing rows (r >= rows) re-read row 0 and are never stored. */
#define ROWPTR(r) const double *a##r = A + ((r) < rows ? (size_t)(r) : 0) * rsa
#define ZERO(r, v) __m256d s##r##v = _mm256_setzero_pd()
#define STEP(r, v) s##r##v = _mm256_add_pd(s##r##v, _mm256_mul_pd(a##r##k, b##v))
#define BCAST(r) const __m256d a##r##k = _mm256_broadcast_sd(a##r + ka)
#define OUT(r, v)                                                                                \
    do {                                                                                         \
        if ((r) < rows) {                                                                        \
            double *cr = c + (r) * ldc + 4 * (v);                                                \
            __m256d x = s##r##v;                                                                 \
            if (acc) x = _mm256_add_pd(_mm256_loadu_pd(cr), x); /* C + s */                      \
            _mm256_storeu_pd(cr, x);                                                             \
        }                                                                                        \
    } while (0)
#define ALL(M, v) M(0, v); M(1, v); M(2, v); M(3, v)
#define ROWS(M) M(0); M(1); M(2); M(3)

/* The tile of rows [i, i + rows) and columns [j, j + 4) of the product. */
PD_TARGET("avx2") static void tile_4x1(const pd_product *p, size_t i, size_t j, size_t rows) {
    const size_t K = p->K, rsa = p->rsa, csa = p->csa, rsb = p->rsb, ldc = p->ldc;
    const double *A = p->A + i * rsa, *b = p->B + j;
    double *c = p->C + i * ldc + j;
    const int acc = p->acc;
    ROWS(ROWPTR);
    ALL(ZERO, 0);
    for (size_t k = 0, ka = 0; k < K; k++, ka += csa, b += rsb) {
        const __m256d b0 = _mm256_loadu_pd(b);
        ROWS(BCAST);
        ALL(STEP, 0);
    }
    ALL(OUT, 0);
}

/* The tile of rows [i, i + rows) and columns [j, j + 8). */
PD_TARGET("avx2") static void tile_4x2(const pd_product *p, size_t i, size_t j, size_t rows) {
    const size_t K = p->K, rsa = p->rsa, csa = p->csa, rsb = p->rsb, ldc = p->ldc;
    const double *A = p->A + i * rsa, *b = p->B + j;
    double *c = p->C + i * ldc + j;
    const int acc = p->acc;
    ROWS(ROWPTR);
    ALL(ZERO, 0);
    ALL(ZERO, 1);
    for (size_t k = 0, ka = 0; k < K; k++, ka += csa, b += rsb) {
        const __m256d b0 = _mm256_loadu_pd(b), b1 = _mm256_loadu_pd(b + 4);
        ROWS(BCAST);
        ALL(STEP, 0);
        ALL(STEP, 1);
    }
    ALL(OUT, 0);
    ALL(OUT, 1);
}

PD_TARGET("avx2") void pd_small_avx2(const pd_product *p) {
    const size_t M = p->M, N = p->N;
    size_t j = 0;
    for (; j + 8 <= N; j += 8)
        for (size_t i = 0; i < M; i += R) tile_4x2(p, i, j, M - i < R ? M - i : R);
    if (j + 4 <= N) {
        for (size_t i = 0; i < M; i += R) tile_4x1(p, i, j, M - i < R ? M - i : R);
        j += 4;
    }
    if (j < N) { /* the last N % 4 columns */
        pd_product rest = *p;
        rest.N = N - j;
        rest.B += j;
        rest.C += j;
        pd_small_generic(&rest);
    }
}
#else
typedef int pd_gemm_small_avx2_unused; /* no x86-64: this path does not exist */
#endif
