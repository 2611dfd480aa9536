/* The reduction and polynomial shared by exp and pow (internal to csrc/libm).
 * exp(x) = 2^(k/N) * exp(r) with k = round(x * N/ln2), r = x - k*ln2/N, |r| <= ln2/2N;
 * 2^(k/N) = scale * (1 + tail) from pd_exp_table, exp(r) - 1 ~ r + C2 r^2 + ... + C5 r^5. */
#ifndef PD_EXP_CORE_H
#define PD_EXP_CORE_H
#include "pd_libm_bits.h"
#include "pd_libm_data.h"
#include "exp.h"

#define PD_EXP_INV_LN2_N 0x1.71547652b82fep+7
#define PD_EXP_NEG_LN2_HI_N -0x1.62e42fefa0000p-8 /* k * this is exact for |k| < 2^19 */
#define PD_EXP_NEG_LN2_LO_N -0x1.cf79abc9e3b3ap-47
#define PD_EXP_SHIFT 0x1.8p52 /* adding it rounds to an integer held in the low bits */
#define PD_EXP_C2 0x1.ffffffffffdbdp-2
#define PD_EXP_C3 0x1.555555555543cp-3
#define PD_EXP_C4 0x1.55555cf172b91p-5
#define PD_EXP_C5 0x1.1111167a4d017p-7

typedef struct {
    double tmp;     /* tail + (exp(r) - 1) */
    uint64_t sbits; /* bits of scale, exponent possibly out of range */
    uint64_t ki;    /* k in the low bits (two's complement) */
} pd_exp_reduced;

/* The fused operations (x*InvLn2N + Shift, both k*ln2 terms, the polynomial's multiply-adds)
 * are the ones the reference build fuses. xtail is pow's extra low part (0 for exp). */
PD_LIBM_INLINE pd_exp_reduced pd_exp_reduce(int hw, double x, double xtail, int has_tail,
                                           uint64_t sign_bias) {
    pd_exp_reduced o;
    const double shifted = pd_fma(hw, PD_EXP_INV_LN2_N, x, PD_EXP_SHIFT);
    const double kd = shifted - PD_EXP_SHIFT;
    o.ki = pd_bits(shifted);
    double r = pd_fma(hw, kd, PD_EXP_NEG_LN2_HI_N, x);
    r = pd_fma(hw, kd, PD_EXP_NEG_LN2_LO_N, r);
    if (has_tail) r = r + xtail;
    const uint64_t idx = 2 * (o.ki % PD_EXP_N);
    const uint64_t top = (o.ki + sign_bias) << (52 - 7);
    const double tail = pd_from_bits(pd_exp_table[idx]);
    o.sbits = pd_exp_table[idx + 1] + top;
    const double r2 = r * r;
    const double p23 = pd_fma(hw, r, PD_EXP_C3, PD_EXP_C2);
    const double p45 = pd_fma(hw, r, PD_EXP_C5, PD_EXP_C4);
    const double lead = tail + r;
    o.tmp = pd_fma(hw, r2 * r2, p45, pd_fma(hw, r2, p23, lead));
    return o;
}

#endif
