/* SPDX-License-Identifier: MIT */
/* exp (docs/numerics-elementary.md §2). */
#include "exp_steps.h"
#include "libm_internal.h"

PD_VATTR double PD_V(exp)(double x) {
    const uint64_t E = pd_efield(x);
    if (E < PD_EXP_E_TINY) return 1.0 + x; /* §2.1 tiny */
    if (E >= PD_EXP_E_HUGE) {              /* §2.1 huge */
        if (E == 0x7ff) {
            if (pd_is_nan(x)) return pd_quiet(x); /* §10: quiet(x) */
            return x > 0.0 ? x : 0.0;             /* +inf, or exp(-inf) = +0 */
        }
        return x < 0.0 ? 0.0 : pd_inf();
    }
    uint64_t K;
    const double r = PD_V(exp_e1)(x, &K);
    double t;
    const uint64_t sigma = PD_V(exp_e2)(K, 0, &t);
    const double tau = PD_V(exp_e3)(r, t);
    if (E == PD_EXP_E_WIDE) return PD_V(exp_e5)(K, sigma, tau); /* §2.1 wide */
    return PD_V(exp_e4)(sigma, tau);
}
