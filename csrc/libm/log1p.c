/* SPDX-License-Identifier: MIT */
/* log1p (docs/numerics-elementary.md §5): 1 + x = 2^k (1 + f), log(1 + f) from s = f/(2 + f). */
#include "variant.h"
#include "libm_internal.h"
#include "tables/tables.h"

#define LC(j) pd_C_log1p[(j) - 1] /* C1..C7 */
#define PD_TWO_THIRDS 0x1.5555555555555p-1

/* §5.1 S1: split u = 1 + x (x > -1 here) into k, f and the correction c of its rounding. */
PD_STEP double PD_V(log1p_s1)(double x, int32_t h, int *k, double *c, uint32_t *m) {
    double u;
    if (h < 0x43400000) {
        u = 1.0 + x;
        *m = pd_hw(u);
        *k = (int)(*m >> 20) - 1023;
        *c = *k > 0 ? 1.0 - (u - x) : x - (u - 1.0);
        *c = *c / u;
    } else {
        u = x;
        *m = pd_hw(u);
        *k = (int)(*m >> 20) - 1023;
        *c = 0.0;
    }
    *m &= 0x000fffff;
    const uint64_t low = pd_bits(u) & 0xffffffffull;
    if (*m < 0x6a09e) {
        u = pd_dbl(((uint64_t)(*m | 0x3ff00000) << 32) | low);
    } else {
        *k += 1;
        u = pd_dbl(((uint64_t)(*m | 0x3fe00000) << 32) | low);
        *m = (0x00100000 - *m) >> 2;
    }
    return u - 1.0;
}

/* §5.1 D1-D3: log(1 + f) + k ln2 + c. */
PD_STEP double PD_V(log1p_d)(double f, int k, double c, uint32_t m) {
    const double hf = (0.5 * f) * f; /* D1 */
    const double kappa = (double)k;
    if (m == 0) { /* D2: |f| < 2^-20 */
        if (f == 0.0) return k == 0 ? 0.0 : FMA(kappa, pd_log1p_ln2_hi, FMA(kappa, pd_log1p_ln2_lo, c));
        const double psi = FMA(-f, PD_TWO_THIRDS, 1.0) * hf;
        if (k == 0) return f - psi;
        return FMA(kappa, pd_log1p_ln2_hi, -((psi - FMA(kappa, pd_log1p_ln2_lo, c)) - f));
    }
    const double s = f / (2.0 + f); /* D3 */
    const double z = s * s, z2 = z * z, z4 = z2 * z2, z6 = z2 * z4;
    const double psi = FMA(z6, FMA(z, LC(7), LC(6)),
                           FMA(z4, FMA(z, LC(5), LC(4)), FMA(z, LC(1), z2 * FMA(z, LC(3), LC(2)))));
    const double v = s * (hf + psi); /* one product, not fused with what follows */
    if (k == 0) return f - (hf - v);
    return FMA(kappa, pd_log1p_ln2_hi, -((hf - (v + FMA(kappa, pd_log1p_ln2_lo, c))) - f));
}

PD_VATTR double PD_V(log1p)(double x) {
    const int32_t h = (int32_t)pd_hw(x);
    const uint32_t a = (uint32_t)h & 0x7fffffff;
    if (h < 0x3fda827a) { /* §5.1, in the order of the table */
        if (a >= 0x3ff00000) {
            if (x == -1.0) return -pd_inf();
            return pd_is_nan(x) ? pd_quiet(x) : pd_nan_star(); /* §10 */
        }
        if (a < 0x3c900000) return x;
        if (a < 0x3e200000) return FMA(-(x * x), 0.5, x);
        if (h > 0 || h <= (int32_t)0xbfd2bec3) return PD_V(log1p_d)(x, 0, 0.0, 1);
    }
    if (h >= 0x7ff00000) return pd_is_nan(x) ? pd_quiet(x) : x; /* +inf, or quiet(x) */
    int k;
    double c;
    uint32_t m;
    const double f = PD_V(log1p_s1)(x, h, &k, &c, &m);
    return PD_V(log1p_d)(f, k, c, m);
}

#undef LC
#undef PD_TWO_THIRDS
