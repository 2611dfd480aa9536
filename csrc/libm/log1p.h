/* log1p: the fdlibm-style log(1 + x) */
#ifndef PD_LIBM_LOG1P_H
#define PD_LIBM_LOG1P_H

/* log(1 + x) with the bits of glibc's FMA build. */
double pd_log1p(double x);

#endif
