/* SPDX-License-Identifier: MIT */
/* The builds of each function (variant.h): one name per build and function. */
#ifndef PD_LIBM_INTERNAL_H
#define PD_LIBM_INTERNAL_H
#include <stdint.h>

#define PD_LIBM_DECLARE(P)                                                                   \
    double P##exp(double x);                                                                 \
    double P##log(double x);                                                                 \
    double P##pow(double x, double y);                                                       \
    double P##log1p(double x);                                                               \
    double P##sin(double x);                                                                 \
    double P##cos(double x);
PD_LIBM_DECLARE(pd_libm_fma_)
PD_LIBM_DECLARE(pd_libm_emu_)
PD_LIBM_DECLARE(pd_libm_c99_)
#endif
