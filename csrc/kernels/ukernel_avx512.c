/* SPDX-License-Identifier: MIT */
/* AVX-512F 8x16 micro-kernel (target avx512f; contraction is off, so no FMA is emitted even though
 * the ISA has one). Eight rows use 16 of the 32 zmm registers as accumulators and divide the
 * usual row counts (powers of two and their multiples) without a partial sliver. Only
 * dispatched when the CPU has it; its broadcasts are folded or not as pd_avx512_folds() says. */
#include "../platform/pd_platform.h"
#if PD_ARCH_X86_64
#include <immintrin.h>
#include "ukernel.h"
#include "gemm.h"
#include "gemm_small.h"
#include "mul_bcast_avx512.h"

#define MR 8
#define NR 16

#define ROW(i)                                                                  \
    do {                                                                        \
        c##i##0 = _mm512_add_pd(c##i##0, PD_MUL512(fold, a + (i), b0));         \
        c##i##1 = _mm512_add_pd(c##i##1, PD_MUL512(fold, a + (i), b1));         \
    } while (0)

#define LOAD(i)                                                                 \
    do {                                                                        \
        c##i##0 = load ? _mm512_loadu_pd(c + (i) * ldc) : _mm512_setzero_pd();  \
        c##i##1 = load ? _mm512_loadu_pd(c + (i) * ldc + 8) : _mm512_setzero_pd(); \
    } while (0)

#define STORE(i)                                                                              \
    do {                                                                                      \
        if (add) {                                                                            \
            c##i##0 = _mm512_add_pd(_mm512_loadu_pd(add + (i) * ldadd), c##i##0);             \
            c##i##1 = _mm512_add_pd(_mm512_loadu_pd(add + (i) * ldadd + 8), c##i##1);         \
        }                                                                                     \
        _mm512_storeu_pd(c + (i) * ldc, c##i##0);                                             \
        _mm512_storeu_pd(c + (i) * ldc + 8, c##i##1);                                         \
    } while (0)

/* The tile of packed A slivers; fold is a constant in each of its two specializations below. */
PD_TARGET("avx512f") static PD_ALWAYS_INLINE void tile(size_t kc, const double *a, const double *b, double *c,
                                                       size_t ldc, const pd_tile_io *io, const int fold) {
    PD_TILE_LOCALS(io, kc);
    __m512d c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51, c60, c61, c70, c71;
    LOAD(0); LOAD(1); LOAD(2); LOAD(3); LOAD(4); LOAD(5); LOAD(6); LOAD(7);
    for (size_t k = 0; k < kc; pd_line_share_ask(&share)) {
        for (const size_t end = pd_line_share_until(&share, k, kc); k < end; k++, a += MR, b += NR) {
            const __m512d b0 = _mm512_load_pd(b), b1 = _mm512_load_pd(b + 8);
            ROW(0); ROW(1); ROW(2); ROW(3); ROW(4); ROW(5); ROW(6); ROW(7);
        }
    }
    STORE(0); STORE(1); STORE(2); STORE(3); STORE(4); STORE(5); STORE(6); STORE(7);
}

#define ROWS(i)                                                                 \
    do {                                                                        \
        c##i##0 = _mm512_add_pd(c##i##0, PD_MUL512(fold, a##i + k, b0));        \
        c##i##1 = _mm512_add_pd(c##i##1, PD_MUL512(fold, a##i + k, b1));        \
    } while (0)

/* The tile with A's stored rows read in place. */
PD_TARGET("avx512f") static PD_ALWAYS_INLINE void tile_rows(size_t kc, const double *a, size_t lda,
                                                            const double *b, double *c, size_t ldc,
                                                            const pd_tile_io *io, const int fold) {
    PD_TILE_LOCALS(io, kc);
    const double *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda, *a4 = a + 4 * lda, *a5 = a + 5 * lda;
    const double *a6 = a + 6 * lda, *a7 = a + 7 * lda;
    __m512d c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51, c60, c61, c70, c71;
    LOAD(0); LOAD(1); LOAD(2); LOAD(3); LOAD(4); LOAD(5); LOAD(6); LOAD(7);
    for (size_t k = 0; k < kc; pd_line_share_ask(&share)) {
        for (const size_t end = pd_line_share_until(&share, k, kc); k < end; k++, b += NR) {
            const __m512d b0 = _mm512_load_pd(b), b1 = _mm512_load_pd(b + 8);
            ROWS(0); ROWS(1); ROWS(2); ROWS(3); ROWS(4); ROWS(5); ROWS(6); ROWS(7);
        }
    }
    STORE(0); STORE(1); STORE(2); STORE(3); STORE(4); STORE(5); STORE(6); STORE(7);
}

/* Each tile call reads the fold choice once: a kc-long tile dwarfs the test. */
PD_TARGET("avx512f") static void ukernel_avx512(size_t kc, const double *a, const double *b, double *c, size_t ldc,
                                                const pd_tile_io *io) {
    if (pd_avx512_folds()) tile(kc, a, b, c, ldc, io, 1);
    else tile(kc, a, b, c, ldc, io, 0);
}

PD_TARGET("avx512f") static void ukernel_avx512_rows(size_t kc, const double *a, size_t lda, const double *b,
                                                     double *c, size_t ldc, const pd_tile_io *io) {
    if (pd_avx512_folds()) tile_rows(kc, a, lda, b, c, ldc, io, 1);
    else tile_rows(kc, a, lda, b, c, ldc, io, 0);
}

/* Its long tiles ask for the next panel's lines inside their loop: a burst before each one filled
 * the core's miss buffers. k-blocks of 512 terms: a 512-wide model's products then hand no partial
 * sums through C, and the panel (64 KB) runs from L2 at full rate; nc keeps the packed block of B
 * at its size (benchmarks/KERNELS.md). */
const pd_gemm_path pd_path_avx512 = {"avx512", MR, NR, 512, 96, 1024, 1, ukernel_avx512, ukernel_avx512_rows,
                                     pd_small_avx512};
#else
typedef int pd_ukernel_avx512_unused; /* no x86-64: this path does not exist */
#endif
