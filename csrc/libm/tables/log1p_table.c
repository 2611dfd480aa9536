/* SPDX-License-Identifier: SunPro */
/* Data from Sun Microsystems' fdlibm 5.3, s_log1p.c (see THIRD_PARTY_NOTICES.md). */
/* Data of log1p (docs/numerics-elementary.md §5).
 *
 * C_log1p: coefficients C1..C7 of the polynomial psi(z) = C1 z + C2 z^2 + ... + C7 z^7 in
 *   z = s^2, s = f / (2 + f), for log(1 + f) = f - f^2/2 + s (f^2/2 + psi(s^2)),
 *   |s| <= 0.1716 (log((1 + s)/(1 - s)) = 2s + 2s^3/3 + ..., as a minimax fit).
 * ln2 = ln2_hi + ln2_lo with ln2_hi having 32 significant bits (k * ln2_hi exact for |k| < 2^20).
 * Where the values come from: the coefficients Lp1..Lp7 and ln2_hi, ln2_lo of the log1p of
 * Sun's fdlibm 5.3 (s_log1p.c; the same numbers as fdlibm's e_log.c Lg1..Lg7), also shipped in
 * the GNU C Library; the coefficients are Sun's minimax fit.
 * How they reached pydepth: carried over from the data files of pydepth's previous
 * implementation of this function; tools/check_table_facts.py recomputes what is a fact.
 * See docs/provenance.md. */
#include "tables.h"

const double pd_C_log1p[7] = {0x1.5555555555593p-1, 0x1.999999997fa04p-2, 0x1.2492494229359p-2,
                              0x1.c71c51d8e78afp-3, 0x1.7466496cb03dep-3, 0x1.39a09d078c69fp-3,
                              0x1.2f112df3e5244p-3};

const double pd_log1p_ln2_hi = 0x1.62e42fee00000p-1;
const double pd_log1p_ln2_lo = 0x1.a39ef35793c76p-33;
