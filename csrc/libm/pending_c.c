/* SPDX-License-Identifier: MIT */
/* Placeholder for the four-lane exp until it is written from the specification: the scalar exp. */
#include "../platform/pd_platform.h"
#if PD_ARCH_X86_64 && (defined(__GNUC__) || defined(__clang__))
#include "exp_array.h"
#include "pd_libm.h"

void pd_libm_fma_exp_avx2(size_t n, const double *in, double *out) {
    for (size_t i = 0; i < n; i++) out[i] = pd_exp(in[i]);
}
#else
typedef int pd_libm_pending_c_unused;
#endif
