/* SPDX-License-Identifier: MIT */
/* Bit patterns of doubles, and the NaN results of docs/numerics-elementary.md §10 built from
 * their bits so no hardware NaN rule is involved. */
#ifndef PD_LIBM_BITS_H
#define PD_LIBM_BITS_H
#include <stdint.h>
#include <string.h>

static inline uint64_t pd_bits(double a) {
    uint64_t u;
    memcpy(&u, &a, sizeof u);
    return u;
}

static inline double pd_dbl(uint64_t u) {
    double a;
    memcpy(&a, &u, sizeof a);
    return a;
}

/* The biased exponent field of |a|. */
static inline uint64_t pd_efield(double a) { return (pd_bits(a) >> 52) & 0x7ff; }

/* The high 32-bit word, with sign. */
static inline uint32_t pd_hw(double a) { return (uint32_t)(pd_bits(a) >> 32); }

static inline int pd_is_nan(double a) { return (pd_bits(a) << 1) > 0xffe0000000000000ull; }

/* quiet(v): bit 51 set, sign and payload kept (§1, §10). */
static inline double pd_quiet(double v) { return pd_dbl(pd_bits(v) | 0x0008000000000000ull); }

/* NaN*: the one NaN the functions create from non-NaN inputs, on every platform (§10). */
#define PD_NAN_STAR_BITS 0xfff8000000000000ull
static inline double pd_nan_star(void) { return pd_dbl(PD_NAN_STAR_BITS); }

static inline double pd_inf(void) { return pd_dbl(0x7ff0000000000000ull); }

/* 1.5 * 2^52: for |v| < 2^51, (v + S52) - S52 is v rounded to an integer, held in the sum's low bits. */
#define PD_S52 0x1.8p52
#endif
