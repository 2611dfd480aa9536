/* SPDX-License-Identifier: MIT */
/* The AVX-512 tiles' product: a vector times a double broadcast from memory, in two spellings
 * with the same product and rounding. Folded, each multiply carries its own embedded broadcast:
 * where AVX-512 runs at half width (Zen 4), a separate 512-bit broadcast takes a vector pipe
 * from the multiplies and adds. Separate, one broadcast register feeds every multiply of that
 * double: elsewhere the folded form's extra loads cost more (benchmarks/KERNELS.md).
 * gemm.c's pd_avx512_folds() chooses. */
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

/* a[0] * b, folded when fold (a constant in each specialized tile) is nonzero. */
#define PD_MUL512(fold, a, b) ((fold) ? pd_mul_bcast512((a), (b)) : _mm512_mul_pd(_mm512_set1_pd(*(a)), (b)))

#endif
#endif
