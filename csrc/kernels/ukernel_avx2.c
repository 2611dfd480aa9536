/* SPDX-License-Identifier: MIT */
/* AVX2 6x8 micro-kernel: 12 ymm accumulators, each lane one output of C. Multiply and add
 * stay separate instructions (the function targets AVX2, never FMA). */
#include "../platform/pd_platform.h"
#if PD_ARCH_X86_64
#include <immintrin.h>
#include "ukernel.h"
#include "gemm_small.h"

#define MR 6
#define NR 8

#define ROW(i)                                                                  \
    do {                                                                        \
        const __m256d ai = _mm256_broadcast_sd(a + (i));                        \
        c##i##0 = _mm256_add_pd(c##i##0, _mm256_mul_pd(ai, b0));                \
        c##i##1 = _mm256_add_pd(c##i##1, _mm256_mul_pd(ai, b1));                \
    } while (0)

#define LOAD(i)                                                                 \
    do {                                                                        \
        c##i##0 = load ? _mm256_loadu_pd(c + (i) * ldc) : _mm256_setzero_pd();  \
        c##i##1 = load ? _mm256_loadu_pd(c + (i) * ldc + 4) : _mm256_setzero_pd(); \
    } while (0)

#define STORE(i)                                                                              \
    do {                                                                                      \
        if (add) {                                                                            \
            c##i##0 = _mm256_add_pd(_mm256_loadu_pd(add + (i) * ldadd), c##i##0);             \
            c##i##1 = _mm256_add_pd(_mm256_loadu_pd(add + (i) * ldadd + 4), c##i##1);         \
        }                                                                                     \
        _mm256_storeu_pd(c + (i) * ldc, c##i##0);                                             \
        _mm256_storeu_pd(c + (i) * ldc + 4, c##i##1);                                         \
    } while (0)

PD_TARGET("avx2") static void ukernel_avx2(size_t kc, const double *a, const double *b, double *c, size_t ldc,
                                           const pd_tile_io *io) {
    PD_TILE_LOCALS(io, kc);
    __m256d c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
    LOAD(0); LOAD(1); LOAD(2); LOAD(3); LOAD(4); LOAD(5);
    for (size_t k = 0; k < kc; pd_line_share_ask(&share)) {
        for (const size_t end = pd_line_share_until(&share, k, kc); k < end; k++, a += MR, b += NR) {
            const __m256d b0 = _mm256_load_pd(b), b1 = _mm256_load_pd(b + 4);
            ROW(0); ROW(1); ROW(2); ROW(3); ROW(4); ROW(5);
        }
    }
    STORE(0); STORE(1); STORE(2); STORE(3); STORE(4); STORE(5);
}

#define ROWS(i)                                                                 \
    do {                                                                        \
        const __m256d ai = _mm256_broadcast_sd(a##i + k);                       \
        c##i##0 = _mm256_add_pd(c##i##0, _mm256_mul_pd(ai, b0));                \
        c##i##1 = _mm256_add_pd(c##i##1, _mm256_mul_pd(ai, b1));                \
    } while (0)

PD_TARGET("avx2") static void ukernel_avx2_rows(size_t kc, const double *a, size_t lda, const double *b, double *c,
                                                size_t ldc, const pd_tile_io *io) {
    PD_TILE_LOCALS(io, kc);
    const double *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda, *a4 = a + 4 * lda, *a5 = a + 5 * lda;
    __m256d c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
    LOAD(0); LOAD(1); LOAD(2); LOAD(3); LOAD(4); LOAD(5);
    for (size_t k = 0; k < kc; pd_line_share_ask(&share)) {
        for (const size_t end = pd_line_share_until(&share, k, kc); k < end; k++, b += NR) {
            const __m256d b0 = _mm256_load_pd(b), b1 = _mm256_load_pd(b + 4);
            ROWS(0); ROWS(1); ROWS(2); ROWS(3); ROWS(4); ROWS(5);
        }
    }
    STORE(0); STORE(1); STORE(2); STORE(3); STORE(4); STORE(5);
}

/* Its short tiles ask for the next tile's C and the next panel's lines just before they run:
 * spread over their loops the step ran slower (benchmarks/KERNELS.md). */
const pd_gemm_path pd_path_avx2 = {"avx2", MR, NR, 256, 96, 2048, 0, ukernel_avx2, ukernel_avx2_rows,
                                   pd_small_avx2};
#else
typedef int pd_ukernel_avx2_unused; /* no x86-64: this path does not exist */
#endif
