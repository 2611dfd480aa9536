/* SPDX-License-Identifier: MIT */
/* The 8x8 register transpose of the AVX-512F path, shared by the k-major copies
 * (transpose_avx512.c) and the small products' transposed stores (gemm_small_avx512.c). */
#ifndef PD_T8_AVX512_H
#define PD_T8_AVX512_H
#include "../platform/pd_platform.h"
#if PD_ARCH_X86_64
#include <immintrin.h>

/* o[i] lane j = r[j] lane i for i, j < 8 (moves only: the bits are untouched). */
PD_TARGET("avx512f") static inline void pd_t8_avx512(const __m512d r[8], __m512d o[8]) {
    __m512d t[8], u[8];
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
    o[0] = _mm512_shuffle_f64x2(u[0], u[4], 0x88);
    o[4] = _mm512_shuffle_f64x2(u[0], u[4], 0xDD);
    o[2] = _mm512_shuffle_f64x2(u[1], u[5], 0x88);
    o[6] = _mm512_shuffle_f64x2(u[1], u[5], 0xDD);
    o[1] = _mm512_shuffle_f64x2(u[2], u[6], 0x88);
    o[5] = _mm512_shuffle_f64x2(u[2], u[6], 0xDD);
    o[3] = _mm512_shuffle_f64x2(u[3], u[7], 0x88);
    o[7] = _mm512_shuffle_f64x2(u[3], u[7], 0xDD);
}
#endif
#endif
