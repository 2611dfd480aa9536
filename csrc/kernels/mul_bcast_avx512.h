/* SPDX-License-Identifier: MIT */
/* One product of the AVX-512 tiles: a vector times a double broadcast from memory, written as one
 * multiply with an embedded broadcast. Where AVX-512 is double-pumped (Zen 4), a separate 512-bit
 * broadcast takes a vector pipe from the multiplies and adds (benchmarks/KERNELS.md); the product
 * and its rounding are the same either way. */
#ifndef PD_MUL_BCAST_AVX512_H
#define PD_MUL_BCAST_AVX512_H
#include "../platform/pd_platform.h"
#if PD_ARCH_X86_64
#include <immintrin.h>

#if defined(__GNUC__) || defined(__clang__)
/* Compilers hoist a broadcast that feeds two multiplies into its own instruction; asm keeps it folded. */
PD_TARGET("avx512f") static inline __m512d pd_mul_bcast512(const double *a, __m512d b) {
    __m512d r;
    __asm__("vmulpd %1%{1to8%}, %2, %0" : "=v"(r) : "m"(*a), "v"(b));
    return r;
}
#else
PD_TARGET("avx512f") static inline __m512d pd_mul_bcast512(const double *a, __m512d b) {
    return _mm512_mul_pd(_mm512_set1_pd(*a), b);
}
#endif

#endif
#endif
