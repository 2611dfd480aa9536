/* sin and cos: the IBM accurate method */
#ifndef PD_LIBM_SINCOS_H
#define PD_LIBM_SINCOS_H

/* sine and cosine (radians) with the bits of glibc's FMA build. */
double pd_sin(double x);
double pd_cos(double x);

#endif
