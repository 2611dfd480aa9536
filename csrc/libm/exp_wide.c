/* SPDX-License-Identifier: MIT */
/* exp's step E5: the result when 2^(k/128) itself is out of range (docs/numerics-elementary.md
 * §2.2), shared with pow (§4.4). */
#include "exp_steps.h"
#include "libm_internal.h"

PD_VATTR double PD_V(exp_e5)(uint64_t K, uint64_t sigma, double tau) {
    if ((K & 0x80000000u) == 0) { /* k >= 0: scale down by 2^1009, multiply back */
        const double g = pd_dbl(sigma - (1009ull << 52));
        return FMA(g, tau, g) * 0x1p1009;
    }
    /* k < 0: 2^1022 too large, the result is rounded once at its subnormal precision */
    const uint64_t sigma1 = sigma + (1022ull << 52);
    const double g = pd_dbl(sigma1);
    const double u = g * tau;
    double y = g + u; /* not fused */
    if (fabs(y) < 1.0) {
        const double o = y < 0.0 ? -1.0 : 1.0;
        double lo = (g - y) + u;
        const double hi = o + y;
        lo = ((o - hi) + y) + lo;
        y = (hi + lo) - o;
        if (y == 0.0) y = pd_dbl(sigma1 & 0x8000000000000000ull); /* zero with g's sign */
    }
    return 0x1p-1022 * y;
}
