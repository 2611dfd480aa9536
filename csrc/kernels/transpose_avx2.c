/* SPDX-License-Identifier: MIT */
/* AVX2 transposes: one 4x4 block transposed in registers serves the whole k-major copy and the
 * packed panels alike; the edges go to the portable code. */
#include "../platform/pd_platform.h"
#if PD_ARCH_X86_64
#include <immintrin.h>
#include "transpose.h"

/* dst[i*ldd + j] = src[j*ld + i] for i, j < 4 */
PD_TARGET("avx2") static inline void block4(const double *src, size_t ld, double *dst, size_t ldd) {
    const __m256d r0 = _mm256_loadu_pd(src), r1 = _mm256_loadu_pd(src + ld);
    const __m256d r2 = _mm256_loadu_pd(src + 2 * ld), r3 = _mm256_loadu_pd(src + 3 * ld);
    const __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1);
    const __m256d t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
    _mm256_storeu_pd(dst, _mm256_permute2f128_pd(t0, t2, 0x20));
    _mm256_storeu_pd(dst + ldd, _mm256_permute2f128_pd(t1, t3, 0x20));
    _mm256_storeu_pd(dst + 2 * ldd, _mm256_permute2f128_pd(t0, t2, 0x31));
    _mm256_storeu_pd(dst + 3 * ldd, _mm256_permute2f128_pd(t1, t3, 0x31));
}

PD_TARGET("avx2") void pd_transpose_avx2(size_t K, size_t N, const double *B, size_t ldb, double *bt) {
    const size_t N4 = N / 4 * 4, K4 = K / 4 * 4;
    for (size_t n = 0; n < N4; n += 4)
        for (size_t k = 0; k < K4; k += 4) block4(B + n * ldb + k, ldb, bt + k * N + n, N);
    pd_transpose_edges(K, N, B, ldb, bt, K4, N4);
}

PD_TARGET("avx2") void pd_gather_avx2(size_t kb, const double *src, size_t ld, size_t lanes, double *dst,
                                      int w) {
    if (lanes != (size_t)w || w % 4 != 0) {
        pd_gather_generic(kb, src, ld, lanes, dst, w);
        return;
    }
    const size_t k4 = kb / 4 * 4;
    for (size_t k = 0; k < k4; k += 4)
        for (size_t l = 0; l < lanes; l += 4) block4(src + l * ld + k, ld, dst + k * (size_t)w + l, (size_t)w);
    if (k4 < kb) pd_gather_generic(kb - k4, src + k4, ld, lanes, dst + k4 * (size_t)w, w);
}
#else
typedef int pd_transpose_avx2_unused; /* no x86-64: this path does not exist */
#endif
