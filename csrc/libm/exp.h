/* exp: the table-driven exponential */
#ifndef PD_LIBM_EXP_H
#define PD_LIBM_EXP_H

/* e^x with the bits of glibc's FMA build (exp_core.h has the method). */
double pd_exp(double x);

/* Internal, shared with pow.c: scale * (1 + tmp) when scale's exponent may be out of range
 * (hw: which fma, see pd_libm_bits.h). */
#include <stdint.h>
double pd_exp_scale_special(int hw, double tmp, uint64_t sbits, uint64_t ki);

#endif
