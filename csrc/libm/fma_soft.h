/* SPDX-License-Identifier: MIT */
/* a*b + c rounded once without the FMA instruction (docs/numerics-elementary.md §7.2):
 * Dekker's exact product, Knuth's two-sum, Boldo & Melquiond's rounding to odd. */
#ifndef PD_LIBM_FMA_SOFT_H
#define PD_LIBM_FMA_SOFT_H
#include <math.h>
#include "bits.h"

/* §7.2 step 2: the partial products stay normal only inside these exponent bounds. */
static inline int pd_fma_soft_in_range(double a, double b, double c) {
    const int64_t ea = (int64_t)pd_efield(a), eb = (int64_t)pd_efield(b);
    const int64_t ec = (int64_t)pd_efield(c);
    if (ea == 0 || ea == 0x7ff || eb == 0 || eb == 0x7ff) return 0;
    const int64_t xa = ea - 1023, xb = eb - 1023;
    return xa < 995 && xb < 995 && -960 < xa + xb && xa + xb < 960 && ec - 1023 < 1020;
}

/* §7.2 step 3: Veltkamp's split a = hi + lo, each half of at most 26 bits. */
static inline void pd_fma_soft_split(double a, double *hi, double *lo) {
    const double va = a * 134217729.0; /* V = 2^27 + 1 */
    *hi = va - (va - a);
    *lo = a - *hi;
}

static inline double pd_fma_inline(double a, double b, double c) {
    if (a == 0.0 || b == 0.0) return a * b + c; /* §7.2 step 1: an exact zero product */
    if (!pd_fma_soft_in_range(a, b, c)) return fma(a, b, c); /* step 2: never hit by §2-§6 */
    double ah, al, bh, bl;
    pd_fma_soft_split(a, &ah, &al);
    pd_fma_soft_split(b, &bh, &bl);
    const double ph = a * b; /* step 3: a*b = ph + pl exactly (Dekker) */
    const double pl = ((((ah * bh) - ph) + (ah * bl)) + (al * bh)) + (al * bl);
    const double sh = c + ph; /* step 4: c + ph = sh + sl exactly (Knuth) */
    const double beta = sh - c;
    const double sl = (c - (sh - beta)) + (ph - beta);
    double m = sl + pl; /* step 5: sl + pl = m + eps exactly, then m rounded to odd */
    const double beta2 = m - sl;
    const double eps = (sl - (m - beta2)) + (pl - beta2);
    uint64_t um = pd_bits(m);
    if (eps != 0.0 && (um & 1) == 0) {
        um += ((eps > 0.0) == (m > 0.0)) ? 1 : (uint64_t)-1; /* away from zero if same sign */
        m = pd_dbl(um);
    }
    return sh + m; /* step 6: one rounding of a*b + c (Boldo & Melquiond) */
}
#endif
