/* SPDX-License-Identifier: MIT */
/* The splitting a = 2^k·z of log and pow (docs/numerics-elementary.md §3.2, §4.2). */
#ifndef PD_LIBM_LOG_SPLIT_H
#define PD_LIBM_LOG_SPLIT_H
#include "variant.h"

/* §3.2, §4.2: z in [c0, 2c0) and k for a positive finite a (subnormals scaled by 2^52 first). */
PD_STEP double pd_log_split(double a, double two_c0, int *k) {
    int bias = 0;
    if (a < 0x1p-1022) {
        a = a * 0x1p52;
        bias = 52;
    }
    const uint64_t u = pd_bits(a);
    int e = (int)(u >> 52) - 1023;
    double z = pd_dbl((u & 0x000fffffffffffffull) | 0x3ff0000000000000ull); /* in [1, 2) */
    if (z >= two_c0) {
        z = z * 0.5;
        e += 1;
    }
    *k = e - bias;
    return z;
}
#endif
