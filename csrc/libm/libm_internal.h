/* The builds of each function (variant.h) and the steps shared between files. */
#ifndef PD_LIBM_INTERNAL_H
#define PD_LIBM_INTERNAL_H
#include <stddef.h>
#include <stdint.h>

#define PD_LIBM_DECLARE(P)                                                                   \
    double P##exp(double x);                                                                 \
    double P##log(double x);                                                                 \
    double P##pow(double x, double y);                                                       \
    double P##log1p(double x);                                                               \
    double P##sin(double x);                                                                 \
    double P##cos(double x);                                                                 \
    double P##exp_e5(uint64_t K, uint64_t sigma, double tau);
PD_LIBM_DECLARE(pd_libm_fma_)
PD_LIBM_DECLARE(pd_libm_emu_)
PD_LIBM_DECLARE(pd_libm_c99_)

/* §6.5 B1-B4: x = n pi/2 + (a + da) for 105414336 <= |x| < inf; returns n mod 4. No fma. */
int pd_libm_reduce_large(double x, double *a, double *da);

/* §7.3: the AVX2+FMA loop over whole groups of four (n a multiple of 4). */
void pd_libm_fma_exp_avx2(size_t n, const double *in, double *out);
#endif
