/* SPDX-License-Identifier: MIT */
/* log1p (docs/numerics-elementary.md §5), built once per build as variant.h explains. */
#include "variant.h"
#include "libm_internal.h"
#include "tables/tables.h"

#define L1P_BETA_MINUS (-0x1.2bec4p-2) /* §5: 1 + beta- near sqrt(2)/2 */
#define L1P_BETA_PLUS 0x1.a827ap-2     /* §5: 1 + beta+ near sqrt(2) */
#define L1P_R 0x1.6a09ep0              /* §5: sqrt(2) cut after 20 fraction bits */
#define L1P_TWO_THIRDS 0x1.5555555555555p-1
#define L1P_TINY 0x1p-54  /* §5.1: below it the result is x */
#define L1P_SMALL 0x1p-29 /* §5.1: below it the two-term series */
#define L1P_TWO53 0x1p53  /* §5.2: from here 1 + x is not formed */

/* §5.2: u = 2^k * (1 + f) with R/2 <= 1 + f < R, u a positive normal double. */
PD_STEP double l1p_split(double u, double *f) {
    const uint64_t b = pd_bits(u);
    const int64_t e = (int64_t)((b >> 52) & 0x7ff) - 1023;
    const uint64_t frac = b & 0x000fffffffffffffull;
    const double m = pd_dbl(frac | 0x3ff0000000000000ull); /* u * 2^-e, in [1, 2) */
    if (m < L1P_R) {
        *f = m - 1.0;
        return (double)e;
    }
    *f = pd_dbl(frac | 0x3fe0000000000000ull) - 1.0; /* u * 2^-(e+1), in [R/2, 1) */
    return (double)(e + 1);
}

/* §5.3, the polynomial case; k = 0 for the near-zero class (and c = 0 there). */
PD_STEP double l1p_poly(double k, double f, double c) {
    const double phi = (0.5 * f) * f;
    const double s = f / (2.0 + f);
    const double z = s * s;
    const double z2 = z * z, z4 = z2 * z2;
    const double z6 = z2 * z4;
    const double *C = pd_C_log1p;
    const double psi = FMA(z6, FMA(z, C[6], C[5]),
                           FMA(z4, FMA(z, C[4], C[3]), FMA(z, C[0], z2 * FMA(z, C[2], C[1]))));
    const double v = s * (phi + psi); /* rounded, not fused with the subtraction (§5.3) */
    if (k == 0.0) return f - (phi - v);
    return FMA(k, pd_log1p_ln2_hi, f - (phi - (v + FMA(k, pd_log1p_ln2_lo, c))));
}

/* §5.2 then §5.3 for the far class: -1 < x < beta-, or beta+ <= x < inf. */
PD_STEP double l1p_far(double x) {
    double u = x, c = 0.0;
    if (x < L1P_TWO53) {
        u = 1.0 + x;
        const double b = u - 1.0; /* Knuth's two-sum: 1 + x = u + err exactly */
        const double err = (1.0 - (u - b)) + (x - b);
        c = err / u;
    }
    double f;
    const double k = l1p_split(u, &f);
    if (k != 0.0 && f >= -3.0 * 0x1p-21 && f < 0x1p-20) { /* §5.3: u near a power of two */
        const double psi = FMA(-f, L1P_TWO_THIRDS, 1.0) * ((0.5 * f) * f);
        return FMA(k, pd_log1p_ln2_hi, f - (psi - FMA(k, pd_log1p_ln2_lo, c)));
    }
    return l1p_poly(k, f, c);
}

PD_VATTR double PD_V(log1p)(double x) {
    const double ax = x < 0.0 ? -x : x;
    if (pd_is_nan(x)) return pd_quiet(x);                  /* §10 */
    if (x < -1.0) return pd_nan_star();                    /* §10, includes -inf */
    if (x == -1.0) return -pd_inf();                       /* §5.1 */
    if (ax < L1P_TINY) return x;                           /* §5.1 */
    if (ax < L1P_SMALL) return FMA(-(x * x), 0.5, x);      /* §5.1 */
    if (x >= L1P_BETA_MINUS && x < L1P_BETA_PLUS) return l1p_poly(0.0, x, 0.0); /* near zero */
    if (x == pd_inf()) return x;                           /* §5.1 */
    return l1p_far(x);                                     /* §5.2, §5.3 */
}
