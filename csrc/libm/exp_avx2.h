/* The AVX2+FMA loop behind pd_exp_array (internal to csrc/libm). */
#ifndef PD_LIBM_EXP_AVX2_H
#define PD_LIBM_EXP_AVX2_H
#include <stddef.h>

typedef void (*pd_exp_array_fn)(size_t n, const double *in, double *out);

/* The loop itself (x86-64 only) and the pointer exp_array.c dispatches through (NULL elsewhere). */
void pd_libm_fma_exp_array(size_t n, const double *in, double *out);
extern const pd_exp_array_fn pd_exp_array_avx2_fma;

#endif
