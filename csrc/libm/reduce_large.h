/* SPDX-License-Identifier: MIT */
/* The reduction of large arguments of sin and cos, A3 <= |x| < inf (docs/numerics-elementary.md
 * §6.5): x = n * pi/2 + (a + da). No operation here is fused, so it is the same in every build;
 * include it after variant.h (PD_STEP). */
#ifndef PD_LIBM_REDUCE_LARGE_H
#define PD_LIBM_REDUCE_LARGE_H
#include <stdint.h>
#include "bits.h"
#include "tables/tables.h"

#define RL_V 134217729.0 /* §6.5: V = 2^27 + 1, Dekker's split */
#define RL_SCALE 600     /* §6.5: x is split as x * 2^-600, so X1 = 2^1024 stays finite */

/* 2^p as a double, for a p that keeps it normal. */
static inline double rl_pow2(int p) { return pd_dbl((uint64_t)(1023 + p) << 52); }

/* Nearest integer, ties to even, of |v| < 2^51: the sum with 1.5 * 2^52 rounds it (§1). */
static inline double rl_rint(double v) { return (v + PD_S52) - PD_S52; }

/* §6.5, one half X = xs * 2^600 (xs of at most 26 significant bits): the integer nu modulo 4
 * and the fraction m + mt of X * 2/pi. */
PD_STEP int rl_half(double xs, double *m, double *mt) {
    *m = 0.0;
    *mt = 0.0;
    if (xs == 0.0) return 0;
    const int e = (int)pd_efield(xs) - 1023 + RL_SCALE; /* E = floor(log2 |X|) */
    const int q = e >= 27 ? (e - 27) / 24 : 0;          /* first digit used */
    double r[6];
    for (int i = 0; i < 6; i++) /* exact: 26 bits times 24 bits, scaled while normal */
        r[i] = (xs * pd_D_2pi[q + i]) * rl_pow2(RL_SCALE - 24 * (q + i + 1));
    int64_t nu = 0;
    for (int i = 0; i < 3; i++) {
        const double w = rl_rint(r[i]);
        r[i] = r[i] - w;
        nu += (int64_t)w;
    }
    const double sig = ((((r[5] + r[4]) + r[3]) + r[2]) + r[1]) + r[0];
    const double tau = (((((r[0] - sig) + r[1]) + r[2]) + r[3]) + r[4]) + r[5];
    const double ws = rl_rint(sig);
    nu += (int64_t)ws;
    const double sp = sig - ws;
    *m = sp + tau;
    *mt = (sp - *m) + tau;
    return (int)(nu & 3);
}

/* §6.5: n mod 4 and a + da for A3 <= |x| < inf. */
PD_STEP int pd_reduce_large(double x, double *a, double *da) {
    const double xs = x * rl_pow2(-RL_SCALE);
    const double kap = xs * RL_V;
    const double h = kap - (kap - xs);
    double m1, mt1, m2, mt2;
    int nu = rl_half(h, &m1, &mt1) + rl_half(xs - h, &m2, &mt2);
    double m = m1 + m2;
    const double b = m - m1; /* Knuth's two-sum: m1 + m2 = m + eps exactly */
    const double eps = (m1 - (m - b)) + (m2 - b);
    if (m > 0.5) {
        m = m - 1.0;
        nu += 1;
    } else if (m < -0.5) {
        m = m + 1.0;
        nu -= 1;
    }
    const double g = m + ((eps + mt1) + mt2);
    const double gt = ((m - g) + eps) + (mt1 + mt2);
    const double kg = g * RL_V; /* Dekker's split of g */
    const double g1 = kg - (kg - g);
    const double g2 = g - g1;
    const double G1 = pd_half_pi_27[0], G2 = pd_half_pi_27[1];
    const double H0 = pd_half_pi[0], H1 = pd_half_pi[1];
    const double ph = g * H0;
    const double pt = ((((g1 * G1) - ph) + (g1 * G2)) + (g2 * G1)) + (((g2 * G2) + (g * H1)) + (gt * H0));
    *a = ph + pt;
    *da = (ph - *a) + pt;
    return nu & 3;
}
#endif
