/* SPDX-License-Identifier: MIT */
/* The exponential shared by exp and pow (docs/numerics-elementary.md §2.2-§2.4): reduction,
 * polynomial, and the two results, general and near the ends of the range (wide scaling). */
#ifndef PD_LIBM_EXP_CORE_H
#define PD_LIBM_EXP_CORE_H
#include "tables/tables.h"
#include "variant.h"

#define PD_EXPC_SIGN 0x8000000000000000ull
#define PD_EXPC_SHIFT 128000 /* 1000 * 128: rescales g by 2^1000 without changing i (§2.3) */

/* §2.2: k = rint(Λ·η), one rounding of the exact product (the sum with 1.5·2^52 is an integer). */
PD_STEP double pd_expc_k(double eta) {
    return FMA(pd_exp_inv_ln2_n, eta, PD_S52) - PD_S52;
}

/* §2.2: r = fma(k, N_lo, fma(k, N_hi, η)), the two fused operations in this order. */
PD_STEP double pd_expc_r(double kd, double eta) {
    return FMA(kd, pd_exp_neg_ln2_n_lo, FMA(kd, pd_exp_neg_ln2_n_hi, eta));
}

/* §2.2: τ ≈ t_i + exp(r) - 1 with the document's roundings and fusions. */
PD_STEP double pd_expc_tau(double r, unsigned i) {
    const double s = r * r;
    const double ti = pd_dbl(pd_T_exp[2 * i]);
    const double c23 = FMA(r, pd_C_exp[1], pd_C_exp[0]);
    const double c45 = FMA(r, pd_C_exp[3], pd_C_exp[2]);
    return FMA(s * s, c45, FMA(s, c23, ti + r));
}

/* §2 Data: ±2^m·H_i from its encoding, k = 128m + i folded into the exponent; normal only. */
PD_STEP double pd_expc_g(int64_t k, unsigned i, uint64_t sign) {
    return pd_dbl((pd_T_exp[2 * i + 1] + ((uint64_t)k << 45)) | sign);
}

/* §2.2: fma(g, τ, g), g normal in this class. */
PD_STEP double pd_expc_general(int64_t k, double tau, uint64_t sign) {
    const double g = pd_expc_g(k, (unsigned)(k & 127), sign);
    return FMA(g, tau, g);
}

/* §2.3, k < 0: round(g + u) once at the final (possibly subnormal) precision, g and u scaled
 * by 2^1000. hi + lo is the exact sum; hi·2^-1000 rounds hi to the final grid, and only a tie
 * of that rounding (d exactly half the grid, 2^-75 here) can be decided differently by lo. */
PD_STEP double pd_expc_wide_low(int64_t k, double tau, uint64_t sign) {
    const double g = pd_expc_g(k + PD_EXPC_SHIFT, (unsigned)(k & 127), sign);
    const double u = g * tau;
    const double hi = g + u;
    const double lo = u - (hi - g); /* exact: |g| > |u| (Fast2Sum) */
    const double t = hi * 0x1p-1000;
    const double d = hi - t * 0x1p1000; /* exact: the rounding error of hi on the grid */
    if (lo != 0.0 && (d == 0x1p-75 || d == -0x1p-75) && (lo > 0.0) == (d > 0.0))
        return t + (d > 0.0 ? 0x1p-1074 : -0x1p-1074); /* past the midpoint: the other side */
    return t;
}

/* §2.3: the two cases by the sign of k; g rescaled by 2^∓1000 to stay normal. */
PD_STEP double pd_expc_wide(int64_t k, double tau, uint64_t sign) {
    if (k > 0) {
        const double g = pd_expc_g(k - PD_EXPC_SHIFT, (unsigned)(k & 127), sign);
        return FMA(g, tau, g) * 0x1p1000; /* one rounding; overflow gives ±inf on scaling */
    }
    return pd_expc_wide_low(k, tau, sign);
}

/* §2.2-§2.4: σ·exp(η + ρ) for 2^-54 <= |η| < 1024 (wide: |η| >= 512); r = r₀ ⊕ ρ for pow. */
PD_STEP double pd_expc_eval(double eta, double rho, int has_rho, int wide, uint64_t sign) {
    const double kd = pd_expc_k(eta);
    double r = pd_expc_r(kd, eta);
    if (has_rho) r = r + rho; /* §2.4: the correction by one more rounding */
    const int64_t k = (int64_t)kd;
    const double tau = pd_expc_tau(r, (unsigned)(k & 127));
    return wide ? pd_expc_wide(k, tau, sign) : pd_expc_general(k, tau, sign);
}
#endif
