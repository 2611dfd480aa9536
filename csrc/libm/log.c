/* SPDX-License-Identifier: MIT */
/* log (docs/numerics-elementary.md §3). */
#include "variant.h"
#include "libm_internal.h"
#include "tables/tables.h"

#define A(j) pd_A_log[j]
#define B(j) pd_B_log[j]

/* §3.3 N1-N3: log x near 1 from a degree-12 polynomial in r = x - 1. */
PD_STEP double PD_V(log_near1)(double x) {
    const double r = x - 1.0; /* N1 (exact) */
    const double r2 = r * r, r3 = r * r2;
    const double p1 = FMA(r2, B(3), FMA(r, B(2), B(1))); /* N2 */
    const double p2 = FMA(r2, B(6), FMA(r, B(5), B(4)));
    const double p3 = FMA(r3, B(10), FMA(r2, B(9), FMA(r, B(8), B(7))));
    const double p = FMA(FMA(p3, r3, p2), r3, p1);
    const double rh = FMA(-r, 0x1p27, FMA(r, 0x1p27, r)); /* N3: r + B0 r^2 as hi + lo */
    const double rl = r - rh;
    const double w = rh * rh;
    const double hi = FMA(w, B(0), r);
    double lo = FMA(w, B(0), r - hi);
    lo = FMA(B(0) * rl, rh + r, lo);
    return FMA(p, r3, lo) + hi;
}

/* §3.2 L1-L4 for the pattern u of a positive normal (or rescaled subnormal) x. */
PD_STEP double PD_V(log_main)(uint64_t u) {
    const uint64_t v = u - 0x3fe6000000000000ull; /* L1 */
    const uint64_t i = (v >> 45) & 127;
    const double kappa = (double)((int64_t)v >> 52);
    const double z = pd_dbl(u - (v & 0xfff0000000000000ull));
    const double r = FMA(z, pd_T_log[i].rc, -1.0); /* L2 */
    const double w = FMA(kappa, pd_log_ln2_hi, pd_T_log[i].lc); /* L3 */
    const double hi = w + r;
    const double lo = FMA(kappa, pd_log_ln2_lo, (w - hi) + r);
    const double r2 = r * r; /* L4 */
    const double q = FMA(r2, FMA(r, A(4), A(3)), FMA(r, A(2), A(1)));
    return FMA(r * r2, q, FMA(r2, A(0), lo)) + hi;
}

PD_VATTR double PD_V(log)(double x) {
    uint64_t u = pd_bits(x);
    if (u - 0x3fee000000000000ull < 0x3ff1090000000000ull - 0x3fee000000000000ull) { /* §3.1 */
        if (u == 0x3ff0000000000000ull) return 0.0;
        return PD_V(log_near1)(x);
    }
    if ((u << 1) == 0) return -pd_inf();
    if (u == 0x7ff0000000000000ull) return x;
    if (u >= 0x8000000000000000ull || pd_efield(x) == 0x7ff)
        return pd_is_nan(x) ? pd_quiet(x) : pd_nan_star(); /* §10 */
    if (u < 0x0010000000000000ull) u = pd_bits(x * 0x1p52) - (52ull << 52); /* subnormal */
    return PD_V(log_main)(u);
}

#undef A
#undef B
