/* SPDX-License-Identifier: MIT */
/* The helper predicates of pow's special cases (docs/numerics-elementary.md §4.1). */
#ifndef PD_LIBM_POW_RULES_H
#define PD_LIBM_POW_RULES_H
#include "bits.h"

#define PD_POW_NOT_INTEGER 0
#define PD_POW_ODD 1
#define PD_POW_EVEN 2
#define PD_ONE_BITS 0x3ff0000000000000ull

/* edge(v): v is +-0, +-inf or NaN. */
static inline int pd_pow_edge(uint64_t uv) { return (uv << 1) - 1 >= 0xffdfffffffffffffull; }

/* parity(y) for a finite nonzero y. */
static inline int pd_pow_parity(uint64_t uy) {
    const uint64_t E = (uy >> 52) & 0x7ff;
    if (E < 0x3ff) return PD_POW_NOT_INTEGER;
    if (E > 0x433) return PD_POW_EVEN;
    const uint64_t m = 0x433 - E;
    if (uy & ((1ull << m) - 1)) return PD_POW_NOT_INTEGER;
    return (uy >> m) & 1 ? PD_POW_ODD : PD_POW_EVEN;
}

/* signalling(v): a NaN with bit 51 clear. */
static inline int pd_pow_signalling(double v) {
    return pd_is_nan(v) && (pd_bits(v) & 0x0008000000000000ull) == 0;
}

/* §4.2 rule 1: y is +-0, +-inf or NaN. */
static inline double pd_pow_edge_y(double x, double y) {
    const uint64_t ux = pd_bits(x), uy = pd_bits(y);
    if ((uy << 1) == 0) return pd_pow_signalling(x) ? pd_quiet(x) : 1.0;
    if (ux == PD_ONE_BITS) return pd_pow_signalling(y) ? pd_quiet(y) : 1.0;
    if (pd_is_nan(x)) return pd_quiet(x); /* §10: x's NaN when both are NaN */
    if (pd_is_nan(y)) return pd_quiet(y);
    if ((ux << 1) == (PD_ONE_BITS << 1)) return 1.0;
    if (((ux << 1) < (PD_ONE_BITS << 1)) == ((uy >> 63) == 0)) return 0.0;
    return pd_inf();
}

/* §4.2 rule 2: x is +-0, +-inf or NaN, y finite nonzero. */
static inline double pd_pow_edge_x(double x, double y) {
    const uint64_t ux = pd_bits(x), uy = pd_bits(y);
    const int flip = (ux >> 63) && pd_pow_parity(uy) == PD_POW_ODD;
    if (pd_is_nan(x)) /* x*x is quiet(x); negated when the sign is set and y odd (§10) */
        return flip ? pd_dbl(pd_bits(pd_quiet(x)) & 0x7fffffffffffffffull) : pd_quiet(x);
    double x2 = x * x;
    if (flip) x2 = -x2;
    return y < 0.0 ? 1.0 / x2 : x2;
}

/* §4.2 rule 4: |y| < 2^-65 or |y| >= 2^63 (x positive, finite, nonzero). */
static inline double pd_pow_extreme_y(uint64_t ux, double y) {
    const uint64_t ty = pd_bits(y) >> 52;
    if (ux == PD_ONE_BITS) return 1.0;
    if ((ty & 0x7ff) < 0x3be) return ux > PD_ONE_BITS ? 1.0 + y : 1.0 - y;
    return ((ux > PD_ONE_BITS) == (ty < 0x800)) ? pd_inf() : 0.0;
}
#endif
