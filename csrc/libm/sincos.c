/* SPDX-License-Identifier: MIT */
/* sin and cos (docs/numerics-elementary.md §6): Ziv's table method on x = n pi/2 + (a + da). */
#include "variant.h"
#include "libm_internal.h"
#include "reduce_large.h"
#include "tables/tables.h"

#define PD_S45 0x1.8p45
#define PD_SMALL 0x1.020c49ba5e354p-3 /* the double nearest 0.126 */
#define H0 pd_half_pi[0]
#define H1 pd_half_pi[1]

/* §6.2 LOOK(b): y = b - j/128 and the entry T_sc[j]. */
PD_STEP const double *PD_V(sc_look)(double b, double *y) {
    const double w = PD_S45 + b;
    const uint32_t j = (uint32_t)pd_bits(w);
    *y = b - (w - PD_S45);
    return &pd_T_sc[4 * (size_t)j];
}

/* §6.3 SIN(x, dx): sin(x + dx). */
PD_STEP double PD_V(sc_sin)(double x, double dx) {
    if (fabs(x) < PD_SMALL) {
        const double x2 = x * x;
        const double *P = pd_P_sin;
        const double p = FMA(FMA(FMA(FMA(P[4], x2, P[3]), x2, P[2]), x2, P[1]), x2, P[0]);
        return x + FMA(FMA(p, x, -(0.5 * dx)), x2, dx);
    }
    if (x <= 0.0) dx = -dx;
    double y;
    const double *T = PD_V(sc_look)(fabs(x), &y);
    const double sh = T[0], sl = T[1], ch = T[2], cl = T[3];
    const double y2 = y * y;
    const double ps = y + FMA(y * y2, FMA(y2, pd_S_sin[1], pd_S_sin[0]), dx);
    const double pc = FMA(y, dx, y2 * FMA(y2, FMA(y2, pd_S_cos[2], pd_S_cos[1]), pd_S_cos[0]));
    const double delta = FMA(ps, ch, FMA(-pc, sh, FMA(ps, cl, sl)));
    return copysign(sh + delta, x);
}

/* §6.3 COS(x, dx): cos(x + dx). */
PD_STEP double PD_V(sc_cos)(double x, double dx) {
    if (x < 0.0) dx = -dx;
    double y;
    const double *T = PD_V(sc_look)(fabs(x), &y);
    const double sh = T[0], sl = T[1], ch = T[2], cl = T[3];
    y = y + dx;
    const double y2 = y * y;
    const double ps = FMA(y * y2, FMA(y2, pd_S_sin[1], pd_S_sin[0]), y);
    const double pc = y2 * FMA(y2, FMA(y2, pd_S_cos[2], pd_S_cos[1]), pd_S_cos[0]);
    const double delta = FMA(-sh, ps, FMA(-pc, ch, FMA(-ps, sl, cl)));
    return ch + delta;
}

/* §6.1 QUAD(m). */
PD_STEP double PD_V(sc_quad)(int m, double a, double da) {
    const double v = (m & 1) ? PD_V(sc_cos)(a, da) : PD_V(sc_sin)(a, da);
    return (m & 2) ? -v : v;
}

/* §6.4 R1-R2: x = n pi/2 + (a + da) for |x| < 105414336. */
PD_STEP int PD_V(sc_reduce_medium)(double x, double *a, double *da) {
    const double t = FMA(x, pd_two_over_pi, PD_S52); /* R1 */
    const double nd = t - PD_S52;
    const int n = (int)(pd_bits(t) & 3);
    const double *M = pd_half_pi_4; /* R2 */
    const double y = FMA(-nd, M[1], FMA(-nd, M[0], x));
    const double w = FMA(-nd, M[2], y);
    double d = FMA(-nd, M[2], y - w);
    *a = FMA(-nd, M[3], w);
    *da = d + FMA(-nd, M[3], w - *a);
    return n;
}

/* §6.1 the rows from |x| >= 0x1.368fdp1 on: QUAD(n + shift) after a reduction; inf, NaN. */
PD_STEP double PD_V(sc_far)(double x, uint32_t a, int shift) {
    double r, dr;
    int n;
    if (a < 0x419921fb) n = PD_V(sc_reduce_medium)(x, &r, &dr);
    else if (a < 0x7ff00000) n = pd_libm_reduce_large(x, &r, &dr);
    else return pd_is_nan(x) ? pd_quiet(x) : pd_nan_star(); /* §10 */
    return PD_V(sc_quad)(n + shift, r, dr);
}

PD_VATTR double PD_V(sin)(double x) {
    const uint32_t a = pd_hw(x) & 0x7fffffff;
    if (a < 0x3e500000) return x;
    if (a < 0x3feb6000) return PD_V(sc_sin)(x, 0.0);
    if (a < 0x400368fd) return copysign(PD_V(sc_cos)(H0 - fabs(x), H1), x);
    return PD_V(sc_far)(x, a, 0);
}

PD_VATTR double PD_V(cos)(double x) {
    const uint32_t a = pd_hw(x) & 0x7fffffff;
    if (a < 0x3e400000) return 1.0;
    if (a < 0x3feb6000) return PD_V(sc_cos)(x, 0.0);
    if (a < 0x400368fd) {
        const double y = H0 - fabs(x);
        const double a1 = y + H1;
        const double da = (y - a1) + H1;
        return PD_V(sc_sin)(a1, da);
    }
    return PD_V(sc_far)(x, a, 1);
}

#undef PD_S45
#undef PD_SMALL
#undef H0
#undef H1
