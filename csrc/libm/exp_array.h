/* exp over arrays, dispatched once per process */
#ifndef PD_LIBM_EXP_ARRAY_H
#define PD_LIBM_EXP_ARRAY_H
#include <stddef.h>

/* out[i] = pd_exp(in[i]) for i < n (in == out allowed): SIMD where the CPU has AVX2 and FMA,
 * the scalar function elsewhere; the bits are the same on every path. */
void pd_exp_array(size_t n, const double *in, double *out);

/* Name of the path pd_exp_array uses ("avx2-fma" or "scalar"). */
const char *pd_exp_array_path(void);
/* Force a pd_exp_array path by name for testing; returns 0 if unavailable. */
int pd_force_exp_array_path(const char *name);

#endif
