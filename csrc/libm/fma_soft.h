/* a*b + c rounded once, emulated, for the builds that run without FMA instructions (Boldo &
 * Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms using rounding to
 * odd", IEEE TC 2008): a*b = uh + ul exactly (Veltkamp split, Dekker product), c + uh = th + tl
 * exactly (TwoSum), v = tl + ul rounded to odd, then th + v rounded to nearest, which is a*b + c
 * rounded once. Inline, so constant operands' splits fold and independent calls overlap; glibc's
 * own emulation switches rounding modes and costs hundreds of nanoseconds. Internal to csrc/libm. */
#ifndef PD_LIBM_FMA_SOFT_H
#define PD_LIBM_FMA_SOFT_H
#include <math.h>
#include <stdint.h>
#include "pd_float_bits.h"

static inline double pd_sum_error(double a, double b, double s) { /* a + b - s exactly, s = a + b rounded */
    const double bb = s - a;
    return (a - (s - bb)) + (b - bb);
}

static inline int pd_exponent_of(double x) { return (int)((pd_bits(x) >> 52) & 0x7ff) - 1023; }

/* The emulation is exact when no split or partial product overflows or leaves the normal range:
 * a and b normal, below 2^995 (the split multiplies by 2^27 + 1), 2^-960 <= |a*b| < 2^961 (the
 * lowest partial product, ~2^-106 |a*b|, then stays a multiple of 2^-1074), |c| < 2^1020. */
static inline int pd_fma_soft_exact(double a, double b, double c) {
    const int ea = pd_exponent_of(a), eb = pd_exponent_of(b), ec = pd_exponent_of(c);
    return ea > -1023 && eb > -1023 && ea < 995 && eb < 995 && ea + eb > -960 && ea + eb < 960 &&
           ec < 1020;
}

/* Exact like C99 fma() for every argument; without touching the floating-point environment
 * wherever the partial products can neither overflow nor underflow (all the arguments the
 * elementary functions pass), the C library's fma elsewhere. */
static inline double pd_fma_soft(double a, double b, double c) {
    if (a == 0.0 || b == 0.0) return a * b + c; /* the product is an exact zero */
    if (!pd_fma_soft_exact(a, b, c)) return fma(a, b, c);
    const double split = 134217729.0; /* 2^27 + 1 */
    const double ta = a * split, tb = b * split;
    const double ah = ta - (ta - a), al = a - ah, bh = tb - (tb - b), bl = b - bh;
    const double uh = a * b;
    const double ul = (((ah * bh - uh) + ah * bl) + al * bh) + al * bl;
    const double th = c + uh;
    const double tl = pd_sum_error(c, uh, th);
    const double v = tl + ul;
    const double e = pd_sum_error(tl, ul, v);
    /* round to odd: if inexact and even, the odd neighbour toward e (branch-free: half the
     * results are even, so a branch would be mispredicted half the time) */
    const uint64_t bits = pd_bits(v);
    const uint64_t adjust = (uint64_t)((e != 0.0) & ((bits & 1) == 0));
    const uint64_t away = (uint64_t)((e > 0.0) == (v > 0.0)); /* 1: away from zero, 0: toward */
    return th + pd_from_bits(bits + adjust * (2 * away - 1));
}

#endif
