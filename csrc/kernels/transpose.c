/* SPDX-License-Identifier: MIT */
/* Portable transposes, the edges every path leaves to them, and the choice of path variant. */
#include "transpose.h"
#include "../platform/pd_platform.h"
#if PD_ARCH_X86_64
#include <emmintrin.h>
#endif

void pd_transpose_edges(size_t K, size_t N, const double *B, size_t ldb, double *bt, size_t k0, size_t n0) {
    for (size_t n = 0; n < n0; n++)
        for (size_t k = k0; k < K; k++) bt[k * N + n] = B[n * ldb + k];
    for (size_t n0s = n0; n0s < N; n0s += 8) { /* strips of 8 stored rows read side by side */
        const size_t n1 = N - n0s < 8 ? N : n0s + 8;
        for (size_t k = 0; k < K; k++)
            for (size_t n = n0s; n < n1; n++) bt[k * N + n] = B[n * ldb + k];
    }
}

void pd_transpose_generic(size_t K, size_t N, const double *B, size_t ldb, double *bt) {
    pd_transpose_edges(K, N, B, ldb, bt, 0, 0);
}

/* 2x2 blocks: two stored rows, each contiguous in k, give two consecutive packed rows of a
 * pair of lanes (SSE2, part of every x86-64): half the memory operations of element copies. */
#if PD_ARCH_X86_64
static size_t gather_pairs(size_t kb, const double *src, size_t ld, size_t lanes, double *dst, int w) {
    size_t k = 0;
    for (; k + 2 <= kb; k += 2, dst += 2 * (size_t)w)
        for (size_t l = 0; l < lanes; l += 2) {
            const __m128d r0 = _mm_loadu_pd(src + l * ld + k), r1 = _mm_loadu_pd(src + (l + 1) * ld + k);
            _mm_storeu_pd(dst + l, _mm_unpacklo_pd(r0, r1));
            _mm_storeu_pd(dst + w + l, _mm_unpackhi_pd(r0, r1));
        }
    return k;
}
#endif

void pd_gather_generic(size_t kb, const double *src, size_t ld, size_t lanes, double *dst, int w) {
    size_t k = 0;
#if PD_ARCH_X86_64
    if (lanes == (size_t)w && w % 2 == 0) k = gather_pairs(kb, src, ld, lanes, dst, w);
#endif
    for (dst += k * (size_t)w; k < kb; k++, dst += w) {
        size_t l = 0;
        for (; l < lanes; l++) dst[l] = src[l * ld + k];
        for (; l < (size_t)w; l++) dst[l] = 0.0;
    }
}

pd_transpose_fn pd_transpose_for(const pd_gemm_path *p) {
#if PD_ARCH_X86_64
    if (p == &pd_path_avx512) return pd_transpose_avx512;
    if (p == &pd_path_avx2) return pd_transpose_avx2;
#endif
    (void)p;
    return pd_transpose_generic;
}

pd_gather_fn pd_gather_for(const pd_gemm_path *p) {
#if PD_ARCH_X86_64
    if (p == &pd_path_avx512) return pd_gather_avx512;
    if (p == &pd_path_avx2) return pd_gather_avx2;
#endif
    (void)p;
    return pd_gather_generic;
}
