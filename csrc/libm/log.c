/* SPDX-License-Identifier: MIT */
/* log (docs/numerics-elementary.md §3): the classes of §3.1, then §3.2 or §3.3. */
#include "libm_internal.h"
#include "log_split.h"
#include "tables/tables.h"

#define PD_LOG_NEAR_LO 0x3fee000000000000ull /* 0.9375 */
#define PD_LOG_NEAR_HI 0x3ff1090000000000ull /* 0x1.109p0 */

/* §3.2: away from 1. */
PD_STEP double pd_log_far(double x) {
    int k;
    const double z = pd_log_split(x, 0x1.6p0, &k);
    const int i = z < 1.0 ? (int)(256.0 * (z - 0x1.6p-1)) : 80 + (int)(128.0 * (z - 1.0));
    const double kd = (double)k;
    const double r = FMA(z, pd_T_log[i].rc, -1.0);
    const double k0 = FMA(kd, pd_log_ln2_hi, pd_T_log[i].lc);
    const double hi = k0 + r;
    const double lo = FMA(kd, pd_log_ln2_lo, (k0 - hi) + r);
    const double s = r * r;
    const double *A = pd_A_log;
    const double q = FMA(s, FMA(r, A[4], A[3]), FMA(r, A[2], A[1]));
    return FMA(r * s, q, FMA(s, A[0], lo)) + hi;
}

/* §3.3: near 1, r = x - 1 exact. */
PD_STEP double pd_log_near1(double x) {
    const double *B = pd_B_log;
    const double r = x - 1.0;
    const double s = r * r;
    const double t = r * s;
    const double p1 = FMA(s, B[3], FMA(r, B[2], B[1]));
    const double p2 = FMA(s, B[6], FMA(r, B[5], B[4]));
    const double p3 = FMA(t, B[10], FMA(s, B[9], FMA(r, B[8], B[7])));
    const double P = FMA(FMA(p3, t, p2), t, p1);
    const double rh = FMA(-r, 0x1p27, FMA(r, 0x1p27, r)); /* about 26 bits: rh·rh exact */
    const double rl = r - rh;
    const double v = rh * rh;
    const double hi = FMA(v, B[0], r);
    double lo = FMA(v, B[0], r - hi);
    lo = FMA(B[0] * rl, rh + r, lo); /* B0·(r² - rh²) */
    return FMA(P, t, lo) + hi;
}

PD_VATTR double PD_V(log)(double x) {
    const uint64_t u = pd_bits(x);
    if (u - PD_LOG_NEAR_LO < PD_LOG_NEAR_HI - PD_LOG_NEAR_LO)             /* §3.1 near 1 */
        return u == 0x3ff0000000000000ull ? 0.0 : pd_log_near1(x);
    if (u - 1 < 0x7fefffffffffffffull) return pd_log_far(x);              /* positive finite */
    if ((u << 1) == 0) return -pd_inf();                                  /* ±0 */
    if ((u << 1) > 0xffe0000000000000ull) return pd_quiet(x);             /* NaN, §10 */
    if (u == 0x7ff0000000000000ull) return x;                             /* +inf */
    return pd_nan_star();                                                 /* x < 0, §10 */
}
