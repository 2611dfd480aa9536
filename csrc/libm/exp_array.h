/* SPDX-License-Identifier: MIT */
/* exp over arrays (docs/numerics-elementary.md §7.3): pd_exp_array and its path choice are
 * declared in pd_libm.h; this is the AVX2+FMA loop exp_avx2.c provides for exp_array.c. */
#ifndef PD_LIBM_EXP_ARRAY_H
#define PD_LIBM_EXP_ARRAY_H
#include <stddef.h>

/* Whole groups of four (n a multiple of 4); an FMA build, hence the pd_libm_fma_ name (§7.1). */
void pd_libm_fma_exp_avx2(size_t n, const double *in, double *out);
#endif
