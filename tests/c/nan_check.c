/* SPDX-License-Identifier: MIT */
/* The NaN results of pd_exp, pd_log, pd_log1p, pd_sin, pd_cos and pd_pow against the rules of
 * docs/numerics-elementary.md §10, bit for bit, on whatever platform runs it (qemu-aarch64,
 * wine, musl: .ci/steps/30-cross.sh; the x86-64 emulated build through PYDEPTH_LIBM_FMA=0).
 * The expected bits come from the rules, not from any C library. Exit status 0 only if all
 * results follow them. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "libm/pd_libm.h"

#define NAN_STAR 0xfff8000000000000u /* the created NaN, §10 */
#define QUIET 0x0008000000000000u
#define SIGN 0x8000000000000000u
#define ONE 0x3ff0000000000000u
#define NOT_NAN 1u /* "no NaN" marker: bit pattern never expected as a NaN result */

static uint64_t bits(double a) { uint64_t u; memcpy(&u, &a, sizeof u); return u; }
static double dbl(uint64_t u) { double a; memcpy(&a, &u, sizeof a); return a; }
static int is_nan(uint64_t u) { return (u << 1) > 0xffe0000000000000u; }
static int signalling(uint64_t u) { return is_nan(u) && !(u & QUIET); }
static int is_finite(uint64_t u) { return ((u >> 52) & 0x7ff) != 0x7ff; }

/* whether finite y is an integer, and whether it is odd (exact for every double) */
static int integer_kind(double y, int *odd) {
    *odd = 0;
    const uint64_t u = bits(y), E = (u >> 52) & 0x7ff;
    if ((u << 1) == 0) return 1;
    if (E < 0x3ff) return 0;
    if (E > 0x433) return 1;
    const uint64_t m = 0x433 - E;
    if (u & ((1ull << m) - 1)) return 0;
    *odd = (int)((u >> m) & 1);
    return 1;
}

/* §10.1: the bits of pow(x, y) where the rules speak, NOT_NAN where the result is no NaN. */
static uint64_t pow_rule(uint64_t ux, uint64_t uy) {
    int odd;
    if ((uy << 1) == 0) return signalling(ux) ? ux | QUIET : ONE;
    if (ux == ONE) return signalling(uy) ? uy | QUIET : ONE;
    if (is_nan(ux)) {
        if (!is_nan(uy) && is_finite(uy) && integer_kind(dbl(uy), &odd) && odd) return (ux | QUIET) & ~SIGN;
        return ux | QUIET;
    }
    if (is_nan(uy)) return uy | QUIET;
    if ((ux & SIGN) && (ux << 1) != 0 && is_finite(ux) && is_finite(uy) && !integer_kind(dbl(uy), &odd))
        return NAN_STAR;
    return NOT_NAN;
}

static int bad = 0, checked = 0;

static void expect(const char *f, uint64_t ux, uint64_t uy, double got, uint64_t want) {
    const uint64_t g = bits(got);
    const int ok = want == NOT_NAN ? !is_nan(g) : g == want;
    checked++;
    if (!ok) {
        bad++;
        if (bad <= 10)
            printf("FAIL %s(%016" PRIx64 ", %016" PRIx64 ") = %016" PRIx64 ", rules: %016" PRIx64 "\n", f, ux,
                   uy, g, want);
    }
}

int main(void) {
    static const uint64_t nans[] = {0x7ff8000000000000u, 0xfff8000000000000u, 0x7ff8000000000123u,
                                    0xfff8000000000456u, 0x7ff0000000000789u, 0xfff0000000000abcu};
    static const double values[] = {0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 2.5, -2.5,
                                    0x1.fffffffffffffp1023, 0x1p-1074,
                                    -0x1p-1074, 1e300, -1e300, 0x1p70, -0x1p70, 0x1p-70, 0x1p53 - 1,
                                    -(0x1p53 - 1), 0x1p53, 1.0 + 0x1p-52, -(1.0 - 0x1p-53)};
    enum { NN = sizeof nans / sizeof nans[0], NV = sizeof values / sizeof values[0] };
    uint64_t args[NN + NV + 2];
    size_t na = 0;
    for (size_t i = 0; i < NN; i++) args[na++] = nans[i];
    for (size_t i = 0; i < NV; i++) args[na++] = bits(values[i]);
    args[na++] = 0x7ff0000000000000u; /* +inf */
    args[na++] = 0xfff0000000000000u; /* -inf */
    for (size_t i = 0; i < na; i++)
        for (size_t j = 0; j < na; j++)
            expect("pow", args[i], args[j], pd_pow(dbl(args[i]), dbl(args[j])), pow_rule(args[i], args[j]));
    for (size_t i = 0; i < NN; i++) { /* a NaN input comes out quiet */
        const uint64_t u = nans[i], q = u | QUIET;
        const double x = dbl(u);
        expect("exp", u, 0, pd_exp(x), q);
        expect("log", u, 0, pd_log(x), q);
        expect("log1p", u, 0, pd_log1p(x), q);
        expect("sin", u, 0, pd_sin(x), q);
        expect("cos", u, 0, pd_cos(x), q);
    }
    static const double log_creators[] = {-1.0, -1e-4, -0x1p-1074, -1e300};
    static const double log1p_creators[] = {-2.0, -1.0 - 0x1p-52, -1e300};
    for (size_t i = 0; i < sizeof log_creators / sizeof log_creators[0]; i++)
        expect("log", bits(log_creators[i]), 0, pd_log(log_creators[i]), NAN_STAR);
    for (size_t i = 0; i < sizeof log1p_creators / sizeof log1p_creators[0]; i++)
        expect("log1p", bits(log1p_creators[i]), 0, pd_log1p(log1p_creators[i]), NAN_STAR);
    const double inf = dbl(0x7ff0000000000000u);
    expect("log", bits(-inf), 0, pd_log(-inf), NAN_STAR);
    expect("log1p", bits(-inf), 0, pd_log1p(-inf), NAN_STAR);
    expect("sin", bits(inf), 0, pd_sin(inf), NAN_STAR);
    expect("sin", bits(-inf), 0, pd_sin(-inf), NAN_STAR);
    expect("cos", bits(inf), 0, pd_cos(inf), NAN_STAR);
    expect("cos", bits(-inf), 0, pd_cos(-inf), NAN_STAR);
    const char *fma = getenv("PYDEPTH_LIBM_FMA");
    printf("nan results: %d checked, %d break the rules of spec 10 (PYDEPTH_LIBM_FMA=%s)\n", checked, bad,
           fma ? fma : "unset");
    return bad ? 1 : 0;
}
