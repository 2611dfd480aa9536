/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Data from the IBM Accurate Mathematical Library in glibc (see THIRD_PARTY_NOTICES.md). */
/* Data of the large-argument reduction of sin and cos (docs/numerics-elementary.md §6.5).
 *
 * D_2pi: 2/pi written in base 2^24: 2/pi = sum over j >= 0 of D_2pi[j] * 2^(-24 (j + 1)),
 *   each D_2pi[j] an integer in [0, 2^24) held exactly as a double; 75 digits = 1800 bits,
 *   enough for every finite double.
 * half_pi_27: pi/2 ~ G1 + G2, heads of 26 and 23 significant bits (their products with the
 *   26-bit halves of §6.5 B4 are exact); G2 differs in its last bits from M2 of
 *   sincos_table.c (a different split).
 * The digits of 2/pi are a mathematical fact; this base-2^24 layout and the G1/G2 split are
 * those of the IBM Accurate Mathematical Library (glibc sysdeps/ieee754/dbl-64/branred.h).
 * How they reached pydepth: carried over from the data files of pydepth's previous
 * implementation of this function; tools/check_table_facts.py recomputes what is a fact.
 * See docs/provenance.md. */
#include "tables.h"

const double pd_D_2pi[PD_D_2PI_N] = {
    10680707.0, 7228996.0,  1387004.0,  2578385.0,  16069853.0, 12639074.0, 9804092.0,
    4427841.0,  16666979.0, 11263675.0, 12935607.0, 2387514.0,  4345298.0,  14681673.0,
    3074569.0,  13734428.0, 16653803.0, 1880361.0,  10960616.0, 8533493.0,  3062596.0,
    8710556.0,  7349940.0,  6258241.0,  3772886.0,  3769171.0,  3798172.0,  8675211.0,
    12450088.0, 3874808.0,  9961438.0,  366607.0,   15675153.0, 9132554.0,  7151469.0,
    3571407.0,  2607881.0,  12013382.0, 4155038.0,  6285869.0,  7677882.0,  13102053.0,
    15825725.0, 473591.0,   9065106.0,  15363067.0, 6271263.0,  9264392.0,  5636912.0,
    4652155.0,  7056368.0,  13614112.0, 10155062.0, 1944035.0,  9527646.0,  15080200.0,
    6658437.0,  6231200.0,  6832269.0,  16767104.0, 5075751.0,  3212806.0,  1398474.0,
    7579849.0,  6349435.0,  12618859.0, 4703257.0,  12806093.0, 14477321.0, 2786137.0,
    12875403.0, 9837734.0,  14528324.0, 13719321.0, 343717.0
};

const double pd_half_pi_27[2] = {0x1.921fb58000000p0, -0x1.dde9740000000p-27};
