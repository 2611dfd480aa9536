/* SPDX-License-Identifier: MIT */
/* The steps E1-E4 of exp (docs/numerics-elementary.md §2.2), shared by exp and pow (§4.4). */
#ifndef PD_LIBM_EXP_STEPS_H
#define PD_LIBM_EXP_STEPS_H
#include "variant.h"
#include "tables/tables.h"

/* §2.1: the classes by E = e(x). */
#define PD_EXP_E_TINY 0x3c9 /* below: |x| < 2^-54 */
#define PD_EXP_E_WIDE 0x408 /* 512 <= |x| < 1024 */
#define PD_EXP_E_HUGE 0x409 /* from here: |x| >= 1024, inf, NaN */

/* §2 E1: k = round(x 128/ln2) in the low bits of K, r = x - k ln2/128. */
PD_STEP double PD_V(exp_e1)(double x, uint64_t *K) {
    const double z = FMA(pd_exp_inv_ln2_n, x, PD_S52);
    const double kappa = z - PD_S52;
    *K = pd_bits(z);
    const double r = FMA(kappa, pd_exp_neg_ln2_n_hi, x);
    return FMA(kappa, pd_exp_neg_ln2_n_lo, r);
}

/* §2 E2: t_i and sigma = s_i + (K << 45); flip = 2^18 sets the sign of g (pow, §4.4). */
PD_STEP uint64_t PD_V(exp_e2)(uint64_t K, uint64_t flip, double *t) {
    const uint64_t i = K & 127;
    *t = pd_dbl(pd_T_exp[2 * i]);
    return pd_T_exp[2 * i + 1] + ((K + flip) << 45);
}

/* §2 E3: tau ~ t + exp(r) - 1. */
PD_STEP double PD_V(exp_e3)(double r, double t) {
    const double r2 = r * r;
    const double q1 = FMA(r, pd_C_exp[1], pd_C_exp[0]);
    const double q2 = FMA(r, pd_C_exp[3], pd_C_exp[2]);
    const double lead = t + r;
    return FMA(r2 * r2, q2, FMA(r2, q1, lead));
}

/* §2 E4: the result while 2^(k/128) is a normal double. */
PD_STEP double PD_V(exp_e4)(uint64_t sigma, double tau) {
    const double g = pd_dbl(sigma);
    return FMA(g, tau, g);
}
#endif
