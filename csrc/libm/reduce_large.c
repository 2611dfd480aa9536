/* SPDX-License-Identifier: MIT */
/* The large reduction of sin and cos, 105414336 <= |x| < inf (docs/numerics-elementary.md §6.5,
 * Payne and Hanek): no operation here is fused, so there is one build on every platform. */
#include <math.h>
#include "bits.h"
#include "reduce_large.h"
#include "tables/tables.h"

#define PD_S54 0x1.8p54
#define PD_V27 134217729.0 /* 2^27 + 1 */

/* §6.5 B2: h (2/pi) 2^600 as an integer part nu (mod 4) and a fraction m + mt. */
static double pd_reduce_b2(double h, double *m, double *mt) {
    const uint64_t E = pd_efield(h);
    const uint64_t q = E >= 450 ? (E - 450) / 24 : 0;
    double gamma = pd_dbl(pd_bits(0x1p576) - ((24 * q) << 52));
    double r[6];
    for (int j = 0; j < 6; j++) {
        r[j] = (h * pd_D_2pi[q + j]) * gamma;
        gamma = gamma * 0x1p-24;
    }
    double nu = 0.0, w;
    for (int j = 0; j < 3; j++) { /* whole parts of the three largest terms */
        w = (r[j] + PD_S52) - PD_S52;
        nu = nu + w;
        r[j] = r[j] - w;
    }
    double f = 0.0;
    for (int j = 5; j >= 0; j--) f = f + r[j];
    double e = (r[0] - f) + r[1] + r[2] + r[3] + r[4] + r[5];
    w = (f + PD_S52) - PD_S52;
    nu = nu + w;
    f = f - w;
    *m = f + e;
    *mt = (f - *m) + e;
    w = (nu + PD_S54) - PD_S54;
    return nu - w;
}

int pd_libm_reduce_large(double x, double *a, double *da) {
    const double xs = x * 0x1p-600; /* B1 */
    const double v = xs * PD_V27;
    const double x1 = v - (v - xs);
    const double x2 = xs - x1;
    double m1, mt1, m2, mt2; /* B2 */
    const double nu1 = pd_reduce_b2(x1, &m1, &mt1);
    const double nu2 = pd_reduce_b2(x2, &m2, &mt2);
    double nu = nu1 + nu2; /* B3 */
    double m = m1 + m2;
    const double mt = fabs(m1) > fabs(m2) ? (m1 - m) + m2 : (m2 - m) + m1;
    if (m > 0.5) {
        m = m - 1.0;
        nu = nu + 1.0;
    } else if (m < -0.5) {
        m = m + 1.0;
        nu = nu - 1.0;
    }
    const double g = m + ((mt + mt1) + mt2);
    const double gt = ((m - g) + mt) + (mt1 + mt2);
    const double vg = g * PD_V27; /* B4 */
    const double g1 = vg - (vg - g);
    const double g2 = g - g1;
    const double H0 = pd_half_pi[0], H1 = pd_half_pi[1];
    const double G1 = pd_half_pi_27[0], G2 = pd_half_pi_27[1];
    const double ph = g * H0;
    const double pt = ((((g1 * G1) - ph) + (g1 * G2)) + (g2 * G1)) + (((g2 * G2) + (g * H1)) + (gt * H0));
    *a = ph + pt;
    *da = (ph - *a) + pt;
    return (int)((int64_t)nu & 3);
}
