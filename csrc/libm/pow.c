/* SPDX-License-Identifier: MIT */
/* pow (docs/numerics-elementary.md §4): exp(y log x) with log x to about 68 bits. */
#include "exp_steps.h"
#include "libm_internal.h"
#include "pow_rules.h"

#define PA(j) pd_A_pow[j]

/* §4.3 P1-P2: log x = L + L_t for the pattern ux of a positive normal x. */
PD_STEP double PD_V(pow_log)(uint64_t ux, double *Lt) {
    const uint64_t v = ux - 0x3fe6955500000000ull; /* P1 */
    const uint64_t i = (v >> 45) & 127;
    const double kappa = (double)((int64_t)v >> 52);
    const double z = pd_dbl(ux - (v & 0xfff0000000000000ull));
    const pd_pow_triple *T = &pd_T_pow[i];
    const double r = FMA(z, T->rc, -1.0); /* P2 */
    const double w1 = FMA(kappa, pd_log_ln2_hi, T->lc);
    const double w2 = w1 + r;
    const double e1 = FMA(kappa, pd_log_ln2_lo, T->lt);
    const double e2 = (w1 - w2) + r;
    const double a1 = PA(0) * r, a2 = r * a1, a3 = r * a2;
    const double hi = w2 + a2;
    const double e3 = FMA(a1, r, -a2);
    const double e4 = (w2 - hi) + a2;
    const double q = FMA(a2, FMA(a2, FMA(r, PA(6), PA(5)), FMA(r, PA(4), PA(3))), FMA(r, PA(2), PA(1)));
    const double lo = FMA(a3, q, e1 + e2 + e3 + e4);
    const double L = hi + lo;
    *Lt = (hi - L) + lo;
    return L;
}

/* §4.4 P3-P4: exp(y (L + L_t)), negated when neg. */
PD_STEP double PD_V(pow_exp)(double y, double L, double Lt, int neg) {
    const double eta = y * L; /* P3 */
    const double rho = FMA(y, Lt, FMA(y, L, -eta));
    const uint64_t E = pd_efield(eta); /* P4 */
    if (E < PD_EXP_E_TINY) {
        const double w = 1.0 + eta;
        return neg ? -w : w;
    }
    if (E >= PD_EXP_E_HUGE) {
        const double w = eta < 0.0 ? 0.0 : pd_inf();
        return neg ? -w : w;
    }
    uint64_t K;
    const double r = PD_V(exp_e1)(eta, &K) + rho;
    double t;
    const uint64_t sigma = PD_V(exp_e2)(K, neg ? (1ull << 18) : 0, &t);
    const double tau = PD_V(exp_e3)(r, t);
    if (E == PD_EXP_E_WIDE) return PD_V(exp_e5)(K, sigma, tau);
    return PD_V(exp_e4)(sigma, tau);
}

PD_VATTR double PD_V(pow)(double x, double y) {
    uint64_t ux = pd_bits(x);
    const uint64_t uy = pd_bits(y);
    uint64_t tx = ux >> 52;
    const uint64_t ty = uy >> 52;
    int neg = 0;
    if (tx - 1 >= 0x7fe || (ty & 0x7ff) - 0x3be >= 0x80) { /* §4.2 the special branch */
        if (pd_pow_edge(uy)) return pd_pow_edge_y(x, y);     /* rule 1 */
        if (pd_pow_edge(ux)) return pd_pow_edge_x(x, y);     /* rule 2 */
        if (ux >> 63) {                                      /* rule 3 */
            const int parity = pd_pow_parity(uy);
            if (parity == PD_POW_NOT_INTEGER) return pd_nan_star();
            neg = parity == PD_POW_ODD;
            ux &= 0x7fffffffffffffffull;
            tx &= 0x7ff;
        }
        if ((ty & 0x7ff) < 0x3be || (ty & 0x7ff) >= 0x43e) return pd_pow_extreme_y(ux, y); /* rule 4 */
        if (tx == 0) ux = (pd_bits(x * 0x1p52) & 0x7fffffffffffffffull) - (52ull << 52); /* rule 5 */
    }
    double Lt;
    const double L = PD_V(pow_log)(ux, &Lt);
    return PD_V(pow_exp)(y, L, Lt, neg);
}

#undef PA
