/* log: the table-driven natural logarithm */
#ifndef PD_LIBM_LOG_H
#define PD_LIBM_LOG_H

/* Natural logarithm with the bits of glibc's FMA build. */
double pd_log(double x);

#endif
