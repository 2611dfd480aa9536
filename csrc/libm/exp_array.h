/* SPDX-License-Identifier: MIT */
/* exp over arrays (docs/numerics-elementary.md §7.3): pd_exp_array and its path choice are
 * declared in pd_libm.h; these are the vector loops exp_avx2.c and exp_avx512.c provide for it. */
#ifndef PD_LIBM_EXP_ARRAY_H
#define PD_LIBM_EXP_ARRAY_H
#include <stddef.h>

/* Whole groups of four (n a multiple of 4); an FMA build, hence the pd_libm_fma_ name (§7.1). */
void pd_libm_fma_exp_avx2(size_t n, const double *in, double *out);
/* Any n, the last n mod 8 lanes masked; AVX-512F, whose fused multiply-adds it uses (§7.3). */
void pd_libm_fma_exp_avx512(size_t n, const double *in, double *out);
/* exp(in[i] - mx), any n; returns the first i whose difference is zero, n when none (§7.3). */
size_t pd_libm_fma_exp_shifted_avx512(size_t n, const double *in, double mx, double *out);
#endif
