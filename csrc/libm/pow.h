/* pow: exp(y log x) with an extra-precise log */
#ifndef PD_LIBM_POW_H
#define PD_LIBM_POW_H

/* x^y with the bits of glibc's FMA build. */
double pd_pow(double x, double y);

#endif
