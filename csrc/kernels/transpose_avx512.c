/* SPDX-License-Identifier: MIT */
/* AVX-512F transposes: one 8x8 block transposed in registers serves the whole k-major copy and
 * the packed panels alike; the edges go to the portable code. */
#include "../platform/pd_platform.h"
#if PD_ARCH_X86_64
#include <immintrin.h>
#include "transpose.h"

/* dst[i*ldd + j] = src[j*ld + i] for i, j < 8 */
PD_TARGET("avx512f") static inline void block8(const double *src, size_t ld, double *dst, size_t ldd) {
    __m512d r[8], t[8], u[8];
    for (int i = 0; i < 8; i++) r[i] = _mm512_loadu_pd(src + i * ld);
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm512_unpacklo_pd(r[i], r[i + 1]);     /* k even of rows i, i+1 */
        t[i + 1] = _mm512_unpackhi_pd(r[i], r[i + 1]); /* k odd */
    }
    for (int i = 0; i < 8; i += 4) { /* 128-bit pairs: k = 0,4 | 2,6 | 1,5 | 3,7 */
        u[i] = _mm512_shuffle_f64x2(t[i], t[i + 2], 0x88);
        u[i + 1] = _mm512_shuffle_f64x2(t[i], t[i + 2], 0xDD);
        u[i + 2] = _mm512_shuffle_f64x2(t[i + 1], t[i + 3], 0x88);
        u[i + 3] = _mm512_shuffle_f64x2(t[i + 1], t[i + 3], 0xDD);
    }
    _mm512_storeu_pd(dst + 0 * ldd, _mm512_shuffle_f64x2(u[0], u[4], 0x88));
    _mm512_storeu_pd(dst + 4 * ldd, _mm512_shuffle_f64x2(u[0], u[4], 0xDD));
    _mm512_storeu_pd(dst + 2 * ldd, _mm512_shuffle_f64x2(u[1], u[5], 0x88));
    _mm512_storeu_pd(dst + 6 * ldd, _mm512_shuffle_f64x2(u[1], u[5], 0xDD));
    _mm512_storeu_pd(dst + 1 * ldd, _mm512_shuffle_f64x2(u[2], u[6], 0x88));
    _mm512_storeu_pd(dst + 5 * ldd, _mm512_shuffle_f64x2(u[2], u[6], 0xDD));
    _mm512_storeu_pd(dst + 3 * ldd, _mm512_shuffle_f64x2(u[3], u[7], 0x88));
    _mm512_storeu_pd(dst + 7 * ldd, _mm512_shuffle_f64x2(u[3], u[7], 0xDD));
}

PD_TARGET("avx512f") void pd_transpose_avx512(size_t K, size_t N, const double *B, size_t ldb, double *bt) {
    const size_t N8 = N / 8 * 8, K8 = K / 8 * 8;
    for (size_t n = 0; n < N8; n += 8)
        for (size_t k = 0; k < K8; k += 8) block8(B + n * ldb + k, ldb, bt + k * N + n, N);
    pd_transpose_edges(K, N, B, ldb, bt, K8, N8);
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
