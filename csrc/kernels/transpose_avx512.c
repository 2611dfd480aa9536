/* SPDX-License-Identifier: MIT */
/* AVX-512F transposes: one 8x8 block transposed in registers serves the whole k-major copy and
 * the packed panels alike; the copy's edges take masked blocks, the panels' the portable code. */
#include "../platform/pd_platform.h"
#if PD_ARCH_X86_64
#include <immintrin.h>
#include "t8_avx512.h"
#include "transpose.h"

/* dst[i*ldd + j] = src[j*ld + i] for i, j < 8 */
PD_TARGET("avx512f") static inline void block8(const double *src, size_t ld, double *dst, size_t ldd) {
    __m512d r[8], o[8];
    for (int i = 0; i < 8; i++) r[i] = _mm512_loadu_pd(src + i * ld);
    pd_t8_avx512(r, o);
    for (int i = 0; i < 8; i++) _mm512_storeu_pd(dst + i * ldd, o[i]);
}

/* The same for i < kk, j < nn (an edge block, 1..8 each): masked loads and stores, so the
 * right and bottom edges of the copy take one register block instead of element copies. */
PD_TARGET("avx512f") static void block8_edge(const double *src, size_t ld, double *dst, size_t ldd, size_t kk,
                                             size_t nn) {
    const __mmask8 km = (__mmask8)((1u << kk) - 1u), nm = (__mmask8)((1u << nn) - 1u);
    __m512d r[8], o[8];
    for (size_t i = 0; i < 8; i++) r[i] = i < nn ? _mm512_maskz_loadu_pd(km, src + i * ld) : _mm512_setzero_pd();
    pd_t8_avx512(r, o);
    for (size_t i = 0; i < kk; i++) _mm512_mask_storeu_pd(dst + i * ldd, nm, o[i]);
}

PD_TARGET("avx512f") void pd_transpose_avx512(size_t K, size_t N, const double *B, size_t ldb, double *bt) {
    for (size_t n = 0; n < N; n += 8) {
        const size_t nn = N - n < 8 ? N - n : 8;
        for (size_t k = 0; k < K; k += 8) {
            const size_t kk = K - k < 8 ? K - k : 8;
            if (kk == 8 && nn == 8) block8(B + n * ldb + k, ldb, bt + k * N + n, N);
            else block8_edge(B + n * ldb + k, ldb, bt + k * N + n, N, kk, nn);
        }
    }
}

PD_TARGET("avx512f") void pd_gather_avx512(size_t kb, const double *src, size_t ld, size_t lanes,
                                           double *dst, int w) {
    if (lanes != (size_t)w || w % 8 != 0) {
        pd_gather_generic(kb, src, ld, lanes, dst, w);
        return;
    }
    const size_t k8 = kb / 8 * 8;
    for (size_t k = 0; k < k8; k += 8)
        for (size_t l = 0; l < lanes; l += 8) block8(src + l * ld + k, ld, dst + k * (size_t)w + l, (size_t)w);
    if (k8 < kb) pd_gather_generic(kb - k8, src + k8, ld, lanes, dst + k8 * (size_t)w, w);
}
#else
typedef int pd_transpose_avx512_unused; /* no x86-64: this path does not exist */
#endif
