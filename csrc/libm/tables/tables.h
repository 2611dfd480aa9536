/* SPDX-License-Identifier: MIT */
/* The numbers of pydepth's elementary functions: tables and coefficients, as data (each file
 * says what the numbers are and where they were published, and carries its data's licence;
 * docs/numerics-elementary.md names them with the same symbols, THIRD_PARTY_NOTICES.md lists
 * each file's origin, docs/provenance.md how the numbers reached pydepth). */
#ifndef PD_LIBM_TABLES_H
#define PD_LIBM_TABLES_H
#include <stdint.h>

#define PD_T_EXP_N 128 /* T_exp: 2^(i/128), i = 0..127 */
#define PD_T_LOG_N 128 /* T_log: subintervals of [0x1.6p-1, 0x1.6p0) */
#define PD_T_POW_N 128 /* T_pow: subintervals of [0x1.69555p-1, 0x1.69555p0) */
#define PD_T_SC_N 110  /* T_sc: sin and cos at j/128, j = 0..109 */
#define PD_D_2PI_N 75  /* D_2pi: base-2^24 digits of 2/pi */

typedef struct { double rc, lc; } pd_log_pair;              /* rc ~ 1/c, lc ~ log c */
typedef struct { double rc, lc, lt; } pd_pow_triple;      /* rc ~ 1/c, lc + lt ~ log c */

/* exp (§2) */
extern const uint64_t pd_T_exp[2 * PD_T_EXP_N]; /* (t_i bits, s_i bits) for i = 0..127 */
extern const double pd_C_exp[4];                /* C2, C3, C4, C5 */
extern const double pd_exp_inv_ln2_n, pd_exp_neg_ln2_n_hi, pd_exp_neg_ln2_n_lo;

/* log (§3) and pow (§4) */
extern const pd_log_pair pd_T_log[PD_T_LOG_N];
extern const double pd_A_log[5];  /* A0..A4 */
extern const double pd_B_log[11]; /* B0..B10 */
extern const double pd_log_ln2_hi, pd_log_ln2_lo;
extern const pd_pow_triple pd_T_pow[PD_T_POW_N];
extern const double pd_A_pow[7]; /* A0..A6 */

/* log1p (§5) */
extern const double pd_C_log1p[7]; /* C1..C7 */
extern const double pd_log1p_ln2_hi, pd_log1p_ln2_lo;

/* sin and cos (§6) */
extern const double pd_T_sc[4 * PD_T_SC_N]; /* (sin_hi, sin_lo, cos_hi, cos_lo) at j/128 */
extern const double pd_P_sin[5];            /* P1..P5 */
extern const double pd_S_sin[2];            /* S3, S5 */
extern const double pd_S_cos[3];            /* S2, S4, S6 */
extern const double pd_half_pi[2];          /* H0, H1 */
extern const double pd_half_pi_4[4];        /* M1, M2, M3, M4 */
extern const double pd_two_over_pi;
extern const double pd_D_2pi[PD_D_2PI_N];
extern const double pd_half_pi_27[2];       /* G1, G2 */

#endif
