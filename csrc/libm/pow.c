/* SPDX-License-Identifier: MIT */
/* pow (docs/numerics-elementary.md §4): the special pairs of §4.1 by value comparisons, then
 * log|x| to about 68 bits (§4.2), the product (§4.3) and the shared exponential (§4.4). */
#include "exp_core.h"
#include "libm_internal.h"
#include "log_split.h"

#define PD_POW_NOT_INT 0
#define PD_POW_ODD 1
#define PD_POW_EVEN 2
#define PD_POW_ABS ~PD_EXPC_SIGN

/* Whether a finite y is an odd integer, an even integer or no integer (§4.1). */
PD_STEP int pd_pow_parity(double y) {
    const uint64_t u = pd_bits(y);
    const int e = (int)((u >> 52) & 0x7ff) - 1023;
    if (e >= 53) return PD_POW_EVEN;
    if (e < 0) return (u << 1) == 0 ? PD_POW_EVEN : PD_POW_NOT_INT;
    const uint64_t sig = (u & 0x000fffffffffffffull) | 0x0010000000000000ull;
    if (sig & ((1ull << (52 - e)) - 1)) return PD_POW_NOT_INT;
    return ((sig >> (52 - e)) & 1) ? PD_POW_ODD : PD_POW_EVEN;
}

/* §4.2: log a = L + L_t to about 68 bits, for a finite positive a. */
PD_STEP double pd_pow_log(double a, double *lt_out) {
    int k;
    const double c0 = 0x1.69555p-1;
    const double z = pd_log_split(a, 0x1.69555p0, &k);
    const double fi = z < 1.0 ? 256.0 * (z - c0) : 256.0 * (1.0 - c0) + 128.0 * (z - 1.0);
    const pd_pow_triple *T = &pd_T_pow[(int)fi]; /* fi is exact, so the cast is ⌊fi⌋ */
    const double *A = pd_A_pow;
    const double kd = (double)k;
    const double r = FMA(z, T->rc, -1.0);
    const double S = FMA(kd, pd_log_ln2_hi, T->lc);
    const double St = FMA(kd, pd_log_ln2_lo, T->lt);
    const double n1 = A[0] * r;
    const double n2 = r * n1;
    const double e2 = FMA(n1, r, -n2);
    const double h = S + r;
    const double e1 = (S - h) + r;
    const double hi = h + n2;
    const double e3 = (h - hi) + n2;
    const double q = FMA(n2, FMA(n2, FMA(r, A[6], A[5]), FMA(r, A[4], A[3])), FMA(r, A[2], A[1]));
    const double n3 = r * n2;
    const double lo = FMA(n3, q, ((St + e1) + e2) + e3);
    const double L = hi + lo;
    *lt_out = (hi - L) + lo;
    return L;
}

/* §4.3, §4.4: σ·exp(y·log a) for finite a > 0, 2^-65 <= |y| < 2^63. */
PD_STEP double pd_pow_general(double a, double y, uint64_t sign) {
    double Lt;
    const double L = pd_pow_log(a, &Lt);
    const double eta = y * L;
    const double rho = FMA(y, Lt, FMA(y, L, -eta));
    const uint64_t ae = pd_bits(eta) & PD_POW_ABS;
    if (ae < 0x3c90000000000000ull) return pd_dbl(pd_bits(1.0) | sign);        /* < 2^-54 */
    if (ae < 0x4080000000000000ull) return pd_expc_eval(eta, rho, 1, 0, sign); /* < 512 */
    if (ae < 0x4090000000000000ull) return pd_expc_eval(eta, rho, 1, 1, sign); /* < 1024 */
    return pd_dbl(pd_bits(eta > 0.0 ? pd_inf() : 0.0) | sign);
}

/* §4.1: x = ±0 or ±inf with y finite and nonzero; zero and infinity swap with the sign of y. */
PD_STEP double pd_pow_zero_inf(double x, double y, int parity) {
    const int big = (x != 0.0) == (y > 0.0); /* 0^-y and inf^+y are infinite */
    const uint64_t sign = parity == PD_POW_ODD ? pd_bits(x) & PD_EXPC_SIGN : 0;
    return pd_dbl(pd_bits(big ? pd_inf() : 0.0) | sign);
}

/* §4.1: x finite, nonzero, not +1; y finite, nonzero, not NaN. */
PD_STEP double pd_pow_finite(double x, double y, int parity) {
    if (x < 0.0 && parity == PD_POW_NOT_INT) return pd_nan_star();
    const double ay = pd_dbl(pd_bits(y) & PD_POW_ABS), ax = pd_dbl(pd_bits(x) & PD_POW_ABS);
    if (ay < 0x1p-65) return 1.0;
    if (ay >= 0x1p63) {
        if (ax == 1.0) return 1.0;
        return (ax > 1.0) == (y > 0.0) ? pd_inf() : 0.0;
    }
    const uint64_t sign = (x < 0.0 && parity == PD_POW_ODD) ? PD_EXPC_SIGN : 0;
    return pd_pow_general(ax, y, sign);
}

PD_VATTR double PD_V(pow)(double x, double y) {
    const uint64_t ux = pd_bits(x), uy = pd_bits(y);
    const int x_snan = pd_is_nan(x) && !(ux & 0x0008000000000000ull);
    if ((uy << 1) == 0) return x_snan ? pd_quiet(x) : 1.0; /* y = ±0 */
    if (ux == 0x3ff0000000000000ull) {                       /* x = +1 */
        const int y_snan = pd_is_nan(y) && !(uy & 0x0008000000000000ull);
        return y_snan ? pd_quiet(y) : 1.0;
    }
    if (pd_is_nan(x)) { /* §10: the sign cleared when y is an odd integer */
        const int odd = !pd_is_nan(y) && (uy << 1) != 0xffe0000000000000ull &&
                        pd_pow_parity(y) == PD_POW_ODD;
        return odd ? pd_dbl(pd_bits(pd_quiet(x)) & PD_POW_ABS) : pd_quiet(x);
    }
    if (pd_is_nan(y)) return pd_quiet(y);
    const double ax = pd_dbl(ux & PD_POW_ABS);
    if ((uy << 1) == 0xffe0000000000000ull) { /* y = ±inf */
        if (ax == 1.0) return 1.0;
        return (ax > 1.0) == (y > 0.0) ? pd_inf() : 0.0;
    }
    const int parity = pd_pow_parity(y);
    if (ax == 0.0 || ax == pd_inf()) return pd_pow_zero_inf(x, y, parity);
    return pd_pow_finite(x, y, parity);
}
