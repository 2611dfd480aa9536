/* SPDX-License-Identifier: MIT */
/* sin and cos (docs/numerics-elementary.md §6), built once per build as variant.h explains. */
#include "variant.h"
#include "libm_internal.h"
#include "tables/tables.h"
#include "reduce_large.h"

#define SC_SMALL 0x1.020c49ba5e354p-3 /* §6: round(0.126), the short polynomial of s below it */
#define SC_A1 0x1.b6p-1              /* §6: 109.5/128, the end of the table */
#define SC_A2 0x1.368fdp1            /* §6.1: from here n * pi/2 is subtracted */
#define SC_A3 0x1.921fbp26           /* §6.1: from here the reduction of §6.5 */
#define SC_SIN_TINY 0x1p-26          /* §6.1: below it sin x = x */
#define SC_COS_TINY 0x1p-27          /* §6.1: below it cos x = 1 */

/* §6.2: the table row of j = rint(128 b) for 0 <= b < A1, and y = b - j/128 (exact). */
PD_STEP const double *sc_row(double b, double *y) {
    const double j = (128.0 * b + PD_S52) - PD_S52;
    *y = b - j * 0x1p-7;
    return pd_T_sc + 4 * (int)j;
}

/* §6.3: s(a, da) ~ sin(a + da), |a| < A1. */
PD_STEP double sc_s(double a, double da) {
    if ((a < 0.0 ? -a : a) < SC_SMALL) {
        const double a2 = a * a;
        const double *P = pd_P_sin;
        const double p = FMA(FMA(FMA(FMA(P[4], a2, P[3]), a2, P[2]), a2, P[1]), a2, P[0]);
        return a + FMA(FMA(p, a, -(da * 0.5)), a2, da);
    }
    const double sg = a < 0.0 ? -1.0 : 1.0; /* sin is odd: s(a, da) = -s(-a, -da) */
    a *= sg;
    da *= sg;
    double y;
    const double *row = sc_row(a, &y);
    const double sh = row[0], sl = row[1], ch = row[2], cl = row[3];
    const double y2 = y * y;
    const double ps = y + FMA(y * y2, FMA(y2, pd_S_sin[1], pd_S_sin[0]), da);
    const double pc = FMA(y, da, y2 * FMA(y2, FMA(y2, pd_S_cos[2], pd_S_cos[1]), pd_S_cos[0]));
    const double d = FMA(ps, ch, FMA(-pc, sh, FMA(ps, cl, sl)));
    return sg * (sh + d);
}

/* §6.3: c(a, da) ~ cos(a + da), |a| < A1. */
PD_STEP double sc_c(double a, double da) {
    if (a < 0.0) { /* cos is even: c(a, da) = c(-a, -da) */
        a = -a;
        da = -da;
    }
    double y;
    const double *row = sc_row(a, &y);
    const double sh = row[0], sl = row[1], ch = row[2], cl = row[3];
    const double t = y + da;
    const double t2 = t * t;
    const double ps = FMA(t * t2, FMA(t2, pd_S_sin[1], pd_S_sin[0]), t);
    const double pc = t2 * FMA(t2, FMA(t2, pd_S_cos[2], pd_S_cos[1]), pd_S_cos[0]);
    const double d = FMA(-sh, ps, FMA(-pc, ch, FMA(-ps, sl, cl)));
    return ch + d;
}

/* §6.4: n mod 4 and a + da for A2 <= |x| < A3. */
PD_STEP int sc_reduce_medium(double x, double *a, double *da) {
    const double Q = pd_two_over_pi;
    const double ph = x * Q;
    const double pl = FMA(x, Q, -ph); /* x * Q = ph + pl exactly, in every build */
    double n = (ph + PD_S52) - PD_S52;
    const double off = ph - n; /* exact; n = rint(x * Q) unless x * Q is past a half */
    if (off == 0.5 && pl > 0.0) n += 1.0;
    if (off == -0.5 && pl < 0.0) n -= 1.0;
    const double *M = pd_half_pi_4;
    const double d0 = x - n * M[0]; /* exact: n * M1 has at most 52 bits */
    const double r1 = FMA(-n, M[1], d0);
    const double r2 = FMA(-n, M[2], r1);
    const double e = FMA(-n, M[2], r1 - r2);
    *a = FMA(-n, M[3], r2);
    *da = e + FMA(-n, M[3], r2 - *a);
    return (int)((int64_t)n & 3);
}

/* §6.1 "by quadrant": sin x for n mod 4 is s or c of (a, da), negated from n = 2 on; cos x is
 * the row of n + 1. */
PD_STEP double sc_quadrant(int n, double a, double da) {
    const double r = (n & 1) ? sc_c(a, da) : sc_s(a, da);
    return (n & 2) ? -r : r;
}

/* §6.4, §6.5: sin x (shift 0) or cos x (shift 1) for A2 <= |x| < inf. */
PD_STEP double sc_reduced(double x, double ax, int shift) {
    double a, da;
    const int n = ax < SC_A3 ? sc_reduce_medium(x, &a, &da) : pd_reduce_large(x, &a, &da);
    return sc_quadrant(n + shift, a, da);
}

PD_VATTR double PD_V(sin)(double x) {
    const double ax = x < 0.0 ? -x : x;
    if (pd_is_nan(x)) return pd_quiet(x);     /* §10 */
    if (ax == pd_inf()) return pd_nan_star(); /* §10 */
    if (ax < SC_SIN_TINY) return x;           /* §6.1 */
    if (ax < SC_A1) return sc_s(x, 0.0);      /* §6.1 */
    if (ax < SC_A2) {                         /* §6.1: the unnormalised pair (H0 - |x|, H1) */
        const double r = sc_c(pd_half_pi[0] - ax, pd_half_pi[1]);
        return x > 0.0 ? r : -r;
    }
    return sc_reduced(x, ax, 0);
}

PD_VATTR double PD_V(cos)(double x) {
    const double ax = x < 0.0 ? -x : x;
    if (pd_is_nan(x)) return pd_quiet(x);     /* §10 */
    if (ax == pd_inf()) return pd_nan_star(); /* §10 */
    if (ax < SC_COS_TINY) return 1.0;         /* §6.1 */
    if (ax < SC_A1) return sc_c(x, 0.0);      /* §6.1 */
    if (ax < SC_A2) {                         /* §6.1: the normalised pair (a, da) */
        const double h = pd_half_pi[0] - ax;
        const double a = h + pd_half_pi[1];
        const double b = a - h; /* Knuth's two-sum: h + H1 = a + da exactly */
        const double da = (h - (a - b)) + (pd_half_pi[1] - b);
        return sc_s(a, da);
    }
    return sc_reduced(x, ax, 1);
}
